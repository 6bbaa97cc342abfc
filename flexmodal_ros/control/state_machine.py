"""The modes of the fail-safe policy and their transitions (ROS-free): the rows of the policy table
of :mod:`.failsafe` that change the mode.

:class:`ModeMachine` keeps the mode (:class:`~.law.Mode`), the hold position and its reference in
the control law (the hold law (2.2)-(2.3) at ``hold_q``), and the queue of ``events`` (one line per
mode change, abort or cancelled excitation). It is driven by
:class:`~.failsafe.FailSafeController`: :meth:`on_sample` after each taken sample, :meth:`follow`
and :meth:`excite_cycle` in each cycle, :meth:`on_stale` from the watchdog and
:meth:`on_nonfinite` when the law's result is not finite. Leaving HOLD, or any abort, cancels the
excitation (:class:`~.excitation.ExcitationSchedule`); an abort drops the reference
(:class:`~.admission.TrackedReference`).
"""
import numpy as np

from ..flexible_joint.linear_model import setpoint_reference
from .law import Mode


class ModeMachine:
    """Modes and transitions for ``model`` (with the gains in use; :meth:`set_model` when they
    change) running ``law`` (:class:`~.law.ControlLaw`), with the controller's ``excitation``
    schedule and ``reference``; ``data`` the model's work buffers."""

    def __init__(self, model, data, law, excitation, reference):
        self.model, self.data, self.law = model, data, law
        self.excitation, self.reference = excitation, reference
        self.mode = Mode.WAITING
        self.events = []
        self.hold_q = None

    def set_model(self, model):
        """New gains: the hold reference follows from the next cycle."""
        self.model = model
        if self.hold_q is not None:
            self.law.r_hold[:] = setpoint_reference(model, self.data, self.hold_q)

    def on_sample(self, s, previous, outside, advanced, recovering):
        """Transitions after taking sample ``s`` (the one before: ``previous``; ``outside``: its
        limit violation or ""; ``advanced``: its stamp advanced; ``recovering``: the recovery move
        is the reference)."""
        if self.mode in (Mode.WAITING, Mode.STALE):
            if advanced:                                   # out of STALE only with a new stamp
                self.enter_hold(s.q, f"valid joint state at t={s.t:.4f} s", outside=outside)
        elif outside and self.mode != Mode.OUT_OF_LIMITS and not recovering:
            self.enter_hold(s.q, f"joint state at t={s.t:.4f} s", abort=True, outside=outside)
        elif not outside and self.mode == Mode.OUT_OF_LIMITS:
            self.enter_hold(s.q, f"back inside the limits at t={s.t:.4f} s")
        elif s.t < previous.t:
            self.enter_hold(s.q, f"joint-state time went backwards ({previous.t:.4f} -> "
                                 f"{s.t:.4f} s): trajectory aborted", abort=True, outside=outside)

    def follow(self, t, caught_up=True):
        """The reference at sample time ``t`` [s]: started (TRACKING) once its start time is
        reached — a "start now" one at the first sample that is ``caught_up``
        (:attr:`~.measured.MeasuredState.caught_up`) —, its segment loaded into the law while it
        runs, HOLD at its last waypoint once it has finished."""
        traj = self.reference.current
        if traj is None or t < traj.t0:
            return
        if traj.start_now and self.mode != Mode.TRACKING:
            if not caught_up:
                return
            self.reference.start_now(t, self.events)
        elapsed = t - traj.t0
        if elapsed >= traj.duration:
            self.enter_hold(traj.path.positions[-1], "trajectory finished", abort=True)
            return
        if self.mode != Mode.TRACKING:
            self.set_mode(Mode.TRACKING, f"tracking started at t={t:.4f} s")
        traj.load(self.law, elapsed)

    def excite_cycle(self, t, caught_up=True):
        """The excitation's torque at sample time ``t`` [s] into the law (HOLD), or its
        cancellation; a "start now" excitation starts at the first sample that is ``caught_up``."""
        if self.excitation.current is None:
            return
        if self.mode != Mode.HOLD:
            self.cancel_excitation(f"excitation cancelled: controller is {self.mode.value}")
        elif caught_up or not self.excitation.waiting_to_start_now:
            self.excitation.torque_at(t, self.law.excitation, self.events)

    def on_stale(self, why):
        """STALE (``why``: :meth:`~.measured.MeasuredState.stale_reason`): the reference aborted."""
        if self.mode != Mode.STALE:
            self.reference.current = None
            self.set_mode(Mode.STALE, f"{why}: static hold, trajectory aborted")

    def on_nonfinite(self, s, tracking):
        """A non-finite law result for sample ``s``: the excitation cancelled, TRACKING aborted to
        HOLD at the measured position (law set to the hold law). True when the hold law is worth
        evaluating again (something was removed), False for a zero-torque fault."""
        retry = tracking or self.excitation.current is not None      # an excitation runs only in HOLD
        if self.excitation.current is not None:
            self.cancel_excitation(f"excitation cancelled: non-finite torque at t={s.t:.4f} s")
        if tracking:
            self.enter_hold(s.q, f"non-finite torque from the tracking law at t={s.t:.4f} s: trajectory "
                                 "aborted", abort=True)
            self.law.tracking[0] = 0.0
        return retry

    def enter_hold(self, q, reason, abort=False, outside=""):
        """HOLD at ``q``; with ``outside`` (the limit violation of the measured state) OUT_OF_LIMITS
        instead, the trajectory aborted (hold law at ``q`` in both). An abort cancels an excitation."""
        if (abort or outside) and self.excitation.current is not None:
            self.cancel_excitation(f"excitation cancelled: {reason}")
        self.hold_q = np.array(q, dtype=float)
        self.hold_q.flags.writeable = False          # shared by the commands of the hold
        self.law.r_hold[:] = setpoint_reference(self.model, self.data, self.hold_q)
        if abort or outside:
            self.reference.current = None
        if outside:
            self.set_mode(Mode.OUT_OF_LIMITS, f"{reason}: {outside}: holding at the measured position, trajectories "
                                              "refused until it is back inside the limits (recover moves it back)")
        else:
            self.set_mode(Mode.HOLD, reason)

    def set_mode(self, mode, reason):
        if mode != Mode.HOLD and self.excitation.current is not None:
            self.cancel_excitation(f"excitation cancelled: controller is {mode.value}")
        self.mode = mode
        self.events.append(f"{mode.value}: {reason}")

    def cancel_excitation(self, reason):
        self.excitation.cancel(self.law.excitation)
        self.events.append(f"{self.mode.value}: {reason}")

"""The controller's fail-safe policy (ROS-free): the state machine of :class:`FailSafeController`.

The class keeps the modes and their transitions; each other job is a collaborator it holds:
:class:`~.law.ControlLaw` (the laws), :class:`~.measured.MeasuredState` (which samples are taken,
out of the limits, stale), :class:`~.admission.TrackedReference` (trajectory admission and the
recovery move), :class:`~.gains.ControllerSettings` (gain and limit reconfiguration, checked
before they act), :class:`~.excitation.ExcitationSchedule` (motor excitation) and
:mod:`.fast_path` (the contract of the native C cycle). The thresholds are
:class:`~.limits.SafetyLimits`.

Fail-safe policy of :class:`FailSafeController` (what the ``feedforward_pd_controller`` node runs):

=====================================================  ====================================================
situation                                              output
=====================================================  ====================================================
no valid joint state received yet                      no command (the drive keeps its own hold)
valid states, no trajectory                            HOLD: law (2.2)-(2.3) at the link position measured
                                                       when HOLD was entered
trajectory accepted, start time not reached            HOLD (unchanged; while TRACKING: the current
                                                       trajectory is replaced, HOLD at the measured
                                                       position)
trajectory active                                      TRACKING law (feedforward + PD)
trajectory finished                                    HOLD at its last waypoint
joint state with NaN/inf, wrong size, or implausible   sample rejected (InputError), no command for it;
(|velocity| > state_velocity_factor × velocity        the last valid sample stays in use
limit, |position| > STATE_BOUND)
position outside the limits (link beyond the URDF      rejected like an implausible one until such
limits ± position_margin, motor beyond them ± the      samples have come for ``state_timeout`` (a glitch
spring deflection at the effort limit)                 is not a state); then OUT_OF_LIMITS: trajectory
                                                       aborted, hold law (2.2)-(2.3) at the measured
                                                       position, trajectories refused; back inside the
                                                       limits → HOLD there. :meth:`recover`: a bounded
                                                       move (one C⁴ segment within the speed and
                                                       acceleration limits) to the nearest position
                                                       RECOVERY_INSET inside the limits, tracked like a
                                                       trajectory (samples outside accepted meanwhile)
no valid joint state for more than ``state_timeout``   STALE: trajectory aborted, constant static torque
(steady clock), or joint-state stamps not advancing    W⁻¹(g(q) − Jᵀ(q) τ_ext) at the last valid position
for that long (frozen stamp)                           (the feed-through term of (2.2); no feedback on
                                                       stale data); valid states with an advancing stamp
                                                       again → HOLD there
joint-state time going backwards (simulator reset)     trajectory aborted, HOLD at the new position
bad trajectory (empty, wrong sizes, NaN/inf, times     rejected with an InputError naming the field;
not strictly increasing, outside the position limits,  the current mode continues
segment speed or acceleration above the limits, more
than max_trajectory_points, longer than
max_trajectory_duration, first waypoint far from the
measured position, start in the past or more than
max_start_delay ahead, no joint state, out of limits)
non-finite result of the law (torque or reference)     TRACKING: trajectory aborted, HOLD at the measured
                                                       position (law evaluated again); non-finite in
                                                       HOLD: zero torque (no torque rather than an
                                                       undefined one); reported in ``events``
torque beyond the URDF effort limit                    clipped to ±limit; saturated joints reported
                                                       in :class:`Command` and counted
motor excitation (:meth:`FailSafeController.excite`:   accepted only in HOLD, one at a time, within
pulse or chirp, flexmodal_ros/control/excitation.py)   the amplitude and duration bounds; added to the
                                                       hold law's torque before the saturation (so
                                                       clipped like any command); cancelled when the
                                                       mode leaves HOLD or a fault aborts
=====================================================  ====================================================

Limits (:class:`SafetyLimits`): velocity limits from the URDF (``DEFAULT_VELOCITY_LIMIT`` where it
gives none) times ``velocity_scale``, or given per joint; acceleration limits given per joint, or
``ACCELERATION_PER_VELOCITY`` × the velocity limit. A C⁴ segment (4.29) from q_a to q_b in T
peaks at |q̇| = η'_max |q_b − q_a| / T and |q̈| = η''_max |q_b − q_a| / T² (η'_max = 630/256,
η''_max ≈ 9.372). Gains and limits can change between cycles (:meth:`FailSafeController.configure`).
"""
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import BuildError, InputError
from ..core.validation import positive
from ..robot.model import create_data
from .admission import AdmittedTrajectory, TrackedReference
from .excitation import ExcitationSchedule
from .fast_path import SteadyCycle, steady_cycle
from .gains import configured
from .law import Command, ControlLaw, JointSample, Mode, static_hold_torque
from .limits import RECOVERY_INSET, SafetyLimits
from .measured import MeasuredState
from .state_machine import ModeMachine

__all__ = ["Counters", "FailSafeController", "SteadyCycle", "failsafe_controller"]


@dataclass
class Counters:
    """Cycle, rejection and saturation counts since start (for reports and statistics)."""
    cycles: int = 0
    rejected_samples: int = 0
    rejected_trajectories: int = 0
    saturated_cycles: int = 0
    saturated_per_joint: list = field(default_factory=list)

    def count(self, saturated, unsaturated):
        """One more cycle, with its ``saturated`` joints (``unsaturated``: the shared all-False mask)."""
        self.cycles += 1
        if saturated is not unsaturated and saturated.any():
            self.saturated_cycles += 1
            for i in np.flatnonzero(saturated):
                self.saturated_per_joint[i] += 1


def _from(part, name, doc=None):
    """Read-only attribute ``name`` of the controller's collaborator ``part`` (attribute name)."""
    return property(lambda self: getattr(getattr(self, part), name), doc=doc or f"``{part}.{name}``.")


def _setting(name):
    """Read-only attribute ``name`` of the controller's :class:`~.gains.ControllerSettings`."""
    return _from("settings", name, f"``{name}`` of the current :class:`~.gains.ControllerSettings`.")


class FailSafeController:
    """Tracking and hold laws behind the fail-safe policy of the module docstring.

    Use: :meth:`update_state` with each joint-state sample (``received`` = steady-clock receipt time
    [s]), then :meth:`compute` for the command of that sample; call :meth:`watchdog` periodically
    with the steady-clock time to get the STALE command when states stop. :meth:`set_trajectory`
    accepts a reference. Events (mode changes, aborts) are queued in ``events`` for the caller to
    log/publish. ``shaper``: None, or a callable mapping each accepted
    :class:`~flexmodal_ros.robot.trajectory.PiecewiseC4Trajectory` to the reference actually tracked
    (e.g. :class:`flexmodal_ros.shaping.ReferenceShaper`: input shaping). Not thread-safe:
    serialize calls.
    """
    model, limits, admission = _setting("model"), _setting("limits"), _setting("admission")
    velocity_limit, acceleration_limit = _setting("velocity_limit"), _setting("acceleration_limit")
    state_timeout, start_tolerance = _setting("state_timeout"), _setting("start_tolerance")

    def __init__(self, model, use_feedforward=True, state_timeout=0.05, start_tolerance=0.05,
                 compiled=True, cache=None, limits=SafetyLimits(), controller_rate_hz=None):
        self.law = ControlLaw(model, compiled, cache)
        self.controller_rate_hz = None if controller_rate_hz is None else float(positive(controller_rate_hz, "controller_rate_hz"))
        self.use_feedforward = use_feedforward
        self.data = create_data(model)
        self.counters = Counters(saturated_per_joint=[0] * model.n)
        self.measured = MeasuredState(model)
        self.reference = TrackedReference(self.counters)
        self._excitation = ExcitationSchedule(model)     # motor excitation: bounds, scheduled/running
        self.machine = ModeMachine(model, self.data, self.law, self._excitation, self.reference)
        self.settings = configured(None, model, self.data, np.zeros(model.n), limits=limits,
                                   state_timeout=state_timeout, start_tolerance=start_tolerance)
        self.measured.set_bounds(self.settings.state_bounds)
        self._unsaturated = np.zeros(model.n, dtype=bool)
        self._unsaturated.flags.writeable = False
        self.shaper = None

    @property
    def use_feedforward(self):
        """Tracking law with the feedforward (True) or PD only on the geared link reference (False)."""
        return bool(self.law.use_feedforward[0])

    @use_feedforward.setter
    def use_feedforward(self, value):
        self.law.use_feedforward[0] = bool(value)

    def configure(self, kp=None, kd=None, limits=None, state_timeout=None, start_tolerance=None):
        """Change gains (scalar or n values [N·m/rad], [N·m·s/rad]), :class:`SafetyLimits`, state_timeout [s]
        and start_tolerance; None keeps the current value. All is checked before anything changes
        (:func:`~.gains.configured`, InputError naming the field; the loop linearized at the last measured
        position, zeros before the first sample, and sampled at ``controller_rate_hz`` if given). New
        gains act from the next cycle (law and hold reference); limits from the next sample and trajectory."""
        s = self.measured.sample
        q = s.q if s is not None else np.zeros(self.model.n)
        old, self.settings = self.settings, configured(self.settings, None, self.data, q, kp, kd, limits,
                                                       state_timeout, start_tolerance, self.controller_rate_hz)
        self.measured.set_bounds(self.settings.state_bounds)
        if self.model is not old.model:
            self.law.set_gains(self.model.kp, self.model.kd)
            self.machine.set_model(self.model)

    state_bounds = _from("measured", "state_bounds", "State bounds (lo, hi) (4n,) in use.")
    plausible_bounds = _from("measured", "plausible_bounds", "Plausibility bounds (lo, hi) (4n,) in use.")
    last_sample = _from("measured", "sample", "The last valid :class:`JointSample` (None before the first).")
    advanced = _from("measured", "advanced", "Steady-clock time [s] of the last sample whose stamp advanced "
                     "(None before the first): :meth:`watchdog` commands once ``now`` is state_timeout past it.")
    _trajectory = _from("reference", "current", "The current reference (or None).")
    mode = _from("machine", "mode", "The current :class:`Mode`.")
    events = _from("machine", "events", "Queued event lines, oldest first (the caller pops them).")
    _hold_q = _from("machine", "hold_q", "The hold position (read-only array, or None).")

    def steady_cycle(self):
        """The conditions of a steady next cycle, or None (:func:`~.fast_path.steady_cycle`)."""
        return steady_cycle(self.mode, self.measured.sample, self.reference.current, self._excitation.current)

    def adopt_steady_cycles(self, t, q, qd, q_m, qd_m, received, count):
        """Take over ``count`` steady cycles (:mod:`.fast_path`) run outside this object, the
        last with sample (t, q, q̇, q_m, q̇_m) received at steady time ``received`` [s] (arrays
        the caller will not modify)."""
        self.measured.adopt(JointSample(t, q, qd, q_m, qd_m), received)
        self.counters.cycles += count

    def update_state(self, sample, received, validated=False):
        """Accept a measured sample (InputError naming the field if it is not finite / wrong size,
        implausible, or outside the limits for less than state_timeout: see the policy table).

        ``validated=True``: the sample's time is a finite float and its vectors are finite float
        arrays of length n within :attr:`plausible_bounds` that the caller will not modify (e.g.
        from :class:`~flexmodal_ros.nodes.conversions.JointStateReader`, which checks exactly
        that): taken as is, without the copy and the second check (1 kHz path)."""
        recovering = self.reference.recovering()
        try:
            previous, outside, advanced = self.measured.take(sample, float(received), validated, self.machine.mode,
                                                             recovering, self.settings.state_timeout)
        except InputError:
            self.counters.rejected_samples += 1
            raise
        self.machine.on_sample(self.measured.sample, previous, outside, advanced, recovering)

    def recover(self):
        """Out of the limits (OUT_OF_LIMITS): make the bounded recovery move the reference — one
        C⁴ segment to the nearest position RECOVERY_INSET inside the URDF limits
        (:meth:`~.admission.TrackedReference.recovery_move`). Returns a one-line description;
        InputError in any other mode."""
        return self.reference.recovery_move(self.mode, self.measured.sample, self.admission, RECOVERY_INSET)

    def set_trajectory(self, times, positions, start_time=None, now=None, velocities=None, accelerations=None):
        """Accept a link reference: waypoint ``times`` [s] from the start and ``positions`` (m, n) in
        URDF order, ``start_time`` [s] on the joint-state clock (None = now, estimated with ``now``
        on the clock of :meth:`update_state`'s ``received``), optional sampled ``velocities`` and
        ``accelerations`` (m, n) (:class:`~.admission.TrackedReference` says what each means).
        Returns a one-line description; InputError naming the field otherwise. The three steps
        :meth:`check_trajectory`, :meth:`shape_trajectory` and :meth:`accept_trajectory` in one call."""
        return self.accept_trajectory(self.shape_trajectory(
            self.check_trajectory(times, positions, start_time, now, velocities, accelerations)))

    def check_trajectory(self, times, positions, start_time=None, now=None, velocities=None,
                         accelerations=None) -> AdmittedTrajectory:
        """Step 1 of :meth:`set_trajectory`: the checked reference, not yet shaped (reads the last
        sample). InputError (counted as a rejected trajectory) naming the field."""
        m = self.measured
        return self.reference.check(self.mode, m.sample, m.received, self.admission, times, positions,
                                    start_time, now, velocities, accelerations)

    def shape_trajectory(self, traj: AdmittedTrajectory) -> AdmittedTrajectory:
        """Step 2: ``traj`` through :attr:`shaper` (None: unchanged). Reads nothing the control
        cycles change, so it may run while they go on (the controller node does: the shaping takes
        a while). InputError (counted) when the shaper refuses the path."""
        return self.reference.shape(traj, self.shaper)

    def accept_trajectory(self, traj: AdmittedTrajectory) -> str:
        """Step 3: ``traj`` becomes the reference (see :meth:`set_trajectory`); InputError
        (counted) if the joint states were lost since step 1."""
        self.reference.ready(self.mode, self.measured.sample)
        if self.mode == Mode.TRACKING:
            self.machine.enter_hold(self.measured.sample.q, "new trajectory accepted: the current one is replaced")
        self.reference.current = traj
        return self.reference.describe(traj)

    excitation_limit = _from("_excitation", "limit", "Bound of :meth:`excite`'s amplitudes [N·m] per joint.")
    excitation_max_duration = _from("_excitation", "max_duration", "Bound of :meth:`excite`'s duration [s].")
    excitation = _from("_excitation", "current", "The scheduled or running excitation (absolute start once "
                       "started), or None.")

    def set_excitation_limits(self, torque=None, duration=None):
        """Bounds of :meth:`excite` (:meth:`~.excitation.ExcitationSchedule.set_limits`)."""
        self._excitation.set_limits(self.model.n, torque, duration)

    def excite(self, excitation, start_now=True):
        """Schedule a motor excitation (:class:`~flexmodal_ros.control.excitation.MotorExcitation`)
        added to the hold law's torque before the saturation, from the first cycle that runs it
        (``start_now``) or from ``excitation.start`` on the joint-state clock
        (:meth:`~.excitation.ExcitationSchedule.schedule`). Only in HOLD; cancelled (event) when
        the controller leaves HOLD or a fault aborts. One-line description, or InputError."""
        if self.measured.sample is None or self.mode != Mode.HOLD:
            raise InputError(f"excitation: only while holding (controller is {self.mode.value})")
        return self._excitation.schedule(self.model, excitation, start_now, self.measured.sample.t)

    def compute(self):
        """Command for the last valid sample (None in WAITING or STALE)."""
        s, machine, law = self.measured.sample, self.machine, self.law
        if s is None or machine.mode in (Mode.WAITING, Mode.STALE):
            return None
        if self.reference.current is not None:
            machine.follow(s.t, self.measured.caught_up)
        if self._excitation.current is not None:
            machine.excite_cycle(s.t, self.measured.caught_up)
        tracking = machine.mode == Mode.TRACKING
        if not law.evaluate(tracking, s.q_m, s.qd_m):
            return self._nonfinite_command(tracking)
        return self._finish(law.q_ref.copy() if tracking else machine.hold_q)

    def _nonfinite_command(self, tracking):
        """Fail-safe for a non-finite law result (module docstring): HOLD at the measured position
        when tracking, zero torque when the hold law itself is not finite."""
        s, law = self.measured.sample, self.law
        if self.machine.on_nonfinite(s, tracking):     # the hold law again, without what failed
            law.run()
            if not law.n_nonfinite[0]:
                return self._finish(self._hold_q)
        self.events.append(f"fault: non-finite torque from the hold law at t={s.t:.4f} s: zero torque")
        return self._command(np.zeros(self.model.n), self._unsaturated, self._hold_q)

    def watchdog(self, now):
        """STALE command if no valid sample arrived for more than state_timeout before steady time
        ``now`` [s], else None."""
        why = self.measured.stale_reason(now, self.state_timeout)
        if not why:
            return None
        self.machine.on_stale(why)
        q = self.measured.sample.q
        return self._command(*static_hold_torque(self.model, self.data, q), q)

    def _finish(self, q_ref):
        """Command from the control law's outputs (copied)."""
        law = self.law
        saturated = law.saturated > 0.5 if law.n_saturated[0] else self._unsaturated
        return self._command(law.tau.copy(), saturated, q_ref)

    def _command(self, tau, saturated, q_ref):
        """Command of this cycle, counted with its saturated joints."""
        self.counters.count(saturated, self._unsaturated)
        return Command(tau, self.machine.mode, saturated, q_ref)


def failsafe_controller(model, warn, controller_rate_hz=None):
    """The :class:`FailSafeController` of ``model`` (gain changes checked at ``controller_rate_hz``)
    with the generated law compiled (user code generation, cached:
    flexmodal_ros/robot/inverse_dynamics/build.py); without a C compiler or a writable cache, the
    same law on CasADi's virtual machine, after ``warn(text)`` saying why and what it costs."""
    try:
        return FailSafeController(model, controller_rate_hz=controller_rate_hz)
    except BuildError as exc:
        warn(f"control law: cannot compile it ({exc}); evaluating it with CasADi's virtual machine instead: "
             "~25x the compiled law's time per cycle (~0.1 ms instead of ~4 us), and every cycle runs in "
             "Python (no native_cycle)")
        return FailSafeController(model, compiled=False, controller_rate_hz=controller_rate_hz)

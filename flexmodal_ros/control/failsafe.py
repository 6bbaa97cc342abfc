"""The controller's fail-safe policy (ROS-free): the state machine of :class:`FailSafeController`.

It runs the laws of :mod:`.law`, admits references through :mod:`.admission` and changes gains
through :mod:`.gains`; the thresholds are :class:`~.limits.SafetyLimits`.

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
(position beyond the URDF limits ± position_margin,    the last valid sample stays in use
motor position beyond them ± the spring deflection at
the effort limit, |velocity| > state_velocity_factor
× velocity limit)
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
measured position, start in the past, no joint state)
non-finite result of the law (torque or reference)     TRACKING: trajectory aborted, HOLD at the measured
                                                       position (law evaluated again); non-finite in
                                                       HOLD: zero torque (no torque rather than an
                                                       undefined one); reported in ``events``
torque beyond the URDF effort limit                    clipped to ±limit; saturated joints reported
                                                       in :class:`Command` and counted
=====================================================  ====================================================

Limits (:class:`SafetyLimits`): velocity limits from the URDF (``DEFAULT_VELOCITY_LIMIT`` where it
gives none) times ``velocity_scale``, or given per joint; acceleration limits given per joint, or
``ACCELERATION_PER_VELOCITY`` × the velocity limit. A C⁴ segment (4.29) from q_a to q_b in T
peaks at |q̇| = η'_max |q_b − q_a| / T and |q̈| = η''_max |q_b − q_a| / T² (η'_max = 630/256,
η''_max ≈ 9.372). Gains and limits can change between cycles (:meth:`FailSafeController.configure`).
"""
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.linear_model import setpoint_reference, static_compensation
from ..robot.model import create_data
from .admission import AdmittedTrajectory, TrajectoryAdmission
from .gains import checked_gains
from .law import Command, ControlLaw, JointSample, Mode, saturate
from .limits import SafetyLimits, implausible_state


@dataclass
class Counters:
    """Cycle, rejection and saturation counts since start (for reports and statistics)."""
    cycles: int = 0
    rejected_samples: int = 0
    rejected_trajectories: int = 0
    saturated_cycles: int = 0
    saturated_per_joint: list = field(default_factory=list)


class SteadyCycle(NamedTuple):
    """What makes the next sample's cycle steady (:meth:`FailSafeController.steady_cycle`):
    its stamp after ``previous_t`` [s]; ``tracking`` False (HOLD): before ``hold_until`` [s];
    True (TRACKING): ``segment_begin`` <= t − ``t0`` < ``segment_end`` [s]."""
    previous_t: float
    tracking: bool
    hold_until: float = math.inf
    t0: float = 0.0
    segment_begin: float = 0.0
    segment_end: float = 0.0


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

    def __init__(self, model, use_feedforward=True, state_timeout=0.05, start_tolerance=0.05,
                 compiled=True, cache=None, limits=SafetyLimits()):
        self.model = model
        self.law = ControlLaw(model, compiled, cache)
        self.use_feedforward = use_feedforward
        self.data = create_data(model)
        self.mode = Mode.WAITING
        self.events = []
        self.counters = Counters(saturated_per_joint=[0] * model.n)
        self._sample = None
        self._received = None
        self._advanced = None          # steady time of the last sample whose stamp advanced
        self._hold_q = None
        self._trajectory = None
        self.state_timeout = self.start_tolerance = None
        self.configure(limits=limits, state_timeout=state_timeout, start_tolerance=start_tolerance)
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
        """Change gains (scalar or n values [N·m/rad], [N·m·s/rad]), :class:`SafetyLimits`,
        state_timeout [s] and start_tolerance; None keeps the current value. Everything is checked
        before anything changes (InputError naming the field): finite gains, kp > 0, kd >= 0, and
        a closed loop linearized at the last measured position (zeros before the first sample)
        that stays asymptotically stable with them (modal analysis (2.14)). New gains act from the
        next cycle (law and hold reference); limits from the next sample and trajectory."""
        timeout = self.state_timeout if state_timeout is None else state_timeout
        tolerance = self.start_tolerance if start_tolerance is None else start_tolerance
        if not timeout > 0:
            raise InputError(f"state_timeout: must be > 0 s, got {timeout}")
        if not tolerance > 0:
            raise InputError(f"start_tolerance: must be > 0, got {tolerance}")
        limits = self.limits if limits is None else limits
        velocity, acceleration, bounds = limits.resolved(self.model)
        q = self._sample.q if self._sample is not None else np.zeros(self.model.n)
        model = checked_gains(self.model, self.data, kp, kd, q)
        self.limits, self.velocity_limit, self.acceleration_limit = limits, velocity, acceleration
        self.admission = TrajectoryAdmission(model, limits, velocity, acceleration, float(tolerance))
        self.state_bounds = bounds
        self.state_timeout, self.start_tolerance = float(timeout), float(tolerance)
        if model is not self.model:
            self.model = model
            self.law.set_gains(model.kp, model.kd)
            if self._hold_q is not None:
                self.law.r_hold[:] = setpoint_reference(model, self.data, self._hold_q)

    @property
    def last_sample(self):
        """The last valid :class:`JointSample` (None before the first)."""
        return self._sample

    @property
    def advanced(self):
        """Steady-clock time [s] of the last sample whose stamp advanced (None before the first):
        :meth:`watchdog` gives a command once ``now`` is more than state_timeout after it."""
        return self._advanced

    def steady_cycle(self):
        """The conditions under which the next sample's cycle changes nothing but the sample, the
        receipt time and the cycle count, or None when any sample may change more (WAITING, STALE,
        TRACKING a shaped (explicit) reference, no segment loaded).

        A sample meeting them — stamp after ``previous_t``; finite and within :attr:`state_bounds`;
        in HOLD before ``hold_until``, in TRACKING inside the loaded segment — whose law result
        (q_m, q̇_m into the law, and in TRACKING the phase (t − t0 − segment_begin) / T) is finite
        with no joint saturated has the same :meth:`update_state` + :meth:`compute` outcome as
        :meth:`adopt_steady_cycles` with that sample (the native cycle of the controller node:
        flexmodal_ros/nodes/native_cycle.py)."""
        s, traj = self._sample, self._trajectory
        if s is None:
            return None
        if self.mode == Mode.HOLD:
            return SteadyCycle(s.t, False, hold_until=traj.t0 if traj is not None else math.inf)
        if (self.mode == Mode.TRACKING and traj is not None and not traj.explicit and not traj.start_now
                and traj.segment_begin < traj.segment_end):
            return SteadyCycle(s.t, True, t0=traj.t0, segment_begin=traj.segment_begin,
                               segment_end=traj.segment_end)
        return None

    def adopt_steady_cycles(self, t, q, qd, q_m, qd_m, received, count):
        """Take over ``count`` steady cycles (:meth:`steady_cycle`) run outside this object, the
        last with sample (t, q, q̇, q_m, q̇_m) received at steady time ``received`` [s] (arrays
        the caller will not modify)."""
        self._sample = JointSample(t, q, qd, q_m, qd_m)
        self._received = self._advanced = received
        self.counters.cycles += count

    def update_state(self, sample, received, validated=False):
        """Accept a measured sample (InputError naming the field if it is not finite / wrong size).

        ``validated=True``: the sample's time is a finite float and its vectors are finite float
        arrays of length n that the caller will not modify (e.g. from
        :class:`~flexmodal_ros.nodes.conversions.JointStateReader`, which checks exactly that):
        taken as is, without the copy and the second check (1 kHz path)."""
        try:
            checked = sample if validated else self._checked(sample)
        except InputError:
            self.counters.rejected_samples += 1
            raise
        previous = self._sample
        self._sample, self._received = checked, float(received)
        if previous is None or checked.t != previous.t:
            self._advanced = self._received
        if self.mode in (Mode.WAITING, Mode.STALE):
            if self._advanced == self._received:          # out of STALE only with a new stamp
                self._enter_hold(checked.q, f"valid joint state at t={checked.t:.4f} s")
        elif checked.t < previous.t:
            self._enter_hold(checked.q, f"joint-state time went backwards ({previous.t:.4f} -> "
                                        f"{checked.t:.4f} s): trajectory aborted", abort=True)

    def _checked(self, sample):
        """Float copy of a sample; InputError naming the field if not finite or of the wrong size."""
        try:   # fast path (1 kHz): the four vectors in one array, one finiteness check
            block = np.array(sample[1:], dtype=float)
        except (ValueError, TypeError):
            block = None
        lo, hi = self.state_bounds
        if (block is not None and block.shape == (4, self.model.n) and math.isfinite(sample.t)
                and ((block.ravel() >= lo) & (block.ravel() <= hi)).all()):
            return JointSample(float(sample.t), *block)
        return self._checked_fields(sample)

    def _checked_fields(self, sample):
        """:meth:`_checked` field by field, for the error message naming the field."""
        n = self.model.n
        arrays = {f: np.array(getattr(sample, f), dtype=float) for f in ("q", "qd", "q_m", "qd_m")}
        for f, a in arrays.items():
            if a.shape != (n,):
                raise InputError(f"{f}: expected {n} values, got shape {a.shape}")
            if not np.isfinite(a).all():
                raise InputError(f"{f}: contains NaN or inf")
        if not np.isfinite(sample.t):
            raise InputError("t: contains NaN or inf")
        problem = implausible_state(self.model, np.concatenate(list(arrays.values())), self.state_bounds)
        if problem:
            raise InputError(problem)
        return JointSample(float(sample.t), **arrays)

    def set_trajectory(self, times, positions, start_time=None, now=None):
        """Accept a link reference: waypoint ``times`` [s] from the start (strictly increasing) and
        ``positions`` (m, n) in URDF order; ``start_time`` [s] on the joint-state clock, None = now:
        the first cycle that runs it (reported as "tracking started at t=..."); the acceptance
        message gives the estimate "last sample's time, advanced by its age when ``now`` (the clock
        of :meth:`update_state`'s ``received``) is given". A first waypoint with time > 0 is preceded by the measured
        position at time 0. A trajectory accepted while tracking another replaces it: HOLD at the
        measured position until its start. Returns a one-line description; InputError naming the
        field otherwise. The three steps :meth:`check_trajectory`, :meth:`shape_trajectory` and
        :meth:`accept_trajectory` in one call.
        """
        return self.accept_trajectory(self.shape_trajectory(self.check_trajectory(times, positions, start_time, now)))

    def check_trajectory(self, times, positions, start_time=None, now=None) -> AdmittedTrajectory:
        """Step 1 of :meth:`set_trajectory`: the checked reference, not yet shaped (reads the last
        sample). InputError (counted as a rejected trajectory) naming the field."""
        with self._counted_rejection():
            return self._check_trajectory(times, positions, start_time, now)

    def shape_trajectory(self, traj: AdmittedTrajectory) -> AdmittedTrajectory:
        """Step 2: ``traj`` through :attr:`shaper` (None: unchanged). Reads nothing the control
        cycles change, so it may run while they go on (the controller node does: the shaping takes
        tens of ms). InputError (counted) when the shaper refuses the path."""
        if self.shaper is None:
            return traj
        with self._counted_rejection():
            return AdmittedTrajectory(self.shaper(traj.path), traj.t0, traj.start_now)

    def accept_trajectory(self, traj: AdmittedTrajectory) -> str:
        """Step 3: ``traj`` becomes the reference (see :meth:`set_trajectory`); InputError
        (counted) if the joint states were lost since step 1."""
        with self._counted_rejection():
            if self._sample is None or self.mode in (Mode.WAITING, Mode.STALE):
                raise InputError(f"trajectory: no valid joint state (controller is {self.mode.value})")
        if self.mode == Mode.TRACKING:
            self._enter_hold(self._sample.q, "new trajectory accepted: the current one is replaced")
        self._trajectory = traj
        shaping = getattr(traj.path, "summary", "")
        return (f"trajectory accepted: {traj.path.times.size} waypoints, {traj.path.duration:.3f} s, "
                f"starting at t={traj.t0:.4f} s" + (f"; {shaping}" if shaping else ""))

    def compute(self):
        """Command for the last valid sample (None in WAITING or STALE)."""
        s = self._sample
        if s is None or self.mode in (Mode.WAITING, Mode.STALE):
            return None
        law, traj = self.law, self._trajectory
        if traj is not None and s.t >= traj.t0:
            if traj.start_now and self.mode != Mode.TRACKING:
                self._start_now(traj, s.t)
            t = s.t - traj.t0
            if t >= traj.duration:
                self._enter_hold(traj.path.positions[-1], "trajectory finished", abort=True)
            else:
                if self.mode != Mode.TRACKING:
                    self._set_mode(Mode.TRACKING, f"tracking started at t={s.t:.4f} s")
                traj.load(law, t)
        tracking = self.mode == Mode.TRACKING
        law.tracking[0] = tracking
        law.q_m[:] = s.q_m
        law.qd_m[:] = s.qd_m
        law.run()
        if law.n_nonfinite[0]:
            return self._nonfinite_command(tracking)
        return self._finish(law.q_ref.copy() if tracking else self._hold_q)

    def _start_now(self, traj, t):
        """A "start now" trajectory starts at the first cycle that runs it (sample time ``t``). Its
        start estimated at acceptance (last sample's time + its age) is too early when the samples
        were still behind: after a stall of this process the transport delivers the states queued
        meanwhile, and one of them may be the last sample when the trajectory is accepted; starting
        at that estimate would begin mid-trajectory."""
        if t - traj.t0 > 1e-3:
            self.events.append(f"trajectory start moved from t={traj.t0:.4f} s to t={t:.4f} s: the joint "
                               f"states were behind when it was accepted")
        traj.t0, traj.start_now = t, False

    def _nonfinite_command(self, tracking):
        """Fail-safe for a non-finite law result (module docstring): HOLD at the measured position
        when tracking, zero torque when the hold law itself is not finite."""
        s, law = self._sample, self.law
        if tracking:
            self._enter_hold(s.q, f"non-finite torque from the tracking law at t={s.t:.4f} s: trajectory "
                                  "aborted", abort=True)
            law.tracking[0] = 0.0
            law.run()
            if not law.n_nonfinite[0]:
                return self._finish(self._hold_q)
        self.events.append(f"fault: non-finite torque from the hold law at t={s.t:.4f} s: zero torque")
        return self._command(np.zeros(self.model.n), self._unsaturated, self._hold_q)

    def watchdog(self, now):
        """STALE command if no valid sample arrived for more than state_timeout before steady time
        ``now`` [s], else None."""
        if self._sample is None or now - self._advanced <= self.state_timeout:
            return None
        if self.mode != Mode.STALE:
            self._trajectory = None
            if now - self._received <= self.state_timeout:
                why = (f"joint-state stamp frozen at t={self._sample.t:.4f} s for {now - self._advanced:.3f} s "
                       f"(> {self.state_timeout:g} s)")
            else:
                why = f"no valid joint state for {now - self._received:.3f} s (> {self.state_timeout:g} s)"
            self._set_mode(Mode.STALE, f"{why}: static hold, trajectory aborted")
        q = self._sample.q
        tau, saturated = saturate(static_compensation(self.model, self.data, q) / self.model.W,
                                  self.model.effort_limit)
        return self._command(tau, saturated, q)

    def _finish(self, q_ref):
        """Command from the control law's outputs (copied)."""
        law = self.law
        saturated = law.saturated > 0.5 if law.n_saturated[0] else self._unsaturated
        return self._command(law.tau.copy(), saturated, q_ref)

    def _command(self, tau, saturated, q_ref):
        """Command of this cycle, counted with its saturated joints."""
        c = self.counters
        c.cycles += 1
        if saturated is not self._unsaturated and saturated.any():
            c.saturated_cycles += 1
            for i in np.flatnonzero(saturated):
                c.saturated_per_joint[i] += 1
        return Command(tau, self.mode, saturated, q_ref)

    def _check_trajectory(self, times, positions, start_time, now=None):
        s = self._sample
        if s is None or self.mode in (Mode.WAITING, Mode.STALE):
            raise InputError(f"trajectory: no valid joint state (controller is {self.mode.value})")
        return self.admission.check(s, self._received, times, positions, start_time, now)

    @contextmanager
    def _counted_rejection(self):
        """Count an InputError raised inside as a rejected trajectory (and raise it on)."""
        try:
            yield
        except InputError:
            self.counters.rejected_trajectories += 1
            raise

    def _enter_hold(self, q, reason, abort=False):
        self._hold_q = np.array(q, dtype=float)
        self._hold_q.flags.writeable = False          # shared by the commands of the hold
        self.law.r_hold[:] = setpoint_reference(self.model, self.data, self._hold_q)
        if abort:
            self._trajectory = None
        self._set_mode(Mode.HOLD, reason)

    def _set_mode(self, mode, reason):
        self.mode = mode
        self.events.append(f"{mode.value}: {reason}")

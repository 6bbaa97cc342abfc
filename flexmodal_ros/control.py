"""Feedforward+PD tracking law, set-point hold law and the controller's fail-safe policy (ROS-free).

Thesis: T.T. Do (2021). Plant (2.1) / ch. 4 form (4.1)-(4.4); motor coordinates q_m after the gear
[rad], motor torques τ_m after the gear [N·m], link coordinates q [rad or m].

Tracking law (De Luca 2000 scheme, notes_003 §7 item 10; not written out in the thesis):

    τ_m = τ_m^d + K_P (q_m^d − q_m) + K_D (q̇_m^d − q̇_m)

with q_m^d, q̇_m^d, τ_m^d from the flexible-joint inverse dynamics (4.6)-(4.10) of the C⁴ link
reference. "PD only" (``use_feedforward=False``) keeps the gains but uses τ_m^d = 0 and the link
reference mapped through the gear, q_m^d = W q^d, q̇_m^d = W q̇^d.

Hold law: the set-point PD with constant compensation (2.2)-(2.3) about a link set-point q^d.

Fail-safe policy of :class:`FailSafeController` (what the ``feedforward_pd_controller`` node runs):

=====================================================  ====================================================
situation                                              output
=====================================================  ====================================================
no valid joint state received yet                      no command (the drive keeps its own hold)
valid states, no trajectory                            HOLD: law (2.2)-(2.3) at the link position measured
                                                       when HOLD was entered
trajectory accepted, start time not reached            HOLD (unchanged)
trajectory active                                      TRACKING law (feedforward + PD)
trajectory finished                                    HOLD at its last waypoint
joint state with NaN/inf or wrong size                 sample rejected (InputError), no command for it;
                                                       the last valid sample stays in use
no valid joint state for more than ``state_timeout``   STALE: trajectory aborted, constant static torque
(steady clock)                                         W⁻¹(g(q) − Jᵀ(q) τ_ext) at the last valid position
                                                       (the feed-through term of (2.2); no feedback on
                                                       stale data); valid states again → HOLD there
joint-state time going backwards (simulator reset)     trajectory aborted, HOLD at the new position
bad trajectory (empty, wrong sizes, NaN/inf, times     rejected with an InputError naming the field;
not strictly increasing, outside the position limits,  the current mode continues
first waypoint far from the measured position, start
in the past, no joint state yet)
torque beyond the URDF effort limit                    clipped to ±limit; saturated joints reported
                                                       in :class:`Command` and counted
=====================================================  ====================================================
"""
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from .errors import InputError
from .linearize import setpoint_motor_torque, static_compensation
from .model import create_data
from .trajectory import PiecewiseC4Trajectory
from .validation import finite_array

# Tolerance on URDF position limits for trajectory waypoints [rad or m] (limits are printed rounded).
LIMIT_TOLERANCE = 1e-9


class Mode(str, Enum):
    """Controller modes of the fail-safe policy (module docstring)."""
    WAITING = "waiting"
    HOLD = "hold"
    TRACKING = "tracking"
    STALE = "stale"


@dataclass(frozen=True)
class JointSample:
    """One measured state: time t [s] (joint-state stamp), link q, q̇ and motor q_m, q̇_m (n,) each."""
    t: float
    q: np.ndarray
    qd: np.ndarray
    q_m: np.ndarray
    qd_m: np.ndarray


@dataclass(frozen=True)
class MotorReference:
    """Desired motor position q_m^d [rad], velocity q̇_m^d [rad/s] and torque τ_m^d [N·m], (n,) each."""
    position: np.ndarray
    velocity: np.ndarray
    torque: np.ndarray


@dataclass(frozen=True)
class Command:
    """Output of one control cycle: motor torques τ_m [N·m] (URDF order, after saturation), the mode,
    the joints clipped at their effort limit, and the link reference q^d [rad or m] of this cycle
    (the hold set-point in HOLD/STALE)."""
    tau: np.ndarray
    mode: Mode
    saturated: np.ndarray
    q_ref: np.ndarray


def saturate(tau, limit):
    """Clip τ to ±limit (URDF effort limits; inf = none). Returns (clipped τ, bool mask of clipped joints)."""
    tau = np.asarray(tau, dtype=float)
    clipped = np.minimum(np.maximum(tau, -limit), limit)   # = np.clip, several times cheaper on (n,)
    return clipped, clipped != tau


class TrackingLaw:
    """τ_m = τ_m^d + K_P (q_m^d − q_m) + K_D (q̇_m^d − q̇_m) with the gains of ``model``.

    ``feedforward``: a callable ``(q, qd, qdd, q3, q4) -> result`` with fields motor_position,
    motor_velocity, motor_torque ((4.7)-(4.10)); default the generated
    :class:`~flexmodal_ros.inverse_dynamics.FlexibleJointFeedforward` of ``model``.
    """

    def __init__(self, model, use_feedforward=True, feedforward=None):
        self.model = model
        self.use_feedforward = bool(use_feedforward)
        if feedforward is None:
            from .inverse_dynamics import FlexibleJointFeedforward
            feedforward = FlexibleJointFeedforward(model)
        self._feedforward = feedforward

    def reference(self, q, qd, qdd, q3, q4):
        """Motor reference of the link reference (q, q̇, q̈, q⃛, q⁗) (each (n,)): (4.7)-(4.10), or
        W q^d, W q̇^d, 0 when feedforward is off."""
        if not self.use_feedforward:
            return MotorReference(self.model.W * q, self.model.W * qd, np.zeros(self.model.n))
        out = self._feedforward(q, qd, qdd, q3, q4)
        return MotorReference(np.asarray(out.motor_position), np.asarray(out.motor_velocity),
                              np.asarray(out.motor_torque))

    def torque(self, ref, q_m, qd_m):
        """Motor torque of the tracking law for measured motor position q_m and velocity q̇_m."""
        return ref.torque + self.model.kp * (ref.position - q_m) + self.model.kd * (ref.velocity - qd_m)


class _Trajectory:
    """An accepted reference: waypoint trajectory (times from t0) and its start time t0 [s]."""

    def __init__(self, path, t0):
        self.path, self.t0 = path, t0

    def sample(self, t):
        """(q, q̇, q̈, q⃛, q⁗) at time t [s] from the start, each (n,)."""
        return self.path.sample(t)


@dataclass
class Counters:
    """Cycle, rejection and saturation counts since start (for reports and statistics)."""
    cycles: int = 0
    rejected_samples: int = 0
    rejected_trajectories: int = 0
    saturated_cycles: int = 0
    saturated_per_joint: list = field(default_factory=list)


class FailSafeController:
    """Tracking and hold laws behind the fail-safe policy of the module docstring.

    Use: :meth:`update_state` with each joint-state sample (``received`` = steady-clock receipt time
    [s]), then :meth:`compute` for the command of that sample; call :meth:`watchdog` periodically
    with the steady-clock time to get the STALE command when states stop. :meth:`set_trajectory`
    accepts a reference. Events (mode changes, aborts) are queued in ``events`` for the caller to
    log/publish. Not thread-safe: serialize calls.
    """

    def __init__(self, model, use_feedforward=True, state_timeout=0.05, start_tolerance=0.05,
                 feedforward=None):
        if not state_timeout > 0:
            raise InputError(f"state_timeout: must be > 0 s, got {state_timeout}")
        if not start_tolerance > 0:
            raise InputError(f"start_tolerance: must be > 0, got {start_tolerance}")
        self.model = model
        self.law = TrackingLaw(model, use_feedforward, feedforward)
        self.state_timeout = float(state_timeout)
        self.start_tolerance = float(start_tolerance)
        self.data = create_data(model)
        self.mode = Mode.WAITING
        self.events = []
        self.counters = Counters(saturated_per_joint=[0] * model.n)
        self._sample = None
        self._received = None
        self._hold_q = None
        self._trajectory = None

    @property
    def use_feedforward(self):
        return self.law.use_feedforward

    @use_feedforward.setter
    def use_feedforward(self, value):
        self.law.use_feedforward = bool(value)

    @property
    def last_sample(self):
        """The last valid :class:`JointSample` (None before the first)."""
        return self._sample

    def update_state(self, sample, received):
        """Accept a measured sample (InputError naming the field if it is not finite / wrong size)."""
        try:
            checked = self._checked(sample)
        except InputError:
            self.counters.rejected_samples += 1
            raise
        previous = self._sample
        self._sample, self._received = checked, float(received)
        if self.mode in (Mode.WAITING, Mode.STALE):
            self._enter_hold(checked.q, f"valid joint state at t={checked.t:.4f} s")
        elif previous is not None and checked.t < previous.t:
            self._enter_hold(checked.q, f"joint-state time went backwards ({previous.t:.4f} -> "
                                        f"{checked.t:.4f} s): trajectory aborted", abort=True)

    def _checked(self, sample):
        """Float copy of a sample; InputError naming the field if not finite or of the wrong size."""
        try:   # fast path (1 kHz): the four vectors in one array, one finiteness check
            block = np.array([sample.q, sample.qd, sample.q_m, sample.qd_m], dtype=float)
        except (ValueError, TypeError):
            block = None
        if (block is not None and block.shape == (4, self.model.n) and np.isfinite(block).all()
                and np.isfinite(sample.t)):
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
        return JointSample(float(sample.t), **arrays)

    def set_trajectory(self, times, positions, start_time=None):
        """Accept a link reference: waypoint ``times`` [s] from the start (strictly increasing) and
        ``positions`` (m, n) in URDF order; ``start_time`` [s] on the joint-state clock, None = now
        (the last sample's time). A first waypoint with time > 0 is preceded by the measured
        position at time 0. Returns a one-line description; InputError naming the field otherwise.
        """
        try:
            traj = self._check_trajectory(times, positions, start_time)
        except InputError:
            self.counters.rejected_trajectories += 1
            raise
        self._trajectory = traj
        return (f"trajectory accepted: {traj.path.times.size} waypoints, {traj.path.duration:.3f} s, "
                f"starting at t={traj.t0:.4f} s")

    def compute(self):
        """Command for the last valid sample (None in WAITING or STALE)."""
        s = self._sample
        if s is None or self.mode in (Mode.WAITING, Mode.STALE):
            return None
        traj = self._trajectory
        if traj is not None and s.t >= traj.t0:
            tau, q_ref = self._tracking_torque(traj, s)
        else:
            q_ref = self._hold_q
            tau = setpoint_motor_torque(self.model, self.data, q_ref, s.q_m, s.qd_m)
        return self._finish(tau, q_ref)

    def watchdog(self, now):
        """STALE command if no valid sample arrived for more than state_timeout before steady time
        ``now`` [s], else None."""
        if self._sample is None or now - self._received <= self.state_timeout:
            return None
        if self.mode != Mode.STALE:
            self._trajectory = None
            self._set_mode(Mode.STALE, f"no valid joint state for {now - self._received:.3f} s "
                                       f"(> {self.state_timeout:g} s): static hold, trajectory aborted")
        q = self._sample.q
        tau = static_compensation(self.model, self.data, q) / self.model.W
        return self._finish(tau, q)

    def _tracking_torque(self, traj, s):
        t = s.t - traj.t0
        if t >= traj.path.duration:
            self._trajectory = None
            self._enter_hold(traj.path.positions[-1], "trajectory finished")
            return setpoint_motor_torque(self.model, self.data, self._hold_q, s.q_m, s.qd_m), self._hold_q
        if self.mode != Mode.TRACKING:
            self._set_mode(Mode.TRACKING, f"tracking started at t={s.t:.4f} s")
        ref = traj.sample(t)
        return self.law.torque(self.law.reference(*ref), s.q_m, s.qd_m), ref[0]

    def _finish(self, tau, q_ref):
        tau, saturated = saturate(tau, self.model.effort_limit)
        c = self.counters
        c.cycles += 1
        if saturated.any():
            c.saturated_cycles += 1
            for i in np.flatnonzero(saturated):
                c.saturated_per_joint[i] += 1
        return Command(tau, self.mode, saturated, np.array(q_ref, dtype=float))

    def _check_trajectory(self, times, positions, start_time):
        s = self._sample
        if s is None or self.mode in (Mode.WAITING, Mode.STALE):
            raise InputError(f"trajectory: no valid joint state (controller is {self.mode.value})")
        times = finite_array(times, "time_from_start", (None,))
        positions = finite_array(positions, "positions", (times.size, self.model.n))
        if times.size == 0:
            raise InputError("points: the trajectory has no waypoints")
        if times[0] < 0:
            raise InputError(f"time_from_start: must be >= 0, got {times[0]:g} s at point 0")
        if times[0] > 0:
            times = np.concatenate([[0.0], times])
            positions = np.vstack([s.q, positions])
        self._check_limits(positions)
        gap = np.abs(positions[0] - s.q)
        if gap.max() > self.start_tolerance:
            j = int(np.argmax(gap))
            raise InputError(f"positions: point 0 is {gap[j]:.4g} away from the measured position of "
                             f"{self.model.joint_names[j]} (start_tolerance {self.start_tolerance:g})")
        t0 = s.t if start_time is None else float(finite_array(start_time, "start_time", ()))
        if t0 < s.t:
            raise InputError(f"header.stamp: start time {t0:.4f} s is in the past (joint-state time "
                             f"{s.t:.4f} s)")
        return _Trajectory(PiecewiseC4Trajectory(times, positions), t0)

    def _check_limits(self, positions):
        m = self.model
        low = positions < m.position_lower - LIMIT_TOLERANCE
        high = positions > m.position_upper + LIMIT_TOLERANCE
        bad = np.argwhere(low | high)
        if bad.size:
            k, j = bad[0]
            raise InputError(f"positions: point {k} puts {m.joint_names[j]} at {positions[k, j]:.6g}, "
                             f"outside its limits [{m.position_lower[j]:.6g}, {m.position_upper[j]:.6g}]")

    def _enter_hold(self, q, reason, abort=False):
        self._hold_q = np.array(q, dtype=float)
        if abort:
            self._trajectory = None
        self._set_mode(Mode.HOLD, reason)

    def _set_mode(self, mode, reason):
        self.mode = mode
        self.events.append(f"{mode.value}: {reason}")

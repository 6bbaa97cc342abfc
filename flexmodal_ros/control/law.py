"""Feedforward+PD tracking law, set-point hold law and the controller's fail-safe policy (ROS-free).

Thesis: T.T. Do (2021). Plant (2.1) / ch. 4 form (4.1)-(4.4); motor coordinates q_m after the gear
[rad], motor torques τ_m after the gear [N·m], link coordinates q [rad or m].

Tracking law (De Luca 2000 scheme, notes_003 §7 item 10; not written out in the thesis):

    τ_m = τ_m^d + K_P (q_m^d − q_m) + K_D (q̇_m^d − q̇_m)

with q_m^d, q̇_m^d, τ_m^d from the flexible-joint inverse dynamics (4.6)-(4.10) of the C⁴ link
reference. "PD only" (``use_feedforward=False``) keeps the gains but uses τ_m^d = 0 and the link
reference mapped through the gear, q_m^d = W q^d, q̇_m^d = W q̇^d.

Hold law: the set-point PD with constant compensation (2.2)-(2.3) about a link set-point q^d.

Both laws have the form τ_m = r − K_P q_m − K_D q̇_m with a reference term r (the hold law's is
constant). :class:`ControlLaw` evaluates a whole cycle (link reference on the current C⁴ segment
(4.29)-(4.30), feedforward, law, saturation at the effort limits) as one call of generated C
(:func:`control_law_function`): the 1 kHz node spends its time budget in Python bookkeeping only.

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
from enum import Enum
from typing import NamedTuple

import casadi as ca
import numpy as np

from ..core.errors import InputError
from ..robot.inverse_dynamics.build import CompiledFunction, build_library, model_feedforward_function
from ..flexible_joint.linear_model import setpoint_reference, static_compensation
from ..robot import trajectory
from ..robot.model import create_data, with_overrides
from ..robot.trajectory import ETA_COEFFICIENTS, PiecewiseC4Trajectory
from ..core.validation import finite_array, per_joint

# Tolerance on URDF position limits for trajectory waypoints [rad or m] (limits are printed rounded).
LIMIT_TOLERANCE = 1e-9
DEFAULT_VELOCITY_LIMIT = 10.0        # [rad/s or m/s] where the URDF gives no velocity limit
ACCELERATION_PER_VELOCITY = 10.0     # [1/s] default acceleration limit = this × velocity limit
STATE_BOUND = 1e6                    # no measured position or velocity is plausible beyond this


class Mode(str, Enum):
    """Controller modes of the fail-safe policy (module docstring)."""
    WAITING = "waiting"
    HOLD = "hold"
    TRACKING = "tracking"
    STALE = "stale"


class JointSample(NamedTuple):
    """One measured state: time t [s] (joint-state stamp), link q, q̇ and motor q_m, q̇_m (n,) each."""
    t: float
    q: np.ndarray
    qd: np.ndarray
    q_m: np.ndarray
    qd_m: np.ndarray


class Command(NamedTuple):
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


# Layout of the control-law vectors (:func:`control_law_function`): scalars, else n entries each.
LAW_INPUTS = ("tracking", "use_feedforward", "s", "T", "q_a", "q_b", "r_hold", "q_m", "qd_m", "kp", "kd",
              "explicit", "reference")
LAW_OUTPUTS = ("tau", "q_ref", "saturated", "n_saturated", "n_nonfinite")
_LAW_SCALARS = ("tracking", "use_feedforward", "s", "T", "n_saturated", "n_nonfinite", "explicit")
_LAW_DERIVATIVES = ("reference",)        # q^d, q̇^d, q̈^d, q⃛^d, q^d(4): 5n entries


def law_layout(names, n):
    """{name: slice} of the named blocks packed in order into one vector, and its length."""
    slices, k = {}, 0
    for name in names:
        size = 1 if name in _LAW_SCALARS else 5 * n if name in _LAW_DERIVATIVES else n
        slices[name], k = slice(k, k + size), k + size
    return slices, k


def control_law_function(model, name="flexmodal_law"):
    """CasADi Function u → y of one control cycle of ``model`` (layout: LAW_INPUTS / LAW_OUTPUTS).

    Inputs: tracking (1 = tracking law, 0 = hold law), use_feedforward (1/0), the segment of the
    C⁴ reference from q_a to q_b [rad or m] of duration T [s] at phase s in [0, 1], the hold law's
    reference term r_hold [N·m] (:func:`~flexmodal_ros.flexible_joint.linear_model.setpoint_reference`), measured
    q_m [rad], q̇_m [rad/s], gains K_P, K_D (inputs, so that they can change at run time without
    a new library). Link reference q^(k) = η^(k)(s) T⁻ᵏ (q_b − q_a) (+ q_a for k = 0)
    (4.29)-(4.30), or, with explicit = 1, the given ``reference`` [q^d; q̇^d; q̈^d; q⃛^d; q^d(4)]
    (any C⁴ reference, e.g. a shaped one: flexmodal_ros/shaping); feedforward (4.6)-(4.10) of
    that reference; reference term
    r = τ_m^d + K_P q_m^d + K_D q̇_m^d (feedforward on), K_P W q^d + K_D W q̇^d (off), r_hold (hold);
    τ_m = r − K_P q_m − K_D q̇_m clipped at the URDF effort limits.
    Outputs: tau [N·m], q_ref = q^d [rad or m], saturated (1/0 per joint), n_saturated,
    n_nonfinite = entries of τ (before clipping) and q^d that are NaN or ±inf (the clipping would
    turn NaN into a limit: the caller must check this count first).
    """
    n = model.n
    ins, size = law_layout(LAW_INPUTS, n)
    u = ca.SX.sym("u", size)
    v = {key: u[sl] for key, sl in ins.items()}
    dq, inv_t = v["q_b"] - v["q_a"], 1.0 / v["T"]
    derivs, scale = [], 1.0
    for coeffs in ETA_COEFFICIENTS:                              # Horner: η⁽ᵏ⁾(s), highest power first
        eta = 0.0
        for c in coeffs:
            eta = eta * v["s"] + float(c)
        derivs.append(eta * scale * dq)
        scale = scale * inv_t
    derivs[0] = derivs[0] + v["q_a"]
    derivs = [ca.if_else(v["explicit"], v["reference"][k * n:(k + 1) * n], d) for k, d in enumerate(derivs)]
    ff = model_feedforward_function(model, f"{name}_ff")(ca.vertcat(*derivs))
    kp, kd, W = v["kp"], v["kd"], ca.DM(np.asarray(model.W, dtype=float))
    r_ff = ff[6 * n:7 * n] + kp * ff[3 * n:4 * n] + kd * ff[4 * n:5 * n]
    r_pd = W * (kp * derivs[0] + kd * derivs[1])
    r = ca.if_else(v["tracking"], ca.if_else(v["use_feedforward"], r_ff, r_pd), v["r_hold"])
    tau = r - kp * v["q_m"] - kd * v["qd_m"]
    finite = lambda x: ca.fabs(x) <= np.finfo(float).max        # false for NaN and ±inf
    nonfinite = ca.sum1(ca.vertcat(*[1 - finite(x) for x in ca.vertsplit(ca.vertcat(tau, derivs[0]))]))
    clipped, saturated = [], []
    for j, limit in enumerate(np.asarray(model.effort_limit, dtype=float)):
        if np.isfinite(limit):
            clipped.append(ca.fmin(ca.fmax(tau[j], -limit), limit))
            saturated.append(ca.fabs(tau[j]) > limit)
        else:
            clipped.append(tau[j])
            saturated.append(ca.SX(0.0))
    sat = ca.vertcat(*saturated)
    return ca.Function(name, [u], [ca.cse(ca.vertcat(*clipped, derivs[0], sat, ca.sum1(sat), nonfinite))])


class ControlLaw:
    """One control cycle of :func:`control_law_function` per :meth:`run` on preallocated vectors.

    Write the inputs through the views named as in LAW_INPUTS (``law.q_m[:] = ...``, scalars as
    ``law.s[0] = ...``), call :meth:`run`, read the outputs through the LAW_OUTPUTS views.
    compiled=True (default): generated C, compiled once per model and cached like the feedforward
    (:func:`~flexmodal_ros.robot.inverse_dynamics.build.build_library`; :attr:`compiled` is its
    :class:`~flexmodal_ros.robot.inverse_dynamics.build.CompiledFunction`, for C callers); compiled=False:
    CasADi's virtual machine (no C compiler needed, slower; :attr:`compiled` is None). The gains
    are inputs, initialised from the model (:meth:`set_gains` changes them). Not thread-safe.
    """

    def __init__(self, model, compiled=True, cache=None):
        if compiled:
            self.library = build_library(model, cache, control_law_function, "law",
                                         sources=(__file__, trajectory.__file__),
                                         parameters={"W": model.W, "effort_limit": model.effort_limit})
            self.compiled = CompiledFunction(self.library)
            self.u, self.y, self.run = self.compiled.x, self.compiled.y, self.compiled.run
        else:
            self.library = self.compiled = None
            self._function = control_law_function(model)
            self.u = np.zeros(self._function.size1_in(0))
            self.y = np.zeros(self._function.size1_out(0))
            self.run = self._run_vm
        for names, vector in ((LAW_INPUTS, self.u), (LAW_OUTPUTS, self.y)):
            for key, sl in law_layout(names, model.n)[0].items():
                setattr(self, key, vector[sl])
        self.T[0] = 1.0      # any valid segment: unused branches of the law stay finite
        self.set_gains(model.kp, model.kd)

    def set_gains(self, kp, kd):
        """Motor-side gains K_P [N·m/rad], K_D [N·m·s/rad] (n,) used from the next :meth:`run`."""
        self.kp[:], self.kd[:] = kp, kd

    def _run_vm(self):
        self.y[:] = np.asarray(self._function(self.u)).ravel()


class _Trajectory:
    """An accepted reference: waypoint trajectory (times from t0), its start time t0 [s] (for a
    ``start_now`` trajectory an estimate, replaced by the time of the first cycle that runs it) and
    the segment currently loaded into the control law."""

    def __init__(self, path, t0, start_now=False):
        self.path, self.t0, self.start_now = path, t0, start_now
        self.duration = path.duration
        self.explicit = float(getattr(path, "explicit", False))
        self.segment_begin, self.segment_end = 0.0, -1.0     # times of the loaded segment (none yet)

    def load(self, law, t):
        """Write the segment and phase at time t [s] from the start (0 <= t < duration) into ``law``
        (a path with ``explicit`` set, e.g. a shaped reference: its derivatives at t)."""
        law.explicit[0] = self.explicit
        if self.explicit:
            law.reference[:] = np.concatenate(self.path.sample(t))
            return
        if not self.segment_begin <= t < self.segment_end:
            k = self.path.segment_index(t)
            times, pos = self.path.times, self.path.positions
            self.segment_begin, self.segment_end = times[k], times[k + 1]
            law.q_a[:], law.q_b[:], law.T[0] = pos[k], pos[k + 1], self.segment_end - self.segment_begin
        law.s[0] = (t - self.segment_begin) / law.T[0]


@dataclass(frozen=True)
class SafetyLimits:
    """Thresholds of the fail-safe policy (module docstring). Units rad or m (prismatic), per s.

    ``position_margin``: measured link positions beyond the URDF limits by more than this are
    implausible; ``velocity_scale``: multiplies the URDF velocity limits (inf: no rate checks,
    for offline what-if simulations); ``velocity_limits`` / ``acceleration_limits``: per joint
    (scalar or n values) instead of the defaults; ``state_velocity_factor``: measured |velocity|
    beyond this × velocity limit is implausible; ``max_trajectory_points`` and
    ``max_trajectory_duration`` [s] bound a reference."""
    position_margin: float = 0.1
    velocity_scale: float = 1.0
    velocity_limits: tuple | None = None
    acceleration_limits: tuple | None = None
    state_velocity_factor: float = 3.0
    max_trajectory_points: int = trajectory.MAX_WAYPOINTS
    max_trajectory_duration: float = 3600.0

    def resolved(self, model):
        """(velocity limits (n,), acceleration limits (n,), state bounds (lo, hi) (4n,) in the order
        q, q̇, q_m, q̇_m); InputError naming the field for bad values."""
        n = model.n
        for name in ("position_margin", "velocity_scale", "state_velocity_factor", "max_trajectory_duration"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and not math.isnan(value)):
                raise InputError(f"{name}: must be > 0, got {value}")
        if int(self.max_trajectory_points) < 2:
            raise InputError(f"max_trajectory_points: must be >= 2, got {self.max_trajectory_points}")
        if self.velocity_limits is None:
            velocity = np.where(np.isfinite(model.velocity_limit), model.velocity_limit, DEFAULT_VELOCITY_LIMIT)
        else:
            velocity = _positive_per_joint(self.velocity_limits, n, "velocity_limits")
        velocity = velocity * self.velocity_scale
        acceleration = (ACCELERATION_PER_VELOCITY * velocity if self.acceleration_limits is None
                        else _positive_per_joint(self.acceleration_limits, n, "acceleration_limits"))
        W = np.asarray(model.W, float)
        margin = self.position_margin
        deflection = model.effort_limit / model.k                  # spring torque at the effort limit
        speed = self.state_velocity_factor * velocity
        lo = np.concatenate([model.position_lower - margin, -speed,
                             W * (model.position_lower - margin) - deflection, -W * speed])
        hi = np.concatenate([model.position_upper + margin, speed,
                             W * (model.position_upper + margin) + deflection, W * speed])
        bounds = (np.clip(lo, -STATE_BOUND, STATE_BOUND), np.clip(hi, -STATE_BOUND, STATE_BOUND))
        return velocity, acceleration, bounds


def _positive_per_joint(values, n, field):
    arr = per_joint(values, n, field)
    if np.any(arr <= 0):
        raise InputError(f"{field}: must be > 0, got {arr.tolist()}")
    return arr


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
        from ..flexible_joint.modal import modal_analysis

        timeout = self.state_timeout if state_timeout is None else state_timeout
        tolerance = self.start_tolerance if start_tolerance is None else start_tolerance
        if not timeout > 0:
            raise InputError(f"state_timeout: must be > 0 s, got {timeout}")
        if not tolerance > 0:
            raise InputError(f"start_tolerance: must be > 0, got {tolerance}")
        limits = self.limits if limits is None else limits
        velocity, acceleration, bounds = limits.resolved(self.model)
        model = self.model if kp is None and kd is None else with_overrides(self.model, kp=kp, kd=kd)
        if np.array_equal(model.kp, self.model.kp) and np.array_equal(model.kd, self.model.kd):
            model = self.model                                     # unchanged gains: nothing to check
        if model is not self.model:
            q = self._sample.q if self._sample is not None else np.zeros(model.n)
            result = modal_analysis(model, q, self.data)
            if not result.stable:
                raise InputError(f"kp/kd: the closed loop at the measured position would be {result.stability} "
                                 f"with kp {model.kp.tolist()}, kd {model.kd.tolist()}")
        self.limits, self.velocity_limit, self.acceleration_limit = limits, velocity, acceleration
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

    def check_trajectory(self, times, positions, start_time=None, now=None) -> _Trajectory:
        """Step 1 of :meth:`set_trajectory`: the checked reference, not yet shaped (reads the last
        sample). InputError (counted as a rejected trajectory) naming the field."""
        with self._counted_rejection():
            return self._check_trajectory(times, positions, start_time, now)

    def shape_trajectory(self, traj: _Trajectory) -> _Trajectory:
        """Step 2: ``traj`` through :attr:`shaper` (None: unchanged). Reads nothing the control
        cycles change, so it may run while they go on (the controller node does: the shaping takes
        tens of ms). InputError (counted) when the shaper refuses the path."""
        if self.shaper is None:
            return traj
        with self._counted_rejection():
            return _Trajectory(self.shaper(traj.path), traj.t0, traj.start_now)

    def accept_trajectory(self, traj: _Trajectory) -> str:
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
        times = finite_array(times, "time_from_start", (None,))
        if times.size > self.limits.max_trajectory_points:
            raise InputError(f"points: {times.size} waypoints, more than max_trajectory_points "
                             f"({self.limits.max_trajectory_points})")
        positions = finite_array(positions, "positions", (times.size, self.model.n))
        if times.size == 0:
            raise InputError("points: the trajectory has no waypoints")
        if times[0] < 0:
            raise InputError(f"time_from_start: must be >= 0, got {times[0]:g} s at point 0")
        if times[-1] > self.limits.max_trajectory_duration:
            raise InputError(f"time_from_start: the trajectory lasts {times[-1]:g} s, longer than "
                             f"max_trajectory_duration ({self.limits.max_trajectory_duration:g} s)")
        if times[0] > 0:
            times = np.concatenate([[0.0], times])
            positions = np.vstack([s.q, positions])
        self._check_limits(positions)
        gap = np.abs(positions[0] - s.q)
        if gap.max() > self.start_tolerance:
            j = int(np.argmax(gap))
            raise InputError(f"positions: point 0 is {gap[j]:.4g} away from the measured position of "
                             f"{self.model.joint_names[j]} (start_tolerance {self.start_tolerance:g})")
        if start_time is None:
            t0 = s.t + (max(0.0, float(now) - self._received) if now is not None else 0.0)
        else:
            t0 = float(finite_array(start_time, "start_time", ()))
        if t0 < s.t:
            raise InputError(f"header.stamp: start time {t0:.4f} s is in the past (joint-state time "
                             f"{s.t:.4f} s)")
        path = PiecewiseC4Trajectory(times, positions)
        self._check_rates(path)
        return _Trajectory(path, t0, start_time is None)

    @contextmanager
    def _counted_rejection(self):
        """Count an InputError raised inside as a rejected trajectory (and raise it on)."""
        try:
            yield
        except InputError:
            self.counters.rejected_trajectories += 1
            raise

    def _check_rates(self, path):
        """InputError naming the segment and joint whose peak speed or acceleration exceeds the limits."""
        velocity, acceleration = path.peak_rates()
        for peaks, limit, what, unit in ((velocity, self.velocity_limit, "speed", "/s"),
                                         (acceleration, self.acceleration_limit, "acceleration", "/s^2")):
            bad = np.argwhere(peaks > limit * (1 + 1e-9))
            if bad.size:
                k, j = bad[0]
                raise InputError(f"points: segment {k} -> {k + 1} needs a peak {what} of {peaks[k, j]:.4g}{unit} on "
                                 f"{self.model.joint_names[j]}, above its limit {limit[j]:.4g}{unit} (slow the "
                                 f"segment down, or raise the controller's velocity/acceleration limits)")

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
        self._hold_q.flags.writeable = False          # shared by the commands of the hold
        self.law.r_hold[:] = setpoint_reference(self.model, self.data, self._hold_q)
        if abort:
            self._trajectory = None
        self._set_mode(Mode.HOLD, reason)

    def _set_mode(self, mode, reason):
        self.mode = mode
        self.events.append(f"{mode.value}: {reason}")


_STATE_FIELDS = ("position", "velocity")


def implausible_state(model, values, bounds):
    """Message for the first entry of ``values`` = [q; q̇; q_m; q̇_m] (4n,) outside ``bounds`` =
    (lo, hi) of :meth:`SafetyLimits.resolved` (NaN and inf included), or "" when all are in."""
    lo, hi = bounds
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= lo) & (values <= hi)))
    if bad.size == 0:
        return ""
    k, n = int(bad[0]), model.n
    field = _STATE_FIELDS[(k // n) % 2]
    joint = model.joint_names[k % n] + ("_motor" if k >= 2 * n else "")
    if not np.isfinite(values[k]):
        return f"joint_states.{field}: NaN or inf for {joint}"
    return (f"joint_states.{field}: {joint} = {values[k]:.6g} is implausible (outside [{lo[k]:.6g}, {hi[k]:.6g}]: "
            f"URDF limits with the controller's margins)")

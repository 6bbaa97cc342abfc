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
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

import casadi as ca
import numpy as np

from .errors import InputError
from .inverse_dynamics.build import CompiledFunction, build_library, model_feedforward_function
from .linearize import setpoint_reference, static_compensation
from . import trajectory
from .model import create_data
from .trajectory import ETA_COEFFICIENTS, PiecewiseC4Trajectory
from .validation import finite_array

# Tolerance on URDF position limits for trajectory waypoints [rad or m] (limits are printed rounded).
LIMIT_TOLERANCE = 1e-9


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
LAW_INPUTS = ("tracking", "use_feedforward", "s", "T", "q_a", "q_b", "r_hold", "q_m", "qd_m", "explicit",
              "reference")
LAW_OUTPUTS = ("tau", "q_ref", "saturated", "n_saturated")
_LAW_SCALARS = ("tracking", "use_feedforward", "s", "T", "n_saturated", "explicit")
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
    reference term r_hold [N·m] (:func:`~flexmodal_ros.linearize.setpoint_reference`), measured
    q_m [rad], q̇_m [rad/s]. Link reference q^(k) = η^(k)(s) T⁻ᵏ (q_b − q_a) (+ q_a for k = 0)
    (4.29)-(4.30), or, with explicit = 1, the given ``reference`` [q^d; q̇^d; q̈^d; q⃛^d; q^d(4)]
    (any C⁴ reference, e.g. a shaped one: flexmodal_ros/shaping); feedforward (4.6)-(4.10) of
    that reference; reference term
    r = τ_m^d + K_P q_m^d + K_D q̇_m^d (feedforward on), K_P W q^d + K_D W q̇^d (off), r_hold (hold);
    τ_m = r − K_P q_m − K_D q̇_m clipped at the URDF effort limits.
    Outputs: tau [N·m], q_ref = q^d [rad or m], saturated (1/0 per joint), n_saturated.
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
    kp, kd, W = (ca.DM(np.asarray(a, dtype=float)) for a in (model.kp, model.kd, model.W))
    r_ff = ff[6 * n:7 * n] + kp * ff[3 * n:4 * n] + kd * ff[4 * n:5 * n]
    r_pd = W * (kp * derivs[0] + kd * derivs[1])
    r = ca.if_else(v["tracking"], ca.if_else(v["use_feedforward"], r_ff, r_pd), v["r_hold"])
    tau = r - kp * v["q_m"] - kd * v["qd_m"]
    clipped, saturated = [], []
    for j, limit in enumerate(np.asarray(model.effort_limit, dtype=float)):
        if np.isfinite(limit):
            clipped.append(ca.fmin(ca.fmax(tau[j], -limit), limit))
            saturated.append(ca.fabs(tau[j]) > limit)
        else:
            clipped.append(tau[j])
            saturated.append(ca.SX(0.0))
    sat = ca.vertcat(*saturated)
    return ca.Function(name, [u], [ca.cse(ca.vertcat(*clipped, derivs[0], sat, ca.sum1(sat)))])


class ControlLaw:
    """One control cycle of :func:`control_law_function` per :meth:`run` on preallocated vectors.

    Write the inputs through the views named as in LAW_INPUTS (``law.q_m[:] = ...``, scalars as
    ``law.s[0] = ...``), call :meth:`run`, read the outputs through the LAW_OUTPUTS views.
    compiled=True (default): generated C, compiled once per model and cached like the feedforward
    (:func:`~flexmodal_ros.inverse_dynamics.build.build_library`); compiled=False: CasADi's
    virtual machine (no C compiler needed, slower). Not thread-safe.
    """

    def __init__(self, model, compiled=True, cache=None):
        if compiled:
            self.library = build_library(model, cache, control_law_function, "law",
                                         sources=(__file__, trajectory.__file__),
                                         parameters={"kp": model.kp, "kd": model.kd, "W": model.W,
                                                     "effort_limit": model.effort_limit})
            c_function = CompiledFunction(self.library)
            self.u, self.y, self.run = c_function.x, c_function.y, c_function.run
        else:
            self.library = None
            self._function = control_law_function(model)
            self.u = np.zeros(self._function.size1_in(0))
            self.y = np.zeros(self._function.size1_out(0))
            self.run = self._run_vm
        for names, vector in ((LAW_INPUTS, self.u), (LAW_OUTPUTS, self.y)):
            for key, sl in law_layout(names, model.n)[0].items():
                setattr(self, key, vector[sl])
        self.T[0] = 1.0      # any valid segment: unused branches of the law stay finite

    def _run_vm(self):
        self.y[:] = np.asarray(self._function(self.u)).ravel()


class _Trajectory:
    """An accepted reference: waypoint trajectory (times from t0), its start time t0 [s] and the
    segment currently loaded into the control law."""

    def __init__(self, path, t0):
        self.path, self.t0 = path, t0
        self.duration = path.duration
        self.explicit = float(getattr(path, "explicit", False))
        self._begin, self._end = 0.0, -1.0          # times of the loaded segment (none yet)

    def load(self, law, t):
        """Write the segment and phase at time t [s] from the start (0 <= t < duration) into ``law``
        (a path with ``explicit`` set, e.g. a shaped reference: its derivatives at t)."""
        law.explicit[0] = self.explicit
        if self.explicit:
            law.reference[:] = np.concatenate(self.path.sample(t))
            return
        if not self._begin <= t < self._end:
            k = self.path.segment_index(t)
            times, pos = self.path.times, self.path.positions
            self._begin, self._end = times[k], times[k + 1]
            law.q_a[:], law.q_b[:], law.T[0] = pos[k], pos[k + 1], self._end - self._begin
        law.s[0] = (t - self._begin) / law.T[0]


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
    log/publish. ``shaper``: None, or a callable mapping each accepted
    :class:`~flexmodal_ros.trajectory.PiecewiseC4Trajectory` to the reference actually tracked
    (e.g. :class:`flexmodal_ros.shaping.ReferenceShaper`: input shaping). Not thread-safe:
    serialize calls.
    """

    def __init__(self, model, use_feedforward=True, state_timeout=0.05, start_tolerance=0.05,
                 compiled=True, cache=None):
        if not state_timeout > 0:
            raise InputError(f"state_timeout: must be > 0 s, got {state_timeout}")
        if not start_tolerance > 0:
            raise InputError(f"start_tolerance: must be > 0, got {start_tolerance}")
        self.model = model
        self.law = ControlLaw(model, compiled, cache)
        self.use_feedforward = use_feedforward
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

    @property
    def last_sample(self):
        """The last valid :class:`JointSample` (None before the first)."""
        return self._sample

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
        if self.mode in (Mode.WAITING, Mode.STALE):
            self._enter_hold(checked.q, f"valid joint state at t={checked.t:.4f} s")
        elif previous is not None and checked.t < previous.t:
            self._enter_hold(checked.q, f"joint-state time went backwards ({previous.t:.4f} -> "
                                        f"{checked.t:.4f} s): trajectory aborted", abort=True)

    def _checked(self, sample):
        """Float copy of a sample; InputError naming the field if not finite or of the wrong size."""
        try:   # fast path (1 kHz): the four vectors in one array, one finiteness check
            block = np.array(sample[1:], dtype=float)
        except (ValueError, TypeError):
            block = None
        if (block is not None and block.shape == (4, self.model.n) and np.isfinite(block).all()
                and math.isfinite(sample.t)):
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
        position at time 0. A trajectory accepted while tracking another replaces it: HOLD at the
        measured position until its start. Returns a one-line description; InputError naming the
        field otherwise.
        """
        try:
            traj = self._check_trajectory(times, positions, start_time)
        except InputError:
            self.counters.rejected_trajectories += 1
            raise
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
        return self._finish(law.q_ref.copy() if tracking else self._hold_q)

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
        path = PiecewiseC4Trajectory(times, positions)
        return _Trajectory(path if self.shaper is None else self.shaper(path), t0)

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

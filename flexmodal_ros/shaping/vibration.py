"""Residual vibration of a move: linearized modal measure and end-effector peak/RMS in simulation.

Definitions (used by the tests, the CLI and the README):

- **Percentage residual vibration on the linearized model** of mode k for a reference whose joints
  move along a path: with σ(t) the scalar *progress* of the reference (path parameter p of each
  copy, weighted by the impulse amplitudes: σ = Σ_i A_i(t) p(t − τ_i(t)); for a one-segment move
  y(t) = q0 + (qf − q0) σ(t) exactly) and λ_k(σ) the tracked closed-loop eigenvalue of mode k at
  the configuration of progress σ (thesis (2.13)-(2.17)),

      V_k = |∫ σ'(t) exp(∫_t^{t_e} λ_k(σ(s)) ds) dt| / Δσ,     t_e = end of the reference,

  the amplitude of the mode left when the reference ends, relative to that of an instantaneous
  step of the same size at t_e (a frozen-coefficient (WKB) modal convolution; for constant λ and a
  shaped command it is the classic percentage vibration of Singer & Seering times that of the
  unshaped profile). 0 = no vibration left, 1 = as much as a step.
- **End-effector residual vibration in simulation**: e(t) = p_E(q(t)) − p_E,rest over the settling
  window [t_s, t_s + W], p_E the tool point (frame 0) and p_E,rest its position at the static
  equilibrium the robot settles to under the hold law (2.2)-(2.3) at the last waypoint
  (:func:`rest_position`; = p_E(q_f) when the controller's model is the plant's, else the static
  offset of the wrong stiffness is excluded: it is not vibration). peak = max ‖e‖, rms =
  √(mean ‖e‖²) [m]. Comparisons use one t_s for every variant: the end of the longest reference
  (the unshaped move gets the shaper's delay as extra settling time, so a ratio is never flattered
  by it).

Controllers for the simulations (:func:`simulate_move`), all on the suite's plant
(:class:`~flexmodal_ros.simulation.plant.FlexibleJointPlant` via :func:`~flexmodal_ros.simulation.closed_loop.run_closed_loop`):
``"pd"`` — PD with static compensation at the moving reference, the thesis law (2.2)-(2.3)
evaluated at q^d(t) (:class:`SetpointPD`: industrial PD + gravity compensation, no dynamic
feedforward; its linearization is the AMA's closed loop); ``"feedforward"`` — the suite's
feedforward + PD controller (:class:`~flexmodal_ros.control.FailSafeController`), optionally with a
controller model whose joint stiffness is scaled; ``"pd_only"`` — the suite's PD-only mode (no
feedforward and no gravity compensation while tracking).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..control import Command, FailSafeController, Mode, SafetyLimits, saturate
from ..core.errors import InputError
from ..flexible_joint.linear_model import setpoint_reference
from ..robot.model import create_data, with_overrides
from ..simulation import DEFAULT_DT, SimulatedPlant, run_closed_loop
from ..robot.trajectory import PiecewiseC4Trajectory
from .prediction import linearized_vibration, progress  # noqa: F401  (re-exported: the historical home)
from .reference import DEFAULT_KNOT_RATE_HZ, ShapedTrajectory
from ..robot.model import gravity_torque
from . import ReferenceShaper, check_design, check_shaping
from ..robot.trajectory import ETA_PEAKS
from ..core.validation import shown

LAWS = ("pd", "feedforward", "pd_only")
DEFAULT_WINDOW = 1.0


def tool_positions(model, qs) -> np.ndarray:
    """Tool point E positions p_E (m, 3) [m] in frame 0 for configurations qs (m, n)."""
    data = create_data(model)
    out = np.empty((len(qs), 3))
    for i, q in enumerate(np.asarray(qs, float)):
        pin.framesForwardKinematics(model.pin, data, q)
        out[i] = data.oMf[model.ee_frame_id].translation
    return out


def hold_equilibrium(plant_model, controller_model, q_goal):
    """(q (n,), q_m (n,)): static equilibrium of the plant (friction-free) under the hold law
    (2.2)-(2.3) of ``controller_model`` about q_goal (:func:`rest_position`)."""
    p, c = plant_model, controller_model
    data = create_data(p)
    n = p.n
    r = setpoint_reference(c, create_data(c), q_goal)
    W, k = p.W, p.k

    def residual(z):
        q, qm = z[:n], z[n:]
        spring = k * (W * q - qm)
        return np.concatenate([gravity_torque(p, data, q) + W * spring, r - c.kp * qm + spring])

    from scipy.optimize import root   # deferred: scipy.optimize
    z = root(residual, np.concatenate([q_goal, r / c.kp]), method="hybr", tol=1e-13).x
    if np.abs(residual(z)).max() > 1e-8:
        raise InputError("rest position: the static equilibrium under the hold law was not found")
    return z[:n], z[n:]


def held_start(plant_model, controller_model, q_start):
    """(state (4n,), motor torque) of the plant at rest under the controller's hold law about
    q_start: where a robot waits before a move (for a controller whose model is the plant's, the
    equilibrium (2.3) of q_start itself)."""
    q, q_m = hold_equilibrium(plant_model, controller_model, np.asarray(q_start, float))
    r = setpoint_reference(controller_model, create_data(controller_model), np.asarray(q_start, float))
    return np.concatenate([q, q_m, np.zeros(2 * q.size)]), r - controller_model.kp * q_m


def rest_position(plant_model, controller_model, q_goal):
    """(q_rest (n,), p_E,rest (3,)): static equilibrium of the plant (friction-free) under the hold
    law (2.2)-(2.3) of ``controller_model`` about q_goal: g_p(q) + K_p W (W q − q_m) = 0 and
    r − K_P q_m + K_p (W q − q_m) = 0 with r = :func:`~flexmodal_ros.flexible_joint.linear_model.setpoint_reference`
    of the controller model (scipy's hybrid Powell solver from q_goal; InputError if it fails)."""
    q, _ = hold_equilibrium(plant_model, controller_model, q_goal)
    return q, tool_positions(plant_model, [q])[0]


@dataclass(frozen=True)
class ResidualVibration:
    """End-effector residual vibration (module docstring): peak and rms [m] of ‖e‖ over the window
    starting at ``start_s`` [s] of length ``window_s`` [s]."""
    peak_m: float
    rms_m: float
    start_s: float
    window_s: float

    def to_dict(self):
        return {"peak_m": self.peak_m, "rms_m": self.rms_m, "start_s": self.start_s, "window_s": self.window_s}


def residual_vibration(t, p_ee, p_rest, start, window=DEFAULT_WINDOW) -> ResidualVibration:
    """:class:`ResidualVibration` of tool positions p_ee (m, 3) at times t (m,) about p_rest."""
    t = np.asarray(t, float)
    inside = (t >= start - 1e-9) & (t <= start + window + 1e-9)
    if not inside.any() or t[-1] < start + window - 1e-6:
        raise InputError(f"settle: the simulation ends at {t[-1]:.3f} s, before the settling window "
                         f"[{start:.3f}, {start + window:.3f}] s ends")
    e = np.linalg.norm(np.asarray(p_ee)[inside] - p_rest, axis=1)
    return ResidualVibration(float(e.max()), float(np.sqrt(np.mean(e ** 2))), float(start), float(window))


def cumulative_simpson_uniform(y, h):
    """∫_{t_0}^{t_i} y dt at every node t_i = t_0 + i h of a uniform grid with an odd number of
    nodes (m, ...) → (m, ...): composite Simpson h/3 (y₀ + 4y₁ + y₂) over each pair of intervals
    at the even nodes; at the odd ones, the integral of the interpolating parabola of the pair over
    its first interval, h/12 (5y₀ + 8y₁ − y₂). The rule of ``scipy.integrate.cumulative_simpson``
    (SciPy ≥ 1.12, absent from 1.11), written here so that 1.11 gives the same result."""
    y = np.asarray(y)
    if y.shape[0] % 2 == 0 or y.shape[0] < 3:
        raise ValueError(f"cumulative_simpson_uniform: need an odd number (>= 3) of nodes, got {y.shape[0]}")
    first, middle, last = y[0:-2:2], y[1:-1:2], y[2::2]
    out = np.zeros(y.shape, dtype=np.result_type(y, float))
    out[2::2] = np.cumsum(h / 3.0 * (first + 4.0 * middle + last), axis=0)
    out[1::2] = out[0:-2:2] + h / 12.0 * (5.0 * first + 8.0 * middle - last)
    return out


class SetpointPD:
    """Controller for :func:`~flexmodal_ros.simulation.closed_loop.run_closed_loop`: the set-point law
    (2.2)-(2.3) with its set-point moving along the reference, τ_m = W⁻¹ comp(q^d(t)) +
    K_P (q_m^d(q^d(t)) − q_m) − K_D q̇_m, clipped at the effort limits (law ``"pd"``); ``shaper``
    as in :class:`~flexmodal_ros.control.FailSafeController`."""

    def __init__(self, model, shaper=None):
        self.model, self.shaper = model, shaper
        self.data = create_data(model)
        self.path = self._sample = None
        self.events = []

    def update_state(self, sample, received):
        self._sample = sample

    def set_trajectory(self, times, positions, start_time=None):
        path = PiecewiseC4Trajectory(times, positions)
        self.path = path if self.shaper is None else self.shaper(path)
        return getattr(self.path, "summary", "")

    def compute(self):
        s, m = self._sample, self.model
        q_ref = self.path.sample(s.t)[0] if self.path is not None else s.q
        tau = setpoint_reference(m, self.data, q_ref) - m.kp * s.q_m - m.kd * s.qd_m
        tau, sat = saturate(tau, m.effort_limit)
        return Command(tau, Mode.TRACKING, sat, q_ref)


@dataclass
class MoveResult:
    """One simulated move: the closed-loop log ``run`` (:class:`~flexmodal_ros.simulation.closed_loop.ClosedLoopResult`),
    tool positions ``p_ee`` (N, 3), the tracked ``reference`` (path or shaped), ``added_delay`` [s],
    the rest position ``p_rest`` (3,), the shaper's ``path_modes`` and its ``design``
    (:class:`~flexmodal_ros.shaping.shaper_design.DesignChoice`) (None unshaped)."""
    run: object
    p_ee: np.ndarray
    reference: object
    added_delay: float
    p_rest: np.ndarray
    path_modes: object
    design: object = None

    @property
    def end_time(self):
        """End of the tracked reference [s]."""
        return float(self.reference.duration)

    def residual(self, start=None, window=DEFAULT_WINDOW) -> ResidualVibration:
        return residual_vibration(self.run.t, self.p_ee, self.p_rest,
                                  self.end_time if start is None else start, window)


def controller_model(plant_model, stiffness_scale=1.0):
    """The controller's model: the plant's with its joint stiffness × ``stiffness_scale``."""
    if not (np.isfinite(stiffness_scale) and stiffness_scale > 0):
        raise InputError(f"stiffness_scale: must be > 0, got {stiffness_scale}")
    return plant_model if stiffness_scale == 1.0 else with_overrides(plant_model, k=plant_model.k * stiffness_scale)


def prepare_reference(plant_model, times, positions, shaping="none", law="pd", stiffness_scale=1.0,
                      shaper_design="auto", **shaping_options):
    """The reference :func:`simulate_move` tracks: the waypoint path, or it shaped by ``shaping``
    in ``shaper_design`` with the modes of the controller's model (a ShapedTrajectory carrying
    ``design`` and ``path_modes``, or a PassThrough when no mode qualifies)."""

    check_shaping(shaping)
    check_design(shaper_design)
    path = PiecewiseC4Trajectory(times, positions)
    if shaping == "none":
        return path
    shaper = ReferenceShaper(controller_model(plant_model, stiffness_scale), shaping, shaper_design=shaper_design,
                             law=law, **shaping_options)
    return shaper(path)


def simulate_move(plant_model, times, positions, shaping="none", law="pd", stiffness_scale=1.0, fixed=False,
                  settle=DEFAULT_WINDOW, until=None, dt=DEFAULT_DT, control_rate_hz=1000.0, command_delay_cycles=0,
                  shaper_design="auto", reference=None, **shaping_options) -> MoveResult:
    """Closed loop of ``law`` (module docstring) on the plant ``plant_model`` tracking the waypoints
    (times, positions), shaped by ``shaping`` (none | zv | zvd | ei) in the design
    ``shaper_design`` (fixed | robust | time-varying | auto, :mod:`flexmodal_ros.shaping.shaper_design`;
    ``fixed=True`` is ``shaper_design="fixed"``; ``shaping_options``: modes, threshold,
    max_damping, tolerance, ama_rate_hz, modal of
    :func:`~flexmodal_ros.shaping.shaper_design.shape_with_design`) with modes from the controller's
    model, whose joint stiffness is ``stiffness_scale`` × the plant's; simulated until the (shaped)
    reference ends + ``settle`` s, or until ``until`` s if later. The plant starts at rest under
    the controller's hold law at the first waypoint (with the model stiffness off, that is not the
    plant's own equilibrium there: starting from it left a start transient in the residual).
    ``reference``: an already shaped reference of these waypoints (e.g. from
    ``~/shape_trajectory``) tracked as is (``shaping`` only labels it)."""
    if law not in LAWS:
        raise InputError(f"law: unknown controller {shown(law)} (choose from {', '.join(LAWS)})")
    ctrl_model = controller_model(plant_model, stiffness_scale)
    if reference is None:
        reference = prepare_reference(plant_model, times, positions, shaping, law, stiffness_scale,
                                      "fixed" if fixed else shaper_design, **shaping_options)
    modes, choice = getattr(reference, "path_modes", None), getattr(reference, "design", None)
    given = _Precomputed(reference) if getattr(reference, "explicit", False) else None   # the controller gets it
    if law == "pd":
        ctrl = SetpointPD(ctrl_model, given)
    else:
        # offline study, as run_closed_loop: no speed limits checked (the thesis motion exceeds the URDF's)
        ctrl = FailSafeController(ctrl_model, law == "feedforward", limits=SafetyLimits(velocity_scale=np.inf))
        ctrl.shaper = given
    duration = max(float(reference.duration) + settle, until or 0.0)
    duration = np.ceil(duration * control_rate_hz - 1e-6) / control_rate_hz     # whole control periods
    start = None if ctrl_model is plant_model else held_start(plant_model, ctrl_model, np.asarray(positions, float)[0])
    plant = SimulatedPlant(plant_model, np.asarray(positions, float)[0], dt, initial_state=start)
    run = run_closed_loop(plant_model, times, positions, duration, control_rate_hz=control_rate_hz,
                          command_delay_cycles=command_delay_cycles, controller=ctrl, plant=plant)
    _, p_rest = rest_position(plant_model, ctrl_model, np.asarray(positions, float)[-1])
    return MoveResult(run, tool_positions(plant_model, run.q), reference,
                      float(getattr(reference, "added_delay", 0.0)), p_rest, modes, choice)


def compare_designs(plant_model, times, positions, shaping="zvd", law="pd", designs=("fixed", "auto"),
                    stiffness_scale=1.0, window=DEFAULT_WINDOW, dt=DEFAULT_DT, **shaping_options):
    """The move (times, positions) unshaped and shaped in each of ``designs``, simulated over one
    common window (:func:`compare`): ({"none": ..., design: ...} residual dicts with
    ``added_delay_s``, {design: DesignChoice or None}). A design whose reference is the same
    impulse sequence as one already simulated (auto choosing fixed) reuses that run: the same
    reference gives the same closed loop."""
    references = {"none": prepare_reference(plant_model, times, positions)}
    for name in sorted(designs, key=lambda d: d != "auto"):        # auto first: its candidates are reused
        schedules = getattr(getattr(references.get("auto"), "design", None), "schedules", {})
        if name in schedules:
            references[name] = ShapedTrajectory(references["none"], schedules[name], name, DEFAULT_KNOT_RATE_HZ)
            references[name].path_modes = references["auto"].path_modes
        else:
            references[name] = prepare_reference(plant_model, times, positions, shaping, law, stiffness_scale, name,
                                                 **shaping_options)
    end = max(float(r.duration) for r in references.values())
    runs, done = {}, {}
    for name, ref in references.items():
        chosen = getattr(getattr(ref, "design", None), "chosen", name)
        if chosen in done:
            runs[name] = done[chosen]
            continue
        runs[name] = done[chosen] = simulate_move(plant_model, times, positions, shaping, law, stiffness_scale,
                                                  reference=ref, until=end + window, dt=dt)
    return compare(runs, window), {name: getattr(r, "design", None) for name, r in references.items()}


def random_moves(model, seed, durations=(0.2, 1.0), margin=0.05, acceleration_per_velocity=10.0):
    """Endless random point-to-point moves (times (2,), positions (2, n)) of ``model`` from the
    NumPy generator ``seed``: start and goal uniform within the URDF position limits shrunk by
    ``margin`` × the range at each end, duration uniform in ``durations`` [s]; the move q_f − q_0 is
    then scaled down (same direction, the goal stays within the limits) until the 9th-order
    profile's peak speed 2.46 |Δq|/T and acceleration 9.37 |Δq|/T² (ETA_PEAKS) are within the
    URDF velocity limit and ``acceleration_per_velocity`` × it (the controller's default
    acceleration limit) on every joint: moves a controller accepts."""

    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.position_lower, float), np.asarray(model.position_upper, float)
    span = hi - lo
    lo, hi = lo + margin * span, hi - margin * span
    speed = np.where(np.isfinite(model.velocity_limit), model.velocity_limit, 10.0)
    while True:
        q0, goal = rng.uniform(lo, hi), rng.uniform(lo, hi)
        T = float(rng.uniform(*durations))
        move = goal - q0
        cap = np.minimum(speed * T / ETA_PEAKS[0], acceleration_per_velocity * speed * T * T / ETA_PEAKS[1])
        scale = min(1.0, float(np.min(cap / np.maximum(np.abs(move), 1e-12))))
        yield np.array([0.0, T]), np.array([q0, q0 + scale * move])


class _Precomputed:
    """A shaper returning an already shaped reference (what the controller's own shaper returns)."""

    def __init__(self, reference):
        self.reference = reference

    def __call__(self, path):
        return self.reference


def compare(results, window=DEFAULT_WINDOW) -> dict:
    """Residual vibration of labelled :class:`MoveResult` s over one common window starting at the
    end of the longest reference (module docstring): {label: ResidualVibration dict + added_delay_s}."""
    start = max(r.end_time for r in results.values())
    return {label: {**r.residual(start, window).to_dict(), "added_delay_s": r.added_delay}
            for label, r in results.items()}


def plot_residual(results, path, title="", window=DEFAULT_WINDOW):
    """PNG of the end-effector error ‖p_E − p_E,rest‖ [m] (log scale) of labelled
    :class:`MoveResult` s against time, each reference's end marked and the common settling window
    shaded."""
    # deferred: matplotlib
    import matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    start = max(r.end_time for r in results.values())
    fig, ax = plt.subplots(figsize=(10, 5))
    for k, (label, r) in enumerate(results.items()):
        color = plt.cm.tab10(k % 10)
        e = np.linalg.norm(r.p_ee - r.p_rest, axis=1)
        ax.semilogy(r.run.t, np.maximum(e, 1e-9), color=color, label=f"{label} (+{r.added_delay:.3f} s)")
        ax.axvline(r.end_time, color=color, linestyle=":")
    ax.axvspan(start, start + window, color="0.9", zorder=0, label="settling window")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("end-effector error |p_E - p_E,rest| [m]")
    ax.set_title(title or "end-effector residual vibration")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

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
from ..simulation import DEFAULT_DT, run_closed_loop
from ..robot.trajectory import PiecewiseC4Trajectory
from .reference import ShapedTrajectory, path_derivatives

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


def rest_position(plant_model, controller_model, q_goal):
    """(q_rest (n,), p_E,rest (3,)): static equilibrium of the plant (friction-free) under the hold
    law (2.2)-(2.3) of ``controller_model`` about q_goal: g_p(q) + K_p W (W q − q_m) = 0 and
    r − K_P q_m + K_p (W q − q_m) = 0 with r = :func:`~flexmodal_ros.flexible_joint.linear_model.setpoint_reference`
    of the controller model (scipy's hybrid Powell solver from q_goal; InputError if it fails)."""
    from ..robot.model import gravity_torque
    p, c = plant_model, controller_model
    data = create_data(p)
    n = p.n
    r = setpoint_reference(c, create_data(c), q_goal)
    W, k = p.W, p.k

    def residual(z):
        q, qm = z[:n], z[n:]
        spring = k * (W * q - qm)
        return np.concatenate([gravity_torque(p, data, q) + W * spring, r - c.kp * qm + spring])

    from scipy.optimize import root
    z = root(residual, np.concatenate([q_goal, r / c.kp]), method="hybr", tol=1e-13).x
    if np.abs(residual(z)).max() > 1e-8:
        raise InputError("rest position: the static equilibrium under the hold law was not found")
    return z[:n], tool_positions(p, [z[:n]])[0]


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


def progress(reference, t) -> np.ndarray:
    """Progress σ(t) and σ'(t) (module docstring) of a path or shaped reference: (m, 2)."""
    t = np.asarray(t, float)
    if isinstance(reference, ShapedTrajectory):
        A, tau = reference.schedule.at_times(reference.path, t)
        out = np.zeros((t.size, 2))
        for i in range(reference.schedule.num_impulses):
            u = t - tau[:, 0, i]
            _, p = path_derivatives(reference.path, u)
            out[:, 0] += A[:, 0, i] * p[:, 0]
            out[:, 1] += A[:, 1, i] * p[:, 0] + A[:, 0, i] * p[:, 1] * (1.0 - tau[:, 1, i])
        return out
    _, p = path_derivatives(reference, t)
    return p[:, :2]


def linearized_vibration(reference, path_modes, modes=None, rate_hz=2000.0) -> np.ndarray:
    """Percentage residual vibration V_k on the linearized model (module docstring) of the tracked
    modes ``modes`` (default: the selected ones) of :class:`~flexmodal_ros.shaping.PathModes`
    ``path_modes`` (computed for ``reference``'s path), for the path or shaped ``reference``."""
    from scipy.integrate import trapezoid  # deferred: scipy.integrate

    modes = path_modes.selected if modes is None else tuple(modes)
    t = np.linspace(0.0, reference.duration, max(3, int(np.ceil(reference.duration * rate_hz)) | 1))
    sig = progress(reference, t)
    sample_p = path_modes.segment + path_modes.eta               # path parameter of each AMA sample
    out = []
    for k in modes:
        lam = -path_modes.damping_ratios[:, k] + 1j * np.sqrt(1.0 - path_modes.damping_ratios[:, k] ** 2)
        lam = lam * 2.0 * np.pi * path_modes.frequencies_hz[:, k]
        at = np.interp(sig[:, 0], sample_p, lam.real) + 1j * np.interp(sig[:, 0], sample_p, lam.imag)
        phase = cumulative_simpson_uniform(at, t[1] - t[0])         # ∫_0^t λ
        weight = np.exp(phase[-1] - phase)                           # exp(∫_t^{t_e} λ)
        total = sig[-1, 0] - sig[0, 0]
        out.append(abs(trapezoid(sig[:, 1] * weight, t)) / (total if total else 1.0))
    return np.array(out)


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
    the rest position ``p_rest`` (3,) and the shaper's ``path_modes`` (None unshaped)."""
    run: object
    p_ee: np.ndarray
    reference: object
    added_delay: float
    p_rest: np.ndarray
    path_modes: object

    @property
    def end_time(self):
        """End of the tracked reference [s]."""
        return float(self.reference.duration)

    def residual(self, start=None, window=DEFAULT_WINDOW) -> ResidualVibration:
        return residual_vibration(self.run.t, self.p_ee, self.p_rest,
                                  self.end_time if start is None else start, window)


def simulate_move(plant_model, times, positions, shaping="none", law="pd", stiffness_scale=1.0, fixed=False,
                  settle=DEFAULT_WINDOW, until=None, dt=DEFAULT_DT, control_rate_hz=1000.0, command_delay_cycles=0,
                  **shaping_options) -> MoveResult:
    """Closed loop of ``law`` (module docstring) on the plant ``plant_model`` tracking the waypoints
    (times, positions), shaped by ``shaping`` (none | zv | zvd | ei; ``fixed``: the shaper of the
    start configuration; ``shaping_options``: modes, threshold, max_damping, tolerance,
    ama_rate_hz, modal of :func:`~flexmodal_ros.shaping.schedule.shape_trajectory`) with modes from the
    controller's model, whose joint stiffness is ``stiffness_scale`` × the plant's; simulated until
    the (shaped) reference ends + ``settle`` s, or until ``until`` s if later."""
    move = prepare_move(plant_model, times, positions, shaping, law, stiffness_scale, fixed, **shaping_options)
    return move.run(settle, until, dt, control_rate_hz, command_delay_cycles)


def simulate_moves(plant_model, times, positions, variants, settle=DEFAULT_WINDOW, dt=DEFAULT_DT,
                   control_rate_hz=1000.0, command_delay_cycles=0, **common) -> dict:
    """Several variants of one move compared over one settling window: ``variants`` {label:
    dict(shaping=..., fixed=..., **shaping options)}; every reference is shaped first, then every
    variant is simulated until the end of the *longest* reference + ``settle`` s, so the common
    window of :func:`compare` lies inside every run. ``common``: law, stiffness_scale."""
    moves = {label: prepare_move(plant_model, times, positions, **{**common, **spec})
             for label, spec in variants.items()}
    until = max(m.end_time for m in moves.values()) + settle
    return {label: m.run(settle, until, dt, control_rate_hz, command_delay_cycles) for label, m in moves.items()}


def prepare_move(plant_model, times, positions, shaping="none", law="pd", stiffness_scale=1.0, fixed=False,
                 **shaping_options) -> "PreparedMove":
    """The (shaped) reference and the controller of :func:`simulate_move`, before simulating."""
    from . import ReferenceShaper, check_shaping

    check_shaping(shaping)
    if law not in LAWS:
        raise InputError(f"law: unknown controller {law!r} (choose from {', '.join(LAWS)})")
    if not (np.isfinite(stiffness_scale) and stiffness_scale > 0):
        raise InputError(f"stiffness_scale: must be > 0, got {stiffness_scale}")
    ctrl_model = plant_model if stiffness_scale == 1.0 else with_overrides(plant_model, k=plant_model.k * stiffness_scale)
    shaper = None if shaping == "none" else ReferenceShaper(ctrl_model, shaping,
                                                            fixed=fixed, **shaping_options)
    path = PiecewiseC4Trajectory(times, positions)
    reference = path if shaper is None else shaper(path)
    modes = None if shaper is None else shaper.last_modes
    return PreparedMove(plant_model, ctrl_model, law, np.asarray(times, float), np.asarray(positions, float),
                        reference, modes, shaper is not None)


@dataclass
class PreparedMove:
    """A move whose reference is shaped (:func:`prepare_move`); :meth:`run` simulates it."""
    plant_model: object
    ctrl_model: object
    law: str
    times: np.ndarray
    positions: np.ndarray
    reference: object
    path_modes: object
    shaped: bool

    @property
    def end_time(self):
        return float(self.reference.duration)

    def run(self, settle=DEFAULT_WINDOW, until=None, dt=DEFAULT_DT, control_rate_hz=1000.0,
            command_delay_cycles=0) -> MoveResult:
        """Simulated until the reference ends + ``settle`` s, or until ``until`` s if later."""
        given = _Precomputed(self.reference) if self.shaped else None    # the controller gets this result
        if self.law == "pd":
            ctrl = SetpointPD(self.ctrl_model, given)
        else:
            # offline study, as run_closed_loop: no speed limits checked (the thesis motion exceeds the URDF's)
            ctrl = FailSafeController(self.ctrl_model, self.law == "feedforward",
                                      limits=SafetyLimits(velocity_scale=np.inf))
            ctrl.shaper = given
        duration = max(self.end_time + settle, until or 0.0)
        duration = np.ceil(duration * control_rate_hz - 1e-6) / control_rate_hz     # whole control periods
        run = run_closed_loop(self.plant_model, self.times, self.positions, duration, control_rate_hz=control_rate_hz,
                              dt=dt, command_delay_cycles=command_delay_cycles, controller=ctrl)
        _, p_rest = rest_position(self.plant_model, self.ctrl_model, self.positions[-1])
        return MoveResult(run, tool_positions(self.plant_model, run.q), self.reference,
                          float(getattr(self.reference, "added_delay", 0.0)), p_rest, self.path_modes)


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
    import matplotlib
    matplotlib.use("Agg")
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

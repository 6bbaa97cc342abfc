"""Which shaper along a path: fixed, robust, time-varying, or the one predicted best (no rclpy).

Designs (``shaper_design``; the shaper family zv | zvd | ei is chosen separately):

- ``fixed``: the family's shaper of the selected modes at the start configuration, used for the
  whole move (the fixed-frequency practice);
- ``robust``: one constant impulse sequence, as long as the family's shaper (convolved over the
  selected modes) designed at each mode's *lowest* frequency along the path, whose residual is
  small for the eigenvalues every selected mode takes along the path and for those scaled by
  1 ± ``ROBUST_DELTA`` (±10 % in frequency, same ζ: about ±20 % of joint stiffness in the model):
  a specified-insensitivity design (Singhose, Seering & Singer 1996 bound the residual at sampled
  frequencies of the band a shaper must cover instead of at one design frequency) made for the
  band the path traverses. The residual constraints are the predicted modal amplitudes
  (:mod:`flexmodal_ros.shaping.prediction`), linear in the amplitudes A_j ≥ 0 of impulses on a
  time grid (8 per period of the fastest mode): a non-negative least-squares problem (Σ A = 1 as
  a heavily weighted row, then normalized; SciPy's ``nnls``), the eigenvalues along the path
  taken from the progress of the previous solution (``ROBUST_ITERATIONS`` rounds from the fixed
  shaper);
- ``time-varying``: the configuration-dependent schedule (the family's shaper designed at every
  path sample, :func:`~flexmodal_ros.shaping.schedule.shaper_schedule`);
- ``auto`` (default): the three above are built, their residual predicted and the rule below
  picks one.

**Prediction** of a design [m]: the sum over the tracked modes (≤ 100 Hz) of c_k |a_k(t_c)|
(linearized model along the path, :mod:`flexmodal_ros.shaping.prediction`), at one common time
t_c, the end of the longest candidate (a shorter design is credited with the decay it gets while
a longer one still runs: the convention of the simulated comparisons,
:func:`~flexmodal_ros.shaping.vibration.compare`); the reported residual adds the second-order
estimate below, which the rule leaves out (it is the same for every candidate).

**Rule of ``auto``** (added duration as the cost): R_min = the smallest predicted residual of the
three on the linearized model; fixed is as good as the best within the model's accuracy when
R_fixed ≤ (1 + ``SWITCH_MARGIN``)·R_min (the standard practice keeps its place unless another design
is predicted at least 1.5× better), the other two when R ≤ (1 + ``AUTO_MARGIN``)·R_min
(10 %) and R ≤ R_fixed; of those, the one with the shortest added delay is chosen (ties: fixed, then time-varying, then
robust). The choice is thus never predicted worse than the fixed shaper, and a longer design is
taken only for a predicted gain above the margin. The margins come from the random-move benchmark
(``benchmarks/bench_shaper_design.py``): the linearized prediction ranks two designs as the
simulation does when they differ by 1.5× or more, not always below (seed 1, kuka_lwr4: a design
predicted 1.44× better than fixed was 1.18× worse in simulation, at the Coriolis floor). ``reason`` says which and
why, with every candidate's prediction and delay.

**Modes**: those of :func:`~flexmodal_ros.shaping.schedule.path_modes` (end-effector step
contribution) plus those the unshaped move is predicted to excite (:func:`excited_modes`), at most
``MAX_SHAPED_MODES`` (4: the ones with the largest predicted unshaped residual; a convolved ZVD of
7 modes has 2187 impulses and a delay of 7 half-periods or more); the others are reported with
what the shaper does not treat. An explicit ``modes`` list is used as given.

**What the shaper does not treat** (:class:`Untreated`, reported with every design): (1) tracked
modes that are not shaped (damping ratio ≥ the selection limit, e.g. overdamped servo modes, or
below the contribution threshold), predicted as above; (2) the velocity-dependent (Coriolis and
centrifugal) torques C(y, ẏ)ẏ of the reference, second order in the move and absent from the
linearized model: their modal amplitudes ‖J_p u_q‖ |∫ u_qᵀ (−C ẏ) / (uᵀ(2λM̄ + D̄)u) e^{∫λ} dt|
with the mode shapes of ``SHAPE_POINTS`` configurations along the path, an estimate of the floor
that large fast moves reach (within a factor ~3 either way of what the simulation shows on
kuka_lwr4; the same for every candidate in the rule above, computed on the shortest); (3) with a PD law
without static compensation while tracking (``law="pd_only"``) the step of the motor reference
when the hold law takes over at the end, r_hold(q_f) − K_P W q_f, which excites the modes
whatever the shaping (amplitudes from the residue formula with b = that step, decayed to t_c);
(4) Coulomb friction of the model (D_c,m, D_c): an estimate of the band within which the motors
stick, ‖J_p (D_c,m/(K_P W) + D_c/K)‖ [m] at the goal (non-modal; with no link damping the links
ring at about that amplitude whatever the command). Their *share* = untreated / (untreated +
shaped modes' predicted residual); above 1/2, and above 1 % of the unshaped residual (so that they
cap the reduction below 100×), the residual is said to be dominated by them
(:attr:`DesignChoice.dominated`), and callers print that, with the share, instead of a reduction
figure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.blas import single_thread_blas
from ..core.errors import InputError
from ..flexible_joint.linear_model import setpoint_reference
from ..flexible_joint.ama import linearized_batch, modal_analysis
from ..robot.model import create_data, ee_jacobian, velocity_torques
from ..robot.trajectory import ETA_PEAKS, PiecewiseC4Trajectory
from .prediction import (PREDICTION_RATE_HZ, _path_parameter, copy_amplitudes, modal_amplitudes, path_eigenvalues,
                         progress, trapezoid_weights, wkb_weights)
from .reference import ShapedTrajectory, ShaperSchedule, path_derivatives
from .schedule import end_effector_contributions, path_modes, shaper_schedule
from .schedule import DEFAULT_AMA_RATE_HZ, DEFAULT_MAX_DAMPING, DEFAULT_THRESHOLD
from .schedule import DEFAULT_EXPANSION_ORDER, DEFAULT_EXPANSION_TOLERANCE
from .shapers import DEFAULT_TOLERANCE, KINDS, convolve, design

DESIGNS = ("fixed", "robust", "time-varying", "auto")
DEFAULT_DESIGN = "auto"
AUTO_MARGIN = 0.10
SWITCH_MARGIN = 0.5            # fixed stays unless another design is predicted (1 + this)× better
DOMINATED_SHARE = 0.5
LIMITING_FRACTION = 0.01       # untreated parts above this × the unshaped residual cap the reduction
ROBUST_DELTA = 0.10            # eigenvalues scaled by 1 ± this in the robust design's constraints
ROBUST_WEIGHT = 0.5            # weight of those constraints against the nominal ones
ROBUST_ITERATIONS = 2
ROBUST_STEPS_PER_PERIOD = 8    # impulse grid points per period of the fastest selected mode
MAX_SHAPED_MODES = 4           # convolved shapers of more modes: ≥ 3⁵ impulses (ZVD), a long delay
SHAPE_POINTS = 5               # mode shapes along the path for the second-order estimate
SECOND_ORDER_SAMPLES_PER_PERIOD = 8
_SUM_WEIGHT = 30.0             # weight of the Σ A = 1 row, relative to the largest constraint entry
_TIE_ORDER = ("fixed", "time-varying", "robust")


def check_design(value, error=InputError, field="shaper_design"):
    """``value`` if it is one of fixed, robust, time-varying, auto; else ``error`` naming the choices."""
    if value not in DESIGNS:
        raise error(f"{field}: unknown value {value!r} (choose from {', '.join(DESIGNS)})")
    return value


@dataclass(frozen=True)
class Prediction:
    """Predicted end-effector residual of one design (module docstring): ``added_delay_s``,
    ``per_mode_m`` (K,) per tracked mode at the common time on the linearized model (NaN: above
    the predicted range), ``second_order_m`` the Coriolis/centrifugal estimate."""
    design: str
    added_delay_s: float
    per_mode_m: np.ndarray
    second_order_m: float = 0.0

    @property
    def linear_m(self) -> float:
        return float(np.nansum(self.per_mode_m))

    @property
    def total_m(self) -> float:
        return self.linear_m + self.second_order_m

    def with_second_order(self, value):
        return Prediction(self.design, self.added_delay_s, self.per_mode_m, float(value))


@dataclass(frozen=True)
class Untreated:
    """What the shaper does not treat (module docstring) for the chosen design [m] at the common
    time: ``modes_m`` per unshaped tracked mode {1-based mode: residual}, ``second_order_m``
    (Coriolis/centrifugal), ``switch_step_m`` (PD law without compensation), ``coulomb_m``
    (friction band estimate), ``treated_m`` the shaped modes' predicted residual; ``share``
    untreated / total."""
    modes_m: dict
    second_order_m: float
    switch_step_m: float
    coulomb_m: float
    treated_m: float

    @property
    def total_m(self) -> float:
        return float(sum(self.modes_m.values()) + self.second_order_m + self.switch_step_m + self.coulomb_m)

    @property
    def share(self) -> float:
        whole = self.total_m + self.treated_m
        return self.total_m / whole if whole > 0 else 0.0

    @property
    def dominates(self) -> bool:
        return self.share > DOMINATED_SHARE

    def describe(self) -> str:
        """One line: the untreated parts and their share of the predicted residual."""
        parts = []
        if self.modes_m:
            big = sorted(self.modes_m.items(), key=lambda kv: -kv[1])[:3]
            parts.append("modes not shaped " + ", ".join(f"{k} ({v:.2g} m)" for k, v in big))
        if self.second_order_m:
            parts.append(f"Coriolis/centrifugal excitation (~{self.second_order_m:.2g} m, estimate)")
        if self.switch_step_m:
            parts.append(f"the step to the hold law at the end of a PD-only reference ({self.switch_step_m:.2g} m)")
        if self.coulomb_m:
            parts.append(f"Coulomb friction band (~{self.coulomb_m:.2g} m)")
        what = "; ".join(parts) if parts else "nothing"
        return f"{100 * self.share:.0f} % of the predicted residual is what the shaper does not treat: {what}"

    def to_dict(self) -> dict:
        return {"share": self.share, "dominates": self.dominates, "modes_m": {str(k): v for k, v in self.modes_m.items()},
                "second_order_m": self.second_order_m, "switch_step_m": self.switch_step_m,
                "coulomb_m": self.coulomb_m, "treated_m": self.treated_m, "description": self.describe()}


@dataclass(frozen=True)
class DesignChoice:
    """The design used for a path: ``requested`` (fixed | robust | time-varying | auto), ``chosen``,
    ``reason``; ``predictions`` {design: :class:`Prediction`} of the candidates evaluated (one for
    an explicit design, three for auto) and ``unshaped``; ``common_time_s`` t_c; ``untreated``
    (:class:`Untreated`), ``selected`` tracked modes (0-based) and the candidates' ``schedules``."""
    requested: str
    chosen: str
    reason: str
    predictions: dict
    unshaped: Prediction
    common_time_s: float
    untreated: Untreated
    selected: tuple = field(default_factory=tuple)
    schedules: dict = field(default_factory=dict, repr=False, compare=False)   # {design: ShaperSchedule}

    @property
    def predicted(self) -> Prediction:
        return self.predictions[self.chosen]

    @property
    def dominated(self) -> bool:
        """The untreated parts are most of the predicted residual and more than
        ``LIMITING_FRACTION`` of the unshaped one (they cap the reduction below 100×): callers say
        so instead of giving a reduction figure."""
        return self.untreated.dominates and self.untreated.total_m > LIMITING_FRACTION * self.unshaped.total_m

    @property
    def predicted_reduction(self) -> float:
        """Unshaped / chosen predicted residual (the parts no shaping changes included in both)."""
        extra = self.untreated.switch_step_m + self.untreated.coulomb_m
        return (self.unshaped.total_m + extra) / max(self.predicted.total_m + extra, 1e-300)

    def summary(self) -> str:
        """One line for ~/status and the CLI."""
        p = self.predicted
        line = (f"design {self.chosen}" + (f" (auto: {self.reason})" if self.requested == "auto" else "")
                + f", predicted residual {p.total_m:.3g} m (unshaped {self.unshaped.total_m:.3g} m)")
        if self.dominated:
            return line + "; WARNING residual dominated by what the shaper does not treat: " + self.untreated.describe()
        return line + f", predicted reduction {self.predicted_reduction:.3g}x"

    def to_dict(self) -> dict:
        def pred(p):
            return {"added_delay_s": p.added_delay_s, "predicted_residual_m": p.total_m,
                    "second_order_m": p.second_order_m,
                    "predicted_residual_per_mode_m": [None if np.isnan(v) else float(v) for v in p.per_mode_m]}
        return {"requested": self.requested, "chosen": self.chosen, "reason": self.reason,
                "common_time_s": self.common_time_s, "candidates": {k: pred(v) for k, v in self.predictions.items()},
                "unshaped": pred(self.unshaped), "untreated": self.untreated.to_dict(),
                "dominated": self.dominated, "predicted_reduction": None if self.dominated else self.predicted_reduction}


def constant_schedule(segment, eta, amplitudes, delays, kind) -> ShaperSchedule:
    """A :class:`ShaperSchedule` holding one impulse sequence along the whole path."""
    m = np.asarray(eta).size
    return ShaperSchedule(np.asarray(segment), np.asarray(eta), np.tile(amplitudes, (m, 1)),
                          np.tile(delays, (m, 1)), kind)


def robust_schedule(pm, path, kind, tolerance=DEFAULT_TOLERANCE) -> ShaperSchedule:
    """Constant schedule of the robust design (module docstring) for the selected modes of ``pm``
    along ``path``. InputError if the least-squares iterations fail."""
    from scipy.optimize import nnls   # deferred: scipy.optimize (imported by ReferenceShaper up front)

    sel = list(pm.selected)
    if not sel:
        raise InputError("modes: no mode selected for shaping")
    f, z = pm.frequencies_hz[:, sel], pm.damping_ratios[:, sel]
    lowest = f.argmin(axis=0)
    duration = float(convolve(*(design(kind, f[i, j], z[i, j], tolerance) for j, i in enumerate(lowest))).duration)
    start = convolve(*(design(kind, f[0, j], z[0, j], tolerance) for j in range(len(sel))))
    fastest = float(f.max()) * (1.0 + ROBUST_DELTA)
    steps = int(np.clip(np.ceil(duration * fastest * ROBUST_STEPS_PER_PERIOD), 16, 160))
    delays = np.linspace(0.0, duration, steps + 1)
    end = path.duration + duration
    t = np.linspace(0.0, end, int(np.ceil(end * max(200.0, 20.0 * fastest))) + 1)
    scales = (1.0, 1.0 - ROBUST_DELTA, 1.0 + ROBUST_DELTA)
    weights = np.array([1.0, ROBUST_WEIGHT, ROBUST_WEIGHT])[:, None, None] * pm.contributions[sel][None, :, None]
    A, tau = start.amplitudes, start.times
    for _ in range(ROBUST_ITERATIONS):
        sigma = _path_parameter(path, t[:, None] - tau[None, :])[0] @ A       # progress of the last solution
        rows = (copy_amplitudes(path, pm, sel, delays, sigma, t, scales) * weights).reshape(-1, delays.size)
        scale = _SUM_WEIGHT * np.abs(rows).max()
        matrix = np.vstack([rows.real, rows.imag, np.full((1, delays.size), scale)])
        target = np.zeros(matrix.shape[0])
        target[-1] = scale
        try:
            x, _ = nnls(matrix, target, maxiter=50 * delays.size)
        except RuntimeError as exc:          # the active-set iterations did not converge
            raise InputError(f"robust design: no solution ({exc})") from None
        x = np.where(x > 1e-9 * x.sum(), x, 0.0)
        keep = x > 0
        keep[0] = True                        # the sequence starts at t = 0
        if not x.sum() > 0:
            raise InputError("robust design: no solution")
        A, tau = x[keep] / x[keep].sum(), delays[keep]
    return constant_schedule(pm.segment, pm.eta, A, tau, f"robust {kind}")


def design_schedule(pm, path, kind, shaper_design, tolerance=DEFAULT_TOLERANCE) -> ShaperSchedule:
    """Schedule of an explicit design ("fixed", "robust", "time-varying") for the selected modes."""
    if shaper_design == "robust":
        return robust_schedule(pm, path, kind, tolerance)
    if shaper_design in ("fixed", "time-varying"):
        return shaper_schedule(pm, kind, tolerance, fixed=shaper_design == "fixed")
    raise InputError(f"shaper_design: {shaper_design!r} is not an explicit design (fixed, robust, time-varying)")


def _predict(reference, pm, end, name, rate_hz):
    amp = modal_amplitudes(reference, pm, end=end, rate_hz=rate_hz)
    return Prediction(name, float(getattr(reference, "added_delay", 0.0)), pm.contributions * np.abs(amp))


@dataclass(frozen=True)
class ModalForcing:
    """Mode shapes of the tracked modes at ``points`` (sample indices) along a path, for modal
    forcing: ``shapes`` (P, n, K) link rows u_q / (uᵀ(2λM̄ + D̄)u), ``gain`` (K,) ‖J_p u_q‖ at the
    last point (m per unit modal amplitude)."""
    points: np.ndarray
    shapes: np.ndarray
    gain: np.ndarray

    def amplitudes(self, model, pm, Y, t, sigma) -> np.ndarray:
        """Complex modal amplitudes (K,) at t[-1] of the Coriolis and centrifugal torques along the
        reference samples ``Y`` (count, ≥2, n) (q, q̇) at the grid ``t`` with progress ``sigma``."""
        torque = -velocity_torques(model, create_data(model), Y[:, 0], Y[:, 1])         # link forcing −C(q, q̇)q̇
        sample_p = pm.segment + pm.eta
        near = np.abs(sigma[:, None] - sample_p[self.points][None, :]).argmin(axis=1)
        force = np.einsum("cn,cnk->ck", torque, self.shapes[near])
        weight = wkb_weights(pm, range(pm.frequencies_hz.shape[1]), sigma, t)[0]
        return (trapezoid_weights(t)[:, None] * force * weight).sum(axis=0)


def modal_forcing(model, pm) -> ModalForcing:
    """:class:`ModalForcing` at ``SHAPE_POINTS`` samples of ``pm`` (evenly spaced, both ends)."""
    K, n = pm.frequencies_hz.shape[1], model.n
    points = np.unique(np.linspace(0, pm.eta.size - 1, SHAPE_POINTS).round().astype(int))
    lam = path_eigenvalues(pm)
    data = create_data(model)
    shapes = np.zeros((points.size, n, K), complex)
    for i, s in enumerate(points):
        q = pm.configurations[s]
        result = modal_analysis(model, q, data)
        (M, D, _), _ = linearized_batch(model, data, q[None, :])
        u = result.mode_shapes[:, np.abs(result.eigenvalues[None, :] - lam[s][:, None]).argmin(axis=1)]
        norm = 2.0 * lam[s] * np.einsum("ik,ij,jk->k", u, M[0], u) + np.einsum("ik,ij,jk->k", u, D[0], u)
        shapes[i] = u[:n] / norm
    gain = np.linalg.norm(ee_jacobian(model, data, q)[:3] @ u[:n], axis=0)
    return ModalForcing(points, shapes, gain)


def second_order(model, pm, reference, end, forcing) -> np.ndarray:
    """Estimate (K,) [m] of the residual each tracked mode gets from the Coriolis and centrifugal
    torques of ``reference`` (module docstring), at time ``end``: on a grid of
    ``SECOND_ORDER_SAMPLES_PER_PERIOD`` samples per period of the fastest selected mode (an
    estimate: (ωh)²/12 ≈ 5 %), 0 for the modes faster than that."""
    modes = list(range(pm.frequencies_hz.shape[1]))
    fastest = pm.frequencies_hz.max(axis=0)
    rate = max(100.0, SECOND_ORDER_SAMPLES_PER_PERIOD * float(fastest[list(pm.selected)].max()))
    duration = float(reference.duration)
    t = np.linspace(0.0, duration, max(3, int(np.ceil(duration * rate)) + 1))
    Y = reference.evaluate(t) if isinstance(reference, ShapedTrajectory) else path_derivatives(reference, t)[0]
    amplitude = np.abs(forcing.amplitudes(model, pm, Y, t, progress(reference, t)[:, 0]))
    if end > duration:
        amplitude = amplitude * np.exp(path_eigenvalues(pm, modes)[-1].real * (end - duration))
    amplitude[fastest > rate / SECOND_ORDER_SAMPLES_PER_PERIOD] = 0.0
    return forcing.gain * amplitude


def choose(predictions: dict) -> tuple[str, str]:
    """(design, reason) by the rule of ``auto`` (module docstring) from {design: Prediction}."""
    p = predictions
    best = min(x.linear_m for x in p.values())
    limit = {name: (1.0 + AUTO_MARGIN) * best for name in p}
    if "fixed" in p:
        limit = {name: min(value, p["fixed"].linear_m) for name, value in limit.items()}
        limit["fixed"] = (1.0 + SWITCH_MARGIN) * best
    good = [name for name in _TIE_ORDER if name in p and p[name].linear_m <= limit[name]]
    chosen = min(good, key=lambda name: (p[name].added_delay_s, _TIE_ORDER.index(name)))
    listed = ", ".join(f"{k} {p[k].linear_m:.3g} m +{p[k].added_delay_s:.3f} s" for k in _TIE_ORDER if k in p)
    if len(good) == 1:
        why = "lowest predicted residual" + (f", > {1 + SWITCH_MARGIN:g}x below fixed" if chosen != "fixed" else "")
    else:
        why = (f"shortest of {', '.join(good)} (predicted within {100 * AUTO_MARGIN:.0f} % of the lowest; "
               f"fixed within {1 + SWITCH_MARGIN:g}x)")
    return chosen, f"{why}; predicted {listed}"


def untreated_parts(model, pm, prediction, common_time, end_time, law="pd") -> Untreated:
    """:class:`Untreated` (module docstring) for the ``prediction`` of the chosen design."""
    sel = set(pm.selected)
    per = prediction.per_mode_m
    modes = {k + 1: float(per[k]) for k in range(per.size) if k not in sel and np.isfinite(per[k]) and per[k] > 0}
    treated = float(np.nansum(per[list(sel)])) if sel else 0.0
    q_goal = pm.configurations[-1]
    data = create_data(model)
    switch = 0.0
    if law == "pd_only":
        goal = modal_analysis(model, q_goal, data)
        step = setpoint_reference(model, data, q_goal) - model.kp * model.W * q_goal
        amp = end_effector_contributions(model, data, q_goal, step / (model.kp * model.W), goal)
        switch = float(np.sum(amp * np.exp(goal.eigenvalues.real * max(common_time - end_time, 0.0))))
    coulomb = 0.0
    if np.any(model.d_cm > 0) or np.any(model.d_c > 0):
        band = model.d_cm / (model.kp * model.W) + model.d_c / model.k      # stick band in link units [rad or m]
        coulomb = float(np.linalg.norm(ee_jacobian(model, data, q_goal)[:3] @ band))
    return Untreated(modes, prediction.second_order_m, switch, coulomb, treated)


def excited_modes(pm, path, threshold=DEFAULT_THRESHOLD, max_damping=DEFAULT_MAX_DAMPING,
                  rate_hz=PREDICTION_RATE_HZ) -> tuple:
    """(modes, residual): tracked modes (0-based) that the unshaped move excites — damping ratio
    below ``max_damping`` along the path and predicted unshaped residual c_k |a_k| at least
    ``threshold`` × the largest of those — and that residual (K,) [m]. The contribution selection
    of :func:`~flexmodal_ros.shaping.schedule.path_modes` compares step amplitudes, which misses a
    slow mode that a move of this duration excites much more than its step amplitude says
    (kuka_lwr4: a 3.8 Hz mode with 5 % of the largest step amplitude but most of the unshaped
    residual); :func:`shape_with_design` adds these."""
    calm = pm.damping_ratios.max(axis=0) < max_damping
    residual = np.nan_to_num(pm.contributions * np.abs(modal_amplitudes(path, pm, rate_hz=rate_hz)))
    residual[~calm] = 0.0
    if not residual.max() > 0:
        return (), residual
    return tuple(int(k) for k in np.flatnonzero(residual >= threshold * residual.max())), residual


@single_thread_blas           # many small products: BLAS threads only cost (flexmodal_ros.core.blas)
def shape_with_design(model, path: PiecewiseC4Trajectory, kind: str, shaper_design=DEFAULT_DESIGN, *, modes=None,
                      threshold=DEFAULT_THRESHOLD, max_damping=DEFAULT_MAX_DAMPING, tolerance=DEFAULT_TOLERANCE,
                      ama_rate_hz=DEFAULT_AMA_RATE_HZ, knot_rate_hz=None, workers=None, modal="exact",
                      expansion_order=DEFAULT_EXPANSION_ORDER, expansion_tolerance=DEFAULT_EXPANSION_TOLERANCE,
                      law="pd", prediction_rate_hz=PREDICTION_RATE_HZ):
    """Shape ``path`` with the ``kind`` shaper ("zv", "zvd", "ei") of its selected modes in the
    design ``shaper_design`` (module docstring), from the ``modal`` modes along it
    (:func:`~flexmodal_ros.shaping.schedule.path_modes`). ``law``: the controller the residual is
    predicted for ("pd", "feedforward": the reference through the PD's motor reference; "pd_only":
    plus the step to the hold law at the end). Returns (ShapedTrajectory or None when no mode is
    selected, PathModes, DesignChoice or None); the ShapedTrajectory carries both as ``design``
    and ``path_modes``, and its summary says the design, why and the predicted residual."""
    if kind not in KINDS:
        raise InputError(f"shaping: unknown shaper {kind!r} (choose from none, {', '.join(KINDS)})")
    check_design(shaper_design)
    if path.times.size < 2:
        raise InputError("trajectory: at least 2 waypoints are needed to shape a motion")
    def analysed(override):
        return path_modes(model, path, ama_rate_hz, override, threshold, max_damping, workers=workers, modal=modal,
                          expansion_order=expansion_order, expansion_tolerance=expansion_tolerance)

    pm = analysed(modes)
    if modes is None:
        excited, residual = excited_modes(pm, path, threshold, max_damping, prediction_rate_hz)
        wanted = set(pm.selected) | set(excited)
        if len(wanted) > MAX_SHAPED_MODES:       # the ones the move excites most
            wanted = set(sorted(wanted, key=lambda k: -residual[k])[:MAX_SHAPED_MODES])
        if wanted != set(pm.selected):
            pm = analysed(sorted(wanted))
    if not pm.selected:
        return None, pm, None
    forcing = modal_forcing(model, pm)
    candidates, failed = {}, []
    for name in (_TIE_ORDER if shaper_design == "auto" else (shaper_design,)):
        try:
            candidates[name] = ShapedTrajectory(path, design_schedule(pm, path, kind, name, tolerance))
        except InputError as exc:            # auto goes on without that design, and says so
            if shaper_design != "auto":
                raise
            failed.append(f"{name} not available: {exc}")
    common = max(c.duration for c in candidates.values())
    # the second-order estimate of the shortest candidate stands for all (same speeds within the delays)
    first = min(candidates, key=lambda name: candidates[name].duration)
    floor = float(np.sum(second_order(model, pm, candidates[first], common, forcing)))
    predictions = {name: _predict(c, pm, common, name, prediction_rate_hz).with_second_order(floor)
                   for name, c in candidates.items()}
    unshaped = _predict(path, pm, common, "none", prediction_rate_hz)
    unshaped = unshaped.with_second_order(np.sum(second_order(model, pm, path, common, forcing)))
    if shaper_design == "auto":
        chosen, reason = choose(predictions)
        reason = "; ".join([reason] + failed)
    else:
        chosen, reason = shaper_design, "requested"
    untreated = untreated_parts(model, pm, predictions[chosen], common, candidates[chosen].duration, law)
    choice = DesignChoice(shaper_design, chosen, reason, predictions, unshaped, common, untreated, pm.selected,
                          {name: c.schedule for name, c in candidates.items()})
    sel = list(pm.selected)
    f0, f1 = pm.frequencies_hz[0, sel], pm.frequencies_hz[-1, sel]
    summary = (f"shaped {kind} on mode(s) {', '.join(str(k + 1) for k in sel)} "
               f"({', '.join(f'{a:.3g}->{b:.3g}' for a, b in zip(f0, f1))} Hz)")
    traj = ShapedTrajectory(path, candidates[chosen].schedule, summary, knot_rate_hz)
    traj.summary = f"{summary}, added delay {traj.added_delay:.4f} s; {choice.summary()}"
    traj.design, traj.path_modes = choice, pm
    return traj, pm, choice


# --- shaped samples for any trajectory controller (the modal server's ~/shape_trajectory) ------------
@dataclass(frozen=True)
class ShapedSamples:
    """A shaped reference sampled for a trajectory controller: ``times`` (m,) [s] from 0 to the
    end (the last sample at the end), ``positions``, ``velocities``, ``accelerations`` (m, n) in
    URDF joint order; ``reference`` (ShapedTrajectory, or the path itself when no mode
    qualifies), ``path_modes``, ``design`` (:class:`DesignChoice` or None) and ``message`` (the
    summary, or why it was passed through)."""
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    reference: object
    path_modes: object
    design: object
    message: str

    @property
    def added_delay(self) -> float:
        return float(getattr(self.reference, "added_delay", 0.0))


def rate_limits(model, acceleration_per_velocity=10.0):
    """(velocity, acceleration) limits (n,) of the controller's defaults: the URDF velocity limit
    (10 rad/s or m/s where it gives none) and ``acceleration_per_velocity`` × it (the URDF has no
    acceleration limits; :class:`~flexmodal_ros.control.law.SafetyLimits`)."""
    velocity = np.where(np.isfinite(model.velocity_limit), model.velocity_limit, 10.0)
    return velocity, acceleration_per_velocity * velocity


def _check_within(model, what, values, limit, times, unit):
    bad = np.argwhere(np.abs(values) > limit * (1.0 + 1e-6))
    if bad.size:
        i, j = bad[0]
        over = float(np.max(np.abs(values[:, j]) / limit[j]))
        raise InputError(f"{what}: {model.joint_names[j]} reaches {abs(values[i, j]):.4g}{unit} at t = {times[i]:.3f} s, "
                         f"above its limit {limit[j]:.4g}{unit} ({over:.3g}x): slow the trajectory down")


@single_thread_blas
def shape_samples(model, path: PiecewiseC4Trajectory, kind="zvd", shaper_design=DEFAULT_DESIGN, rate_hz=200.0,
                  max_samples=None, **options) -> ShapedSamples:
    """Shape ``path`` (:func:`shape_with_design`) and sample it at ``rate_hz`` with velocities
    and accelerations, for a trajectory controller. Limits (the URDF's position and velocity
    limits, acceleration limits 10 × the velocity limits, :func:`rate_limits`): the waypoints must
    be within them (positions, and each segment's peak speed and acceleration), else InputError
    naming the point and joint; shaping keeps the positions within the waypoints' convex hull
    and, for the fixed and robust designs (non-negative constant impulses), the speeds and
    accelerations within the path's; the samples are checked again (a time-varying shaper can
    exceed them slightly) and a violation is refused with the joint, the value and the factor
    to slow down by: the trajectory is never time-scaled behind the caller's back.
    ``max_samples``: InputError before sampling when the answer would be longer. No selectable
    mode: the path itself is sampled, with a message saying so."""
    velocity, acceleration = rate_limits(model)
    low = path.positions < model.position_lower - 1e-9
    high = path.positions > model.position_upper + 1e-9
    bad = np.argwhere(low | high)
    if bad.size:
        k, j = bad[0]
        raise InputError(f"points[{k}].positions: {model.joint_names[j]} at {path.positions[k, j]:.6g}, outside its "
                         f"limits [{model.position_lower[j]:.6g}, {model.position_upper[j]:.6g}]")
    dq = np.abs(np.diff(path.positions, axis=0))
    T = np.diff(path.times)[:, None]
    for peaks, limit, what, unit in ((ETA_PEAKS[0] * dq / T, velocity, "speed", "/s"),
                                     (ETA_PEAKS[1] * dq / T ** 2, acceleration, "acceleration", "/s^2")):
        bad = np.argwhere(peaks > limit * (1.0 + 1e-9))
        if bad.size:
            k, j = bad[0]
            raise InputError(f"points: segment {k} -> {k + 1} needs a peak {what} of {peaks[k, j]:.4g}{unit} on "
                             f"{model.joint_names[j]}, above its limit {limit[j]:.4g}{unit} ({peaks[k, j] / limit[j]:.3g}x)")
    traj, pm, choice = shape_with_design(model, path, kind, shaper_design, **options)
    reference = path if traj is None else traj
    count = int(np.floor(reference.duration * rate_hz + 1e-9)) + 1
    if max_samples is not None and count + 1 > max_samples:
        raise InputError(f"sample_rate_hz: {count + 1} samples at {rate_hz:g} Hz over {reference.duration:.3f} s, "
                         f"more than this service's maximum ({max_samples})")
    t = np.arange(count) / rate_hz
    if reference.duration - t[-1] > 1e-9:
        t = np.r_[t, reference.duration]
    if traj is None:
        Y = path_derivatives(path, t)[0]
        message = (f"not shaped ({kind}): no mode of the closed loop qualifies (contribution threshold, damping "
                   f"below {options.get('max_damping', DEFAULT_MAX_DAMPING):g}); the path is sampled as it is")
    else:
        Y = traj.evaluate(t)
        message = traj.summary
    Y[-1, 1:] = 0.0                                      # at rest at the end (round-off of the exact zeros)
    _check_within(model, "velocities", Y[:, 1], velocity, t, "/s")
    _check_within(model, "accelerations", Y[:, 2], acceleration, t, "/s^2")
    q = np.clip(Y[:, 0], model.position_lower, model.position_upper)   # convex combination: only round-off
    return ShapedSamples(t, q, Y[:, 1].copy(), Y[:, 2].copy(), reference, pm, choice, message)

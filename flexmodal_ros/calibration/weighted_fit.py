"""Identification of k, d_f, d_fm from measured modes weighted by their uncertainties.

The thesis' identification (ch. 3, :mod:`flexmodal_ros.identification.inverse_eigen`) fits the
characteristic determinant (3.31) or the eigenvalues of the continuous closed loop with one assumed
noise level for every mode. A calibration knows more: each measured mode i comes with its own
standard deviations σ_f,i, σ_ζ,i (the OMA's, floored), and the loop that produced the record may be
the sampled-data one of a digital controller. Here the residuals are

    r = [(f_i(p) − f̂_i)/σ_f,i,  (ζ_i(p) − ζ̂_i)/σ_ζ,i]   for every measured mode i,

with f_i(p), ζ_i(p) the model mode matched to measurement i in the loop model
(:mod:`.eigen_sensitivity`: continuous AMA (2.13)-(2.17), or its sampled-data form) and the exact
Jacobian from the eigenvalue sensitivities. Measured modes are matched to the model once per round
(:func:`flexmodal_ros.oma.compare.compare_with_model` by the caller); inside a round the model
modes at p are followed from the matched ones by their shapes (MAC,
:func:`flexmodal_ros.modes.modeset.track_modes`), so that crossing frequencies do not swap them.

Bounded nonlinear least squares (SciPy ``least_squares``, trust-region reflective) in scaled unknowns
x = p/s (s the nominal value, or the range's upper bound where it is 0), from the current estimate
and ``starts``−1 uniform points of the box; the lowest cost wins. Covariance (JᵀJ)⁻¹ in scaled
units, inflated by χ²/dof when the residual is larger than the stated σ explain (model or OMA
error beyond the noise). An unknown whose standard deviation exceeds ``REL_STD_LIMIT`` of its scale
is *not identifiable* from these data: it is fixed at its nominal value and the others are refitted
(its value is never reported as identified); their standard deviations then include what its
range allows (:func:`_held_std`, "consider" parameters).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.blas import single_blas_thread
from ..core.errors import FlexmodalError, InputError
from ..core.workers import NO_STOP
from ..identification.inverse_eigen import REL_STD_LIMIT
from ..modes.tracking import track_modes
from ..robot.model import create_data
from .eigen_sensitivity import LoopModel, Unknowns, mode_sensitivity
from .design_selection import predicted_std
from .experiment_design import PRIOR_WIDTH

MAX_ROUNDS = 3            # fix-the-unidentifiable rounds
OUTLIER_SIGMA = 5.0       # a measured mode whose residual exceeds this many robust standard deviations ...
OUTLIER_ROUNDS = 2        # ... is left out and the fit repeated (at most this many times)


@dataclass(frozen=True)
class MeasuredModes:
    """Measured modes: ``q`` (m, n) configurations; per mode (N entries) ``config`` index,
    ``frequency_hz``, ``damping_ratio``, standard deviations ``std_frequency_hz`` [Hz],
    ``std_damping_ratio``, and ``mode_index`` into ``references[config]`` (the model's modes it was
    matched to, a ModeSet with shapes)."""

    q: np.ndarray
    config: np.ndarray
    frequency_hz: np.ndarray
    damping_ratio: np.ndarray
    std_frequency_hz: np.ndarray
    std_damping_ratio: np.ndarray
    mode_index: np.ndarray
    references: tuple

    @property
    def size(self) -> int:
        return int(self.frequency_hz.size)


@dataclass(frozen=True)
class FitResult:
    """``values`` (P,) of every unknown (nominal where not identifiable); ``std`` (P,) (inf where not
    identifiable); ``identifiable`` (P,) bool; ``chi2`` Σ r² and ``dof``; ``predicted`` (N, 2) model
    f, ζ of the measured modes at the result; ``evaluations``; ``message``; ``excluded`` indices of
    measured modes left out as outliers; ``information`` (P, P): JᵀJ of the used modes at the
    result in scaled unknowns (the data's Fisher information, for the design)."""

    names: tuple
    values: np.ndarray
    std: np.ndarray
    identifiable: np.ndarray
    chi2: float
    dof: int
    predicted: np.ndarray
    evaluations: int
    message: str
    excluded: tuple = ()
    information: np.ndarray | None = None

    @property
    def reduced_chi2(self) -> float:
        return self.chi2 / self.dof if self.dof > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"names": list(self.names), "values": self.values.tolist(),
                "standard_deviations": [None if not np.isfinite(s) else float(s) for s in self.std],
                "identifiable": self.identifiable.tolist(), "chi2": self.chi2, "dof": self.dof,
                "reduced_chi2": self.reduced_chi2, "evaluations": self.evaluations, "message": self.message,
                "excluded_modes": [int(i) for i in self.excluded]}


class _Problem:
    """Residuals and Jacobian of the measurements for the free unknowns (scaled), cached per x."""

    def __init__(self, model, unknowns: Unknowns, free, p_fixed, meas: MeasuredModes, loop, scale, stop):
        self.model, self.unknowns, self.free, self.loop, self.meas = model, unknowns, free, loop, meas
        self.p_fixed, self.scale, self.stop = p_fixed, scale, stop
        self.sub = Unknowns(tuple(unknowns.kinds[i] for i in free), tuple(unknowns.joints[i] for i in free),
                            unknowns.joint_names)
        self.data = create_data(model)
        self.sf, self.sz = meas.std_frequency_hz, meas.std_damping_ratio
        self._key, self._value = None, None
        self.evaluations = 0

    def parameters(self, x):
        p = self.p_fixed.copy()
        p[self.free] = x * self.scale[self.free]
        return p

    def evaluate(self, x, jacobian=True):
        """(r (2N,), J (2N, free) or None, predicted (N, 2)) at scaled ``x``; the Jacobian (the
        costly part: one Fréchet derivative per unknown for a sampled loop) only when asked."""
        key = np.asarray(x, float).tobytes()
        if key == self._key and (self._value[1] is not None or not jacobian):
            return self._value
        self.stop.check()
        self.evaluations += 1
        p = self.parameters(x)
        model = self.unknowns.apply(self.model, p)
        meas = self.meas
        r = np.empty(2 * meas.size)
        J = np.empty((2 * meas.size, len(self.free))) if jacobian else None
        predicted = np.empty((meas.size, 2))
        unknowns = self.sub if jacobian else Unknowns((), (), self.unknowns.joint_names)
        for c in np.unique(meas.config):
            rows = np.flatnonzero(meas.config == c)
            sens = mode_sensitivity(model, meas.q[c], unknowns, self.loop, self.data)
            idx = follow_modes(meas.references[c], sens.modes, meas.mode_index[rows])
            f, z = sens.frequencies_hz[idx], sens.damping_ratios[idx]
            predicted[rows] = np.column_stack([f, z])
            r[2 * rows] = (f - meas.frequency_hz[rows]) / self.sf[rows]
            r[2 * rows + 1] = (z - meas.damping_ratio[rows]) / self.sz[rows]
            if jacobian:
                s = self.scale[self.free]
                J[2 * rows] = sens.d_frequency[idx] * s / self.sf[rows, None]
                J[2 * rows + 1] = sens.d_damping[idx] * s / self.sz[rows, None]
        self._key, self._value = key, (r, J, predicted)
        return self._value


def follow_modes(reference, modes, indices):
    """Indices in ``modes`` of the reference modes ``indices``: MAC tracking from ``reference``
    (:func:`track_modes`); by position when the two sets have different numbers of modes."""
    try:
        order, _ = track_modes([reference, modes])
        return order[1][indices]
    except FlexmodalError:
        return np.minimum(indices, modes.num_modes - 1)


def subset(meas: MeasuredModes, keep) -> MeasuredModes:
    """The measured modes ``keep`` (indices) of ``meas``."""
    keep = np.asarray(keep, int)
    return MeasuredModes(meas.q, meas.config[keep], meas.frequency_hz[keep], meas.damping_ratio[keep],
                         meas.std_frequency_hz[keep], meas.std_damping_ratio[keep], meas.mode_index[keep],
                         meas.references)


def fit_parameters(model, unknowns: Unknowns, meas: MeasuredModes, loop: LoopModel, scale, bounds, x0=None,
                   starts=1, seed=0, stop=NO_STOP, fixed_values=None, outliers=True, free=None) -> FitResult:
    """Weighted least squares of the module docstring. ``scale`` (P,); ``bounds`` (lower (P,),
    upper (P,)) physical; ``x0`` physical start (default: the model's values); ``fixed_values``
    (P,) physical values used for unknowns found not identifiable (default: the model's).

    ``outliers``: a measured mode whose larger normalized residual exceeds OUTLIER_SIGMA times the
    robust scale of the residuals (1.4826 × median |r|, at least 1) is left out and the fit repeated
    — e.g. two close, heavily damped modes that the OMA merged into one. ``predicted`` of the
    result covers every measured mode, the excluded ones too. ``free``: the unknowns fitted in the
    first round (bool (P,); default all), e.g. those a previous fit identified."""
    keep = np.arange(meas.size)
    for _ in range(OUTLIER_ROUNDS + 1):
        fit = _fit(model, unknowns, subset(meas, keep), loop, scale, bounds, x0, starts, seed, stop, fixed_values, free)
        full = _Problem(model, unknowns, np.arange(unknowns.size), fit.values.copy(), meas, loop, scale, stop)
        with single_blas_thread():
            r, _, predicted = full.evaluate(fit.values / scale, jacobian=False)
        if not outliers:
            break
        per_mode = np.abs(r).reshape(-1, 2).max(axis=1)
        used = np.repeat(np.isin(np.arange(meas.size), keep), 2)
        robust = max(1.0, 1.4826 * float(np.median(np.abs(r[used]))))
        new_keep = np.flatnonzero(per_mode <= OUTLIER_SIGMA * robust)
        if np.array_equal(new_keep, keep) or 2 * new_keep.size <= unknowns.size:
            break
        keep = new_keep
        x0 = fit.values
    excluded = tuple(int(i) for i in np.setdiff1d(np.arange(meas.size), keep))
    return FitResult(fit.names, fit.values, fit.std, fit.identifiable, fit.chi2, fit.dof, predicted,
                     fit.evaluations, fit.message, excluded, fit.information)


def held_gain(problem, x, J):
    """(indices of the unknowns held at their value in ``problem`` (not free), G (free, held)):
    how the least-squares estimate of the free unknowns (scaled) at scaled ``x``, Jacobian ``J``,
    moves per unit (scaled) change of a held one: Δx_free = −G·Δx_held, G = J_free⁺ J_held."""
    held = np.setdiff1d(np.arange(problem.unknowns.size), problem.free)
    if not held.size:
        return held, np.zeros((problem.free.size, 0))
    scale = problem.scale
    whole = _Problem(problem.model, problem.unknowns, held, problem.parameters(x), problem.meas, problem.loop,
                     scale, problem.stop)
    _, J_held, _ = whole.evaluate(problem.p_fixed[held] / scale[held])
    return held, np.linalg.lstsq(J, J_held, rcond=None)[0]


def _held_std(problem, x, J, lo, hi) -> np.ndarray:
    """What the unknowns held at their nominal value add to the standard deviation (physical
    units) of the free ones — "consider" parameters (Tapley, Schutz & Born, *Statistical Orbit
    Determination*, 2004, §6.2): a held unknown is uncertain within its range (prior σ = width /
    PRIOR_WIDTH, as in the design) and moves the free ones by −G·Δ (:func:`held_gain`). Without
    this, free unknowns that absorb a held one's error look more precise than they are: an unknown
    is held because the data cannot tell it from the free ones, so they absorb it without a trace
    in χ² (docs/calibration.md, "Held unknowns")."""
    held, gain = held_gain(problem, x, J)
    if not held.size:
        return np.zeros(problem.free.size)
    prior = (hi[held] - lo[held]) / PRIOR_WIDTH                      # scaled σ of the held unknowns
    return np.sqrt((gain ** 2) @ prior ** 2) * problem.scale[problem.free]


def _fit(model, unknowns, meas, loop, scale, bounds, x0, starts, seed, stop, fixed_values,
         first_free=None) -> FitResult:
    """One weighted fit of ``meas`` (unknowns found not identifiable fixed, the others refitted)."""
    from scipy.optimize import least_squares     # deferred: scipy.optimize

    P = unknowns.size
    nominal = unknowns.values(model) if fixed_values is None else np.asarray(fixed_values, float)
    x_start = (unknowns.values(model) if x0 is None else np.asarray(x0, float)) / scale
    lo, hi = np.asarray(bounds[0], float) / scale, np.asarray(bounds[1], float) / scale
    x_start = np.clip(x_start, lo, hi)
    if 2 * meas.size <= 0:
        raise InputError("measurements: no measured mode to fit")
    free = np.arange(P) if first_free is None or not np.any(first_free) else np.flatnonzero(first_free)
    rng = np.random.default_rng(seed)
    evaluations, message, fitted = 0, "", free
    with single_blas_thread():
        for _ in range(MAX_ROUNDS):
            p_fixed = nominal.copy()
            problem = _Problem(model, unknowns, free, p_fixed, meas, loop, scale, stop)
            best = None
            starts_x = [x_start[free]] + [lo[free] + (hi[free] - lo[free]) * rng.random(free.size)
                                          for _ in range(max(0, starts - 1))]
            for x0s in starts_x:
                sol = least_squares(lambda x: problem.evaluate(x, False)[0], x0s,
                                    jac=lambda x: problem.evaluate(x)[1],
                                    bounds=(lo[free], hi[free]), method="trf", x_scale=1.0,
                                    xtol=1e-10, ftol=1e-12, gtol=1e-10, max_nfev=40 * (free.size + 1))
                if best is None or sol.cost < best.cost:
                    best = sol
            evaluations += problem.evaluations
            r, J, predicted = problem.evaluate(best.x)
            chi2, dof = float(r @ r), int(r.size - free.size)
            inflation = max(1.0, chi2 / dof) if dof > 0 else 1.0
            std_free = predicted_std(J.T @ J, scale[free]) * np.sqrt(inflation)
            std_free = np.hypot(std_free, _held_std(problem, best.x, J, lo, hi))
            ok = np.isfinite(std_free) & (std_free <= REL_STD_LIMIT * scale[free])
            message = best.message
            if ok.all() or not ok.any():
                break
            x_start = np.clip(x_start, lo, hi)
            x_start[free] = best.x
            fitted, free = free, free[ok]        # refit with the unidentifiable fixed at nominal
        else:       # MAX_ROUNDS refits: the last one's unknowns, each with its own verdict
            free = fitted
    values = nominal.copy()
    std = np.full(P, np.inf)
    identifiable = np.zeros(P, bool)
    values[free] = best.x * scale[free]
    std[free] = std_free
    identifiable[free] = ok
    values[free[~ok]] = nominal[free[~ok]]
    values[np.abs(values) < 1e-12 * scale] = 0.0          # at the bound 0 up to round-off
    std[free[~ok]] = np.inf
    information = np.zeros((P, P))
    information[np.ix_(free, free)] = J.T @ J / inflation
    return FitResult(unknowns.names, values, std, identifiable, chi2, dof, predicted, evaluations, message,
                     (), information)

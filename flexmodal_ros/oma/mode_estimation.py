"""From a record to identified modes: poles over orders → stabilization → clustering → amplitude
check → :class:`IdentifiedModes` (a :class:`~flexmodal_ros.modes.modeset.ModeSet`).

Never inventing a mode: after the automatic selection (:mod:`.stabilization`), the free decay is
fitted by least squares with the selected poles (complex exponentials z^k, plus a constant), which
gives each mode's amplitude at every channel, its standard error from the residual (the noise
floor), and the signal-to-noise ratio SNR = ‖a‖ / √(Σ var a). A selected mode is reported as
physical only when SNR ≥ ``snr_min``; otherwise it is listed as below the noise floor. Poles at
λ_i + λ_j or λ_i + λ̄_j of two stronger modes (sum and difference terms, which the quadratic
terms of the nonlinear dynamics put in the response at ~1e-4 of it) are reported as combination
terms, not modes.

Several records of the same system (*references*: impacts along different axes) are analysed
together: one multi-reference realization (:mod:`.methods`), and each record's free decay gets its
own amplitudes in the fits (the poles are shared; amplitudes and SNR are root sums of squares over
the references). Under noise each reference is also realized alone and its poles beyond 3 % of
the joint ones join the candidates: the joint realization can miss a mode one record shows plainly.

Under measurement noise the realization is repeated on channels divided by their noise level
(whitened: the maximum-likelihood weighting for independent white noise) instead of their peak: a
channel that barely moves then no longer weighs its noise as much as the others' signal.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..core.blas import single_blas_thread
from ..core.errors import InputError
from ..modes import (ModeSet, classify_stability, frequencies_and_damping, frequency_damping_std,
                     is_oscillatory, normalize_shapes, pair_covariances)
from .estimators import as_segments, check_method, estimate_poles
from .record import Record, free_decay_start
from .record_noise import colored_information, noise_level, quantization_step
from .stabilization import (NOISY_CRITERIA, SelectionCriteria, StabilizationDiagram, build_diagram,
                            merge_selected, select_modes, stable_real_poles)

SNR_MIN = 5.0
REFINE_SNR = 2.0
SETTLE_SAMPLES = 4
MAX_ROUNDS = 6
REFINE_EVALUATIONS = 50     # Levenberg–Marquardt steps of the output-error fit (refine_poles)
NOISE_RATIO = 1e-4         # residual / signal (RMS) above which the record counts as noisy
# A mode needs an amplitude ‖a‖ above ROUNDOFF_FLOOR · ε · ‖max_k |y_c(k)|‖ of the record's values
# (before the rest position is subtracted): below that it is the rounding of the stored numbers and
# of whatever computed them, whatever its SNR. On an exact (simulated) record the residual is
# deterministic round-off, not white noise, and a pole can fit part of it: with NumPy 1.26's LAPACK
# a 9e-16 "mode" at 218 Hz (2 units in the last place of positions of 1.94 rad) got SNR 8. 100 ε
# leaves room for rounding accumulated over the record; measured records (encoder resolution
# ≥ 1e-9 rad) are 1e5 above it.
ROUNDOFF_FLOOR = 100.0
IQR_TO_STD = 1.0 / 1.349     # interquartile range of a normal distribution = 1.349 σ
UNCERTAINTY_F = 0.005     # reported modes: std(f) ≤ 0.5 % of f ...
UNCERTAINTY_Z = 0.005     # ... and std(ζ) ≤ 0.5 pp (one standard deviation)
DEFAULT_ORDERS = {"era": range(2, 101, 2), "ssi-cov": range(2, 101, 2), "var": range(2, 31)}
COMBINATION_RTOL = 0.005        # |λ − (λ_i ± λ_j)| ≤ 0.5 % of |λ|
COMBINATION_AMPLITUDE = 0.1     # and at most 10 % of the weaker parent's amplitude


@dataclass(frozen=True, kw_only=True)
class IdentifiedModes(ModeSet):
    """Modes identified from a record: the :class:`ModeSet` fields (``mode_shapes`` (c, m) at the
    measured ``channels``) plus ``method``; ``sample_rate_hz``; ``amplitudes`` (m,) initial
    amplitude ‖a‖ in channel units; ``snr`` (m,); ``poles`` (m,) stable poles supporting each mode;
    ``frequency_spread``/``damping_spread`` (m,) interquartile ranges over them [Hz], [-];
    ``noise_floor`` (c,) residual std per channel; ``below_noise_floor`` and
    ``combination_terms`` (dicts of poles selected but not reported as modes); ``segment`` (start,
    end) [s] analysed (of the first record); ``references`` number of records analysed together;
    ``diagram``; ``warnings``."""

    channels: tuple
    method: str
    sample_rate_hz: float
    amplitudes: np.ndarray
    snr: np.ndarray
    poles: np.ndarray
    frequency_spread: np.ndarray
    damping_spread: np.ndarray
    noise_floor: np.ndarray
    std_frequency_hz: np.ndarray
    std_damping_ratio: np.ndarray
    below_noise_floor: list = field(default_factory=list)
    combination_terms: list = field(default_factory=list)
    segment: tuple = (0.0, 0.0)
    references: int = 1
    diagram: StabilizationDiagram | None = None
    warnings: tuple = ()

    @property
    def nyquist_hz(self) -> float:
        return 0.5 * self.sample_rate_hz

    def to_dict(self) -> dict:
        out = {"method": self.method, "channels": list(self.channels), "sample_rate_hz": self.sample_rate_hz,
               "segment_s": list(self.segment), "references": self.references}
        out.update(super().to_dict())
        out.update({"amplitudes": self.amplitudes.tolist(), "snr": self.snr.tolist(), "poles": self.poles.tolist(),
                    "frequency_spread_hz": self.frequency_spread.tolist(), "damping_spread": self.damping_spread.tolist(),
                    "noise_floor": self.noise_floor.tolist(), "std_frequency_hz": self.std_frequency_hz.tolist(),
                    "std_damping_ratio": self.std_damping_ratio.tolist(), "below_noise_floor": self.below_noise_floor,
                    "combination_terms": self.combination_terms, "warnings": list(self.warnings)})
        return out


def analysis_segment(record: Record, free_decay: bool = True):
    """(first sample, deviations y (N, c)) of what is analysed: the free decay after the
    excitation (``free_decay``; its first ``SETTLE_SAMPLES`` are skipped: components faster than
    the sampling, such as Scompi's 850 Hz, ζ = 0.8 mode, die out there and would otherwise be
    fitted by spurious poles) or the whole record, minus the rest position (median of the
    samples before the excitation when there are ≥ 10, else the mean of the segment)."""
    values = np.asarray(record.values)
    k0 = min(free_decay_start(record) + SETTLE_SAMPLES, record.num_samples - 1) if free_decay else 0
    seg = values[k0:]
    rest = np.median(values[:k0], axis=0) if k0 >= 10 else seg.mean(axis=0)
    return k0, seg - rest


def as_records(record) -> list:
    """``record`` (a :class:`Record`) or a sequence of them → list; InputError unless they share
    a sample rate and at least one channel. References whose channel sets differ (a channel that
    stayed constant in one record — below the encoder's resolution — is dropped from that record
    by :func:`~.record.make_record`) are analysed on the channels common to all, in the first
    record's order, with a warning."""
    records = list(record) if isinstance(record, (list, tuple)) else [record]
    if not records or not all(isinstance(r, Record) for r in records):
        raise InputError("record: expected a Record or a list of Records")
    first = records[0]
    for k, other in enumerate(records[1:], start=2):
        if abs(other.sample_rate_hz / first.sample_rate_hz - 1) > 1e-9:
            raise InputError(f"records: record {k} is sampled at {other.sample_rate_hz:g} Hz, record 1 at "
                             f"{first.sample_rate_hz:g} Hz")
    if all(tuple(r.channels) == tuple(first.channels) for r in records):
        return records
    common = [c for c in first.channels if all(c in r.channels for r in records)]
    if not common:
        raise InputError(f"records: the references share no channel (record 1 has {list(first.channels)}); "
                         f"references must share their channels")
    left = sorted({c for r in records for c in r.channels} - set(common))
    note = f"channel(s) not in every reference left out: {', '.join(left)}"
    return [replace(r.select(common, "channels"), warnings=tuple(r.warnings) + (note,)) for r in records]


def analysis_segments(record, free_decay: bool = True):
    """(first samples, deviation segments) of each record (:func:`analysis_segment`)."""
    pairs = [analysis_segment(r, free_decay) for r in as_records(record)]
    return [k for k, _ in pairs], [y for _, y in pairs]


def _basis(N, fs, lam, real):
    """[Re z^k, Im z^k, 1, e^{r k/fs}] columns (N, 2m + 1 + len(real))."""
    k = np.arange(N)[:, None] / fs
    powers = np.exp(k * np.asarray(lam, complex)[None, :])
    decays = np.exp(k * np.asarray(real, float)[None, :])
    return np.hstack([powers.real, powers.imag, np.ones((N, 1)), decays])


def fit_amplitudes(y, fs, eigenvalues, residual=False, real=()):
    """Least-squares fit of y (N, c) by Re/Im of z_j^k (z_j = e^{λ_j/fs}), a constant and the
    real exponentials e^{r k/fs} of the ``real`` poles r [1/s]; ``y`` may be a list of segments
    (references: shared poles, each segment its own amplitudes and constant).

    Returns (amplitudes (m, c) complex a_j with y ≈ Σ Re(a_j z_j^k) — (R, m, c) for a list —,
    standard errors (m,) of ‖a_j‖ per mode √(Σ_c var) (summed over the references), residual std
    per channel (c,) (pooled)) and, with ``residual``, the residual (N, c) itself (a list for a
    list).
    """
    segments = as_segments(y)
    lam = np.asarray(eigenvalues, complex)
    m = lam.size
    amps, variance, resids, dof = [], np.zeros(m), [], 0
    for seg in segments:
        N = seg.shape[0]
        basis = _basis(N, fs, lam, real)
        coef, *_ = np.linalg.lstsq(basis, seg, rcond=None)
        resids.append(seg - basis @ coef)
        dof += max(1, N - basis.shape[1])
        amps.append(coef[:m] - 1j * coef[m:2 * m])
        try:
            cov = np.linalg.pinv(basis.T @ basis)
        except np.linalg.LinAlgError:
            cov = np.full((basis.shape[1],) * 2, np.inf)
        variance += np.maximum(np.diag(cov)[:m] + np.diag(cov)[m:2 * m], 0.0)
    sigma = np.sqrt(sum(np.sum(r ** 2, axis=0) for r in resids) / dof)
    stderr = np.sqrt(variance * np.sum(sigma ** 2))
    single = not isinstance(y, (list, tuple))
    amps = amps[0] if single else np.array(amps)
    if residual:
        return amps, stderr, sigma, (resids[0] if single else resids)
    return amps, stderr, sigma


def amplitude_norms(amps) -> np.ndarray:
    """‖a_j‖ per mode of :func:`fit_amplitudes` amplitudes ((m, c) or (R, m, c)), root sum of
    squares over channels and references."""
    amps = np.asarray(amps)
    return np.sqrt(np.sum(np.abs(amps.reshape((-1,) + amps.shape[-2:])) ** 2, axis=(0, 2)))


def refine_poles(y, fs, eigenvalues, fixed=(), real=()):
    """Output-error refinement of the poles λ (m,) on the free decay y (N, c) (or a list of
    references, each with its own amplitudes): minimize
    ‖y − B(λ) A‖² over λ with the amplitudes A eliminated (variable projection, Golub & Pereyra
    1973; SciPy ``least_squares``), B = [Re z^k, Im z^k, 1], z = e^{λ/fs}. Under white measurement
    noise this is the maximum-likelihood estimate that the realization (ERA/SSI) only approximates;
    for noise-free data it changes nothing that matters. ``fixed`` poles and the ``real`` ones stay
    in the basis unchanged. At most ``REFINE_EVALUATIONS`` Levenberg–Marquardt steps (each with a
    finite-difference Jacobian of 2m residuals): the encoder-noise records converge in 5–7; a
    record whose fit does not converge (seen: KUKA LWR4, one impact along z0, ~600 steps) keeps
    the best poles reached, at a bounded cost.

    Returns (λ refined (m,), standard deviations (m,) of f [Hz] and (m,) of ζ [-] from the
    Jacobian at the optimum: the larger of the white-noise and the colored-residual covariance,
    :func:`~.record_noise.colored_information`). Poles that leave the physical range keep their
    start value and get an infinite standard deviation.
    """
    # deferred: scipy.optimize
    from scipy.optimize import least_squares

    lam0 = np.asarray(eigenvalues, complex)
    m = lam0.size
    if m == 0:
        return lam0, np.empty(0), np.empty(0)
    segments = as_segments(y)
    scale = np.abs(lam0)
    fixed = np.asarray(fixed, complex)

    def residual(theta):                 # growing exponentials (Re λ > 0) are clipped: not physical
        lam = np.concatenate([(np.minimum(theta[:m], 0.0) + 1j * theta[m:]) * scale, fixed])
        out = []
        for seg in segments:
            q, _ = np.linalg.qr(_basis(seg.shape[0], fs, lam, real))
            out.append((seg - q @ (q.T @ seg)).ravel())
        return np.concatenate(out)

    theta0 = np.concatenate([lam0.real / scale, lam0.imag / scale])
    sol = least_squares(residual, theta0, method="lm", x_scale=1e-3, max_nfev=REFINE_EVALUATIONS)
    lam = (sol.x[:m] + 1j * sol.x[m:]) * scale
    linear = len(segments) * segments[0].shape[1] * (2 * (m + fixed.size) + 1 + len(real))
    dof = max(1, sol.fun.size - theta0.size - linear)
    s2 = float(sol.fun @ sol.fun) / dof
    # Covariance s²(JᵀJ)⁻¹ by SVD: the parameters in a direction the data do not determine
    # (singular value below 1e-10 of the largest) get an infinite variance, the others keep theirs.
    _, sv, vt = np.linalg.svd(sol.jac, full_matrices=False)
    null = sv <= 1e-10 * sv.max(initial=0.0)
    inverse = (vt[~null].T / sv[~null] ** 2) @ vt[~null]                 # (JᵀJ)⁺
    undetermined = (np.abs(vt[null]) > 1e-3).any(axis=0)
    # White noise: s²(JᵀJ)⁺. Correlated residual (quantization of a slow decay, unmodelled
    # components): the sandwich (JᵀJ)⁺ Jᵀ Σ J (JᵀJ)⁺ with Σ from the residual's autocovariance
    # (:func:`colored_information`). The larger of the two standard deviations is reported.
    stds = []
    colored = inverse @ colored_information(sol.jac, sol.fun, segments, sol.fun.size / dof) @ inverse
    for cov in (s2 * inverse, colored):
        cov[undetermined, :] = cov[:, undetermined] = np.inf
        with np.errstate(invalid="ignore"):                                 # inf · 0 in undetermined blocks
            blocks = pair_covariances(cov, m) * (np.asarray(scale[:m], float) ** 2)[:, None, None]   # (Re λ, Im λ)
        stds.append(frequency_damping_std(lam[:m], blocks))
    std_f, std_z = np.fmax(stds[0][0], stds[1][0]), np.fmax(stds[0][1], stds[1][1])
    ok = (lam.real < 0) & is_oscillatory(lam) & (np.abs(lam / lam0 - 1) < 0.05) & np.isfinite(std_f)
    return (np.where(ok, lam, lam0), np.where(ok, std_f, np.inf), np.where(ok, std_z, np.inf))


def identify_modes(record, method: str = "era", orders=None, criteria: SelectionCriteria | None = None,
                   free_decay: bool = True, snr_min: float = SNR_MIN, refine: bool = True,
                   block_rows: int | None = None) -> IdentifiedModes:
    """Identify the modes of ``record`` — a :class:`Record` or a list of references (same channels
    and rate; module docstring) — with ``method`` (``era``, ``ssi-cov``, ``var``) over
    ``orders`` (default :data:`DEFAULT_ORDERS`): module docstring; ``criteria`` default:
    :class:`SelectionCriteria`, then — when the fit of the selected poles leaves a residual above
    ``NOISE_RATIO`` of the signal (measurement noise) — a second realization of the samples above
    the noise, channels whitened by their noise level, with ``NOISY_CRITERIA``; ``refine`` polishes
    the selected poles by :func:`refine_poles`; ``block_rows`` of the Hankel/Toeplitz matrix (ERA,
    SSI-cov; default: twice what the largest order needs). InputError on bad options.

    Runs with one BLAS thread: the work is many small factorizations, which multithreaded BLAS
    slows down by orders of magnitude on a loaded machine.
    """
    with single_blas_thread():
        return _identify(as_records(record), method, orders, criteria, free_decay, snr_min, refine, block_rows)


def _identify(records, method, orders, criteria, free_decay, snr_min, refine, block_rows):
    check_method(method)
    if not (np.isfinite(snr_min) and snr_min > 0):
        raise InputError(f"snr_min: must be > 0, got {snr_min}")
    starts, ys = analysis_segments(records, free_decay)
    notes = []
    if orders is None:
        orders = _bounded_orders(DEFAULT_ORDERS[method], ys, method)
        if orders[-1] < max(DEFAULT_ORDERS[method]):
            notes.append(f"model orders limited to {orders[-1]} by the record length "
                         f"({', '.join(str(y.shape[0]) for y in ys)} samples of free decay)")
    fs = records[0].sample_rate_hz
    for k, y in enumerate(ys):
        if y.shape[0] < 64:
            where = "" if len(ys) == 1 else f" {k + 1}"
            raise InputError(f"record{where}: only {y.shape[0]} samples after the excitation (at least 64 needed)")
    options = {} if block_rows is None or method == "var" else {"block_rows": block_rows}
    candidates, diagram, real, scale = _candidates(ys, fs, method, orders, criteria or SelectionCriteria(), options)
    if criteria is None:            # measurement noise: realize the decay's signal part, wider tolerances
        sigma = fit_amplitudes(ys, fs, [c.eigenvalue for c in candidates], real=real)[2]
        if _is_noisy(ys, sigma):
            sigma = _noise_estimate(ys, sigma)     # the residual also holds the modes pass 1 missed
            signal = [y[:_signal_length(y, sigma)] for y in ys]
            candidates, diagram, real, scale = _candidates(signal, fs, method, _bounded_orders(orders, signal, method),
                                                           NOISY_CRITERIA, options, noise=sigma)
            for y in signal if len(signal) > 1 else ():    # a mode one reference shows plainly can be
                one = _candidates([y], fs, method, _bounded_orders(orders, [y], method), NOISY_CRITERIA, options, sigma)
                candidates = merge_selected(candidates, one[0])    # missing from the joint realization
    peak = np.max([np.abs(np.asarray(r.values)).max(axis=0) for r in records], axis=0)
    floor = ROUNDOFF_FLOOR * np.finfo(float).eps * float(np.linalg.norm(peak))
    lam, norm, snr, std_f, std_z, sigma, combo, keep, vectors = _significant(ys, fs, candidates, real, snr_min, refine,
                                                                             floor)
    below, combos = [], []
    for j, mode in enumerate(candidates):
        f_j, z_j = frequencies_and_damping(lam[j])
        entry = {"frequency_hz": float(f_j), "damping_ratio": float(z_j),
                 "amplitude": float(norm[j]), "snr": float(snr[j]), "std_frequency_hz": float(std_f[j]),
                 "std_damping_ratio": float(std_z[j]), "poles": mode.poles}
        if combo[j] is not None:
            combos.append({**entry, "of_modes_hz": combo[j]})
        elif j not in keep:
            below.append(entry)
    keep = np.array(sorted(keep, key=lambda j: abs(lam[j])), int)
    eig = lam[keep]
    f, z = frequencies_and_damping(eig)
    label, bad = classify_stability(np.concatenate([eig, eig.conj(), real]))
    c = ys[0].shape[1]
    if vectors is None:         # realization shapes (computed on scaled channels)
        vectors = np.array([m.shape for m in candidates]) * scale[None, :] if candidates else np.empty((0, c))
    shapes = normalize_shapes(vectors[keep].T) if keep.size else np.empty((c, 0), complex)
    pick = lambda attr: np.array([getattr(candidates[j], attr) for j in keep], float)
    first = records[0]
    warnings = tuple(dict.fromkeys([w for r in records for w in r.warnings] + notes))
    return IdentifiedModes(
        frequencies_hz=f, damping_ratios=z, eigenvalues=eig, mode_shapes=shapes,
        real_eigenvalues=np.sort(real), stability=label, unstable_eigenvalues=bad,
        channels=tuple(first.channels), method=method, sample_rate_hz=fs, amplitudes=norm[keep],
        snr=snr[keep], poles=pick("poles").astype(int), frequency_spread=pick("frequency_spread"),
        damping_spread=pick("damping_spread"), noise_floor=sigma, below_noise_floor=below,
        combination_terms=combos, segment=(float(first.t[starts[0]]), float(first.t[-1])),
        references=len(records), diagram=diagram, std_frequency_hz=std_f[keep], std_damping_ratio=std_z[keep],
        warnings=warnings)


def _bounded_orders(orders, ys, method):
    """The model orders of ``orders`` that segments ``ys`` can support (the limits of
    :func:`~.estimators.check_orders`: state order < N/4 for ERA/SSI, c·p < N/2 for VAR, and the
    Hankel matrix's width for ERA's block rows); at least the two lowest. A short or truncated
    noisy record is analysed at lower orders instead of failing."""
    arr = np.unique(np.asarray(list(orders), int))
    N, c = sum(y.shape[0] for y in ys), ys[0].shape[1]
    fits = arr <= (N // (2 * c) if method == "var" else N // 4)
    if method != "var":     # ERA/SSI: the Hankel matrix of 2·ceil((n + 1)/c) block rows needs columns
        rows = np.maximum(4, 2 * np.ceil((arr + 1) / c))
        widths = sum(np.maximum(y.shape[0] - rows, 0) for y in ys)
        fits &= (min(y.shape[0] for y in ys) - rows >= 1) & (widths >= arr + 1)
    kept = arr[fits]
    return kept if kept.size >= 2 else arr[:2]


def _signal_length(y, noise, window=50):
    """Samples of the free decay worth realizing under measurement noise: up to where the moving
    RMS of every channel has fallen below 3× its noise level ``noise`` (c,). A realization of
    samples that hold only noise adds noise poles and costs time; the output-error fit still uses
    everything."""
    N = y.shape[0]
    power = np.cumsum(np.vstack([np.zeros((1, y.shape[1])), y ** 2]), axis=0)
    rms = np.sqrt((power[window:] - power[:-window]) / window)
    above = np.flatnonzero((rms > 3 * noise).any(axis=1))
    return int(np.clip((above[-1] + window) if above.size else N, min(N, 200), N))


def _noise_estimate(ys, residual):
    """Per channel: quantum/√12 if quantized (:func:`~.record_noise.quantization_step`; docs/calibration.md,
    "Quantized channels"), else the smaller of the first fit's ``residual`` std and :func:`noise_level`
    (the residual where that is 0); at least ROUNDOFF_FLOOR·ε of the peak (no infinite weight)."""
    level = noise_level(ys)
    quantum = quantization_step(ys, level)
    out = np.where(quantum > 0, quantum / np.sqrt(12.0), np.minimum(residual, np.where(level > 0, level, np.inf)))
    peak = np.max([np.abs(y).max(axis=0) for y in ys], axis=0)
    return np.maximum(out, ROUNDOFF_FLOOR * np.finfo(float).eps * np.maximum(peak, 1e-300))


def _is_noisy(ys, sigma):
    """The residual of a fit exceeds ``NOISE_RATIO`` of the signal (RMS over all channels and
    references)."""
    signal = np.sqrt(np.mean(np.concatenate([y.ravel() for y in ys]) ** 2))
    return bool(np.sqrt(np.mean(sigma ** 2)) > NOISE_RATIO * signal)


def _candidates(ys, fs, method, orders, criteria, options, noise=None):
    """Selected clusters of the stabilization diagram of the segments ``ys`` (module docstring of
    :mod:`.stabilization`), the diagram, the stable real poles and the channel scale used.
    Channels are divided by their peak (over the references): motors that move 1e-7 rad weigh as
    much as those moving 1e-4 rad in the realization and in the MAC; under measurement noise by
    their ``noise`` level (whitening, module docstring)."""
    if noise is None:
        scale = np.maximum(np.max([np.abs(y).max(axis=0) for y in ys], axis=0), 1e-300)
    else:
        scale = np.maximum(noise, 1e-300)
    op = estimate_poles(method, [y / scale for y in ys], fs, list(orders), **options)
    diagram = build_diagram(op, fs, max(y.shape[0] for y in ys) / fs, method, criteria)
    return (*select_modes(diagram, criteria), stable_real_poles(op, criteria, fs), scale)


def _significant(ys, fs, candidates, real, snr_min, refine, floor=0.0):
    """Which selected clusters are modes (module docstring). Poles plainly in the noise (SNR < 2
    in a first fit) and combination terms are set aside (combination terms stay in the fitted
    basis as the signal components they are); the rest are refined jointly (:func:`refine_poles`),
    then the weakest pole with SNR < ``snr_min`` (one at a time: a missing mode lowers every SNR,
    docs/calibration.md "OMA under noise") and every pole that duplicates a stronger one are
    dropped and the rest refitted — until nothing changes (at most ``MAX_ROUNDS``).

    The refinement is used when the record is noisy: when the residual of the first fit exceeds
    ``NOISE_RATIO`` of the signal (RMS). Below that the record is deterministic, the realization is
    exact up to that remainder (nonlinear terms, which an output-error fit would only chase), and
    each pole's standard deviation is taken as its spread over the model orders (interquartile
    range / 1.349); above it, from the fit's Jacobian — and the σ reported is that combined with
    the spread (root sum of squares: the Jacobian holds the noise, the spread what a mode the
    realization missed nearby does to it; the reporting limits below use the Jacobian's). Of the poles
    left, those whose frequency or damping is uncertain beyond ``UNCERTAINTY_F``/``UNCERTAINTY_Z``
    (one standard deviation) stay in the basis but are not modes.

    An amplitude at or below ``floor`` (the rounding of the record's values, ROUNDOFF_FLOOR) has
    SNR 0. Returns (λ, amplitude ‖a‖, SNR, std f [Hz], std ζ, residual std per channel (c,),
    combination parents or None per pole, indices of the modes, amplitude vectors a_j (m, c) of the
    output-error fit (mode shapes at the channels, in channel units; of the reference where the
    mode is strongest) for noisy records, else None: then the realization's shapes are the better
    ones)."""
    lam0 = np.array([c.eigenvalue for c in candidates], complex)
    spread_f = IQR_TO_STD * np.array([c.frequency_spread for c in candidates])
    spread_z = IQR_TO_STD * np.array([c.damping_spread for c in candidates])
    lam = lam0.copy()
    amps, stderr, sigma = fit_amplitudes(ys, fs, lam, real=real)
    norm = amplitude_norms(amps)
    significant = lambda j: np.where(norm[j] > floor, norm[j] / np.maximum(stderr, 1e-300), 0.0)  # noqa: E731
    snr = significant(slice(None))
    std_f, std_z = spread_f.copy(), spread_z.copy()
    combo = _combination_terms(lam, norm)
    nuisance = [j for j in range(lam.size) if combo[j] is not None]
    active = [j for j in range(lam.size) if combo[j] is None and snr[j] >= REFINE_SNR]
    noisy = _is_noisy(ys, sigma)
    for _ in range(MAX_ROUNDS):
        if not active:
            break
        if refine and noisy:      # σ: the noise (Jacobian) and the model-order sensitivity (spread) together
            lam[active], std_f[active], std_z[active] = refine_poles(ys, fs, lam0[active], fixed=lam[nuisance],
                                                                     real=real)
        dropped = False
        while active:             # the weakest below snr_min (one at a time: see the docstring) and the twins
            basis = active + nuisance
            amps, stderr, sigma = fit_amplitudes(ys, fs, lam[basis], real=real)
            norm[basis] = amplitude_norms(amps)
            snr[basis] = significant(basis)
            weak = [j for j in active if snr[j] < snr_min]
            drop = set(_duplicates(lam, snr, active)) | ({min(weak, key=lambda j: snr[j])} if weak else set())
            if not drop:
                break
            active, dropped = [j for j in active if j not in drop], True
        if not dropped:
            break
    f = frequencies_and_damping(lam)[0]
    certain = [j for j in active if std_f[j] <= UNCERTAINTY_F * f[j] and std_z[j] <= UNCERTAINTY_Z]
    if refine and noisy:      # reported σ: the noise (Jacobian) and the model-order sensitivity (spread)
        std_f, std_z = np.hypot(std_f, spread_f), np.hypot(std_z, spread_z)
    basis = active + nuisance
    vectors = np.zeros((lam.size, ys[0].shape[1]), complex)
    if basis:
        per_reference = np.asarray(fit_amplitudes(ys, fs, lam[basis], real=real)[0])      # (R, m, c)
        strongest = np.argmax(np.linalg.norm(per_reference, axis=2), axis=0)
        vectors[basis] = per_reference[strongest, np.arange(len(basis))]
    return lam, norm, snr, std_f, std_z, sigma, combo, sorted(certain), vectors if noisy else None


def _duplicates(lam, snr, active):
    """The weaker of every two active poles within COMBINATION_RTOL of each other."""
    out = []
    for a, i in enumerate(active):
        for j in active[a + 1:]:
            if abs(lam[i] - lam[j]) <= COMBINATION_RTOL * abs(lam[i]):
                out.append(i if snr[i] < snr[j] else j)
    return out


def _combination_terms(lam, amplitude):
    """Per pole: the frequencies [Hz] of the two stronger modes whose sum or difference pole
    λ_i + λ_j / λ_i + λ̄_j it is (module docstring), or None."""
    out = [None] * lam.size
    for k in range(lam.size):
        for i in range(lam.size):
            for j in range(i, lam.size):
                if k in (i, j) or amplitude[k] > COMBINATION_AMPLITUDE * min(amplitude[i], amplitude[j]):
                    continue
                for cand in (lam[i] + lam[j], lam[i] + np.conj(lam[j]), np.conj(lam[i]) + lam[j]):
                    cand = complex(cand.real, abs(cand.imag))       # the upper half-plane member
                    if abs(cand - lam[k]) <= COMBINATION_RTOL * abs(lam[k]):
                        out[k] = frequencies_and_damping([lam[i], lam[j]])[0].tolist()
    return out

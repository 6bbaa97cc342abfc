"""Which model modes a record can show: the noise-floor rule behind ``below noise floor`` / ``missed``.

A mode that was not identified is *below the noise floor* when its response at the sensors, set
against the record's noise, would not pass the identification's own reporting tests
(:mod:`.analysis`): SNR ≥ ``snr_min`` and standard deviations of f and ζ within
``UNCERTAINTY_F``·f and ``UNCERTAINTY_Z``. It is *missed* only when it would have passed them:
then the record shows it and the identification failed.

The test is evaluated for the free decay y_c(k) = Σ_j Re(a_jc z_j^k) + const_c + white noise of
std σ_c per channel (z_j = e^{λ_j/fs}, each reference with its own amplitudes a_jc), with

- the amplitudes a_jc *predicted* from the AMA and the known excitation (simulated impact tests:
  :func:`flexmodal_ros.oma.impact.free_decay_contributions`), or else fitted to the record with the
  model's poles;
- σ_c the residual of the record once every model mode and identified pole is fitted (the noise
  floor: measurement noise, and for noise-free simulations the nonlinear remainder);
- SNR_j = ‖a_j‖ / std ‖â_j‖ of the linear least-squares fit with the poles known (as in
  :func:`~flexmodal_ros.oma.mode_estimation.fit_amplitudes`), and std f_j, std ζ_j the Cramér–Rao bounds
  (inverse Fisher information of the poles, amplitudes and constants eliminated by projection —
  what the output-error fit of :func:`~flexmodal_ros.oma.mode_estimation.refine_poles` attains).

Modes are taken in decreasing order of their SNR alone; each is judged together with the stronger
modes already found visible (a weak mode next to a strong one is not separable at a noise level at
which it would be detectable alone; a mode judged invisible does not degrade the others, as an
estimator may leave it out). Because the fitted SNR scatters by about one unit around its
expectation, a mode counts as visible only if it passes with its amplitude lowered by ``margin``
(= 2) standard errors: SNR − 2 ≥ snr_min and std · SNR / (SNR − 2) within the limits (passes at
≥ 97.7 %).

With ``remainder`` (the experiment design's use) a mode judged invisible is not free: the OMA does
not hold it, so its response stays in the residual the other modes are judged against. Its decay,
summed over the invisible modes and taken as its RMS per channel over the record
(:func:`remainder_std`), is added to the noise (σ_c² + r_c²) and the modes are judged again, until
the visible set stops shrinking. Measured on kuka_lwr4 (RK4 plant, K_D × 0.2, one pulse, 1e-7 rad;
docs/calibration.md, "The remainder"): four heavily damped 6–7 Hz modes the OMA cannot separate,
and a 14 Hz one, leave up to 1.4e-6 rad per channel; the SNR the OMA reported for the modes it
found was 2.2–14× below the bound without the remainder, 0.4–2.2× with it.

The bounds assume an estimator that separates any modes it is given; the OMA does not always.
Heavily damped modes closer than their bandwidths merge into one peak, and the weaker ones are then
lost whatever the SNR. :func:`spectral_dominance` measures how far a mode's own spectral peak stands
above the rest of the record at its frequency; the worst-first experiment design requires it of a
visible mode (:class:`~flexmodal_ros.calibration.experiment_design.MeasurementModel`, ``dominance_min``).
Measured on kuka_lwr4 (simulated loop, K_D × 0.2, 2²⁰-count encoders, 224 (configuration, mode)
pairs of one designed and one random loop; docs/calibration.md, "Overlapping modes"): of the modes
with dominance ≥ 1, 64–70 % were recovered, of those below it 4–12 %; SNR alone did not separate
them (best threshold right for 64 % of the pairs).

For several references each record's amplitudes are treated as free: the bound ignores that the
references share mode shapes, which is what separates nearly coincident poles
(:mod:`.methods`), so it is conservative there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..modes import frequencies_and_damping, frequency_damping_std, pair_covariances

MARGIN = 2.0


@dataclass(frozen=True)
class Visibility:
    """Per mode: ``snr`` expected SNR, ``std_frequency_hz`` / ``std_damping_ratio`` Cramér–Rao
    standard deviations [Hz], [-] (with the stronger visible modes), ``visible`` bool (module
    docstring)."""

    snr: np.ndarray
    std_frequency_hz: np.ndarray
    std_damping_ratio: np.ndarray
    visible: np.ndarray


def cramer_rao(eigenvalues, amplitudes, noise, lengths, fs, real=()):
    """(SNR (m,), std f [Hz] (m,), std ζ (m,)) of the modes λ (m,) with amplitudes (R, m, c) in
    R references of ``lengths`` samples at ``fs``, noise std ``noise`` (c,) per channel, the
    ``real`` poles [1/s] and a constant per channel in the fitted basis (module docstring)."""
    lam = np.asarray(eigenvalues, complex)
    amps = np.asarray(amplitudes, complex)
    noise = np.asarray(noise, float)
    m = lam.size
    variance, fisher = np.zeros(m), np.zeros((2 * m, 2 * m))
    for a, N in zip(amps, lengths):
        t = np.arange(N)[:, None] / fs
        z = np.exp(t * lam[None, :])
        basis = np.hstack([z.real, z.imag, np.ones((N, 1)), np.exp(t * np.asarray(real, float)[None, :])])
        q, r = np.linalg.qr(basis)
        r_inv = np.linalg.pinv(r)
        cov = r_inv @ r_inv.T
        variance += (np.diag(cov)[:m] + np.diag(cov)[m:2 * m]) * np.sum(noise ** 2)
        tz = t * z
        for c in range(noise.size):              # ∂y_c/∂Re λ_j = Re(a_jc t z_j^k), ∂/∂Im λ_j = Re(i a_jc t z_j^k)
            jac = np.hstack([np.real(a[:, c] * tz), np.real(1j * a[:, c] * tz)])
            jac -= q @ (q.T @ jac)
            fisher += jac.T @ jac / noise[c] ** 2
    norm = np.sqrt(np.sum(np.abs(amps) ** 2, axis=(0, 2)))
    snr = norm / np.sqrt(np.maximum(variance, 1e-300))
    std_f, std_z = frequency_damping_std(lam, pair_covariances(_inverse(fisher), m))
    return snr, std_f, std_z


class _RecordGram:
    """The inner products over each reference's N samples of every column a group of the modes λ
    (m,) needs in :func:`cramer_rao` — [Re z^k, Im z^k, 1, e^{r k/fs}, Re t z^k, Im t z^k] —, computed
    once: the bound of any group is then algebra on these (2m + 1 + r)-sized blocks (the projection
    I − QQᵀ as a Schur complement) instead of a QR of N rows per group. Equal to :func:`cramer_rao`
    to rounding (test_oma.py)."""

    def __init__(self, eigenvalues, lengths, fs, real=()):
        self.lam = np.asarray(eigenvalues, complex)
        self.real = np.asarray(real, float)
        self.grams = []
        for N in lengths:
            t = np.arange(N)[:, None] / fs
            z = np.exp(t * self.lam[None, :])
            cols = np.hstack([z.real, z.imag, np.ones((N, 1)), np.exp(t * self.real[None, :]), (t * z).real, (t * z).imag])
            self.grams.append(cols.T @ cols)

    def bounds(self, group, amplitudes, noise):
        """(SNR, std f [Hz], std ζ) of the modes ``group`` (indices) fitted together, amplitudes
        (R, m, c) of all the modes, noise (c,): :func:`cramer_rao` of that group."""
        m, g = self.lam.size, np.asarray(group, int)
        k = g.size
        fit = np.concatenate([g, m + g, 2 * m + np.arange(1 + self.real.size)])
        slope = 2 * m + 1 + self.real.size + np.concatenate([g, m + g])
        amps = np.asarray(amplitudes, complex)[:, g]
        variance, fisher = np.zeros(k), np.zeros((2 * k, 2 * k))
        for gram, a in zip(self.grams, amps):
            # in columns scaled to unit norm: a heavily damped mode's columns are small beside the
            # others' and the Schur complement's rounding would otherwise swamp its own (cond of
            # the raw block up to ~1e12 on the LWR4's ζ = 0.84 modes)
            s_fit = 1.0 / np.sqrt(np.maximum(np.diag(gram)[fit], 1e-300))
            s_slope = 1.0 / np.sqrt(np.maximum(np.diag(gram)[slope], 1e-300))
            inv = np.linalg.pinv(gram[np.ix_(fit, fit)] * np.outer(s_fit, s_fit), hermitian=True)
            own = np.diag(inv) * s_fit ** 2                      # the unscaled inverse's diagonal
            variance += (own[:k] + own[k:2 * k]) * np.sum(noise ** 2)
            cross = gram[np.ix_(slope, fit)] * np.outer(s_slope, s_fit)
            scaled = gram[np.ix_(slope, slope)] * np.outer(s_slope, s_slope) - cross @ inv @ cross.T
            H = scaled / np.outer(s_slope, s_slope)
            mix = _mode_mixing(a)
            fisher += np.tensordot(1.0 / noise ** 2, np.swapaxes(mix, 1, 2) @ H @ mix, axes=1)
        snr = np.sqrt(np.sum(np.abs(amps) ** 2, axis=(0, 2))) / np.sqrt(np.maximum(variance, 1e-300))
        std_f, std_z = frequency_damping_std(self.lam[g], pair_covariances(_inverse(fisher), k))
        return snr, std_f, std_z


def _mode_mixing(a):
    """M_c (c, 2m, 2m) with Jacobian_c = [Re, Im](t z^k) M_c from amplitudes a (m, c) (the columns
    ∂y_c/∂Re λ_j = Re(a_jc t z_j^k), ∂y_c/∂Im λ_j = Re(i a_jc t z_j^k)): [[diag Re a, −diag Im a],
    [−diag Im a, −diag Re a]]."""
    m, c = a.shape
    out = np.zeros((c, 2 * m, 2 * m))
    i = np.arange(m)
    out[:, i, i], out[:, i, m + i] = a.real.T, -a.imag.T
    out[:, m + i, i], out[:, m + i, m + i] = -a.imag.T, -a.real.T
    return out


def single_mode_bounds(eigenvalues, amplitudes, noise, lengths, fs):
    """(SNR (m,), std f [Hz] (m,), std ζ (m,)) of each mode *alone*: :func:`cramer_rao` of
    ``eigenvalues[[j]]``, ``amplitudes[:, [j]]`` for every j (no real poles), batched over the modes.

    For one mode the Jacobian of channel c, [Re(a_c t z^k), Re(i a_c t z^k)], is G M_c with
    G = [Re, Im](t z^k) (N, 2) and M_c = [[Re a_c, −Im a_c], [−Im a_c, −Re a_c]], so the projected
    Fisher information is Σ_c M_cᵀ H M_c / σ_c² with H = Gᵀ(I − QQᵀ)G (2, 2), Q the orthonormal
    basis of [Re z^k, Im z^k, 1] (batched QR over the modes)."""
    lam = np.asarray(eigenvalues, complex)
    amps = np.asarray(amplitudes, complex)                 # (R, m, c)
    noise = np.asarray(noise, float)
    m = lam.size
    fisher, variance = np.zeros((m, 2, 2)), np.zeros(m)
    weight = 1.0 / noise ** 2
    for a, N in zip(amps, lengths):
        t = np.arange(N)[None, :] / fs
        z = np.exp(t * lam[:, None])                        # (m, N)
        basis = np.stack([z.real, z.imag, np.ones_like(z.real)], axis=2)      # (m, N, 3)
        q, r = np.linalg.qr(basis)
        r_inv = np.linalg.pinv(r)
        cov = r_inv @ np.swapaxes(r_inv, 1, 2)
        variance += (cov[:, 0, 0] + cov[:, 1, 1]) * np.sum(noise ** 2)
        tz = t * z
        G = np.stack([tz.real, tz.imag], axis=2)           # (m, N, 2)
        QG = np.swapaxes(q, 1, 2) @ G
        H = np.swapaxes(G, 1, 2) @ G - np.swapaxes(QG, 1, 2) @ QG     # (m, 2, 2)
        ar, ai = a.real, a.imag                             # (m, c)
        Mc = np.stack([np.stack([ar, -ai], -1), np.stack([-ai, -ar], -1)], -2)   # (m, c, 2, 2)
        fisher += np.einsum("mcji,mjk,mckl,c->mil", Mc, H, Mc, weight)
    norm = np.sqrt(np.sum(np.abs(amps) ** 2, axis=(0, 2)))
    snr = norm / np.sqrt(np.maximum(variance, 1e-300))
    cov = np.array([_inverse(f) for f in fisher])                       # (m, 2, 2) of (Re λ, Im λ)
    std_f, std_z = frequency_damping_std(lam, cov)
    return snr, std_f, std_z


def _inverse(fisher):
    """Inverse of a symmetric positive semi-definite Fisher matrix scaled to a unit diagonal;
    directions it does not determine (eigenvalues below 1e-16 of the largest, i.e. at rounding)
    get a variance of 1e16 times their scale rather than being truncated away as a
    pseudo-inverse would; a parameter with no information at all (a zero diagonal) gets an
    infinite variance, which callers read as "not determined"."""
    d = np.sqrt(np.maximum(np.diag(fisher), 1e-300))
    w, v = np.linalg.eigh(fisher / np.outer(d, d))
    w = np.maximum(w, 1e-16 * max(w.max(initial=0.0), 1.0))     # the largest is >= 1 unless no information at all
    with np.errstate(over="ignore"):    # 1/d² beyond float range: inf is the answer
        return (v / w) @ v.T / np.outer(d, d)


def remainder_std(eigenvalues, amplitudes, hidden, lengths, fs) -> np.ndarray:
    """RMS per channel (c,) over the records of the summed free decay Σ_j Re(a_jc z_j^k) of the
    ``hidden`` modes (bool (m,)), each record's mean removed (the fit's constant), pooled over the R
    references of ``lengths`` samples: what those modes leave in the residual when no fit holds them."""
    amps = np.asarray(amplitudes, complex)
    hidden = np.asarray(hidden, bool)
    total, count = np.zeros(amps.shape[-1]), 0
    if not hidden.any():
        return total
    lam = np.asarray(eigenvalues, complex)[hidden]
    for a, N in zip(amps, lengths):
        y = np.real(np.exp(np.arange(N)[:, None] / fs * lam[None, :]) @ a[hidden])
        total += np.sum((y - y.mean(axis=0)) ** 2, axis=0)
        count += N
    return np.sqrt(total / max(count, 1))


def spectral_dominance(eigenvalues, amplitudes) -> np.ndarray:
    """Per mode λ_r (m,) of a free decay y_c = Σ_s Re(a_sc e^{λ_s t}) with amplitudes a (m, c): the
    height of its own spectral peak over the rest of the record's spectrum at its damped frequency
    ω_r = Im λ_r, in the channel where that ratio is largest,

        max_c (|a_rc| / σ_r) / Σ' |a_sc| / |iω_r − μ|,   σ_r = −Re λ_r,

    the sum Σ' over every other pole μ of the record (the other modes λ_s and all conjugates λ̄_s,
    its own included), magnitudes added: no cancellation assumed. ≥ 1: the mode has a peak of its
    own in some channel; inf for an undamped or unstable mode (σ_r ≤ 0) with any amplitude; 0 for a
    mode the excitation does not reach (module docstring)."""
    lam = np.asarray(eigenvalues, complex)
    amps = np.abs(np.asarray(amplitudes, complex))
    if lam.size == 0:
        return np.zeros(0)
    omega, sigma = lam.imag, -lam.real
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = (1.0 / np.abs(1j * omega[:, None] - lam[None, :])
                + 1.0 / np.abs(1j * omega[:, None] - lam.conj()[None, :]))       # (m, m): at ω_r, from pole s
        np.fill_diagonal(gain, 1.0 / np.abs(1j * omega - lam.conj()))            # own main term left out
        gain = np.minimum(gain, 1e300)          # an undamped pole at ω_r: the rest unbounded, yet 0 × gain = 0
        own = np.where(sigma[:, None] > 0, amps / np.maximum(sigma, 1e-300)[:, None], np.where(amps > 0, np.inf, 0.0))
        rest = gain @ amps
        ratio = np.where(rest > 0, own / np.where(rest > 0, rest, 1.0), np.where(own > 0, np.inf, 0.0))
    return ratio.max(axis=1)


def screen_modes(eigenvalues, amplitudes, noise, lengths, fs, snr_min: float = 5.0, uncertainty_f: float = 0.005,
                 uncertainty_z: float = 0.005, margin: float = MARGIN, remainder: bool = True) -> Visibility:
    """The screening form of the rule: each mode by its bound *alone* (:func:`single_mode_bounds`),
    visible when it passes the tests with ``margin``; with ``remainder`` the invisible modes' decay
    is added to the noise and the modes are screened again until the visible set stops shrinking
    (module docstring)."""
    lam = np.asarray(eigenvalues, complex)
    amps = np.asarray(amplitudes, complex)
    f = frequencies_and_damping(lam)[0]
    noise = np.asarray(noise, float)
    visible = np.ones(lam.size, bool)
    for _ in range(lam.size + 1):
        extra = remainder_std(lam, amps, ~visible, lengths, fs) if remainder else 0.0
        snr, std_f, std_z = single_mode_bounds(lam, amps, np.hypot(noise, extra), lengths, fs)
        kept = np.maximum(snr - margin, 0.0) / np.maximum(snr, 1e-300)
        now = visible & (snr - margin >= snr_min) & (std_f <= kept * uncertainty_f * f) & (std_z <= kept * uncertainty_z)
        if not remainder or (now == visible).all():
            return Visibility(snr, std_f, std_z, now)
        visible = now
    return Visibility(snr, std_f, std_z, visible)


def visible_modes(eigenvalues, amplitudes, noise, lengths, fs, real=(), snr_min: float = 5.0,
                  uncertainty_f: float = 0.005, uncertainty_z: float = 0.005, margin: float = MARGIN,
                  remainder: bool = False) -> Visibility:
    """The noise-floor rule (module docstring) for modes λ (m,) with amplitudes (R, m, c); with
    ``remainder`` the invisible modes' decay joins the noise (module docstring)."""
    noise = np.asarray(noise, float)
    gram = _RecordGram(eigenvalues, lengths, fs, real)
    vis = _visible_modes(gram, amplitudes, noise, lengths, fs, snr_min, uncertainty_f, uncertainty_z, margin)
    for _ in range(len(vis.visible) if remainder else 0):
        extra = remainder_std(eigenvalues, amplitudes, ~vis.visible, lengths, fs)
        again = _visible_modes(gram, amplitudes, np.hypot(noise, extra), lengths, fs, snr_min,
                               uncertainty_f, uncertainty_z, margin)
        again = Visibility(again.snr, again.std_frequency_hz, again.std_damping_ratio, again.visible & vis.visible)
        if (again.visible == vis.visible).all():
            return again
        vis = again
    return vis


def _visible_modes(gram, amplitudes, noise, lengths, fs, snr_min, uncertainty_f, uncertainty_z, margin):
    """One pass of the rule at the per-channel ``noise`` (modes in decreasing SNR alone, each with
    the stronger visible ones), the groups' bounds from ``gram`` (:class:`_RecordGram`)."""
    lam = gram.lam
    amps = np.asarray(amplitudes, complex)
    m = lam.size
    snr, std_f, std_z = np.zeros(m), np.full(m, np.inf), np.full(m, np.inf)
    visible = np.zeros(m, bool)
    alone = (single_mode_bounds(lam, amps, noise, lengths, fs)[0] if gram.real.size == 0 else
             np.array([gram.bounds([j], amps, noise)[0][0] for j in range(m)]))
    chosen = []
    for j in np.argsort(-alone):
        group = chosen + [int(j)]
        s, sf, sz = (v[-1] for v in gram.bounds(group, amps, noise))
        snr[j], std_f[j], std_z[j] = s, sf, sz
        kept = max(s - margin, 0.0) / max(s, 1e-300)          # amplitude lowered by `margin` std errors
        f = frequencies_and_damping(lam[j])[0]
        if s - margin >= snr_min and sf <= kept * uncertainty_f * f and sz <= kept * uncertainty_z:
            visible[j] = True
            chosen.append(int(j))
    return Visibility(snr, std_f, std_z, visible)

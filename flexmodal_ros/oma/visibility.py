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


def _inverse(fisher):
    """Inverse of a symmetric positive semi-definite Fisher matrix scaled to a unit diagonal;
    directions it does not determine (eigenvalues below 1e-16 of the largest, i.e. at rounding)
    get a variance of 1e16 times their scale rather than being truncated away as a
    pseudo-inverse would."""
    d = np.sqrt(np.maximum(np.diag(fisher), 1e-300))
    w, v = np.linalg.eigh(fisher / np.outer(d, d))
    w = np.maximum(w, 1e-16 * max(w.max(initial=0.0), 1e-300))
    return (v / w) @ v.T / np.outer(d, d)


def visible_modes(eigenvalues, amplitudes, noise, lengths, fs, real=(), snr_min: float = 5.0,
                  uncertainty_f: float = 0.005, uncertainty_z: float = 0.005, margin: float = MARGIN) -> Visibility:
    """The noise-floor rule (module docstring) for modes λ (m,) with amplitudes (R, m, c)."""
    lam = np.asarray(eigenvalues, complex)
    amps = np.asarray(amplitudes, complex)
    m = lam.size
    snr, std_f, std_z = np.zeros(m), np.full(m, np.inf), np.full(m, np.inf)
    visible = np.zeros(m, bool)
    alone = np.array([cramer_rao(lam[[j]], amps[:, [j]], noise, lengths, fs, real)[0][0] for j in range(m)])
    chosen = []
    for j in np.argsort(-alone):
        group = chosen + [int(j)]
        s, sf, sz = (v[-1] for v in cramer_rao(lam[group], amps[:, group], noise, lengths, fs, real))
        snr[j], std_f[j], std_z[j] = s, sf, sz
        kept = max(s - margin, 0.0) / max(s, 1e-300)          # amplitude lowered by `margin` std errors
        f = frequencies_and_damping(lam[j])[0]
        if s - margin >= snr_min and sf <= kept * uncertainty_f * f and sz <= kept * uncertainty_z:
            visible[j] = True
            chosen.append(int(j))
    return Visibility(snr, std_f, std_z, visible)

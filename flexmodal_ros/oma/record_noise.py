"""Measurement noise of a record, estimated from the record itself (no model): what the OMA
whitens its channels by when a record is noisy (:mod:`.mode_estimation`), and the information
Jᵀ Σ J of its output-error fit when the residual is not white (quantization of a slow decay)."""
from __future__ import annotations

import numpy as np

from .estimators import as_segments

# Second differences of white noise of std σ have std √6 σ; the median absolute value of a normal
# variable is 0.6745 of its std (a robust estimate: the early, large second differences of fast modes
# are a minority of the samples).
MAD_TO_STD = 1.0 / 0.6745
# Longest lag [samples] of the residual autocovariance in the colored-noise σ (colored_information):
# 1 kHz records, 5 Hz resolution of the residual spectrum — the width of kuka_lwr4's ζ 0.15 modes.
COLORED_MAX_LAG = 200
# A channel is quantized when every gap between its distinct values (per segment) is a whole multiple
# of the smallest one within this fraction of it (roundoff of counts × quantum / gear is ~1e-12 of it).
QUANTUM_RTOL = 1e-3
QUANTUM_MIN_GAPS = 3         # distinct gaps needed to call a channel quantized


def noise_level(ys) -> np.ndarray:
    """Per channel (c,) the measurement noise std of the segments ``ys``, from their second
    differences (median absolute value · MAD_TO_STD / √6, pooled over the references): the
    signal's second difference at f ≪ fs is (2π f/fs)² times smaller, so what remains is the
    noise (and the quantization, ≈ quantum/√12 when the signal crosses many quanta). An upper
    bound for records with strong modes near the Nyquist frequency."""
    d2 = np.vstack([np.diff(y, 2, axis=0) for y in as_segments(ys)])
    return MAD_TO_STD * np.median(np.abs(d2), axis=0) / np.sqrt(6.0)


def quantization_step(ys, level=None) -> np.ndarray:
    """Per channel (c,) the quantum of a channel whose values lie on a grid (an encoder's counts,
    whatever offset a segment has) coarser than its other noise, 0 for a channel that does not
    (measurement noise, too few distinct values to tell, or a grid finer than the noise
    :func:`noise_level` sees: values printed or stored with fewer digits than their noise). The
    quantization error of a signal crossing many quanta is white with std quantum/√12; the second
    differences cannot see it when the signal moves less than a count per sample (mostly zero: the
    median estimate collapses to roundoff; on a busier channel it reads up to 0.6 quantum).
    ``level``: :func:`noise_level` of ``ys`` when the caller has it."""
    segments = as_segments(ys)
    level = noise_level(segments) if level is None else np.asarray(level, float)
    out = np.zeros(segments[0].shape[1])
    for c in range(out.size):
        gaps = []
        for y in segments:
            values = np.unique(y[:, c])
            gap = np.diff(values)
            gaps.append(gap[gap > 1e-9 * max(float(np.abs(values).max(initial=0.0)), 1e-300)])
        gaps = np.concatenate(gaps)
        if gaps.size < QUANTUM_MIN_GAPS:
            continue
        ratio = gaps / gaps.min()
        if np.all(np.abs(ratio - np.round(ratio)) <= QUANTUM_RTOL) and level[c] <= gaps.min():
            out[c] = gaps.min()
    return out


def colored_information(jac, residual, segments, dof_factor=1.0, max_lag=COLORED_MAX_LAG):
    """Jᵀ Σ J of the output-error fit for a residual that is not white: Σ block diagonal over the
    references and channels, each block Toeplitz with that channel's residual autocovariance γ(l)
    up to lag L = min(``max_lag``, N/4) under a Bartlett taper (lag-window estimate, non-negative
    spectrum; Newey & West 1987), times ``dof_factor`` (samples / degrees of freedom: the fit
    took its parameters' share of the residual). ``jac`` (M, p) and ``residual`` (M,) are raveled
    (N, c) per segment, in ``segments``' order. Computed by FFT (exact linear correlation,
    zero-padded). For white noise
    Jᵀ Σ J ≈ s² JᵀJ; quantization of a slowly varying signal (a pulse response crossing few
    encoder counts) puts its error at the signal's own frequencies, where J lives, and Jᵀ Σ J
    is then several times larger."""
    p = jac.shape[1]
    out = np.zeros((p, p))
    start = 0
    for seg in segments:
        N, c = seg.shape
        J = jac[start:start + N * c].reshape(N, c, p)
        r = residual[start:start + N * c].reshape(N, c)
        start += N * c
        L = int(max(1, min(max_lag, N // 4)))
        P = int(2 ** np.ceil(np.log2(N + L + 1)))
        power = np.abs(np.fft.rfft(r, P, axis=0)) ** 2
        gamma = np.fft.irfft(power, P, axis=0)[:L + 1] / N                 # (L + 1, c) biased autocovariance
        gamma *= (1.0 - np.arange(L + 1) / (L + 1.0))[:, None]              # Bartlett taper
        gamma *= dof_factor
        circular = np.zeros((P, c))
        circular[:L + 1] = gamma
        circular[P - L:] = gamma[1:][::-1]
        spectrum = np.fft.rfft(circular, axis=0).real                       # (P/2 + 1, c), ≥ 0
        for ch in range(c):
            conv = np.fft.irfft(np.fft.rfft(J[:, ch], P, axis=0) * spectrum[:, ch, None], P, axis=0)[:N]
            out += J[:, ch].T @ conv
    return 0.5 * (out + out.T)

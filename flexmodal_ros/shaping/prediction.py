"""Residual vibration predicted on the linearized model along a path (no simulation, no rclpy).

Definitions (used by the shaper design choice, :mod:`flexmodal_ros.shaping.shaper_design`, the CLI and the
nodes):

- **Progress** σ(t) of a path or shaped reference: the path parameter p of each copy of the path,
  weighted by the impulse amplitudes, σ = Σ_i A_i(t) p(t − τ_i(t)) (for a one-segment move
  y(t) = q0 + (qf − q0) σ(t) exactly), and σ'(t) = Σ_i [A_i' p(u_i) + A_i p'(u_i) (1 − τ_i')],
  u_i = t − τ_i(t).
- **Modal amplitude** of tracked mode k left at time t_e by the reference (frozen-coefficient (WKB)
  modal convolution with the closed-loop eigenvalue λ_k(σ) of the configuration of progress σ,
  thesis (2.13)-(2.17)):

      a_k(t_e) = ∫ σ'(t) exp(∫_t^{t_e} λ_k(σ(s)) ds) dt     [segments],

  after the reference ends (t_e > its end T_e) a_k(t_e) = a_k(T_e) exp(λ_k,end (t_e − T_e)).
  The *percentage residual vibration* V_k = |a_k(T_e)| / Δσ is 1 for an instantaneous step of the
  same size at T_e, 0 for no vibration left (for constant λ and a constant shaper it is the classic
  V of Singer & Seering 1990 times that of the unshaped profile).
- **Predicted end-effector residual** of mode k [m]: c_k |a_k|, c_k the mode's end-effector
  contribution per segment of the move (:func:`~flexmodal_ros.shaping.schedule.end_effector_contributions`:
  the amplitude of the mode in the tool point's response to a step of the motor reference by one
  segment of the move, K_P W Δq); the predicted peak of several modes is the sum of theirs.

Integration: trapezoidal rule on a uniform grid over [0, T_e] at ``rate_hz`` (default: 20 samples
per period of the fastest tracked mode, between 200 Hz and 2 kHz; ω h ≤ 0.31, where the rule's
relative error on an oscillating integrand, (ω h)²/12, stays below 1 %); modes above 2 kHz / 20 =
100 Hz are not predicted (NaN): a C⁴ profile of ≥ 0.1 s leaves them nothing worth predicting. Plain
NumPy sums (no ``numpy.trapezoid`` / ``scipy.integrate.cumulative_simpson``, absent from the
oldest supported versions).
"""
from __future__ import annotations

import numpy as np

from ..robot.trajectory import ETA_ASCENDING
from .reference import ShapedTrajectory, _segments

PREDICTION_RATE_HZ = 2000.0
PREDICTION_SAMPLES_PER_PERIOD = 20       # modes above rate_hz / this are not predicted
PREDICTION_MIN_RATE_HZ = 200.0


def _path_parameter(path, u):
    """p(u) and p'(u) of a waypoint path at times u (any shape): p = k + η(s) on segment k."""
    times = path.times
    if times.size < 2:
        return np.zeros_like(u), np.zeros_like(u)
    if times.size == 2:                # one segment: k = 0 everywhere
        k, T = 0, times[1] - times[0]
        s = np.clip((u - times[0]) / T, 0.0, 1.0)
    else:
        k = _segments(times, u)
        T = times[k + 1] - times[k]
        s = np.clip((u - times[k]) / T, 0.0, 1.0)
    eta0, eta1 = (s >= 1.0).astype(float), np.zeros_like(s)         # η(0) = 0, η(1) = 1, η'(0) = η'(1) = 0
    inside = (s > 0.0) & (s < 1.0)
    if inside.any():                   # the polynomial only where a copy is moving (most of t − τ is not)
        x = s[inside]
        (c0, *high0), (c1, *high1) = ETA_ASCENDING[0, ::-1], ETA_ASCENDING[1, ::-1]    # Horner, highest power first
        a, b = np.full(x.shape, c0), np.full(x.shape, c1)
        for c0, c1 in zip(high0, high1):                              # in place: the same operations
            a *= x
            a += c0
            b *= x
            b += c1
        eta0[inside], eta1[inside] = a, b
    return k + eta0, eta1 / T


def progress(reference, t) -> np.ndarray:
    """Progress σ(t) and σ'(t) (module docstring) of a path or shaped reference: (m, 2)."""
    t = np.asarray(t, float)
    if not isinstance(reference, ShapedTrajectory):
        return np.stack(_path_parameter(reference, t), axis=1)
    schedule, path = reference.schedule, reference.path
    if schedule.constant:                                   # one impulse sequence: A' = τ' = 0
        A, tau = schedule.amplitudes[0], schedule.delays[0]
        p, dp = _path_parameter(path, t[:, None] - tau[None, :])
        return np.stack([p @ A, dp @ A], axis=1)
    p_t, dp_t = _path_parameter(path, t)                    # the schedule follows the unshaped path
    A, tau = schedule.parameters(p_t, orders=2)             # (m, 2, N): values and d/dp
    p, dp = _path_parameter(path, t[:, None] - tau[:, 0])
    sigma = np.sum(A[:, 0] * p, axis=1)
    rate = np.sum(A[:, 1] * dp_t[:, None] * p + A[:, 0] * dp * (1.0 - tau[:, 1] * dp_t[:, None]), axis=1)
    return np.stack([sigma, rate], axis=1)


def path_eigenvalues(path_modes, modes=None) -> np.ndarray:
    """Closed-loop eigenvalues λ = 2πf (−ζ + i√(1 − ζ²)) (samples, K) of tracked modes ``modes``
    (default all) of :class:`~flexmodal_ros.shaping.PathModes`."""
    modes = list(range(path_modes.frequencies_hz.shape[1]) if modes is None else modes)
    z = path_modes.damping_ratios[:, modes]
    return 2.0 * np.pi * path_modes.frequencies_hz[:, modes] * (-z + 1j * np.sqrt(np.maximum(1.0 - z * z, 0.0)))


def wkb_weights(path_modes, modes, sigma, t, scales=(1.0,)) -> np.ndarray:
    """exp(s ∫_t^{t_end} λ_k(σ(u)) du) (len(scales), count, K) on the uniform grid ``t`` (count,)
    for the progress ``sigma`` (count,) (trapezoidal phase), eigenvalues of tracked ``modes``
    scaled by ``scales`` (s λ: the frequency × s, the same ζ; model-error cases)."""
    h = t[1] - t[0]
    lam = path_eigenvalues(path_modes, modes)
    sample_p = path_modes.segment + path_modes.eta
    i = _segments(sample_p, sigma)                                       # np.interp, all modes
    gap = sample_p[i + 1] - sample_p[i]
    w = np.clip((sigma - sample_p[i]) / np.where(gap > 0, gap, 1.0), 0.0, 1.0)[:, None]
    at = (1.0 - w) * lam[i] + w * lam[i + 1]
    phase = np.zeros_like(at)
    np.cumsum(0.5 * h * (at[1:] + at[:-1]), axis=0, out=phase[1:])
    rest = phase[-1] - phase
    if tuple(scales) == (1.0,):
        return np.exp(rest)[None]
    return np.stack([np.exp(s * rest) for s in scales])


def trapezoid_weights(t) -> np.ndarray:
    """Trapezoidal quadrature weights of the uniform grid ``t``."""
    w = np.full(t.size, t[1] - t[0])
    w[[0, -1]] *= 0.5
    return w


def prediction_grid(reference, path_modes, modes, rate_hz=PREDICTION_RATE_HZ):
    """(t (count,), too_fast (K,)): the uniform grid over [0, T_e] of :func:`modal_amplitudes` and
    the modes above its rate / 20 (module docstring)."""
    lam = path_eigenvalues(path_modes, modes)
    fastest = np.abs(lam).max(axis=0) / (2.0 * np.pi)
    too_fast = fastest > rate_hz / PREDICTION_SAMPLES_PER_PERIOD
    if rate_hz == PREDICTION_RATE_HZ and not too_fast.all():       # default: as fine as the modes need
        rate_hz = max(PREDICTION_MIN_RATE_HZ, PREDICTION_SAMPLES_PER_PERIOD * fastest[~too_fast].max())
    duration = float(reference.duration)
    return np.linspace(0.0, duration, max(3, int(np.ceil(duration * rate_hz)) + 1)), too_fast


def modal_amplitudes(reference, path_modes, modes=None, end=None, rate_hz=PREDICTION_RATE_HZ) -> np.ndarray:
    """Complex modal amplitudes a_k(t_e) [segments] (module docstring) of tracked modes ``modes``
    (default all) left by the path or shaped ``reference`` at time ``end`` (default its end, T_e);
    NaN for modes above rate_hz / 20."""
    modes = list(range(path_modes.frequencies_hz.shape[1]) if modes is None else modes)
    t, too_fast = prediction_grid(reference, path_modes, modes, rate_hz)
    sig = progress(reference, t)
    weight = wkb_weights(path_modes, modes, sig[:, 0], t)[0]           # exp(∫_t^{T_e} λ)
    amplitude = (trapezoid_weights(t) * sig[:, 1]) @ weight
    duration = float(reference.duration)
    if end is not None and end > duration:
        amplitude = amplitude * np.exp(path_eigenvalues(path_modes, modes)[-1] * (end - duration))
    amplitude[too_fast] = np.nan
    return amplitude


def linearized_vibration(reference, path_modes, modes=None, rate_hz=PREDICTION_RATE_HZ) -> np.ndarray:
    """Percentage residual vibration V_k = |a_k(T_e)| / Δσ on the linearized model (module
    docstring) of the tracked modes ``modes`` (default: the selected ones) of
    :class:`~flexmodal_ros.shaping.PathModes` ``path_modes`` (computed for ``reference``'s path),
    for the path or shaped ``reference``."""
    modes = path_modes.selected if modes is None else tuple(modes)
    segments = max(1, reference.positions.shape[0] - 1)
    return np.abs(modal_amplitudes(reference, path_modes, modes, rate_hz=rate_hz)) / segments


def copy_amplitudes(path, path_modes, modes, delays, sigma, t, scales=(1.0,)) -> np.ndarray:
    """Modal amplitudes a_kj (len(scales), K, J) [segments] left at the grid's end t[-1] by one copy
    of the unshaped ``path`` delayed by each of ``delays`` (J,), with the eigenvalues λ_k(σ(t))
    of the progress ``sigma`` (count,) on the uniform time grid ``t`` (count,) (the reference the
    copies add up to), each scaled by ``scales`` (:func:`wkb_weights`). A constant shaper with
    amplitudes A_j at these delays whose progress is ``sigma`` leaves a_k = Σ_j A_j a_kj: linear
    in A."""
    weight = wkb_weights(path_modes, modes, sigma, t, scales)            # (S, count, K)
    _, rate = _path_parameter(path, t[:, None] - np.asarray(delays, float)[None, :])       # (count, J)
    rate = rate * trapezoid_weights(t)[:, None]
    w = weight.transpose(0, 2, 1)                                        # (S, K, count) @ (count, J): BLAS
    return (w.real @ rate) + 1j * (w.imag @ rate)

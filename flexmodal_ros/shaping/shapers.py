"""Input shapers: ZV, ZVD and EI impulse sequences for one mode, convolution over several modes.

A shaper is a sequence of impulses with amplitudes A_i > 0 (Σ A_i = 1) at times 0 = t_1 < ... <
t_N [s]. Convolved with any command it leaves no (ZV, ZVD) or little (EI) residual vibration of a
second-order mode with natural frequency f [Hz] and damping ratio ζ (0 ≤ ζ < 1). With
ω = 2πf, ω_d = ω√(1 − ζ²), T_d = 2π/ω_d and K = exp(−ζπ/√(1 − ζ²)):

- ZV (Singer & Seering 1990): A = [1, K]/(1 + K), t = [0, T_d/2];
- ZVD (Singer & Seering 1990): A = [1, 2K, K²]/(1 + K)², t = [0, T_d/2, T_d];
- EI, extra-insensitive, with vibration tolerance V (Singhose, Seering & Singer 1994), undamped
  closed form A = [(1 + V)/4, (1 − V)/2, (1 + V)/4], t = [0, T/2, T]. For ζ > 0 no closed form is
  published (only curve fits); here the damped EI is the solution of its defining constraints:
  Σ A = 1, residual vibration V at the design frequency with zero slope there (the hump's top),
  and zero vibration at one frequency below and one above it (7 equations in A_1..A_3, t_2, t_3
  and the two zero frequencies), continued in ζ from the closed form on a grid and interpolated
  (:func:`ei_table`). It reduces to the closed form at ζ = 0.

Percentage residual vibration of an impulse sequence for a mode (ω, ζ) (Singer & Seering 1990):
the amplitude of the vibration left after the last impulse relative to that of a single unit
impulse at t = 0:

    V(ω, ζ) = e^{−ζω t_N} √(C² + S²),  C = Σ A_i e^{ζω t_i} cos(ω_d t_i),  S = Σ A_i e^{ζω t_i} sin(ω_d t_i).

Insensitivity at tolerance V_tol: width (ω_hi − ω_lo)/ω_n of the frequency band around the design
frequency where V ≤ V_tol (undamped: ZV 0.064, ZVD 0.287, EI(5 %) 0.400, the published widths).

Arrays: every design function accepts f and ζ of any broadcastable shape and returns a
:class:`Shaper` whose amplitudes and times have that shape plus a last axis of impulses (a
time-varying shaper along a path is one batched Shaper).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_array, shown

KINDS = ("zv", "zvd", "ei")
DEFAULT_TOLERANCE = 0.05     # EI vibration tolerance V (5 %)
EI_MAX_DAMPING = 0.5         # EI table range: ζ in [0, EI_MAX_DAMPING]
_EI_GRID_STEP = 0.01


@dataclass(frozen=True)
class Shaper:
    """Impulse sequence(s): ``amplitudes`` and ``times`` [s] of shape batch + (N,), Σ amplitudes = 1,
    times[..., 0] = 0; ``kind`` e.g. "zvd" or "zvd*zvd" (convolved)."""
    amplitudes: np.ndarray
    times: np.ndarray
    kind: str

    @property
    def num_impulses(self) -> int:
        return int(self.times.shape[-1])

    @property
    def duration(self) -> np.ndarray:
        """Last impulse time [s] (the delay the shaper adds to a command)."""
        return self.times.max(axis=-1)

    @property
    def centroid(self) -> np.ndarray:
        """Σ A_i t_i [s]: the mean delay of the shaped command."""
        return np.sum(self.amplitudes * self.times, axis=-1)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "amplitudes": self.amplitudes.tolist(), "times_s": self.times.tolist(),
                "duration_s": self.duration.tolist()}


def check_modes(frequencies_hz, damping_ratios, field="mode"):
    """(f, ζ) broadcast to float arrays; InputError naming the field for f ≤ 0, NaN/inf, ζ < 0
    (unstable: growing vibration cannot be cancelled by a shaper) or ζ ≥ 1 (overdamped: no
    vibration to cancel)."""
    f = finite_array(frequencies_hz, f"{field}.frequency_hz")
    z = finite_array(damping_ratios, f"{field}.damping_ratio")
    f, z = np.broadcast_arrays(f, z)
    if np.any(f <= 0):
        raise InputError(f"{field}.frequency_hz: must be > 0 Hz, got {float(f[f <= 0].flat[0]):g}")
    if np.any(z < 0):
        raise InputError(f"{field}.damping_ratio: {float(z[z < 0].flat[0]):g} < 0 is an unstable mode: "
                         "a shaper cannot cancel growing vibration")
    if np.any(z >= 1):
        raise InputError(f"{field}.damping_ratio: {float(z[z >= 1].flat[0]):g} >= 1 is overdamped: "
                         "no vibration to shape")
    return f.astype(float), z.astype(float)


def _damped(f, z):
    """(ω_d [rad/s], K) for f [Hz], ζ."""
    root = np.sqrt(1.0 - z * z)
    return 2.0 * np.pi * f * root, np.exp(-z * np.pi / root)


def zv(frequency_hz, damping_ratio) -> Shaper:
    """Zero-vibration shaper A = [1, K]/(1 + K), t = [0, T_d/2] (Singer & Seering 1990)."""
    f, z = check_modes(frequency_hz, damping_ratio)
    wd, K = _damped(f, z)
    amps = np.stack([np.ones_like(K), K], -1) / (1.0 + K)[..., None]
    return Shaper(amps, np.stack([np.zeros_like(wd), np.pi / wd], -1), "zv")


def zvd(frequency_hz, damping_ratio) -> Shaper:
    """Zero-vibration-and-derivative shaper A = [1, 2K, K²]/(1 + K)², t = [0, T_d/2, T_d]."""
    f, z = check_modes(frequency_hz, damping_ratio)
    wd, K = _damped(f, z)
    amps = np.stack([np.ones_like(K), 2.0 * K, K * K], -1) / ((1.0 + K) ** 2)[..., None]
    half = np.pi / wd
    return Shaper(amps, np.stack([np.zeros_like(wd), half, 2.0 * half], -1), "zvd")


def ei(frequency_hz, damping_ratio, tolerance=DEFAULT_TOLERANCE) -> Shaper:
    """Extra-insensitive shaper with vibration tolerance ``tolerance`` (module docstring).

    ζ = 0 gives the closed form A = [(1 + V)/4, (1 − V)/2, (1 + V)/4], t = [0, T/2, T]; ζ > 0 the
    constraint solution from :func:`ei_table` (cubic interpolation in ζ, constraints met to ~1e-9).
    """
    f, z = check_modes(frequency_hz, damping_ratio)
    tolerance = _check_tolerance(tolerance)
    if np.any(z > EI_MAX_DAMPING):
        raise InputError(f"damping_ratio: EI shapers are tabulated for ζ <= {EI_MAX_DAMPING:g}, got "
                         f"{float(z.max()):g} (use zv or zvd for such a damped mode)")
    grid, a1, a3, t2, t3 = ei_table(tolerance)
    # deferred: scipy.interpolate
    from scipy.interpolate import CubicSpline
    period = 2.0 * np.pi / _damped(f, z)[0]            # undamped-normalized times below are in T_d units
    A1, A3 = CubicSpline(grid, a1)(z), CubicSpline(grid, a3)(z)
    T2, T3 = CubicSpline(grid, t2)(z) * period, CubicSpline(grid, t3)(z) * period
    amps = np.stack([A1, 1.0 - A1 - A3, A3], -1)
    return Shaper(amps, np.stack([np.zeros_like(T2), T2, T3], -1), "ei")


def _check_tolerance(tolerance):
    v = float(finite_array(tolerance, "tolerance", ()))
    if not 0.0 < v < 0.5:
        raise InputError(f"tolerance: EI vibration tolerance must be in (0, 0.5), got {v:g}")
    return v


def _ei_residuals(x, zeta, tol):
    """The 7 EI constraints (module docstring) for x = [A1, A2, A3, t2, t3, r_lo, r_hi], times in
    units of the damped period T_d of a mode with ω_n = 1 (frequency ratios r relative to ω_n)."""
    a = x[:3]
    t = np.array([0.0, x[3], x[4]]) * 2.0 * np.pi / np.sqrt(1.0 - zeta * zeta)
    root = np.sqrt(1.0 - zeta * zeta)

    def vector(r):            # Σ A_i e^{(ζ + i√(1−ζ²)) r t_i} e^{−ζ r t_N}: complex residual at ω = r ω_n
        return np.sum(a * np.exp((zeta + 1j * root) * r * t)) * np.exp(-zeta * r * t[-1])

    def v2(r):
        return abs(vector(r)) ** 2

    h = 1e-6
    lo, hi = vector(x[5]), vector(x[6])
    return np.array([a.sum() - 1.0, np.sqrt(v2(1.0)) - tol, (v2(1.0 + h) - v2(1.0 - h)) / (2 * h),
                     lo.real, lo.imag, hi.real, hi.imag])


def _newton(fun, x, args, iterations=12, step=1e-7):
    """Newton's method with a forward-difference Jacobian, for the small well-conditioned EI system
    (condition number ~17) started close to the root by continuation (3-4 iterations)."""
    for _ in range(iterations):
        r = fun(x, *args)
        if np.abs(r).max() < 1e-13:
            break
        J = np.empty((r.size, x.size))
        for j in range(x.size):
            dx = np.zeros_like(x)
            dx[j] = step
            J[:, j] = (fun(x + dx, *args) - r) / step
        x = x - np.linalg.solve(J, r)
    return x


@functools.lru_cache(maxsize=8)
def ei_table(tolerance=DEFAULT_TOLERANCE):
    """EI designs on a ζ grid 0..EI_MAX_DAMPING (step 0.01) for one tolerance, by continuation
    from the undamped closed form: (ζ grid, A1, A3, t2/T_d, t3/T_d), each read-only. Cached."""
    tol = _check_tolerance(tolerance)
    grid = np.round(np.arange(0.0, EI_MAX_DAMPING + 1e-12, _EI_GRID_STEP), 10)
    delta = np.arccos((1.0 - tol) / (1.0 + tol)) / np.pi
    x = np.array([(1 + tol) / 4, (1 - tol) / 2, (1 + tol) / 4, 0.5, 1.0, 1.0 - delta, 1.0 + delta])
    rows = [x.copy()]
    for zeta in grid[1:]:
        x = _newton(_ei_residuals, x, (zeta, tol))
        if np.abs(_ei_residuals(x, zeta, tol)).max() > 1e-10 or np.any(x[:3] <= 0):
            raise InputError(f"tolerance: no positive EI shaper for V = {tol:g} at ζ = {zeta:g}")
        rows.append(x.copy())
    table = np.array(rows)
    out = (grid, table[:, 0], table[:, 2], table[:, 3], table[:, 4])
    for arr in out:
        arr.setflags(write=False)
    return out


def design(kind, frequency_hz, damping_ratio, tolerance=DEFAULT_TOLERANCE) -> Shaper:
    """Shaper ``kind`` ("zv", "zvd" or "ei") for modes (f, ζ) of any broadcast shape."""
    if kind == "zv":
        return zv(frequency_hz, damping_ratio)
    if kind == "zvd":
        return zvd(frequency_hz, damping_ratio)
    if kind == "ei":
        return ei(frequency_hz, damping_ratio, tolerance)
    raise InputError(f"shaper: unknown kind {shown(kind)} (choose from {', '.join(KINDS)})")


def convolve(*shapers: Shaper) -> Shaper:
    """Convolution of shapers (one per mode): N_1·N_2·... impulses with amplitudes A_i B_j ... and
    times t_i + s_j + ...; batch axes broadcast. Impulses keep the fixed order (i, j, ...) (not
    sorted by time, so that a time-varying shaper's impulses stay the same ones along a path)."""
    if not shapers:
        raise InputError("shapers: at least one shaper is required")
    amps, times = shapers[0].amplitudes, shapers[0].times
    for s in shapers[1:]:
        amps = (amps[..., :, None] * s.amplitudes[..., None, :])
        times = (times[..., :, None] + s.times[..., None, :])
        amps = amps.reshape(amps.shape[:-2] + (-1,))
        times = times.reshape(times.shape[:-2] + (-1,))
    return Shaper(amps, times, "*".join(s.kind for s in shapers))


def percentage_vibration(shaper: Shaper, frequency_hz, damping_ratio) -> np.ndarray:
    """Residual vibration V(ω, ζ) of ``shaper`` for modes (f, ζ) (module docstring; 1 = a single
    unit impulse, 0 = none). Shapes: the shaper's batch shape broadcast with f and ζ."""
    f = np.asarray(frequency_hz, float)[..., None]
    z = np.asarray(damping_ratio, float)[..., None]
    w = 2.0 * np.pi * f
    wd = w * np.sqrt(1.0 - z * z)
    A, t = shaper.amplitudes, shaper.times
    grow = A * np.exp(z * w * t)
    C = np.sum(grow * np.cos(wd * t), -1)
    S = np.sum(grow * np.sin(wd * t), -1)
    return np.exp(-z[..., 0] * w[..., 0] * t.max(-1)) * np.hypot(C, S)


def insensitivity(shaper: Shaper, frequency_hz, damping_ratio, tolerance=DEFAULT_TOLERANCE):
    """(width, ratio_lo, ratio_hi): band of frequency ratios ω/ω_n around 1 (a single, unbatched
    shaper designed for frequency_hz) in which V ≤ tolerance, damping ratio fixed; width = hi − lo.
    Edges found by bisection to 1e-10. InputError if V > tolerance at the design frequency."""
    # deferred: scipy.optimize
    from scipy.optimize import brentq

    f0 = float(frequency_hz)

    def excess(r):
        return float(percentage_vibration(shaper, f0 * r, damping_ratio)) - tolerance

    if excess(1.0) > 1e-9:
        raise InputError(f"tolerance: V = {excess(1.0) + tolerance:.3g} > {tolerance:g} at the design frequency")
    edges = []
    for step in (-1e-3, 1e-3):
        r = 1.0
        while excess(r + step) <= 0.0:
            r += step
            if not 1e-3 < r < 10.0:
                raise InputError("tolerance: the insensitive band does not close within 0..10 x the design frequency")
        edges.append(brentq(excess, r, r + step, xtol=1e-12) if step > 0 else brentq(excess, r + step, r, xtol=1e-12))
    return edges[1] - edges[0], edges[0], edges[1]


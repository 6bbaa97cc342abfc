"""Constant impulse sequences along a path: the robust (band-covering) design (no rclpy).

The ``robust`` design of :mod:`flexmodal_ros.shaping.shaper_design`: one constant impulse
sequence, as long as the family's shaper (convolved over the selected modes) designed at each mode's *lowest* frequency along the path, whose residual is
small for the eigenvalues every selected mode takes along the path and for those scaled by
1 ± ``ROBUST_DELTA`` (±10 % in frequency, same ζ: about ±20 % of joint stiffness in the model):
a specified-insensitivity design (Singhose, Seering & Singer 1996 bound the residual at sampled
frequencies of the band a shaper must cover instead of at one design frequency) made for the
band the path traverses. The residual constraints are the predicted modal amplitudes
(:mod:`flexmodal_ros.shaping.prediction`), linear in the amplitudes A_j ≥ 0 of impulses on a
time grid (8 per period of the fastest mode): a non-negative least-squares problem (Σ A = 1 as
a heavily weighted row, then normalized; SciPy's ``nnls``), the eigenvalues along the path
taken from the progress of the previous solution (``ROBUST_ITERATIONS`` rounds from the fixed
shaper). :func:`design_schedule` builds any explicit design (fixed and time-varying:
:func:`~flexmodal_ros.shaping.schedule.shaper_schedule`).
"""
from __future__ import annotations

import numpy as np

from ..core.errors import InputError
from .prediction import _path_parameter, copy_amplitudes
from .reference import ShaperSchedule
from .schedule import shaper_schedule
from .shapers import DEFAULT_TOLERANCE, convolve, design
from ..core.validation import shown

ROBUST_DELTA = 0.10            # eigenvalues scaled by 1 ± this in the robust design's constraints
ROBUST_WEIGHT = 0.5            # weight of those constraints against the nominal ones
ROBUST_ITERATIONS = 2
ROBUST_STEPS_PER_PERIOD = 8    # impulse grid points per period of the fastest selected mode
LONG_DESIGN = "robust-long"    # auto's fourth candidate (flexmodal_ros.shaping.design_choice)
LONG_LENGTH = 1.5              # × the family's duration
LONG_DELTA = 0.20              # eigenvalues scaled by 1 ± this
_SUM_WEIGHT = 30.0             # weight of the Σ A = 1 row, relative to the largest constraint entry


def constant_schedule(segment, eta, amplitudes, delays, kind) -> ShaperSchedule:
    """A :class:`ShaperSchedule` holding one impulse sequence along the whole path."""
    m = np.asarray(eta).size
    return ShaperSchedule(np.asarray(segment), np.asarray(eta), np.tile(amplitudes, (m, 1)),
                          np.tile(delays, (m, 1)), kind)


def robust_schedule(pm, path, kind, tolerance=DEFAULT_TOLERANCE, length=1.0, delta=ROBUST_DELTA) -> ShaperSchedule:
    """Constant schedule of the robust design (module docstring) for the selected modes of ``pm``
    along ``path``; ``length`` × the family's duration (a longer sequence has more freedom),
    eigenvalues scaled by 1 ± ``delta``. InputError if the least-squares iterations fail."""
    from scipy.optimize import nnls   # deferred: scipy.optimize (imported by ReferenceShaper up front)

    sel = list(pm.selected)
    if not sel:
        raise InputError("modes: no mode selected for shaping")
    f, z = pm.frequencies_hz[:, sel], pm.damping_ratios[:, sel]
    lowest = f.argmin(axis=0)
    duration = length * float(convolve(*(design(kind, f[i, j], z[i, j], tolerance)
                                         for j, i in enumerate(lowest))).duration)
    start = convolve(*(design(kind, f[0, j], z[0, j], tolerance) for j in range(len(sel))))
    fastest = float(f.max()) * (1.0 + delta)
    steps = int(np.clip(np.ceil(duration * fastest * ROBUST_STEPS_PER_PERIOD), 16, 160))
    delays = np.linspace(0.0, duration, steps + 1)
    end = path.duration + duration
    t = np.linspace(0.0, end, int(np.ceil(end * max(200.0, 20.0 * fastest))) + 1)
    scales = (1.0, 1.0 - delta, 1.0 + delta)
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
    if shaper_design == LONG_DESIGN:
        return robust_schedule(pm, path, kind, tolerance, LONG_LENGTH, LONG_DELTA)
    if shaper_design in ("fixed", "time-varying"):
        return shaper_schedule(pm, kind, tolerance, fixed=shaper_design == "fixed")
    raise InputError(f"shaper_design: {shown(shaper_design)} is not an explicit design (fixed, robust, time-varying)")


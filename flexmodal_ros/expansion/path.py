"""Polynomial eigenvalues along a waypoint path: the polynomial fast path of configuration-dependent
input shaping (:mod:`flexmodal_ros.shaping.schedule`, ``modal="polynomial"``).

On each straight joint-space segment q(s) = q_a + s (q_b − q_a) the closed loop is expanded in the
scalar s (:class:`~.flexible_joint.PathSegmentSystem`, p = 1; eqs. (19)-(28) of notes_000 §3 by
:func:`~.expansion.expand`) for the followed modes only, at a sequence of expansion points:

1. expand about the current sample s_i the oscillatory eigenpairs nearest the followed
   eigenvalues there (exact at s_i; :func:`~.expansion.select_nearest`); the exact spectrum at s_i
   is checked for stability and for the number of oscillatory modes;
2. its *reach* is the last sample within the trust radius (where the error estimate, the degree-t
   terms over |λ|, reaches ``tolerance``), at least the next sample;
3. *verification*: the expansion's values are compared with the exact ones at the reach (an
   eigenvalue analysis whose oscillatory eigenvalues nearest the prediction are taken) and at the
   *known* samples before it (exact eigenvalues of the followed modes given by the caller: the
   shaping anchors, whose modes are tracked by MAC). If the largest relative difference exceeds
   ``tolerance``, the reach is halved and verified again (a reach of one sample is accepted as
   is); the loop continues at step 1 from the reach with its exact eigenvalues.

Values at the samples: between two expansion points the two-point Taylor (Hermite) interpolant of
their derivatives 0..4 in s (j! λ^(j), exact at the points; SciPy ``BPoly.from_derivatives``, degree
9): λ(s) is then C⁴ along the segment, as a schedule spline of the shaped reference's 4th
derivative needs (blending one-sided polynomials instead leaves kinks of the size of their
mismatch), and far more accurate than either expansion alone; after the last expansion point, its
polynomial. Their measured accuracy is the largest relative error at the known samples.

Within one expansion a column is one eigenpair (its analytic continuation in s), so the modes are
tracked by the polynomials themselves between expansion points, and by nearest eigenvalues at
them. Cost: per step one expansion of k modes and one or a few eigenvalue analyses; the number of
steps is set by the convergence radius of the series in s (nearby eigenvalues of other modes), not
by the sample rate.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.ama import modal_analysis
from ..modes import is_oscillatory, match_eigenvalues
from ..robot.model import create_data
from .recursion import ExpansionWarning, expand
from .flexible_joint import PathSegmentSystem

DEFAULT_ORDER = 4
DEFAULT_TOLERANCE = 1e-2     # relative eigenvalue error of an expansion verified at its reach


@dataclass(frozen=True)
class PathEigenvalues:
    """``eigenvalues`` (m, k) of the followed modes at every sample (column j = followed mode j,
    Im > 0); ``expansion_samples`` (E,) sample indices where the loop expanded; ``reach_error``
    (E',) the verified relative error of each expansion at its reach (step 3); ``anchor_error`` the
    largest relative error of the returned eigenvalues at the known samples (their measured
    accuracy); ``rejected`` the number of reaches halved."""

    eigenvalues: np.ndarray
    expansion_samples: np.ndarray
    reach_error: np.ndarray
    anchor_error: float
    rejected: int


def follow_path_modes(model, positions, segment, eta, known_samples, known_eigenvalues,
                      order: int = DEFAULT_ORDER, tolerance: float = DEFAULT_TOLERANCE) -> PathEigenvalues:
    """Eigenvalues of k followed modes at the path samples (``segment`` (m,) index of the waypoint
    segment, ``eta`` (m,) position s in it, ascending; ``positions`` (W, n) the waypoints), by the
    procedure of the module docstring. ``known_samples`` (A,) sample indices (including 0) with the
    exact eigenvalues ``known_eigenvalues`` (A, k) of the followed modes (Im > 0). InputError when
    the closed loop is not asymptotically stable or a mode turns overdamped at an analysed sample,
    or a followed mode's damping becomes ≤ 0."""
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise InputError(f"expansion tolerance: must be > 0, got {tolerance}")
    positions = np.asarray(positions, float)
    segment, eta = np.asarray(segment), np.asarray(eta, float)
    known = dict(zip(np.asarray(known_samples).tolist(), np.asarray(known_eigenvalues, complex)))
    lam = np.empty((eta.size, len(known[0])), complex)
    follower = _Follower(model, tolerance, order)
    current = known[0]
    for seg in np.unique(segment):
        rows = np.flatnonzero(segment == seg)
        system = PathSegmentSystem(model, positions[seg], positions[seg + 1])
        s = eta[rows]
        expansions = []
        i, end = 0, rows.size - 1
        while True:
            poly = follower.expand(system, s[i], current, rows[i])
            expansions.append((i, poly))
            if i == end:
                break
            reach = int(np.searchsorted(s, s[i] + poly.trust_radius, side="right")) - 1
            last = min(max(reach, i + 1), end)
            while True:
                exact = known.get(int(rows[last]))
                predicted = _values(poly, s[[last]])[0]
                if exact is None:
                    exact = follower.exact(system, s[last], predicted, rows[last])
                inside = rows[i + 1:last]
                error = max(_relative(predicted, exact),
                            follower.known_error(_values(poly, s[i + 1:last]), inside, known))
                if error <= tolerance or last == i + 1:
                    break
                follower.rejected += 1
                last = i + (last - i) // 2
            follower.reach_errors.append(error)
            current = exact
            if last == end:
                break
            i = last
        nodes = [a for a, _ in expansions]
        c, tail = expansions[-1]
        if len(nodes) > 1:                   # two-point Taylor (Hermite) interpolation between expansions
            inner = slice(0, c + 1)
            lam[rows[inner]] = _hermite(s[nodes], [poly for _, poly in expansions])(s[inner]).view(complex)
        lam[rows[c:]] = _values(tail, s[c:])
        follower.checks.append(follower.known_error(lam[rows], rows, known))
    if np.any(lam.real >= 0):
        bad = int(np.flatnonzero((lam.real >= 0).any(axis=1))[0])
        raise InputError(f"trajectory: a shaped mode is not damped (Re λ >= 0) at path sample {bad}: "
                         "no modal shaping possible")
    return PathEigenvalues(lam, np.array(follower.points, int), np.array(follower.reach_errors),
                           max(follower.checks), follower.rejected)


def _hermite(nodes, polys):
    """C⁴ piecewise polynomial (SciPy BPoly, degree ≤ 9) through the expansion points ``nodes`` with
    the derivatives 0..min(t, 4) of the expansions ``polys`` there (d^jλ/ds^j = j! λ^(j)); values
    as real views of the complex eigenvalues."""
    # deferred: scipy.interpolate
    from scipy.interpolate import BPoly

    count = min(polys[0].order, 4) + 1
    factorial = np.cumprod(np.r_[1.0, np.arange(1.0, count)])[:, None]
    derivatives = [np.ascontiguousarray(p.eigenvalues[:count] * factorial).view(float) for p in polys]
    return BPoly.from_derivatives(nodes, derivatives)


def _values(poly, s):
    """(len(s), k) eigenvalues of ``poly`` at the s values."""
    return poly.evaluate(np.asarray(s, float)[:, None], vectors=False, warn=False).eigenvalues


def _relative(values, exact) -> float:
    """max over modes (and rows) of |values − exact| / |exact|."""
    return float(np.max(np.abs(np.asarray(values) - exact) / np.abs(exact), initial=0.0))


class _Follower:
    """Expansions and exact checks of :func:`follow_path_modes` with their bookkeeping."""

    def __init__(self, model, tolerance, order):
        self.model, self.tolerance, self.order = model, tolerance, order
        self.data = create_data(model)
        self.points, self.reach_errors, self.checks, self.rejected = [], [], [], 0
        self.num_modes = None

    def expand(self, system, s, targets, sample):
        """Expansion about s of the oscillatory eigenpairs nearest ``targets`` (exact values there);
        InputError naming the sample if the closed loop is not stable or the number of
        oscillatory modes changed."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExpansionWarning)
                poly = expand(system, [s], self.order, left=False, tolerance=self.tolerance, near=targets,
                              allow_unstable=False)
        except InputError as exc:
            q = system.configurations([s])[0]
            raise InputError(f"trajectory: at path sample {sample} (q = {np.round(q, 4).tolist()}): {exc}; "
                             "no modal shaping possible") from None
        self._check_count(int(np.count_nonzero(is_oscillatory(poly.spectrum0))), sample)
        self.points.append(sample)
        return poly

    def exact(self, system, s, predicted, sample):
        """Exact eigenvalues (Im > 0) nearest ``predicted`` at s (eigenvalue analysis)."""
        q = system.configurations([s])[0]
        result = modal_analysis(self.model, q, self.data, shapes=False)
        if not result.stable:
            raise InputError(f"trajectory: the closed loop is {result.stability} at path sample {sample} "
                             f"(q = {np.round(q, 4).tolist()}): no modal shaping possible")
        self._check_count(result.num_modes, sample)
        return result.eigenvalues[match_eigenvalues(predicted, result.eigenvalues)]

    @staticmethod
    def known_error(values, rows, known) -> float:
        """Largest relative error of ``values`` (len(rows), k) at the known samples among ``rows``."""
        hits = [j for j, r in enumerate(rows.tolist()) if r in known]
        if not hits:
            return 0.0
        return _relative(values[hits], np.array([known[rows[j]] for j in hits]))

    def _check_count(self, count, sample):
        if self.num_modes is None:
            self.num_modes = count
        if count != self.num_modes:
            raise InputError(f"trajectory: the number of oscillatory modes changes along the path "
                             f"({self.num_modes} -> {count} at sample {sample}: a mode becomes overdamped); "
                             "modes cannot be tracked")

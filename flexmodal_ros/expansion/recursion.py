"""Eigenpairs as multivariate Taylor polynomials of the parameters (paper eqs. (21)-(29)).

Given the Taylor coefficients M̄^(σ), C̄^(σ), K̄^(σ) of a linearized system (20) and one eigenproblem
at x0, each selected eigenpair is expanded as λ(x) ≈ Σ λ^(σ) δxᵠ, φ(x) ≈ Σ φ^(σ) δxᵠ (21).
Collecting the powers of δx in (λ²M̄ + λC̄ + K̄)φ = 0 (22)-(26) gives, for every multi-index τ
(|τ| = 1, 2, …, t in turn), the reconstructed (27)

    (λ0²M̄0 + λ0C̄0 + K̄0) φ^(τ) + (2λ0M̄0 + C̄0) φ0 λ^(τ) = −r_τ,

where r_τ is the τ-coefficient of (λ²M̄ + λC̄ + K̄)φ with λ^(τ) = 0, φ^(τ) = 0 (lower degrees only).
Eq. (28) solves it with the pseudo-inverse of S = [λ0²M̄0 + λ0C̄0 + K̄0, (2λ0M̄0 + C̄0)φ0]. For a
simple λ0, S has full row rank and null space {[φ0; 0]}, so S†(−r) is the solution orthogonal to
[φ0; 0]; here it is computed from the equivalent square bordered system
[[S], [φ0*, 0]] [φ^(τ); λ^(τ)] = [−r_τ; 0], factorized (LU) once per eigenpair and solved for all
multi-indices of one degree at a time. The normalization is
therefore φ0*φ^(τ) = 0 for τ ≠ 0, i.e. φ0*φ(x) = φ0*φ0 = 1 (notes_000 §3).

Left eigenvectors (29): the same recursion on M̄ᵀ, C̄ᵀ, K̄ᵀ with eigenvalue λ0* and ψ0 (its
eigenvalue coefficients come out as the conjugates of λ^(σ), which is checked). ψ0 is
biorthonormal to φ0 (18) at x0; away from x0 the vectors keep the normalization above.

Only the selected eigenpairs are expanded (each is independent); for a conjugate pair the member
with Im λ > 0 is expanded (the other one has conjugate coefficients, x being real). The residuals
of all eigenpairs of one degree are formed together: products of coefficients of degrees e and
d − e are one matrix product per e, summed into their targets a + b by a sparse incidence matrix.
"""
from __future__ import annotations

import time
import warnings
from functools import lru_cache

import numpy as np
import scipy.linalg
import scipy.sparse

from ..core.blas import single_blas_thread
from ..core.errors import InputError
from ..core.workers import StopToken
from ..modes import classify_stability, is_real, lowest_modes, match_eigenvalues
from ..core.validation import finite_array, shown
from .eigen import eigenpairs
from .multiindex import MultiIndexSet, check_expansion_size
from .polynomial import ModalPolynomial, trust_radius

REPEATED_RTOL = 1e-8       # |λ_i − λ_j| ≤ 1e-8 |λ_i|: repeated eigenvalue, S_i singular → error
NEAR_REPEATED_RTOL = 1e-3  # closer than 0.1 %: the Taylor radius is small → warning
DEFAULT_TOLERANCE = 1e-3   # relative eigenvalue error that defines the default trust radius


class ExpansionWarning(UserWarning):
    """The expansion point is unstable or has a nearly repeated selected eigenvalue."""


def eigenpair_series(Mc, Cc, Kc, mset: MultiIndexSet, lam0, vec0, stop=None):
    """Coefficients of k eigenpairs (λ^(σ) (N, k), v^(σ) (N, k, n)) by the recursion (26)-(28).

    ``Mc``, ``Cc``, ``Kc`` (N, n, n) matrix coefficients; ``lam0`` (k,) and ``vec0`` (n, k) the
    eigenpairs at x0 (right: the matrices; left: their transposes and λ0*); ``stop`` (a
    :class:`~flexmodal_ros.core.workers.StopToken`) is checked once per degree.
    """
    N, n = Mc.shape[0], Mc.shape[1]
    lam0 = np.asarray(lam0, complex)
    k = lam0.size
    lam = np.zeros((N, k), complex)
    vec = np.zeros((N, k, n), complex)
    lam[0], vec[0] = lam0, vec0.T
    lam2 = np.zeros((N, k), complex)
    lam2[0] = lam0 ** 2
    series = {name: _MatrixSeries(mats, mset) for name, mats in (("M", Mc), ("C", Cc), ("K", Kc))}
    prod = {name: np.zeros((N, k, n), complex) for name in "MCK"}
    for name in "MCK":
        prod[name][0] = vec[0] @ series[name].mats0.T
    factors = []                                             # one LU of [[S_i], [φ0*, 0]] per eigenpair
    for i in range(k):
        bordered = np.zeros((n + 1, n + 1), complex)
        bordered[:n, :n] = lam0[i] ** 2 * Mc[0] + lam0[i] * Cc[0] + Kc[0]
        bordered[:n, n] = (2 * lam0[i] * Mc[0] + Cc[0]) @ vec0[:, i]
        bordered[n, :n] = vec0[:, i].conj()
        factors.append(scipy.linalg.lu_factor(bordered, check_finite=False))
    for d in range(1, mset.order + 1):
        if stop is not None:
            stop.check()
        sl = mset.degree_slices[d]
        # degree-d coefficients with λ^(τ) = 0, φ^(τ) = 0 (they are still zero here)
        for name in "MCK":
            prod[name][sl] = series[name].partial(vec, d)
        lam2[sl] = _cauchy(mset, d, lambda b, a: lam[b][:, None, :] * lam[a][None, :, :])
        res = prod["K"][sl] + _cauchy(mset, d, lambda b, a: prod["M"][b][:, None] * lam2[a][None, :, :, None]
                                      + prod["C"][b][:, None] * lam[a][None, :, :, None])
        zero = np.zeros((1, res.shape[0]))
        for i in range(k):                                   # (28) for every τ of degree d
            sol = scipy.linalg.lu_solve(factors[i], np.vstack([-res[:, i, :].T, zero]), check_finite=False)
            vec[sl, i, :] = sol[:n].T
            lam[sl, i] = sol[n]
        for name in "MCK":                                   # complete the degree-d products
            prod[name][sl] += vec[sl] @ series[name].mats0.T
        lam2[sl] += 2 * lam0 * lam[sl]
    return lam, vec


class _MatrixSeries:
    """Matrix coefficients of one series, with the block of rows/columns where any coefficient of
    degree ≥ 1 is non-zero (the flexible-joint M̄, K̄ vary in their link block only, C̄ not at all)."""

    def __init__(self, mats, mset):
        self.mset, self.mats0 = mset, mats[0]
        nz = np.abs(mats[1:]) > 0
        self.rows = np.flatnonzero(nz.any(axis=(0, 2)))
        self.cols = np.flatnonzero(nz.any(axis=(0, 1)))
        block = np.swapaxes(mats[:, self.rows][:, :, self.cols], 1, 2)           # (N, c, r)
        self.by_degree = [np.transpose(block[sl], (1, 0, 2)).reshape(self.cols.size, -1).astype(complex)
                          for sl in mset.degree_slices] if self.rows.size else []  # (c, N_g r)

    def partial(self, vec, d):
        """Σ_{a+b=τ, |a| ≥ 1} M^(a) v^(b) for every τ of degree d → (N_d, k, n)."""
        sl = self.mset.degree_slices[d]
        k, n = vec.shape[1], vec.shape[2]
        out = np.zeros((sl.stop - sl.start, k, n), complex)
        if self.rows.size == 0:
            return out
        r, c = self.rows.size, self.cols.size

        def terms(b, a):
            vb = vec[b][:, :, self.cols]
            z = vb.reshape(-1, c) @ self.by_degree[d - self.mset.degrees[b.start]]
            return np.transpose(z.reshape(vb.shape[0], k, -1, r), (0, 2, 1, 3))

        out[:, :, self.rows] = _cauchy(self.mset, d, terms, lowest=1)
        return out


def _cauchy(mset, d, terms, lowest=0):
    """Σ over a + b = τ of ``terms(b_rows, a_rows)`` for all τ of degree d, |a| ≥ ``lowest``.

    ``terms(b, a)`` gets two degree slices (degrees e and d − e) and returns an array
    (N_e, N_{d−e}, ...) of the products for every pair; the pairs are summed into their targets.
    """
    total = None
    for e in range(0, d - lowest + 1):
        b, a = mset.degree_slices[e], mset.degree_slices[d - e]
        values = terms(b, a)
        part = _pair_sum(mset, d, e) @ values.reshape(values.shape[0] * values.shape[1], -1)
        total = part if total is None else total + part
    return total.reshape((total.shape[0],) + values.shape[2:])


@lru_cache(maxsize=512)
def _pair_sum(mset: MultiIndexSet, d: int, e: int):
    """(N_d × N_e N_{d−e}) matrix: pair (b, a), |b| = e, |a| = d − e → row of a + b; sparse, or
    dense when small (few parameters: a sparse product's overhead then exceeds the arithmetic)."""
    b, a = mset.degree_slices[e], mset.degree_slices[d - e]
    exps = mset.exponents
    target = [mset.row(exps[i] + exps[j]) - mset.degree_slices[d].start
              for i in range(b.start, b.stop) for j in range(a.start, a.stop)]
    size = mset.degree_slices[d].stop - mset.degree_slices[d].start
    matrix = scipy.sparse.csr_matrix((np.ones(len(target)), (target, np.arange(len(target)))),
                                     shape=(size, len(target)))
    return matrix.toarray() if size * len(target) <= 256 else matrix


def _with_deadline(stop, deadline):
    """A StopToken that stops at ``deadline`` (monotonic time) and when ``stop`` (if any) says so."""
    if stop is None:
        return StopToken(float(deadline))
    return _EarliestStop(stop, float(deadline))


class _EarliestStop:
    """``stop`` and a deadline together (the earlier one wins)."""

    def __init__(self, stop, deadline):
        self.stop, self.deadline = stop, deadline

    def check(self):
        self.stop.check()
        StopToken(self.deadline).check()


def select_pairs(pairs, modes=None, field="modes"):
    """Columns of ``pairs`` (an :class:`~.eigen.Eigenpairs`) to expand and their 1-based mode numbers.

    ``modes``: 1-based numbers in the x0 ModeSet order (oscillatory modes by frequency, then the
    real eigenvalues ascending); None = all of them.
    """
    ms = pairs.modes()
    ordered = list(ms.eigenvalues) + list(ms.real_eigenvalues)
    total = len(ordered)
    if modes is None:
        numbers = np.arange(1, total + 1)
    else:
        numbers = np.asarray(modes)
        if numbers.ndim != 1 or numbers.size == 0 or not np.issubdtype(numbers.dtype, np.integer):
            raise InputError(f"{field}: expected a non-empty list of integer mode numbers, got {shown(modes)}")
        bad = [int(m) for m in numbers if not 1 <= m <= total]
        if bad:
            raise InputError(f"{field}: mode number(s) {bad} out of range 1..{total} "
                             f"({ms.num_modes} oscillatory modes + {ms.real_eigenvalues.size} real eigenvalues)")
        if len(set(numbers.tolist())) != numbers.size:
            raise InputError(f"{field}: repeated mode numbers in {numbers.tolist()}")
    cols = []
    for m in numbers:
        value = ordered[m - 1]
        hits = np.flatnonzero(pairs.eigenvalues == value) if m <= ms.num_modes else \
            np.flatnonzero(is_real(pairs.eigenvalues) & (pairs.eigenvalues.real == value))
        cols.append(int(hits[0]))
    return np.array(cols, int), numbers.astype(int)


def select_nearest(pairs, targets):
    """Columns and 1-based mode numbers (as :func:`select_pairs`) of the oscillatory eigenvalues
    (Im > 0) of ``pairs`` nearest ``targets`` (k,) (Hungarian assignment on |Δλ|): following modes
    known from a neighbouring point."""
    targets = np.atleast_1d(np.asarray(targets, complex))
    lam = pairs.eigenvalues
    osc = lowest_modes(lam)                                          # the ModeSet order
    if targets.size > osc.size:
        raise InputError(f"near: {targets.size} eigenvalues to follow, the system has {osc.size} oscillatory modes")
    idx = match_eigenvalues(targets, lam[osc])
    return osc[idx], idx + 1


def check_separation(eigenvalues, cols, numbers):
    """InputError for a repeated selected eigenvalue, ExpansionWarning for a nearly repeated one."""
    lam = np.asarray(eigenvalues)
    floor = np.abs(lam).max() * 1e-12
    for c, m in zip(cols, numbers):
        others = np.delete(lam, c)
        gap = np.abs(others - lam[c]).min() if others.size else np.inf
        scale = max(abs(lam[c]), floor)
        if gap <= REPEATED_RTOL * scale:
            raise InputError(f"modes: eigenvalue of mode {m} ({lam[c]:.6g}) is repeated at the expansion "
                             f"point: S_i of (28) is singular and the eigenpair is not differentiable; "
                             f"expand about another point or leave this mode out")
        if gap <= NEAR_REPEATED_RTOL * scale:
            warnings.warn(f"mode {m}: eigenvalue {lam[c]:.6g} is within {gap / scale:.2e} (relative) of "
                          f"another eigenvalue at the expansion point; the polynomial is valid only very "
                          f"close to x0", ExpansionWarning, stacklevel=3)


def expand(system, x0=None, order: int = 3, modes=None, left: bool = True,
           tolerance: float = DEFAULT_TOLERANCE, allow_unstable: bool = True, near=None,
           stop=None, deadline=None, order_field: str = "order", modes_field: str = "modes") -> ModalPolynomial:
    """Expand eigenpairs of ``system`` about x0 up to total degree ``order`` (eqs. (19)-(29)).

    ``system``: a parametric system (:class:`flexmodal_ros.expansion.FlexibleJointSystem`,
    :class:`flexmodal_ros.expansion.erls.ErlsSystem`) with ``parameter_names``, ``x0``, ``taylor(x0, order)``,
    ``describe()``. ``modes``: 1-based mode numbers (see :func:`select_pairs`); ``left``: also
    expand left eigenvectors (29); ``tolerance``: relative eigenvalue error defining the trust
    radius; ``allow_unstable``: False turns the instability warning into an InputError; ``near``
    (instead of ``modes``): expand the oscillatory eigenpairs nearest these eigenvalues
    (:func:`select_nearest`, in their order).

    The size of the work is checked before it starts (:func:`~.multiindex.check_expansion_size`;
    ``order_field`` / ``modes_field`` name the order and the modes in errors, e.g. "--order");
    long work is interruptible:
    ``stop`` (a :class:`~flexmodal_ros.core.workers.StopToken`, e.g. cancelled at node shutdown)
    and ``deadline`` (a ``time.monotonic()`` value) are checked between the degrees of the
    symbolic differentiation and of the recursion, raising
    :class:`~flexmodal_ros.core.workers.Interrupted`.
    """
    start = time.perf_counter()
    if isinstance(order, (float, np.floating)) and float(order).is_integer():
        order = int(order)
    order = check_expansion_size(system, order, order_field,
                                 None if modes is None or near is not None else len(np.atleast_1d(modes)))
    if not np.isfinite(tolerance) or tolerance <= 0:
        raise InputError(f"tolerance: must be > 0, got {tolerance}")
    if deadline is not None:
        stop = _with_deadline(stop, deadline)
    if stop is not None:
        stop.check()
    p = len(system.parameter_names)
    x0 = system.x0 if x0 is None else finite_array(x0, "x0", (p,))
    mset, Mc, Cc, Kc = system.taylor(x0, order) if stop is None else system.taylor(x0, order, stop=stop)
    pairs = eigenpairs(Mc[0], Cc[0], Kc[0])
    label, bad = classify_stability(pairs.eigenvalues)
    if label != "stable":
        message = (f"the linearized system is {label} at the expansion point (eigenvalues with Re >= 0: "
                   f"{np.array2string(bad, precision=4)})")
        if not allow_unstable:
            raise InputError(f"x0: {message}")
        warnings.warn(message, ExpansionWarning, stacklevel=2)
    if near is not None and modes is not None:
        raise InputError("modes: give either modes or near, not both")
    cols, numbers = select_pairs(pairs, modes, modes_field) if near is None else select_nearest(pairs, near)
    check_separation(pairs.eigenvalues, cols, numbers)
    lam0 = pairs.eigenvalues[cols]
    with single_blas_thread():     # many small products: threading only costs here
        lam, right = eigenpair_series(Mc, Cc, Kc, mset, lam0, pairs.right[:, cols], stop)
        lft = None
        if left:
            T = lambda a: np.swapaxes(a, -1, -2)
            lam_left, lft = eigenpair_series(T(Mc), T(Cc), T(Kc), mset, lam0.conj(), pairs.left[:, cols], stop)
    if left:
        scale = np.abs(lam).max()
        gap = np.abs(lam_left.conj() - lam).max()
        if gap > 1e-6 * scale:
            warnings.warn(f"the left and right eigenvalue series differ by {gap:.3g} (relative "
                          f"{gap / scale:.2e}): the expansion is ill-conditioned", ExpansionWarning, stacklevel=2)
    radius = trust_radius(lam, p, order, tolerance)
    return ModalPolynomial(tuple(system.parameter_names), np.array(x0, float), order, lam, right, lft,
                           numbers, radius, float(tolerance), pairs.eigenvalues, system.describe(),
                           time.perf_counter() - start)

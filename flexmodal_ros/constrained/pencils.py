"""Eigensolvers of the constrained linearizations' pencils (González et al. (6), (10), (14)): the
scaled first-order pencil of a second-order model M ẍ + C ẋ + K x = 0, its Cholesky standard form
(LAPACK dgeev), the symmetric-definite K x = ω² M x (eigh), QZ with homogeneous eigenvalues (dggev),
the RCS pencil with its position- and velocity-level infinite eigenvalues deflated exactly, and
sparse shift-invert ARPACK. Which one runs, and why, is :mod:`.eigenanalysis`'s docstring.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..core.errors import InputError
from ..linalg.lapack import complex_vectors, generalized_eig, standard_eig
from ..modes import is_real
from .linearizations import DescriptorSystem, _dense

INFINITE_TOL = 1e-8             # |β|/‖(α, β)‖ at or below this: an infinite eigenvalue (RCS)
ARPACK_TOL = 1e-10              # Ritz-value tolerance; the requested modes are refined afterwards
SMALL_ORDER = 40                # pencils up to this order take the dense QZ on the sparse path


def _scale_factors(M, K):
    """(time scale ω_ref = √(‖K‖/‖M‖), ‖K‖, ‖M‖) with ‖·‖ the largest entry (1 if zero)."""
    k_norm = float(np.abs(K).max()) if K.size else 0.0
    m_norm = float(np.abs(M).max()) if M.size else 0.0
    if k_norm == 0 or m_norm == 0:
        return 1.0, 1.0, 1.0
    return float(np.sqrt(k_norm / m_norm)), k_norm, m_norm


def second_order_pencil(M, C, K):
    """Scaled first-order pencil of M ẍ + C ẋ + K x = 0: E = blkdiag(I, M/‖M‖),
    A = [[0, I], [−K/‖K‖, −C ω_ref/‖K‖]] in x̂ = [x; ẋ/ω_ref]; eigenvalues s/ω_ref."""
    tau, k_norm, m_norm = _scale_factors(M, K)
    k = M.shape[0]
    E, A = np.zeros((2 * k, 2 * k)), np.zeros((2 * k, 2 * k))
    E[:k, :k] = A[:k, k:] = np.eye(k)
    E[k:, k:] = M / m_norm
    A[k:, :k], A[k:, k:] = K / -k_norm, C * (-tau / k_norm)
    return A, E, tau


def qz(A, E, infinite_tol, keep=None):
    """QZ with homogeneous eigenvalues (:func:`flexmodal_ros.linalg.lapack.generalized_eig`): (α/β of
    the finite ones, right vectors of the rows ``keep`` (all rows if None), infinite mask,
    |β|/‖(α, β)‖)."""
    alphar, alphai, beta, vr, info = generalized_eig(A, E)
    if info != 0:
        raise np.linalg.LinAlgError(f"QZ (LAPACK dggev) failed, info = {info}")
    alpha = alphar + 1j * alphai
    size = np.hypot(np.abs(alpha), np.abs(beta))
    beta_rel = np.abs(beta) / np.where(size > 0, size, 1.0)
    infinite = beta_rel <= infinite_tol
    w = np.where(infinite, 0, alpha / np.where(infinite, 1, beta))
    y = complex_vectors(vr if keep is None else vr[keep], alphai, np.arange(w.size))
    return w, y, infinite, beta_rel


def standard_modes(M, C, K):
    """(s, x) of M ẍ + C ẋ + K x = 0 with M symmetric positive definite, by the Hessenberg QR
    algorithm (``dgeev``) on the standard form of the scaled first-order pencil: with
    M/‖M‖ = LLᵀ (Cholesky) and x̃ = Lᵀx the pencil blkdiag(I, M/‖M‖) − [[0, I], [−K̂, −Ĉ]] is
    equivalent to the matrix [[0, I], [−L⁻¹K̂L⁻ᵀ, −L⁻¹ĈL⁻ᵀ]] (a symmetric congruence, so
    symmetric K̂, Ĉ stay symmetric). Cheaper than QZ on the pencil of the same order
    (``benchmarks/bench_constrained.py``). None if M is not positive definite."""
    tau, k_norm, m_norm = _scale_factors(M, K)
    if M.shape[0] == 0:
        return np.zeros(0, complex), np.zeros((0, 0), complex)
    try:
        L = sla.cholesky(M / m_norm, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    k = M.shape[0]

    def congruent(X, factor):
        half = sla.solve_triangular(L, X * factor, lower=True, check_finite=False)
        return sla.solve_triangular(L, half.T, lower=True, check_finite=False).T

    S = np.zeros((2 * k, 2 * k), order="F")
    S[:k, k:] = np.eye(k)
    S[k:, :k] = congruent(K, -1.0 / k_norm)
    if np.any(C):
        S[k:, k:] = congruent(C, -tau / k_norm)
    wr, wi, vr, info = standard_eig(S, overwrite=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dgeev failed, info = {info}")
    x = sla.solve_triangular(L, vr[:k], trans="T", lower=True, check_finite=False)
    return tau * (wr + 1j * wi), complex_vectors(x, wi, np.arange(wr.size))


def symmetric_modes(M, K):
    """s = ±√(−μ) from K x = μ M x (eigh): ±iω for μ = ω² > 0, a real pair for μ < 0."""
    mu, x = sla.eigh(K, M)
    root = np.sqrt(mu.astype(complex))
    s = np.concatenate([1j * root, -1j * root])
    s = np.where(np.abs(s.imag) == 0, s.real + 0j, s)
    return s, np.hstack([x, x]).astype(complex)


def _start_vector(size):
    """ARPACK's start vector: pseudo-random with a fixed seed, so that repeated analyses of one
    model give identical results (ARPACK's own random start made the refined eigenvalues of stiff
    FE models vary run to run by up to 1e-8)."""
    return np.random.default_rng(0).standard_normal(size)


def shift_invert(A, E, k, sigma):
    """k eigenpairs of the pencil (A, E) nearest to ``sigma``: ARPACK on (A − σE)⁻¹E."""
    size = A.shape[0]
    if k < 1:
        raise InputError(f"num_modes: must be >= 1, got {k}")
    if k >= size - 1 or size <= SMALL_ORDER:  # ARPACK needs k < order − 1: small models by QZ
        w, y, infinite, _ = qz(_dense(A), _dense(E), INFINITE_TOL)
        keep = np.flatnonzero(~infinite)
        keep = keep[np.argsort(np.abs(w[keep] - sigma), kind="stable")[:k]]
        return w[keep], y[:, keep]
    try:
        lu = spla.splu(sp.csc_matrix(A - sigma * E))
    except RuntimeError as exc:
        raise InputError(f"sigma: A − σE is singular at σ = {sigma:g} ({exc}); choose another "
                         f"shift") from None
    op = spla.LinearOperator((size, size), matvec=lambda x: lu.solve(np.asarray(E @ x)),
                             dtype=float)
    try:
        nu, y = spla.eigs(op, k=k, which="LM", ncv=min(size - 1, max(2 * k + 1, 24)),
                          tol=ARPACK_TOL, v0=_start_vector(size))
    except spla.ArpackNoConvergence as exc:
        if exc.eigenvalues.size < k // 2:
            raise InputError(f"num_modes: ARPACK did not converge for {k} eigenvalues near "
                             f"σ = {sigma:g}; ask for fewer modes or another shift") from None
        nu, y = exc.eigenvalues, exc.eigenvectors
    s = sigma + 1.0 / nu
    s = np.where(is_real(s), s.real + 0j, s)
    return s, y


def index_one_pencil(lin: DescriptorSystem):
    """The RCS pencil with its position- and velocity-level infinite eigenvalues deflated exactly.

    With the Householder QR Φ̂ᵀ = Q[R₀; 0], Q = [Y N] (N an orthonormal null-space basis of Φ̂),
    the orthogonal equivalence y → (Qᵀq, Qᵀv̂, λ̂) with rows (Qᵀ·, Qᵀ·, ·) splits q into
    b = Yᵀq, a = Nᵀq (v̂ into d, c). The rows Φ̂q = R₀ᵀb = 0 and ḃ = d involve (b, d) only: the
    pencil is block triangular with a block [[−R₀ᵀ, 0], [−sI, I]] of constant nonzero
    determinant — 2r infinite eigenvalues, exactly (β = 0) — and the index-1 descriptor pencil
    in z = [a; c; λ̂] (order 2(n − r) + r)

        E = [[I, 0, 0], [0, NᵀM̂N, 0], [0, YᵀM̂N, 0]],
        A = [[0, I, 0], [−NᵀK̂N, −NᵀĈN, 0], [−YᵀK̂N, −YᵀĈN, −R₀]],

    whose r remaining infinite eigenvalues (the multiplier level) QZ finds and |β| classifies.
    Undamped models (Ĉ = 0) use the same pencil in μ = ŝ² with c = ŝa eliminated, z = [a; λ̂]
    (order n, an eighth of the QZ flops): E = [[NᵀM̂N, 0], [YᵀM̂N, 0]],
    A = [[−NᵀK̂N, 0], [−YᵀK̂N, −R₀]], ŝ = ±√μ. The finite spectrum is that of the full pencil
    (orthogonal transformations: backward stable); no inverse is formed, and with few constraints
    Q is applied as r Householder reflectors (LAPACK dormqr, O(r n²) per block: no dense Q).
    Returns (A, E, to_q, squared): to_q(a) = N a (the position part of an eigenvector), squared
    True for the μ form.
    """
    M, C, K, phi = (_dense(b) for b in lin.scaled[:4])
    n, r = lin.n, lin.m
    k = n - r
    if r and 4 * r >= n:   # Φ̂ nearly square (four-bar): explicit Q, two products are cheaper
        Q, R = sla.qr(phi.T, check_finite=False)
        N, R0 = Q[:, r:], R[:r]
        project, to_q = (lambda X: Q.T @ (X @ N)), (lambda a: N @ a)
    elif r:          # few constraints (FE models): r Householder reflectors, O(r n²) per block
        qr, tau = _householder(phi.T)
        project = lambda X: _apply_q(qr, tau, _apply_q(qr, tau, X, "R", "N")[:, r:], "L", "T")
        to_q = lambda a: _apply_q(qr, tau, np.vstack([np.zeros((r, a.shape[1])), a]), "L", "N")
        R0 = np.triu(qr[:r, :r])
    else:
        project, to_q, R0 = (lambda X: X), (lambda a: a), np.zeros((0, 0))
    Mt, Kt = project(M), project(K)   # rows: Y (r) then N (k); columns: a
    squared = not np.any(C)
    d = 0 if squared else k            # offset of the velocity block c
    order = d + k + r
    E, A = np.zeros((order, order), order="F"), np.zeros((order, order), order="F")
    if not squared:
        E[:k, :k] = A[:k, k:2 * k] = np.eye(k)
        Ct = project(C)
        A[k:2 * k, k:2 * k], A[2 * k:, k:2 * k] = -Ct[r:], -Ct[:r]
    E[d:d + k, d:d + k], E[d + k:, d:d + k] = Mt[r:], Mt[:r]
    A[d:d + k, :k], A[d + k:, :k] = -Kt[r:], -Kt[:r]
    A[d + k:, d + k:] = -R0
    return A, E, to_q, squared


def _householder(a):
    """LAPACK dgeqrf of a (n, r), n ≥ r: (reflectors with R above the diagonal, τ)."""
    qr, tau, _, info = sla.lapack.dgeqrf(a)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dgeqrf failed, info = {info}")
    return qr, tau


def _apply_q(qr, tau, c, side, trans):
    """Q c, Qᵀ c (side "L") or c Q, c Qᵀ (side "R") with Q of :func:`_householder` (dormqr)."""
    c = np.asarray(c, dtype=float, order="F")
    lwork = 64 * max(c.shape)                    # ≥ the blocked optimum (block size ≤ 64)
    out, _, info = sla.lapack.dormqr(side, trans, qr, tau, c, lwork, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dormqr failed, info = {info}")
    return out

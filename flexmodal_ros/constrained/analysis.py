"""Eigenanalysis of the MCS / RCS / UCS linearizations → one result type, :class:`ConstrainedModes`.

Dense paths (whole spectrum). MCS and UCS solve a second-order model M ẍ + C ẋ + K x = 0 through
its first-order pencil (E, A) = (blkdiag(I, M), [[0, I], [−K, −C]]) scaled like the RCS pencil
(time by ω_ref = √(‖K‖/‖M‖), rows by ‖K‖; a plain state-matrix eig loses ~1e-5 on the lowest
modes of the stiff pendulum model), by QZ:

* MCS: the 2(n − r) pencil of (6), or — for an undamped, symmetric reduced model (C_r = 0,
  K_r = K_rᵀ) — the symmetric-definite problem K_r x = ω² M_r x by ``scipy.linalg.eigh``
  (``solver="auto"`` chooses). No spurious eigenvalues.
* RCS: the scaled descriptor pair (A, E) by QZ (LAPACK dggev: homogeneous eigenvalues (α, β),
  s = ω_ref α/β). A spurious eigenvalue is *infinite*: |β| ≤
  ``infinite_tol``·‖(α, β)‖ (classified by β, not by the size of α/β: QZ can return infinite
  eigenvalues as large finite numbers, notes_001 §4). 3r of them (r = rank Φ_q).
* UCS: the 2n pencil of (14). Spurious eigenvalues belong to the penalty springs: their
  eigenvectors violate the velocity constraints. With Φ̂_q the row-normalized constraint Jacobian
  and v the position part of the eigenvector, the violation η = ‖Φ̂_q v‖/‖v‖ (dimensionless; the
  constraint velocity Φ_q(s v) relative to ‖s v‖) is O(1) for the 2r penalty modes and of order
  λ/(αω²·length) for physical ones (≈1e-7 for the four-bar, notes_001 §4; ≤ 5e-5 for the
  pendulum, whose penalty modes have η ≥ 0.04). Threshold ``UCS_SPURIOUS_THRESHOLD = 1e-3``
  (configurable ``spurious_threshold``): η above it is spurious.

Sparse path (``num_modes=k``): shift-invert Arnoldi (ARPACK via ``scipy.sparse.linalg.eigs``) on
the first-order pencil with a sparse LU of (A − σE): the operator (A − σE)⁻¹E has eigenvalues
ν = 1/(s − σ), so the k modes nearest to σ (default 0: the lowest) come first and infinite
eigenvalues (ν = 0) never appear — the source's "compute only a subspace" (§5.3). MCS uses the
sparse coordinate-partitioning basis there, UCS filters the penalty modes as above.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import InputError
from ..modes import ModeSet, modes_from_eigenpairs
from ..validation import finite_scalar, frozen
from .equilibrium import Equilibrium
from .linearize import (METHODS, DescriptorSystem, Penalty, SecondOrderSystem, _dense,
                        _row_norms, mcs_linearization, rcs_linearization, ucs_linearization)

UCS_SPURIOUS_THRESHOLD = 1e-3   # η = ‖Φ̂_q v‖/‖v‖ above this: a penalty (spurious) mode
INFINITE_TOL = 1e-8             # |β|/‖(α, β)‖ at or below this: an infinite eigenvalue (RCS)
REAL_RTOL = 1e-12               # |Im s| ≤ REAL_RTOL·|s| from ARPACK: a real eigenvalue
SHIFT_OFFSET = 1e-10            # relative offset of the inverse-iteration shift from the eigenvalue
ARPACK_TOL = 1e-10              # Ritz-value tolerance; the requested modes are refined afterwards
SMALL_ORDER = 40                # pencils up to this order take the dense QZ on the sparse path
SOLVERS = ("auto", "general", "symmetric")


@dataclass(frozen=True, kw_only=True)
class ConstrainedModes(ModeSet):
    """Physical modes of a constrained system from one method, as a
    :class:`~flexmodal_ros.modes.ModeSet` (mode shapes (n, modes) in the full coordinates q,
    rows ``coordinate_names``), plus:

    ``method`` "mcs" | "rcs" | "ucs"; ``q`` the point linearized about (for UCS the penalty
    equilibrium); ``multipliers`` λ there (UCS: αω²Φ(q_p)); ``coordinate_names``;
    ``spurious_eigenvalues`` the discarded eigenvalues (complex; ``inf`` for infinite ones) with
    ``spurious_reasons`` (one string each); ``diagnostics`` a dict of facts (sizes, constraint
    rank, thresholds, gap between physical and spurious, basis, scaling, solver, timing [s]).
    """

    method: str
    q: np.ndarray
    multipliers: np.ndarray
    coordinate_names: tuple
    spurious_eigenvalues: np.ndarray
    spurious_reasons: tuple
    diagnostics: dict

    def to_dict(self) -> dict:
        out = {"method": self.method, "coordinate_names": list(self.coordinate_names),
               "q": self.q.tolist(), "multipliers": self.multipliers.tolist()}
        out.update(super().to_dict())
        finite = np.where(np.isfinite(self.spurious_eigenvalues), self.spurious_eigenvalues, 0)
        out.update({
            "num_spurious": int(self.spurious_eigenvalues.size),
            "spurious_eigenvalues_real": [r if np.isfinite(s) else "inf" for r, s in
                                          zip(finite.real.tolist(), self.spurious_eigenvalues)],
            "spurious_eigenvalues_imag": [i if np.isfinite(s) else "inf" for i, s in
                                          zip(finite.imag.tolist(), self.spurious_eigenvalues)],
            "spurious_reasons": list(self.spurious_reasons),
            "diagnostics": _jsonable(self.diagnostics)})
        return out


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def modal_analysis(system, equilibrium: Equilibrium, method="rcs", *, num_modes=None, sigma=0.0,
                   penalty: Penalty = Penalty(), basis="auto", independent=None, reselect=True,
                   solver="auto", scale=True, refine=None,
                   spurious_threshold=UCS_SPURIOUS_THRESHOLD, infinite_tol=INFINITE_TOL,
                   q_penalty=None, data=None) -> ConstrainedModes:
    """Modes of ``system`` linearized about ``equilibrium`` by ``method`` ("mcs", "rcs", "ucs").

    ``num_modes=None`` computes the whole spectrum densely; an integer k the k lowest modes
    (nearest to the real shift ``sigma`` [1/s]) by sparse shift-invert ARPACK. MCS options:
    ``basis``, ``independent``, ``reselect`` (:func:`~.linearize.mcs_linearization`), ``solver``
    ("auto" | "general" | "symmetric"); RCS: ``scale``, ``infinite_tol``; UCS: ``penalty``,
    ``spurious_threshold``, ``q_penalty`` (the penalty equilibrium if already solved, e.g. by
    :func:`~.equilibrium.penalty_equilibrium`). ``refine=k`` refines the k lowest modes by
    shifted inverse iteration (:func:`_refine_quadratic`, :func:`_refine_pencil`); None: all
    requested modes of the sparse path, none of the dense path. See the module docstring for the
    classification rules.
    """
    if method not in METHODS:
        raise InputError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    if solver not in SOLVERS:
        raise InputError(f"solver: expected one of {', '.join(SOLVERS)}, got {solver!r}")
    sparse = num_modes is not None
    if sparse:
        num_modes = int(num_modes)
        if num_modes < 1:
            raise InputError(f"num_modes: must be >= 1, got {num_modes}")
        sigma = finite_scalar(sigma, "sigma")
    threshold = float(spurious_threshold)
    refine = (num_modes if sparse else 0) if refine is None else int(refine)
    start = time.perf_counter()
    data = system.create_data() if data is None else data
    if method == "mcs":
        lin = mcs_linearization(system, equilibrium, basis, independent, reselect, sparse, data)
        result = _second_order_modes(lin, solver, num_modes, sigma, refine)
        lam, spurious = equilibrium.multipliers, ([], [])
    elif method == "rcs":
        lin = rcs_linearization(system, equilibrium, scale, sparse, data)
        result, spurious = _descriptor_modes(lin, num_modes, sigma, infinite_tol, refine)
        lam = equilibrium.multipliers
    else:
        lin = ucs_linearization(system, equilibrium, penalty, sparse, data, q_penalty)
        extra = equilibrium.constraint_rank + 2 if sparse else None  # room for 2r penalty eigenvalues
        result = _second_order_modes(lin, "general", num_modes and num_modes + extra, sigma)
        result, spurious = _penalty_filter(result, lin, threshold)
        if refine:
            w, x, diag = result
            w, x = _refine_quadratic(lin, w, x, refine)
            result = (w, x, {**diag, "refined_modes": int(refine)})
        lam = lin.info["multipliers"]
    w, v, diag = result
    if sparse:
        w, v = _lowest(w, v, num_modes)
    modes = modes_from_eigenpairs(w[None, :], v[None, :, :])[0]
    diag.update({"n": system.n, "m": system.m, "constraint_rank": equilibrium.constraint_rank,
                 "dof": system.n - equilibrium.constraint_rank, "notes": list(equilibrium.notes),
                 "path": f"sparse shift-invert ARPACK (sigma={sigma:g})" if sparse else "dense",
                 "seconds": time.perf_counter() - start})
    diag.update({k: v_ for k, v_ in lin.info.items() if k not in ("multipliers", "phi_q")})
    return ConstrainedModes(**modes.mode_fields(), method=method, q=frozen(lin.q),
                            multipliers=frozen(lam), coordinate_names=system.coordinate_names,
                            spurious_eigenvalues=frozen(np.asarray(spurious[0], complex)),
                            spurious_reasons=tuple(spurious[1]), diagnostics=diag)


def _lowest(w, v, k):
    """The k lowest oscillatory modes (by |s|) and every real eigenvalue found."""
    osc = np.flatnonzero(w.imag > 0)
    keep = np.concatenate([osc[np.argsort(np.abs(w[osc]), kind="stable")[:k]],
                           np.flatnonzero(w.imag == 0)])
    return w[keep], v[:, keep]


# --- dense QZ on scaled first-order pencils ------------------------------------------------

def _scale_factors(M, K):
    """(time scale ω_ref = √(‖K‖/‖M‖), ‖K‖, ‖M‖) with ‖·‖ the largest entry (1 if zero)."""
    k_norm = float(np.abs(K).max()) if K.size else 0.0
    m_norm = float(np.abs(M).max()) if M.size else 0.0
    if k_norm == 0 or m_norm == 0:
        return 1.0, 1.0, 1.0
    return float(np.sqrt(k_norm / m_norm)), k_norm, m_norm


def _second_order_pencil(M, C, K):
    """Scaled first-order pencil of M ẍ + C ẋ + K x = 0: E = blkdiag(I, M/‖M‖),
    A = [[0, I], [−K/‖K‖, −C ω_ref/‖K‖]] in x̂ = [x; ẋ/ω_ref]; eigenvalues s/ω_ref."""
    tau, k_norm, m_norm = _scale_factors(M, K)
    k = M.shape[0]
    E = sla.block_diag(np.eye(k), M / m_norm)
    A = np.block([[np.zeros((k, k)), np.eye(k)], [-K / k_norm, -C * (tau / k_norm)]])
    return A, E, tau


def _qz(A, E, infinite_tol):
    """QZ with homogeneous eigenvalues: (α/β for the finite ones, right vectors, infinite mask,
    |β|/‖(α, β)‖)."""
    alphar, alphai, beta, _, vr, _, info = sla.lapack.dggev(A, E, compute_vl=0, compute_vr=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"QZ (LAPACK dggev) failed, info = {info}")
    alpha = alphar + 1j * alphai
    y = vr.astype(complex)
    first = np.flatnonzero(alphai > 0)  # complex pair j, j + 1: v = vr[:, j] ± i vr[:, j + 1]
    y[:, first] = vr[:, first] + 1j * vr[:, first + 1]
    y[:, first + 1] = np.conj(y[:, first])
    size = np.hypot(np.abs(alpha), np.abs(beta))
    beta_rel = np.abs(beta) / np.where(size > 0, size, 1.0)
    infinite = beta_rel <= infinite_tol
    w = np.where(infinite, 0, alpha / np.where(infinite, 1, beta))
    return w, y, infinite, beta_rel


# --- second-order (MCS, UCS) ---------------------------------------------------------------

def _second_order_modes(lin: SecondOrderSystem, solver, num_modes, sigma, refine=0):
    """(eigenvalues, shapes in q (n, ·), diagnostics) of M ẍ + C ẋ + K x = 0."""
    basis = lin.basis
    if num_modes is not None:
        k = lin.M.shape[0]
        E = sp.block_diag([sp.identity(k), sp.csc_matrix(lin.M)], format="csc")
        A = sp.bmat([[None, sp.identity(k)], [-sp.csc_matrix(lin.K), -sp.csc_matrix(lin.C)]],
                     format="csc")
        w, y = _shift_invert(A, E, 2 * num_modes + 2, sigma)
        x, diag = y[:k], {"solver": "arpack"}
        if refine:
            w, x = _refine_quadratic(lin, w, x, refine)
            diag["refined_modes"] = int(refine)
    else:
        M, C, K = (_dense(a) for a in (lin.M, lin.C, lin.K))
        symmetric = not np.any(C) and np.abs(K - K.T).max() <= 1e-12 * np.abs(K).max()
        if solver == "symmetric" and not symmetric:
            raise InputError("solver: 'symmetric' needs an undamped model with symmetric "
                             "stiffness (C = 0, K = Kᵀ); use 'general'")
        if symmetric and solver != "general":
            w, x = _symmetric_modes(M, K)
            diag = {"solver": "eigh (symmetric-definite K x = ω² M x)"}
        else:
            A, E, tau = _second_order_pencil(M, C, K)
            w, y, infinite, _ = _qz(A, E, INFINITE_TOL)
            if infinite.any():
                raise InputError("the mass matrix of the linearized model is singular "
                                 f"({int(infinite.sum())} infinite eigenvalues)")
            w, x = w * tau, y[:M.shape[0]]
            diag = {"solver": "QZ (scaled first-order pencil)", "time_scale": tau}
        if refine:
            w, x = _refine_quadratic(lin, w, x, refine)
            diag["refined_modes"] = int(refine)
    shapes = x if basis is None else basis @ x
    return w, np.asarray(shapes), diag


def _symmetric_modes(M, K):
    """s = ±√(−μ) from K x = μ M x (eigh): ±iω for μ = ω² > 0, a real pair for μ < 0."""
    mu, x = sla.eigh(K, M)
    root = np.sqrt(mu.astype(complex))
    s = np.concatenate([1j * root, -1j * root])
    s = np.where(np.abs(s.imag) == 0, s.real + 0j, s)
    return s, np.hstack([x, x]).astype(complex)


def _lowest_oscillatory(w, count):
    """Indices of the ``count`` oscillatory eigenvalues (Im > 0) of smallest modulus."""
    osc = np.flatnonzero(w.imag > 0)
    return osc[np.argsort(np.abs(w[osc]), kind="stable")[:count]]


def _factor(matrix):
    """Solver for a complex square matrix (sparse LU when sparse enough, dense LU otherwise), or
    None if it is exactly singular (the eigenvalue is then already exact to round-off)."""
    nnz = matrix.nnz if sp.issparse(matrix) else np.count_nonzero(matrix)
    try:
        if nnz < 0.1 * matrix.shape[0] ** 2:
            return spla.splu(sp.csc_matrix(matrix, dtype=complex)).solve
        with warnings.catch_warnings():
            warnings.simplefilter("error", sla.LinAlgWarning)
            lu = sla.lu_factor(_dense(matrix).astype(complex), check_finite=False)
    except (RuntimeError, sla.LinAlgWarning, np.linalg.LinAlgError):
        return None
    return lambda b: sla.lu_solve(lu, b, check_finite=False)


def _refine_quadratic(lin: SecondOrderSystem, w, x, count):
    """Refine the ``count`` lowest modes of (s²M + sC + K) x = 0 (reduced coordinates x).

    The dense solvers are backward stable, error ≈ ε‖K‖ on every eigenvalue; with the stiffness
    spread of fine FE meshes (‖K‖/ω₁² ≈ 1e9) that is ≈1e-8 on the lowest modes. Each mode is
    refined by two steps of inverse iteration (LU of K + sC + s²M, shift s = the current
    eigenvalue) and the eigenvalue is then the root nearest to s of the quadratic Rayleigh
    functional vᴴ(s²M + sC + K)v = 0, evaluated in extended precision on the full-space matrices
    with v = R x (:func:`_rayleigh_root`): no cancellation of the large stiffness entries.
    """
    M, C, K = lin.M, lin.C, lin.K
    full = lin.full_space or (M, C, K)
    w, x = w.copy(), x.astype(complex).copy()
    for i in _lowest_oscillatory(w, count):
        s = w[i]
        shifted = s * (1 + SHIFT_OFFSET)  # never exactly singular; inverse iteration is unaffected
        solve = _factor(K + shifted * C + shifted ** 2 * M)
        if solve is None:
            continue
        v = x[:, i]
        for _ in range(2):
            v = solve(np.asarray((2 * s * M + C) @ v).ravel())
            v = v / np.linalg.norm(v)
        v_full = v if lin.basis is None else np.asarray(lin.basis @ v).ravel()
        _set_pair(w, x, i, _rayleigh_root(*full, v_full, s), v)
    return w, x


def _refine_pencil(lin: DescriptorSystem, w, y, count):
    """Refine the ``count`` lowest modes of the RCS pencil (scaled eigenvalues ŝ = s/ω_ref):
    two steps of inverse iteration on the second-order RCS equations (the same pencil with q̇ = sq
    eliminated) with the bordered matrix [[K + sC + s²M, Φ_qᵀ], [Φ_q, 0]] (sparse LU, far less
    fill-in than the first-order pencil), then the Rayleigh root as in :func:`_refine_quadratic`
    of the vector projected onto its constraint rows, Φ_q v = 0."""
    M, C, K, phi_q = lin.second_order
    n, m, tau = lin.n, lin.m, lin.time_scale
    phi = sp.csc_matrix(phi_q)
    gram = _dense(phi @ phi.T)
    w, y = w.copy(), y.astype(complex).copy()
    for i in _lowest_oscillatory(w, count):
        s = w[i] * tau
        shifted = s * (1 + SHIFT_OFFSET)
        bordered = sp.bmat([[sp.csc_matrix(K + shifted * C + shifted ** 2 * M), phi.T], [phi, None]],
                           format="csc")
        solve = _factor(bordered)
        if solve is None:
            continue
        v = y[:n, i]
        for _ in range(2):
            rhs = np.concatenate([np.asarray((2 * s * M + C) @ v).ravel(), np.zeros(m)])
            v = solve(rhs)[:n]
            v = v / np.linalg.norm(v)
        if m:  # exactly onto Φ_q v = 0: a residual Φ_q v enters the Rayleigh quotient linearly
            v = v - phi.T @ np.linalg.solve(gram, phi @ v)
        s_new = _rayleigh_root(M, C, K, v, s)
        full = np.concatenate([v, s_new * v / tau, y[2 * n:, i] * 0])
        _set_pair(w, y, i, s_new / tau, full / np.linalg.norm(full))
    return w, y


def _set_pair(w, vectors, i, s_new, v):
    """Replace eigenvalue i (Im > 0) and its conjugate partner, with their vectors."""
    partner = np.flatnonzero(np.isclose(w, np.conj(w[i]), rtol=1e-6, atol=0) & (w.imag < 0))
    w[i], vectors[:, i] = s_new, v
    if partner.size:
        w[partner[0]], vectors[:, partner[0]] = np.conj(s_new), np.conj(v)


def _quadratic_form(A, v):
    """vᴴAv in extended precision (numpy.longdouble) for dense or sparse real A."""
    A = sp.coo_matrix(A)
    data = A.data.astype(np.longdouble)
    vr, vi = v.real.astype(np.longdouble), v.imag.astype(np.longdouble)
    re = np.sum(data * (vr[A.row] * vr[A.col] + vi[A.row] * vi[A.col]))
    im = np.sum(data * (vr[A.row] * vi[A.col] - vi[A.row] * vr[A.col]))
    return re + 1j * im


def _rayleigh_root(M, C, K, v, s):
    """Root nearest to s of a s² + b s + c = 0, a, b, c = vᴴMv, vᴴCv, vᴴKv (extended precision)."""
    a, b, c = (np.clongdouble(_quadratic_form(X, v)) for X in (M, C, K))
    disc = np.sqrt(b * b - 4 * a * c)
    roots = np.array([(-b + disc) / (2 * a), (-b - disc) / (2 * a)])
    return complex(roots[np.argmin(np.abs(roots - s))])


def _shift_invert(A, E, k, sigma):
    """k eigenpairs of the pencil (A, E) nearest to ``sigma``: ARPACK on (A − σE)⁻¹E."""
    size = A.shape[0]
    if k < 1:
        raise InputError(f"num_modes: must be >= 1, got {k}")
    if k >= size - 1 or size <= SMALL_ORDER:  # ARPACK needs k < order − 1: small models by QZ
        w, y, infinite, _ = _qz(_dense(A), _dense(E), INFINITE_TOL)
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
                          tol=ARPACK_TOL)
    except spla.ArpackNoConvergence as exc:
        if exc.eigenvalues.size < k // 2:
            raise InputError(f"num_modes: ARPACK did not converge for {k} eigenvalues near "
                             f"σ = {sigma:g}; ask for fewer modes or another shift") from None
        nu, y = exc.eigenvalues, exc.eigenvectors
    s = sigma + 1.0 / nu
    s = np.where(np.abs(s.imag) <= REAL_RTOL * np.abs(s), s.real + 0j, s)
    return s, y


# --- descriptor (RCS) ----------------------------------------------------------------------

def _descriptor_modes(lin: DescriptorSystem, num_modes, sigma, infinite_tol, refine=0):
    n, m, tau = lin.n, lin.m, lin.time_scale
    diag = dict(lin.info)
    if num_modes is not None:
        w, y = _shift_invert(lin.A, lin.E, 2 * num_modes + 2, sigma / tau)
        diag.update({"solver": "arpack", "infinite_eigenvalues": "not computed (ν = 0 under "
                     "shift-invert)"})
        if refine:
            w, y = _refine_pencil(lin, w, y, refine)
            diag["refined_modes"] = int(refine)
        return (w * tau, y[:n], diag), ([], [])
    w, y, infinite, beta_rel = _qz(_dense(lin.A), _dense(lin.E), infinite_tol)
    reasons = [f"infinite (|β|/‖(α,β)‖ = {b:.1e} ≤ {infinite_tol:g})" for b in beta_rel[infinite]]
    finite_beta = beta_rel[~infinite]
    diag.update({"solver": "QZ (LAPACK dggev, homogeneous)", "infinite_tol": infinite_tol,
                 "num_infinite": int(infinite.sum()), "expected_infinite": 3 * m,
                 "max_infinite_beta": float(beta_rel[infinite].max()) if infinite.any() else None,
                 "min_finite_beta": float(finite_beta.min()) if finite_beta.size else None})
    w, y = w[~infinite], y[:, ~infinite]
    if refine:
        w, y = _refine_pencil(lin, w, y, refine)
        diag["refined_modes"] = int(refine)
    spurious = (np.full(int(infinite.sum()), np.inf + 0j), reasons)
    return (w * tau, y[:n], diag), spurious


# --- UCS filter ----------------------------------------------------------------------------

def _penalty_filter(result, lin: SecondOrderSystem, threshold):
    """Split the UCS spectrum by the constraint-velocity violation η of each eigenvector."""
    w, v, diag = result
    phi_q = _dense(lin.info["phi_q"])
    norms = _row_norms(phi_q)
    phi_hat = phi_q / np.where(norms > 0, norms, 1.0)[:, None]
    eta = np.linalg.norm(phi_hat @ v, axis=0) / np.maximum(np.linalg.norm(v, axis=0), 1e-300)
    spurious = eta > threshold
    diag = dict(diag)
    diag.update({"spurious_threshold": threshold, "num_spurious": int(spurious.sum()),
                 "max_physical_violation": float(eta[~spurious].max()) if (~spurious).any() else None,
                 "min_spurious_violation": float(eta[spurious].min()) if spurious.any() else None})
    reasons = [f"penalty mode: constraint-velocity violation η = {e:.2e} > {threshold:g}"
               for e in eta[spurious]]
    return (w[~spurious], v[:, ~spurious], diag), (w[spurious], reasons)

"""Eigenanalysis of the MCS / RCS / UCS linearizations → one result type, :class:`ConstrainedModes`.

Dense paths (whole spectrum). MCS and UCS solve a second-order model M ẍ + C ẋ + K x = 0 through
its first-order pencil (E, A) = (blkdiag(I, M), [[0, I], [−K, −C]]) scaled like the RCS pencil
(time by ω_ref = √(‖K‖/‖M‖), rows by ‖K‖), in standard form: with M/‖M‖ = LLᵀ the pencil is
equivalent to the matrix [[0, I], [−L⁻¹K̂L⁻ᵀ, −L⁻¹ĈL⁻ᵀ]], solved by the Hessenberg QR algorithm
(LAPACK dgeev, :func:`_standard_modes`) — a third of the time of QZ on the pencil at the same
accuracy (pendulum UCS, four lowest modes unrefined: 9e-9 / 1.5e-7 vs QZ 2.5e-8 / 5.3e-7 at
n_p = 50 / 100); QZ on the pencil only if M is not positive definite:

* MCS: the 2(n − r) model of (6), or — for an undamped, symmetric reduced model (C_r = 0,
  K_r = K_rᵀ) — the symmetric-definite problem K_r x = ω² M_r x by ``scipy.linalg.eigh``
  (``solver="auto"`` chooses). No spurious eigenvalues.
* RCS: the scaled descriptor pair (A, E) by QZ with homogeneous eigenvalues (α, β),
  s = ω_ref α/β. Its 2r position- and velocity-level infinite eigenvalues are deflated exactly by
  an orthogonal equivalence (:func:`_index_one_pencil`, β = 0), and QZ (LAPACK dggev,
  :func:`flexmodal_ros.linalg.lapack.generalized_eig`) solves the remaining index-1 descriptor pencil
  in (null-space positions, velocities, multipliers) of order 2(n − r) + r — or, undamped, the
  same pencil in μ = s² of order n. A spurious eigenvalue is *infinite*: |β| ≤
  ``infinite_tol``·‖(α, β)‖ (classified by β, not by the size of α/β: QZ can return infinite
  eigenvalues as large finite numbers, notes_001 §4); QZ finds the r multiplier-level ones. 3r
  in all (r = rank Φ_q). The deflation also removes most of the conditioning problem of the
  index-3 pencil (pendulum n_p = 25: bare unscaled QZ 7.5e-7 from MCS, deflated 7.9e-10).
* UCS: the 2n model of (14). Spurious eigenvalues belong to the penalty springs: their
  eigenvectors violate the velocity constraints. With Φ̂_q the row-normalized constraint Jacobian
  and v the position part of the eigenvector, the violation η = ‖Φ̂_q v‖/‖v‖ (dimensionless; the
  constraint velocity Φ_q(s v) relative to ‖s v‖) is O(1) for the 2r penalty modes and of order
  λ/(αω²·length) for physical ones (≈1e-7 for the four-bar, notes_001 §4; ≤ 5e-5 for the
  pendulum, whose penalty modes have η ≥ 0.04). Threshold ``UCS_SPURIOUS_THRESHOLD = 1e-3``
  (configurable ``spurious_threshold``): η above it is spurious. All 2n eigenpairs are needed
  for that, so the dense UCS is bounded by one eigendecomposition of order 2n.

Automatic refinement (``refine="auto"``, the default of the dense path): the dense solvers are
backward stable, so their eigenvalue errors are of order ε‖K‖ — about 2e-8 on the lowest modes of
the fine pendulum meshes (n_p = 50: RCS − MCS 2.2e-8, above the source's 8.2e-9). For the
``AUTO_REFINE_MODES`` lowest modes the residual r = (s²M + sC + K)x (RCS: with the multipliers'
part Φ_qᵀℓ removed) bounds the error, |δs| ≲ ‖r‖/|xᴴ(2sM + C)x|; the modes where that bound
exceeds ``AUTO_REFINE_RTOL``·|s| are refined as ``refine=k`` does (:func:`_refine_quadratic`,
:func:`_refine_pencil`), the others are left as they are.

Every path runs on one BLAS thread (:func:`flexmodal_ros.core.blas.single_blas_thread`): on small
models the thread hand-off costs more than the arithmetic, and for the large dense ones QZ gains
little from threads while a shared machine makes them collapse (measured, pendulum n_p = 100 on
the 2-core machine at load ≈ 2.4, ``flexmodal constrained``: MCS/RCS/UCS 0.13/0.45–0.66/1.5 s on
one thread, 0.5–1.7/4.7–6.9/6.0–6.6 s on two; the bare dggev/dgeev calls are compared in
``benchmarks/bench_constrained.py``).

Sparse path (``num_modes=k``): shift-invert Arnoldi (ARPACK via ``scipy.sparse.linalg.eigs``) on
the first-order pencil with a sparse LU of (A − σE): the operator (A − σE)⁻¹E has eigenvalues
ν = 1/(s − σ), so the k modes nearest to σ (default 0: the lowest) come first and infinite
eigenvalues (ν = 0) never appear — the source's "compute only a subspace" (§5.3). MCS uses the
sparse coordinate-partitioning basis there, UCS filters the penalty modes as above. ARPACK starts
from a fixed-seed vector, so repeated analyses give identical results; the requested modes are
then refined (:func:`_refine_quadratic`, :func:`_refine_pencil`).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..core.blas import single_blas_thread
from ..core.errors import InputError
from ..linalg.lapack import complex_vectors, generalized_eig, standard_eig
from ..modes import ModeSet, is_real, lowest_modes, modes_from_eigen
from ..core.validation import finite_scalar, frozen
from .equilibrium import Equilibrium
from .linearizations import (METHODS, DescriptorSystem, Penalty, SecondOrderSystem, _dense,
                        _row_norms, mcs_linearization, rcs_linearization, ucs_linearization)

UCS_SPURIOUS_THRESHOLD = 1e-3   # η = ‖Φ̂_q v‖/‖v‖ above this: a penalty (spurious) mode
INFINITE_TOL = 1e-8             # |β|/‖(α, β)‖ at or below this: an infinite eigenvalue (RCS)
AUTO_REFINE_MODES = 8           # lowest oscillatory modes checked by refine="auto" (the CLI shows 8)
AUTO_REFINE_RTOL = 1e-10        # residual bound above this × |s|: the mode is refined
MAX_DENSE_COORDINATES = 1300    # whole spectrum (dense QZ/QR of order up to 2n): pendulum n_p <= 214,
                                # four-bar N <= 648; larger models: the sparse path (num_modes)
SHIFT_OFFSET = 1e-10            # relative offset of the inverse-iteration shift from the eigenvalue
ARPACK_TOL = 1e-10              # Ritz-value tolerance; the requested modes are refined afterwards
SMALL_ORDER = 40                # pencils up to this order take the dense QZ on the sparse path
SOLVERS = ("auto", "general", "symmetric")


@dataclass(frozen=True, kw_only=True)
class ConstrainedModes(ModeSet):
    """Physical modes of a constrained system from one method, as a
    :class:`~flexmodal_ros.modes.modeset.ModeSet` (mode shapes (n, modes) in the full coordinates q,
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
                   q_penalty=None, data=None, num_modes_field="num_modes") -> ConstrainedModes:
    """Modes of ``system`` linearized about ``equilibrium`` by ``method`` ("mcs", "rcs", "ucs").

    ``num_modes=None`` computes the whole spectrum densely; an integer k the k lowest modes
    (nearest to the real shift ``sigma`` [1/s]) by sparse shift-invert ARPACK. MCS options:
    ``basis``, ``independent``, ``reselect`` (:func:`~.linearize.mcs_linearization`), ``solver``
    ("auto" | "general" | "symmetric"); RCS: ``scale``, ``infinite_tol``; UCS: ``penalty``,
    ``spurious_threshold``, ``q_penalty`` (the penalty equilibrium if already solved, e.g. by
    :func:`~.equilibrium.penalty_equilibrium`). ``refine=k`` refines the k lowest modes by
    shifted inverse iteration (:func:`_refine_quadratic`, :func:`_refine_pencil`); None: all
    requested modes of the sparse path, "auto" on the dense path (those of the
    AUTO_REFINE_MODES lowest whose residual says so, module docstring); "auto" may be given for
    either path, 0 turns refinement off. See the module docstring for the classification rules. The dense path takes models of at most MAX_DENSE_COORDINATES
    coordinates (``num_modes_field`` names the mode count in that error, e.g. "--modes").
    """
    if method not in METHODS:
        raise InputError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    if solver not in SOLVERS:
        raise InputError(f"solver: expected one of {', '.join(SOLVERS)}, got {solver!r}")
    sparse = num_modes is not None
    check_dense_size(system, num_modes, num_modes_field)
    if sparse:
        num_modes = int(num_modes)
        if num_modes < 1:
            raise InputError(f"num_modes: must be >= 1, got {num_modes}")
        sigma = finite_scalar(sigma, "sigma")
    threshold = float(spurious_threshold)
    if refine is None:
        refine = num_modes if sparse else "auto"
    refine = refine if refine == "auto" else int(refine)
    start = time.perf_counter()
    data = system.create_data() if data is None else data
    with single_blas_thread():
        if method == "mcs":
            lin = mcs_linearization(system, equilibrium, basis, independent, reselect, sparse, data)
            result = _second_order_modes(lin, solver, num_modes, sigma, refine)
            lam, spurious = equilibrium.multipliers, ((), ())
        elif method == "rcs":
            lin = rcs_linearization(system, equilibrium, scale, sparse, data)
            result, spurious = _descriptor_modes(lin, num_modes, sigma, infinite_tol, refine)
            lam = equilibrium.multipliers
        else:
            lin = ucs_linearization(system, equilibrium, penalty, sparse, data, q_penalty)
            extra = equilibrium.constraint_rank + 2 if sparse else None  # room for 2r penalty modes
            result = _second_order_modes(lin, "general", num_modes and num_modes + extra, sigma)
            result, spurious = _penalty_filter(result, lin, threshold)
            if refine:
                w, x, diag = result
                w, x, note = _refine(lin, w, x, refine, _refine_quadratic)
                result = (w, x, {**diag, **note})
            lam = lin.info["multipliers"]
    w, v, diag = result
    if sparse:
        w, v = _lowest(w, v, num_modes)
    diag.update({"n": system.n, "m": system.m, "constraint_rank": equilibrium.constraint_rank,
                 "dof": system.n - equilibrium.constraint_rank, "notes": list(equilibrium.notes),
                 "path": f"sparse shift-invert ARPACK (sigma={sigma:g})" if sparse else "dense"})
    diag.update({k: v_ for k, v_ in lin.info.items() if k not in ("multipliers", "phi_q")})
    diag["seconds"] = time.perf_counter() - start
    return modes_from_eigen(np.asarray(w, complex), v, result_type=ConstrainedModes,
                            method=method, q=frozen(lin.q), multipliers=frozen(lam),
                            coordinate_names=system.coordinate_names,
                            spurious_eigenvalues=frozen(np.asarray(spurious[0], complex)),
                            spurious_reasons=tuple(spurious[1]), diagnostics=diag)


def check_dense_size(size, num_modes, num_modes_field="num_modes"):
    """InputError (before any work) if the whole spectrum is asked (``num_modes`` None) of a model
    with ``size`` (an int, or a system with ``n``) above MAX_DENSE_COORDINATES coordinates."""
    n = int(getattr(size, "n", size))
    if num_modes is None and n > MAX_DENSE_COORDINATES:
        raise InputError(f"{num_modes_field}: the whole spectrum (dense path) is limited to "
                         f"{MAX_DENSE_COORDINATES} coordinates and this model has {n}; ask for the "
                         f"lowest modes ({num_modes_field} K, sparse path)")


def _lowest(w, v, k):
    """The k lowest oscillatory modes (by |s|) and every real eigenvalue found."""
    keep = np.concatenate([lowest_modes(w, k), np.flatnonzero(is_real(w))])
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
    E, A = np.zeros((2 * k, 2 * k)), np.zeros((2 * k, 2 * k))
    E[:k, :k] = A[:k, k:] = np.eye(k)
    E[k:, k:] = M / m_norm
    A[k:, :k], A[k:, k:] = K / -k_norm, C * (-tau / k_norm)
    return A, E, tau


def _qz(A, E, infinite_tol, keep=None):
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


def _standard_modes(M, C, K):
    """(s, x) of M ẍ + C ẋ + K x = 0 with M symmetric positive definite, by the Hessenberg QR
    algorithm (``dgeev``) on the standard form of the scaled first-order pencil: with
    M/‖M‖ = LLᵀ (Cholesky) and x̃ = Lᵀx the pencil blkdiag(I, M/‖M‖) − [[0, I], [−K̂, −Ĉ]] is
    equivalent to the matrix [[0, I], [−L⁻¹K̂L⁻ᵀ, −L⁻¹ĈL⁻ᵀ]] (a symmetric congruence, so
    symmetric K̂, Ĉ stay symmetric). About 3× cheaper than QZ on the pencil of the same order
    (measured: order 1224, 1.5 s vs 5.4 s). None if M is not positive definite."""
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
            w, x, note = _refine(lin, w, x, refine, _refine_quadratic)
            diag.update(note)
    else:
        M, C, K = (_dense(a) for a in (lin.M, lin.C, lin.K))
        damped = bool(np.any(C))
        symmetric = not damped and np.abs(K - K.T).max() <= 1e-12 * np.abs(K).max()
        if solver == "symmetric" and not symmetric:
            raise InputError("solver: 'symmetric' needs an undamped model with symmetric "
                             "stiffness (C = 0, K = Kᵀ); use 'general'")
        if symmetric and solver != "general":
            w, x = _symmetric_modes(M, K)
            diag = {"solver": "eigh (symmetric-definite K x = ω² M x)"}
        else:
            standard = _standard_modes(M, C, K)
            if standard is not None:
                (w, x), diag = standard, {"solver": "dgeev (Cholesky standard form of the scaled "
                                                    "first-order pencil)"}
            else:
                A, E, tau = _second_order_pencil(M, C, K)
                w, y, infinite, _ = _qz(A, E, INFINITE_TOL, keep=slice(0, M.shape[0]))
                if infinite.any():
                    raise InputError("the mass matrix of the linearized model is singular "
                                     f"({int(infinite.sum())} infinite eigenvalues)")
                w, x = w * tau, y
                diag = {"solver": "QZ (scaled first-order pencil)", "time_scale": tau}
        if refine:
            w, x, note = _refine(lin, w, x, refine, _refine_quadratic)
            diag.update(note)
    shapes = x if basis is None else basis @ x
    return w, np.asarray(shapes), diag


def _symmetric_modes(M, K):
    """s = ±√(−μ) from K x = μ M x (eigh): ±iω for μ = ω² > 0, a real pair for μ < 0."""
    mu, x = sla.eigh(K, M)
    root = np.sqrt(mu.astype(complex))
    s = np.concatenate([1j * root, -1j * root])
    s = np.where(np.abs(s.imag) == 0, s.real + 0j, s)
    return s, np.hstack([x, x]).astype(complex)


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


def _refine(lin, w, x, refine, refiner):
    """``refine`` modes (a count, or "auto": those of the AUTO_REFINE_MODES lowest whose residual
    bound exceeds AUTO_REFINE_RTOL·|s|) by ``refiner``; (w, x, diagnostics)."""
    if refine != "auto":
        w, x = refiner(lin, w, x, int(refine))
        return w, x, {"refined_modes": int(refine)}
    candidates = lowest_modes(w, AUTO_REFINE_MODES)
    bounds = _error_bounds(lin, w, x, candidates)
    chosen = candidates[bounds > AUTO_REFINE_RTOL * np.abs(w[candidates])]
    if chosen.size:
        w, x = refiner(lin, w, x, chosen.size, chosen)
    return w, x, {"refined_modes": int(chosen.size),
                  "refine": f"auto: {chosen.size} of the {candidates.size} lowest modes had a residual "
                            f"error bound above {AUTO_REFINE_RTOL:g}·|s| (largest {bounds.max(initial=0.0):.2e} 1/s)"}


def _error_bounds(lin, w, x, indices):
    """|δs| ≲ ‖r‖/|xᴴ(2sM + C)x| per mode, r the residual of the second-order equations
    (:class:`SecondOrderSystem`: in its own coordinates; :class:`DescriptorSystem`: in q, without
    its component in the range of Φ_qᵀ, which the multipliers take)."""
    if isinstance(lin, DescriptorSystem):
        M, C, K, phi = lin.second_order
        phi = _dense(phi)
        basis_q, _ = np.linalg.qr(phi.T) if phi.size else (np.zeros((M.shape[0], 0)), None)
    else:
        M, C, K, basis_q = lin.M, lin.C, lin.K, None
    out = np.zeros(len(indices))
    for k, i in enumerate(indices):
        s, v = w[i], np.asarray(x[:, i], complex)
        v = v / np.linalg.norm(v)
        r = np.asarray(s * s * (M @ v) + s * (C @ v) + K @ v).ravel()
        if basis_q is not None and basis_q.size:
            r = r - basis_q @ (basis_q.T @ r)
        slope = abs(np.vdot(v, np.asarray(2 * s * (M @ v) + C @ v).ravel()))
        out[k] = np.linalg.norm(r) / slope if slope > 0 else np.inf
    return out


def _refine_quadratic(lin: SecondOrderSystem, w, x, count, indices=None):
    """Refine the ``count`` lowest modes of (s²M + sC + K) x = 0 (reduced coordinates x).

    The dense solvers are backward stable, error ≈ ε‖K‖ on every eigenvalue; with the stiffness
    spread of fine FE meshes (‖K‖/ω₁² ≈ 1e9) that is ≈1e-8 on the lowest modes. Each mode is
    refined by two steps of inverse iteration (LU of K + sC + s²M, shift s = the current
    eigenvalue) and the eigenvalue is then the root nearest to s of the quadratic Rayleigh
    functional vᴴ(s²M + sC + K)v = 0, evaluated in extended precision on the full-space matrices
    with v = R x (:func:`_rayleigh_root`): no cancellation of the large stiffness entries.
    """
    M, C, K = lin.M, lin.C, lin.K
    forms = _ExtendedForms(*(lin.full_space or (M, C, K)))
    w, x = w.copy(), x.astype(complex).copy()
    for i in (lowest_modes(w, count) if indices is None else indices):
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
        _set_pair(w, x, i, _rayleigh_root(forms, v_full, s), v)
    return w, x


def _refine_pencil(lin: DescriptorSystem, w, x, count, indices=None):
    """Refine the ``count`` lowest modes (eigenvalues s [1/s], shapes x in q) of the RCS pencil:
    two steps of inverse iteration on the second-order RCS equations (the pencil with q̇ = sq
    eliminated) with the bordered matrix [[K + sC + s²M, Φ_qᵀ], [Φ_q, 0]] (sparse LU, far less
    fill-in than the first-order pencil), giving the shape v and its multipliers ℓ, then the root
    nearest to s of the Lagrangian functional vᴴ(s²M + sC + K)v + 2 Re(ℓᴴΦ_q v) = 0 (extended
    precision, :func:`_rayleigh_root`). The multiplier term makes the root stationary also in the
    directions that violate Φ_q v = 0, which the LU leaves at ε‖K‖ in stiff FE models: without
    it (or with v projected onto Φ_q v = 0 instead) |RCS − MCS| grew to 7e-8 at n_p = 300 and
    2.5e-6 at n_p = 400 on the pendulum; with it 5e-9 and 3e-8."""
    M, C, K, phi_q = lin.second_order
    n, m = lin.n, lin.m
    phi = sp.csc_matrix(phi_q)
    forms = _ExtendedForms(M, C, K)
    w, x = w.copy(), x.astype(complex).copy()
    for i in (lowest_modes(w, count) if indices is None else indices):
        s = w[i]
        shifted = s * (1 + SHIFT_OFFSET)
        bordered = sp.bmat([[sp.csc_matrix(K + shifted * C + shifted ** 2 * M), phi.T], [phi, None]],
                           format="csc")
        solve = _factor(bordered)
        if solve is None:
            continue
        v = x[:, i]
        for _ in range(2):
            rhs = np.concatenate([np.asarray((2 * s * M + C) @ v).ravel(), np.zeros(m)])
            solution = solve(rhs)
            size = np.linalg.norm(solution[:n])
            v, ell = solution[:n] / size, solution[n:] / size
        coupling = 2 * np.real(np.vdot(ell.astype(np.clongdouble), (phi @ v).astype(np.clongdouble)))
        _set_pair(w, x, i, _rayleigh_root(forms, v, s, coupling), v)
    return w, x


def _set_pair(w, vectors, i, s_new, v):
    """Replace eigenvalue i (Im > 0) and its conjugate partner, with their vectors."""
    partner = np.flatnonzero(np.isclose(w, np.conj(w[i]), rtol=1e-6, atol=0) & (w.imag < 0))
    w[i], vectors[:, i] = s_new, v
    if partner.size:
        w[partner[0]], vectors[:, partner[0]] = np.conj(s_new), np.conj(v)


class _ExtendedForms:
    """The real matrices (M, C, K) as extended-precision triplets, converted once per refinement."""

    def __init__(self, *matrices):
        self.forms = []
        for A in matrices:
            A = sp.coo_matrix(A)
            self.forms.append((A.data.astype(np.longdouble), A.row, A.col))

    def values(self, v):
        """vᴴAv in extended precision (numpy.clongdouble) for each matrix."""
        vr, vi = v.real.astype(np.longdouble), v.imag.astype(np.longdouble)
        out = []
        for data, row, col in self.forms:
            re = np.sum(data * (vr[row] * vr[col] + vi[row] * vi[col]))
            im = np.sum(data * (vr[row] * vi[col] - vi[row] * vr[col]))
            out.append(np.clongdouble(re + 1j * im))
        return out


def _rayleigh_root(forms: _ExtendedForms, v, s, coupling=0.0):
    """Root nearest to s of a s² + b s + c = 0, a, b, c = vᴴMv, vᴴCv, vᴴKv + ``coupling``
    (extended precision; ``coupling`` the multiplier term of :func:`_refine_pencil`)."""
    a, b, c = forms.values(v)
    c = c + coupling
    disc = np.sqrt(b * b - 4 * a * c)
    roots = np.array([(-b + disc) / (2 * a), (-b - disc) / (2 * a)])
    return complex(roots[np.argmin(np.abs(roots - s))])


def _start_vector(size):
    """ARPACK's start vector: pseudo-random with a fixed seed, so that repeated analyses of one
    model give identical results (ARPACK's own random start made the refined eigenvalues of stiff
    FE models vary run to run by up to 1e-8)."""
    return np.random.default_rng(0).standard_normal(size)


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
                          tol=ARPACK_TOL, v0=_start_vector(size))
    except spla.ArpackNoConvergence as exc:
        if exc.eigenvalues.size < k // 2:
            raise InputError(f"num_modes: ARPACK did not converge for {k} eigenvalues near "
                             f"σ = {sigma:g}; ask for fewer modes or another shift") from None
        nu, y = exc.eigenvalues, exc.eigenvectors
    s = sigma + 1.0 / nu
    s = np.where(is_real(s), s.real + 0j, s)
    return s, y


# --- descriptor (RCS) ------------------------------------------------------------------------

def _descriptor_modes(lin: DescriptorSystem, num_modes, sigma, infinite_tol, refine=0):
    n, m, tau = lin.n, lin.m, lin.time_scale
    diag = dict(lin.info)
    if num_modes is not None:
        w, y = _shift_invert(lin.A, lin.E, 2 * num_modes + 2, sigma / tau)
        w, x = w * tau, y[:n]
        diag.update({"solver": "arpack", "infinite_eigenvalues": "not computed (ν = 0 under "
                     "shift-invert)"})
        if refine:
            w, x, note = _refine(lin, w, x, refine, _refine_pencil)
            diag.update(note)
        return (w, x, diag), ([], [])
    A, E, to_q, squared = _index_one_pencil(lin)
    alphar, alphai, beta, vr, info = generalized_eig(A, E)
    if info != 0:
        raise np.linalg.LinAlgError(f"QZ (LAPACK dggev) failed, info = {info}")
    size = np.hypot(np.hypot(alphar, alphai), beta)
    beta_rel = np.abs(beta) / np.where(size > 0, size, 1.0)
    infinite = beta_rel <= infinite_tol
    finite = np.flatnonzero(~infinite)
    w = (alphar[finite] + 1j * alphai[finite]) / beta[finite]
    x = complex_vectors(to_q(vr[:n - m]), alphai, finite)
    if squared:  # μ = ŝ²: each finite μ is the pair ŝ = ±√μ with the same shape
        root = np.sqrt(w)
        w, x = np.concatenate([root, -root]), np.hstack([x, x])
    w = tau * w
    deflated = 2 * m
    reasons = (["infinite, deflated exactly (position/velocity-level constraint rows of the "
                "index-3 pencil, β = 0)"] * deflated
               + [f"infinite (|β|/‖(α,β)‖ = {b:.1e} ≤ {infinite_tol:g})"
                  for b in beta_rel[infinite].tolist()])
    finite_beta = beta_rel[finite]
    diag.update({"solver": "QZ (LAPACK dggev) on the exactly deflated index-1 pencil"
                 + (" in μ = s² (undamped)" if squared else ""),
                 "pencil_order": 2 * n + m, "qz_order": A.shape[0], "infinite_tol": infinite_tol,
                 "num_infinite": deflated + int(infinite.sum()), "deflated_infinite": deflated,
                 "expected_infinite": 3 * m,
                 "max_infinite_beta": float(beta_rel[infinite].max()) if infinite.any() else None,
                 "min_finite_beta": float(finite_beta.min()) if finite_beta.size else None})
    if refine:
        w, x, note = _refine(lin, w, x, refine, _refine_pencil)
        diag.update(note)
    spurious = (np.full(len(reasons), np.inf + 0j), reasons)
    return (w, x, diag), spurious


def _index_one_pencil(lin: DescriptorSystem):
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
               for e in eta[spurious].tolist()]
    return (w[~spurious], v[:, ~spurious], diag), (w[spurious], reasons)

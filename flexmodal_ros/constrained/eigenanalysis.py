"""Eigenanalysis of the MCS / RCS / UCS linearizations → one result type, :class:`ConstrainedModes`.

Dense paths (whole spectrum). MCS and UCS solve a second-order model M ẍ + C ẋ + K x = 0 through
its first-order pencil (E, A) = (blkdiag(I, M), [[0, I], [−K, −C]]) scaled like the RCS pencil
(time by ω_ref = √(‖K‖/‖M‖), rows by ‖K‖), in standard form: with M/‖M‖ = LLᵀ the pencil is
equivalent to the matrix [[0, I], [−L⁻¹K̂L⁻ᵀ, −L⁻¹ĈL⁻ᵀ]], solved by the Hessenberg QR algorithm
(LAPACK dgeev, :func:`~.pencils.standard_modes`) — cheaper than QZ on the
pencil (``benchmarks/bench_constrained.py``, docs/benchmarks.md) at the same accuracy (pendulum
UCS, four lowest modes unrefined: 9e-9 / 1.5e-7 vs QZ 2.5e-8 / 5.3e-7 at n_p = 50 / 100); QZ on the
pencil only if M is not positive definite:

* MCS: the 2(n − r) model of (6), or — for an undamped, symmetric reduced model (C_r = 0,
  K_r = K_rᵀ) — the symmetric-definite problem K_r x = ω² M_r x by ``scipy.linalg.eigh``
  (``solver="auto"`` chooses). No spurious eigenvalues.
* RCS: the scaled descriptor pair (A, E) by QZ with homogeneous eigenvalues (α, β),
  s = ω_ref α/β. Its 2r position- and velocity-level infinite eigenvalues are deflated exactly by
  an orthogonal equivalence (:func:`~.pencils.index_one_pencil`, β = 0), and QZ (LAPACK dggev,
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
exceeds ``AUTO_REFINE_RTOL``·|s| are refined as ``refine=k`` does
(:func:`~.refinement.refine_quadratic`, :func:`~.refinement.refine_pencil`), the others are left
as they are.

Every path runs on one BLAS thread (:func:`flexmodal_ros.core.blas.single_blas_thread`): on small
models the thread hand-off costs more than the arithmetic, and for the large dense ones QZ gains
little from threads while a shared machine makes them collapse (one against two threads:
docs/benchmarks.md; the bare dggev/dgeev calls are compared in ``benchmarks/bench_constrained.py``).

Sparse path (``num_modes=k``): shift-invert Arnoldi (ARPACK via ``scipy.sparse.linalg.eigs``) on
the first-order pencil with a sparse LU of (A − σE): the operator (A − σE)⁻¹E has eigenvalues
ν = 1/(s − σ), so the k modes nearest to σ (default 0: the lowest) come first and infinite
eigenvalues (ν = 0) never appear — the source's "compute only a subspace" (§5.3). MCS uses the
sparse coordinate-partitioning basis there, UCS filters the penalty modes as above. ARPACK starts
from a fixed-seed vector, so repeated analyses give identical results; the requested modes are
then refined (:func:`~.refinement.refine_quadratic`,
:func:`~.refinement.refine_pencil`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..core.blas import single_blas_thread
from ..core.errors import InputError
from ..linalg.lapack import complex_vectors, generalized_eig
from ..modes import ModeSet, is_real, lowest_modes, modes_from_eigen
from ..core.validation import finite_scalar, frozen, shown
from .equilibrium import Equilibrium
from .linearizations import (METHODS, DescriptorSystem, Penalty, SecondOrderSystem, _dense,
                        _row_norms, mcs_linearization, rcs_linearization, ucs_linearization)
from .pencils import (INFINITE_TOL, index_one_pencil, qz, second_order_pencil, shift_invert, standard_modes,
                      symmetric_modes)
from .refinement import refine_modes, refine_pencil, refine_quadratic

UCS_SPURIOUS_THRESHOLD = 1e-3   # η = ‖Φ̂_q v‖/‖v‖ above this: a penalty (spurious) mode
MAX_DENSE_COORDINATES = 1300    # whole spectrum (dense QZ/QR of order up to 2n): pendulum n_p <= 214,
                                # four-bar N <= 648; larger models: the sparse path (num_modes)
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
    shifted inverse iteration (:func:`~.refinement.refine_quadratic`,
    :func:`~.refinement.refine_pencil`); None: all
    requested modes of the sparse path, "auto" on the dense path (those of the
    AUTO_REFINE_MODES lowest whose residual says so, module docstring); "auto" may be given for
    either path, 0 turns refinement off. See the module docstring for the classification rules. The dense path takes models of at most MAX_DENSE_COORDINATES
    coordinates (``num_modes_field`` names the mode count in that error, e.g. "--modes").
    """
    if method not in METHODS:
        raise InputError(f"method: expected one of {', '.join(METHODS)}, got {shown(method)}")
    if solver not in SOLVERS:
        raise InputError(f"solver: expected one of {', '.join(SOLVERS)}, got {shown(solver)}")
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
                w, x, note = refine_modes(lin, w, x, refine, refine_quadratic)
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


# --- second-order (MCS, UCS) ---------------------------------------------------------------

def _second_order_modes(lin: SecondOrderSystem, solver, num_modes, sigma, refine=0):
    """(eigenvalues, shapes in q (n, ·), diagnostics) of M ẍ + C ẋ + K x = 0."""
    basis = lin.basis
    if num_modes is not None:
        k = lin.M.shape[0]
        E = sp.block_diag([sp.identity(k), sp.csc_matrix(lin.M)], format="csc")
        A = sp.bmat([[None, sp.identity(k)], [-sp.csc_matrix(lin.K), -sp.csc_matrix(lin.C)]],
                     format="csc")
        w, y = shift_invert(A, E, 2 * num_modes + 2, sigma)
        x, diag = y[:k], {"solver": "arpack"}
        if refine:
            w, x, note = refine_modes(lin, w, x, refine, refine_quadratic)
            diag.update(note)
    else:
        M, C, K = (_dense(a) for a in (lin.M, lin.C, lin.K))
        damped = bool(np.any(C))
        symmetric = not damped and np.abs(K - K.T).max() <= 1e-12 * np.abs(K).max()
        if solver == "symmetric" and not symmetric:
            raise InputError("solver: 'symmetric' needs an undamped model with symmetric "
                             "stiffness (C = 0, K = Kᵀ); use 'general'")
        if symmetric and solver != "general":
            w, x = symmetric_modes(M, K)
            diag = {"solver": "eigh (symmetric-definite K x = ω² M x)"}
        else:
            standard = standard_modes(M, C, K)
            if standard is not None:
                (w, x), diag = standard, {"solver": "dgeev (Cholesky standard form of the scaled "
                                                    "first-order pencil)"}
            else:
                A, E, tau = second_order_pencil(M, C, K)
                w, y, infinite, _ = qz(A, E, INFINITE_TOL, keep=slice(0, M.shape[0]))
                if infinite.any():
                    raise InputError("the mass matrix of the linearized model is singular "
                                     f"({int(infinite.sum())} infinite eigenvalues)")
                w, x = w * tau, y
                diag = {"solver": "QZ (scaled first-order pencil)", "time_scale": tau}
        if refine:
            w, x, note = refine_modes(lin, w, x, refine, refine_quadratic)
            diag.update(note)
    shapes = x if basis is None else basis @ x
    return w, np.asarray(shapes), diag


# --- descriptor (RCS) ------------------------------------------------------------------------

def _descriptor_modes(lin: DescriptorSystem, num_modes, sigma, infinite_tol, refine=0):
    n, m, tau = lin.n, lin.m, lin.time_scale
    diag = dict(lin.info)
    if num_modes is not None:
        w, y = shift_invert(lin.A, lin.E, 2 * num_modes + 2, sigma / tau)
        w, x = w * tau, y[:n]
        diag.update({"solver": "arpack", "infinite_eigenvalues": "not computed (ν = 0 under "
                     "shift-invert)"})
        if refine:
            w, x, note = refine_modes(lin, w, x, refine, refine_pencil)
            diag.update(note)
        return (w, x, diag), ([], [])
    A, E, to_q, squared = index_one_pencil(lin)
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
        w, x, note = refine_modes(lin, w, x, refine, refine_pencil)
        diag.update(note)
    spurious = (np.full(len(reasons), np.inf + 0j), reasons)
    return (w, x, diag), spurious


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

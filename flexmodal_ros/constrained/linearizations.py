"""The three linearizations of a constrained system about a static equilibrium (source §3, §5).

* MCS, velocity projection (2)-(6), static form (16): q̇ = R ż with Φ_q R = 0,

      M_r = RᵀMR,  C_r = −Rᵀ f_q̇ R,  K_r = −∂Rᵀ/∂z f − Rᵀ f_q R = Rᵀ K_q R,  F_r = Rᵀ f_u.

  The −∂Rᵀ/∂z f term (f ≠ 0 at a constrained equilibrium) is evaluated exactly through the
  identity ∂(RᵀΦ_qᵀ)/∂z ≡ 0: with f = Φ_qᵀλ, −(∂Rᵀ/∂z_j) f = Rᵀ(Σ_k λ_k ∂²Φ_k/∂q²) R e_j, so
  K_r = Rᵀ K_q R for *any* R spanning the null space of Φ_q (notes_001 §1.1). R is either an
  orthonormal null-space basis (QR of Φ_qᵀ, best conditioned) or coordinate partitioning
  (R = [I; −Φ_d⁻¹Φ_i], sparse; the paper's choice of φ for the four-bar). Where Φ_q loses rank
  (singular configuration) the null space grows: the independent coordinates are re-selected
  (``reselect=True``, more DOF than nominal) or :class:`SingularConfigurationError` is raised.
* RCS, descriptor form (8)-(9), static terms (17): y = [q; q̇; λ],

      E = blkdiag(I, M, 0),  A = [[0, I, 0], [−K_q, −C_q, −Φ_qᵀ], [−Φ_q, 0, 0]],  B = [0; f_u; 0],
      K_q = Σ_k λ_k ∂²Φ_k/∂q² − f_q,  C_q = −f_q̇.

  For conditioning the pencil is scaled (``scale=True``): time by ω_ref = √(‖K_q‖/‖M‖)
  (eigenvalue ŝ = s/ω_ref, velocity v̂ = q̇/ω_ref), the dynamic rows by 1/‖K_q‖, each constraint
  row by 1/‖Φ_q,k‖ and each multiplier column by ‖K_q‖/‖Φ_q,k‖, so that every block is O(1).
  Rank-deficient Φ_q is compressed to its row space (Σ_r V_rᵀ, same null space and reaction
  space) so the pencil stays regular. The scaled blocks are kept; E, A, B are assembled only when
  asked for (the dense eigensolver works on the blocks, see
  :func:`flexmodal_ros.constrained.pencils.index_one_pencil`).
* UCS, penalty (11)-(14), static form (18), Ξ = αI, Θ = 2ξωI, Ω = ω²I (m × m) at the *shifted*
  penalty equilibrium q_p (f = Φ_qᵀαω²Φ there):

      M_p = M + αΦ_qᵀΦ_q,  C_p = 2αξω Φ_qᵀΦ_q − f_q̇,
      K_p = Σ_k (αω²Φ_k) ∂²Φ_k/∂q² + αω² Φ_qᵀΦ_q − f_q,  F_p = f_u.

Every derivative comes from the system (exact AD or analytic), never from finite differences.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..core.errors import InputError
from ..core.validation import positive, shown
from .equilibrium import RANK_RTOL, Equilibrium, penalty_equilibrium

METHODS = ("mcs", "rcs", "ucs")
PARTITION_RTOL = 1e-8   # |R_rr/R_11| of the pivoted QR below this: the chosen Φ_d is singular


class SingularConfigurationError(InputError):
    """MCS with fixed independent coordinates at a configuration where they stop being valid."""


@dataclass(frozen=True)
class Penalty:
    """Penalty parameters of UCS: Ξ = αI [kg], Θ = 2ξωI, Ω = ω²I [rad/s] (source §5)."""

    alpha: float = 1e6
    xi: float = 1.0
    omega: float = 10.0

    def __post_init__(self):
        positive(self.alpha, "penalty.alpha")
        positive(self.omega, "penalty.omega")
        if not np.isfinite(self.xi) or self.xi < 0:
            raise InputError(f"penalty.xi: must be a finite number >= 0, got {self.xi}")


@dataclass(frozen=True)
class SecondOrderSystem:
    """M δẍ + C δẋ + K δx = F δu about ``q`` with δq = ``basis`` δx (``basis`` None: δx = δq).

    MCS: x = z (independent velocities), basis R (n, n − r); UCS: x = q. ``full_space`` the
    (M, C, K) the reduced matrices were projected from (MCS: M, −f_q̇, K_q; UCS: these matrices),
    used to evaluate Rayleigh quotients without the round-off of the projection. ``info`` holds
    method-specific facts (basis kind, independent coordinates, re-selection, penalty).
    """

    method: str
    M: object
    C: object
    K: object
    F: object
    q: np.ndarray
    basis: object = None
    full_space: tuple = ()
    info: dict = field(default_factory=dict)

    def state_space(self):
        """First-order (A, B): ẋ_s = A x_s + B u with x_s = [δx; δẋ] (dense)."""
        M, C, K, F = (_dense(a) for a in (self.M, self.C, self.K, self.F))
        k = M.shape[0]
        rhs = np.linalg.solve(M, np.hstack([K, C, F]))
        A = np.zeros((2 * k, 2 * k))
        A[:k, k:] = np.eye(k)
        A[k:, :] = -rhs[:, :2 * k]
        return A, np.vstack([np.zeros((k, F.shape[1])), rhs[:, 2 * k:]])


@dataclass(frozen=True)
class DescriptorSystem:
    """RCS descriptor form E ẏ = A y + B u (8)-(9), y = [δq; δq̇/ω_ref; δλ̂] (scaled, see module
    docstring); eigenvalues of (A, E) are s/``time_scale``. ``n`` coordinates, ``m`` rows of the
    (row-space-compressed) constraints; ``q`` the equilibrium; ``scaled`` the scaled blocks
    (M̂, Ĉ, K̂, Φ̂, F̂) the pencil is made of, E = blkdiag(I, M̂, 0),
    A = [[0, I, 0], [−K̂, −Ĉ, −Φ̂ᵀ], [−Φ̂, 0, 0]], B = [0; F̂; 0] — assembled on first use
    (``sparse``: as CSC matrices), the dense eigensolver works on the blocks directly;
    ``second_order`` the unscaled blocks (M, C_q, K_q, Φ_q) (for Rayleigh quotients); ``info``
    scaling and rank facts."""

    scaled: tuple
    n: int
    m: int
    q: np.ndarray
    time_scale: float
    second_order: tuple = ()
    info: dict = field(default_factory=dict)
    sparse: bool = False

    @cached_property
    def E(self):
        M, n, m = self.scaled[0], self.n, self.m
        if self.sparse:
            return sp.block_diag([sp.identity(n), sp.csc_matrix(M), sp.csc_matrix((m, m))],
                                 format="csc")
        E = np.zeros((2 * n + m, 2 * n + m))
        E[:n, :n] = np.eye(n)
        E[n:2 * n, n:2 * n] = _dense(M)
        return E

    @cached_property
    def A(self):
        _, C, K, phi, _ = self.scaled
        n, m = self.n, self.m
        if self.sparse:
            phi = sp.csc_matrix(phi)
            return sp.bmat([[None, sp.identity(n), None], [-sp.csc_matrix(K), -sp.csc_matrix(C), -phi.T],
                            [-phi, None, sp.csc_matrix((m, m))]], format="csc")
        A = np.zeros((2 * n + m, 2 * n + m))
        A[:n, n:2 * n] = np.eye(n)
        A[n:2 * n, :n], A[n:2 * n, n:2 * n] = -_dense(K), -_dense(C)
        A[n:2 * n, 2 * n:] = -_dense(phi).T
        A[2 * n:, :n] = -_dense(phi)
        return A

    @cached_property
    def B(self):
        F, n, m = self.scaled[4], self.n, self.m
        if self.sparse:
            return sp.vstack([sp.csc_matrix((n, F.shape[1])), sp.csc_matrix(F),
                              sp.csc_matrix((m, F.shape[1]))], format="csc")
        B = np.zeros((2 * n + m, F.shape[1]))
        B[n:2 * n] = _dense(F)
        return B


def _dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def _norm(a) -> float:
    """Largest absolute entry (cheap for dense and sparse)."""
    a = abs(a)
    return float(a.max()) if a.shape[0] * a.shape[1] else 0.0


def _terms_at(system, eq: Equilibrium, sparse, data, q=None, lam=None):
    """Terms at the equilibrium (or at ``q`` with ``lam``); sparse for sparse models even on the
    dense path, so that products such as RᵀKR stay cheap (the dense solvers densify at the end)."""
    q = eq.q if q is None else q
    lam = eq.multipliers if lam is None else lam
    return system.terms(q, eq.u, lam, eq.t, sparse=sparse or system.sparse_native, data=data)


def _stiffness(terms):
    """K_q = Σ λ_k ∂²Φ_k/∂q² − ∂f/∂q (17)."""
    return terms.hessian - terms.f_q


# --- MCS -------------------------------------------------------------------------------------

def mcs_linearization(system, eq: Equilibrium, basis="auto", independent=None, reselect=True,
                      sparse=False, data=None) -> SecondOrderSystem:
    """MCS (16) about ``eq``. ``basis``: "orthonormal" (QR null space), "partition" (coordinate
    partitioning, independent coordinates ``independent`` or the system's preferred ones, else
    chosen by column-pivoted QR) or "auto" (partition when independent coordinates are preferred
    or for sparse models — it keeps K_r = RᵀK_qR sparse and its entries free of the cancellation
    an orthonormal basis brings into stiff FE models —, orthonormal otherwise). Raises
    :class:`SingularConfigurationError` at a singular configuration when ``reselect`` is False
    and the given coordinates are invalid."""
    if basis not in ("auto", "orthonormal", "partition"):
        raise InputError(f"basis: expected auto, orthonormal or partition, got {shown(basis)}")
    preferred = tuple(system.independent if independent is None else independent)
    for name in preferred:
        system.index(name)
    if basis == "auto":
        basis = "partition" if preferred or sparse or system.sparse_native else "orthonormal"
    terms = _terms_at(system, eq, sparse, data)
    if basis == "orthonormal":
        R, info = _orthonormal_basis(_dense(terms.phi_q)), {"basis": "orthonormal"}
    else:
        R, info = _partition_basis(system, terms.phi_q, eq, preferred, reselect,
                                   sparse or system.sparse_native)
    Rt = R.T
    full = (terms.M, -terms.f_qd, _stiffness(terms))
    out = [Rt @ X @ R for X in full]
    info["dof"] = R.shape[1]
    return SecondOrderSystem("mcs", *out, Rt @ terms.f_u, eq.q, R, full, info)


def _orthonormal_basis(phi_q):
    """Orthonormal basis of the null space of Φ_q (rank-revealing pivoted QR of Φ_qᵀ)."""
    n = phi_q.shape[1]
    if phi_q.shape[0] == 0:
        return np.eye(n)
    Q, Rq, _ = sla.qr(phi_q.T, pivoting=True)
    diag = np.abs(np.diag(Rq))
    rank = int(np.sum(diag > RANK_RTOL * diag[0])) if diag.size and diag[0] > 0 else 0
    return Q[:, rank:]


def _row_space(phi_q, rank):
    """Φ_q itself when of full row rank, else an r×n matrix with the same null space (Σ_r V_rᵀ)."""
    if rank == phi_q.shape[0]:
        return phi_q
    _, s, vt = np.linalg.svd(_dense(phi_q), full_matrices=False)
    return s[:rank, None] * vt[:rank]


def _pivoted_columns(block, rank):
    """First ``rank`` pivots of a column-pivoted QR of ``block`` and whether they are independent."""
    if rank == 0:
        return np.zeros(0, int), True
    qr, piv, _, _, info = sla.lapack.dgeqp3(block)   # LAPACK directly: this is the MCS hot path
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dgeqp3 failed, info = {info}")
    diag = np.abs(np.diagonal(qr))
    ok = diag.size >= rank and diag[0] > 0 and diag[rank - 1] > PARTITION_RTOL * diag[0]
    return piv[:rank] - 1, ok


def _partition_basis(system, phi_q, eq, preferred, reselect, sparse):
    """Coordinate-partitioning R = [I; −Φ_d⁻¹ Φ_i] (rows permuted back), with facts in ``info``."""
    n, rank = system.n, eq.constraint_rank
    phi = _row_space(phi_q, rank)
    dense_phi = _dense(phi)
    names = system.coordinate_names
    is_candidate = np.ones(n, bool)
    is_candidate[[system.index(p) for p in preferred]] = False
    candidates = np.flatnonzero(is_candidate)
    dep, ok = _pivoted_columns(dense_phi[:, candidates], rank)
    dep = candidates[dep]
    info = {"basis": "partition"}
    nominal = n - system.m
    if preferred and (not ok or len(preferred) != n - rank):
        why = (f"Φ_q has rank {rank} < m = {system.m}, {n - rank} independent velocities are "
               f"needed" if rank < system.m else "the dependent block Φ_d is singular")
        if not reselect:
            raise SingularConfigurationError(
                f"{system.name}: MCS singular configuration at the equilibrium — the independent "
                f"coordinates {list(preferred)} no longer define the motion ({why}); use "
                f"reselect=True, or the RCS/UCS method")
        if not ok:  # the preferred coordinates cannot all stay independent
            dep, ok = _pivoted_columns(dense_phi, rank)
        info["reselected"] = f"independent coordinates re-selected ({why})"
    elif not ok:
        dep, ok = _pivoted_columns(dense_phi, rank)
    if not ok:
        raise SingularConfigurationError(f"{system.name}: no set of {rank} dependent coordinates "
                                         f"with a regular Φ_d at the equilibrium")
    is_indep = np.ones(n, bool)
    is_indep[dep] = False
    indep = np.flatnonzero(is_indep)
    info["independent"] = [names[i] for i in indep]
    info["nominal_dof"] = nominal
    if sparse:
        phi_c = sp.csc_matrix(phi)
        lu = sp.linalg.splu(sp.csc_matrix(phi_c[:, dep]))
        dz = -lu.solve(phi_c[:, indep].toarray())
        R = sp.lil_matrix((n, indep.size))
        R[indep, np.arange(indep.size)] = 1.0
        R[dep, :] = dz
        return sp.csc_matrix(R), info
    R = np.zeros((n, indep.size))
    R[indep, np.arange(indep.size)] = 1.0
    R[dep, :] = -np.linalg.solve(dense_phi[:, dep], dense_phi[:, indep])
    return R, info


# --- RCS -------------------------------------------------------------------------------------

def rcs_linearization(system, eq: Equilibrium, scale=True, sparse=False, data=None) -> DescriptorSystem:
    """RCS descriptor pair (E, A) and B of (8)-(9), (17) about ``eq`` (scaled, see module doc)."""
    terms = _terms_at(system, eq, sparse, data)
    phi_q = _row_space(terms.phi_q, eq.constraint_rank)
    m = phi_q.shape[0]
    M, K, C, F = terms.M, _stiffness(terms), -terms.f_qd, terms.f_u
    unscaled = (M, C, K, phi_q)
    k_norm, m_norm = _norm(K), _norm(M)
    if scale and k_norm > 0 and m_norm > 0:
        time_scale = float(np.sqrt(k_norm / m_norm))
        row = 1.0 / np.maximum(_row_norms(phi_q), np.finfo(float).tiny)
        M, C, K, F = M / m_norm, C * (time_scale / k_norm), K / k_norm, F / k_norm
    else:
        time_scale, row = 1.0, np.ones(m)
    phi_s = (sp.diags(row) @ phi_q) if sp.issparse(phi_q) else row[:, None] * phi_q
    info = {"scaled": bool(scale), "time_scale": time_scale, "constraint_rows": m,
            "constraint_rank": eq.constraint_rank}
    if m < system.m:
        info["compressed"] = (f"Φ_q of rank {m} < {system.m}: constraint rows compressed to their "
                              f"row space so that the pencil stays regular")
    return DescriptorSystem((M, C, K, phi_s, F), system.n, m, eq.q, time_scale, unscaled, info,
                            bool(sparse))


def _row_norms(a):
    if sp.issparse(a):
        return np.sqrt(np.asarray(a.multiply(a).sum(axis=1)).ravel())
    return np.linalg.norm(a, axis=1)


# --- UCS -------------------------------------------------------------------------------------

def ucs_linearization(system, eq: Equilibrium, penalty: Penalty = Penalty(), sparse=False,
                      data=None, q_penalty=None) -> SecondOrderSystem:
    """UCS (18) about the penalty equilibrium (solved from ``eq`` unless ``q_penalty`` is given)."""
    alpha, xi, omega = penalty.alpha, penalty.xi, penalty.omega
    q_p = penalty_equilibrium(system, eq, alpha, omega, data) if q_penalty is None else q_penalty
    k = alpha * omega ** 2
    lam_p = k * system.constraints(q_p, eq.t, data)
    terms = _terms_at(system, eq, sparse, data, q=q_p, lam=lam_p)
    gram = terms.phi_q.T @ terms.phi_q
    M = terms.M + alpha * gram
    C = (2.0 * alpha * xi * omega) * gram - terms.f_qd
    K = terms.hessian + k * gram - terms.f_q
    info = {"alpha": alpha, "xi": xi, "omega": omega, "multipliers": lam_p,
            "constraint_violation": float(np.linalg.norm(terms.phi)), "phi_q": terms.phi_q}
    return SecondOrderSystem("ucs", M, C, K, terms.f_u, np.asarray(q_p), None, (M, C, K), info)

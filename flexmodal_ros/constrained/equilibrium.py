"""Static equilibrium of a constrained system: f(q, 0, u) = Φ_qᵀ λ, Φ(q, t) = 0 (source (1), (7)).

:func:`static_equilibrium` returns q and the multipliers λ (needed by RCS (17) and MCS (16)).
It works in two phases: the guess is first projected onto the constraint manifold by
Gauss–Newton with minimum-norm steps (a guess that cannot be projected means the constraints are
*inconsistent*), then Newton's method is applied to the KKT system

    [K_q  Φ_qᵀ] [Δq]   [f − Φ_qᵀλ]
    [Φ_q   0  ] [Δλ] = [   −Φ    ],      K_q = Σ_k λ_k ∂²Φ_k/∂q² − ∂f/∂q  (17),

with least-squares (minimum-norm) steps so that it also converges where Φ_q loses rank. At the
solution the rank of Φ_q is found from its singular values. Rank deficiency is then classified:

* *redundant constraints* — Φ_q is also rank-deficient at neighbouring points of the constraint
  manifold (a step along the null space of Φ_q, projected back): an error naming the dependent
  constraints (the linearizations assume independent constraints, as the source does);
* *singular configuration* — the rank is full nearby (e.g. the four-bar at φ = 0, source §5.1):
  λ is not unique, the minimum-norm λ = pinv(Φ_qᵀ) f is returned (the source's pseudo-inverse,
  also the multiplier the penalty method converges to) and ``notes`` says so.

:func:`penalty_equilibrium` solves the shifted equilibrium of the penalty formulation (12):
f = Φ_qᵀ α ω² Φ(q) (Φ ≠ 0 there; source §3.3).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..core.errors import InputError
from ..core.validation import frozen

RANK_RTOL = 1e-8          # σ_i ≤ RANK_RTOL·σ_max counts as a lost rank of Φ_q
NEWTON_TOL = 1e-12        # relative tolerance on the scaled KKT residual
MAX_ITERATIONS = 60
STEP_RTOL = 1e-13         # a Newton step this small (relative to ‖q‖) ends the iteration
ACCEPT_TOL = 1e-8         # ... and the point is accepted if the scaled residual is below this


class ConstraintError(InputError):
    """Inconsistent or redundant constraints, or no equilibrium found."""


@dataclass(frozen=True)
class Equilibrium:
    """A static equilibrium. ``q`` (n,) coordinates; ``multipliers`` λ (m,) (constraint
    reactions f_c = −Φ_qᵀλ); ``u`` inputs (p,); ``t`` time [s]; ``constraint_rank`` rank of Φ_q;
    ``singular_values`` of Φ_q (descending); ``force_residual`` ‖f − Φ_qᵀλ‖ and
    ``constraint_residual`` ‖Φ‖ at the solution; ``iterations`` Newton iterations; ``notes``
    human-readable remarks (e.g. the pseudo-inverse λ at a singular configuration)."""

    q: np.ndarray
    multipliers: np.ndarray
    u: np.ndarray
    t: float
    constraint_rank: int
    singular_values: np.ndarray
    force_residual: float
    constraint_residual: float
    iterations: int
    notes: tuple = ()

    @property
    def rank_deficient(self) -> bool:
        return self.constraint_rank < self.multipliers.size


def _dense(a):
    return a.toarray() if hasattr(a, "toarray") else np.asarray(a)


def _solve(matrix, rhs):
    """LU solve (sparse LU for sparse matrices); least squares (minimum norm) when the matrix is
    singular, i.e. LU fails or its solution does not solve the system (singular configurations).
    An ill-conditioned but regular matrix (stiff FE models) keeps the LU solution."""
    try:
        if sp.issparse(matrix):
            x = spla.splu(sp.csc_matrix(matrix)).solve(rhs)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sla.LinAlgWarning)
                x = sla.solve(matrix, rhs, check_finite=False)
        if np.all(np.isfinite(x)) and (np.linalg.norm(matrix @ x - rhs)
                                       <= 1e-8 * (np.linalg.norm(rhs) + 1e-300)):
            return x
    except (RuntimeError, np.linalg.LinAlgError, ValueError):
        pass
    return sla.lstsq(_dense(matrix), rhs, lapack_driver="gelsd")[0]


def _kkt(K, phi_q):
    """[[K, Φ_qᵀ], [Φ_q, 0]] (sparse if K is)."""
    if sp.issparse(K):
        return sp.bmat([[K, sp.csc_matrix(phi_q).T], [sp.csc_matrix(phi_q), None]], format="csc")
    return np.block([[K, phi_q.T], [phi_q, np.zeros((phi_q.shape[0], phi_q.shape[0]))]])


def _rank(phi_q):
    """(rank, singular values) of Φ_q with the relative tolerance RANK_RTOL."""
    if phi_q.shape[0] == 0:
        return 0, np.zeros(0)
    sv = sla.svdvals(phi_q)
    return int(np.sum(sv > RANK_RTOL * sv[0])) if sv[0] > 0 else 0, sv


def _check_finite(values, what, system):
    if not np.all(np.isfinite(values)):
        raise ConstraintError(f"{system.name}: {what} is NaN or inf at the current point "
                              f"(check the model parameters and the initial guess)")


def project_onto_constraints(system, q, t=0.0, data=None, max_iterations=MAX_ITERATIONS):
    """Nearest-by-Newton point with Φ(q, t) = 0: Gauss–Newton with minimum-norm steps.

    Raises :class:`ConstraintError` naming the most violated constraint when ‖Φ‖ cannot be
    brought to zero (inconsistent constraints).
    """
    q = np.array(q, dtype=float)
    scale = 1.0 + np.linalg.norm(q)
    for _ in range(max_iterations):
        phi = system.constraints(q, t, data)
        _check_finite(phi, "Φ(q)", system)
        if np.linalg.norm(phi) <= NEWTON_TOL * scale:
            return q
        step = sla.lstsq(system.constraint_jacobian(q, t, data), -phi, lapack_driver="gelsd")[0]
        _check_finite(step, "the constraint Jacobian Φ_q", system)
        q = q + step
        if np.linalg.norm(step) <= 1e-15 * scale:
            break
    phi = system.constraints(q, t, data)
    if np.linalg.norm(phi) <= 1e-9 * scale:
        return q
    worst = int(np.argmax(np.abs(phi)))
    raise ConstraintError(
        f"{system.name}: inconsistent constraints — Φ(q) = 0 has no solution near the guess "
        f"(‖Φ‖ stalls at {np.linalg.norm(phi):.3g}; largest violation {phi[worst]:.3g} in "
        f"constraint '{system.constraint_names[worst]}')")


def static_equilibrium(system, q_guess, u=None, t=0.0, data=None, check_redundancy=True,
                       max_iterations=MAX_ITERATIONS) -> Equilibrium:
    """Static equilibrium (q̇ = q̈ = 0) near ``q_guess`` with inputs ``u`` held at time ``t``.

    Returns an :class:`Equilibrium` with q and λ (min-norm λ where Φ_q loses rank, see module
    docstring). Errors (:class:`ConstraintError`): inconsistent constraints, redundant
    constraints, no convergence; NaN/inf inputs raise :class:`~flexmodal_ros.core.errors.InputError`.
    """
    q0, _, u, t = system.check_point(q_guess, None, u, t)
    data = system.create_data() if data is None else data
    q = project_onto_constraints(system, q0, t, data, max_iterations)
    n, m = system.n, system.m
    terms = system.terms(q, u, np.zeros(m), t, data=data)
    _check_finite(terms.f, "f(q, 0, u)", system)
    lam = sla.lstsq(_dense(terms.phi_q).T, terms.f, lapack_driver="gelsd")[0] if m else np.zeros(0)
    force_scale = 1.0 + np.linalg.norm(terms.f)
    length_scale = 1.0 + np.linalg.norm(q)
    iterations, converged = 0, False

    def small(r_force, phi, tol):
        return (np.linalg.norm(r_force) <= tol * force_scale
                and np.linalg.norm(phi) <= tol * length_scale)

    for iterations in range(1, max_iterations + 1):
        terms = system.terms(q, u, lam, t, sparse=system.sparse_native, data=data)
        phi_q = _dense(terms.phi_q)
        r_force = terms.f - phi_q.T @ lam
        _check_finite(r_force, "the force balance f − Φ_qᵀλ", system)
        if small(r_force, terms.phi, NEWTON_TOL):
            converged = True
            break
        step = _solve(_kkt(terms.hessian - terms.f_q, phi_q),
                      np.concatenate([r_force, -terms.phi]))
        _check_finite(step, "the Newton step", system)
        q, lam = q + step[:n], lam + step[n:]
        if np.linalg.norm(step[:n]) <= STEP_RTOL * length_scale and iterations > 1:
            terms = system.terms(q, u, lam, t, data=data)
            phi_q, r_force = _dense(terms.phi_q), terms.f - _dense(terms.phi_q).T @ lam
            # stalled: converged to the round-off floor of the residual, or no equilibrium
            converged = small(r_force, terms.phi, ACCEPT_TOL)
            break
    if not converged:
        raise ConstraintError(
            f"{system.name}: no static equilibrium found from the guess in {max_iterations} "
            f"Newton iterations (‖f − Φ_qᵀλ‖ = {np.linalg.norm(r_force):.3g}, "
            f"‖Φ‖ = {np.linalg.norm(terms.phi):.3g}); try another initial guess")
    rank, sv = _rank(phi_q)
    notes = []
    if rank < m:
        if check_redundancy:
            _reject_redundant(system, q, t, rank, data)
        lam = np.linalg.pinv(phi_q.T, rcond=RANK_RTOL) @ terms.f
        notes.append(f"singular configuration: Φ_q has rank {rank} < m = {m} (σ_min/σ_max = "
                     f"{sv[-1] / sv[0]:.2e}); λ is not unique, the minimum-norm (pseudo-inverse) "
                     f"λ is used")
    r_force = terms.f - phi_q.T @ lam
    return Equilibrium(frozen(q), frozen(lam), frozen(u), float(t), rank, frozen(sv),
                       float(np.linalg.norm(r_force)), float(np.linalg.norm(terms.phi)),
                       iterations, tuple(notes))


def _reject_redundant(system, q, t, rank, data):
    """Raise if Φ_q stays rank-deficient at a neighbouring point of the constraint manifold."""
    phi_q = system.constraint_jacobian(q, t, data)
    null = sla.null_space(phi_q, rcond=RANK_RTOL)
    rng = np.random.default_rng(0)
    step = null @ rng.standard_normal(null.shape[1])
    step *= 1e-3 * (1.0 + np.linalg.norm(q)) / np.linalg.norm(step)
    try:
        nearby = project_onto_constraints(system, q + step, t, data)
    except ConstraintError:
        return
    near_rank, _ = _rank(system.constraint_jacobian(nearby, t, data))
    if near_rank < system.m:
        dependent = _dependent_rows(system.constraint_jacobian(nearby, t, data), near_rank)
        raise ConstraintError(
            f"{system.name}: redundant constraints — Φ_q has rank {near_rank} < m = {system.m} "
            f"on a neighbourhood of the constraint manifold, not only at this configuration; "
            f"dependent constraint(s): {', '.join(system.constraint_names[i] for i in dependent)}")


def _dependent_rows(phi_q, rank):
    """Indices of rows of Φ_q that depend on the others (last pivots of a pivoted QR of Φ_qᵀ)."""
    _, _, piv = sla.qr(phi_q.T, mode="economic", pivoting=True)
    return sorted(piv[rank:])


def penalty_equilibrium(system, equilibrium: Equilibrium, alpha, omega, data=None,
                        max_iterations=MAX_ITERATIONS) -> np.ndarray:
    """Equilibrium of the penalty formulation (12) at rest: f(q, 0, u) = Φ_qᵀ α ω² Φ(q).

    Newton from the constrained equilibrium shifted by the min-norm solution of
    Φ_q δq = λ/(αω²) (so that αω²Φ ≈ λ). ``alpha`` [penalty factor, units of mass] and
    ``omega`` [rad/s] as in Ξ = αI, Ω = ω²I. Returns q_p (n,).
    """
    eq = equilibrium
    data = system.create_data() if data is None else data
    k = alpha * omega ** 2
    phi_q = system.constraint_jacobian(eq.q, eq.t, data)
    q = eq.q + (np.linalg.pinv(phi_q, rcond=RANK_RTOL) @ (eq.multipliers / k) if system.m else 0.0)
    scale = None
    for _ in range(max_iterations):
        terms = system.terms(q, eq.u, k * system.constraints(q, eq.t, data), eq.t,
                             sparse=system.sparse_native, data=data)
        phi_q = _dense(terms.phi_q)
        residual = terms.f - k * phi_q.T @ terms.phi
        _check_finite(residual, "the penalty force balance", system)
        scale = scale or 1.0 + np.linalg.norm(terms.f)
        if np.linalg.norm(residual) <= NEWTON_TOL * scale:
            return q
        gram = terms.phi_q.T @ terms.phi_q  # sparse for sparse models
        step = _solve(terms.hessian + k * gram - terms.f_q, residual)
        q = q + step
        if np.linalg.norm(step) <= STEP_RTOL * (1.0 + np.linalg.norm(q)):
            return q  # the residual is at its round-off floor (≈ ε·αω²·‖Φ_q‖·‖q‖)
    raise ConstraintError(f"{system.name}: the penalty equilibrium (α = {alpha:g}, ω = {omega:g}) "
                          f"did not converge (‖f − Φ_qᵀαω²Φ‖ = {np.linalg.norm(residual):.3g})")

"""A few modes of the flexible-joint closed loop at many configurations, continued from nearby
known ones, and a stability certificate that needs no eigenvalues (thesis ch. 2).

The eigenpairs (λ, u = [u_q; u_m]) of the linearized closed loop solve the quadratic eigenproblem
(λ² M̄ + λ D̄ + K̄) u = 0 with the matrices (2.9)-(2.11). Their motor blocks are diagonal, so the
motor rows give u_m = K W u_q / t(λ) with t(λ) = λ² B + λ (D_m + K_D) + K + K_P (per joint), and
the link rows the n×n rational eigenproblem

    T(λ) u_q = 0,   T(λ) = λ² M + λ D + K_G + K W² − diag((K W)² / t(λ)).

:func:`continue_modes` solves it by Newton's method on (λ, u_q) with the normalization cᴴu_q = 1
(c the starting vector): x = T(λ)⁻¹ T'(λ) u_q, λ ← λ − 1 / cᴴx, u_q ← x / cᴴx, every configuration
and mode in one batched LAPACK solve per step (n×n instead of the 4n×4n state matrix (2.14)).
From an eigenvalue interpolated between configurations a few samples apart and a neighbour's
mode shape it converges quadratically to the eigenvalue of the same matrices that ``eig``
computes, to round-off, at a fraction of a full eigen-decomposition when only a few modes are
wanted (``benchmarks/bench_shaping.py`` prints both).

:func:`certified_stable`: with M̄ > 0, D̄ ≥ 0 and K̄ symmetric, every eigenvalue has Re λ ≤ 0 if
K̄ > 0, and Re λ > 0 for some eigenvalue if K̄ has a negative eigenvalue (Thomson–Tait–Chetaev). An
eigenvalue on the imaginary axis needs D̄u = 0; when D_m + K_D > 0 at every joint that means
u_m = 0, and then the motor rows give K W u_q = 0, u = 0. So, without an external wrench (whose
stiffness (2.12) is not symmetric), the closed loop is asymptotically stable exactly where
K̄ > 0, i.e. where its Schur complement K_G + diag(K W² K_P / (K + K_P)) is positive definite.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

CONVERGED_STEP = 1e-8        # relative Newton step after which the error is of its square, round-off
MAX_ITERATIONS = 8
CERTIFICATE_MARGIN = 1e-9    # smallest eigenvalue of the Schur complement, relative to its largest


class ContinuedModes(NamedTuple):
    """``eigenvalues`` (m, k) [rad/s]; ``converged`` (m, k) whether a Newton step fell below
    ``CONVERGED_STEP`` relative within ``MAX_ITERATIONS`` (False: the value is not to be used;
    e.g. a start between two nearly equal eigenvalues); ``iterations`` the most steps taken."""
    eigenvalues: np.ndarray
    converged: np.ndarray
    iterations: int


def certificate_applies(model) -> bool:
    """Whether :func:`certified_stable` decides stability for ``model`` (no external wrench and
    D_m + K_D > 0 at every joint; module docstring)."""
    return not model.wrench.any() and bool(np.all(model.d_fm + model.kd > 0))


def certified_stable(model, KG) -> np.ndarray:
    """(m,) True where the closed loop with load stiffness ``KG`` (m, n, n) (2.12) is
    asymptotically stable by the K̄ > 0 certificate (module docstring), False where K̄ is not
    positive definite with a margin of ``CERTIFICATE_MARGIN`` (unstable, marginal, or too close
    to tell: decide with the eigenvalues). ValueError when the certificate does not apply."""
    if not certificate_applies(model):
        raise ValueError("stability certificate: needs no external wrench and D_m + K_D > 0 at every joint")
    kw = model.k * model.W
    schur = np.array(KG, float)
    idx = np.arange(model.n)
    schur[:, idx, idx] += kw * model.W * model.kp / (model.k + model.kp)
    values = np.linalg.eigvalsh(schur)
    return values[:, 0] > CERTIFICATE_MARGIN * np.abs(values).max(axis=1)


def continue_modes(model, M, KG, eigenvalues, link_shapes) -> ContinuedModes:
    """Newton's method (module docstring) for k modes at m configurations from the mass matrices
    ``M`` (m, n, n) and load stiffnesses ``KG`` (m, n, n) (2.12); starting values ``eigenvalues``
    (m, k) [rad/s] and ``link_shapes`` (m, n, k) (the u_q part of a nearby configuration's mode
    shapes). Each mode iterates until its step is below ``CONVERGED_STEP`` relative (then stops) or
    ``MAX_ITERATIONS``."""
    m, n, k = np.shape(link_shapes)
    lam = np.array(eigenvalues, complex).reshape(m * k)
    u = np.ascontiguousarray(np.transpose(link_shapes, (0, 2, 1))).reshape(m * k, n).astype(complex)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    c = u.conj()
    M, KG = np.repeat(np.asarray(M, float), k, axis=0), np.repeat(np.asarray(KG, float), k, axis=0)
    converged = np.zeros(m * k, bool)
    active = np.flatnonzero(np.isfinite(lam) & np.isfinite(u).all(axis=1))      # still iterating
    iterations = 0
    while active.size and iterations < MAX_ITERATIONS:
        T, dT = link_matrices(model, M[active], KG[active], lam[active])
        try:
            x = np.linalg.solve(T, np.matmul(dT, u[active, :, None]))[:, :, 0]
        except np.linalg.LinAlgError:       # an iterate exactly at an eigenvalue or a pole: no verdict
            break
        with np.errstate(divide="ignore", invalid="ignore"):     # cx = 0: dropped below, not converged
            cx = np.einsum("bi,bi->b", c[active], x)
            step = -1.0 / cx
            lam[active] += step
            u[active] = x / cx[:, None]
        done = np.abs(step) <= CONVERGED_STEP * np.abs(lam[active])
        converged[active[done]] = True
        active = active[~done & np.isfinite(lam[active])]
        iterations += 1
    return ContinuedModes(lam.reshape(m, k), converged.reshape(m, k), iterations)


def link_matrices(model, M, KG, lam):
    """T(λ) and dT/dλ (module docstring), each (b, n, n) complex, for b eigenvalue values ``lam``
    (b,) [rad/s] with their mass matrices ``M`` and load stiffnesses ``KG`` (b, n, n)."""
    lam = np.asarray(lam, complex)
    idx, kw2 = np.arange(model.n), (model.k * model.W) ** 2
    motor_damping = model.d_fm + model.kd
    t = (lam[:, None] * model.B + motor_damping) * lam[:, None] + model.k + model.kp      # t(λ) (b, n)
    dt = 2.0 * lam[:, None] * model.B + motor_damping
    T = (lam * lam)[:, None, None] * M + KG
    T[:, idx, idx] += model.k * model.W ** 2 + lam[:, None] * model.d_f - kw2 / t
    dT = (2.0 * lam)[:, None, None] * M
    dT[:, idx, idx] += model.d_f + kw2 * dt / (t * t)
    return T, dT

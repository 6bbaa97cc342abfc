"""Right and left eigenpairs of a linearized second-order system (paper eqs. (12)-(18)).

Quadratic eigenproblem (λ²M̄ + λC̄ + K̄)φ = 0, ψ*(λ²M̄ + λC̄ + K̄) = 0 (12)-(13), solved through
the first-order form (16) A w = λ B w, z*A = λ z*B with B = [[C̄, M̄], [N, 0]],
A = [[−K̄, 0], [0, N]], N = M̄; then w = [φ; λφ], z = [ψ; λ*ψ] (17). Eigenvectors are
biorthonormalized (18): z_i* B w_j = δ_ij, z_i* A w_j = λ_i δ_ij, which for the quadratic
problem reads ψ_i*(2λ_i M̄ + C̄)φ_i = 1 (the text prints w_i* B z_i = 1; notes_000 §2). φ is
scaled to unit norm with its largest component real and positive (the
:class:`~flexmodal_ros.modes.modeset.ModeSet` convention); ψ carries the scale of (18).

With N = M̄ invertible, B is invertible (B⁻¹ = [[0, M̄⁻¹], [M̄⁻¹, −M̄⁻¹C̄M̄⁻¹]]) and (16) is solved
as B⁻¹A w = λ w, whose matrix is the state matrix [[0, I], [−M̄⁻¹K̄, −M̄⁻¹C̄]]: one batched LAPACK
``eig`` for many points, which balances the matrix (flexible-link models mix metres and radians,
axial and bending stiffnesses, over many decades). The left vectors are the dual basis of the
right ones, z_i* = ((V⁻¹) B⁻¹)_i, so Z*BW = I holds to round-off over the whole spectrum; the
eigenvalues are refined with the two-sided Rayleigh quotient of the quadratic problem
(:func:`refine`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..flexible_joint.linear_model import state_matrix
from ..modes import ModeSet, is_real, modes_from_eigenpairs, normalize_shapes


@dataclass(frozen=True, kw_only=True)
class BiorthogonalModes(ModeSet):
    """A :class:`~flexmodal_ros.modes.modeset.ModeSet` with the left eigenvector ψ of every mode:
    ``left_shapes`` (r, m), same column order as ``mode_shapes``, unit norm (MAC-ready), or None
    when left vectors were not computed."""

    left_shapes: np.ndarray | None

    def to_dict(self) -> dict:
        out = super().to_dict()
        if self.left_shapes is not None:
            out.update(left_shapes_real=self.left_shapes.real.tolist(),
                       left_shapes_imag=self.left_shapes.imag.tolist())
        return out


@dataclass(frozen=True)
class Eigenpairs:
    """All 2n eigenvalues ``eigenvalues`` (2n,) with right ``right`` (n, 2n) and left ``left``
    (n, 2n) eigenvectors of the quadratic problem, biorthonormal as in (18)."""

    eigenvalues: np.ndarray
    right: np.ndarray
    left: np.ndarray

    def modes(self) -> BiorthogonalModes:
        """The modes (conjugate pairs by frequency, real eigenvalues apart) with both vectors."""
        return bi_modes(self.eigenvalues, self.right, self.left)

    def index_of(self, eigenvalue) -> int:
        """Column of ``eigenvalue`` (taken from :meth:`modes`, hence bit-identical)."""
        hits = np.flatnonzero(self.eigenvalues == eigenvalue)
        if hits.size == 0:
            raise KeyError(f"eigenvalue {eigenvalue} not in this spectrum")
        return int(hits[0])


def first_order_form(M, C, K):
    """(A, B) of (16) with N = M̄: B = [[C̄, M̄], [M̄, 0]], A = [[−K̄, 0], [0, M̄]] (2n × 2n)."""
    M, C, K = (np.asarray(a, float) for a in (M, C, K))
    zero = np.zeros_like(M)
    return np.block([[-K, zero], [zero, M]]), np.block([[C, M], [M, zero]])


def eigenpairs(M, C, K) -> Eigenpairs:
    """Eigenpairs of one point (:func:`eigenpairs_batch` of a stack of one)."""
    return eigenpairs_batch(np.asarray(M, float)[None], np.asarray(C, float)[None], np.asarray(K, float)[None])[0]


def eigenpairs_batch(M, C, K) -> list[Eigenpairs]:
    """Biorthonormal eigenpairs (module docstring) for stacks (m, n, n) of M̄, C̄, K̄."""
    M, C, K = (np.asarray(a, float) for a in (M, C, K))
    n = M.shape[-1]
    lam, V = np.linalg.eig(state_matrix(M, C, K))
    U = np.linalg.inv(V)                                   # rows u_i*, u_i* v_j = δ_ij
    # z_i* = u_i* B⁻¹ with B⁻¹ = [[0, M⁻¹], [M⁻¹, −M⁻¹C M⁻¹]]: the first n entries of z are
    # ψ = M⁻ᴴ (u_lower) → ψ* = u_lower* M⁻¹.
    psi = np.linalg.solve(np.swapaxes(M, -1, -2), np.swapaxes(U[..., n:], -1, -2)).conj()
    return [_normalized(refine(l, v[:n], p, m, c, k), v[:n], p, m, c)
            for l, v, p, m, c, k in zip(lam, V, psi, M, C, K)]


def refine(lam, right, left, M, C, K) -> np.ndarray:
    """Eigenvalues refined by the two-sided Rayleigh quotient: the root closest to λ of
    a λ² + b λ + c = 0 with a = ψ*M̄φ, b = ψ*C̄φ, c = ψ*K̄φ (error ~ the product of the vector
    errors, instead of the conditioning of the linearized eigenproblem); real eigenvalues of the
    real problem stay real."""
    lam = np.asarray(lam).astype(complex)
    quad = lambda A: np.einsum("ik,ij,jk->k", left.conj(), A, right)
    a, b, c = quad(M), quad(C), quad(K)
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = np.sqrt(b * b - 4 * a * c)
        roots = np.stack([(-b + disc) / (2 * a), (-b - disc) / (2 * a)])
    pick = np.take_along_axis(roots, np.argmin(np.abs(roots - lam), axis=0)[None], axis=0)[0]
    good = np.isfinite(pick) & (np.abs(pick - lam) <= 1e-6 * np.maximum(np.abs(lam), 1e-300))
    out = np.where(good, pick, lam)
    return np.where(is_real(lam), out.real, out)


def _normalized(lam, phi, psi, M, C) -> Eigenpairs:
    """φ unit norm, largest component real positive; ψ scaled so that ψ*(2λM̄ + C̄)φ = 1 (18)."""
    lam = np.asarray(lam).astype(complex)
    phi = normalize_shapes(phi.astype(complex))
    s = np.einsum("ik,ij,jk->k", psi.conj(), M, phi) * 2 * lam + np.einsum("ik,ij,jk->k", psi.conj(), C, phi)
    return Eigenpairs(lam, phi, psi / s.conj())


def bi_modes(eigenvalues, right, left) -> BiorthogonalModes:
    """Sorted :class:`BiorthogonalModes` of one spectrum (shared sorting of
    :func:`~flexmodal_ros.modes.modeset.modes_from_eigenpairs`, applied to both vector sets)."""
    r = modes_from_eigenpairs(eigenvalues, right)[0]
    l = modes_from_eigenpairs(eigenvalues, left)[0]
    return BiorthogonalModes(**r.mode_fields(), left_shapes=l.mode_shapes)


def biorthogonality_error(M, C, K, pairs: Eigenpairs) -> tuple[float, float]:
    """Largest deviations from (18) over all 2n eigenpairs, scale-free: |z_i*Bw_i − 1|,
    |z_i*Aw_i − λ_i|/|λ_i| and the off-diagonal |z_i*Bw_j|/(‖z_i‖‖Bw_j‖), |z_i*Aw_j|/(‖z_i‖‖Aw_j‖).
    Returns (B error, A error)."""
    A, B = first_order_form(M, C, K)
    lam = pairs.eigenvalues
    W = np.vstack([pairs.right, pairs.right * lam])
    Z = np.vstack([pairs.left, pairs.left * lam.conj()])
    out = []
    for X, diag in ((B, np.ones_like(lam)), (A, lam)):
        XW = X @ W
        G = Z.conj().T @ XW
        scale = np.where(np.abs(diag) > 0, np.abs(diag), 1.0)
        on = np.abs(np.diag(G) - diag) / scale
        off = np.abs(G) / np.outer(np.linalg.norm(Z, axis=0), np.linalg.norm(XW, axis=0))
        np.fill_diagonal(off, 0.0)
        out.append(float(max(on.max(), off.max())))
    return out[0], out[1]

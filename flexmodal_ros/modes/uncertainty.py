"""First derivatives of f and ζ with respect to the pole, and the standard deviations of f and ζ
from the covariance of eigenvalues (first-order delta method).

With λ = a + ib, |λ| = r: f = r/2π and ζ = −a/r (thesis (2.16)-(2.17)), so
∂f/∂(a, b) = (a, b)/(2π r) and ∂ζ/∂(a, b) = (−1/r + a²/r³, a b/r³)
(:func:`frequency_damping_jacobian`); the variances are gᵀ C g for the 2 × 2 covariance C of
(Re λ, Im λ) (:func:`frequency_damping_std`), and pole derivatives dλ/dp map to df/dp, dζ/dp by
the same rows (:func:`mode_derivatives`, the calibration's eigenvalue sensitivities). Used by every
estimator that reports uncertain modes (OMA pole refinement, the Cramér-Rao visibility bound,
calibration).
"""
from __future__ import annotations

import numpy as np

from .modeset import TWO_PI


def frequency_damping_jacobian(eigenvalues) -> np.ndarray:
    """∂(f, ζ)/∂(Re λ, Im λ) per pole (module docstring): (..., 2, 2), rows f [Hz], ζ [-]
    (λ = 0, no mode: evaluated with r = 1, i.e. ∂f = 0, ∂ζ/∂a = −1)."""
    lam = np.asarray(eigenvalues, complex)
    a, b, r = lam.real, lam.imag, np.abs(lam)
    r = np.where(r > 0, r, 1.0)
    out = np.empty(lam.shape + (2, 2))
    out[..., 0, 0] = a / (TWO_PI * r)
    out[..., 0, 1] = b / (TWO_PI * r)
    out[..., 1, 0] = -1.0 / r + a ** 2 / r ** 3
    out[..., 1, 1] = a * b / r ** 3
    return out


def mode_derivatives(eigenvalues, d_eigenvalues) -> tuple[np.ndarray, np.ndarray]:
    """(df/dp [Hz per unit of p], dζ/dp) (m, P) from poles λ (m,) and their derivatives dλ/dp
    (m, P) complex (chain rule through :func:`frequency_damping_jacobian`)."""
    g = frequency_damping_jacobian(eigenvalues)                     # (m, 2, 2)
    d = np.asarray(d_eigenvalues, complex)
    df = g[:, 0, 0, None] * d.real + g[:, 0, 1, None] * d.imag
    dz = g[:, 1, 0, None] * d.real + g[:, 1, 1, None] * d.imag
    return df, dz


def frequency_damping_std(eigenvalues, covariances) -> tuple[np.ndarray, np.ndarray]:
    """(σ_f [Hz], σ_ζ [-]) of modes λ (m,) whose (Re λ, Im λ) covariances are ``covariances``
    (m, 2, 2); inf where a covariance is not finite."""
    lam = np.asarray(eigenvalues, complex).ravel()
    cov = np.asarray(covariances, float).reshape(lam.size, 2, 2)
    g = frequency_damping_jacobian(lam)
    g_f, g_z = g[:, 0], g[:, 1]
    finite = np.isfinite(cov).all(axis=(1, 2))
    cov = np.where(finite[:, None, None], cov, 0.0)
    var_f = np.einsum("mi,mij,mj->m", g_f, cov, g_f)
    var_z = np.einsum("mi,mij,mj->m", g_z, cov, g_z)
    return (np.where(finite, np.sqrt(np.maximum(var_f, 0.0)), np.inf),
            np.where(finite, np.sqrt(np.maximum(var_z, 0.0)), np.inf))


def pair_covariances(covariance, count: int) -> np.ndarray:
    """(count, 2, 2) blocks of a covariance whose parameters start with Re λ_0..Re λ_{m−1},
    Im λ_0..Im λ_{m−1} (m = ``count``): the (Re λ_j, Im λ_j) block of each mode."""
    cov = np.asarray(covariance, float)
    idx = np.stack([np.arange(count), count + np.arange(count)], axis=1)
    return cov[idx[:, :, None], idx[:, None, :]]

"""Standard deviations of f and ζ from the covariance of eigenvalues (first-order delta method).

With λ = a + ib, |λ| = r: f = r/2π and ζ = −a/r (thesis (2.16)-(2.17)), so
∂f/∂(a, b) = (a, b)/(2π r) and ∂ζ/∂(a, b) = (−1/r + a²/r³, a b/r³); the variances are gᵀ C g for
the 2 × 2 covariance C of (Re λ, Im λ). Used by every estimator that reports uncertain modes
(OMA pole refinement, the Cramér-Rao visibility bound, calibration).
"""
from __future__ import annotations

import numpy as np

from .modeset import TWO_PI


def frequency_damping_std(eigenvalues, covariances) -> tuple[np.ndarray, np.ndarray]:
    """(σ_f [Hz], σ_ζ [-]) of modes λ (m,) whose (Re λ, Im λ) covariances are ``covariances``
    (m, 2, 2); inf where a covariance is not finite."""
    lam = np.asarray(eigenvalues, complex).ravel()
    cov = np.asarray(covariances, float).reshape(lam.size, 2, 2)
    a, b, r = lam.real, lam.imag, np.abs(lam)
    safe = np.where(r > 0, r, 1.0)
    g_f = np.stack([a, b], axis=1) / (safe * TWO_PI)[:, None]
    g_z = np.stack([-1.0 / safe + a ** 2 / safe ** 3, a * b / safe ** 3], axis=1)
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

"""First derivatives of a mode's natural frequency and damping ratio with respect to its pole.

With λ = a + jb (Im λ > 0, the member of the pair that represents the mode), r = |λ|:
f = r/2π and ζ = −a/r (thesis (2.16)-(2.17)), hence

    ∂f/∂a = a/(2π r),      ∂f/∂b = b/(2π r),
    ∂ζ/∂a = −1/r + a²/r³,  ∂ζ/∂b = a b/r³.

:func:`frequency_damping_jacobian` returns these 2×2 blocks; :func:`mode_derivatives` maps pole
derivatives dλ/dp (complex, e.g. from an eigenvalue sensitivity) to df/dp and dζ/dp.
"""
from __future__ import annotations

import numpy as np

from .modeset import TWO_PI


def frequency_damping_jacobian(eigenvalues) -> np.ndarray:
    """∂(f, ζ)/∂(Re λ, Im λ) per pole (module docstring): (..., 2, 2), rows f [Hz], ζ [-]."""
    lam = np.asarray(eigenvalues, complex)
    a, b = lam.real, lam.imag
    r = np.abs(lam)
    r = np.where(r > 0, r, np.inf)                    # λ = 0: no mode, zero derivatives
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

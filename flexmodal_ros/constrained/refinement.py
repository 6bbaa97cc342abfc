"""Refinement of computed modes of the constrained linearizations: residual error bounds
|δs| ≲ ‖r‖/|xᴴ(2sM + C)x|, shifted inverse iteration on the second-order model (MCS, UCS) or on
the bordered RCS equations, and the eigenvalue as the root of the quadratic Rayleigh (Lagrangian)
functional in extended precision. When it runs (``refine=k`` or "auto") is
:mod:`.eigenanalysis`'s docstring.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..modes import lowest_modes
from .linearizations import DescriptorSystem, SecondOrderSystem, _dense

AUTO_REFINE_MODES = 8           # lowest oscillatory modes checked by refine="auto" (the CLI shows 8)
AUTO_REFINE_RTOL = 1e-10        # residual bound above this × |s|: the mode is refined
SHIFT_OFFSET = 1e-10            # relative offset of the inverse-iteration shift from the eigenvalue


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


def refine_modes(lin, w, x, refine, refiner):
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


def refine_quadratic(lin: SecondOrderSystem, w, x, count, indices=None):
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


def refine_pencil(lin: DescriptorSystem, w, x, count, indices=None):
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
    (extended precision; ``coupling`` the multiplier term of :func:`~flexmodal_ros.constrained.refinement.refine_pencil`)."""
    a, b, c = forms.values(v)
    c = c + coupling
    disc = np.sqrt(b * b - 4 * a * c)
    roots = np.array([(-b + disc) / (2 * a), (-b - disc) / (2 * a)])
    return complex(roots[np.argmin(np.abs(roots - s))])

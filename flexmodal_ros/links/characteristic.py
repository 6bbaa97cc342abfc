"""The paper's 6n×6n characteristic matrix M(ω) (37)-(39), block by block (Appendices A and B).

Unknowns per link i (38): c_i = (A_i1, A_i2, A_i3, A_i4, B_i1, B_i2). :func:`link_basis` gives the
state (V, Ψ, T, M, U, N) of a link at x as a 6×6 matrix acting on c_i, in the paper's bases:

- Timoshenko (T), ω < ω_lim: (32), (33), (36) with λ_i1, λ_i2 of (28)-(29) (λ_i2 the positive
  real √−(29), notes_002 §1.2) and t_i1, t_i2 of (35);
- T, ω > ω_lim (not written out in the paper; notes_002 §1.3): cosh/sinh(λ_i1 x) → cos/sin(μ_1 x),
  μ_1 = √−λ_i1², and Ψ gets t̄_1 (A_1 sin μ_1x − A_2 cos μ_1x), t̄_1 = (ω²ρ/kG − μ_1²)/μ_1;
- Euler-Bernoulli with axial dynamics (EB†, Appendix B): V = A_1 cos αx + A_2 sin αx +
  A_3 cosh αx + A_4 sinh αx, α⁴ = ω²ρS/EI (B.5), Ψ = V', moment EIV'', shear −EIV''';
- inextensible EB (EB‡): as EB† with the axial solution replaced by its limit E_axial → ∞:
  U = B_1 (rigid axial motion), N = B_2 − ω²ρS B_1 x (the link's axial inertia).

Resultants: M = EIΨ', T = kGS(V' − Ψ) (T model), N = ESU' (2). Rows (notes_002 §1.4, §1.6):

- O_1 (22)-(24), (A.3): Ψ_1(0), V_1(0), U_1(0);
- joint O_i, i = 2..n (25), blocks (A.1) on link i−1 at L and (A.2) on link i at 0:
  rotation continuity, the two displacement transformations, moment, transverse and axial
  balance with the tip body (M_{i−1}, J_{i−1});
- end effector (26), (A.4): M − ω²JΨ, T − ω²MV, N − ω²MU at L_n.

Typos fixed (notes_002 §1.6): axial argument ωL/c (not ω/(cL)) in (A.1), (A.4), (B.1), (B.4);
(25) row 4 ends with −E_iI_iΨ_i'(0) (not Ψ_i); (A.4) row 1 equals (A.1) row 4 (t_n1, t_n2
factors, sin not sinh); (B.1) row 3 column 4 sinh(αL)cosθ, row 5 as derived from −EIV''' − ω²MV.

Elastic joints (beyond the paper, :mod:`flexmodal_ros.links.arm`) replace the rotation-continuity
row by α(Ψ_{i−1}(L) − Ψ_i(0)) + β M_i(0) = 0 with (α, β) = (1, 0) rigid, (k_T, 1) elastic and
(k_T(k_m − ω²B), k_m + k_T − ω²B) servo (the rotor eliminated: series spring k_T and
k_m − ω²B); at the base Ψ⁻ = 0.
"""
from __future__ import annotations

import numpy as np

from ..core.errors import InputError
from .beam import BEAM_MODELS
from ..core.validation import shown

# Rows of a link state vector (link_basis)
V, PSI, SHEAR, MOMENT, U, NORMAL = range(6)


def section_constants(beam, model: str) -> tuple:
    """(EI, kGS, ρS, ρI, ES) of a beam [N m², N, kg/m, kg m, N] for a beam model; kGS = inf and
    ρI = 0 for the Euler-Bernoulli models (Appendix B has no rotary inertia), ES = inf for EB‡."""
    if model not in BEAM_MODELS:
        raise InputError(f"model: expected one of {', '.join(BEAM_MODELS)}, got {shown(model)}")
    EI, rhoS = beam.E * beam.I, beam.rho * beam.S
    if model == "timoshenko":
        return EI, beam.shear_factor * beam.G * beam.S, rhoS, beam.rho * beam.I, beam.E * beam.S
    return EI, np.inf, rhoS, 0.0, (np.inf if model == "eb-inextensible" else beam.E * beam.S)


def bending_roots(EI, kGS, rhoS, rhoI, omega):
    """(s1, s2): the two values of λ² solving the characteristic equation of (27) (λ_i1² of (28),
    λ_i2² of (29), s2 < 0 ≤ s1 below the cut-off, both < 0 above it); for EB s = ±ω√(ρS/EI).

    Arrays broadcast; s1 = Q/(EI s2) avoids the cancellation of (28) at low frequency.
    """
    w2 = np.square(omega)
    shear = rhoS / kGS  # ρ/kG (0 for EB)
    P = w2 * (rhoI + EI * shear)
    Q = w2 * (w2 * rhoI * shear - rhoS)
    s2 = (-P - np.sqrt(P * P - 4.0 * EI * Q)) / (2.0 * EI)
    s1 = np.divide(Q, EI * s2, out=np.zeros(np.broadcast(Q, s2).shape), where=s2 != 0)
    return s1, s2


def link_basis(beam, model: str, omega, x) -> np.ndarray:
    """State (V, Ψ, T, M, U, N) of one link at positions ``x`` (P,) [m] as (..., P, 6, 6) matrices
    acting on its coefficients (A_1..A_4, B_1, B_2), for frequencies ``omega`` (...) > 0 [rad/s]
    (module docstring). Units: V, U [m]; Ψ [rad]; T, N [N]; M [N m] per unit coefficient."""
    x = np.atleast_1d(np.asarray(x, float))[None, :]
    return _basis([section_constants(beam, model)], model, omega, x)[..., 0, :, :, :]


def arm_basis(arm, model: str, omega, x_fraction) -> np.ndarray:
    """:func:`link_basis` of every link at once: (..., n, P, 6, 6) at x = fraction·L_i."""
    x = np.outer([b.length for b in arm.beams], np.atleast_1d(np.asarray(x_fraction, float)))
    return _basis([section_constants(b, model) for b in arm.beams], model, omega, x)


def _basis(consts, model, omega, x):
    """Z (..., n, P, 6, 6) for section constants of n links and positions x (n, P) [m]."""
    EI, kGS, rhoS, rhoI, ES = (np.array(c, float)[:, None] for c in zip(*consts))  # (n, 1) each
    w = np.asarray(omega, float)[..., None, None]  # (..., 1, 1) against (n, P)
    if not np.all(w > 0):
        raise InputError(f"omega: must be > 0, got {np.asarray(omega).min()}")
    Z = np.zeros(np.broadcast(w, x).shape + (6, 6))
    if model == "timoshenko":
        _timoshenko_rows(Z, EI, kGS, rhoS, rhoI, w, x)
    else:
        _euler_bernoulli_rows(Z, EI, rhoS, w, x)
    if np.all(np.isinf(ES)):  # EB‡: the E_axial → ∞ limit of the rod
        Z[..., U, 4] = 1.0
        Z[..., NORMAL, 4] = -w * w * rhoS * x
        Z[..., NORMAL, 5] = 1.0
    else:
        k = w * np.sqrt(rhoS / ES)  # ω/c_i, c_i = √(E/ρ)
        Z[..., U, 4], Z[..., U, 5] = np.cos(k * x), np.sin(k * x)
        Z[..., NORMAL, 4], Z[..., NORMAL, 5] = -ES * k * np.sin(k * x), ES * k * np.cos(k * x)
    return Z


def _timoshenko_rows(Z, EI, kGS, rhoS, rhoI, w, x):
    """(32), (36) below the cut-off; cosh, sinh → cos, sin of μ_1 x above it (same t formula)."""
    s1, s2 = bending_roots(EI, kGS, rhoS, rhoI, w)
    if np.any(s1 == 0.0):
        raise InputError("omega: the cut-off frequency ω_lim itself, where the paper's basis degenerates")
    g = w * w * rhoS / kGS  # ω²ρ/kG
    lam2 = np.sqrt(-s2)
    t2 = (lam2 * lam2 - g) / lam2  # (35)
    r = np.sqrt(np.abs(s1))  # λ_1 below, μ_1 above the cut-off
    t1 = (s1 + g) / r  # t_1 of (35) below; t̄_1 = (ω²ρ/kG − μ_1²)/μ_1 above
    below = s1 > 0
    hyp, trig = np.where(below, r * x, 0.0), np.where(below, 0.0, r * x)
    F = np.where(below, np.cosh(hyp), np.cos(trig))
    G = np.where(below, np.sinh(hyp), np.sin(trig))
    sign = np.where(below, 1.0, -1.0)
    co, si = np.cos(lam2 * x), np.sin(lam2 * x)
    Z[..., V, 0], Z[..., V, 1], Z[..., V, 2], Z[..., V, 3] = F, G, co, si
    Z[..., PSI, 0], Z[..., PSI, 1], Z[..., PSI, 2], Z[..., PSI, 3] = t1 * G, sign * t1 * F, -t2 * si, t2 * co
    dV = (sign * r * G, r * F, -lam2 * si, lam2 * co)
    dPsi = (t1 * r * F, t1 * r * G, -t2 * lam2 * co, -t2 * lam2 * si)
    for j in range(4):
        Z[..., MOMENT, j] = EI * dPsi[j]
        Z[..., SHEAR, j] = kGS * (dV[j] - Z[..., PSI, j])


def _euler_bernoulli_rows(Z, EI, rhoS, w, x):
    a = (w * w * rhoS / EI) ** 0.25  # (B.5)
    c, s, ch, sh = np.cos(a * x), np.sin(a * x), np.cosh(a * x), np.sinh(a * x)
    a2, a3 = a * a, a * a * a
    rows = {V: (c, s, ch, sh), PSI: (-a * s, a * c, a * sh, a * ch),  # V and V'
            MOMENT: (-EI * a2 * c, -EI * a2 * s, EI * a2 * ch, EI * a2 * sh),  # EI V''
            SHEAR: (-EI * a3 * s, EI * a3 * c, -EI * a3 * sh, -EI * a3 * ch)}  # -EI V'''
    for row, values in rows.items():
        for j, v in enumerate(values):
            Z[..., row, j] = v


def joint_rotation_row(arm, i: int, omega) -> tuple:
    """(α, β) of joint i's rotation row α(Ψ⁻ − Ψ⁺) + β M⁺(0) = 0 (module docstring)."""
    k_T, k_m, B = arm.joint_stiffness[i], arm.motor_stiffness[i], arm.rotor_inertia[i]
    w2 = np.square(np.asarray(omega, float))
    one, zero = np.ones_like(w2), np.zeros_like(w2)
    if np.isinf(k_T) and np.isinf(k_m):
        return one, zero
    if np.isinf(k_m):  # elastic, motor locked
        return k_T * one, one
    motor = k_m - w2 * B
    if np.isinf(k_T):
        return motor, one
    return k_T * motor, k_m + k_T - w2 * B


def _rows(*rows):
    return np.stack(rows, axis=-2)


def block_base(Z0: np.ndarray, rotation_row=(1.0, 0.0)) -> np.ndarray:
    """M_O1 (3×6), (A.3): Ψ_1(0), V_1(0), U_1(0) (rotation row α Ψ_1 − β M_1 for a joint spring)."""
    a, b = (np.asarray(v)[..., None] for v in rotation_row)
    return _rows(a * Z0[..., PSI, :] - b * Z0[..., MOMENT, :], Z0[..., V, :], Z0[..., U, :])


def block_joint_previous(ZL: np.ndarray, theta: float, M: float, J: float, omega,
                         rotation_row=(1.0, 0.0)) -> np.ndarray:
    """M_O(i,i−1) (6×6), (A.1): rows of joint O_i on link i−1 at x = L_{i−1}."""
    c, s = np.cos(theta), np.sin(theta)
    w2 = np.square(np.asarray(omega, float))[..., None]
    a = np.asarray(rotation_row[0])[..., None]
    Z = lambda row: ZL[..., row, :]  # noqa: E731
    return _rows(a * Z(PSI), Z(V) * s + Z(U) * c, Z(V) * c - Z(U) * s, Z(MOMENT) - w2 * J * Z(PSI),
                 Z(SHEAR) - w2 * M * Z(V), Z(NORMAL) - w2 * M * Z(U))


def block_joint_next(Z0: np.ndarray, theta: float, rotation_row=(1.0, 0.0)) -> np.ndarray:
    """M_O(i,i) (6×6), (A.2): rows of joint O_i on link i at x = 0."""
    c, s = np.cos(theta), np.sin(theta)
    a, b = (np.asarray(v)[..., None] for v in rotation_row)
    Z = lambda row: Z0[..., row, :]  # noqa: E731
    return _rows(-a * Z(PSI) + b * Z(MOMENT), -Z(U), -Z(V), -Z(MOMENT), -Z(NORMAL) * s - Z(SHEAR) * c,
                 -Z(NORMAL) * c + Z(SHEAR) * s)


def block_tip(ZL: np.ndarray, M: float, J: float, omega) -> np.ndarray:
    """M_OEE (3×6), (A.4) with row 1 fixed: end-effector balance at x = L_n."""
    w2 = np.square(np.asarray(omega, float))[..., None]
    Z = lambda row: ZL[..., row, :]  # noqa: E731
    return _rows(Z(MOMENT) - w2 * J * Z(PSI), Z(SHEAR) - w2 * M * Z(V), Z(NORMAL) - w2 * M * Z(U))


def characteristic_matrix(arm, q, omega, model: str = "timoshenko") -> np.ndarray:
    """M(ω) (..., 6n, 6n) of (39) for joint angles ``q`` (n,) [rad] (θ_1 = q[0] does not enter) at
    ``omega`` (...) > 0 [rad/s]; zero determinant ⇔ natural frequency (40)."""
    n = arm.n
    w = np.asarray(omega, float)
    out = np.zeros(w.shape + (6 * n, 6 * n))
    Z = arm_basis(arm, model, w, [0.0, 1.0])  # (..., n, 2, 6, 6)
    ends = [Z[..., i, :, :, :] for i in range(n)]
    out[..., 0:3, 0:6] = block_base(ends[0][..., 0, :, :], joint_rotation_row(arm, 0, w))
    for i in range(1, n):
        prev = arm.beams[i - 1]
        rot = joint_rotation_row(arm, i, w)
        rows = slice(3 + 6 * (i - 1), 3 + 6 * i)
        out[..., rows, 6 * (i - 1):6 * i] = block_joint_previous(ends[i - 1][..., 1, :, :], q[i], prev.tip_mass,
                                                                 prev.tip_inertia, w, rot)
        out[..., rows, 6 * i:6 * (i + 1)] = block_joint_next(ends[i][..., 0, :, :], q[i], rot)
    last = arm.beams[-1]
    out[..., 6 * n - 3:, 6 * (n - 1):] = block_tip(ends[-1][..., 1, :, :], last.tip_mass, last.tip_inertia, w)
    return out


def equilibrate(matrix: np.ndarray, sweeps: int = 2) -> tuple:
    """(D_r M D_c, d_r, d_c) for matrices (..., r, c): rows and columns scaled by powers of two to
    unit max-abs entries (the zeros of det M and its null vectors, c = d_c·ĉ, are unchanged)."""
    m = np.array(matrix, float)
    dr, dc = np.ones(m.shape[:-1]), np.ones(m.shape[:-2] + m.shape[-1:])
    for _ in range(sweeps):
        r = 2.0 ** -np.round(np.log2(np.maximum(np.abs(m).max(-1), 1e-300)))
        m *= r[..., :, None]
        dr *= r
        c = 2.0 ** -np.round(np.log2(np.maximum(np.abs(m).max(-2), 1e-300)))
        m *= c[..., None, :]
        dc *= c
    return m, dr, dc


def singular_check(arm, q, omega, model: str) -> tuple:
    """(σ/σ_max ascending (..., 6n), right singular vectors mapped back to c as columns
    (..., 6n, 6n)) of the equilibrated M(ω): the smallest ratio confirms a root, the matching
    column is its null vector (37)."""
    scaled, _, dc = equilibrate(characteristic_matrix(arm, q, omega, model))
    _, sv, vt = np.linalg.svd(scaled)
    ratios = sv[..., ::-1] / sv[..., :1]
    return ratios, dc[..., :, None] * np.swapaxes(vt[..., ::-1, :], -1, -2)

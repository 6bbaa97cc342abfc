"""Symbolic recursive Newton-Euler inverse dynamics and its time derivatives (SDRNEA, thesis ch. 4).

Thesis Alg. 1 (SRNEA) computes τ = M q'' + C q' + g (4.6) with a forward pass (angular velocity
ω, angular acceleration ω', linear acceleration a of each frame origin) and a backward pass
(forces f, moments n). Alg. 2 (DRNEA) differentiates every row of that straight-line program in
time with the chain rule (4.19)-(4.24), reusing d(ω)/dt = ω' (4.20).

Here the same scheme is written with *truncated Taylor jets*: every recursive quantity is carried
with its time derivatives, x̂ = [x, x', x'', ...], and each operation applies the Leibniz rule,

    (u × v)^(k) = Σ_l C(k, l) u^(l) × v^(k-l),

which is exactly (4.19)/(4.23) applied row by row. The angular-acceleration jet is the shifted
angular-velocity jet (4.20), so ω is carried to third order and ω', ω'', ω''' come for free.
As in Alg. 1, Ω = [ω']× + [ω]×² is formed once per link (from the products ω_i ω_j) and serves
both the acceleration of the next origin (a + Ω p) and the force on the centre of mass
(m a + Ω m c); moments use the inertia about the joint origin I_O = I_c - m ĉ².
The joint rotation R_z(q) is differentiated with the identity d/dt(R_zᵀ u) = R_zᵀ(u' - w × u),
w = e_z q', so only one sin/cos pair appears per revolute joint.

The model comes from the Pinocchio model (joint placements, axes, inertias, gravity), not from a
DH table: every joint frame is rotated by a constant Q_i with Q_i e_z = axis_i, so each joint acts
along/about the local z axis; constants within 1e-12 of 0 or ±1 are snapped so that CasADi's
on-the-fly simplification drops multiplications by 0 and 1 (elimination of zero and constant
subexpressions). Inputs/outputs are CasADi SX; numbers: SI units (rad, m, N·m, N).
"""
from dataclasses import dataclass
from math import comb

import casadi as ca
import numpy as np

from ...core.errors import ConfigError

_SNAP = 1e-12
_PRISMATIC = ("PX", "PY", "PZ", "PrismaticUnaligned")
_REVOLUTE = ("RX", "RY", "RZ", "RevoluteUnaligned")
_UNIT = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}


def joint_axis(joint_model):
    """(unit axis in the joint frame, is_revolute) of a 1-DOF Pinocchio joint model."""
    short = joint_model.shortname().replace("JointModel", "")
    if short not in _PRISMATIC + _REVOLUTE:
        raise ConfigError(f"joint type {short}: only 1-DOF revolute or prismatic joints are supported")
    if short.endswith("Unaligned"):
        axis = np.array(joint_model.extract().axis, dtype=float)
        axis /= np.linalg.norm(axis)
    else:
        axis = np.array(_UNIT[short[1]])
    return axis, short.startswith("R")


def snap(values):
    """Copy of ``values`` with entries within 1e-12 of 0, 1 or -1 replaced by those exact numbers."""
    out = np.array(values, dtype=float)
    for target in (0.0, 1.0, -1.0):
        out[np.abs(out - target) < _SNAP] = target
    return out


def _axis_frame(axis):
    """Rotation Q with Q e_z = axis (exact permutation-like matrices for coordinate axes)."""
    helper = np.array([0.0, 1.0, 0.0]) if abs(axis[0]) > 0.9 else np.array([1.0, 0.0, 0.0])
    x = helper - helper.dot(axis) * axis
    x /= np.linalg.norm(x)
    return snap(np.column_stack([x, np.cross(axis, x), axis]))


@dataclass(frozen=True)
class Link:
    """One joint + body in canonical coordinates (joint along/about local z).

    parent: index (-1 = base); revolute; R: rotation parent→joint frame at q = 0; p: joint origin
    in the parent frame [m]; mass [kg]; com [m]; inertia_o: inertia about the joint origin [kg m²].
    """
    parent: int
    revolute: bool
    R: np.ndarray
    p: np.ndarray
    mass: float
    com: np.ndarray
    inertia_o: np.ndarray


def canonical_chain(pin_model):
    """The Pinocchio model as a list of :class:`Link` in canonical (z-axis) joint coordinates."""
    links, frames = [], []
    for i in range(1, pin_model.njoints):
        jm = pin_model.joints[i]
        if jm.nq != 1 or jm.nv != 1:
            raise ConfigError(f"joint {pin_model.names[i]}: only 1-DOF joints are supported")
        axis, revolute = joint_axis(jm)
        Q = _axis_frame(axis)
        parent = pin_model.parents[i] - 1
        Qp = frames[parent] if parent >= 0 else np.eye(3)
        frames.append(Q)
        placement = pin_model.jointPlacements[i]
        inertia = pin_model.inertias[i]
        m = float(inertia.mass)
        c = Q.T @ inertia.lever
        Ic = Q.T @ inertia.inertia @ Q
        Io = Ic + m * (c.dot(c) * np.eye(3) - np.outer(c, c))          # I_O = I_c - m ĉ² (Alg. 1)
        links.append(Link(parent, revolute, snap(Qp.T @ placement.rotation @ Q),
                          snap(Qp.T @ placement.translation), m, snap(c), snap(Io)))
    return links


# ---------------------------------------------------------------- jet arithmetic (SX 3-vectors)
def _matvec(A, v):
    """A v for a constant 3x3 ``A`` (only nonzero entries generate operations)."""
    rows = []
    for r in range(3):
        terms = [v[c] if A[r, c] == 1 else -v[c] if A[r, c] == -1 else A[r, c] * v[c]
                 for c in range(3) if A[r, c] != 0]
        rows.append(sum(terms[1:], terms[0]) if terms else ca.SX(0))
    return ca.vertcat(*rows)


def _cross(u, v):
    return ca.vertcat(u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0])


def _add(*jets):
    order = min(len(j) for j in jets)
    return [sum((j[k] for j in jets[1:]), jets[0][k]) for k in range(order)]


def _scale(a, jet):
    return [a * x for x in jet]


def _const(A, jet):
    return [_matvec(A, x) for x in jet]


def _jcross(u, v, order=None):
    """Jet of u × v up to ``order`` (Leibniz rule)."""
    order = min(len(u), len(v)) - 1 if order is None else order
    out = []
    for k in range(order + 1):
        terms = [comb(k, l) * _cross(u[l], v[k - l]) if comb(k, l) != 1 else _cross(u[l], v[k - l])
                 for l in range(k + 1)]
        out.append(sum(terms[1:], terms[0]))
    return out


def _spin_jet(om):
    """Jet (order 2) of Ω = [ω']× + [ω]×² (Alg. 1) from the order-3 jet of ω, as SX 3x3 matrices.

    [ω]×² = ω ωᵀ - |ω|² I, so Ω p costs one matrix-vector product per use, shared by the
    acceleration of the next origin and the force on the centre of mass.
    """
    prod = {(i, j): _jprod([om[k][i] for k in range(3)], [om[k][j] for k in range(3)])
            for i in range(3) for j in range(i, 3)}
    out = []
    for k in range(3):
        w, P = om[k + 1], lambda i, j: prod[(min(i, j), max(i, j))][k]
        out.append(ca.blockcat([[-(P(1, 1) + P(2, 2)), P(0, 1) - w[2], P(0, 2) + w[1]],
                                [P(0, 1) + w[2], -(P(0, 0) + P(2, 2)), P(1, 2) - w[0]],
                                [P(0, 2) - w[1], P(1, 2) + w[0], -(P(0, 0) + P(1, 1))]]))
    return out


def _jprod(u, v):
    """Jet of the scalar product u v (Leibniz rule)."""
    return [sum((comb(k, l) * u[l] * v[k - l] if 0 < l < k else u[l] * v[k - l] for l in range(1, k + 1)),
                u[0] * v[k]) for k in range(len(u))]


def _jmatvec(A, v, order):
    """Jet of A v for jets of a 3x3 matrix A and a 3-vector v (Leibniz rule)."""
    return [sum((comb(k, l) * ca.mtimes(A[l], v[k - l]) for l in range(1, k + 1)), ca.mtimes(A[0], v[k]))
            for k in range(order + 1)]


def _rotz(c, s, v, transpose):
    """R_z(q) v or R_z(q)ᵀ v for c = cos q, s = sin q."""
    if transpose:
        return ca.vertcat(c * v[0] + s * v[1], c * v[1] - s * v[0], v[2])
    return ca.vertcat(c * v[0] - s * v[1], s * v[0] + c * v[1], v[2])


def _jrotz(c, s, w, jet, transpose):
    """Jet of R_z(q)ᵀ u (transpose) or R_z(q) u, with w = e_z q' jet.

    d/dt(R_zᵀ u) = R_zᵀ (u' - w × u) and d/dt(R_z u) = R_z (u' + w × u).
    """
    sign = -1.0 if transpose else 1.0
    h, out = jet, []
    for k in range(len(jet)):
        out.append(_rotz(c, s, h[0], transpose))
        if k + 1 < len(jet):
            h = _add(h[1:], _scale(sign, _jcross(w, h, len(h) - 2)))
    return out


# ---------------------------------------------------------------- the recursive algorithm
def rnea_jets(links, gravity, qs):
    """τ, τ', τ'' (SX, each n x 1) of the chain ``links`` (Alg. 1-2 as jets).

    gravity: (3,) in the base frame [m/s²]; qs = [q, q', q'', q''', q''''] (SX n x 1 each).
    """
    return _backward(links, _forward(links, gravity, qs))


def _forward(links, gravity, qs):
    """Forward pass of Alg. 1 as jets: per link ω (order 3), Ω and a (order 2), origin p, joint rotation."""
    zero = ca.SX.zeros(3, 1)
    fwd = {"omega": [], "spin": [], "accel": [], "pos": [], "rot": []}
    for i, L in enumerate(links):
        w = [ca.vertcat(0, 0, qs[k][i]) for k in range(1, 5)]      # joint rate e_z q' and derivatives
        om_p = fwd["omega"][L.parent] if L.parent >= 0 else [zero] * 4
        a_p = fwd["accel"][L.parent] if L.parent >= 0 else [ca.SX(-snap(gravity))] + [zero] * 2
        if L.revolute:
            p = [ca.SX(L.p)] + [zero] * 4
        else:                                                     # origin slides along R e_z
            axis = ca.SX(L.R[:, 2])
            p = [ca.SX(L.p) + axis * qs[0][i]] + [axis * qs[k][i] for k in range(1, 5)]
        # acceleration of O_i in the parent frame: a_p + Ω_p p + 2 ω_p × p' + p''
        u = _add(a_p, p[2:])
        if L.parent >= 0:
            u = _add(u, _jmatvec(fwd["spin"][L.parent], p, 2), _scale(2.0, _jcross(om_p, p[1:], 2)))
        om, a = _const(L.R.T, om_p), _const(L.R.T, u)
        c = s = None
        if L.revolute:
            c, s = ca.cos(qs[0][i]), ca.sin(qs[0][i])
            om = _add(_jrotz(c, s, w, om, True), w)
            a = _jrotz(c, s, w, a, True)
        for key, value in (("omega", om), ("spin", _spin_jet(om)), ("accel", a), ("pos", p), ("rot", (c, s, w))):
            fwd[key].append(value)
    return fwd


def _backward(links, fwd):
    """Backward pass of Alg. 1 as jets: force/moment at each joint origin, then τ, τ', τ''."""
    n = len(links)
    zero = ca.SX.zeros(3, 1)
    force, moment = [None] * n, [None] * n
    tau = [[None] * n for _ in range(3)]
    for i in reversed(range(n)):
        L = links[i]
        om, dom, a = fwd["omega"][i][:3], fwd["omega"][i][1:], fwd["accel"][i]
        mc = [ca.SX(snap(L.mass * L.com))] + [zero] * 2             # first moment m c [kg m]
        f = _add(_scale(L.mass, a), _jmatvec(fwd["spin"][i], mc, 2))   # m (a + Ω c)
        nm = _add(_const(L.inertia_o, dom), _jcross(om, _const(L.inertia_o, om)), _jcross(mc, a))
        for j in range(i + 1, n):
            if links[j].parent == i:
                Fj = _to_parent(links[j], fwd["rot"][j], force[j])
                f = _add(f, Fj)
                nm = _add(nm, _to_parent(links[j], fwd["rot"][j], moment[j]), _jcross(fwd["pos"][j], Fj))
        force[i], moment[i] = f, nm
        out = nm if L.revolute else f
        for k in range(3):
            tau[k][i] = out[k][2]
    return [ca.vertcat(*t) for t in tau]


def _to_parent(link, rot, jet):
    c, s, qd = rot
    if link.revolute:
        jet = _jrotz(c, s, qd, jet, False)
    return _const(link.R, jet)


def flexible_joint_quantities(W, k, d_f, d_c, d_fm, d_cm, B, q, qd, qdd, q3, tau, tau_d, tau_dd, sign):
    """Motor-side reference of the reduced flexible-joint model, thesis (4.7)-(4.10) with W (2.1).

    Link side (2.1): τ + τ_f = K W (q_m - W q), τ_f = D q' + D_c sign(q') (4.3), hence
      q_m = W q + (KW)⁻¹(τ + τ_f)              (4.7)
      q_m' = W q' + (KW)⁻¹(τ' + D q'')          (4.8)  (Coulomb derivative taken as zero)
      q_m'' = W q'' + (KW)⁻¹(τ'' + D q''')      (4.9)
      τ_m = B q_m'' + D_m q_m' + D_c,m sign(q_m') + W⁻¹(τ + τ_f)   (4.10, with τ_f)
    W = 1 for revolute joints, which gives the thesis' form. Works elementwise on numpy arrays or
    CasADi SX; ``sign`` is np.sign or ca.sign. Returns (q_m, q_m', q_m'', τ_m).
    """
    tf = tau + d_f * qd + d_c * sign(qd)
    inv_kw = 1.0 / (k * W)
    qm = W * q + inv_kw * tf
    qmd = W * qd + inv_kw * (tau_d + d_f * qdd)
    qmdd = W * qdd + inv_kw * (tau_dd + d_f * q3)
    taum = B * qmdd + d_fm * qmd + d_cm * sign(qmd) + tf * (1.0 / W)
    return qm, qmd, qmdd, taum

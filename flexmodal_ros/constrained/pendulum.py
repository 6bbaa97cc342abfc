"""The flexible double pendulum of González et al. §4.2 (Figs. 2–3): floating frame of reference.

Each of the two links (length L, density ρ, Young's modulus E, circular section of radius r) is
described by its frame's position (x, y) and angle θ and by the elastic nodal coordinates of n_p
planar Euler–Bernoulli beam elements in that frame, (u, v, ψ) per node: axial and transverse
displacement and cross-section rotation (Shabana's floating-frame formulation, source ref. [32]);
n = 2(3 + 3(n_p + 1)) = 6n_p + 12. A material point at ξ ∈ [0, L] is at
r = R + A(θ)(ū₀ + S(ξ) q_f), ū₀ = (ξ, 0), with linear axial and cubic Hermite transverse shape
functions S. The kinetic energy ½∫ρA ṙᵀṙ dξ is assembled from the exact element integrals

    m = ρAL,  s₀ = ∫ρAū₀,  S̄ = ∫ρA S,  I₀ = ∫ρA ū₀ᵀū₀,  c = ∫ρA ξ S_uᵀ,  d = ∫ρA ξ S_vᵀ,
    M_ff = ∫ρA SᵀS (consistent mass),  S̃ = ∫ρA (S_uᵀS_v − S_vᵀS_u),

so M(q) (and the Coriolis terms of f) follow by AD. Strain energy ½ q_fᵀK_ff q_f with the linear
axial (EA) and Euler–Bernoulli bending (EI) element stiffness; gravity acts on the distributed
mass. Constraints (m = 10): the first link's frame origin o fixed (2), each frame tangent to its
first node, u = v = ψ = 0 there (3 + 3), and the second frame's origin at the first link's
deformed tip P₁ (2). Input u: a torque on θ₁ [N m].

Paper values (bundled ``config/constrained/pendulum.yaml``): L = 4 m, ρ = 1500 kg/m³,
E = 1e8 N/m², r = 0.15 m, g = 9.81 m/s² along −y (inferred), hanging equilibrium
θ₁ = θ₂ = −π/2 (axially pre-stretched by gravity), UCS α = 1e7, ξ = 1, ω = 10. The source omits
the element details; this model's remaining differences (no rotary inertia, no geometric
stiffening by the axial load, consistent mass) are in the README and the tests' tolerances.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import scipy.sparse as sp

from ..core.errors import InputError
from ..core.validation import finite_scalar, finite_vector, positive
from .system import lagrangian_system

_GAUSS_S, _GAUSS_W = np.polynomial.legendre.leggauss(4)   # exact for the degree-6 integrands


@dataclass(frozen=True)
class PendulumParameters:
    """n_p elements per link; link length [m], density [kg/m³], Young's modulus [N/m²], section
    radius [m]; gravity (2,) [m/s²]."""

    elements: int = 10
    length: float = 4.0
    density: float = 1500.0
    youngs_modulus: float = 1e8
    radius: float = 0.15
    gravity: tuple = (0.0, -9.81)

    def __post_init__(self):
        elements = finite_scalar(self.elements, "elements")
        if int(elements) != elements or elements < 1:
            raise InputError(f"elements: must be an integer >= 1, got {self.elements}")
        checked = {"elements": int(elements),
                   "gravity": tuple(map(float, finite_vector(self.gravity, 2, "gravity")))}
        for name in ("length", "density", "youngs_modulus", "radius"):
            checked[name] = float(positive(getattr(self, name), name))
        for name, value in checked.items():  # numbers as floats (YAML may give strings like 1.0e8)
            object.__setattr__(self, name, value)

    @property
    def area(self) -> float:
        return float(np.pi * self.radius ** 2)

    @property
    def link_mass(self) -> float:
        return self.density * self.area * self.length


def _shape(s, le):
    """Element shape functions at s ∈ [0, 1]: rows S_u (axial), S_v (transverse), (2, 6) each,
    element DOFs (u_a, v_a, ψ_a, u_b, v_b, ψ_b)."""
    su = np.array([1 - s, 0, 0, s, 0, 0])
    sv = np.array([0, 1 - 3 * s ** 2 + 2 * s ** 3, le * (s - 2 * s ** 2 + s ** 3), 0,
                   3 * s ** 2 - 2 * s ** 3, le * (s ** 3 - s ** 2)])
    return su, sv


def beam_matrices(p: PendulumParameters):
    """Constant floating-frame integrals of one link (see module docstring): dict with m, s0 (2,),
    I0, Sbar (2, n_f), c (n_f,), d (n_f,), Mff, Stilde, Kff (n_f, n_f, sparse CSC)."""
    ne, L = int(p.elements), float(p.length)
    le, mu = L / ne, p.density * p.area
    EA, EI = p.youngs_modulus * p.area, p.youngs_modulus * np.pi * p.radius ** 4 / 4
    nf = 3 * (ne + 1)
    Sbar, c, d = np.zeros((2, nf)), np.zeros(nf), np.zeros(nf)
    rows, cols, mvals, tvals, kvals = [], [], [], [], []
    k_axial = EA / le * np.array([[1, -1], [-1, 1]])
    k_bend = EI / le ** 3 * np.array([[12, 6 * le, -12, 6 * le],
                                      [6 * le, 4 * le ** 2, -6 * le, 2 * le ** 2],
                                      [-12, -6 * le, 12, -6 * le],
                                      [6 * le, 2 * le ** 2, -6 * le, 4 * le ** 2]])
    k_e = np.zeros((6, 6))
    k_e[np.ix_([0, 3], [0, 3])] = k_axial
    k_e[np.ix_([1, 2, 4, 5], [1, 2, 4, 5])] = k_bend
    m_e, t_e = np.zeros((6, 6)), np.zeros((6, 6))
    sbar_e, xu_e, xv_e = np.zeros((2, 6)), np.zeros(6), np.zeros(6)
    for gs, gw in zip(_GAUSS_S, _GAUSS_W):
        s, w = 0.5 * (gs + 1), 0.5 * gw * le * mu
        su, sv = _shape(s, le)
        m_e += w * (np.outer(su, su) + np.outer(sv, sv))
        t_e += w * (np.outer(su, sv) - np.outer(sv, su))
        sbar_e += w * np.vstack([su, sv])
        xu_e += w * s * le * su          # local ξ − ξ_a = s·le; the element offset is added below
        xv_e += w * s * le * sv
    for e in range(ne):
        dofs = np.arange(3 * e, 3 * e + 6)
        xa = e * le
        Sbar[:, dofs] += sbar_e
        c[dofs] += xu_e + xa * sbar_e[0]
        d[dofs] += xv_e + xa * sbar_e[1]
        rows.append(np.repeat(dofs, 6))
        cols.append(np.tile(dofs, 6))
        mvals.append(m_e.ravel())
        tvals.append(t_e.ravel())
        kvals.append(k_e.ravel())
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    mat = lambda vals: sp.csc_matrix((np.concatenate(vals), (rows, cols)), shape=(nf, nf))
    return {"m": mu * L, "s0": np.array([mu * L ** 2 / 2, 0.0]), "I0": mu * L ** 3 / 3,
            "Sbar": Sbar, "c": c, "d": d, "Mff": mat(mvals), "Stilde": mat(tvals), "Kff": mat(kvals)}


def _dm(a):
    return ca.DM(sp.csc_matrix(a)) if sp.issparse(a) else ca.DM(a)


def pendulum_system(p: PendulumParameters = PendulumParameters()):
    """The :class:`~flexmodal_ros.constrained.system.SymbolicSystem` of the flexible double pendulum."""
    b = beam_matrices(p)
    ne, L = int(p.elements), float(p.length)
    nf = 3 * (ne + 1)
    nl = 3 + nf
    n = 2 * nl
    q, qd = ca.SX.sym("q", n), ca.SX.sym("qd", n)
    u, t = ca.SX.sym("u", 1), ca.SX.sym("t")
    g = ca.DM(np.asarray(p.gravity, float))
    Sbar, Mff, Stilde, Kff = _dm(b["Sbar"]), _dm(b["Mff"]), _dm(b["Stilde"]), _dm(b["Kff"])
    s0, c, d = ca.DM(b["s0"]), ca.DM(b["c"]), ca.DM(b["d"])
    Itil = ca.DM([[0, -1], [1, 0]])
    kinetic, potential, links = 0, 0, []
    for j in range(2):
        o = j * nl
        R, th, qf = q[o:o + 2], q[o + 2], q[o + 3:o + nl]
        Rd, thd, qfd = qd[o:o + 2], qd[o + 2], qd[o + 3:o + nl]
        A = ca.vertcat(ca.horzcat(ca.cos(th), -ca.sin(th)), ca.horzcat(ca.sin(th), ca.cos(th)))
        ubar = s0 + ca.mtimes(Sbar, qf)                    # ∫ρA ū dξ
        kinetic += (0.5 * b["m"] * ca.dot(Rd, Rd)
                    + thd * ca.dot(Rd, ca.mtimes(A, ca.mtimes(Itil, ubar)))
                    + ca.dot(Rd, ca.mtimes(A, ca.mtimes(Sbar, qfd)))
                    + 0.5 * thd ** 2 * (b["I0"] + 2 * ca.dot(c, qf) + ca.bilin(Mff, qf, qf))
                    + thd * (ca.dot(d, qfd) + ca.bilin(Stilde, qf, qfd))
                    + 0.5 * ca.bilin(Mff, qfd, qfd))
        potential += 0.5 * ca.bilin(Kff, qf, qf) - ca.dot(g, b["m"] * R + ca.mtimes(A, ubar))
        links.append((R, th, qf, A))
    (R1, _, qf1, A1), (R2, _, qf2, _) = links
    tip = ca.vertcat(L + qf1[3 * ne], qf1[3 * ne + 1])
    cons = ca.vertcat(R1, qf1[0:3], qf2[0:3], R2 - (R1 + ca.mtimes(A1, tip)))
    forces = ca.vertcat(ca.SX.zeros(2), u[0], ca.SX.zeros(n - 3))
    mass = ca.hessian(kinetic, qd)[0]
    names = []
    for j in (1, 2):
        names += [f"x{j}", f"y{j}", f"theta{j}"]
        names += [f"{a}{j}_{k}" for k in range(ne + 1) for a in ("u", "v", "psi")]
    cnames = ["o x", "o y", "link 1 node 0 u", "link 1 node 0 v", "link 1 node 0 psi",
              "link 2 node 0 u", "link 2 node 0 v", "link 2 node 0 psi", "joint P1 x", "joint P1 y"]
    return lagrangian_system(f"pendulum_np{ne}", q, qd, u, t, mass, potential, forces, cons,
                             coordinate_names=names, constraint_names=cnames,
                             input_names=["torque_theta1"], sparse_native=True)


def pendulum_guess(p: PendulumParameters, theta1=-np.pi / 2, theta2=-np.pi / 2) -> np.ndarray:
    """Undeformed configuration with link angles θ₁, θ₂ [rad] (second frame at the first tip)."""
    nf = 3 * (int(p.elements) + 1)
    q = np.zeros(2 * (3 + nf))
    q[2] = theta1
    o = 3 + nf
    q[o:o + 2] = p.length * np.array([np.cos(theta1), np.sin(theta1)])
    q[o + 2] = theta2
    return q

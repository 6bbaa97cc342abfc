"""The N-loop four-bar linkage of González et al. §4.1 (Fig. 1) in natural coordinates.

Ground pivots A_i = (i·l, 0), i = 0..N; N + 1 cranks A_iB_i and N couplers B_{i−1}B_i, all rods of
length l and uniform mass m_rod (a chain of N parallelograms). Coordinates (n = 2N + 3):
x_i, y_i of B_i (i = 0..N) and φ, the angle from the global x axis to rod A_NB_N. Constraints
(m = 2N + 2): |B_i − A_i|² − l² = 0 (cranks), |B_i − B_{i−1}|² − l² = 0 (couplers) and
((x_N − A_N,x) sin φ − y_N cos φ)/l = 0 relating φ to B_N (its derivative in φ is l, never zero;
the source does not print its form, notes_001 §2.1; the eigenvalues do not depend on it).

Inertia (uniform rods in natural coordinates, notes_001 §4): a crank contributes m/3 on its tip
B_i; a coupler m/3 on the diagonal and m/6 off it; φ carries no mass. Gravity g acts on each rod's
centre. A linear spring (k, free length l₀) and optionally a dashpot c in parallel join B_i and
A_{i−1} in each loop i = 1..N. Input u: a generalized torque on φ [N m].

Paper values (bundled ``config/constrained/fourbar.yaml``): l = 1 m, m_rod = 1 kg, k = 25 N/m,
l₀ = √2 m, g = 9.81 m/s² along −y, UCS α = 1e6, ξ = 1, ω = 10. Singular case (§5.1, Fig. 4):
k = 0, gravity along +x, equilibrium φ = 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_scalar, finite_vector, nonnegative, positive
from .system import lagrangian_system


@dataclass(frozen=True)
class FourBarParameters:
    """N loops; rod length l [m]; rod mass [kg]; spring stiffness k [N/m] and free length [m];
    damping c [N s/m]; gravity (2,) [m/s²] in the plane."""

    loops: int = 1
    rod_length: float = 1.0
    rod_mass: float = 1.0
    spring_stiffness: float = 25.0
    spring_length: float = float(np.sqrt(2.0))
    damping: float = 0.0
    gravity: tuple = (0.0, -9.81)

    def __post_init__(self):
        loops = finite_scalar(self.loops, "loops")
        if int(loops) != loops or loops < 1:
            raise InputError(f"loops: must be an integer >= 1, got {self.loops}")
        checked = {"loops": int(loops),
                   "gravity": tuple(map(float, finite_vector(self.gravity, 2, "gravity")))}
        for name, check in (("rod_length", positive), ("rod_mass", positive),
                            ("spring_stiffness", nonnegative), ("spring_length", positive),
                            ("damping", nonnegative)):
            checked[name] = float(check(getattr(self, name), name))
        for name, value in checked.items():  # numbers as floats (YAML may give strings like 1.0e8)
            object.__setattr__(self, name, value)


def fourbar_system(params: FourBarParameters = FourBarParameters()):
    """The :class:`~flexmodal_ros.constrained.system.SymbolicSystem` of an N-loop four-bar."""
    N, l, mr = int(params.loops), float(params.rod_length), float(params.rod_mass)
    k, l0, c = float(params.spring_stiffness), float(params.spring_length), float(params.damping)
    g = np.asarray(params.gravity, float)
    n = 2 * N + 3
    q, qd = ca.SX.sym("q", n), ca.SX.sym("qd", n)
    u, t = ca.SX.sym("u", 1), ca.SX.sym("t")
    B = [q[2 * i:2 * i + 2] for i in range(N + 1)]
    Bd = [qd[2 * i:2 * i + 2] for i in range(N + 1)]
    phi = q[n - 1]
    A = [ca.DM([i * l, 0.0]) for i in range(N + 1)]
    M = np.zeros((n, n))
    potential = 0
    for i in range(N + 1):                              # cranks: mass m/3 at B_i, centre B_i/2
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] += mr / 3 * np.eye(2)
        potential -= mr * ca.dot(ca.DM(g), (A[i] + B[i]) / 2)
    for i in range(1, N + 1):                           # couplers B_{i−1}B_i
        a, b = slice(2 * i - 2, 2 * i), slice(2 * i, 2 * i + 2)
        M[a, a] += mr / 3 * np.eye(2)
        M[b, b] += mr / 3 * np.eye(2)
        M[a, b] += mr / 6 * np.eye(2)
        M[b, a] += mr / 6 * np.eye(2)
        potential -= mr * ca.dot(ca.DM(g), (B[i - 1] + B[i]) / 2)
    forces = ca.SX.zeros(n)
    forces[n - 1] = u[0]
    for i in range(1, N + 1):                           # spring + dashpot between B_i and A_{i−1}
        d = B[i] - A[i - 1]
        length = ca.norm_2(d)
        potential += 0.5 * k * (length - l0) ** 2
        if c:
            e = d / length
            forces[2 * i:2 * i + 2] -= c * e * ca.dot(e, Bd[i])
    cons = [ca.sumsqr(B[i] - A[i]) - l ** 2 for i in range(N + 1)]
    cons += [ca.sumsqr(B[i] - B[i - 1]) - l ** 2 for i in range(1, N + 1)]
    cons.append(((B[N][0] - A[N][0]) * ca.sin(phi) - B[N][1] * ca.cos(phi)) / l)
    names = [f"{a}{i}" for i in range(N + 1) for a in ("x", "y")] + ["phi"]
    cnames = ([f"crank {i}" for i in range(N + 1)] + [f"coupler {i}" for i in range(1, N + 1)]
              + ["angle phi"])
    return lagrangian_system(
        f"fourbar_N{N}", q, qd, u, t, ca.DM(M), potential, forces, ca.vertcat(*cons),
        coordinate_names=names, constraint_names=cnames, input_names=["torque_phi"],
        independent=("phi",))


def fourbar_guess(params: FourBarParameters, phi: float) -> np.ndarray:
    """Coordinates of the parallelogram configuration with crank angle φ [rad]:
    B_i = A_i + l(cos φ, sin φ)."""
    N, l = int(params.loops), float(params.rod_length)
    tip = l * np.array([np.cos(phi), np.sin(phi)])
    pts = [np.array([i * l, 0.0]) + tip for i in range(N + 1)]
    return np.concatenate(pts + [np.array([phi])])

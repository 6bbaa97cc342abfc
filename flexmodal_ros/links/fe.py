"""Independent finite-element model of the beam-link arm (the cross-check of the exact solution).

Shares nothing with the exact solver but the input data: its own elements, assembly and
eigensolver (SciPy's sparse shift-invert Lanczos, :func:`scipy.sparse.linalg.eigsh`).

- Timoshenko links: 3-node quadratic elements (u, v, ψ Lagrange-interpolated), axial and bending
  stiffness with 2-point Gauss (exact), shear kGS(v' − ψ)² with 2-point reduced integration
  (locking-free, as ABAQUS B22 in the paper), consistent mass ρS(u² + v²) + ρIψ² with 3-point
  Gauss (exact);
- Euler-Bernoulli links (EB†): 2-node elements, Hermite cubic v with θ = v', linear u,
  consistent mass ρS(u² + v²) (no rotary inertia, as Appendix B);
- lumped tip bodies M_i (both translations) and J_i (rotation) at each link's end node;
- joints as in :mod:`flexmodal_ros.links.arm`: shared node (rigid), separate rotations φ⁻, φ⁺
  with a spring k_T (elastic), plus the motor angle q_m with inertia B and spring k_m (servo);
  the base translations are clamped.
"""
from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import eigsh

from ..core.errors import InputError
from ..modes import frequencies_and_damping
from ..core.validation import shown

FE_MODELS = ("timoshenko", "euler-bernoulli")
_G2 = (np.array([-1.0, 1.0]) / np.sqrt(3.0), np.array([1.0, 1.0]))
_G3 = (np.array([-np.sqrt(0.6), 0.0, np.sqrt(0.6)]), np.array([5.0, 8.0, 5.0]) / 9.0)


def _quadratic(xi):
    """Shape functions and ξ-derivatives of the 3-node element (nodes at ξ = −1, 0, 1)."""
    N = np.stack([0.5 * xi * (xi - 1.0), 1.0 - xi * xi, 0.5 * xi * (xi + 1.0)], -1)
    dN = np.stack([xi - 0.5, -2.0 * xi, xi + 0.5], -1)
    return N, dN


def timoshenko_element(beam, h):
    """(K, M) 9×9 of a quadratic Timoshenko element of length h, local DOFs (u, v, ψ) per node."""
    ES, EI = beam.E * beam.S, beam.E * beam.I
    kGS, rhoS, rhoI = beam.shear_factor * beam.G * beam.S, beam.rho * beam.S, beam.rho * beam.I
    K, M = np.zeros((9, 9)), np.zeros((9, 9))
    u, v, p = slice(0, 9, 3), slice(1, 9, 3), slice(2, 9, 3)
    jac = h / 2.0
    for xi, w in zip(*_G2):  # axial and bending: exact; shear: reduced
        N, dN = _quadratic(xi)
        B = dN / jac
        K[u, u] += w * jac * ES * np.outer(B, B)
        K[p, p] += w * jac * EI * np.outer(B, B)
        gamma = np.zeros(9)
        gamma[v], gamma[p] = B, -N
        K += w * jac * kGS * np.outer(gamma, gamma)
    for xi, w in zip(*_G3):
        N, _ = _quadratic(xi)
        M[u, u] += w * jac * rhoS * np.outer(N, N)
        M[v, v] += w * jac * rhoS * np.outer(N, N)
        M[p, p] += w * jac * rhoI * np.outer(N, N)
    return K, M


def euler_bernoulli_element(beam, h):
    """(K, M) 6×6 of a Hermite beam + linear rod element of length h, local DOFs (u, v, θ) per node."""
    ES, EI, rhoS = beam.E * beam.S, beam.E * beam.I, beam.rho * beam.S
    K, M = np.zeros((6, 6)), np.zeros((6, 6))
    ax, bd = [0, 3], [1, 2, 4, 5]
    K[np.ix_(ax, ax)] = ES / h * np.array([[1.0, -1.0], [-1.0, 1.0]])
    M[np.ix_(ax, ax)] = rhoS * h / 6.0 * np.array([[2.0, 1.0], [1.0, 2.0]])
    K[np.ix_(bd, bd)] = EI / h ** 3 * np.array([[12, 6 * h, -12, 6 * h], [6 * h, 4 * h * h, -6 * h, 2 * h * h],
                                                [-12, -6 * h, 12, -6 * h], [6 * h, 2 * h * h, -6 * h, 4 * h * h]])
    hh = h * h
    M[np.ix_(bd, bd)] = rhoS * h / 420.0 * np.array([[156, 22 * h, 54, -13 * h], [22 * h, 4 * hh, 13 * h, -3 * hh],
                                                     [54, 13 * h, 156, -22 * h], [-13 * h, -3 * hh, -22 * h, 4 * hh]])
    return K, M


class _Assembler:
    def __init__(self):
        self.rows, self.cols, self.k, self.m = [], [], [], []
        self.count = 0

    def new(self):
        self.count += 1
        return self.count - 1

    def add(self, dofs, K, M):
        """Add element matrices on global DOFs ``dofs`` (−1 = clamped)."""
        dofs = np.asarray(dofs)
        keep = dofs >= 0
        idx = dofs[keep]
        r, c = np.meshgrid(idx, idx, indexing="ij")
        self.rows.append(r.ravel())
        self.cols.append(c.ravel())
        self.k.append(np.asarray(K)[np.ix_(keep, keep)].ravel())
        self.m.append(np.asarray(M)[np.ix_(keep, keep)].ravel())

    def matrices(self):
        r, c = np.concatenate(self.rows), np.concatenate(self.cols)
        shape = (self.count, self.count)
        return (coo_matrix((np.concatenate(self.k), (r, c)), shape).tocsc(),
                coo_matrix((np.concatenate(self.m), (r, c)), shape).tocsc())


def fe_matrices(arm, q, model: str = "timoshenko", elements: int = 50):
    """Sparse (K, M) of the arm at joint angles ``q`` [rad] with ``elements`` per link."""
    if model not in FE_MODELS:
        raise InputError(f"model: the FE cross-check supports {', '.join(FE_MODELS)}, got {shown(model)}")
    if int(elements) < 1:
        raise InputError(f"elements: must be >= 1, got {elements}")
    asm = _Assembler()
    quadratic = model == "timoshenko"
    per_element = 2 if quadratic else 1  # new nodes per element
    alpha = np.cumsum(q)
    joint_xy, phi_minus = (-1, -1), -1  # clamped base
    for i, beam in enumerate(arm.beams):
        c, s = np.cos(alpha[i]), np.sin(alpha[i])
        rot = np.zeros((3, 3))
        rot[0, :2], rot[1, :2], rot[2, 2] = (c, s), (-s, c), 1.0  # local (u, v, ψ) = rot · (X, Y, φ)
        phi_plus = _joint(asm, arm, i, phi_minus)
        nodes = [(*joint_xy, phi_plus)]
        for _ in range(per_element * elements):
            nodes.append((asm.new(), asm.new(), asm.new()))
        h = beam.length / elements
        K, M = (timoshenko_element if quadratic else euler_bernoulli_element)(beam, h)
        span = per_element + 1
        T = np.kron(np.eye(span), rot)
        Kg, Mg = T.T @ K @ T, T.T @ M @ T
        for e in range(elements):
            dofs = [d for node in nodes[per_element * e:per_element * e + span] for d in node]
            asm.add(dofs, Kg, Mg)
        tip = nodes[-1]
        asm.add(tip, np.zeros((3, 3)), np.diag([beam.tip_mass, beam.tip_mass, beam.tip_inertia]))
        joint_xy, phi_minus = tip[:2], tip[2]
    return asm.matrices()


def _joint(asm, arm, i, phi_minus):
    """Rotation DOF of link i's root; joint i's spring / rotor added to the assembler."""
    k_T, k_m, B = arm.joint_stiffness[i], arm.motor_stiffness[i], arm.rotor_inertia[i]
    if np.isinf(k_T) and np.isinf(k_m):
        return phi_minus
    phi_plus = asm.new()
    if np.isinf(k_m):  # spring between φ⁻ (or the ground) and φ⁺
        asm.add([phi_minus, phi_plus], k_T * np.array([[1.0, -1.0], [-1.0, 1.0]]), np.zeros((2, 2)))
        return phi_plus
    q_m = asm.new()  # servo: stretch φ⁺ − φ⁻ − q_m; rotor energy ½ B q̇_m², spring ½ k_m q_m²
    g = np.array([-1.0, 1.0, -1.0])
    asm.add([phi_minus, phi_plus, q_m], (k_T * np.outer(g, g) if np.isfinite(k_T) else np.zeros((3, 3)))
            + np.diag([0.0, 0.0, k_m]), np.diag([0.0, 0.0, B]))
    if np.isinf(k_T):
        raise InputError("FE servo joint needs a finite joint stiffness k_T")
    return phi_plus


def fe_frequencies(arm, q, num_modes: int = 10, model: str = "timoshenko", elements: int = 50) -> np.ndarray:
    """First ``num_modes`` natural frequencies [Hz] of the FE model (ascending)."""
    K, M = fe_matrices(arm, q, model, elements)
    vals = eigsh(K, k=num_modes, M=M, sigma=0.0, which="LM", return_eigenvectors=False)
    return frequencies_and_damping(1j * np.sqrt(np.sort(vals)))[0]        # eigenvalues ω² of (K, M)

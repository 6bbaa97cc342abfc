"""Exact dynamic stiffness of the arm and the Wittrick–Williams count of natural frequencies.

The same boundary-value problem as the paper's M(ω) (:mod:`.characteristic`), written on nodal
displacements instead of solution coefficients, so that it is symmetric and the Wittrick–Williams
theorem applies (Wittrick & Williams, Q. J. Mech. Appl. Math. 24, 1971): the number of natural
frequencies below ω is

    J(ω) = J_0(ω) + s{K(ω)},

s = number of negative eigenvalues of the assembled dynamic stiffness K(ω), J_0 = natural
frequencies of the members with every node clamped. Each link is cut into equal segments short
enough that J_0 = 0 up to the highest frequency asked for, so J(ω) = s{K(ω)}: a count that misses
nothing. The segment bound (Rayleigh quotient of a clamped-clamped Timoshenko segment of length ℓ,
with ‖f‖ ≤ (ℓ/π)‖f'‖ for f(0) = f(ℓ) = 0 and Cauchy-Schwarz) is

    1/ω_cc² ≤ ρS(ℓ/π)⁴/EI + (ρS/kGS + ρI/EI)(ℓ/π)²,    ω_cc,axial = (π/ℓ)√(ES/ρS),

(EB: kGS = ∞, ρI = 0), so every clamped segment frequency lies above ω when the right side is
< 1/ω². Written by hand: no maintained Python library implements Wittrick–Williams.

Member stiffness: first-order state (V, Ψ, T, M)' = A (V, Ψ, T, M) from (2)-(3) with
V' = Ψ + T/kGS, Ψ' = M/EI, T' = −ω²ρS V, M' = −T − ω²ρIΨ. A's characteristic polynomial is
(μ² − s1)(μ² − s2) (s1, s2 the λ² of (28)-(29)), so by Cayley-Hamilton the transfer matrix is exact
in closed form: exp(Aℓ) = C(A²) + A S(A²), C(z) = cosh(√z ℓ), S(z) = sinh(√z ℓ)/√z, each
interpolated linearly in A² through s1, s2. C and S are entire in z, so one formula covers
ω < ω_lim, ω = ω_lim and ω > ω_lim. The rod: (U, N)' = (N/ES, −ω²ρS U).

Nodal unknowns ("frame"): base translations clamped; global X, Y translations and a rotation per
node; at a joint spring the spring stretch δ (and the motor angle q_m of a servo joint), the root
rotation of the next link being φ⁺ = φ⁻ + q_m + δ.
For inextensible links (EB‡) every node of link i moves axially by the link's rigid axial
displacement a_i (a_1 = 0, a_{i+1} = a_i cos θ + v sin θ at the joint), and the link's axial
inertia ρSL acts on a_i.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
import scipy.sparse as sp
from scipy.linalg.lapack import dsytrf, dsytrf_lwork

from .characteristic import bending_roots, section_constants

SEGMENT_MARGIN = 1.05  # clamped segment frequencies must exceed 1.05·ω_max
SERIES_LIMIT = 0.02    # |s|ℓ² below which C, S divided differences use their Taylor series
SERIES_TERMS = 12
CHUNK_BYTES = 32 * 2 ** 20  # K(ω) stacks are assembled this many bytes at a time
DENSE_GATHER_MAX = 96       # up to this many unknowns K(ω) is assembled with the dense gather (faster
                            # for the small frames of ~10 modes; member-local scatter above)


def segment_count(consts, length: float, omega_max: float) -> int:
    """Equal segments of a link so that no clamped segment has a natural frequency ≤
    SEGMENT_MARGIN·omega_max (module docstring bound)."""
    EI, kGS, rhoS, rhoI, ES = consts
    w2 = (SEGMENT_MARGIN * omega_max) ** 2
    a = rhoS / EI
    b = rhoS / kGS + rhoI / EI
    y = (-b + math.sqrt(b * b + 4.0 * a / w2)) / (2.0 * a)  # largest (ℓ/π)² allowed by bending
    if np.isfinite(ES):
        y = min(y, ES / (rhoS * w2))
    return max(1, math.ceil(length / (math.pi * math.sqrt(y))))


def _c_s(z, x):
    """C(z) = cosh(√z x), S(z) = sinh(√z x)/√z (cos, sin/√−z for z < 0; 1, x at z = 0)."""
    r = np.sqrt(np.abs(z)) * x
    pos = z > 0
    hyp, trig = np.where(pos, r, 0.0), np.where(pos, 0.0, r)  # no overflow in the unused branch
    C = np.where(pos, np.cosh(hyp), np.cos(trig))
    root = np.where(z != 0, np.sqrt(np.abs(z)), 1.0)
    S = np.where(z != 0, np.where(pos, np.sinh(hyp), np.sin(trig)) / root, x)
    return C, S


def _divided_differences(s1, s2, x):
    """(C(s2), S(s2), C[s1,s2], S[s1,s2]) with Taylor series where |s|x² is small (no cancellation)."""
    C1, S1 = _c_s(s1, x)
    C2, S2 = _c_s(s2, x)
    gap = s1 - s2
    safe = np.where(gap != 0, gap, 1.0)
    dC, dS = (C1 - C2) / safe, (S1 - S2) / safe
    small = np.maximum(np.abs(s1), np.abs(s2)) * x * x < SERIES_LIMIT
    if np.any(small):
        h = np.ones_like(s1)  # complete homogeneous h_k(s1, s2) = Σ s1^j s2^(k-1-j)
        p2 = np.ones_like(s2)
        tC, tS = np.zeros_like(s1), np.zeros_like(s1)
        xx = x * x
        term_c, term_s = xx / 2.0, xx * x / 6.0  # x^(2k)/(2k)!, x^(2k+1)/(2k+1)! at k = 1
        for k in range(1, SERIES_TERMS):
            tC += h * term_c
            tS += h * term_s
            p2 = p2 * s2
            h = s1 * h + p2
            term_c = term_c * xx / ((2 * k + 1) * (2 * k + 2))
            term_s = term_s * xx / ((2 * k + 2) * (2 * k + 3))
        dC, dS = np.where(small, tC, dC), np.where(small, tS, dS)
    return C2, S2, dC, dS


def member_stiffness(consts, ell, omega) -> np.ndarray:
    """Exact dynamic stiffness (..., 6, 6) of uniform segments of length ``ell`` [m] at frequencies
    ``omega`` [rad/s] (``consts`` = (EI, kGS, ρS, ρI, ES) and ``ell`` broadcast with ``omega``):
    end forces (−N, −T, −M at 0; N, T, M at ℓ) = K · (u0, v0, ψ0, uL, vL, ψL), local axes. For
    inextensible links (ES = inf) the axial entries are zero (handled by the frame). Poles at the
    clamped segment frequencies (kept above the range by :func:`segment_count`)."""
    EI, kGS, rhoS, rhoI, ES = (np.asarray(c, float) for c in consts)
    w2 = np.square(np.asarray(omega, float))
    ell = np.asarray(ell, float)
    s1, s2 = bending_roots(EI, kGS, rhoS, rhoI, np.sqrt(w2))
    shape = np.broadcast(s1, ell).shape
    s1, s2 = np.broadcast_to(s1, shape), np.broadcast_to(s2, shape)
    A = np.zeros(shape + (4, 4))
    A[..., 0, 1] = 1.0
    A[..., 0, 2] = 1.0 / kGS
    A[..., 1, 3] = 1.0 / EI
    A[..., 2, 0] = -w2 * rhoS
    A[..., 3, 1] = -w2 * rhoI
    A[..., 3, 2] = -1.0
    C2, S2, dC, dS = (v[..., None, None] for v in _divided_differences(s1, s2, ell))
    shifted = A @ A - s2[..., None, None] * np.eye(4)
    phi = C2 * np.eye(4) + dC * shifted + A @ (S2 * np.eye(4) + dS * shifted)
    p11, p12, p21, p22 = phi[..., :2, :2], phi[..., :2, 2:], phi[..., 2:, :2], phi[..., 2:, 2:]
    inv12 = np.linalg.inv(p12)
    K = np.zeros(shape + (6, 6))  # bending on (v0, ψ0) = 1:3 and (vL, ψL) = 4:6
    K[..., 1:3, 1:3] = inv12 @ p11
    K[..., 1:3, 4:6] = -inv12
    K[..., 4:6, 1:3] = p21 - p22 @ inv12 @ p11
    K[..., 4:6, 4:6] = p22 @ inv12
    finite = np.isfinite(ES)
    z = -w2 * rhoS / np.where(finite, ES, 1.0)
    C, S = _c_s(z, ell)  # rod transfer [[C, S/ES], [−ω²ρS S, C]]
    k = np.where(finite, ES, 0.0) / S
    K[..., 0, 0] = K[..., 3, 3] = k * C
    K[..., 0, 3] = K[..., 3, 0] = -k
    return K


@dataclass(frozen=True)
class Frame:
    """Nodal unknowns of one configuration (module docstring) and how the parts attach to them.

    ``gather`` (members, 6, N) maps the N unknowns to each segment's local end displacements,
    ``member_link`` its link, ``segments`` per link and ``segment_length``; ``stiffness`` and
    ``mass`` (N, N) are the lumped parts (joint springs; tip bodies, rotors, rigid axial inertia);
    ``consts`` the section constants per link; ``omega_max`` the frequency the segments allow.
    """

    gather: np.ndarray
    member_link: np.ndarray
    segments: tuple
    segment_length: np.ndarray
    stiffness: np.ndarray
    mass: np.ndarray
    consts: tuple
    omega_max: float
    scale: np.ndarray

    @property
    def link_consts(self) -> tuple:
        """Section constants as arrays over the links (EI, kGS, ρS, ρI, ES)."""
        return tuple(np.array(c) for c in zip(*self.consts))

    @property
    def size(self) -> int:
        return self.gather.shape[2]

    @cached_property
    def _scatter(self):
        """(scatter matrix, local gathers) of :func:`_scatter` (built on first use, large frames)."""
        return _scatter(self.gather, self.scale)

    @cached_property
    def scaled_stiffness(self) -> np.ndarray:
        return self.stiffness * self.scale[:, None] * self.scale[None, :]

    @cached_property
    def scaled_mass(self) -> np.ndarray:
        return self.mass * self.scale[:, None] * self.scale[None, :]


class _Dofs:
    """Allocator of unknown indices; rows of linear maps are built as dicts index → coefficient."""

    def __init__(self):
        self.count = 0

    def new(self):
        self.count += 1
        return {self.count - 1: 1.0}


def _combine(*terms):
    out = {}
    for coef, row in terms:
        for k, v in row.items():
            out[k] = out.get(k, 0.0) + coef * v
    return out


def build_frame(arm, q, model: str, omega_max: float) -> Frame:
    """The :class:`Frame` of arm ``arm`` at joint angles ``q`` for beam ``model``, valid for
    frequencies up to ``omega_max`` [rad/s]."""
    consts = tuple(section_constants(b, model) for b in arm.beams)
    inextensible = model == "eb-inextensible"
    segs = tuple(segment_count(c, b.length, omega_max) for c, b in zip(consts, arm.beams))
    dofs = _Dofs()
    zero = {}
    alpha = np.cumsum(np.asarray(q, float))
    members, member_link, lumped_k, lumped_m = [], [], [], []
    trans_prev, rot_prev, axial = None, zero, zero  # joint node translation (X, Y rows), φ⁻, a_i
    for i, beam in enumerate(arm.beams):
        e = np.array([math.cos(alpha[i]), math.sin(alpha[i])])
        nrm = np.array([-e[1], e[0]])
        # joint i: translation shared, rotation φ⁺ (+ rotor)
        if trans_prev is None:
            trans = (zero, zero)
        else:
            trans = trans_prev
        if inextensible:
            axial = _combine((e[0], trans[0]), (e[1], trans[1]))  # a_i = e_i · d_joint
        rot = _joint(arm, i, rot_prev, dofs, lumped_k, lumped_m)
        nodes = [(trans, rot)]
        for k in range(1, segs[i] + 1):
            if inextensible:
                v = dofs.new()
                node_t = (_combine((e[0], axial), (nrm[0], v)), _combine((e[1], axial), (nrm[1], v)))
            else:
                node_t = (dofs.new(), dofs.new())
            nodes.append((node_t, dofs.new()))
        for k in range(segs[i]):
            (t0, r0), (t1, r1) = nodes[k], nodes[k + 1]
            members.append([_combine((e[0], t0[0]), (e[1], t0[1])), _combine((nrm[0], t0[0]), (nrm[1], t0[1])), r0,
                            _combine((e[0], t1[0]), (e[1], t1[1])), _combine((nrm[0], t1[0]), (nrm[1], t1[1])), r1])
            member_link.append(i)
        tip_t, tip_r = nodes[-1]
        lumped_m += [(beam.tip_mass, tip_t[0]), (beam.tip_mass, tip_t[1]), (beam.tip_inertia, tip_r)]
        if inextensible:
            lumped_m.append((beam.rho * beam.S * beam.length, axial))
        trans_prev, rot_prev = tip_t, tip_r
    N = dofs.count
    gather = np.zeros((len(members), 6, N))
    for m, rows in enumerate(members):
        for r, row in enumerate(rows):
            for k, v in row.items():
                gather[m, r, k] += v
    stiffness, mass = _lumped(lumped_k, N), _lumped(lumped_m, N)
    ell = np.array([b.length / m for b, m in zip(arm.beams, segs)])
    member_link = np.array(member_link)
    # congruence scaling (any positive diagonal keeps the inertia): ≈ diagonal of the static stiffness
    EI, _, _, _, ES = (np.array(c) for c in zip(*consts))
    local = np.stack([np.where(np.isfinite(ES), ES, 0.0) / ell, 12 * EI / ell ** 3, 4 * EI / ell], -1)[member_link]
    diag = np.einsum("mrn,mr->n", gather ** 2, np.tile(local, 2)) + np.diagonal(stiffness)
    scale = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
    return Frame(gather, member_link, segs, ell, stiffness, mass, consts, float(omega_max), scale)


def _scatter(gather, scale):
    """Each member touches a few unknowns only (≤ 12, more for inextensible links): (sparse
    (N², members·L²) matrix adding the members' scaled local blocks G_lᵀ K_m G_l into the scaled
    K(ω), local gathers (members, 6, L) restricted to those unknowns). Assembly then costs
    members·L² per frequency instead of members·N² with the dense gather."""
    members, _, N = gather.shape
    used = [np.flatnonzero(np.any(g != 0, axis=0)) for g in gather]
    L = max(1, max(u.size for u in used))
    idx = np.zeros((members, L), int)
    valid = np.zeros((members, L), bool)
    local = np.zeros((members, 6, L))
    for m, u in enumerate(used):
        idx[m, :u.size], valid[m, :u.size] = u, True
        local[m, :, :u.size] = gather[m][:, u] * scale[u]
    rows = (idx[:, :, None] * N + idx[:, None, :]).ravel()
    keep = (valid[:, :, None] & valid[:, None, :]).ravel()
    cols = np.arange(rows.size)
    matrix = sp.csr_matrix((np.ones(int(keep.sum())), (rows[keep], cols[keep])), shape=(N * N, rows.size))
    return matrix, local


def _joint(arm, i, rot_prev, dofs, lumped_k, lumped_m):
    """Rotation row of link i's root; adds joint i's spring / rotor to the lumped lists.

    Joint unknowns are relative (spring stretch δ, motor angle q_m; φ⁺ = φ⁻ + q_m + δ) so that a
    very stiff spring adds k_T on a diagonal entry instead of a nearly singular ±k_T block."""
    k_T, k_m, B = arm.joint_stiffness[i], arm.motor_stiffness[i], arm.rotor_inertia[i]
    rot = rot_prev
    if np.isfinite(k_m):  # servo: motor angle relative to link i−1, inertia B, spring k_m
        q_m = dofs.new()
        lumped_k.append((k_m, q_m))
        lumped_m.append((B, q_m))
        rot = _combine((1.0, rot), (1.0, q_m))
    if np.isfinite(k_T):
        stretch = dofs.new()
        lumped_k.append((k_T, stretch))
        rot = _combine((1.0, rot), (1.0, stretch))
    return rot


def _lumped(items, N):
    out = np.zeros((N, N))
    for coef, row in items:
        g = np.zeros(N)
        for k, v in row.items():
            g[k] += v
        out += coef * np.outer(g, g)
    return out


def dynamic_stiffness(frame: Frame, omega) -> np.ndarray:
    """K(ω) (B, N, N) of the assembled arm at ``omega`` (B,) [rad/s], scaled by the congruence
    diag(frame.scale) (which keeps the inertia, hence the count): Σ_m G_mᵀ K_m G_m from each
    member's local block (:func:`_scatter`) plus the lumped springs and masses. Callers with many
    frequencies go through :func:`_chunks` (memory B·N²·8 bytes)."""
    w = np.atleast_1d(np.asarray(omega, float))
    per_link = member_stiffness(frame.link_consts, frame.segment_length, w[:, None])  # (B, n, 6, 6)
    Km = per_link[:, frame.member_link]  # (B, members, 6, 6)
    N = frame.size
    if N <= DENSE_GATHER_MAX:            # Σ_m G_mᵀ K_m G_m as two matrix products over the stacked members
        G = frame.gather
        members = G.shape[0]
        K = G.reshape(6 * members, N).T @ (Km @ G).reshape(w.size, 6 * members, N)
        K *= frame.scale[:, None] * frame.scale[None, :]
    else:
        scatter, G = frame._scatter
        blocks = np.swapaxes(G, 1, 2)[None] @ Km @ G[None]              # (B, members, L, L)
        K = (scatter @ blocks.reshape(w.size, -1).T).T.reshape(w.size, N, N)
    K += frame.scaled_stiffness
    K -= (w * w)[:, None, None] * frame.scaled_mass
    return K


def _chunks(frame: Frame, omega):
    """(frequencies, K stack) in pieces of at most CHUNK_BYTES."""
    w = np.atleast_1d(np.asarray(omega, float))
    step = max(1, CHUNK_BYTES // (8 * frame.size * frame.size))
    for start in range(0, w.size, step):
        yield dynamic_stiffness(frame, w[start:start + step])


def determinant(frame: Frame, omega) -> tuple:
    """(sign, log|det|) of the scaled K(ω) (B,) (LU): the sign is (−1)^J(ω), so it flips at
    every natural frequency and nowhere else below frame.omega_max."""
    parts = [np.linalg.slogdet(K) for K in _chunks(frame, omega)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def count_below(frame: Frame, omega) -> np.ndarray:
    """J(ω) (B,) for ``omega`` (B,) ≤ frame.omega_max: the number of natural frequencies strictly
    below ω (Wittrick–Williams with J_0 = 0) = negative eigenvalues of K(ω), read off the
    symmetric-indefinite LDLᵀ factorization (LAPACK dsytrf, Bunch–Kaufman; Sylvester's law)."""
    return np.array([negative_eigenvalues(k) for K in _chunks(frame, omega) for k in K], dtype=int)


@lru_cache(maxsize=64)
def _dsytrf_lwork(n):
    """Optimal workspace of dsytrf (its default, lwork = n, falls back to the much slower unblocked
    algorithm; benchmarks/bench_links.py)."""
    return max(1, int(dsytrf_lwork(n, lower=1)[0]))


def negative_eigenvalues(matrix: np.ndarray) -> int:
    """Number of negative eigenvalues of a symmetric matrix from its LDLᵀ factorization: D has
    1×1 blocks and 2×2 blocks (negative ipiv pairs), counted by sign and by determinant/trace."""
    ldu, ipiv, info = dsytrf(matrix, lower=1, lwork=_dsytrf_lwork(matrix.shape[0]))
    if info < 0:
        raise ValueError(f"dsytrf: illegal argument {-info}")
    d = np.diagonal(ldu)
    count, k, n = 0, 0, d.size
    while k < n:
        if ipiv[k] > 0:
            count += d[k] < 0
            k += 1
        else:
            a, b, c = d[k], ldu[k + 1, k], d[k + 1]
            det = a * c - b * b
            count += 1 if det < 0 else (2 if a + c < 0 else 0)
            k += 2
    return count

"""Static expansion (x = q, p = n) of the closed-loop flexible-joint AMA (thesis ch. 2) — beyond the
paper, which treats flexible links only.

The linearized closed loop (2.9)-(2.11) depends on the configuration through M(q) and
K_G(q) = ∂g/∂q − ∂(Jᵀτ_ext)/∂q (2.12) only:

    M̄ = blkdiag(M(q), B),  D̄ = const,  K̄ = [[K_G(q) + K W², −K W], [−K W, K + K_P]].

Their Taylor coefficients come from the package's symbolic recursive Newton–Euler model
(:mod:`flexmodal_ros.robot.inverse_dynamics.symbolic`, built from the same Pinocchio model): M^(σ) from
M(q) = ∂τ/∂q̈, and K_G^(σ) from the coefficients of G(q) = g(q) − Jᵀ(q)τ_ext one degree higher,
K_G^(σ)[:, j] = (σ_j + 1) G^(σ+e_j). The Jacobian of the tool point for the wrench is written
symbolically from the Pinocchio joint placements (forward kinematics with Rodrigues rotations).

:class:`PathSegmentSystem` is the same closed loop along one straight joint-space segment,
q(s) = q_a + s (q_b − q_a), expanded in the scalar s (p = 1): the coefficients of M(q(s)) and
K_G(q(s)) = ∂G/∂q (q(s)) in s (one symbolic Jacobian of G, then the univariate Taylor map with q_a
and q_b − q_a as frozen inputs). Along a path this needs t + 1 coefficients instead of C(n+t, t).
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..robot.inverse_dynamics.symbolic import canonical_chain, joint_axis, rnea_jets
from ..flexible_joint.linear_model import assemble
from ..flexible_joint.ama import check_configurations, linearized_batch, modal_analysis_batch
from ..robot.model import create_data
from .multiindex import addend_count, multi_index_set
from .taylor import TaylorMap

_CACHE: dict = {}          # id(pin model) → (pin model, {(wrench bytes, order): (TaylorMap M, TaylorMap G)})
_SEGMENT_CACHE: dict = {}  # id(pin model) → (pin model, {(wrench bytes, order): TaylorMap [upper M; vec K_G]})


def _symbolic_inertia_and_load(model):
    """SX symbols q and (upper triangle of M(q) as a column, G(q) = g(q) − Jᵀ(q) τ_ext)."""
    n = model.n
    q, qdd = ca.SX.sym("q", n), ca.SX.sym("qdd", n)
    zero = ca.SX.zeros(n, 1)
    tau = rnea_jets(canonical_chain(model.pin), model.pin.gravity.linear, [q, zero, qdd, zero, zero])[0]
    M = ca.jacobian(tau, qdd)
    upper = ca.vertcat(*[M[i, j] for i, j in zip(*np.triu_indices(n))])
    G = ca.substitute(tau, qdd, zero)
    if np.any(model.wrench):
        G = G - _generalized_wrench(model, q)
    return q, upper, G


def _generalized_wrench(model, q):
    """Jᵀ(q) τ_ext for the constant wrench [f; μ] (frame 0) at the tool point E, symbolic."""
    pin_model = model.pin
    rot, pos, axes = [ca.SX.eye(3)], [ca.SX.zeros(3, 1)], [None]
    for i in range(1, pin_model.njoints):
        axis, revolute = joint_axis(pin_model.joints[i])
        placement = pin_model.jointPlacements[i]
        parent = pin_model.parents[i]
        R = ca.mtimes(rot[parent], ca.SX(placement.rotation))
        p = pos[parent] + ca.mtimes(rot[parent], ca.SX(placement.translation))
        a = ca.SX(axis)
        qi = q[pin_model.joints[i].idx_q]
        if revolute:
            K = ca.skew(a)
            R = ca.mtimes(R, ca.SX.eye(3) + ca.sin(qi) * K + (1 - ca.cos(qi)) * ca.mtimes(K, K))
        else:
            p = p + ca.mtimes(R, a) * qi
        rot.append(R)
        pos.append(p)
        axes.append((ca.mtimes(R, a), revolute))
    frame = pin_model.frames[model.ee_frame_id]
    j = frame.parentJoint
    p_E = pos[j] + ca.mtimes(rot[j], ca.SX(frame.placement.translation))
    f, mu = ca.SX(model.wrench[:3]), ca.SX(model.wrench[3:])
    out = ca.mtimes(ca.jacobian(p_E, q).T, f)
    chain, k = [], j
    while k > 0:
        chain.append(k)
        k = pin_model.parents[k]
    for k in chain:
        axis_world, revolute = axes[k]
        if revolute:
            idx = pin_model.joints[k].idx_q
            out[idx] += ca.dot(axis_world, mu)
    return out


def _cached(cache, model, order, build, stop=None):
    """Taylor maps cached per Pinocchio model and wrench: the stored one of the lowest order ≥
    ``order`` (its leading rows serve a lower order), else ``build()``, stored under ``order``."""
    entry = cache.get(id(model.pin))
    if entry is None or entry[0] is not model.pin:
        entry = (model.pin, {})
        cache[id(model.pin)] = entry
    key = model.wrench.tobytes()
    built = {o: value for (w, o), value in entry[1].items() if w == key and o >= order}
    if built:
        return built[min(built)]
    value = build()
    entry[1][(key, order)] = value
    return value


def taylor_maps(model, order: int, stop=None):
    """(TaylorMap of upper(M) to degree t, TaylorMap of G to degree t+1), cached per model;
    ``stop`` (a :class:`~flexmodal_ros.core.workers.StopToken`) is checked between degrees."""
    def build():
        q, upper, G = _symbolic_inertia_and_load(model)
        return (TaylorMap(upper, q, order, name="mass_taylor", stop=stop),
                TaylorMap(G, q, order + 1, name="load_taylor", stop=stop))
    return _cached(_CACHE, model, order, build)


class FlexibleJointSystem:
    """The closed loop of a :class:`~flexmodal_ros.robot.model.FlexibleJointModel` as a parametric system
    in x = q (gains, tool and wrench of ``model``); ``q0`` the default expansion point."""

    kind = "flexible_joint"

    def __init__(self, model, q0=None):
        self.model = model
        self.parameter_names = tuple(model.joint_names)
        self.x0 = np.zeros(model.n) if q0 is None else check_configurations(model, q0, "q0")[0]
        self.num_dof = 2 * model.n
        self.row_names = tuple(model.joint_names) + tuple(f"{j}_motor" for j in model.joint_names)

    def symbolic_entries(self, order: int) -> int:
        """Coefficient expressions differentiated symbolically for ``order`` (the size bound of
        :func:`~.multiindex.check_expansion_size`): upper(M) to degree t, G to degree t + 1."""
        n = self.model.n
        return n * (n + 1) // 2 * addend_count(n, order) + n * addend_count(n, order + 1)

    def describe(self) -> dict:
        m = self.model
        return {"system": "flexible_joint", "robot": m.name, "parameters": ["positions"],
                "kp": m.kp.tolist(), "kd": m.kd.tolist(), "tool_mass": float(m.tool.mass),
                "wrench": m.wrench.tolist(), "rows": list(self.row_names)}

    def taylor(self, x0, order: int, stop=None):
        """(MultiIndexSet, M̄^(σ), D̄^(σ), K̄^(σ)) with (N, 2n, 2n) coefficient stacks at x0."""
        m, n = self.model, self.model.n
        x0 = check_configurations(m, x0, "x0")[0]
        mset = multi_index_set(n, order)
        N = len(mset)
        mass_map, load_map = taylor_maps(m, order, stop)
        upper = mass_map(x0)[:N]
        load = load_map(x0)                                     # degree ≤ order + 1 (or more)
        M = np.zeros((N, n, n))
        iu = np.triu_indices(n)
        M[:, iu[0], iu[1]] = upper
        M[:, iu[1], iu[0]] = upper
        shifts = multi_index_set(n, order + 1).shifts[:N]       # row of σ + e_j
        factor = mset.exponents + 1.0                           # σ_j + 1
        KG = np.transpose(load[shifts] * factor[:, :, None], (0, 2, 1))   # [σ, i, j]
        Mbar, Dbar, Kbar = (np.zeros((N, 2 * n, 2 * n)) for _ in range(3))
        Mbar[0], Dbar[0], Kbar[0] = assemble(M[0], KG[0], m.k, m.W, m.d_f, m.d_fm, m.B, m.kp, m.kd)
        Mbar[1:, :n, :n] = M[1:]
        Kbar[1:, :n, :n] = KG[1:]
        return mset, Mbar, Dbar, Kbar

    def matrices(self, xs):
        """Exact M̄, D̄, K̄ stacks (m, 2n, 2n) at configurations xs (m, n) (2.9)-(2.11)."""
        qs = check_configurations(self.model, xs, "x")
        return linearized_batch(self.model, create_data(self.model), qs)[0]

    def exact_modes(self, xs):
        """:class:`~flexmodal_ros.flexible_joint.ama.ModalResult` (exact AMA) at configurations xs."""
        return modal_analysis_batch(self.model, check_configurations(self.model, xs, "x"), workers=1)


def segment_taylor_map(model, order: int, stop=None) -> TaylorMap:
    """TaylorMap (s0, q_a, Δq) → (order + 1, n(n+1)/2 + n²) coefficients in s of
    [upper(M); vec(K_G)] at q = q_a + s Δq (vec column-major), cached per model, wrench and order."""
    def build():
        q, upper, G = _symbolic_inertia_and_load(model)
        start, step, s = ca.SX.sym("q_a", model.n), ca.SX.sym("dq", model.n), ca.SX.sym("s")
        outputs = ca.substitute(ca.vertcat(upper, ca.vec(ca.jacobian(G, q))), q, start + s * step)
        return TaylorMap(outputs, s, order, frozen=(start, step), name="segment_taylor", stop=stop)
    return _cached(_SEGMENT_CACHE, model, order, build)


class PathSegmentSystem:
    """The closed loop of ``model`` along the straight joint-space segment from ``start`` to ``end``
    (n,) as a parametric system in x = s (q = start + s (end − start), s = 0 at start, 1 at end):
    ``taylor``, ``matrices``, ``exact_modes`` as :class:`FlexibleJointSystem`."""

    kind = "flexible_joint_segment"
    parameter_names = ("s",)

    def __init__(self, model, start, end):
        self.model = model
        self.start = check_configurations(model, start, "start")[0]
        self.step = check_configurations(model, end, "end")[0] - self.start
        self.x0 = np.zeros(1)
        self.num_dof = 2 * model.n
        self.row_names = tuple(model.joint_names) + tuple(f"{j}_motor" for j in model.joint_names)

    def describe(self) -> dict:
        m = self.model
        return {"system": self.kind, "robot": m.name, "parameters": ["s"], "start": self.start.tolist(),
                "end": (self.start + self.step).tolist(), "kp": m.kp.tolist(), "kd": m.kd.tolist(),
                "tool_mass": float(m.tool.mass), "wrench": m.wrench.tolist(), "rows": list(self.row_names)}

    def configurations(self, xs) -> np.ndarray:
        """q(s) (m, n) for s values ``xs`` (m,) or (m, 1)."""
        return self.start + np.reshape(np.asarray(xs, float), (-1, 1)) * self.step

    def taylor(self, x0, order: int, stop=None):
        """(MultiIndexSet (p = 1), M̄^(d), D̄^(d), K̄^(d)) with (order + 1, 2n, 2n) stacks at s = x0."""
        m, n = self.model, self.model.n
        x0 = np.reshape(np.asarray(x0, float), (1,))
        N = order + 1
        coeffs = segment_taylor_map(m, order, stop)(x0, self.start, self.step)[:N]
        iu = np.triu_indices(n)
        M = np.zeros((N, n, n))
        M[:, iu[0], iu[1]] = coeffs[:, :iu[0].size]
        M[:, iu[1], iu[0]] = coeffs[:, :iu[0].size]
        KG = np.swapaxes(coeffs[:, iu[0].size:].reshape(N, n, n), 1, 2)     # column-major vec
        Mbar, Dbar, Kbar = (np.zeros((N, 2 * n, 2 * n)) for _ in range(3))
        Mbar[0], Dbar[0], Kbar[0] = assemble(M[0], KG[0], m.k, m.W, m.d_f, m.d_fm, m.B, m.kp, m.kd)
        Mbar[1:, :n, :n] = M[1:]
        Kbar[1:, :n, :n] = KG[1:]
        return multi_index_set(1, order), Mbar, Dbar, Kbar

    def matrices(self, xs):
        """Exact M̄, D̄, K̄ stacks (m, 2n, 2n) at s values xs (2.9)-(2.11)."""
        return linearized_batch(self.model, create_data(self.model), self.configurations(xs))[0]

    def exact_modes(self, xs):
        """:class:`~flexmodal_ros.flexible_joint.ama.ModalResult` (exact AMA) at s values xs."""
        return modal_analysis_batch(self.model, self.configurations(xs), workers=1)

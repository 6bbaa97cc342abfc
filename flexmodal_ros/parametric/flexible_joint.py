"""Static expansion (x = q, p = n) of the closed-loop flexible-joint AMA (thesis ch. 2) — beyond the
paper, which treats flexible links only.

The linearized closed loop (2.9)-(2.11) depends on the configuration through M(q) and
K_G(q) = ∂g/∂q − ∂(Jᵀτ_ext)/∂q (2.12) only:

    M̄ = blkdiag(M(q), B),  D̄ = const,  K̄ = [[K_G(q) + K W², −K W], [−K W, K + K_P]].

Their Taylor coefficients come from the package's symbolic recursive Newton–Euler model
(:mod:`flexmodal_ros.inverse_dynamics.symbolic`, built from the same Pinocchio model): M^(σ) from
M(q) = ∂τ/∂q̈, and K_G^(σ) from the coefficients of G(q) = g(q) − Jᵀ(q)τ_ext one degree higher,
K_G^(σ)[:, j] = (σ_j + 1) G^(σ+e_j). The Jacobian of the tool point for the wrench is written
symbolically from the Pinocchio joint placements (forward kinematics with Rodrigues rotations).
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..inverse_dynamics.symbolic import canonical_chain, joint_axis, rnea_jets
from ..linearize import assemble
from ..modal import check_configurations, linearized_batch, modal_analysis_batch
from ..model import create_data
from .multiindex import multi_index_set
from .taylor import TaylorMap

_CACHE: dict = {}          # id(pin model) → (pin model, {(wrench bytes, order): (TaylorMap M, TaylorMap G)})


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


def taylor_maps(model, order: int):
    """(TaylorMap of upper(M) to degree t, TaylorMap of G to degree t+1), cached per model."""
    entry = _CACHE.get(id(model.pin))
    if entry is None or entry[0] is not model.pin:
        entry = (model.pin, {})
        _CACHE[id(model.pin)] = entry
    key = model.wrench.tobytes()
    built = {o: maps for (w, o), maps in entry[1].items() if w == key and o >= order}
    if built:
        return built[min(built)]
    q, upper, G = _symbolic_inertia_and_load(model)
    maps = (TaylorMap(upper, q, order, name="mass_taylor"), TaylorMap(G, q, order + 1, name="load_taylor"))
    entry[1][(key, order)] = maps
    return maps


class FlexibleJointSystem:
    """The closed loop of a :class:`~flexmodal_ros.model.FlexibleJointModel` as a parametric system
    in x = q (gains, tool and wrench of ``model``); ``q0`` the default expansion point."""

    kind = "flexible_joint"

    def __init__(self, model, q0=None):
        self.model = model
        self.parameter_names = tuple(model.joint_names)
        self.x0 = np.zeros(model.n) if q0 is None else check_configurations(model, q0, "q0")[0]
        self.num_dof = 2 * model.n
        self.row_names = tuple(model.joint_names) + tuple(f"{j}_motor" for j in model.joint_names)

    def describe(self) -> dict:
        m = self.model
        return {"system": "flexible_joint", "robot": m.name, "parameters": ["positions"],
                "kp": m.kp.tolist(), "kd": m.kd.tolist(), "tool_mass": float(m.tool.mass),
                "wrench": m.wrench.tolist(), "rows": list(self.row_names)}

    def taylor(self, x0, order: int):
        """(MultiIndexSet, M̄^(σ), D̄^(σ), K̄^(σ)) with (N, 2n, 2n) coefficient stacks at x0."""
        m, n = self.model, self.model.n
        x0 = check_configurations(m, x0, "x0")[0]
        mset = multi_index_set(n, order)
        N = len(mset)
        mass_map, load_map = taylor_maps(m, order)
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
        """:class:`~flexmodal_ros.modal.ModalResult` (exact AMA) at configurations xs."""
        return modal_analysis_batch(self.model, check_configurations(self.model, xs, "x"), workers=1)



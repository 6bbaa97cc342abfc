"""Numeric reference of the flexible-joint feedforward: Pinocchio, no symbolic code, no finite differences.

* τ (4.6): ``pinocchio.rnea``.
* τ' = ∂τ/∂q q' + ∂τ/∂q' q'' + M q''' from ``pinocchio.computeRNEADerivatives``.
* τ'': Pinocchio exposes no second-order RNEA derivatives in Python, so τ'' comes from a spatial
  (Featherstone, body coordinates) RNEA written with Pinocchio's Motion/Force/SE3 algebra and
  differentiated analytically in time with d/dt(ⁱX_λ m) = ⁱX_λ m' - (S q') × (ⁱX_λ m) and d/dt(^λX_i* f) = ^λX_i* (f' + (S q') ×* f).
  This is a different formulation (6-D spatial vectors, Pinocchio's frames) from the generated
  3-D Newton-Euler code of :mod:`.symbolic`.
* q_m, q_m', q_m'', τ_m: (4.7)-(4.10) via :func:`.symbolic.flexible_joint_quantities`.
"""
from math import comb

import numpy as np
import pinocchio as pin

from .symbolic import flexible_joint_quantities, joint_axis


def _subspace(joint_model):
    """Motion subspace S (pin.Motion in the joint frame) of a 1-DOF revolute/prismatic joint."""
    axis, revolute = joint_axis(joint_model)
    return pin.Motion(np.zeros(3), axis) if revolute else pin.Motion(axis, np.zeros(3))


def _leibniz(u, v, order):
    """Derivatives 0..order of u × v (motion × motion, or motion ×* force) for jets u, v."""
    out = []
    for k in range(order + 1):
        acc = u[0].cross(v[k])
        for l in range(1, k + 1):
            acc = acc + u[l].cross(v[k - l]) * float(comb(k, l))
        out.append(acc)
    return out


def _transform(jet, w, apply, sign):
    """Jet of X(q) m where d/dt(X m) = X (m' + sign · w × m); w: jet of the joint twist S q'
    expressed in the frame of m (S in frame λ for ⁱX_λ, in frame i for ^λX_i*)."""
    h, out = list(jet), []
    for k in range(len(jet)):
        out.append(apply(h[0]))
        if k + 1 < len(jet):
            cross = _leibniz(w, h, len(h) - 2)
            h = [h[j + 1] + cross[j] * sign for j in range(len(h) - 1)]
    return out


def rnea_second_derivative(pin_model, data, q, qd, qdd, q3, q4):
    """τ'' [N m/s² or N/s²] along a trajectory with derivatives q..q'''' (spatial RNEA jets)."""
    pin.forwardKinematics(pin_model, data, q)
    n = pin_model.nv
    zero_m = pin.Motion.Zero()
    qs = (qd, qdd, q3, q4)
    vel, acc, force, subspaces = [None] * (n + 1), [None] * (n + 1), [None] * (n + 1), [None] * (n + 1)
    vel[0] = [zero_m] * 3
    acc[0] = [pin.Motion(-pin_model.gravity.linear, np.zeros(3)), zero_m, zero_m]
    for i in range(1, n + 1):
        S = subspaces[i] = _subspace(pin_model.joints[i])
        X, lam, idx = data.liMi[i], pin_model.parents[i], pin_model.joints[i].idx_v
        w = [S * float(qs[k][idx]) for k in range(3)]
        w_parent = [X.act(x) for x in w]                      # the same joint twist in frame λ
        v = _transform(vel[lam], w_parent, X.actInv, -1.0)
        v = [v[k] + w[k] for k in range(3)]
        a = _transform(acc[lam], w_parent, X.actInv, -1.0)
        vs = _leibniz(v, w, 2)
        a = [a[k] + S * float(qs[k + 1][idx]) + vs[k] for k in range(3)]
        Iv = [pin_model.inertias[i] * x for x in v]
        force[i] = [pin_model.inertias[i] * a[k] + c for k, c in enumerate(_leibniz(v, Iv, 2))]
        vel[i], acc[i] = v, a
    tau_dd = np.zeros(n)
    for i in range(n, 0, -1):
        S, lam, idx = subspaces[i], pin_model.parents[i], pin_model.joints[i].idx_v
        tau_dd[idx] = S.vector.dot(force[i][2].vector)
        if lam > 0:
            w = [S * float(qs[k][idx]) for k in range(3)]
            up = _transform(force[i], w, data.liMi[i].act, 1.0)
            force[lam] = [force[lam][k] + up[k] for k in range(3)]
    return tau_dd


def rigid_terms(pin_model, data, q, qd, qdd, q3, q4):
    """(τ, τ', τ'') of (4.6) from Pinocchio (RNEA, its analytic derivatives, spatial jets)."""
    tau = pin.rnea(pin_model, data, q, qd, qdd).copy()
    dq, dv, da = pin.computeRNEADerivatives(pin_model, data, q, qd, qdd)
    M = np.triu(da) + np.triu(da, 1).T
    tau_d = dq @ qd + dv @ qdd + M @ q3
    return tau, tau_d, rnea_second_derivative(pin_model, data, q, qd, qdd, q3, q4)


def flexible_feedforward(model, q, qd, qdd, q3, q4):
    """All seven feedforward quantities (τ, τ', τ'', q_m, q_m', q_m'', τ_m) as numpy arrays."""
    data = model.pin.createData()
    tau, tau_d, tau_dd = rigid_terms(model.pin, data, q, qd, qdd, q3, q4)
    motor = flexible_joint_quantities(model.W, model.k, model.d_f, model.d_c, model.d_fm, model.d_cm,
                                      model.B, q, qd, qdd, q3, tau, tau_d, tau_dd, np.sign)
    return (tau, tau_d, tau_dd) + tuple(motor)

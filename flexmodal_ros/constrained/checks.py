"""Finite-difference linearizations of the *nonlinear* constrained dynamics (verification only).

The product computes every derivative exactly (AD or analytic); these functions difference the
nonlinear residuals of the three formulations instead, so that tests (and users) can confirm
that each linearization is the derivative of the model it claims to linearize:

* RCS: H₂(q, q̇, q̈, λ) = {M(q)q̈ + Φ_q(q)ᵀλ − f(q, q̇, u); Φ(q)} (7) → K_q, C_q, M, Φ_q, F;
* MCS: H₁ on the constraint manifold (3) parametrized by the independent coordinates z of a
  coordinate partitioning (dependent ones by Newton, q̇ = R(q)ż) → K_r, C_r, M_r, F_r;
* UCS: H₃(q, q̇, q̈) = Mq̈ + Φ_qᵀα(Φ̈ + 2ξωΦ̇ + ω²Φ) − f (12), Φ̇ = Φ_q q̇,
  Φ̈ = Φ_q q̈ + Φ̇_q q̇ → K_p, C_p, M_p, F_p.

Central differences with step h(1 + |x_i|).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .equilibrium import Equilibrium, project_onto_constraints
from .linearizations import Penalty
from .linearizations import mcs_linearization, ucs_linearization


def jacobian_fd(fun, x, h=1e-6):
    """Central-difference Jacobian of ``fun`` (vector → vector) at ``x``."""
    x = np.asarray(x, float)
    cols = []
    for i in range(x.size):
        step = h * (1.0 + abs(x[i]))
        e = np.zeros_like(x)
        e[i] = step
        cols.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * step))
    return np.column_stack(cols) if cols else np.zeros((np.asarray(fun(x)).size, 0))


def rcs_fd(system, eq: Equilibrium, h=1e-6, data=None) -> dict:
    """Finite-difference K_q, C_q, M, Φ_q, F of the RCS residual H₂ (7) about ``eq``."""
    n, q0, lam, u0, t = system.n, eq.q, eq.multipliers, eq.u, eq.t
    zero = np.zeros(n)

    def h2(q, qd, qdd, lam_, u):
        dyn = (system.mass(q, data) @ qdd + system.constraint_jacobian(q, t, data).T @ lam_
               - system.force(q, qd, u, t, data))
        return np.concatenate([dyn, system.constraints(q, t, data)])

    return {"K": jacobian_fd(lambda q: h2(q, zero, zero, lam, u0), q0, h)[:n],
            "C": jacobian_fd(lambda v: h2(q0, v, zero, lam, u0), zero, h)[:n],
            "M": jacobian_fd(lambda a: h2(q0, zero, a, lam, u0), zero, h)[:n],
            "phi_q": jacobian_fd(lambda q: h2(q, zero, zero, lam, u0), q0, h)[n:],
            "F": -jacobian_fd(lambda u: h2(q0, zero, zero, lam, u), u0, h)[:n]}


def mcs_fd(system, eq: Equilibrium, independent, h=1e-6, data=None) -> dict:
    """Finite-difference K_r, C_r, M_r, F_r of H₁ (3) in the independent coordinates
    ``independent`` (names), with q(z) on the manifold and R = ∂q/∂z = [I; −Φ_d⁻¹Φ_i]."""
    idx = np.array([system.index(c) for c in independent])
    dep = np.setdiff1d(np.arange(system.n), idx)
    t, u0 = eq.t, eq.u

    def q_of(z):
        q = np.array(eq.q)
        q[idx] = z

        class _Dependent:
            name, constraint_names = system.name, system.constraint_names

            @staticmethod
            def constraints(x, t_=0.0, data_=None):
                q[dep] = x
                return system.constraints(q, t, data)

            @staticmethod
            def constraint_jacobian(x, t_=0.0, data_=None):
                q[dep] = x
                return system.constraint_jacobian(q, t, data)[:, dep]

        q[dep] = project_onto_constraints(_Dependent, q[dep])
        return q

    def basis(q):
        jac = system.constraint_jacobian(q, t, data)
        R = np.zeros((system.n, idx.size))
        R[idx, np.arange(idx.size)] = 1.0
        R[dep] = -sla.solve(jac[:, dep], jac[:, idx])
        return R

    z0 = eq.q[idx]
    R0 = basis(eq.q)

    def h1(z, zd, zdd, u):
        q = q_of(z)
        R = basis(q)
        return R.T @ (system.mass(q, data) @ (R @ zdd) - system.force(q, R @ zd, u, t, data))

    zero = np.zeros(idx.size)
    return {"K": jacobian_fd(lambda z: h1(z, zero, zero, u0), z0, h),
            "C": jacobian_fd(lambda v: h1(z0, v, zero, u0), zero, h),
            "M": jacobian_fd(lambda a: h1(z0, zero, a, u0), zero, h),
            "F": -jacobian_fd(lambda u: h1(z0, zero, zero, u), u0, h), "basis": R0}


def ucs_fd(system, q_penalty, u, penalty: Penalty, t=0.0, h=1e-6, data=None) -> dict:
    """Finite-difference K_p, C_p, M_p, F_p of the penalty residual H₃ (12) about ``q_penalty``."""
    alpha, theta, omega2 = penalty.alpha, 2 * penalty.xi * penalty.omega, penalty.omega ** 2
    n, q0, u0 = system.n, np.asarray(q_penalty, float), np.asarray(u, float)
    zero = np.zeros(n)

    def h3(q, qd, qdd, u_):
        jac = system.constraint_jacobian(q, t, data)
        phi = system.constraints(q, t, data)
        phi_dot = jac @ qd
        phi_ddot = jac @ qdd + system.constraint_bias(q, qd, t, data)
        lam = alpha * (phi_ddot + theta * phi_dot + omega2 * phi)
        return system.mass(q, data) @ qdd + jac.T @ lam - system.force(q, qd, u_, t, data)

    return {"K": jacobian_fd(lambda q: h3(q, zero, zero, u0), q0, h),
            "C": jacobian_fd(lambda v: h3(q0, v, zero, u0), zero, h),
            "M": jacobian_fd(lambda a: h3(q0, zero, a, u0), zero, h),
            "F": -jacobian_fd(lambda u_: h3(q0, zero, zero, u_), u0, h)}


def relative_error(a, b) -> float:
    """max |a − b| / max(|b|) (0 when both vanish)."""
    a, b = (np.asarray(x.toarray() if hasattr(x, "toarray") else x, float) for x in (a, b))
    scale = np.abs(b).max() if b.size else 0.0
    return float(np.abs(a - b).max() / scale) if scale > 0 else float(np.abs(a - b).max() if a.size else 0.0)


def robot_state_matrix_fd(system, point, h=1e-7):
    """State matrix of a closed-chain robot about its set-point by finite differences of an
    *independent* nonlinear model: Pinocchio's constrained forward dynamics
    (``pinocchio.constraintDynamics`` with a ``RigidConstraintModel`` per loop closure, CONTACT_3D
    between the two frames, proximal solver) for the links, the motor equations of
    :mod:`~flexmodal_ros.constrained.closed_chain` for the rotors. State [q; q_m; q̇; q̇_m]; the
    linearization has zero eigenvalues for the constraint-drift directions (index-1 form) besides
    the 2(n − m) physical ones. Closures must be point or planar closures of planar motion."""
    # deferred: Pinocchio
    import pinocchio as pin

    robot = system.robot
    model, data = robot.pin, robot.pin.createData()
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for _, a, b, _ in robot.closures:
        fa, fb = model.frames[a], model.frames[b]
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, model, fa.parentJoint,
                                      fa.placement, fb.parentJoint, fb.placement,
                                      pin.ReferenceFrame.LOCAL)
        models.append(cm)
        datas.append(cm.createData())
    pin.initConstraintDynamics(model, data, models, datas)
    settings = pin.ProximalSettings(1e-14, 1e-10, 200)
    nq, na = robot.n, robot.actuated.size
    damping = np.array(robot.passive_damping, float)
    damping[robot.actuated] = robot.d_f
    W = robot.W

    def rhs(x):
        q, q_m, v, v_m = x[:nq], x[nq:nq + na], x[nq + na:2 * nq + na], x[2 * nq + na:]
        spring = robot.k * (W * q[robot.actuated] - q_m)
        tau = -damping * v
        tau[robot.actuated] -= W * spring
        acc = pin.constraintDynamics(model, data, q, v, tau, models, datas, settings)
        tau_m = system.reference - robot.kp * q_m - robot.kd * v_m
        return np.concatenate([v, v_m, acc, (-robot.d_fm * v_m + spring + tau_m) / robot.B])

    x0 = np.concatenate([point.q, point.motor, np.zeros(nq + na)])
    return jacobian_fd(rhs, x0, h), float(np.abs(rhs(x0)).max())


def linearization_fd_errors(system, eq: Equilibrium, independent, penalty: Penalty, h=1e-6) -> dict:
    """Relative errors of the three exact linearizations against the finite-difference ones
    (:func:`rcs_fd`, :func:`mcs_fd` with the coordinates ``independent``, :func:`ucs_fd`):
    ``{"rcs": {"K": …, "C": …, "M": …, "phi_q": …, "F": …}, "mcs": {…}, "ucs": {…}}``."""

    terms = system.terms(eq.q, eq.u, eq.multipliers, eq.t)
    fd = rcs_fd(system, eq, h)
    exact = {"K": terms.hessian - terms.f_q, "C": -terms.f_qd, "M": terms.M, "phi_q": terms.phi_q,
             "F": terms.f_u}
    out = {"rcs": {k: relative_error(v, fd[k]) for k, v in exact.items()}}
    lin = mcs_linearization(system, eq, "partition", independent=independent)
    fd = mcs_fd(system, eq, independent, h)
    out["mcs"] = {k: relative_error(getattr(lin, k), fd[k]) for k in "KCMF"}
    lin = ucs_linearization(system, eq, penalty)
    fd = ucs_fd(system, lin.q, eq.u, penalty, eq.t, h)
    out["ucs"] = {k: relative_error(getattr(lin, k), fd[k]) for k in "KCMF"}
    return out

"""Closed-chain flexible-joint robots as constrained systems: the set-point (closure solve and
static torques), the constrained system z = [q; q_m] of :mod:`flexmodal_ros.constrained` with its
analytic derivatives, and the robot's modes by MCS / RCS / UCS (the equations are in
:mod:`.closed_chain`'s docstring)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg as sla

from ..core.errors import InputError
from ..core.validation import finite_vector, frozen
from ..modes import map_modes
from ..robot.model import gravity_stiffness, gravity_torque, mass_matrix, wrench_stiffness, wrench_torque
from .closed_chain import ClosedChainRobot
from .eigenanalysis import modal_analysis
from .equilibrium import RANK_RTOL, project_onto_constraints, static_equilibrium
from .linearizations import Penalty
from .system import ConstrainedSystem, Terms


@dataclass(frozen=True, eq=False)
class RobotSystem(ConstrainedSystem):
    """:class:`~flexmodal_ros.constrained.system.ConstrainedSystem` of a closed-chain robot about a
    set-point (see module docstring). ``robot``; ``reference`` r of the set-point law [N m];
    ``rigid_joints``; names as in the base class (coordinates: joints, then ``<joint>_motor``)."""

    robot: ClosedChainRobot
    reference: np.ndarray
    rigid_joints: bool

    def create_data(self):
        return self.robot.pin.createData()

    def _split(self, z):
        nq = self.robot.n
        return np.asarray(z[:nq], float), np.asarray(z[nq:], float)

    def _data(self, data):
        return data if data is not None else self.create_data()

    def _select(self):
        S = np.zeros((self.robot.actuated.size, self.robot.n))
        S[np.arange(self.robot.actuated.size), self.robot.actuated] = 1.0
        return S

    def mass(self, z, data=None):
        rb, data = self.robot, self._data(data)
        q, _ = self._split(z)
        M = mass_matrix(rb.model, data, q)
        S = self._select()
        if self.rigid_joints:
            return M + S.T @ np.diag(rb.W ** 2 * rb.B) @ S
        return sla.block_diag(M, np.diag(rb.B))

    def force(self, z, zd, u, t=0.0, data=None):
        rb, data = self.robot, self._data(data)
        q, q_m = self._split(z)
        qd, qd_m = self._split(zd)
        S, W = self._select(), rb.W
        link = (-pin.rnea(rb.pin, data, q, qd, np.zeros(rb.n)) - self._damping() * qd
                + wrench_torque(rb.model, data, q))
        if self.rigid_joints:
            qa, qda = q[rb.actuated], qd[rb.actuated]
            tau_m = self.reference - rb.kp * W * qa - (rb.kd + rb.d_fm) * W * qda + u
            return link + S.T @ (W * tau_m)
        spring = rb.k * (W * q[rb.actuated] - q_m)
        tau_m = self.reference - rb.kp * q_m - rb.kd * qd_m + u
        return np.concatenate([link - S.T @ (W * spring), -rb.d_fm * qd_m + spring + tau_m])

    def _damping(self):
        d = np.array(self.robot.passive_damping, float)
        d[self.robot.actuated] = self.robot.d_f
        return d

    def constraints(self, z, t=0.0, data=None):
        rb, data = self.robot, self._data(data)
        q, _ = self._split(z)
        if not rb.closures:
            return np.zeros(0)
        pin.framesForwardKinematics(rb.pin, data, q)
        return np.concatenate([P @ (data.oMf[a].translation - data.oMf[b].translation)
                               for _, a, b, P in rb.closures])

    def constraint_jacobian(self, z, t=0.0, data=None):
        rb, data = self.robot, self._data(data)
        q, _ = self._split(z)
        jac = np.zeros((self.m, self.n))
        if not rb.closures:
            return jac
        pin.computeJointJacobians(rb.pin, data, q)
        pin.updateFramePlacements(rb.pin, data)
        rows = [P @ (self._frame_jacobian(data, a) - self._frame_jacobian(data, b))
                for _, a, b, P in rb.closures]
        jac[:, :rb.n] = np.vstack(rows)
        return jac

    def _frame_jacobian(self, data, frame):
        return pin.getFrameJacobian(self.robot.pin, data, frame, pin.LOCAL_WORLD_ALIGNED)[:3]

    def constraint_hessian(self, z, lam, data=None):
        """Σ_k λ_k ∂²Φ_k/∂z² (n, n): column j from the exact Jacobian variation along q̇ = e_j."""
        rb, data = self.robot, self._data(data)
        q, _ = self._split(z)
        out = np.zeros((self.n, self.n))
        if not rb.closures:
            return out
        forces, row = [], 0
        for _, a, b, P in rb.closures:
            forces.append((a, b, P.T @ lam[row:row + P.shape[0]]))
            row += P.shape[0]
        for j in range(rb.n):
            pin.computeJointJacobiansTimeVariation(rb.pin, data, q, np.eye(rb.n)[j])
            pin.updateFramePlacements(rb.pin, data)
            col = np.zeros(rb.n)
            for a, b, force in forces:
                dj = (pin.getFrameJacobianTimeVariation(rb.pin, data, a, pin.LOCAL_WORLD_ALIGNED)[:3]
                      - pin.getFrameJacobianTimeVariation(rb.pin, data, b, pin.LOCAL_WORLD_ALIGNED)[:3])
                col += dj.T @ force
            out[:rb.n, j] = col
        return 0.5 * (out + out.T)

    def constraint_bias(self, z, zd, t=0.0, data=None):
        rb, data = self.robot, self._data(data)
        q, _ = self._split(z)
        qd, _ = self._split(zd)
        if not rb.closures:
            return np.zeros(0)
        pin.forwardKinematics(rb.pin, data, q, qd, np.zeros(rb.n))
        pin.updateFramePlacements(rb.pin, data)
        acc = lambda f: pin.getFrameClassicalAcceleration(rb.pin, data, f,
                                                          pin.LOCAL_WORLD_ALIGNED).linear
        return np.concatenate([P @ (acc(a) - acc(b)) for _, a, b, P in rb.closures])

    def terms(self, z, u, lam, t=0.0, sparse=False, data=None) -> Terms:
        rb, data = self.robot, self._data(data)
        q, _ = self._split(z)
        n, nq, na = self.n, rb.n, rb.actuated.size
        S, W = self._select(), rb.W
        f_q = np.zeros((n, n))
        f_q[:nq, :nq] = -gravity_stiffness(rb.model, data, q)
        if rb.wrench.any():
            f_q[:nq, :nq] += wrench_stiffness(rb.model, data, q)
        f_qd = np.zeros((n, n))
        f_qd[:nq, :nq] = -np.diag(self._damping())
        f_u = np.zeros((n, na))
        if self.rigid_joints:
            f_q[:nq, :nq] -= S.T @ np.diag(W * rb.kp * W) @ S
            f_qd[:nq, :nq] -= S.T @ np.diag(W * (rb.kd + rb.d_fm) * W) @ S
            f_u[:nq] = S.T @ np.diag(W)
        else:
            kw = rb.k * W
            f_q[:nq, :nq] -= S.T @ np.diag(kw * W) @ S
            f_q[:nq, nq:] = S.T @ np.diag(kw)
            f_q[nq:, :nq] = np.diag(kw) @ S
            f_q[nq:, nq:] = -np.diag(rb.k + rb.kp)
            f_qd[nq:, nq:] = -np.diag(rb.d_fm + rb.kd)
            f_u[nq:] = np.eye(na)
        f = self.force(z, np.zeros(n), u, t, data)
        terms = Terms(self.mass(z, data), f, f_q, f_qd, f_u, self.constraints(z, t, data),
                      self.constraint_jacobian(z, t, data), np.zeros(self.m),
                      self.constraint_hessian(z, lam, data))
        if sparse:
            # deferred: scipy.sparse
            import scipy.sparse as sp
            terms = terms._replace(**{k: sp.csc_matrix(getattr(terms, k)) for k in
                                      ("M", "f_q", "f_qd", "f_u", "phi_q", "hessian")})
        return terms


@dataclass(frozen=True)
class SetPoint:
    """A set-point of a closed-chain robot: ``q`` all tree joints [rad or m]; ``motor`` q_m^d
    (n_a) [rad]; ``joint_torques`` τ_s at the actuated joints [N m]; ``multipliers`` λ (closure
    reactions, f_c = −Φ_qᵀλ); ``reference`` r of the set-point law; ``notes``."""

    q: np.ndarray
    motor: np.ndarray
    joint_torques: np.ndarray
    multipliers: np.ndarray
    reference: np.ndarray
    notes: tuple = ()


def solve_configuration(robot, values, guess=None, data=None) -> np.ndarray:
    """All tree joints from ``values``: either the n_a actuated joints (the passive ones then solved
    from Φ(q) = 0 by Newton from ``guess``, default zeros) or all n joints (the actuated ones kept,
    the passive ones corrected onto Φ = 0)."""
    values = finite_vector(values, None, "q")
    na, n = robot.actuated.size, robot.n
    if values.size == n:
        q = values.copy()
    elif values.size == na:
        q = np.zeros(n) if guess is None else finite_vector(guess, n, "guess").copy()
        q[robot.actuated] = values
    else:
        raise InputError(f"q: expected {na} actuated-joint values ({', '.join(robot.actuated_names)}) "
                         f"or {n} values (all joints: {', '.join(robot.joint_names)}), got {values.size}")
    if robot.closures:
        problem = _PassiveProblem(robot, q)
        q[problem.passive] = project_onto_constraints(problem, q[problem.passive], data=data)
    return q


class _PassiveProblem:
    """Φ(q) as a function of the passive joints only (actuated ones held), for the projection
    of :func:`~flexmodal_ros.constrained.equilibrium.project_onto_constraints`."""

    def __init__(self, robot, q):
        self.robot, self.q = robot, q
        self.passive = np.setdiff1d(np.arange(robot.n), robot.actuated)
        self.name = f"{robot.name} loop closure"
        self.constraint_names = tuple(f"{c[0]} [{i}]" for c in robot.closures
                                      for i in range(c[3].shape[0]))
        self.data = robot.pin.createData()

    def _full(self, qp):
        q = self.q.copy()
        q[self.passive] = qp
        return q

    def constraints(self, qp, t=0.0, data=None):
        return _closure_values(self.robot, self.data, self._full(qp))

    def constraint_jacobian(self, qp, t=0.0, data=None):
        return _closure_jacobian(self.robot, self.data, self._full(qp))[:, self.passive]


def _closure_values(robot, data, q):
    pin.framesForwardKinematics(robot.pin, data, q)
    return np.concatenate([P @ (data.oMf[a].translation - data.oMf[b].translation)
                           for _, a, b, P in robot.closures])


def _closure_jacobian(robot, data, q):
    pin.computeJointJacobians(robot.pin, data, q)
    pin.updateFramePlacements(robot.pin, data)
    jac = lambda f: pin.getFrameJacobian(robot.pin, data, f, pin.LOCAL_WORLD_ALIGNED)[:3]
    return np.vstack([P @ (jac(a) - jac(b)) for _, a, b, P in robot.closures])


def set_point(robot, values, guess=None, rigid_joints=False, data=None) -> SetPoint:
    """The set-point holding the configuration ``values`` (see :func:`solve_configuration`):
    static torques and multipliers from [Sᵀ Φ_qᵀ][τ_s; λ] = Jᵀτ_ext − g, motor equilibrium and
    the reference r of the set-point law (module docstring). InputError if the actuated joints
    cannot hold the configuration (a residual torque remains)."""
    data = data if data is not None else robot.pin.createData()
    q = solve_configuration(robot, values, guess, data)
    n, na = robot.n, robot.actuated.size
    rhs = wrench_torque(robot.model, data, q) - gravity_torque(robot.model, data, q)
    S = np.zeros((na, n))
    S[np.arange(na), robot.actuated] = 1.0
    phi_q = _closure_jacobian(robot, data, q) if robot.closures else np.zeros((0, n))
    A = np.hstack([S.T, phi_q.T])
    sol, *_ = sla.lstsq(A, rhs, lapack_driver="gelsd")
    residual = np.linalg.norm(A @ sol - rhs)
    if residual > 1e-9 * (1.0 + np.linalg.norm(rhs)):
        raise InputError(f"q: the actuated joints ({', '.join(robot.actuated_names)}) cannot hold "
                         f"this configuration statically (residual torque {residual:.3g} N m)")
    notes = []
    sv = sla.svdvals(A) if A.size else np.zeros(0)
    if sv.size and sv[-1] <= RANK_RTOL * sv[0]:
        notes.append("singular configuration: the static torques/multipliers are not unique; the "
                     "minimum-norm solution is used")
    tau, lam = sol[:na], sol[na:]
    W = robot.W
    if rigid_joints:
        motor = W * q[robot.actuated]
        reference = -tau / W + robot.kp * motor
    else:
        motor = W * q[robot.actuated] - tau / (robot.k * W)
        reference = -tau / W + robot.kp * motor
    return SetPoint(frozen(q), frozen(motor), frozen(tau), frozen(lam), frozen(reference),
                    tuple(notes))


def robot_system(robot, point: SetPoint, rigid_joints=False) -> RobotSystem:
    """The constrained system of ``robot`` with the set-point law holding ``point``."""
    joints = list(robot.joint_names)
    motors = [] if rigid_joints else [f"{j}_motor" for j in robot.actuated_names]
    cnames = [f"{name} [{'xyz'[i] if P.shape[0] == 3 else i}]" for name, _, _, P in robot.closures
              for i in range(P.shape[0])]
    return RobotSystem(name=robot.name, coordinate_names=tuple(joints + motors),
                       constraint_names=tuple(cnames),
                       input_names=tuple(f"{j}_torque" for j in robot.actuated_names),
                       independent=robot.actuated_names, sparse_native=False, robot=robot,
                       reference=point.reference, rigid_joints=bool(rigid_joints))


def robot_equilibrium(robot, values, guess=None, rigid_joints=False, data=None):
    """(system, equilibrium, set-point) of ``robot`` held at ``values`` by its set-point law."""
    point = set_point(robot, values, guess, rigid_joints, data)
    system = robot_system(robot, point, rigid_joints)
    z = point.q if rigid_joints else np.concatenate([point.q, point.motor])
    eq = static_equilibrium(system, z, data=system.create_data())
    return system, eq, point


def robot_modes(robot, values, method="mcs", guess=None, rigid_joints=False,
                penalty: Penalty = Penalty(), **options):
    """Modes of the closed-chain robot at the configuration ``values`` by ``method``
    (:func:`~flexmodal_ros.constrained.eigenanalysis.modal_analysis` options pass through).
    Returns (:class:`~flexmodal_ros.constrained.eigenanalysis.ConstrainedModes`, :class:`SetPoint`);
    mode shapes have rows [q; q_m] (``coordinate_names``)."""
    system, eq, point = robot_equilibrium(robot, values, guess, rigid_joints)
    data = system.create_data()
    modes = modal_analysis(system, eq, method, penalty=penalty, data=data, **options)
    return modes, point


def robot_result_dict(robot, modes, point) -> dict:
    """JSON-ready dict of a closed-chain result (keys of ``flexmodal modal --json`` plus the
    constrained ones)."""
    out = {"robot": robot.name, "joint_names": list(robot.joint_names),
           "actuated_joints": list(robot.actuated_names), "positions": point.q.tolist(),
           "motor_equilibrium": point.motor.tolist(), "joint_torques": point.joint_torques.tolist(),
           "closure_multipliers": point.multipliers.tolist(), "notes": list(point.notes)}
    out.update(modes.to_dict())
    return out


def robot_modal_map(robot, configurations, method="mcs", track=True, progress=None, **options):
    """Modes over ``configurations`` (rows of actuated-joint or all-joint values), each closure
    solve starting from the previous configuration (continuation along the sweep), MAC-tracked.
    Returns (:class:`~flexmodal_ros.modes.modal_map.ModalMap` over the rows as given, list of
    :class:`SetPoint`); ``progress(k)`` is called after each configuration."""

    rows = [finite_vector(row, None, f"configurations[{i}]") for i, row in enumerate(configurations)]
    if not rows:
        raise InputError("configurations: none given")
    results, points, guess = [], [], None
    for row in rows:
        modes, point = robot_modes(robot, row, method, guess=guess, **options)
        results.append(modes)
        points.append(point)
        guess = point.q
        if progress:
            progress(1)
    names = robot.actuated_names if rows[0].size == robot.actuated.size else robot.joint_names
    return map_modes(names, np.array(rows), results, track), points

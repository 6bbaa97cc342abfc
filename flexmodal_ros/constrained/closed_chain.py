"""Closed-chain flexible-joint robots: a URDF spanning tree + loop closures (Pinocchio).

The robot YAML (:mod:`flexmodal_ros.robot.params`) lists the actuated, flexible joints under ``joints``
(thesis model (2.1): stiffness k, damping d_f / d_fm, rotor inertia B, gear W, PD gains kp, kd),
the unactuated ones under ``passive_joints`` (rigid, damping d_f) and pairs of frames whose origins
coincide under ``loop_closures`` (planar: 2 equations, point: 3). With q the n_q tree joints,
q_m the n_a motor positions and S the selection of the actuated joints, the constrained system of
:mod:`flexmodal_ros.constrained` (coordinates z = [q; q_m], Φ(q) the closures) is

    M(q) q̈ = Jᵀτ_ext − C(q, q̇)q̇ − g(q) − D q̇ − Sᵀ K W (W S q − q_m) − Φ_qᵀλ,
    B q̈_m   = −D_m q̇_m + K (W S q − q_m) + τ_m,   τ_m = r − K_P q_m − K_D q̇_m + u,

the set-point law (2.2) whose constant r holds the chosen configuration: at a set-point (actuated
values q_a^d, passive ones solved from Φ = 0) the static joint torques τ_s and multipliers λ solve
[Sᵀ Φ_qᵀ][τ_s; λ] = Jᵀτ_ext − g (least squares; minimum norm at a singular configuration), then
q_m^d = W q_a − τ_s/(K W) (the closed-chain form of (2.3)) and r = −τ_s/W + K_P q_m^d.

Derivatives are analytic (Pinocchio): M by CRBA, ∂g/∂q and the RNEA derivatives, the closure
Jacobians J_a − J_b of the frame origins (LOCAL_WORLD_ALIGNED) and the Hessian of λᵀΦ from the
exact Jacobian time variation with q̇ = e_j (column j = (∂(J_a − J_b)/∂q_j)ᵀ Pᵀλ). Pinocchio's
constraint models (``RigidConstraintModel`` + ``constraintDynamics``) give constrained forward
dynamics but not the multiplier Hessian the linearizations need, so they serve as the independent
nonlinear reference instead (:func:`flexmodal_ros.constrained.checks.robot_state_matrix_fd`). With
``rigid_joints=True`` the joints are infinitely stiff (q_m = W q_a): the rigid mechanism, whose
modes the flexible model approaches as k → ∞.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import scipy.linalg as sla

from ..robot.params import Tool, load_config, make_tool
from ..core.errors import ConfigError, InputError
from ..robot.model import (FlexibleJointModel, _parse_urdf, _with_tool, gravity_stiffness, gravity_torque,
                     mass_matrix, wrench_stiffness, wrench_torque)
from ..core.validation import finite_vector, frozen, nonnegative, per_joint, positive
from .eigenanalysis import modal_analysis
from .equilibrium import RANK_RTOL, project_onto_constraints, static_equilibrium
from .linearizations import Penalty
from .system import ConstrainedSystem, Terms

_JOINT_TYPES = ("RX", "RY", "RZ", "RevoluteUnaligned", "PX", "PY", "PZ", "PrismaticUnaligned")


@dataclass(frozen=True, eq=False)
class ClosedChainRobot:
    """Immutable closed-chain robot (arrays read-only). ``joint_names`` every tree joint
    (Pinocchio order, n = n_q); ``actuated`` indices of the flexible joints (n_a) with their
    ``k``, ``r``/``W``, ``d_f``, ``d_fm``, ``B``, ``kp``, ``kd`` (units of
    :class:`~flexmodal_ros.robot.model.FlexibleJointModel`); ``passive_damping`` d_f of every tree joint
    (zero on actuated ones, which use ``d_f``); ``closures`` (name, frame id a, frame id b,
    selection P (c, 3)); ``gravity``, ``wrench``, ``tool``, ``pin`` (with the tool), ``rigid``,
    ``ee_frame``, ``ee_frame_id``, ``urdf_path``, ``params_path``."""

    name: str
    joint_names: tuple
    actuated: np.ndarray
    k: np.ndarray
    r: np.ndarray
    d_f: np.ndarray
    d_fm: np.ndarray
    B: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    passive_damping: np.ndarray
    closures: tuple
    gravity: np.ndarray
    wrench: np.ndarray
    tool: Tool
    pin: pin.Model
    rigid: pin.Model
    ee_frame: str
    ee_frame_id: int
    urdf_path: Path | None
    params_path: Path | None

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def W(self):
        return 1.0 / self.r

    @property
    def actuated_names(self) -> tuple:
        return tuple(self.joint_names[i] for i in self.actuated)

    @property
    def closed_chain(self) -> bool:
        return True

    joint_index = FlexibleJointModel.joint_index


def load_closed_chain(urdf_path, params_path) -> ClosedChainRobot:
    """Build a :class:`ClosedChainRobot` from a URDF (spanning tree) and a robot YAML.

    ``urdf_path=None`` takes the URDF named in the YAML. A YAML without loop closures also loads
    (a serial robot seen as a constrained system with m = 0). ConfigError names the problem.
    """
    cfg = load_config(params_path)
    urdf = Path(urdf_path) if urdf_path is not None else cfg.urdf_path
    tree, mimics = _parse_urdf(urdf, cfg.accept_inertia)
    if mimics:
        raise ConfigError(f"urdf joint(s) {', '.join(sorted(mimics))}: mimic joints are not supported "
                          "in closed-chain robots (declare the coupling as a loop closure)")
    names = list(tree.names)[1:]
    for i, name in enumerate(names, start=1):
        jm = tree.joints[i]
        if jm.nq != 1 or jm.nv != 1 or not jm.shortname().endswith(_JOINT_TYPES):
            raise ConfigError(f"urdf joint '{name}': type {jm.shortname()} not supported (only "
                              "1-DOF revolute and prismatic joints)")
    unknown = [j for j in list(cfg.joints) + list(cfg.passive_joints) if j not in names]
    if unknown:
        raise ConfigError(f"joints: unknown joint name(s) {', '.join(unknown)} "
                          f"(URDF {tree.name} has: {', '.join(names)})")
    missing = [j for j in names if j not in cfg.joints and j not in cfg.passive_joints]
    if missing:
        raise ConfigError(f"joints: URDF joint(s) {', '.join(missing)} are neither under joints "
                          "(actuated) nor under passive_joints")
    actuated = np.array([i for i, j in enumerate(names) if j in cfg.joints], dtype=int)
    params = [cfg.joints[names[i]] for i in actuated]
    prismatic = [tree.joints[int(i) + 1].shortname().endswith(("PX", "PY", "PZ", "PrismaticUnaligned"))
                 for i in actuated]
    r = np.array([p.r for p in params])
    for i, is_p, ri in zip(actuated, prismatic, r):
        if is_p and np.isnan(ri):
            raise ConfigError(f"joints.{names[i]}.r: missing (characteristic radius of a prismatic joint)")
    r = np.where(prismatic, r, 1.0)
    ee_frame = cfg.end_effector_frame or tree.frames[-1].name
    for frame in [ee_frame] + [f for c in cfg.loop_closures for f in c.frames]:
        if not tree.existFrame(frame):
            raise ConfigError(f"frame '{frame}' not in the URDF {urdf}")
    closures = tuple((c.name, tree.getFrameId(c.frames[0]), tree.getFrameId(c.frames[1]),
                      frozen(_selection(c))) for c in cfg.loop_closures)
    col = lambda f: frozen([float(getattr(p, f)) for p in params])
    passive = np.array([cfg.passive_joints.get(j, 0.0) for j in names])
    robot = ClosedChainRobot(
        name=cfg.robot, joint_names=tuple(names), actuated=frozen(actuated), k=col("k"),
        r=frozen(r), d_f=col("d_f"), d_fm=col("d_fm"), B=col("B"), kp=col("kp"), kd=col("kd"),
        passive_damping=frozen(passive), closures=closures, gravity=frozen(cfg.gravity),
        wrench=frozen(cfg.wrench), tool=cfg.tool, pin=tree, rigid=tree, ee_frame=ee_frame,
        ee_frame_id=-1, urdf_path=urdf, params_path=cfg.path)
    return _with_tool(robot, cfg.tool, cfg.gravity)


def _selection(closure) -> np.ndarray:
    """Rows of the closure equations: I (point) or an orthonormal basis of the plane ⟂ normal."""
    if closure.type == "point":
        return np.eye(3)
    basis = sla.null_space(closure.normal[None, :])
    return basis.T


def with_robot_overrides(robot, kp=None, kd=None, tool=None, wrench=None, **flex):
    """A copy of ``robot`` with per-actuated-joint parameters (scalar or one per actuated joint:
    kp, kd, k, d_f, d_fm, B), a tool (:class:`~flexmodal_ros.robot.params.Tool` or mapping) or a wrench
    (6 values) replaced — the closed-chain counterpart of
    :func:`flexmodal_ros.robot.model.with_overrides`."""
    checks = {"kp": positive, "kd": nonnegative, "k": positive, "B": positive,
              "d_f": nonnegative, "d_fm": nonnegative}
    na = robot.actuated.size
    changes = {}
    for field, value in dict(flex, kp=kp, kd=kd).items():
        if field not in checks:
            raise InputError(f"{field}: not an overridable parameter")
        if value is not None:
            changes[field] = frozen(checks[field](per_joint(value, na, field), field))
    if wrench is not None:
        changes["wrench"] = frozen(finite_vector(wrench, 6, "wrench"))
    out = dataclasses.replace(robot, **changes)
    if tool is not None:
        tool = tool if isinstance(tool, Tool) else make_tool(tool, "tool", InputError)
        out = _with_tool(out, tool, robot.gravity)
    return out


# --- the constrained system ----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RobotSystem(ConstrainedSystem):
    """:class:`~flexmodal_ros.constrained.system.ConstrainedSystem` of a closed-chain robot about a
    set-point (see module docstring). ``robot``; ``reference`` r of the set-point law [N m];
    ``rigid_joints``; names as in the base class (coordinates: joints, then ``<joint>_motor``)."""

    name: str
    coordinate_names: tuple
    constraint_names: tuple
    input_names: tuple
    independent: tuple
    sparse_native: bool
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
        M = mass_matrix(rb, data, q)
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
                + wrench_torque(rb, data, q))
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
        f_q[:nq, :nq] = -gravity_stiffness(rb, data, q)
        if rb.wrench.any():
            f_q[:nq, :nq] += wrench_stiffness(rb, data, q)
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
    rhs = wrench_torque(robot, data, q) - gravity_torque(robot, data, q)
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
    Returns (:class:`~flexmodal_ros.modes.modeset.ModalMap` over the rows as given, list of
    :class:`SetPoint`); ``progress(k)`` is called after each configuration."""
    from ..modes.modeset import map_modes

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

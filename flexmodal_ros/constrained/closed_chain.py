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
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.linalg as sla

from ..robot.params import Tool, load_config, make_tool
from ..robot.registry import is_closed_chain, resolve_model, robot_paths
from ..core.errors import ConfigError, InputError
from ..robot.model import FlexibleJointModel, joint_limit, with_tool
from ..robot.urdf import parse_urdf
from ..core.validation import finite_vector, frozen, nonnegative, per_joint, positive

_JOINT_TYPES = ("RX", "RY", "RZ", "RevoluteUnaligned", "PX", "PY", "PZ", "PrismaticUnaligned")
_PRISMATIC = ("PX", "PY", "PZ", "PrismaticUnaligned")
_SERIAL_FIELDS = ("name", "joint_names", "n", "pin", "rigid", "gravity", "wrench", "tool", "ee_frame",
                  "ee_frame_id", "urdf_path", "params_path")                # read through to the held model
_ACTUATED_FIELDS = ("k", "r", "d_f", "d_fm", "B", "kp", "kd")   # per actuated joint (n_a)
_MOTOR_FIELDS = ("k", "d_fm", "d_cm", "B", "kp", "kd")    # NaN on passive joints (no spring, no motor)


def _from_model(field):
    return property(lambda self: getattr(self.model, field), doc=f"``model.{field}``")


def _actuated(field):
    return functools.cached_property(lambda self: frozen(getattr(self.model, field)[self.actuated]))


@dataclass(frozen=True, eq=False)
class ClosedChainRobot:
    """Immutable closed-chain robot: the spanning tree as a
    :class:`~flexmodal_ros.robot.model.FlexibleJointModel` plus what closes its loops.

    ``model`` covers every tree joint (Pinocchio order, n = n_q): rigid-body data, gravity,
    wrench, tool, frames and paths as for a serial robot; its per-joint flexibility arrays hold the
    actuated joints' values (units of FlexibleJointModel) and, on passive joints, r = 1, NaN for the
    spring and motor parameters (k, d_fm, d_cm, B, kp, kd), d_c = 0 and their damping d_f.
    ``actuated`` indices of the flexible joints (n_a); ``closures`` (name, frame id a, frame id b,
    selection P (c, 3)). The serial model's attributes read through (``name``, ``joint_names``,
    ``n``, ``pin``, ``rigid``, ``gravity``, ``wrench``, ``tool``, ``ee_frame``, ``ee_frame_id``,
    ``urdf_path``, ``params_path``, ``joint_index``); ``k``, ``r``, ``W``, ``d_f``, ``d_fm``,
    ``B``, ``kp``, ``kd`` are those of the actuated joints (n_a); ``passive_damping`` d_f of every
    tree joint, zero on actuated ones (which use ``d_f``)."""

    model: FlexibleJointModel
    actuated: np.ndarray
    closures: tuple

    (name, joint_names, n, pin, rigid, gravity, wrench, tool, ee_frame, ee_frame_id, urdf_path,
     params_path) = (_from_model(f) for f in _SERIAL_FIELDS)
    k, r, d_f, d_fm, B, kp, kd = (_actuated(f) for f in _ACTUATED_FIELDS)

    @functools.cached_property
    def W(self):
        return frozen(1.0 / self.r)

    @functools.cached_property
    def passive_damping(self):
        return frozen(np.where(np.isin(np.arange(self.n), self.actuated), 0.0, self.model.d_f))

    @property
    def actuated_names(self) -> tuple:
        return tuple(self.joint_names[i] for i in self.actuated)

    @property
    def closed_chain(self) -> bool:
        return True

    def joint_index(self, name):
        """Index of a tree joint name; InputError naming the joint if unknown."""
        return self.model.joint_index(name)


def load_closed_chain(urdf_path, params_path) -> ClosedChainRobot:
    """Build a :class:`ClosedChainRobot` from a URDF (spanning tree) and a robot YAML.

    ``urdf_path=None`` takes the URDF named in the YAML. A YAML without loop closures also loads
    (a serial robot seen as a constrained system with m = 0). ConfigError names the problem.
    """
    cfg = load_config(params_path)
    urdf = Path(urdf_path) if urdf_path is not None else cfg.urdf_path
    tree, mimics = parse_urdf(urdf, cfg.accept_inertia)
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
    prismatic = np.array([tree.joints[i + 1].shortname().endswith(_PRISMATIC) for i in range(len(names))])
    for i in actuated:
        if prismatic[i] and np.isnan(cfg.joints[names[i]].r):
            raise ConfigError(f"joints.{names[i]}.r: missing (characteristic radius of a prismatic joint)")
    ee_frame = cfg.end_effector_frame or tree.frames[-1].name
    for frame in [ee_frame] + [f for c in cfg.loop_closures for f in c.frames]:
        if not tree.existFrame(frame):
            raise ConfigError(f"frame '{frame}' not in the URDF {urdf}")
    closures = tuple((c.name, tree.getFrameId(c.frames[0]), tree.getFrameId(c.frames[1]),
                      frozen(_selection(c))) for c in cfg.loop_closures)

    def column(field):
        """Per tree joint: the actuated joints' parameter, the passive joints' value."""
        passive = lambda j: (np.nan if field in _MOTOR_FIELDS else 1.0 if field == "r"
                             else 0.0 if field == "d_c" else cfg.passive_joints[j])
        values = [float(getattr(cfg.joints[j], field)) if j in cfg.joints else passive(j) for j in names]
        if field == "r":
            values = np.where(prismatic, values, 1.0)
        return frozen(values)

    model = FlexibleJointModel(
        name=cfg.robot, joint_names=tuple(names), prismatic=frozen(prismatic),
        **{f: column(f) for f in _ACTUATED_FIELDS + ("d_c", "d_cm")},
        gravity=frozen(cfg.gravity), wrench=frozen(cfg.wrench), tool=cfg.tool,
        effort_limit=frozen(joint_limit(tree.effortLimit)), position_lower=frozen(tree.lowerPositionLimit),
        position_upper=frozen(tree.upperPositionLimit), velocity_limit=frozen(joint_limit(tree.velocityLimit)),
        pin=tree, rigid=tree, ee_frame=ee_frame, ee_frame_id=-1, urdf_path=urdf, params_path=cfg.path)
    return ClosedChainRobot(model=with_tool(model, cfg.tool, cfg.gravity), actuated=frozen(actuated),
                            closures=closures)


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
            values = np.array(getattr(robot.model, field))
            values[robot.actuated] = checks[field](per_joint(value, na, field), field)
            changes[field] = frozen(values)
    if wrench is not None:
        changes["wrench"] = frozen(finite_vector(wrench, 6, "wrench"))
    model = dataclasses.replace(robot.model, **changes)
    if tool is not None:
        tool = tool if isinstance(tool, Tool) else make_tool(tool, "tool", InputError)
        model = with_tool(model, tool, robot.gravity)
    return dataclasses.replace(robot, model=model)


# --- the constrained system ----------------------------------------------------------------


def resolve_any_model(robot=None, urdf=None, params=None):
    """Like :func:`resolve_model`, but a robot whose YAML declares passive joints or loop
    closures comes back as a :class:`flexmodal_ros.constrained.closed_chain.ClosedChainRobot`."""
    if is_closed_chain(robot, urdf, params):
        return resolve_closed_chain(robot, urdf, params)
    return resolve_model(robot, urdf, params)


def resolve_closed_chain(robot=None, urdf=None, params=None):
    """The selected robot as a :class:`~flexmodal_ros.constrained.closed_chain.ClosedChainRobot` (a serial
    robot is accepted too: a constrained system without closures)."""
    if robot and (urdf or params):
        raise ConfigError("give either a robot name or urdf/params files, not both")
    if robot:
        return load_closed_chain(*robot_paths(robot))
    if params:
        return load_closed_chain(urdf or None, params)
    raise ConfigError("no robot given (use a bundled robot name, or a params YAML)")

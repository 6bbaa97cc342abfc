"""The exported flexible-joint structure: the source URDF's links and joints with, per flexible joint,
a rotor link, a motor joint ``<joint>_motor`` and the elastic joint (ROS-free, format-independent).

Thesis (T.T. Do 2021) reduced model (2.1) with deflection e = W q − q_m (A I-10), B = N² I_r
(A I-12), K, D, D_m (A I-15)-(A I-18). Each flexible joint j (parent link P, child link C) becomes

    P --<j>_motor--> <j>_rotor --<j> (elastic)--> C

Exported coordinates (what Gazebo's joint_state_broadcaster and the ``mujoco_simulator`` report):
the motor joint's position is s_m = r q_m (r = 1 for revolute joints: s_m = q_m [rad]; for a
prismatic joint the rack travel [m]), the elastic joint's is s_e = q − s_m (the deflection
q − q_m for revolute joints), so that q = s_m + s_e and q_m = W s_m. In these coordinates (2.1) is
a chain with motor-joint inertia B W², motor damping d_fm W², Coulomb d_cm W, an elastic joint of
stiffness k W², link damping d_f on the *sum* ṡ_m + ṡ_e = q̇, and motor effort W τ_m.

Rotor inertia (``rotor``), see :mod:`flexmodal_ros.export.fidelity` for the measured differences:
- ``"armature"`` (MJCF): B W² as joint armature, a massless rotor body: exactly (2.1).
- ``"gear"`` (URDF/SDF, revolute joints): the physical rotor I_r = B/N² on its own joint
  ``<j>_rotor_spin`` that mimics ``<j>_motor`` with multiplier N (a gear constraint): Spong's complete
  model (1.4), rotor–link coupling N I_r = B/N. Prismatic joints use ``"body"``.
- ``"body"`` (URDF/SDF, any physics engine): the rotor link carries inertia B about the axis; adds
  B to the parent's inertia and a coupling B between rotor and parent rates.

Link damping d_f (``link_damping``): ``"tendon"`` (MJCF: a fixed tendon over motor and elastic
joints, exact); ``"elastic"`` / ``"motor"`` (URDF/SDF, which only have per-joint damping): d_f on
ṡ_e (transmission damping) or on ṡ_m.
"""
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..robot.params import load_config
from ..core.errors import ConfigError
from ..core.validation import shown

MOTOR_SUFFIX = "_motor"
ROTOR_SUFFIX = "_rotor"
SPIN_SUFFIX = "_rotor_spin"
WORLD_LINK = "world"
TOOL_LINK = "flexmodal_tool"
# A link Gazebo must not drop (sdformat ignores links without mass) but that adds no inertia worth
# counting: 1e-5 kg, 1e-8 kg m^2 (sdformat drops links of mass <= 1e-6 kg) (its effect on the AMA is part of fidelity's measured difference).
TINY_MASS, TINY_INERTIA = 1e-5, 1e-8
ROTOR_MODES = ("armature", "gear", "body")
LINK_DAMPING_MODES = ("tendon", "elastic", "motor")
UNSUPPORTED_JOINT_TYPES = ("floating", "planar", "continuous")


@dataclass(frozen=True)
class Inertial:
    """Mass [kg], COM [m] in the link frame, 3x3 inertia about the COM in link-frame axes [kg m^2]."""
    mass: float
    com: np.ndarray
    inertia: np.ndarray


@dataclass(frozen=True)
class Link:
    """A link: name, inertial (None = massless frame), raw URDF visual/collision elements."""
    name: str
    inertial: Inertial | None = None
    elements: tuple = ()


@dataclass(frozen=True)
class Joint:
    """A joint of the exported tree. ``role``: "fixed", "motor", "elastic" or "spin" (gear rotor).

    Units are those of the joint coordinate (rad or m): limits, effort limit [N m or N], damping,
    stiffness, armature, frictionloss (Coulomb) [N m or N]; ``mimic`` = (leader joint, multiplier).
    """
    name: str
    type: str
    parent: str
    child: str
    xyz: tuple = (0.0, 0.0, 0.0)
    rpy: tuple = (0.0, 0.0, 0.0)
    axis: tuple = (0.0, 0.0, 1.0)
    role: str = "fixed"
    lower: float = 0.0
    upper: float = 0.0
    effort: float = 0.0
    velocity: float = 0.0
    damping: float = 0.0
    stiffness: float = 0.0
    armature: float = 0.0
    frictionloss: float = 0.0
    mimic: tuple | None = None


@dataclass(frozen=True)
class Tendon:
    """Fixed tendon (MJCF): sum of ``joints`` (coefficient 1 each) with viscous ``damping`` and
    Coulomb ``frictionloss``: the link-side friction on q̇ = ṡ_m + ṡ_e."""
    name: str
    joints: tuple
    damping: float
    frictionloss: float


@dataclass(frozen=True)
class ExportedRobot:
    """Format-independent exported description (links/joints parent before child)."""
    name: str
    root: str
    links: tuple
    joints: tuple
    tendons: tuple
    gravity: np.ndarray
    flexible_joints: tuple
    motor_joints: tuple
    rotor: str
    link_damping: str
    gear_ratios: tuple
    model: object = field(repr=False)

    def link(self, name):
        return next(link for link in self.links if link.name == name)


def rpy_matrix(rpy):
    """Rotation matrix of URDF roll-pitch-yaw angles [rad] (fixed axes x, y, z)."""
    return pin.rpy.rpyToMatrix(*map(float, rpy))


def check_source_urdf(path):
    """Parse a URDF file and reject what the export cannot represent (one-line ConfigError)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"urdf: file not found: {path}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ConfigError(f"urdf {path}: malformed XML: {exc}") from None
    for joint in root.findall("joint"):
        name, jtype = joint.get("name"), joint.get("type")
        if jtype in UNSUPPORTED_JOINT_TYPES:
            raise ConfigError(f"urdf joint '{name}': type {jtype} not supported by the export "
                              "(only revolute, prismatic and fixed joints)")
        if joint.find("mimic") is not None:
            raise ConfigError(f"urdf joint '{name}': mimic joints are not supported by the export")
        if name.endswith((MOTOR_SUFFIX, SPIN_SUFFIX)):
            raise ConfigError(f"urdf joint '{name}': names ending in {MOTOR_SUFFIX} or {SPIN_SUFFIX} "
                              "are reserved for the exported motor and rotor joints")
    return root


def build_export(model, rotor="armature", link_damping="tendon", gear_ratio=None):
    """:class:`ExportedRobot` of a :class:`~flexmodal_ros.robot.model.FlexibleJointModel`.

    ``rotor`` in ROTOR_MODES, ``link_damping`` in LINK_DAMPING_MODES (module docstring);
    ``gear_ratio``: N for ``rotor="gear"`` where the params YAML gives B only (default: the YAML's N).
    """
    if rotor not in ROTOR_MODES:
        raise ConfigError(f"rotor: expected one of {', '.join(ROTOR_MODES)}, got {shown(rotor)}")
    if link_damping not in LINK_DAMPING_MODES:
        raise ConfigError(f"link_damping: expected one of {', '.join(LINK_DAMPING_MODES)}, got {shown(link_damping)}")
    if model.urdf_path is None:
        raise ConfigError("urdf: the model has no URDF file to export")
    root = check_source_urdf(model.urdf_path)
    ratios = _gear_ratios(model, rotor, gear_ratio)
    links = {link.get("name"): _link(link) for link in root.findall("link")}
    source = [j for j in root.findall("joint")]
    movable = [j.get("name") for j in source if j.get("type") != "fixed"]
    if sorted(movable) != sorted(model.joint_names):
        raise ConfigError(f"urdf {model.urdf_path}: movable joints {movable} differ from the model's "
                          f"{list(model.joint_names)}")
    out_links, out_joints, tendons = [], [], []
    children = {j.find("child").get("link") for j in source}
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise ConfigError(f"urdf {model.urdf_path}: expected one root link, found {roots}")
    order = _tree_order(roots[0], source)
    out_links.append(links[roots[0]])
    for joint in order:
        name, parent, child = joint.get("name"), joint.find("parent").get("link"), joint.find("child").get("link")
        xyz, rpy = _origin(joint)
        if joint.get("type") == "fixed":
            out_joints.append(Joint(name, "fixed", parent, child, xyz, rpy))
            out_links.append(links[child])
            continue
        i = model.joint_index(name)
        flex = _flexible_joint(model, i, joint, parent, child, xyz, rpy, rotor, link_damping, ratios[i])
        out_links.extend(flex[0])
        out_joints.extend(flex[1])
        tendons.extend(flex[2])
        out_links.append(links[child])
    tool = model.tool
    if tool.mass > 0 or np.any(tool.inertia):
        out_joints.append(Joint(f"{TOOL_LINK}_joint", "fixed", model.ee_frame, TOOL_LINK))
        out_links.append(Link(TOOL_LINK, Inertial(float(tool.mass), np.array(tool.com, float),
                                                  np.array(tool.inertia, float))))
    return ExportedRobot(name=model.name, root=roots[0], links=tuple(out_links), joints=tuple(out_joints),
                         tendons=tuple(tendons), gravity=np.array(model.gravity, float),
                         flexible_joints=tuple(model.joint_names),
                         motor_joints=tuple(j + MOTOR_SUFFIX for j in model.joint_names),
                         rotor=rotor, link_damping=link_damping, gear_ratios=tuple(ratios), model=model)


def _flexible_joint(model, i, joint, parent, child, xyz, rpy, rotor, link_damping, ratio):
    """(links, joints, tendons) replacing flexible joint i: motor joint, rotor link(s), elastic joint."""
    name, jtype = joint.get("name"), joint.get("type")
    W = float(model.W[i])
    axis = _axis(joint)
    lower, upper = float(model.position_lower[i]), float(model.position_upper[i])
    effort = float(model.effort_limit[i])
    velocity = float(model.velocity_limit[i])
    B, k, d_f, d_c = float(model.B[i]), float(model.k[i]), float(model.d_f[i]), float(model.d_c[i])
    motor_damping = float(model.d_fm[i]) * W * W + (d_f if link_damping == "motor" else 0.0)
    rotor_link = name + ROTOR_SUFFIX
    motor = Joint(name + MOTOR_SUFFIX, jtype, parent, rotor_link, xyz, rpy, axis, "motor", lower, upper,
                  effort * W, velocity, motor_damping, 0.0, 0.0, float(model.d_cm[i]) * W)
    span = upper - lower if math.isfinite(upper - lower) else 2 * math.pi
    elastic = Joint(name, jtype, rotor_link, child, axis=axis, role="elastic", lower=-span, upper=span,
                    effort=effort, velocity=velocity, damping=d_f if link_damping == "elastic" else 0.0,
                    stiffness=k * W * W)
    links, joints, tendons = [], [motor, elastic], []
    mode = "body" if rotor == "gear" and jtype == "prismatic" else rotor
    a = np.array(axis)
    if mode == "armature":
        joints[0] = replace(motor, armature=B * W * W)
        links.append(Link(rotor_link, Inertial(0.0, np.zeros(3), np.zeros((3, 3)))))
    elif mode == "body" and jtype == "prismatic":
        links.append(Link(rotor_link, Inertial(B * W * W, np.zeros(3), TINY_INERTIA * np.eye(3))))
    elif mode == "body":
        # Thin disc of axial inertia B: transverse moments B/2.
        links.append(Link(rotor_link, Inertial(TINY_MASS, np.zeros(3), B * (0.5 * np.eye(3) + 0.5 * np.outer(a, a)))))
    else:   # gear: gear-output link + the rotor spinning at N times the motor joint
        links.append(Link(rotor_link, Inertial(TINY_MASS, np.zeros(3), TINY_INERTIA * np.eye(3))))
        spin_link = name + SPIN_SUFFIX
        I_r = B / ratio ** 2
        links.append(Link(spin_link, Inertial(TINY_MASS, np.zeros(3), I_r * (0.5 * np.eye(3) + 0.5 * np.outer(a, a)))))
        joints.insert(1, Joint(spin_link + "_joint", "revolute", parent, spin_link, xyz, rpy, axis, "spin",
                               ratio * lower, ratio * upper, effort / ratio, velocity * ratio,
                               mimic=(motor.name, ratio)))
    if link_damping == "tendon" and (d_f > 0 or d_c > 0):
        tendons.append(Tendon(name + "_link_friction", (motor.name, name), d_f, d_c))
    elif d_c > 0:
        raise ConfigError(f"joints.{name}.d_c: link Coulomb friction needs link_damping='tendon' (MJCF)")
    return links, joints, tendons


def _gear_ratios(model, rotor, gear_ratio):
    """N per joint for rotor="gear": the YAML's N, else ``gear_ratio``; nan otherwise."""
    n = model.n
    if rotor != "gear":
        return [math.nan] * n
    yaml_ratios = {}
    if model.params_path is not None:
        yaml_ratios = {j: p.N for j, p in load_config(model.params_path).joints.items()}
    out = []
    for j in model.joint_names:
        N = yaml_ratios.get(j, math.nan)
        if not math.isfinite(N):
            if gear_ratio is None:
                raise ConfigError(f"joints.{j}.N: rotor='gear' needs the gear ratio (give N and I_r in "
                                  "the params YAML, or --gear-ratio)")
            N = float(gear_ratio)
        if not N > 1:
            raise ConfigError(f"gear ratio of {j}: must be > 1, got {N}")
        out.append(float(N))
    return out


def _tree_order(root, joints):
    """Joints parent before child (depth first from the root link)."""
    by_parent = {}
    for j in joints:
        by_parent.setdefault(j.find("parent").get("link"), []).append(j)
    order, stack = [], [root]
    while stack:
        for j in reversed(by_parent.get(stack.pop(), [])):
            order.append(j)
            stack.append(j.find("child").get("link"))
    return order[::1] if len(order) == len(joints) else _disconnected(joints, order)


def _disconnected(joints, order):
    missing = sorted({j.get("name") for j in joints} - {j.get("name") for j in order})
    raise ConfigError(f"urdf: joints {missing} are not connected to the root link")


def _floats(text, count, default):
    if text is None:
        return default
    values = tuple(float(v) for v in text.split())
    if len(values) != count:
        raise ConfigError(f"urdf: expected {count} numbers, got {shown(text)}")
    return values


def _origin(element):
    origin = element.find("origin")
    if origin is None:
        return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    return _floats(origin.get("xyz"), 3, (0.0, 0.0, 0.0)), _floats(origin.get("rpy"), 3, (0.0, 0.0, 0.0))


def _axis(joint):
    axis = joint.find("axis")
    a = np.array(_floats(None if axis is None else axis.get("xyz"), 3, (1.0, 0.0, 0.0)))
    norm = np.linalg.norm(a)
    if not norm > 0:
        raise ConfigError(f"urdf joint '{joint.get('name')}': zero axis")
    return tuple(float(v) for v in a / norm)


def _link(element):
    inertial = element.find("inertial")
    elements = tuple(e for e in element if e.tag in ("visual", "collision"))
    if inertial is None:
        return Link(element.get("name"), None, elements)
    xyz, rpy = _origin(inertial)
    mass = float(inertial.find("mass").get("value"))
    i = inertial.find("inertia")
    ixx, ixy, ixz, iyy, iyz, izz = (float(i.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    R = rpy_matrix(rpy)
    return Link(element.get("name"), Inertial(mass, np.array(xyz), R @ tensor @ R.T), elements)

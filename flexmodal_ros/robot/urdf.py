"""URDF reading for the robot model: the file parsed into a Pinocchio model (numbers and link
inertias checked before urdfdom sees them) and a branched tree reduced to the serial chain the
flexible-joint model needs (:mod:`flexmodal_ros.robot.model`, the closed-chain robot of
:mod:`flexmodal_ros.constrained.closed_chain` keeps the whole tree)."""
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin

from .params import MAX_LENGTH, MAX_MASS, check_rigid_inertia
from ..core.errors import ConfigError
from ..core.validation import read_file_bytes, shown, shown_names

LOCK_TOLERANCE = 1e-9   # locked positions may sit on a (rounded) joint limit [rad or m]


def parse_urdf(path, accept_inertia=None):
    """Pinocchio model of a URDF file and its mimic joints {joint: mimicked joint}.

    The file is read once (regular file, size-limited, no XML entity declarations); continuous
    joints are given to Pinocchio as revolute joints (one coordinate, not its cos/sin pair) and
    get infinite position limits. ``accept_inertia``: {link: reason} whose triangle inequality is
    waived (params YAML ``accept_inertia``)."""
    path = Path(path)
    data = read_file_bytes(path, "urdf", ConfigError)
    if b"<!ENTITY" in data:
        raise ConfigError(f"urdf {path}: XML entity declarations are not allowed (expand them, e.g. with xacro)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ConfigError(f"urdf {path}: malformed XML: {exc}") from None
    if root.tag != "robot":
        raise ConfigError(f"urdf {path}: root element is <{root.tag[:80]}>, expected <robot>")
    _check_urdf_numbers(root, path, accept_inertia or {})
    continuous = []
    mimics = {}
    for joint in root.findall("joint"):
        if joint.get("type") == "continuous":
            joint.set("type", "revolute")
            limit = joint.find("limit")
            if limit is None:
                limit = ET.SubElement(joint, "limit", effort="0", velocity="0")
            limit.set("lower", "-1")
            limit.set("upper", "1")
            continuous.append(joint.get("name"))
        if (mimic := joint.find("mimic")) is not None:
            mimics[joint.get("name")] = mimic.get("joint")
    try:
        model = pin.buildModelFromXML(ET.tostring(root, encoding="unicode"))
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"urdf {path}: {shown(' '.join(str(exc).split()), 300)}") from None
    lower, upper = model.lowerPositionLimit.copy(), model.upperPositionLimit.copy()
    for name in continuous:
        if model.existJointName(name):
            i = model.joints[model.getJointId(name)].idx_q
            lower[i], upper[i] = -np.inf, np.inf
    model.lowerPositionLimit, model.upperPositionLimit = lower, upper
    return model, mimics


def reduce_to_chain(full, cfg, mimics):
    """(Pinocchio model with the locked joints removed, their names). Locked: joints named in
    ``cfg.locked_joints`` and, for a branched URDF, every joint off the chain from the root to
    ``cfg.end_effector_frame``; each at its locked_joints value (default 0)."""
    movable = list(full.names)[1:]
    unknown = [j for j in cfg.locked_joints if j not in movable]
    if unknown:
        raise ConfigError(f"locked_joints: unknown joint name(s) {shown_names(unknown)} "
                          f"(URDF {full.name} has: {shown_names(movable, 40)})")
    positions = dict(cfg.locked_joints)
    if any(full.parents[i] != i - 1 for i in range(1, full.njoints)):
        if not cfg.end_effector_frame:
            raise ConfigError(f"urdf {full.name}: the robot is branched (e.g. gripper fingers): set "
                              "end_effector_frame in the params YAML to the frame that ends the chain "
                              "(joints off the chain are locked at 0, or at their locked_joints value)")
        if not full.existFrame(cfg.end_effector_frame):
            raise ConfigError(f"end_effector_frame: frame {shown(cfg.end_effector_frame)} not in the URDF")
        chain, j = set(), full.frames[full.getFrameId(cfg.end_effector_frame)].parentJoint
        while j > 0:
            chain.add(full.names[j])
            j = full.parents[j]
        positions.update({name: positions.get(name, 0.0) for name in movable if name not in chain})
    ids = [full.getJointId(name) for name in positions]
    rigid = full
    if ids:
        q_ref = pin.neutral(full)
        for name, value in positions.items():
            jm = full.joints[full.getJointId(name)]
            if jm.nq != 1:
                raise ConfigError(f"locked_joints.{name}: only 1-DOF joints can be locked")
            lo, hi = full.lowerPositionLimit[jm.idx_q], full.upperPositionLimit[jm.idx_q]
            if not lo - LOCK_TOLERANCE <= value <= hi + LOCK_TOLERANCE:
                raise ConfigError(f"locked_joints.{name}: {value:g} outside the joint limits [{lo:g}, {hi:g}]")
            q_ref[jm.idx_q] = value
        rigid = pin.buildReducedModel(full, ids, q_ref)
        rigid.name = full.name
    for name in list(rigid.names)[1:]:
        if name in mimics:
            raise ConfigError(f"urdf joint '{name}' mimics '{mimics[name]}': mimic joints are not supported "
                              f"(it would become an independent flexible joint); lock it in the params "
                              f"YAML (locked_joints: {{{name}: 0.0}}) or remove the mimic tag")
    return rigid, tuple(positions)


_NUMERIC_ATTRIBUTES = {"mass": ("value",), "inertia": ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"),
                       "origin": ("xyz", "rpy"), "axis": ("xyz",),
                       "limit": ("lower", "upper", "effort", "velocity")}


def _check_urdf_numbers(root, path, accept_inertia=None):
    """Reject non-numeric or non-finite values that urdfdom would only warn about and then drop,
    and physically impossible links (:func:`_check_urdf_links`)."""
    for element in root.iter():
        for attr in _NUMERIC_ATTRIBUTES.get(element.tag, ()):
            text = element.get(attr)
            if text is None:
                continue
            try:
                values = [float(v) for v in text.split()]
            except ValueError:
                values = [float("nan")]
            if not values or not np.all(np.isfinite(values)):
                owner = _owner_name(root, element)
                raise ConfigError(f"urdf {path}: <{element.tag} {attr}=\"{text}\"> in {owner} is not a finite number")
            if element.tag == "origin" and attr == "xyz" and np.abs(values).max() > MAX_LENGTH:
                owner = _owner_name(root, element)
                raise ConfigError(f"urdf {path}: <origin xyz=\"{text}\"> in {owner}: offset beyond the plausible "
                                  f"{MAX_LENGTH:g} m")
    _check_urdf_links(root, path, accept_inertia or {})


def _check_urdf_links(root, path, accept_inertia):
    """Each <link>'s <inertial>: 0 <= mass <= MAX_MASS (0 only with a zero inertia: no inertial),
    and an inertia about the COM that a rigid body can have (positive semi-definite, triangle
    inequalities, entries <= MAX_INERTIA; :func:`~flexmodal_ros.robot.params.check_rigid_inertia`);
    the triangle inequality is waived for the links in ``accept_inertia``."""
    links = {link.get("name") for link in root.findall("link")}
    unknown = sorted(set(accept_inertia) - links)
    if unknown:
        raise ConfigError(f"accept_inertia: unknown link(s) {shown_names(unknown)} (urdf {path})")
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        where = f"urdf {path}: link '{link.get('name')}' <inertial>"
        mass_element, inertia_element = inertial.find("mass"), inertial.find("inertia")
        mass = float(mass_element.get("value", "0")) if mass_element is not None else 0.0
        names = _NUMERIC_ATTRIBUTES["inertia"]
        values = [float(inertia_element.get(a, "0")) for a in names] if inertia_element is not None else [0.0] * 6
        ixx, ixy, ixz, iyy, iyz, izz = values
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        if not 0.0 <= mass <= MAX_MASS:
            raise ConfigError(f"{where} <mass value=\"{mass_element.get('value')}\">: must lie in [0, {MAX_MASS:g}] kg")
        if mass == 0.0 and np.any(inertia):
            raise ConfigError(f"{where} <mass value=\"{mass_element.get('value') if mass_element is not None else ''}\">: "
                              "a link with inertia must have a mass > 0")
        name = link.get("name")
        check_rigid_inertia(inertia, f"{where} <inertia ixx..izz>", ConfigError, name not in accept_inertia,
                            f" (if the data are meant as they are, e.g. published, add accept_inertia: "
                            f"{{{name}: <reason>}} to the params YAML)")


def _owner_name(root, element):
    for owner in root:
        if element in list(owner.iter()):
            return f"{owner.tag} '{owner.get('name')}'"
    return "robot"

"""The planar beam-link arm: beams from the robot YAML's ``links:`` section, joints from its URDF.

Schema (additive to :mod:`flexmodal_ros.robot.params`; the ``joints:`` section stays as it is)::

    links:
      thickness_factor: 1.0        # optional: multiplies every section's in-plane depth (Tables 2-6)
      joint_model: rigid           # optional default: rigid | elastic | servo (see below)
      beams:                       # keyed by URDF link name (the child link of each movable joint)
        link_1:
          length: 0.5              # L [m]; must equal the URDF offset to the next joint
          E: 2.1e11                # Young's modulus [Pa]  | or bending_stiffness: EI [N m²]
          rho: 7800.0              # density [kg/m³]        | or mass: ρSL [kg] (at factor 1)
          nu: 0.3                  # Poisson's ratio        | or G: shear modulus [Pa]
          shear_factor: 0.85       # Timoshenko k [-]
          section: {shape: rectangle, width: 0.051, depth: 0.00061}   # [m]
          # or {shape: hollow_rectangle, width: 0.2, depth: 0.15, wall: 0.01}
          # or {area: 6.6e-3, second_moment: 2.3295e-5}                 # [m², m⁴]
          tip_mass: 0.61           # M_i [kg]: next joint's motor, or the payload
          tip_inertia: 1.5e-3      # J_i [kg m²]

``bending_stiffness`` and ``mass`` are the paper's Table 1 data: E = EI/I and ρ = m/(SL) are
derived at thickness factor 1 and kept when the section is thickened (notes_002 §3.1).

Joints (beyond the paper, whose joints are locked and rigid, §1.5). At joint i a torsional spring
k_T joins the tip rotation of link i−1 (φ⁻, the ground for i = 1) and the root rotation of link i
(φ⁺); the tip body J_{i−1} sits on the φ⁻ side (the motor housing is part of link i−1):

- ``rigid``: φ⁺ = φ⁻ (the paper, (19)/(25) row 1);
- ``elastic``: spring k_T = the YAML joint stiffness ``k``, motor locked (brake): moment
  k_T (φ⁺ − φ⁻);
- ``servo``: the spring k_T in series with the rotor: motor coordinate q_m relative to link i−1
  (after the gear) with reflected inertia B = N² I_r and kinetic energy ½ B q̇_m², held by the
  motor-side P gain k_p as a spring (the undamped flexible-joint model of thesis (2.1)), spring
  stretch φ⁺ − φ⁻ − q_m.

k_T → ∞ (and k_p → ∞ for ``servo``) gives the rigid joint back.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..core.errors import ConfigError, InputError
from ..robot.registry import resolve_model
from ..core.validation import (finite_vector, frozen, load_yaml_mapping, positive, reject_unknown_keys,
                          require_keys)
from .beam import Beam, Section, hollow_rectangle, make_beam, rectangle
from ..core.validation import shown

JOINT_MODELS = ("rigid", "elastic", "servo")
LINKS_KEYS = {"thickness_factor", "joint_model", "beams"}
BEAM_KEYS = {"length", "E", "bending_stiffness", "rho", "mass", "G", "nu", "shear_factor",
             "section", "tip_mass", "tip_inertia"}
SECTION_KEYS = {"rectangle": {"shape", "width", "depth"},
                "hollow_rectangle": {"shape", "width", "depth", "wall"},
                None: {"area", "second_moment"}}
GEOMETRY_RTOL = 1e-6  # URDF joint offsets must equal the beam lengths to this relative tolerance


@dataclass(frozen=True, eq=False)
class LinkArm:
    """Immutable planar arm of n beam links (base to tip; arrays read-only, URDF joint order).

    ``base_beams`` are the beams at thickness factor 1 and ``beams`` the ones used
    (``thickness_factor`` applied). Joint arrays: ``joint_stiffness`` k_T [N m/rad] (inf =
    rigid), ``rotor_inertia`` B [kg m²], ``motor_stiffness`` k_m [N m/rad] (inf = locked motor),
    as set by ``joint_model``; ``yaml_stiffness``, ``yaml_rotor_inertia``, ``yaml_kp`` are the
    robot YAML's k, B, k_p (the data of the ``elastic`` and ``servo`` models). Joint angles are
    the URDF joint positions (revolute about +z).
    """

    name: str
    joint_names: tuple
    link_names: tuple
    base_beams: tuple
    beams: tuple
    thickness_factor: float
    joint_model: str
    joint_stiffness: np.ndarray
    rotor_inertia: np.ndarray
    motor_stiffness: np.ndarray
    yaml_stiffness: np.ndarray
    yaml_rotor_inertia: np.ndarray
    yaml_kp: np.ndarray

    @property
    def n(self) -> int:
        return len(self.beams)

    def joint_index(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise InputError(f"unknown joint '{name}' (arm {self.name} has: "
                             f"{', '.join(self.joint_names)})") from None


def make_arm(beams, joint_names=None, name="arm", joint_model="rigid", stiffness=None,
             rotor_inertia=None, kp=None, thickness_factor=1.0) -> LinkArm:
    """A :class:`LinkArm` from :class:`~flexmodal_ros.links.beam.Beam` objects (base to tip).

    ``stiffness``, ``rotor_inertia``, ``kp`` (scalar or one per joint) are the joint data used by
    the ``elastic`` and ``servo`` joint models (:func:`with_joints`).
    """
    beams = tuple(beams)
    if not beams or not all(isinstance(b, Beam) for b in beams):
        raise ConfigError("beams: need at least one Beam")
    n = len(beams)
    joint_names = tuple(joint_names or (f"joint_{i + 1}" for i in range(n)))
    if len(joint_names) != n:
        raise ConfigError(f"joint_names: expected {n} names (one per beam), got {len(joint_names)}")
    factor = float(positive(thickness_factor, "thickness_factor", ConfigError))

    def column(values, field, default):
        return frozen(np.full(n, default) if values is None else _stiffness(values, n, field, ConfigError))

    arm = LinkArm(str(name), joint_names, tuple(b.name for b in beams), beams,
                  tuple(b.thickened(factor) for b in beams), factor, "rigid",
                  frozen(np.full(n, np.inf)), frozen(np.zeros(n)), frozen(np.full(n, np.inf)),
                  column(stiffness, "stiffness", np.inf), column(rotor_inertia, "rotor_inertia", 0.0),
                  column(kp, "kp", np.inf))
    return with_joints(arm, joint_model)


def with_joints(arm: LinkArm, joint_model: str, stiffness=None, motor_stiffness=None) -> LinkArm:
    """The arm with another joint model (``rigid``, ``elastic``, ``servo``; module docstring).

    ``stiffness`` overrides k_T (scalar or one per joint, > 0, inf allowed) and
    ``motor_stiffness`` overrides k_m of the ``servo`` model; otherwise the YAML's k and k_p.
    """
    if joint_model not in JOINT_MODELS:
        raise InputError(f"joint_model: expected one of {', '.join(JOINT_MODELS)}, got {shown(joint_model)}")
    n = arm.n
    if joint_model == "rigid":
        if stiffness is not None or motor_stiffness is not None:
            raise InputError("joint_model rigid: joint stiffness overrides need joint_model "
                             "elastic or servo")
        return dataclasses.replace(arm, joint_model="rigid", joint_stiffness=frozen(np.full(n, np.inf)),
                                   rotor_inertia=frozen(np.zeros(n)),
                                   motor_stiffness=frozen(np.full(n, np.inf)))
    k_T = arm.yaml_stiffness if stiffness is None else _stiffness(stiffness, n, "joint stiffness k_T")
    if joint_model == "elastic":
        if motor_stiffness is not None:
            raise InputError("motor_stiffness: only the servo joint model has a motor spring")
        return dataclasses.replace(arm, joint_model="elastic", joint_stiffness=frozen(k_T),
                                   rotor_inertia=frozen(np.zeros(n)),
                                   motor_stiffness=frozen(np.full(n, np.inf)))
    k_m = arm.yaml_kp if motor_stiffness is None else _stiffness(motor_stiffness, n, "motor stiffness")
    return dataclasses.replace(arm, joint_model="servo", joint_stiffness=frozen(k_T),
                               rotor_inertia=arm.yaml_rotor_inertia, motor_stiffness=frozen(k_m))


def with_thickness(arm: LinkArm, factor: float) -> LinkArm:
    """The arm with every section's depth = base depth × ``factor`` (E, ρ, M, J unchanged)."""
    factor = float(positive(factor, "thickness_factor", InputError))
    return dataclasses.replace(arm, thickness_factor=factor,
                               beams=tuple(b.thickened(factor) for b in arm.base_beams))


def _stiffness(values, n, field, error=InputError):
    """Per-joint values > 0 where inf is allowed (a rigid spring) but NaN is not."""
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{field}: expected numbers, got {shown(values)}") from None
    if arr.ndim == 0 or arr.size == 1:
        arr = np.full(n, float(arr.reshape(-1)[0]))
    if arr.shape != (n,):
        raise error(f"{field}: expected 1 or {n} values, got {arr.size}")
    if np.any(np.isnan(arr)) or np.any(arr <= 0):
        raise error(f"{field}: must be > 0 (inf = rigid), got {arr.tolist()}")
    return arr


# --- loading from a robot (URDF + YAML) ------------------------------------------------------

def has_links(model) -> bool:
    """True if the robot model's YAML has a ``links:`` section."""
    return model.params_path is not None and "links" in load_yaml_mapping(model.params_path, "params file",
                                                                          ConfigError)


def load_link_arm(robot=None, urdf=None, params=None, thickness_factor=None) -> LinkArm:
    """The :class:`LinkArm` of a bundled robot or of a URDF + YAML pair (as :func:`resolve_model`)."""
    arm = link_arm_from_model(resolve_model(robot, urdf, params))
    return arm if thickness_factor is None else with_thickness(arm, thickness_factor)


def link_arm_from_model(model) -> LinkArm:
    """Beam links of a :class:`~flexmodal_ros.robot.model.FlexibleJointModel` whose YAML has ``links:``.

    Checks that the arm is planar (revolute joints about +z, no rotation between joint frames)
    and that each beam length equals the URDF offset to the next joint (along x).
    """
    raw = load_yaml_mapping(model.params_path, "params file", ConfigError) if model.params_path else {}
    if "links" not in raw:
        raise ConfigError(f"robot {model.name}: its YAML has no links: section (no beam-link data)")
    spec = raw["links"]
    if not isinstance(spec, dict):
        raise ConfigError("links: expected a mapping with beams (and optional thickness_factor, joint_model)")
    reject_unknown_keys(spec, LINKS_KEYS, "links", ConfigError)
    beams_spec = spec.get("beams")
    if not isinstance(beams_spec, dict) or not beams_spec:
        raise ConfigError("links.beams: expected a mapping keyed by URDF link name")
    link_names = _child_links(model)
    unknown = [name for name in beams_spec if name not in link_names]
    if unknown:
        raise ConfigError(f"links.beams: unknown link name(s) {', '.join(map(str, unknown))} (the links "
                          f"moved by the joints of {model.name} are: {', '.join(link_names)})")
    missing = [name for name in link_names if name not in beams_spec]
    if missing:
        raise ConfigError(f"links.beams: missing beam data for link(s) {', '.join(missing)}")
    beams = [_beam(name, beams_spec[name], f"links.beams.{name}") for name in link_names]
    _check_planar(model, beams)
    factor = spec.get("thickness_factor", 1.0)
    positive(factor, "links.thickness_factor", ConfigError)
    arm = make_arm(beams, model.joint_names, model.name, "rigid", model.k, model.B, model.kp, factor)
    return with_joints(arm, _joint_model(spec.get("joint_model", "rigid")))


def _joint_model(value):
    if value not in JOINT_MODELS:
        raise ConfigError(f"links.joint_model: expected one of {', '.join(JOINT_MODELS)}, got {shown(value)}")
    return value


def _child_links(model):
    """URDF names of the links moved by each movable joint (one per joint, base to tip)."""
    pm = model.rigid
    names = []
    for joint in model.joint_names:
        jid = pm.getJointId(joint)
        bodies = [f.name for f in pm.frames if f.parentJoint == jid and f.type.name == "BODY"
                  and pm.frames[f.parentFrame].name == joint]
        if not bodies:
            raise ConfigError(f"URDF: cannot find the child link of joint {joint}")
        names.append(bodies[0])
    return names


def _check_planar(model, beams):
    pm = model.rigid
    for i, joint in enumerate(model.joint_names):
        jid = pm.getJointId(joint)
        if model.prismatic[i] or not pm.joints[jid].shortname().endswith("RZ"):
            raise ConfigError(f"links: joint {joint} must be revolute about +z (planar beam-link arm)")
        if i == 0:
            continue
        if pm.parents[jid] != pm.getJointId(model.joint_names[i - 1]):
            raise ConfigError(f"links: joint {joint} must follow {model.joint_names[i - 1]} (serial chain)")
        placement = pm.jointPlacements[jid]
        L = beams[i - 1].length
        expected = np.array([L, 0.0, 0.0])
        if (np.linalg.norm(placement.translation - expected) > GEOMETRY_RTOL * L
                or np.linalg.norm(placement.rotation - np.eye(3)) > GEOMETRY_RTOL):
            raise ConfigError(f"links.beams.{beams[i - 1].name}.length: {L:g} m, but the URDF places "
                              f"{joint} at {np.round(placement.translation, 9).tolist()} (rotation "
                              f"{'identity' if np.allclose(placement.rotation, np.eye(3)) else 'not identity'}) "
                              f"from {model.joint_names[i - 1]}; expected [{L:g}, 0, 0], no rotation")


def _beam(name, spec, field) -> Beam:
    if not isinstance(spec, dict):
        raise ConfigError(f"{field}: expected a mapping of beam data")
    reject_unknown_keys(spec, BEAM_KEYS, field, ConfigError)
    require_keys(spec, ("length", "shear_factor", "section"), field, ConfigError)
    section = _section(spec["section"], f"{field}.section")
    length = float(positive(spec["length"], f"{field}.length", ConfigError))
    key, value = _one_of(spec, "E", "bending_stiffness", field)
    E = value if key == "E" else float(positive(value, f"{field}.{key}", ConfigError)) / section.second_moment
    key, value = _one_of(spec, "rho", "mass", field)
    rho = value if key == "rho" else float(positive(value, f"{field}.{key}", ConfigError)) / (section.area * length)
    G = spec.get("G")
    nu = spec.get("nu")
    return make_beam(name, length, E, rho, section, spec["shear_factor"], spec.get("tip_mass", 0.0),
                     spec.get("tip_inertia", 0.0), G=G, nu=nu, field=field)


def _one_of(spec, a, b, field):
    if (a in spec) == (b in spec):
        raise ConfigError(f"{field}: give exactly one of {a} and {b}")
    return (a, spec[a]) if a in spec else (b, spec[b])


def _section(spec, field) -> Section:
    if not isinstance(spec, dict):
        raise ConfigError(f"{field}: expected a mapping (shape and dimensions, or area and second_moment)")
    shape = spec.get("shape")
    if shape not in SECTION_KEYS:
        raise ConfigError(f"{field}.shape: expected rectangle or hollow_rectangle (or area and "
                          f"second_moment without a shape), got {shown(shape)}")
    allowed = SECTION_KEYS[shape]
    reject_unknown_keys(spec, allowed, field, ConfigError)
    missing = sorted(allowed - set(spec) - {"shape"})
    if missing:
        raise ConfigError(f"{field}: missing {', '.join(missing)}")
    if shape == "rectangle":
        return rectangle(spec["width"], spec["depth"], field)
    if shape == "hollow_rectangle":
        return hollow_rectangle(spec["width"], spec["depth"], spec["wall"], field)
    return Section(float(positive(spec["area"], f"{field}.area", ConfigError)),
                   float(positive(spec["second_moment"], f"{field}.second_moment", ConfigError)))


def check_angles(arm: LinkArm, q, field="q") -> np.ndarray:
    """Joint angles (n,) [rad], finite; θ_1 rotates the whole arm, θ_i (i ≥ 2) is the angle from
    link i−1 to link i (the URDF joint positions, axes +z)."""
    return finite_vector(q, arm.n, field)

"""Flexibility parameters of a flexible-joint robot, read from YAML and validated.

The YAML file complements a URDF (rigid links) with what the URDF cannot hold: per-joint stiffness,
damping, rotor inertia, gear ratio, PD gains; the gravity vector; a tool; an external wrench.
Symbols follow the thesis (T.T. Do 2021, eqs. (2.1), (A I-12)-(A I-18), (4.3)-(4.4)):

```yaml
robot: scompi                   # name (informational)
urdf: ../urdf/scompi.urdf       # path relative to this YAML file
gravity: [-9.81, 0.0, 0.0]      # g0 in frame 0 [m/s^2]
end_effector_frame: tool0       # URDF frame carrying the tool / wrench point (default: last link);
                                # in a branched URDF also the end of the modelled chain
locked_joints: {finger_joint1: 0.02}   # optional: URDF joints held rigidly at a position [rad or m]
                                # (joints off the chain to end_effector_frame are locked at 0)
tool: {mass: 0.0, com: [0, 0, 0], inertia: [0, 0, 0, 0, 0, 0]}   # [kg], [m] in that frame,
                                # [kg m^2] about the COM: ixx, ixy, ixz, iyy, iyz, izz
wrench: [0, 0, 0, 0, 0, 0]      # tau_ext = [f; mu] in frame 0 at the tool point [N, N m]
joints:                         # keyed by URDF joint name; every movable joint must appear
  joint_1:
    k: 25000.0      # joint stiffness [N m/rad] (motor side for a prismatic joint)
    d_f: 2.73       # link-side viscous damping [N m s/rad] or [N s/m] (prismatic)
    d_fm: 9.46e-4   # motor-side viscous damping [N m s/rad]
    N: 51           # gear ratio  } reflected rotor inertia B = N^2 I_r [kg m^2],
    I_r: 1.71e-4    # rotor inertia [kg m^2] } or give B directly instead of N and I_r
    r: 0.057        # characteristic (pinion) radius [m]; prismatic joints only
    kp: 15000.0     # motor-side P gain [N m/rad]
    kd: 52.0        # motor-side D gain [N m s/rad]
    d_c: 0.0        # optional link-side Coulomb friction [N m] (absent = no Coulomb friction)
    d_cm: 0.0       # optional motor-side Coulomb friction [N m] (absent = no Coulomb friction)
```

Closed-chain robots (optional, both keys absent for serial robots): the URDF holds a spanning tree
of the mechanism; unactuated joints and loop closures are declared here and the robot is analysed
by :mod:`flexmodal_ros.constrained` (``flexmodal modal --method mcs|rcs|ucs``):

```yaml
passive_joints:                 # unactuated, rigid joints of the tree (no motor, no flexibility)
  joint_3: {d_f: 0.05}          # viscous damping [N m s/rad] or [N s/m]
loop_closures:                  # pairs of URDF frames whose origins coincide
  - name: parallelogram
    frames: [coupler_tip, forearm_rear]
    type: planar                # planar: 2 equations in the plane normal to `normal`; point: 3
    normal: [0, 0, 1]           # planar only, in frame 0
```

Plausibility (checked at load, the error names the YAML key path): every joint field is one finite
number within :data:`JOINT_RANGES` (SI units above; wide enough for any arm from micro-robots to
heavy industrial ones, narrow enough that the closed loop stays well conditioned in double
precision: a stiffness of 1e308 would otherwise overflow to 0 modes, a rotor inertia of 1e308 to a
0 Hz mode with negative damping); ``|gravity|`` ≤ ``MAX_GRAVITY``; wrench forces/moments ≤
``MAX_WRENCH``; the tool's mass ≤ ``MAX_MASS``, ``|com|`` ≤ ``MAX_LENGTH`` and its inertia
symmetric, positive semi-definite, ≤ ``MAX_INERTIA`` and satisfying the triangle inequalities of
rigid bodies (I_1 + I_2 ≥ I_3 for the principal moments, relative tolerance ``TRIANGLE_RTOL``).
The URDF's links and the conditioning of the assembled M and K are checked in
:mod:`flexmodal_ros.robot.model`. Every key may appear once (duplicate keys are refused).

Published data sometimes violate the triangle inequality (e.g. the thesis' Scompi link 6, Table
2.3: I_zz = 0.012 > I_xx + I_yy = 0.002 kg m^2). To reproduce such data on purpose, name the link
and the reason: ``accept_inertia: {link_6: "thesis Table 2.3 as published"}`` (the inertia must
still be positive semi-definite and the mass positive).
"""
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ..core.errors import ConfigError
from ..core.validation import (finite_array, finite_vector, load_yaml_mapping, reject_unknown_keys,
                               require_keys, shown)

TOP_KEYS = {"robot", "urdf", "gravity", "end_effector_frame", "locked_joints", "tool", "wrench", "joints",
            "links",  # links: beam-link data, read by flexmodal_ros.links.arm
            "passive_joints", "loop_closures", "accept_inertia"}
PASSIVE_KEYS = {"d_f"}
CLOSURE_KEYS = {"name", "frames", "type", "normal"}
CLOSURE_TYPES = ("planar", "point")
JOINT_KEYS = {"k", "d_f", "d_fm", "N", "I_r", "B", "r", "kp", "kd", "d_c", "d_cm"}
TOOL_KEYS = {"mass", "com", "inertia"}

# Plausible ranges of the joint fields [low, high] (SI units of the module docstring), checked at load.
JOINT_RANGES = {
    "k": (1e-3, 1e9),       # N m/rad: harmonic drives 1e3..1e6, series-elastic actuators 1e1..1e3
    "d_f": (0.0, 1e7), "d_fm": (0.0, 1e7),   # N m s/rad (N s/m)
    "B": (1e-12, 1e4),      # kg m^2, reflected rotor inertia N^2 I_r
    "N": (1e-3, 1e5),       # gear ratio
    "I_r": (1e-12, 1e2),    # kg m^2
    "r": (1e-6, 1e3),       # m
    "kp": (1e-3, 1e9), "kd": (0.0, 1e7),
    "d_c": (0.0, 1e6), "d_cm": (0.0, 1e6),   # N m
}
MAX_GRAVITY = 1e3          # |g0| [m/s^2]
MAX_WRENCH = 1e7           # |f_i| [N], |mu_i| [N m]
MAX_MASS = 1e6             # link and tool masses [kg]
MAX_INERTIA = 1e6          # link and tool inertia entries [kg m^2]
MAX_LENGTH = 1e3           # offsets, COM positions [m]
TRIANGLE_RTOL = 1e-4       # I_1 + I_2 >= I_3 (1 - TRIANGLE_RTOL) for rounded CAD values


@dataclass(frozen=True)
class Tool:
    """Rigid tool attached to the end-effector frame.

    mass [kg]; com [m] offset of its centre of mass (= the tool point E of (A I-4)) in the
    end-effector frame; inertia [kg m^2] 3x3 about the COM, in that frame's axes.
    """
    mass: float
    com: np.ndarray
    inertia: np.ndarray

    @staticmethod
    def none():
        return Tool(0.0, np.zeros(3), np.zeros((3, 3)))

    @staticmethod
    def point_mass(mass, com=(0.0, 0.0, 0.0)):
        return make_tool({"mass": mass, "com": list(com)}, "tool")


@dataclass(frozen=True)
class JointParameters:
    """Flexibility parameters of one joint (units in the module docstring)."""
    k: float
    d_f: float
    d_fm: float
    B: float
    r: float
    kp: float
    kd: float
    d_c: float
    d_cm: float
    N: float = float("nan")     # gear ratio when given (with I_r); nan when B is given directly


@dataclass(frozen=True)
class LoopClosure:
    """Two URDF frames whose origins coincide: ``type`` "planar" (2 equations, components in the
    plane normal to ``normal``, frame 0) or "point" (3 equations)."""
    name: str
    frames: tuple
    type: str
    normal: np.ndarray


@dataclass(frozen=True)
class FlexibilityConfig:
    """Parsed, validated flexibility YAML (joint names not yet matched to the URDF).

    ``passive_joints`` maps unactuated joint names to their damping d_f and ``loop_closures``
    lists :class:`LoopClosure` (both empty for serial robots)."""
    robot: str
    urdf_path: Path
    gravity: np.ndarray
    end_effector_frame: str | None
    locked_joints: dict
    tool: Tool
    wrench: np.ndarray
    joints: dict
    path: Path | None
    passive_joints: dict = field(default_factory=dict)
    loop_closures: tuple = ()
    accept_inertia: dict = field(default_factory=dict)

    @property
    def closed_chain(self) -> bool:
        return bool(self.loop_closures or self.passive_joints)


def inertia_matrix(values, field, error=ConfigError, triangle=True):
    """3x3 symmetric inertia from ``[ixx, ixy, ixz, iyy, iyz, izz]`` or a 3x3 nested list.

    Checks (:func:`check_rigid_inertia`) positive semi-definiteness, the triangle inequalities and
    the magnitude, naming the field.
    """
    arr = finite_array(values, field, error=error)
    if arr.shape == (6,):
        ixx, ixy, ixz, iyy, iyz, izz = arr
        arr = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    elif arr.shape == (3, 3):
        if not np.allclose(arr, arr.T, atol=1e-12):
            raise error(f"{field}: inertia matrix must be symmetric")
    else:
        raise error(f"{field}: expected 6 values [ixx, ixy, ixz, iyy, iyz, izz] or a 3x3 matrix")
    check_rigid_inertia(arr, field, error, triangle)
    return arr


def check_rigid_inertia(inertia, field, error=ConfigError, triangle=True, hint=""):
    """Error naming ``field`` unless the 3x3 rotational inertia about the COM is that of a rigid
    body: entries at most MAX_INERTIA, principal moments I_1 <= I_2 <= I_3 >= 0 (positive
    semi-definite) with I_1 + I_2 >= I_3 (the triangle inequality: I_1 + I_2 − I_3 = 2∫z² dm in
    principal axes; ``triangle=False`` waives it), up to TRIANGLE_RTOL of the largest moment;
    ``hint`` is appended to the triangle error."""
    big = float(np.abs(inertia).max())
    if big > MAX_INERTIA:
        raise error(f"{field}: inertia entry {big:g} kg m^2 above the plausible maximum {MAX_INERTIA:g}")
    moments = np.linalg.eigvalsh(inertia)
    tol = 1e-12 * max(1.0, big)
    if moments[0] < -tol:
        raise error(f"{field}: inertia matrix is not positive semi-definite (principal moments "
                    f"{np.array2string(moments, precision=4)} kg m^2)")
    if triangle and moments[0] + moments[1] < moments[2] * (1 - TRIANGLE_RTOL) - tol:
        raise error(f"{field}: principal moments {np.array2string(moments, precision=4)} kg m^2 violate the "
                    f"triangle inequality I1 + I2 >= I3 of a rigid body{hint}")


def make_tool(spec, field="tool", error=ConfigError):
    """Build a :class:`Tool` from a mapping with ``mass`` and optional ``com``/``inertia``."""
    if not isinstance(spec, dict):
        raise error(f"{field}: expected a mapping with mass, com, inertia")
    reject_unknown_keys(spec, TOOL_KEYS, field, error)
    require_keys(spec, ("mass",), field, error)
    mass = bounded_scalar(spec["mass"], f"{field}.mass", 0.0, MAX_MASS, "kg", error)
    com = bounded_vector(spec.get("com", [0.0, 0.0, 0.0]), 3, f"{field}.com", MAX_LENGTH, "m", error)
    inertia = inertia_matrix(spec.get("inertia", [0.0] * 6), f"{field}.inertia", error)
    return Tool(mass, com, inertia)


def load_config(path):
    """Read and validate a flexibility YAML file; relative ``urdf`` paths are resolved against it."""
    path = Path(path)
    raw = load_yaml_mapping(path, "params file", ConfigError)
    reject_unknown_keys(raw, TOP_KEYS, "params", ConfigError)
    for key in ("urdf", "gravity", "joints"):
        if key not in raw:
            raise ConfigError(f"{key}: missing (required in {path})")
    urdf = Path(str(raw["urdf"]))
    urdf_path = urdf if urdf.is_absolute() else (path.parent / urdf).resolve()
    joints = raw["joints"]
    if not isinstance(joints, dict) or not joints:
        raise ConfigError("joints: expected a non-empty mapping keyed by URDF joint name")
    return FlexibilityConfig(
        robot=str(raw.get("robot", urdf_path.stem)),
        urdf_path=urdf_path,
        gravity=bounded_vector(raw["gravity"], 3, "gravity", MAX_GRAVITY, "m/s^2", ConfigError),
        end_effector_frame=None if raw.get("end_effector_frame") is None else str(raw["end_effector_frame"]),
        locked_joints=_locked_joints(raw.get("locked_joints")),
        tool=make_tool(raw["tool"]) if raw.get("tool") is not None else Tool.none(),
        wrench=bounded_vector(raw.get("wrench", [0.0] * 6), 6, "wrench", MAX_WRENCH, "N, N m", ConfigError),
        joints={str(name): _joint(spec, f"joints.{name}") for name, spec in joints.items()},
        path=path,
        passive_joints=_passive_joints(raw.get("passive_joints", {}), set(map(str, joints))),
        loop_closures=_loop_closures(raw.get("loop_closures", [])),
        accept_inertia=_accept_inertia(raw.get("accept_inertia", {})),
    )


def _accept_inertia(spec):
    """``accept_inertia``: {URDF link name: reason} (links whose triangle inequality is waived)."""
    if not isinstance(spec, dict):
        raise ConfigError("accept_inertia: expected a mapping {URDF link name: reason}")
    for name, reason in spec.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"accept_inertia.{name}: give the reason as text (e.g. the published table)")
    return {str(k): str(v) for k, v in spec.items()}


def _passive_joints(spec, actuated):
    if not isinstance(spec, dict):
        raise ConfigError("passive_joints: expected a mapping joint name -> {d_f: value}")
    out = {}
    for name, params in spec.items():
        field_name = f"passive_joints.{name}"
        if str(name) in actuated:
            raise ConfigError(f"{field_name}: joint is also listed under joints (actuated)")
        if not isinstance(params, dict):
            raise ConfigError(f"{field_name}: expected a mapping with d_f")
        reject_unknown_keys(params, PASSIVE_KEYS, field_name, ConfigError)
        require_keys(params, ("d_f",), field_name, ConfigError)
        out[str(name)] = bounded_scalar(params["d_f"], f"{field_name}.d_f", *JOINT_RANGES["d_f"],
                                        "N m s/rad", ConfigError)
    return out


def _loop_closures(spec):
    if not isinstance(spec, list):
        raise ConfigError("loop_closures: expected a list of {name, frames, type, normal}")
    out, names = [], set()
    for i, item in enumerate(spec):
        field_name = f"loop_closures[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{field_name}: expected a mapping with name, frames, type")
        reject_unknown_keys(item, CLOSURE_KEYS, field_name, ConfigError)
        require_keys(item, ("name", "frames", "type"), field_name, ConfigError)
        name = str(item["name"])
        if name in names:
            raise ConfigError(f"{field_name}.name: duplicate loop closure name '{name}'")
        names.add(name)
        frames = item["frames"]
        if (not isinstance(frames, list) or len(frames) != 2 or not all(isinstance(f, str) for f in frames)
                or frames[0] == frames[1]):
            raise ConfigError(f"{field_name}.frames: expected two different URDF frame names")
        kind = str(item["type"])
        if kind not in CLOSURE_TYPES:
            raise ConfigError(f"{field_name}.type: expected one of {', '.join(CLOSURE_TYPES)}, got {shown(kind)}")
        normal = np.zeros(3)
        if kind == "planar":
            normal = finite_vector(item.get("normal", [0.0, 0.0, 1.0]), 3, f"{field_name}.normal",
                                   ConfigError)
            if np.linalg.norm(normal) == 0:
                raise ConfigError(f"{field_name}.normal: must be a non-zero vector")
            normal = normal / np.linalg.norm(normal)
        elif "normal" in item:
            raise ConfigError(f"{field_name}.normal: only planar closures have a normal")
        out.append(LoopClosure(name, tuple(frames), kind, normal))
    return tuple(out)
def _locked_joints(spec):
    """``locked_joints``: a mapping {joint: position [rad or m]} or a list of joints (locked at 0)."""
    if spec is None:
        return {}
    if isinstance(spec, (list, tuple)):
        spec = {name: 0.0 for name in spec}
    if not isinstance(spec, dict):
        raise ConfigError("locked_joints: expected a mapping {joint: position} or a list of joint names")
    return {str(name): float(finite_array(value, f"locked_joints.{name}", (), ConfigError))
            for name, value in spec.items()}


def _joint(spec, field):
    if not isinstance(spec, dict):
        raise ConfigError(f"{field}: expected a mapping of parameters")
    reject_unknown_keys(spec, JOINT_KEYS, field, ConfigError)
    require_keys(spec, ("k", "d_f", "d_fm", "kp", "kd"), field, ConfigError)

    def get(key, default=None):
        if key not in spec:
            return default
        return joint_value(key, spec[key], f"{field}.{key}", ConfigError)

    if "B" in spec:
        if "N" in spec or "I_r" in spec:
            raise ConfigError(f"{field}: give either B or both N and I_r, not both")
        B = get("B")
    elif "N" in spec and "I_r" in spec:
        B = get("N") ** 2 * get("I_r")
        low, high = JOINT_RANGES["B"]
        if not low <= B <= high:
            raise ConfigError(f"{field}: B = N^2 I_r = {B:g} kg m^2 outside the plausible range [{low:g}, {high:g}]")
    else:
        raise ConfigError(f"{field}.B: missing (give B, or N and I_r)")
    return JointParameters(
        k=get("k"), d_f=get("d_f"), d_fm=get("d_fm"), B=B, r=get("r", default=np.nan), kp=get("kp"),
        kd=get("kd"), d_c=get("d_c", 0.0), d_cm=get("d_cm", 0.0), N=get("N", float("nan")))


JOINT_UNITS = {"k": "N m/rad", "d_f": "N m s/rad", "d_fm": "N m s/rad", "B": "kg m^2", "N": "", "I_r": "kg m^2",
               "r": "m", "kp": "N m/rad", "kd": "N m s/rad", "d_c": "N m", "d_cm": "N m"}


def joint_value(key, value, field, error=ConfigError):
    """One joint parameter ``key`` (a JOINT_RANGES name) as a float within its plausible range;
    ``field`` names it in the error (YAML key path or request field)."""
    low, high = JOINT_RANGES[key]
    return bounded_scalar(value, field, low, high, JOINT_UNITS[key], error)


def bounded_scalar(value, field, low, high, unit="", error=ConfigError):
    """One finite number (not a list, not a boolean) with low <= value <= high; the error names
    ``field`` and the documented range."""
    if isinstance(value, bool) or isinstance(value, (list, tuple, dict)):
        raise error(f"{field}: expected one number, got {shown(value)}")
    number = finite_array(value, field, error=error)
    if number.ndim != 0:
        raise error(f"{field}: expected one number, got {shown(value)}")
    number = float(number)
    if number <= 0 < low or number < 0 <= low:
        raise error(f"{field}: must be {'> 0' if low > 0 else '>= 0'}, got {number:g}")
    if not low <= number <= high:
        units = f" {unit}" if unit else ""
        raise error(f"{field}: {number:g}{units} outside the plausible range [{low:g}, {high:g}]")
    return number


def bounded_vector(value, n, field, limit, unit="", error=ConfigError):
    """A finite vector of length ``n`` whose entries are at most ``limit`` in magnitude."""
    arr = finite_vector(value, n, field, error)
    if arr.size and np.abs(arr).max() > limit:
        raise error(f"{field}: entry {arr[np.argmax(np.abs(arr))]:g} {unit} beyond the plausible magnitude {limit:g}")
    return arr

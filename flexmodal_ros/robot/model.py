"""The flexible-joint robot model: rigid links from a URDF (Pinocchio) + flexibility parameters.

Pinocchio style: :class:`FlexibleJointModel` is immutable (what the robot is); the data returned by
:func:`create_data` holds work buffers (one per thread). Functions ``f(model, data, q, ...)`` give
the rigid-body ingredients of the thesis' reduced model (T.T. Do 2021, eq. (2.1)):

    M(q) q'' + C(q, q') q' + g(q) + D q' + K W (W q - q_m) = J(q)^T tau_ext
    B q_m'' + D_m q_m' - K (W q - q_m) = tau_m

with B = diag(N^2 I_r) (A I-12), W = diag(1/r) (A I-14; r = 1 for revolute joints), K = diag(k)
(A I-15), D = diag(d_f), D_m = diag(d_fm) (A I-16)-(A I-18). Units: link coordinates q in rad
(revolute) or m (prismatic); motor coordinates q_m after the gear, in rad. The URDF is read by
:mod:`flexmodal_ros.robot.urdf`.
"""
import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from .params import JOINT_RANGES, MAX_GRAVITY, MAX_WRENCH, Tool, load_config, make_tool
from .urdf import parse_urdf, reduce_to_chain
from ..core.errors import ConfigError, InputError
from ..core.validation import finite_vector, frozen, nonnegative, per_joint, positive, shown_names

TOOL_FRAME = "flexmodal_tool_point"
_PRISMATIC = ("PX", "PY", "PZ", "PrismaticUnaligned")
_REVOLUTE = ("RX", "RY", "RZ", "RevoluteUnaligned")
MAX_CONDITION = 1e12    # condition numbers of blkdiag(M(q_ref), B) and of the joint stiffness K̄ at load


@dataclass(frozen=True, eq=False)
class FlexibleJointModel:
    """Immutable description of a flexible-joint serial robot (arrays are read-only, URDF order).

    Fields: name; joint_names; n; prismatic (bool); k [N m/rad]; r [m] (1 for revolute);
    W = 1/r; d_f, d_fm [N m s/rad] (d_f in N s/m for prismatic links); d_c, d_cm [N m] Coulomb;
    B [kg m^2] reflected rotor inertia; kp [N m/rad], kd [N m s/rad] motor-side PD gains;
    gravity [m/s^2] (frame 0); wrench [N, N m] (frame 0, at the tool point E); tool;
    effort_limit [N m or N]; position_lower/upper; velocity_limit; pin (pinocchio.Model with the
    tool appended and gravity set); rigid (the same model without the tool); ee_frame (name of the
    frame the tool is mounted on); ee_frame_id (Pinocchio frame of the tool point E);
    urdf_path; params_path.
    """
    name: str
    joint_names: tuple
    prismatic: np.ndarray
    k: np.ndarray
    r: np.ndarray
    d_f: np.ndarray
    d_fm: np.ndarray
    d_c: np.ndarray
    d_cm: np.ndarray
    B: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    gravity: np.ndarray
    wrench: np.ndarray
    tool: Tool
    effort_limit: np.ndarray
    position_lower: np.ndarray
    position_upper: np.ndarray
    velocity_limit: np.ndarray
    pin: pin.Model
    rigid: pin.Model
    ee_frame: str
    ee_frame_id: int
    urdf_path: Path | None
    params_path: Path | None

    @property
    def n(self):
        return len(self.joint_names)

    @functools.cached_property
    def W(self):
        """1 / r (transmission of (2.1)), computed once per model (read at every analysis)."""
        return frozen(1.0 / self.r)

    @functools.cached_property
    def position_limits(self):
        """(position_lower, position_upper) as lists of floats, computed once per model (for
        per-value checks of one configuration without NumPy calls)."""
        return self.position_lower.tolist(), self.position_upper.tolist()

    @functools.cached_property
    def weightless(self):
        """``pin`` without gravity (a copy, made once per model): its RNEA at zero acceleration is
        C(q, q̇)q̇ alone (:func:`velocity_torques`, one pass instead of two)."""
        model = pin.Model(self.pin)
        model.gravity = pin.Motion.Zero()
        return model

    def joint_index(self, name):
        """Index of a URDF joint name; InputError naming the joint if unknown."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise InputError(f"unknown joint '{name}' (robot {self.name} has: "
                             f"{', '.join(self.joint_names)})") from None


def load_model(urdf_path, params_path):
    """Build a :class:`FlexibleJointModel` from a URDF file and a flexibility YAML file.

    ``urdf_path=None`` takes the URDF named in the YAML. Raises ConfigError naming the problem.
    URDF joints: revolute, prismatic, continuous (= revolute without position limits); fixed
    joints are merged. A branched URDF (e.g. an arm with gripper fingers) is reduced to the chain
    that ends at the YAML's ``end_effector_frame``; joints off that chain, and those named in
    ``locked_joints``, are locked (Pinocchio ``buildReducedModel``) at the position given there
    (default 0). Mimic joints left in the chain are refused (they would become independent
    flexible joints).
    """
    cfg = load_config(params_path)
    _refuse_closed_chain(cfg)            # before the tree is reduced to a serial chain
    urdf = Path(urdf_path) if urdf_path is not None else cfg.urdf_path
    full, mimics = parse_urdf(urdf, cfg.accept_inertia)
    rigid, locked = reduce_to_chain(full, cfg, mimics)
    return build_model(rigid, cfg, urdf, locked)


def _refuse_closed_chain(cfg):
    if cfg.closed_chain:
        raise ConfigError(f"robot {cfg.robot}: declares passive joints / loop closures (a closed "
                          "chain); load it with flexmodal_ros.constrained.closed_chain.load_closed_chain "
                          "(CLI/node: --method mcs|rcs|ucs)")


def build_model(rigid, cfg, urdf_path=None, locked=()):
    """Combine a Pinocchio model of the rigid links with a parsed :class:`FlexibilityConfig`
    (``locked``: names of URDF joints locked out of ``rigid``, for the error messages)."""
    _refuse_closed_chain(cfg)
    names = _movable_joints(rigid)
    missing = [j for j in names if j not in cfg.joints]
    unknown = [j for j in cfg.joints if j not in names]
    if set(unknown) & set(locked):
        raise ConfigError(f"joints: {shown_names(sorted(set(unknown) & set(locked)))} locked (off the chain "
                          f"to end_effector_frame, or in locked_joints): remove from joints")
    if unknown:
        raise ConfigError(f"joints: unknown joint name(s) {shown_names(unknown)} "
                          f"(URDF {rigid.name} has: {', '.join(names)})")
    if missing:
        raise ConfigError(f"joints: missing parameters for URDF joint(s) {', '.join(missing)}")
    prismatic = np.array([rigid.joints[rigid.getJointId(j)].shortname().endswith(_PRISMATIC)
                          for j in names])
    params = [cfg.joints[j] for j in names]
    r = np.array([p.r for p in params])
    for j, is_p, rj in zip(names, prismatic, r):
        if is_p and np.isnan(rj):
            raise ConfigError(f"joints.{j}.r: missing (characteristic radius of a prismatic joint)")
        if not is_p and not np.isnan(rj) and rj != 1.0:
            raise ConfigError(f"joints.{j}.r: only prismatic joints have a characteristic radius")
    r = np.where(prismatic, r, 1.0)
    ee_frame = cfg.end_effector_frame or rigid.frames[_last_body_frame(rigid)].name
    if not rigid.existFrame(ee_frame):
        raise ConfigError(f"end_effector_frame: frame '{ee_frame}' not in the URDF")
    col = lambda field: frozen([float(getattr(p, field)) for p in params])
    model = FlexibleJointModel(
        name=cfg.robot, joint_names=tuple(names), prismatic=frozen(prismatic), k=col("k"),
        r=frozen(r), d_f=col("d_f"), d_fm=col("d_fm"), d_c=col("d_c"), d_cm=col("d_cm"),
        B=col("B"), kp=col("kp"), kd=col("kd"), gravity=frozen(cfg.gravity),
        wrench=frozen(cfg.wrench), tool=cfg.tool,
        effort_limit=frozen(joint_limit(rigid.effortLimit)),
        position_lower=frozen(rigid.lowerPositionLimit), position_upper=frozen(rigid.upperPositionLimit),
        velocity_limit=frozen(joint_limit(rigid.velocityLimit)),
        pin=rigid, rigid=rigid, ee_frame=ee_frame, ee_frame_id=-1,
        urdf_path=Path(urdf_path) if urdf_path else None, params_path=cfg.path)
    model = with_tool(model, cfg.tool, cfg.gravity)
    check_conditioning(model)
    return model


def with_overrides(model, kp=None, kd=None, tool=None, wrench=None, gravity=None, **flex):
    """A new model with some parameters replaced (the original is untouched).

    kp, kd and the flexibility fields in ``flex`` (k, d_f, d_fm, d_c, d_cm, B) accept a scalar
    (all joints) or one value per joint; tool is a :class:`Tool` or a mapping (mass, com, inertia);
    wrench is 6 values [N, N m] in frame 0; gravity is 3 values [m/s^2].
    """
    n = model.n
    changes = {}
    checks = {"kp": positive, "kd": nonnegative, "k": positive, "B": positive,
              "d_f": nonnegative, "d_fm": nonnegative, "d_c": nonnegative, "d_cm": nonnegative}
    for field, value in dict(flex, kp=kp, kd=kd).items():
        if field not in checks:
            raise InputError(f"{field}: not an overridable parameter")
        if value is not None:
            values = checks[field](per_joint(value, n, field), field)
            low, high = JOINT_RANGES[field]
            bad = (values < low) | (values > high)
            if bad.any():
                raise InputError(f"{field}: {values[np.argmax(bad)]:g} outside the plausible range "
                                 f"[{low:g}, {high:g}]")
            changes[field] = frozen(values)
    if wrench is not None:
        changes["wrench"] = frozen(_bounded(finite_vector(wrench, 6, "wrench"), MAX_WRENCH, "wrench"))
    if not changes and tool is None and gravity is None:
        return model                     # immutable: nothing to replace (keeps per-model caches)
    out = dataclasses.replace(model, **changes)
    if tool is not None or gravity is not None:
        tool = tool if isinstance(tool, Tool) or tool is None else make_tool(tool, "tool", InputError)
        grav = model.gravity if gravity is None else _bounded(finite_vector(gravity, 3, "gravity"), MAX_GRAVITY,
                                                                 "gravity")
        out = with_tool(out, model.tool if tool is None else tool, grav)
    return out


def _bounded(values, limit, field):
    if np.abs(values).max(initial=0.0) > limit:
        raise InputError(f"{field}: entry {values[np.argmax(np.abs(values))]:g} beyond the plausible magnitude {limit:g}")
    return values


def check_conditioning(model):
    """ConfigError unless the model's inertia and stiffness are usable in double precision: at a
    reference configuration q_ref (0 clipped into the joint limits) blkdiag(M(q_ref), B) must be
    positive definite with condition number <= MAX_CONDITION (a joint that moves no inertia, e.g. a
    massless last link, makes M singular), and so must the joint stiffness of the closed loop,
    K̄ = [[K W², −K W], [−K W, K + K_P]] (2.10). The error names the joint and what to check."""
    q_ref = np.clip(np.zeros(model.n), model.position_lower, model.position_upper)
    M = mass_matrix(model, create_data(model), q_ref)
    n = model.n
    Mbar = np.zeros((2 * n, 2 * n))
    Mbar[:n, :n], Mbar[n:, n:] = M, np.diag(model.B)
    _check_definite(model, Mbar, "inertia", lambda j: (
        f"joint '{model.joint_names[j]}' moves (almost) no link inertia at q = "
        f"{np.array2string(q_ref, precision=3)}: check the <inertial> of the links it carries "
        f"(urdf {model.urdf_path})" if j < n else
        f"joints.{model.joint_names[j - n]}.B = {model.B[j - n]:g} kg m^2 against link inertias up to "
        f"{np.abs(M).max():g}"))
    kw = model.k * model.W
    Kbar = np.block([[np.diag(kw * model.W), -np.diag(kw)], [-np.diag(kw), np.diag(model.k + model.kp)]])
    _check_definite(model, Kbar, "stiffness", lambda j: (
        f"joints.{model.joint_names[j % n]}: k = {model.k[j % n]:g}, kp = {model.kp[j % n]:g} against "
        f"k, kp up to {max(model.k.max(), model.kp.max()):g}"))


def _check_definite(model, matrix, what, culprit):
    values, vectors = np.linalg.eigh(matrix)
    top = values[-1]
    if values[0] > 0 and top <= MAX_CONDITION * values[0]:
        return
    j = int(np.argmax(np.abs(vectors[:, 0])))
    condition = "inf" if values[0] <= 0 else f"{top / values[0]:.3g}"
    raise ConfigError(f"robot {model.name}: the {what} matrix is singular or ill-conditioned (condition number "
                      f"{condition} > {MAX_CONDITION:g}): {culprit(j)}")


def create_data(model):
    """Work buffers for the functions of this module (not thread-safe: one per thread)."""
    return model.pin.createData()


def mass_matrix(model, data, q):
    """Link inertia matrix M(q) incl. the tool [kg m^2, kg m, kg], symmetric (thesis (A I-11))."""
    M = pin.crba(model.pin, data, np.asarray(q, dtype=float)).copy()
    upper = _upper_indices(model.n)
    M.T[upper] = M[upper]  # CRBA guarantees the upper triangle only
    return M


def gravity_torque(model, data, q):
    """Generalized gravity g(q) = dP_g/dq [N m or N] (thesis (A I-13))."""
    return pin.computeGeneralizedGravity(model.pin, data, np.asarray(q, dtype=float)).copy()


def velocity_torques(model, data, qs, qds):
    """Coriolis and centrifugal torques C(q, q̇) q̇ = RNEA(q, q̇, 0) without gravity (m, n) [N m or N]
    at configurations qs and velocities qds (m, n): what a motion adds, second order in the speed
    (``data`` of ``model.pin``, which has the same structure as ``model.weightless``)."""
    qs, qds = np.asarray(qs, dtype=float), np.asarray(qds, dtype=float)
    weightless, zero = model.weightless, np.zeros(qs.shape[1])
    out = np.empty(qs.shape)
    for i, (q, v) in enumerate(zip(qs, qds)):
        out[i] = pin.rnea(weightless, data, q, v, zero)
    return out


def gravity_stiffness(model, data, q):
    """Gravity stiffness dg/dq at q (first term of K_G, thesis (2.12))."""
    return pin.computeGeneralizedGravityDerivatives(model.pin, data, np.asarray(q, dtype=float)).copy()


def ee_jacobian(model, data, q):
    """Geometric Jacobian J(q) (6 x n) of the tool point E: rows [v_E; omega] in frame 0."""
    return pin.computeFrameJacobian(model.pin, data, np.asarray(q, dtype=float), model.ee_frame_id,
                                    pin.LOCAL_WORLD_ALIGNED).copy()


def wrench_torque(model, data, q, wrench=None):
    """Generalized force J(q)^T tau_ext of a wrench [f; mu] (frame 0) applied at E (thesis (A I-19))."""
    w = model.wrench if wrench is None else np.asarray(wrench, dtype=float)
    return ee_jacobian(model, data, q).T @ w


def wrench_stiffness(model, data, q, wrench=None):
    """d(J^T tau_ext)/dq at fixed tau_ext (second term of K_G, thesis (2.12)).

    Column j is (dJ/dq_j)^T tau_ext, with dJ/dq_j the exact Jacobian time variation for the joint
    velocity e_j (Pinocchio), so no finite differences are involved.
    """
    w = model.wrench if wrench is None else np.asarray(wrench, dtype=float)
    n = model.n
    out = np.zeros((n, n))
    if not np.any(w):
        return out
    q = np.asarray(q, dtype=float)
    for j in range(n):
        pin.computeJointJacobiansTimeVariation(model.pin, data, q, np.eye(n)[j])
        pin.updateFramePlacements(model.pin, data)
        dJ = pin.getFrameJacobianTimeVariation(model.pin, data, model.ee_frame_id, pin.LOCAL_WORLD_ALIGNED)
        out[:, j] = dJ.T @ w
    return out


def summary(model):
    """Human-readable table of the model (joints, masses, B, K, gains)."""
    masses = [model.pin.inertias[i].mass for i in range(1, model.pin.njoints)]
    lines = [f"robot {model.name}: {model.n} flexible joints, total mass {sum(masses):.3f} kg "
             f"(tool {model.tool.mass:g} kg), gravity {np.array2string(model.gravity, precision=3)} m/s^2",
             f"{'joint':<14}{'type':<10}{'link mass':>11}{'B':>12}{'k':>11}{'r':>8}"
             f"{'d_f':>9}{'d_fm':>10}{'kp':>9}{'kd':>8}"]
    for i, name in enumerate(model.joint_names):
        lines.append(f"{name:<14}{'prismatic' if model.prismatic[i] else 'revolute':<10}"
                     f"{masses[i]:>11.4f}{model.B[i]:>12.6g}{model.k[i]:>11.6g}{model.r[i]:>8.4g}"
                     f"{model.d_f[i]:>9.4g}{model.d_fm[i]:>10.4g}{model.kp[i]:>9.6g}{model.kd[i]:>8.4g}")
    lines.append("units: mass kg, B kg m^2, k N m/rad, r m, d_f N m s/rad (N s/m prismatic), "
                 "d_fm N m s/rad, kp N m/rad, kd N m s/rad")
    return "\n".join(lines)


def with_tool(model, tool, gravity):
    """A copy of ``model`` whose Pinocchio model is ``model.rigid`` with ``tool`` appended to the
    end-effector frame's joint and ``gravity`` set."""
    rigid = model.rigid
    pm = rigid.copy()
    frame = rigid.frames[rigid.getFrameId(model.ee_frame)]
    mount = frame.placement
    point = mount * pin.SE3(np.eye(3), tool.com)
    if tool.mass > 0 or np.any(tool.inertia):
        pm.appendBodyToJoint(frame.parentJoint, pin.Inertia(tool.mass, tool.com, tool.inertia), mount)
    fid = pm.addFrame(pin.Frame(TOOL_FRAME, frame.parentJoint, point, pin.FrameType.OP_FRAME))
    pm.gravity = pin.Motion(np.asarray(gravity, dtype=float), np.zeros(3))
    return dataclasses.replace(model, pin=pm, ee_frame_id=fid, tool=tool, gravity=frozen(gravity))


def _movable_joints(rigid):
    names = list(rigid.names)[1:]
    for i, name in enumerate(names, start=1):
        jm = rigid.joints[i]
        if jm.nq != 1 or jm.nv != 1 or not jm.shortname().endswith(_PRISMATIC + _REVOLUTE):
            raise ConfigError(f"urdf joint '{name}': type {jm.shortname()} not supported "
                              "(only 1-DOF revolute, continuous and prismatic joints; no floating/planar)")
        if rigid.parents[i] != i - 1:
            raise ConfigError(f"urdf joint '{name}': the robot must be a serial chain (set end_effector_frame "
                              "or locked_joints in the params YAML)")
    if not names:
        raise ConfigError(f"urdf {rigid.name}: no movable joints")
    return names


def _last_body_frame(rigid):
    last = rigid.njoints - 1
    bodies = [i for i, f in enumerate(rigid.frames) if f.parentJoint == last and f.type == pin.FrameType.BODY]
    return bodies[-1]


@functools.lru_cache(maxsize=None)
def _upper_indices(n):
    return np.triu_indices(n, 1)


def joint_limit(values):
    """URDF effort/velocity limits with 0 (= not given) read as unlimited (inf)."""
    arr = np.array(values, dtype=float)
    return np.where(arr > 0, arr, np.inf)

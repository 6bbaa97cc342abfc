"""How far an exported description is from the suite's model (2.1): the AMA (2.13)-(2.17) of the
exported robot under the set-point law (2.2) against :func:`flexmodal_ros.flexible_joint.ama.modal_analysis`.

- MJCF: MuJoCo's own dynamics, linearized by central differences of ``qacc``
  (:func:`flexmodal_ros.export.mujoco_plant.closed_loop_state_matrix`).
- URDF (and the SDF written from the same structure): the exported file as Gazebo reads its rigid
  bodies, loaded by Pinocchio (``mimic=True``: a gear-coupled rotor is the mimic joint), with the
  springs (``<gazebo reference>`` springStiffness) and joint damping read from the file; the PD law
  (2.2) acts on q_m = W s_m through the motor-joint effort W τ_m. The linearization is exact
  (M by CRBA, gravity stiffness by Pinocchio's derivatives of g; central differences of g for
  files with mimic joints, which those derivatives do not support).

Eigenvalues are invariant under the change of coordinates (s_m, s_e) ↔ (q, q_m), so the modes of
both are compared one to one (sorted by frequency): relative differences of f and ζ.
"""
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..core.errors import ConfigError
from ..core.fallbacks import warn_fallback
from ..flexible_joint.linear_model import motor_equilibrium, state_matrix
from ..flexible_joint.ama import modal_analysis
from ..robot.model import create_data
from ..modes import modes_from_eigenpairs
from ..core.validation import finite_array, shown
from .tree import MOTOR_SUFFIX
from ..flexible_joint.linear_model import state_matrix as ama_matrix
from ..flexible_joint.ama import linearized_batch
from ..robot.model import load_model
from .gazebo import physical_inertia
from .tree import rpy_matrix
from .gazebo import write_urdf
from .tree import build_export


@dataclass(frozen=True)
class Fidelity:
    """Largest differences over ``configurations`` (m, n) [rad or m], over all modes:
    ``max_freq_rel`` = max |f_export/f_model − 1|, ``max_damping_rel`` = max |ζ_export/ζ_model − 1|,
    ``max_damping_abs`` = max |ζ_export − ζ_model| (fraction; 0.01 = 1 percentage point) — all inf
    when the number of oscillating modes differs — and ``max_eigenvalue_rel`` = max |λ_e − λ_m|/|λ_m|
    over all 4n eigenvalues sorted by |λ| (defined even then); ``per_configuration`` (m, 4) the four
    per configuration; ``engine``: what linearized the export."""
    engine: str
    configurations: np.ndarray
    per_configuration: np.ndarray

    @property
    def max_freq_rel(self):
        return float(self.per_configuration[:, 0].max())

    @property
    def max_damping_rel(self):
        return float(self.per_configuration[:, 1].max())

    @property
    def max_damping_abs(self):
        return float(self.per_configuration[:, 2].max())

    @property
    def max_eigenvalue_rel(self):
        return float(self.per_configuration[:, 3].max())

    def to_dict(self):
        return {"engine": self.engine, "configurations": self.configurations.tolist(),
                "max_freq_rel": self.max_freq_rel, "max_damping_rel": self.max_damping_rel,
                "max_damping_abs": self.max_damping_abs, "max_eigenvalue_rel": self.max_eigenvalue_rel}


def random_configurations(model, count, seed=0):
    """``count`` configurations uniform within the URDF limits (±π where unlimited) [rad or m]."""
    rng = np.random.default_rng(seed)
    low = np.where(np.isfinite(model.position_lower), model.position_lower, -np.pi)
    high = np.where(np.isfinite(model.position_upper), model.position_upper, np.pi)
    return rng.uniform(low, high, size=(int(count), model.n))


def compare_modes(state_matrices, model, configurations):
    """(m, 4) differences (see :class:`Fidelity`) of the eigenvalues of ``state_matrices`` against
    the AMA of ``model`` at ``configurations``."""

    (Mbar, Dbar, Kbar), _ = linearized_batch(model, create_data(model), configurations)
    per = []
    for A, A_ref, q in zip(state_matrices, ama_matrix(Mbar, Dbar, Kbar), configurations):
        w, v = np.linalg.eig(A)
        w_ref = np.linalg.eigvals(A_ref)
        eig = _sorted(w), _sorted(w_ref)
        eig_rel = float((np.abs(eig[0] - eig[1]) / np.maximum(np.abs(eig[1]), 1e-300)).max())
        exported = modes_from_eigenpairs(w[None], v[None], rows=slice(0, A.shape[0] // 2))[0]
        reference = modal_analysis(model, q)
        if exported.num_modes != reference.num_modes:
            per.append((np.inf, np.inf, np.inf, eig_rel))
            continue
        per.append((float(np.abs(exported.frequencies_hz / reference.frequencies_hz - 1).max()),
                    float(np.abs(exported.damping_ratios / reference.damping_ratios - 1).max()),
                    float(np.abs(exported.damping_ratios - reference.damping_ratios).max()), eig_rel))
    return np.array(per)


def _sorted(eigenvalues):
    """Eigenvalues sorted by modulus, then imaginary part."""
    return eigenvalues[np.lexsort((eigenvalues.imag, np.abs(eigenvalues)))]


def mujoco_fidelity(model, mj_robot, configurations):
    """:class:`Fidelity` of a compiled exported MJCF (:class:`MujocoRobot`)."""
    # deferred: CasADi (through export.mujoco_plant)
    from .mujoco_plant import closed_loop_state_matrix

    qs = finite_array(configurations, "configurations", (None, model.n))
    mats = [closed_loop_state_matrix(mj_robot, q)[0] for q in qs]
    return Fidelity("mujoco (central differences of qacc)", qs, compare_modes(mats, model, qs))


def urdf_fidelity(model, urdf_path, configurations, exact_link_damping=False):
    """:class:`Fidelity` of an exported URDF file (Pinocchio, module docstring).
    ``exact_link_damping``: replace the file's elastic-joint damping by d_f on ṡ_m + ṡ_e (what no
    URDF/SDF engine offers; isolates the rotor mapping in :func:`gazebo_breakdown`)."""
    qs = finite_array(configurations, "configurations", (None, model.n))
    mats = [urdf_state_matrix(model, urdf_path, q, exact_link_damping) for q in qs]
    return Fidelity("pinocchio (exported URDF, mimic joints)", qs, compare_modes(mats, model, qs))


def urdf_state_matrix(model, urdf_path, q_d, exact_link_damping=False):
    """State matrix (2.14) of an exported URDF + set-point law (2.2) about link set-point q^d."""
    pm = pin.buildModelFromUrdf(str(urdf_path), mimic=True)
    pm.gravity = pin.Motion(np.asarray(model.gravity, float), np.zeros(3))
    data = pm.createData()
    springs, damping = _joint_dynamics(urdf_path)

    def index(name):
        if not pm.existJointName(name):
            raise ConfigError(f"urdf {urdf_path}: joint '{name}' missing (not an export of {model.name})")
        return pm.joints[pm.getJointId(name)].idx_v

    motor = np.array([index(j + MOTOR_SUFFIX) for j in model.joint_names])
    elastic = np.array([index(j) for j in model.joint_names])
    W = np.asarray(model.W, float)
    q_m = motor_equilibrium(model, create_data(model), q_d)
    x = pin.neutral(pm)
    x[motor] = q_m / W
    x[elastic] = np.asarray(q_d) - q_m / W
    M = pin.crba(pm, data, x)
    M = np.triu(M) + np.triu(M, 1).T
    K = _gravity_stiffness(pm, data, x)
    D = np.zeros_like(M)
    for name, value in damping.items():
        if exact_link_damping and name in model.joint_names:
            continue
        D[index(name), index(name)] += value
    if exact_link_damping:    # Rayleigh ½ d_f (ṡ_m + ṡ_e)²
        for i, d_f in enumerate(model.d_f):
            pair = np.array([motor[i], elastic[i]])
            D[np.ix_(pair, pair)] += d_f
    for name, value in springs.items():
        K[index(name), index(name)] += value
    K[motor, motor] += model.kp * W * W
    D[motor, motor] += model.kd * W * W
    return state_matrix(M, D, K)


def _gravity_stiffness(pm, data, x, step=1e-6):
    """dg/dq: Pinocchio's analytic derivative, or central differences of g where the model has
    mimic joints (Pinocchio's derivative algorithms do not support them)."""
    try:
        return pin.computeGeneralizedGravityDerivatives(pm, data, x).copy()
    except RuntimeError as exc:
        warn_fallback("flexmodal_ros.export.fidelity", "Pinocchio's analytic gravity derivative",
                      f"{str(exc).rstrip('.')}: the model has mimic joints", "dg/dq by central differences (step "
                      f"{step:g})", f"2 nv = {2 * pm.nv} gravity evaluations per configuration, about 1e-8 "
                      "relative accuracy instead of round-off")
        K = np.empty((pm.nv, pm.nv))
        for j in range(pm.nv):
            e = np.zeros(pm.nv)
            e[j] = step
            K[:, j] = (pin.computeGeneralizedGravity(pm, data, x + e)
                       - pin.computeGeneralizedGravity(pm, data, x - e)) / (2 * step)
        return K


def _joint_dynamics(urdf_path):
    """{joint: spring stiffness} (gazebo extension) and {joint: damping} (<dynamics>) of a URDF."""
    root = ET.parse(urdf_path).getroot()
    springs = {g.get("reference"): float(g.findtext("springStiffness"))
               for g in root.findall("gazebo") if g.find("springStiffness") is not None}
    damping = {}
    for joint in root.findall("joint"):
        dyn = joint.find("dynamics")
        if dyn is not None and joint.find("mimic") is None and float(dyn.get("damping", 0)):
            damping[joint.get("name")] = float(dyn.get("damping"))
    return springs, damping


def damping_mapping_fidelity(model, configurations, link_damping):
    """:class:`Fidelity` of putting d_f on the elastic joint (ṡ_e = q̇ − W⁻¹... i.e. the deflection
    rate, ``"elastic"``) or on the motor joint (``"motor"``) instead of on q̇ (2.1), with everything
    else exact: the linear algebra of (2.9)-(2.11) with D̄ changed."""

    qs = finite_array(configurations, "configurations", (None, model.n))
    (Mbar, Dbar, Kbar), _ = linearized_batch(model, create_data(model), qs)
    n, W, d_f = model.n, np.asarray(model.W), np.asarray(model.d_f)
    # exported rates: ṡ_m = q̇_m / W, ṡ_e = q̇ − q̇_m / W; the damper acts on one of them
    rate = np.zeros((n, 2 * n))
    if link_damping == "elastic":
        rate[:, :n], rate[:, n:] = np.eye(n), -np.diag(1 / W)
    elif link_damping == "motor":
        rate[:, n:] = np.diag(1 / W)
    else:
        raise ConfigError(f"link_damping: expected elastic or motor, got {shown(link_damping)}")
    D = Dbar.copy()
    D[:, :n, :n] -= np.diag(d_f)
    D += rate.T @ np.diag(d_f) @ rate
    mats = state_matrix(Mbar, D, Kbar)
    return Fidelity(f"linear algebra (d_f on the {link_damping} joint)", qs, compare_modes(mats, model, qs))


def gazebo_valid_model(model, directory):
    """The suite's model of the same robot with the link inertias Gazebo accepts
    (:func:`flexmodal_ros.export.gazebo.physical_inertia`), through a rewritten URDF in ``directory``."""

    root = ET.parse(model.urdf_path).getroot()
    for inertial in root.iter("inertial"):
        origin = inertial.find("origin")
        R = rpy_matrix([float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()])
        i = inertial.find("inertia")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        ixx, ixy, ixz, iyy, iyz, izz = (float(i.get(k, 0)) for k in keys)
        tensor = R @ np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]) @ R.T
        fixed = R.T @ physical_inertia(tensor)[0] @ R
        for k, (r, c) in zip(keys, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))):
            i.set(k, repr(float(fixed[r, c])))
    path = Path(directory) / f"{model.name}_gazebo_valid.urdf"
    ET.ElementTree(root).write(path)
    return load_model(path, model.params_path)


def gazebo_breakdown(model, configurations, directory, gear_ratio=None):
    """{effect: Fidelity} of the URDF/SDF mappings, one effect at a time and together:
    ``inertia`` (valid inertias only), ``damping_elastic`` / ``damping_motor`` (link damping only),
    ``rotor_body`` / ``rotor_gear`` (rotor only: exported file with exact link damping, against
    the model with valid inertias), ``total_<rotor>_<damping>`` (the exported file as written)."""

    qs = finite_array(configurations, "configurations", (None, model.n))
    valid = gazebo_valid_model(model, directory)
    out = {"inertia": _model_fidelity(valid, model, qs),
           "damping_elastic": damping_mapping_fidelity(model, qs, "elastic"),
           "damping_motor": damping_mapping_fidelity(model, qs, "motor")}
    for rotor in ("body", "gear"):
        for link_damping in ("elastic", "motor"):
            exported = build_export(model, rotor, link_damping, gear_ratio)
            path = Path(directory) / f"{model.name}_{rotor}_{link_damping}.urdf"
            path.write_text(write_urdf(exported, "controllers.yaml"))
            out[f"total_{rotor}_{link_damping}"] = urdf_fidelity(model, path, qs)
            if link_damping == "elastic":
                out[f"rotor_{rotor}"] = urdf_fidelity(valid, path, qs, exact_link_damping=True)
    return out


def _model_fidelity(other, model, qs):
    """:class:`Fidelity` of the AMA of ``other`` (same joints) against ``model``'s."""

    (Mbar, Dbar, Kbar), _ = linearized_batch(other, create_data(other), qs)
    return Fidelity("linear algebra (Gazebo-valid inertias)", qs,
                    compare_modes(state_matrix(Mbar, Dbar, Kbar), model, qs))

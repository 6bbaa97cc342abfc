"""The flexible-joint model: loading, rigid-body terms, derivatives, bad input (issue 2)."""
import textwrap
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from flexmodal_ros.robot.params import Tool
from flexmodal_ros.robot.dh import dh_to_urdf, dh_transform, load_dh
from flexmodal_ros.core.errors import ConfigError, InputError
from flexmodal_ros.robot.model import (create_data, ee_jacobian, gravity_stiffness, gravity_torque, load_model,
                                 mass_matrix, velocity_torques, wrench_stiffness, wrench_torque, with_overrides)
from flexmodal_ros.robot.registry import list_robots, load_robot, robot_paths, share_dir
from dh_newton_euler import dh_rnea

ROBOTS = ("scompi", "planar_2r", "kuka_lwr4")
RNG = np.random.default_rng(20211)


def random_q(model, count=5):
    lo = np.maximum(model.position_lower, -np.pi)
    hi = np.minimum(model.position_upper, np.pi)
    lo = np.where(model.prismatic, -0.3, lo)
    hi = np.where(model.prismatic, 0.3, hi)
    return RNG.uniform(lo, hi, size=(count, model.n))


def central_jacobian(fun, q, h=1e-6):
    cols = [(fun(q + h * e) - fun(q - h * e)) / (2 * h) for e in np.eye(len(q))]
    return np.array(cols).T


def test_bundled_robots_listed_and_loaded():
    assert set(ROBOTS) <= set(list_robots())
    dims = {"scompi": 6, "planar_2r": 2, "kuka_lwr4": 7}
    for name in ROBOTS:
        model = load_robot(name)
        assert model.n == dims[name]
        assert model.joint_names == tuple(f"joint_{i}" for i in range(1, model.n + 1))


def test_scompi_parameters_match_thesis_tables():
    m = load_robot("scompi")
    # Table 2.4: B = N^2 I_r (notes_003 §3 [D]); W = diag(1/r) with r1 = 0.057 m
    np.testing.assert_allclose(m.B, [0.444771, 6.784, 6.1952, 3.2256, 2.3296, 2.2016], rtol=1e-12)
    np.testing.assert_allclose(m.W, [17.5439, 1, 1, 1, 1, 1], rtol=1e-5)
    assert list(m.prismatic) == [True] + [False] * 5
    masses = [m.pin.inertias[i].mass for i in range(1, 7)]
    assert sum(masses) == pytest.approx(38.638)


@pytest.mark.parametrize("name", ROBOTS)
def test_mass_matrix_symmetric_positive_definite(name):
    model = load_robot(name)
    data = create_data(model)
    for q in random_q(model):
        M = mass_matrix(model, data, q)
        np.testing.assert_array_equal(M, M.T)
        assert np.linalg.eigvalsh(M).min() > 0


@pytest.mark.parametrize("name", ROBOTS)
def test_gravity_stiffness_matches_finite_differences(name):
    model = with_overrides(load_robot(name), tool={"mass": 2.5, "com": [0.01, -0.02, 0.05],
                                                   "inertia": [0.01, 0, 0, 0.02, 0, 0.015]})
    data = create_data(model)
    for q in random_q(model, 3):
        fd = central_jacobian(lambda x: gravity_torque(model, data, x), q)
        np.testing.assert_allclose(gravity_stiffness(model, data, q), fd, rtol=1e-6,
                                   atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("name", ROBOTS)
def test_wrench_term_matches_finite_differences(name):
    model = with_overrides(load_robot(name), tool=Tool.point_mass(1.0, [0.02, 0.03, 0.1]))
    data = create_data(model)
    w = np.array([30.0, -50.0, 20.0, 3.0, -2.0, 5.0])
    for q in random_q(model, 3):
        fd = central_jacobian(lambda x: wrench_torque(model, data, x, w), q)
        np.testing.assert_allclose(wrench_stiffness(model, data, q, w), fd, rtol=1e-6,
                                   atol=1e-6 * np.abs(fd).max())


def test_jacobian_is_geometric_jacobian_of_tool_point():
    """v_E = J q' at the tool point, checked by differentiating its position numerically."""
    model = with_overrides(load_robot("scompi"), tool=Tool.point_mass(4.0, [0.0, 0.0, 0.12]))
    data = create_data(model)
    q = random_q(model, 1)[0]

    def position(x):
        pin.framesForwardKinematics(model.pin, data, x)
        return data.oMf[model.ee_frame_id].translation.copy()

    np.testing.assert_allclose(ee_jacobian(model, data, q)[:3], central_jacobian(position, q), atol=1e-8)


def test_scompi_matches_independent_dh_newton_euler():
    """Pinocchio M(q), g(q) (from the generated URDF) equal a DH-based Newton-Euler to 1e-9."""
    model = load_robot("scompi")
    data = create_data(model)
    _, _, links = load_dh(share_dir() / "urdf" / "scompi.dh.yaml")
    zero = np.zeros(model.n)
    for q in random_q(model, 4):
        g_ref = dh_rnea(links, q, zero, zero, model.gravity)
        np.testing.assert_allclose(gravity_torque(model, data, q), g_ref, atol=1e-9)
        M_ref = np.array([dh_rnea(links, q, zero, e, np.zeros(3)) for e in np.eye(model.n)]).T
        np.testing.assert_allclose(mass_matrix(model, data, q), M_ref, atol=1e-9)
        qd, qdd = RNG.normal(size=model.n), RNG.normal(size=model.n)
        np.testing.assert_allclose(pin.rnea(model.pin, data, q, qd, qdd), dh_rnea(links, q, qd, qdd, model.gravity),
                                   atol=1e-9)


@pytest.mark.parametrize("name", ["scompi", "planar_2r"])
def test_dh_frames_reproduce_standard_dh_kinematics(name):
    model = load_robot(name)
    data = create_data(model)
    _, _, links = load_dh(share_dir() / "urdf" / f"{name}.dh.yaml")
    for q in random_q(model, 3):
        pin.framesForwardKinematics(model.pin, data, q)
        T = np.eye(4)
        for i, link in enumerate(links):
            T = T @ dh_transform(link, q[i])
            np.testing.assert_allclose(data.oMf[model.pin.getFrameId(f"dh_frame_{i + 1}")].homogeneous, T,
                                       atol=1e-12)


@pytest.mark.parametrize("name", ["scompi", "planar_2r"])
def test_committed_urdf_is_the_generated_one(name):
    root = share_dir() / "urdf"
    robot, base, links = load_dh(root / f"{name}.dh.yaml")
    assert (root / f"{name}.urdf").read_text() == dh_to_urdf(robot, links, base)


def test_planar_2r_mass_matrix_has_standard_m12():
    """notes_003 §4: Table 3.1 needs M12 = I2 + m2 xC2^2 + m2 a1 xC2 cos q2 ((3.33) is a typo)."""
    model = load_robot("planar_2r")
    data = create_data(model)
    q = np.array([0.3, 1.1])
    M = mass_matrix(model, data, q)
    I1, I2, m1, m2, a1, x1, x2 = 0.2667, 0.2083, 20.0, 10.0, 0.4, 0.2, 0.25
    c2 = np.cos(q[1])
    expected = [[I1 + I2 + m1 * x1**2 + m2 * (a1**2 + x2**2) + 2 * m2 * a1 * x2 * c2, I2 + m2 * x2**2 + m2 * a1 * x2 * c2],
                [I2 + m2 * x2**2 + m2 * a1 * x2 * c2, I2 + m2 * x2**2]]
    np.testing.assert_allclose(M, expected, rtol=1e-12)
    g = 9.81
    q12 = q.sum()
    np.testing.assert_allclose(gravity_torque(model, data, q),
                               [g * (m1 * x1 + m2 * a1) * np.cos(q[0]) + g * m2 * x2 * np.cos(q12), g * m2 * x2 * np.cos(q12)],
                               rtol=1e-12)


def test_tool_adds_mass_at_tool_point():
    base = load_robot("scompi")
    tooled = with_overrides(base, tool=Tool.point_mass(4.0))
    data_b, data_t = create_data(base), create_data(tooled)
    q = random_q(base, 1)[0]
    J = ee_jacobian(base, data_b, q)[:3]
    np.testing.assert_allclose(mass_matrix(tooled, data_t, q) - mass_matrix(base, data_b, q), 4.0 * J.T @ J, atol=1e-10)
    assert base.tool.mass == 0.0  # the original model is immutable


def test_overrides_validate_and_do_not_mutate():
    m = load_robot("planar_2r")
    m2 = with_overrides(m, kp=5000.0, kd=[10.0, 20.0])
    assert list(m2.kp) == [5000.0, 5000.0] and list(m2.kd) == [10.0, 20.0]
    assert list(m.kp) == [3600.0, 3600.0]
    with pytest.raises(InputError, match="kp: must be > 0"):
        with_overrides(m, kp=0.0)
    with pytest.raises(InputError, match="kd: expected 1 or 2 values, got 3"):
        with_overrides(m, kd=[1, 2, 3])
    with pytest.raises(InputError, match="wrench: contains NaN"):
        with_overrides(m, wrench=[0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ValueError):
        m.k[0] = 1.0


# --- bad input -----------------------------------------------------------------------------------

def write_params(tmp_path, body, urdf="planar_2r"):
    urdf_path, _ = robot_paths(urdf)
    path = tmp_path / "params.yaml"
    path.write_text(f"urdf: {urdf_path}\n" + textwrap.dedent(body))
    return path


GOOD_JOINTS = """
gravity: [0, -9.81, 0]
joints:
  joint_1: {k: 2000.0, d_f: 3.91, d_fm: 2.04, B: 4.0572, kp: 3600.0, kd: 60.0}
  joint_2: {k: 1600.0, d_f: 2.21, d_fm: 1.68, B: 2.2148, kp: 3600.0, kd: 60.0}
"""


def test_good_params_file_loads(tmp_path):
    model = load_model(None, write_params(tmp_path, GOOD_JOINTS))
    assert model.n == 2 and model.k[1] == 1600.0


@pytest.mark.parametrize("body, message", [
    (GOOD_JOINTS.replace("  joint_2: {k: 1600.0, d_f: 2.21, d_fm: 1.68, B: 2.2148, kp: 3600.0, kd: 60.0}\n", ""),
     "missing parameters for URDF joint\\(s\\) joint_2"),
    (GOOD_JOINTS.replace("joint_2:", "elbow:"), "unknown joint name\\(s\\) elbow"),
    (GOOD_JOINTS.replace("k: 1600.0", "k: -1600.0"), "joints.joint_2.k: must be > 0"),
    (GOOD_JOINTS.replace("k: 1600.0", "k: .nan"), "joints.joint_2.k: contains NaN or inf"),
    (GOOD_JOINTS.replace("B: 2.2148", "B: 0.0"), "joints.joint_2.B: must be > 0"),
    (GOOD_JOINTS.replace("B: 2.2148, ", ""), "joints.joint_2.B: missing"),
    (GOOD_JOINTS.replace("kp: 3600.0, kd: 60.0}\n", "kd: 60.0}\n", 1), "joints.joint_1.kp: missing"),
    (GOOD_JOINTS.replace("[0, -9.81, 0]", "[0, -9.81]"), "gravity: expected shape 3, got 2"),
    (GOOD_JOINTS.replace("d_f: 3.91", "d_f: abc"), "joints.joint_1.d_f: expected numbers"),
    (GOOD_JOINTS.replace("d_f: 3.91", "r: 0.05, d_f: 3.91"), "joints.joint_1.r: only prismatic"),
    (GOOD_JOINTS.replace("d_f: 3.91", "stiffnes: 3, d_f: 3.91"), "unknown key\\(s\\) stiffnes"),
    (GOOD_JOINTS + "tool: {mass: -1.0}\n", "tool.mass: must be >= 0"),
    (GOOD_JOINTS + "tool: {mass: 1.0, inertia: [1, 0, 0, -1, 0, 1]}\n", "tool.inertia: .*not positive semi-definite"),
    (GOOD_JOINTS + "wrench: [1, 2, 3]\n", "wrench: expected shape 6, got 3"),
    (GOOD_JOINTS + "end_effector_frame: flange\n", "end_effector_frame: frame 'flange' not in the URDF"),
    (GOOD_JOINTS + "joints: [1, 2\n", "malformed YAML"),
    ("gravity: [0, 0, -9.81]\n", "joints: missing"),
])
def test_bad_params_are_rejected_with_the_field_named(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message):
        load_model(None, write_params(tmp_path, body))


def test_prismatic_joint_requires_characteristic_radius(tmp_path):
    _, params = robot_paths("scompi")
    text = params.read_text().replace(" r: 0.057,", "").replace("urdf: ../urdf", f"urdf: {params.parent.parent}/urdf")
    path = tmp_path / "scompi.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="joints.joint_1.r: missing"):
        load_model(None, path)


@pytest.mark.parametrize("urdf_text, message", [
    ("<robot name='x'><link name='a'>", "malformed XML"),
    ("<robo name='x'/>", "root element is <robo>"),
    ("<robot name='x'><link name='a'><inertial><mass value='1'/><inertia ixx='abc' ixy='0' ixz='0' iyy='1' "
     "iyz='0' izz='1'/></inertial></link></robot>", "ixx=\"abc\"> in link 'a' is not a finite number"),
])
def test_bad_urdf_is_rejected(tmp_path, urdf_text, message):
    urdf = tmp_path / "robot.urdf"
    urdf.write_text(urdf_text)
    with pytest.raises(ConfigError, match=message):
        load_model(urdf, write_params(tmp_path, GOOD_JOINTS))


def test_missing_files_and_unknown_robot():
    with pytest.raises(ConfigError, match="params file .*cannot read"):
        load_model(None, "/nonexistent/params.yaml")
    with pytest.raises(ConfigError, match="unknown robot 'ur5' \\(bundled robots: kuka_lwr4, planar_2r, scompi"):
        load_robot("ur5")
    with pytest.raises(InputError, match="unknown joint 'elbow'"):
        load_robot("planar_2r").joint_index("elbow")


# ----------------------------------------------------------------------------- issue 11 items 11, 14

DATA = Path(__file__).resolve().parent / "data"


def test_continuous_joint_is_a_revolute_joint_without_limits():
    """Item 14: joint_1 of planar_gripper.urdf is continuous (used to be refused)."""
    model = load_model(None, DATA / "planar_gripper.yaml")
    assert model.joint_names == ("joint_1", "joint_2")
    assert model.position_lower[0] == -np.inf and model.position_upper[0] == np.inf
    assert model.effort_limit[0] == 1000.0 and model.velocity_limit[0] == 3.0
    assert model.pin.nq == 2                                   # one coordinate, not cos/sin


def test_branched_urdf_reduced_to_the_chain_with_locked_fingers(tmp_path):
    """Item 14: the branched URDF (arm + two fingers) reduced to the arm chain with the fingers
    locked at 0.01 m has the modes of the same arm with the fingers welded there (fixed joints,
    merged by Pinocchio's URDF parser): an independent construction of the same rigid body."""
    from flexmodal_ros.flexible_joint.ama import modal_analysis
    locked = load_model(None, DATA / "planar_gripper.yaml")
    raw = yaml.safe_load((DATA / "planar_gripper.yaml").read_text())
    del raw["locked_joints"]
    raw["urdf"] = str(DATA / "planar_gripper_welded.urdf")
    welded = load_model(None, write_yaml(tmp_path / "welded.yaml", raw))
    for q in ([0.3, -0.7], [2.0, 1.1]):
        a, b = modal_analysis(locked, q), modal_analysis(welded, q)
        np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-12)
    plain = modal_analysis(load_robot("planar_2r"), [0.3, -0.7])
    assert abs(plain.frequencies_hz[0] / modal_analysis(locked, [0.3, -0.7]).frequencies_hz[0] - 1) > 0.05


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw.pop("end_effector_frame"), "the robot is branched .*set end_effector_frame"),
    (lambda raw: raw.update(end_effector_frame="finger_right", locked_joints=None, joints={
        **raw["joints"], "finger_joint2": dict(raw["joints"]["joint_2"], r=0.01)}),
     "urdf joint 'finger_joint2' mimics 'finger_joint1': mimic joints are not supported"),
    (lambda raw: raw.update(locked_joints={"finger_joint1": 0.5}), r"locked_joints.finger_joint1: 0.5 outside the joint limits"),
    (lambda raw: raw.update(locked_joints={"wrist": 0.0}), "locked_joints: unknown joint name"),
    (lambda raw: raw["joints"].update(finger_joint1=dict(raw["joints"]["joint_2"])), "finger_joint1 locked .*remove from joints"),
])
def test_branched_and_mimic_urdfs_are_refused_with_a_way_out(tmp_path, change, message):
    raw = yaml.safe_load((DATA / "planar_gripper.yaml").read_text())
    raw["urdf"] = str(DATA / "planar_gripper.urdf")
    change(raw)
    with pytest.raises(ConfigError, match=message):
        load_model(None, write_yaml(tmp_path / "p.yaml", raw))


def write_yaml(path, raw):
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("content, message", [
    ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
     "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n",
     "more than 1000000 nodes once its aliases are expanded"),
    (b"robot: \xff\xfe\n", r"not UTF-8 text \(byte 0xff at offset 7\)"),
    ("[" * 600, "nested too deeply|malformed YAML"),
    ("&a [*a]\n", "malformed YAML|recursive"),
])
def test_yaml_bombs_and_bad_encodings_give_clear_errors(tmp_path, content, message):
    """Item 11: a 500-byte YAML of nested aliases stands for 9^8 = 43 million nodes."""
    path = tmp_path / "bomb.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert path.stat().st_size < 1_000_000
    with pytest.raises(ConfigError, match=message):
        load_model(None, path)


def test_special_files_are_refused_without_reading_them(tmp_path):
    """Item 11: /dev/zero (endless), a FIFO without writer (blocks on open), a directory."""
    import os
    fifo = tmp_path / "params.fifo"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "a character device"), (fifo, "a FIFO"), (tmp_path, "a directory")):
        with pytest.raises(ConfigError, match=f"not a regular file \\({kind}\\)"):
            load_model(None, path)
        with pytest.raises(ConfigError, match=f"not a regular file \\({kind}\\)"):
            load_model(path, DATA / "planar_2r_undamped.yaml")
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(17 * 2 ** 20)
    with pytest.raises(ConfigError, match="more than the limit of 16777216"):
        load_model(None, big)


def test_echoed_values_are_capped():
    """Item 11: a huge bad value is not copied into the error message."""
    from flexmodal_ros.core.validation import finite_array, shown
    with pytest.raises(InputError) as info:
        finite_array("x" * 1_000_000, "q")
    assert len(str(info.value)) < 200 and "(1000002 characters)" in str(info.value)
    assert shown(list(range(10_000))) == "<list of 10000 items>"


@pytest.mark.parametrize("name", ["kuka_lwr4", "scompi"])
def test_velocity_torques_are_the_nonlinear_effects_without_gravity(name):
    """C(q, q̇)q̇ from the gravity-free copy of the model equals Pinocchio's nonLinearEffects −
    gravity (round-off of the subtraction), is quadratic in q̇, and leaves the model's gravity
    as it was."""
    model = load_robot(name)
    data = create_data(model)
    rng = np.random.default_rng(3)
    qs, qds = random_q(model, 6), rng.uniform(-2.0, 2.0, (6, model.n))
    reference = np.array([pin.nonLinearEffects(model.pin, data, q, v) - pin.computeGeneralizedGravity(model.pin, data, q)
                          for q, v in zip(qs, qds)])
    got = velocity_torques(model, data, qs, qds)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-12 * np.abs(reference).max())
    np.testing.assert_allclose(velocity_torques(model, data, qs, 2.0 * qds), 4.0 * got, rtol=1e-12, atol=1e-12)
    assert not velocity_torques(model, data, qs, 0.0 * qds).any()
    assert np.linalg.norm(model.pin.gravity.linear) > 9.0 and not model.weightless.gravity.linear.any()

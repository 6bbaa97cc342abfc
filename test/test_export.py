"""Export (issue 16): URDF/SDF/MJCF of every bundled robot, loaded by the parsers and engines users
run; the independent-engine check (MuJoCo vs the suite's AMA); the rotor/damping mappings; the
link_state convention; the MuJoCo plant; bad input."""
import hashlib
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.core.errors import ConfigError, InputError
from flexmodal_ros.export import export_files
from flexmodal_ros.export.convention import StateConvention
from flexmodal_ros.export.fidelity import (gazebo_breakdown, mujoco_fidelity, random_configurations,
                                           urdf_fidelity, urdf_state_matrix)
from flexmodal_ros.export.gazebo import check_sdf_structure, write_urdf
from flexmodal_ros.export.mjcf import load_mujoco_model, write_mjcf
from flexmodal_ros.export.mujoco_plant import (MujocoRobot, MujocoSimulator, closed_loop_state_matrix,
                                               run_closed_loop_mujoco)
from flexmodal_ros.export.tree import build_export
from flexmodal_ros.flexible_joint.linear_model import motor_equilibrium
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.robot.registry import list_robots, load_robot
from flexmodal_ros.simulation import run_closed_loop, thesis_trajectory

ROOT = Path(__file__).resolve().parent.parent
ROBOTS = list_robots()
GEAR_RATIO = 160.0   # for robots whose params give B only (the rotor then has I_r = B/N^2)


@pytest.fixture(scope="module")
def models():
    return {name: load_robot(name) for name in ROBOTS}


@pytest.fixture(scope="module")
def sdformat_check():
    """The reference SDFormat parser (libsdformat12 from Debian's libsdformat-dev) as a tiny C++
    program, compiled once into build/ (keyed by its source); None when the library is missing."""
    if shutil.which("pkg-config") is None or subprocess.run(["pkg-config", "--exists", "sdformat12"]).returncode:
        return None
    source = ROOT / "test" / "sdformat_check.cpp"
    binary = ROOT / "build" / f"sdformat_check_{hashlib.sha1(source.read_bytes()).hexdigest()[:10]}"
    if not binary.exists():
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "sdformat12"], capture_output=True,
                               text=True, check=True).stdout.split()
        binary.parent.mkdir(exist_ok=True)
        subprocess.run(["g++", "-std=c++17", "-O0", str(source), "-o", str(binary), *flags], check=True)
    return binary


@pytest.mark.parametrize("robot", ROBOTS)
def test_every_robot_exports_to_files_the_parsers_and_engines_load(robot, models, tmp_path, sdformat_check):
    import mujoco
    import pinocchio as pin
    from urdf_parser_py.urdf import URDF

    model = models[robot]
    n = model.n
    urdf = export_files(model, "urdf", tmp_path / "robot.urdf", gear_ratio=GEAR_RATIO)
    sdf = export_files(model, "sdf", tmp_path / "robot.sdf", gear_ratio=GEAR_RATIO)
    body = export_files(model, "sdf", tmp_path / "body.sdf", rotor="body")
    mjcf = export_files(model, "mjcf", tmp_path / "robot.xml")
    # URDF: urdf-parser-py and Pinocchio (mimic rotor joints as such: 2n coordinates)
    parsed = URDF.from_xml_file(str(urdf.description))
    motor = [j for j in parsed.joints if j.name.endswith("_motor")]
    assert [j.name for j in motor] == [f"{j}_motor" for j in model.joint_names]
    assert pin.buildModelFromUrdf(str(urdf.description), mimic=True).nv == 2 * n
    # ros2_control: effort on the motor joints, position/velocity states on motor and elastic joints
    root = ET.parse(urdf.description).getroot()
    rc = root.find("ros2_control")
    assert rc.find("hardware/plugin").text == "gz_ros2_control/GazeboSimSystem"
    commanded = [j.get("name") for j in rc.findall("joint") if j.find("command_interface[@name='effort']") is not None]
    assert commanded == [f"{j}_motor" for j in model.joint_names]
    for joint in rc.findall("joint"):
        assert {"position", "velocity"} <= {s.get("name") for s in joint.findall("state_interface")}
    assert len(rc.findall("joint")) == 2 * n
    plugin = root.find("gazebo/plugin[@filename='gz_ros2_control-system']")
    yaml_path = Path(plugin.find("parameters").text)
    assert yaml_path == urdf.controllers.resolve() and yaml_path.is_file()
    import yaml
    controllers = yaml.safe_load(yaml_path.read_text())
    manager = controllers["controller_manager"]["ros__parameters"]
    assert manager["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert manager["effort_controller"]["type"] == "forward_command_controller/ForwardCommandController"
    assert controllers["effort_controller"]["ros__parameters"] == {
        "joints": [f"{j}_motor" for j in model.joint_names], "interface_name": "effort"}
    # springs k W^2 on the elastic joints (Gazebo extension), motor damping d_fm W^2
    springs = {g.get("reference"): float(g.findtext("springStiffness")) for g in root.findall("gazebo[@reference]")}
    np.testing.assert_allclose([springs[j] for j in model.joint_names], model.k * model.W ** 2)
    # SDF: structural check; the reference parser where Debian has one (SDF 1.9: rotor=body)
    for result in (sdf, body):
        assert check_sdf_structure(result.description.read_text()) == []
    # MJCF compiles in MuJoCo as written, and through the loader with the exact inertias
    mujoco.MjModel.from_xml_path(str(mjcf.description))
    mj = load_mujoco_model(mjcf.description)
    rotors = [mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, f"{j}_rotor") for j in model.joint_names]
    assert np.all(mj.body_mass[rotors] == 0) and np.all(mj.body_inertia[rotors] == 0)   # no unmodelled inertia
    if sdformat_check is None:
        pytest.skip("libsdformat12 not installed (apt-get install libsdformat-dev): structural check only")
    for path in (body.description, urdf.description, body.world):   # URDF: sdformat's URDF→SDF conversion
        out = subprocess.run([str(sdformat_check), str(path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    for path in (body.description, urdf.description):   # what the parser read: springs k W^2 (6 digits)
        lines = subprocess.run([str(sdformat_check), str(path)], capture_output=True, text=True).stdout
        stiffness = {parts[1]: float(parts[3]) for parts in (line.split() for line in lines.splitlines())
                     if parts[0] == "joint" and len(parts) > 3}
        np.testing.assert_allclose([stiffness[j] for j in model.joint_names], model.k * model.W ** 2, rtol=1e-5)


@pytest.mark.parametrize("robot", ["kuka_lwr4", "scompi"])
def test_independent_engine_mujoco_linearization_matches_the_ama(robot, models):
    """Acceptance: MuJoCo's continuous-time linearization (central differences of qacc about the
    PD-held equilibrium) gives the AMA's frequencies and damping ratios within 1e-5 relative at 5
    random configurations (measured ~1e-10)."""
    model = models[robot]
    qs = random_configurations(model, 5, seed=16)
    mj_robot = MujocoRobot.from_model(model)
    fidelity = mujoco_fidelity(model, mj_robot, qs)
    assert fidelity.max_freq_rel < 1e-5 and fidelity.max_damping_rel < 1e-5
    assert fidelity.max_eigenvalue_rel < 1e-5
    _, residual = closed_loop_state_matrix(mj_robot, qs[0])   # (2.3) is MuJoCo's equilibrium too
    assert residual < 1e-6


def test_placeholder_inertias_would_change_the_modes(models):
    """The loader's exact inertias matter: plain MuJoCo compilation of scompi (non-physical link 6)
    gives different modes; the restored model gives the AMA's."""
    import mujoco

    model = models["scompi"]
    xml = write_mjcf(build_export(model))
    q = random_configurations(model, 1, seed=3)
    plain = mujoco_fidelity(model, MujocoRobot(model, mujoco.MjModel.from_xml_string(xml)), q)
    exact = mujoco_fidelity(model, MujocoRobot(model, load_mujoco_model(xml=xml)), q)
    assert plain.max_eigenvalue_rel > 1e-2 and exact.max_eigenvalue_rel < 1e-8


def test_rotor_and_damping_mappings_are_quantified(models, tmp_path):
    """README numbers: a rotor body of inertia B (what every Gazebo engine can load) moves the
    modes by tens of %; the gear-coupled rotor I_r = B/N^2 (mimic joint) by O(1/N); d_f on one
    joint of the chain instead of on q̇ (no per-joint damping can be exact) is reported apart."""
    model = models["planar_2r"]
    qs = random_configurations(model, 3, seed=1)
    table = gazebo_breakdown(model, qs, tmp_path, gear_ratio=GEAR_RATIO)
    assert table["rotor_body"].max_eigenvalue_rel > 0.3
    assert table["rotor_gear"].max_freq_rel < 5e-3 and table["rotor_gear"].max_damping_abs < 5e-3
    assert 1e-3 < table["damping_elastic"].max_freq_rel < 0.05
    assert table["inertia"].max_eigenvalue_rel == 0.0


def test_urdf_evaluation_agrees_with_mujoco_on_the_same_structure(models, tmp_path):
    """The Pinocchio reading of an exported URDF (fidelity) and MuJoCo on the MJCF of the same
    structure (rotor bodies of inertia B, d_f on the elastic joint) agree: the URDF-side numbers
    are the description's dynamics, not an artefact of the evaluation."""
    model = models["kuka_lwr4"]
    exported = build_export(model, "body", "elastic")
    path = tmp_path / "body.urdf"
    path.write_text(write_urdf(exported, "c.yaml"))
    q = random_configurations(model, 1, seed=5)[0]
    A_urdf = urdf_state_matrix(model, path, q)
    A_mj, _ = closed_loop_state_matrix(MujocoRobot(model, load_mujoco_model(xml=write_mjcf(exported))), q)
    key = lambda w: w[np.lexsort((w.imag, np.abs(w)))]
    w1, w2 = key(np.linalg.eigvals(A_urdf)), key(np.linalg.eigvals(A_mj))
    assert np.abs(w1 - w2).max() / np.abs(w2).max() < 1e-6


def test_gravity_stiffness_by_central_differences_matches_pinocchio(models, tmp_path):
    """fidelity's central-difference K_G (files with mimic joints) against Pinocchio's analytic
    derivative on the same exported file without mimic joints."""
    import pinocchio as pin
    from flexmodal_ros.export.fidelity import _gravity_stiffness

    model = models["kuka_lwr4"]
    path = tmp_path / "body.urdf"
    path.write_text(write_urdf(build_export(model, "body", "elastic"), "c.yaml"))
    pm = pin.buildModelFromUrdf(str(path))
    pm.gravity = pin.Motion(np.array(model.gravity), np.zeros(3))
    x = np.random.default_rng(0).uniform(-1, 1, pm.nq)
    analytic = _gravity_stiffness(pm, pm.createData(), x)
    K = np.empty((pm.nv, pm.nv))
    for j in range(pm.nv):
        e = np.zeros(pm.nv)
        e[j] = 1e-6
        K[:, j] = (pin.computeGeneralizedGravity(pm, pm.createData(), x + e)
                   - pin.computeGeneralizedGravity(pm, pm.createData(), x - e)) / 2e-6
    np.testing.assert_allclose(K, analytic, atol=1e-6 * np.abs(analytic).max())


def test_state_convention_round_trip_and_prismatic_units(models):
    model = models["scompi"]                      # joint 1 prismatic, r = 0.057 m
    conv = StateConvention(model, "deflection")
    rng = np.random.default_rng(2)
    q, qd, q_m, qd_m = (rng.normal(size=model.n) for _ in range(4))
    raw = conv.from_model(q, qd, q_m, qd_m)
    np.testing.assert_allclose(raw[2][0], model.r[0] * q_m[0])          # rack travel [m]
    back = conv.to_model_inplace(np.concatenate(raw))
    np.testing.assert_allclose(back, np.concatenate([q, qd, q_m, qd_m]), atol=1e-12)
    np.testing.assert_allclose(StateConvention(model, "absolute").to_model_inplace(np.concatenate(raw)),
                               np.concatenate(raw))
    with pytest.raises(ConfigError, match="link_state"):
        StateConvention(model, "relative")


def test_reader_writer_and_configuration_in_the_deflection_convention(models):
    from flexmodal_ros.nodes.conversions import (JointStateReader, TorqueCommandWriter, joint_state_to_configuration,
                                                 plant_joint_state)
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float64MultiArray

    model = models["scompi"]
    conv = StateConvention(model, "deflection")
    q, q_m = np.linspace(0.1, 0.6, model.n), np.linspace(0.12, 0.7, model.n)
    qd, qd_m = np.full(model.n, 0.2), np.full(model.n, 0.3)
    s_e, v_e, s_m, v_m = conv.from_model(q, qd, q_m, qd_m)
    msg = plant_joint_state(model, 1.5, s_e, v_e, s_m, v_m, np.zeros(model.n), np.zeros(model.n))
    sample = JointStateReader(model, "deflection")(msg)
    for got, want in zip(sample[1:], (q, qd, q_m, qd_m)):
        np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(joint_state_to_configuration(model, msg, "deflection"), q, atol=1e-12)
    tau = np.arange(1.0, model.n + 1)
    data = deserialize_message(TorqueCommandWriter(model.n, model.W)(tau), Float64MultiArray).data
    np.testing.assert_allclose(data, model.W * tau)                   # force on the rack motor joint


def test_mujoco_plant_rejects_nan_and_moves_under_an_impulse(models):
    model = models["kuka_lwr4"]
    sim = MujocoSimulator(MujocoRobot.from_model(model), np.full(model.n, 0.3))
    for bad, match in (([1.0, 2.0], "expected shape 7"), ([np.nan] * model.n, "NaN")):
        with pytest.raises(InputError, match=match):
            sim.set_command(bad)
    np.testing.assert_allclose(sim.data.ctrl, sim.hold)              # the previous command stays
    start = np.concatenate(sim.sample())
    sim.advance(0.05)
    rest = np.concatenate(sim.sample())
    np.testing.assert_allclose(rest, start, atol=1e-9)               # held at the equilibrium (2.3)
    with pytest.raises(InputError, match="duration"):
        sim.apply_impulse([0, 50.0, 0, 0, 0, 0], 0.0)
    sim.apply_impulse([0, 50.0, 0, 0, 0, 0], 0.006)
    sim.advance(0.05)
    assert np.abs(np.concatenate(sim.sample())[:model.n] - rest[:model.n]).max() > 1e-5
    assert np.isfinite(np.concatenate(sim.sample())).all()
    sim.reset()
    assert sim.t == 0.0 and not sim.impulses


def test_mujoco_plant_impulse_converges_to_the_builtin_plant(models):
    """The impulse service acts the same on both plants: 6 ms of 50 N at the tool point under the
    set-point hold, link positions after 0.1 s. MuJoCo's step is first order (RK4 in the built-in
    plant): the difference shrinks with the step (measured 11 % at 1 ms, 2 % at 0.25 ms of the
    motion; Coulomb friction included)."""
    from flexmodal_ros.simulation import FlexibleJointPlant, Simulator, rest_state

    model = models["kuka_lwr4"]
    q0 = np.full(model.n, 0.3)
    x0, hold = rest_state(model, q0)
    builtin = Simulator(FlexibleJointPlant(model), x0, hold)
    builtin.apply_impulse([0, 50.0, 0, 0, 0, 0], 0.006)
    builtin.advance(0.1)
    motion = np.abs(builtin.sample()[0] - q0).max()
    assert motion > 1e-3
    conv, gaps = StateConvention(model, "deflection"), []
    for step in (1e-3, 2.5e-4):
        mj = MujocoSimulator(MujocoRobot.from_model(model, timestep=step), q0)
        mj.apply_impulse([0, 50.0, 0, 0, 0, 0], 0.006)
        mj.advance(0.1)
        q = conv.to_model_inplace(np.concatenate(mj.sample()))[:model.n]
        gaps.append(np.abs(q - builtin.sample()[0]).max() / motion)
    assert gaps[1] < 0.5 * gaps[0] and gaps[1] < 0.03


def test_controller_on_mujoco_offline_within_twice_the_builtin_error(models):
    """The same loop as the ROS test without ROS (quick): thesis trajectory on kuka_lwr4, 1 kHz,
    one period of command delay on both plants."""
    model = models["kuka_lwr4"]
    times, positions = thesis_trajectory(model)
    mj_ff = run_closed_loop_mujoco(model, times, positions, 3.5, command_delay_cycles=1).summary()
    mj_pd = run_closed_loop_mujoco(model, times, positions, 3.5, use_feedforward=False,
                                   command_delay_cycles=1).summary()
    builtin = run_closed_loop(model, times, positions, 3.5, command_delay_cycles=1).summary()
    assert mj_ff["max_tracking_error_rad"] <= 2 * builtin["max_tracking_error_rad"]
    assert mj_pd["max_tracking_error_rad"] >= 100 * mj_ff["max_tracking_error_rad"]


def _urdf_with(tmp_path, joint_xml):
    text = (ROOT / "urdf" / "planar_2r.urdf").read_text()
    path = tmp_path / "bad.urdf"
    path.write_text(text.replace("</robot>", joint_xml + "\n</robot>"))
    params = tmp_path / "bad.yaml"
    params.write_text((ROOT / "config" / "planar_2r.yaml").read_text().replace("../urdf/planar_2r.urdf", str(path)))
    return path, params


@pytest.mark.parametrize("joint_xml, message", [
    ('<link name="x"/><joint name="float_j" type="floating"><parent link="link_2"/><child link="x"/></joint>',
     "float_j': type floating not supported"),
    ('<link name="x"/><joint name="plane_j" type="planar"><parent link="link_2"/><child link="x"/></joint>',
     "plane_j': type planar not supported"),
    ('<link name="x"/><joint name="mimic_j" type="revolute"><parent link="link_2"/><child link="x"/>'
     '<limit effort="1" velocity="1" lower="-1" upper="1"/><mimic joint="joint_2"/></joint>',
     "mimic_j': mimic joints are not supported"),
])
def test_export_rejects_unsupported_joints_with_one_line(tmp_path, capsys, joint_xml, message):
    urdf, params = _urdf_with(tmp_path, joint_xml)
    code = cli_main(["export", "--urdf", str(urdf), "--params", str(params), "--format", "mjcf",
                     "-o", str(tmp_path / "out.xml")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_export_bad_options_name_the_problem(tmp_path, capsys):
    out = str(tmp_path / "x.urdf")
    assert cli_main(["export", "--robot", "kuka_lwr4", "--format", "urdf", "-o", out]) == 2
    assert "joints.joint_1.N: rotor='gear' needs the gear ratio" in capsys.readouterr().err
    assert cli_main(["export", "--robot", "kuka_lwr4", "--format", "mjcf", "--rotor", "gear", "-o", out]) == 2
    assert "MJCF uses 'armature'" in capsys.readouterr().err
    assert cli_main(["export", "--robot", "kuka_lwr4", "--format", "sdf", "--rotor", "armature", "-o", out]) == 2
    assert "exist in MJCF only" in capsys.readouterr().err
    assert cli_main(["export", "--robot", "kuka_lwr4", "--format", "mjcf", "-o", str(tmp_path / "no" / "x.xml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_export_json_with_check(tmp_path, capsys):
    out = tmp_path / "kuka.xml"
    assert cli_main(["export", "--robot", "kuka_lwr4", "--format", "mjcf", "-o", str(out), "--check", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["rotor"] == "armature" and result["link_damping"] == "tendon" and out.is_file()
    assert result["check"]["max_freq_rel"] < 1e-6
    assert result["motor_joints"][0] == "joint_1_motor"

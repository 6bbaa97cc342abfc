"""Closed-chain robots: YAML loop closures, the bundled parallelogram arm, CLI and ROS node.

Oracles: MCS = RCS to 1e-8 (both exact), UCS within its penalty error; very stiff joints → the
rigid mechanism's modes; a serial robot through the constrained path = the flexible-joint AMA
(flexmodal_ros.flexible_joint.ama, thesis ch. 2); finite differences of the nonlinear closed-chain dynamics.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from rclpy.parameter import Parameter

from flexmodal_interfaces.srv import ComputeModalMap, ComputeModalParameters
from flexmodal_ros.robot.params import load_config
from flexmodal_ros.constrained import Penalty
from flexmodal_ros.constrained.checks import linearization_fd_errors
from flexmodal_ros.constrained.closed_chain import load_closed_chain, with_robot_overrides
from flexmodal_ros.constrained.closed_chain_analysis import robot_equilibrium, robot_modes
from flexmodal_ros.core.errors import ConfigError, InputError
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
from flexmodal_ros.robot.registry import (list_closed_chain_robots, list_robots, load_robot, resolve_model,
                                  robot_paths, share_dir)

Q = [0.3, -0.2]          # actuated joints joint_1 (upper arm), joint_2 (parallelogram crank)
SRV = "/modal_analysis/compute_modal_parameters"
MAP_SRV = "/modal_analysis/compute_modal_map"


@pytest.fixture(scope="module")
def arm():
    return load_closed_chain(*robot_paths("parallelogram_arm"))


def test_existing_robots_load_unchanged_and_closed_chain_is_separate(arm):
    for name in ("scompi", "kuka_lwr4", "planar_2r"):
        cfg = load_config(robot_paths(name)[1])
        assert not cfg.closed_chain and cfg.passive_joints == {} and cfg.loop_closures == ()
        assert load_robot(name).n == len(cfg.joints)
    assert "parallelogram_arm" in list_closed_chain_robots() and "parallelogram_arm" not in list_robots()
    with pytest.raises(ConfigError, match="closed chain"):
        resolve_model("parallelogram_arm")
    assert arm.joint_names == ("joint_1", "joint_3", "joint_2", "joint_4")
    assert arm.actuated_names == ("joint_1", "joint_2") and len(arm.closures) == 1


def test_parallelogram_geometry_and_set_point(arm):
    system, eq, point = robot_equilibrium(arm, Q)
    q1, q2 = Q
    np.testing.assert_allclose(point.q, [q1, q2 - q1, q2, q1 - q2], atol=1e-12)   # URDF comment
    assert eq.iterations <= 2 and eq.force_residual < 1e-9 and eq.constraint_rank == 2
    np.testing.assert_allclose(eq.q[:4], point.q, atol=1e-12)
    np.testing.assert_allclose(eq.multipliers, point.multipliers, rtol=1e-9)
    assert system.n == 6 and system.m == 2


def test_methods_agree_and_uc_is_close(arm):
    mcs, _ = robot_modes(arm, Q, "mcs")
    rcs, _ = robot_modes(arm, Q, "rcs")
    ucs, _ = robot_modes(arm, Q, "ucs", penalty=Penalty(1e7, 1.0, 10.0))
    assert mcs.num_modes == rcs.num_modes == ucs.num_modes == 4           # 2 n_a modes
    assert np.abs(mcs.eigenvalues - rcs.eigenvalues).max() <= 1e-8 * np.abs(mcs.eigenvalues).max()
    assert np.abs(ucs.eigenvalues / mcs.eigenvalues - 1).max() < 1e-5
    assert rcs.spurious_eigenvalues.size == 3 * 2 and ucs.spurious_eigenvalues.size == 2 * 2
    assert mcs.stable and mcs.mode_shapes.shape == (6, 4)
    assert mcs.diagnostics["independent"] == ["joint_1", "joint_2", "joint_1_motor", "joint_2_motor"]


def test_stiff_joints_approach_the_rigid_mechanism(arm):
    rigid, _ = robot_modes(arm, Q, "mcs", rigid_joints=True)
    assert rigid.num_modes == 2
    errors = []
    for factor in (1e2, 1e4, 1e6):
        stiff, _ = robot_modes(with_robot_overrides(arm, k=arm.k * factor), Q, "rcs")
        errors.append(np.abs(stiff.eigenvalues[:2] / rigid.eigenvalues - 1).max())
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-6


def test_serial_robot_through_the_constrained_path_equals_the_ama():
    robot = load_closed_chain(*robot_paths("planar_2r"))
    ref = modal_analysis(load_robot("planar_2r"), [1.1, 0.4])
    for method in ("mcs", "rcs", "ucs"):
        modes, point = robot_modes(robot, [1.1, 0.4], method)
        np.testing.assert_allclose(modes.eigenvalues, ref.eigenvalues, rtol=1e-10)
        np.testing.assert_allclose(point.motor, ref.motor_equilibrium, rtol=1e-12)


def test_finite_difference_linearization_robot(arm):
    system, eq, _ = robot_equilibrium(arm, Q)
    independent = ["joint_1", "joint_2", "joint_1_motor", "joint_2_motor"]
    errors = linearization_fd_errors(system, eq, independent, Penalty())
    assert max(max(e.values()) for e in errors.values()) < 1e-5, errors


def _write_variant(tmp_path, text_from, text_to):
    src = robot_paths("parallelogram_arm")[1].read_text()
    assert text_from in src
    path = tmp_path / "arm.yaml"
    path.write_text(src.replace(text_from, text_to).replace(
        "../urdf/", str(share_dir() / "urdf") + "/"))
    return path


@pytest.mark.parametrize("text_from, text_to, match", [
    ("frames: [coupler_tip, forearm_rear]", "frames: [coupler_tip, elbow]", "frame 'elbow' not in the URDF"),
    ("type: planar", "type: hinge", r"loop_closures\[0\].type: expected one of planar, point"),
    ("normal: [0.0, 0.0, 1.0]", "normal: [0.0, .nan, 1.0]", r"loop_closures\[0\].normal: contains NaN"),
    ("joint_3: {d_f: 0.05}", "joint_1: {d_f: 0.05}", "passive_joints.joint_1: joint is also listed"),
    ("  joint_4: {d_f: 0.05}\n", "", "joint_4 are neither under joints"),
    ("joint_4: {d_f: 0.05}", "joint_4: {damping: 0.05}", r"passive_joints.joint_4: unknown key\(s\) damping"),
    ("frames: [coupler_tip, forearm_rear]", "frames: [coupler_tip]", "frames: expected two different"),
])
def test_bad_closed_chain_yaml(tmp_path, text_from, text_to, match):
    with pytest.raises(ConfigError, match=match):
        load_closed_chain(None, _write_variant(tmp_path, text_from, text_to))


def test_bad_configurations_and_overrides(arm):
    with pytest.raises(InputError, match="expected 2 actuated-joint values"):
        robot_modes(arm, [0.1, 0.2, 0.3])
    with pytest.raises(InputError, match="q: contains NaN"):
        robot_modes(arm, [0.1, math.nan])
    with pytest.raises(InputError, match="kp: expected 1 or 2 values"):
        with_robot_overrides(arm, kp=[1.0, 2.0, 3.0])
    with pytest.raises(InputError, match="method: expected one of"):
        robot_modes(arm, Q, "penalty")


# --- CLI -----------------------------------------------------------------------------------

def flexmodal(*args):
    """The real console entry point in a subprocess."""
    return subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", *args], capture_output=True,
                          text=True, timeout=120)


def flexmodal_here(capsys, *args):
    """``flexmodal_ros.cli.main`` in this process (no interpreter start-up): (code, out, err)."""
    from flexmodal_ros.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_constrained_fourbar_and_pendulum(capsys):
    code, stdout, stderr = flexmodal_here(capsys, "constrained", "--model", "fourbar", "--loops", "5",
                                          "--damping", "1", "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["n"] == 13 and data["m"] == 12
    for method in ("mcs", "rcs", "ucs"):
        res = data["methods"][method]
        assert round(res["eigenvalues_real"][0], 4) == -0.2350
        assert round(res["eigenvalues_imag"][0], 4) == 1.5276
    assert data["methods"]["rcs"]["num_spurious"] == 36
    code, stdout, _ = flexmodal_here(capsys, "constrained", "--model", "pendulum", "--elements", "10",
                                     "--modes", "2", "--method", "rcs")
    assert code == 0 and "s1 = " in stdout and "1.335731" in stdout


def test_cli_closed_chain_modal_and_sweep(arm, tmp_path, capsys):
    out = flexmodal("modal", "--robot", "parallelogram_arm", "--q", "0.3,-0.2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    ref, _ = robot_modes(arm, Q, "mcs")
    assert data["method"] == "mcs" and data["actuated_joints"] == ["joint_1", "joint_2"]
    np.testing.assert_allclose(data["frequencies_hz"], ref.frequencies_hz, rtol=1e-12)
    code, stdout, _ = flexmodal_here(capsys, "modal", "--robot", "parallelogram_arm", "--q", "0.3,-0.2",
                                     "--method", "rcs")
    assert code == 0 and "method RCS" in stdout and "6 spurious" in stdout
    code, stdout, stderr = flexmodal_here(
        capsys, "sweep", "--robot", "parallelogram_arm", "--line", "0.2,-0.3", "0.6,0.0", "--num", "4",
        "--out-dir", str(tmp_path), "--no-plot", "--no-progress", "--json")
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["num_configurations"] == 4 and summary["num_modes"] == 4 and summary["all_stable"]
    assert (tmp_path / "modal_map.csv").read_text().startswith("configuration,q_joint_1,q_joint_2,")


@pytest.mark.parametrize("args, message", [
    (("constrained", "--model", "fourbars"), "unknown model 'fourbars'"),
    (("constrained", "--model", "fourbar", "--loops", "0"), "loops: must be an integer >= 1"),
    (("constrained", "--model", "pendulum", "--elements", "2", "--alpha", "-1"), "penalty.alpha"),
    (("modal", "--robot", "parallelogram_arm", "--q", "0.1,0.2,0.3"), "expected 2 actuated-joint"),
    (("modal", "--robot", "parallelogram_arm", "--q", "0.1,nan"), "q: contains NaN"),
])
def test_cli_bad_input_one_line_exit_2(capsys, args, message):
    code, stdout, stderr = flexmodal_here(capsys, *args)
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert message in stderr, stderr


# --- ROS node ------------------------------------------------------------------------------

@pytest.fixture
def arm_server(ros):
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("robot", value="parallelogram_arm"), Parameter("method", value="rcs")])
    return ros.add_node(node)


def test_node_serves_closed_chain_robot(ros, arm_server, arm):
    client = ros.node("arm_client").create_client(ComputeModalParameters, SRV)
    req = ComputeModalParameters.Request()
    req.joint_names, req.positions = ["joint_2", "joint_1"], [Q[1], Q[0]]
    resp = ros.call(client, req)
    assert resp.success, resp.message
    ref, point = robot_modes(arm, Q, "mcs")
    np.testing.assert_allclose(resp.result.frequencies_hz, ref.frequencies_hz, rtol=1e-9)
    np.testing.assert_allclose(resp.result.positions, point.q, atol=1e-12)
    assert list(resp.result.joint_names) == list(arm.joint_names)
    assert resp.result.mode_shape_rows == 6 and len(resp.result.motor_equilibrium) == 2
    bad = ComputeModalParameters.Request()
    bad.positions = [0.1, math.nan]
    resp = ros.call(client, bad)
    assert not resp.success and "NaN" in resp.message
    map_client = ros.node("arm_map_client").create_client(ComputeModalMap, MAP_SRV)
    mreq = ComputeModalMap.Request()
    mreq.num_configurations, mreq.positions, mreq.track_modes = 3, [0.2, -0.3, 0.3, -0.2, 0.4, -0.1], True
    mresp = ros.call(map_client, mreq)
    assert mresp.success, mresp.message
    assert len(mresp.results) == 3 and len(mresp.mode_order) == 12
    np.testing.assert_allclose(mresp.results[1].frequencies_hz, ref.frequencies_hz, rtol=1e-9)


def test_node_rejects_unknown_method(ros_process):
    proc = ros_process(["modal_analysis_server", "--ros-args", "-p", "robot:=parallelogram_arm",
                        "-p", "method:=lagrange"])
    proc.popen.wait(30)
    assert proc.popen.returncode != 0 and "method must be one of mcs, rcs, ucs" in proc.log()


def test_modes_equal_pinocchio_constraint_dynamics(arm):
    """Independent engine: FD of Pinocchio's constrained forward dynamics (RigidConstraintModel,
    constraintDynamics) about the set-point has the same physical eigenvalues."""
    from flexmodal_ros.constrained.checks import robot_state_matrix_fd

    system, eq, point = robot_equilibrium(arm, Q)
    A, rest = robot_state_matrix_fd(system, point)
    assert rest < 1e-10                                  # the set-point is an equilibrium there too
    w = np.linalg.eigvals(A)
    physical = w[(np.abs(w) > 1e-3) & (w.imag > 0)]
    physical = physical[np.argsort(np.abs(physical))]
    mcs, _ = robot_modes(arm, Q, "mcs")
    assert physical.size == 4 and np.sum(np.abs(w) <= 1e-3) == 2 * system.m    # drift directions
    np.testing.assert_allclose(physical, mcs.eigenvalues, rtol=1e-6)

"""ROS 2: the `modal_test` node with the flexible-joint simulator running (real processes, real
topics and services), and the sampled-data option of `~/compute_modal_parameters`.

The simulator holds Scompi at configuration 8 with the set-point law run inside its integration
step (``setpoint_law``, RK4 at 4 kHz: error ~1e-4 relative on the 183 Hz mode); the node triggers
the simulator's impulse (50 N along y0, 6 ms; thesis Table 2.5 set-up), records /joint_states,
writes and reads back the bag, identifies the modes and answers with the Table 2.5 comparison.
"""
import math

import numpy as np
import pytest
from rclpy.parameter import Parameter

from flexmodal_interfaces.srv import ComputeModalParameters, RunModalTest
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.flexible_joint.sampled import sampled_modal_analysis

Q8 = np.linspace([0.0, -np.pi / 6, 2 * np.pi / 3, -np.pi / 18, -2 * np.pi / 3, 0.0],
                 [0.0, np.pi / 6, np.pi / 3, np.pi / 3, -np.pi / 3, 0.0], 50)[7]
SIM_SERVICE = "/flexible_joint_simulator/apply_wrench"


SERVICE = "/modal_test/run_modal_test"


@pytest.fixture
def start_modal_test(ros_process, tmp_path):
    """The real ``modal_test`` executable (two executor threads: its service waits for the
    simulator's impulse service while recording)."""
    def start(*params):
        ros_process(["modal_test", "--ros-args", "-p", "robot:=scompi",
                     "-p", f"output_dir:={tmp_path / 'tests'}", *[a for p in params for a in ("-p", p)]],
                    wait_for_service=(SERVICE, RunModalTest))
    return start


def _request(**fields):
    req = RunModalTest.Request()
    req.duration, req.pre_trigger = 2.2, 0.1
    req.trigger_impulse, req.wrench, req.impulse_duration = True, [0.0, 50.0, 0.0, 0.0, 0.0, 0.0], 0.006
    for key, value in fields.items():
        setattr(req, key, value)
    return req


def test_run_modal_test_with_the_simulator(ros, ros_process, start_modal_test, tmp_path):
    from flexmodal_interfaces.srv import ApplyWrench

    ros_process(["flexible_joint_simulator", "--ros-args", "-p", "robot:=scompi", "-p", "setpoint_law:=true",
                 "-p", "integration_rate_hz:=4000.0", "-p",
                 "initial_positions:=[" + ",".join(f"{v:.12f}" for v in Q8) + "]"],
                wait_for_service=(SIM_SERVICE, ApplyWrench))
    start_modal_test()
    client = ros.node("flexmodal_test_modal_client").create_client(RunModalTest, SERVICE)
    response = ros.call(client, _request(), timeout=60.0)
    assert response.success, response.message
    ama = modal_analysis(load_robot("scompi"), response.positions)
    np.testing.assert_allclose(response.positions, Q8, atol=1e-3)          # the held configuration
    assert len(response.status) == 12 and response.status[11] == "above Nyquist"
    good = [k for k, s in enumerate(response.status) if s == "identified"
            and abs(response.delta_frequency_hz[k]) <= max(0.02, 0.002 * ama.frequencies_hz[k])
            and abs(response.delta_damping_ratio[k]) <= 0.003]
    assert len(good) >= 10, response.table
    assert "AMA f [Hz]" in response.table
    print(response.table)
    assert (tmp_path / "tests").exists() and response.bag_path and response.plot_path.endswith(".png")
    # a bad request is answered, and the node keeps serving
    bad = ros.call(client, _request(duration=-1.0))
    assert not bad.success and "duration" in bad.message
    bad = ros.call(client, _request(method="fft"))
    assert not bad.success and "method" in bad.message
    bad = ros.call(client, _request(channels=["joint_9_motor"], duration=0.3, pre_trigger=0.05), timeout=30.0)
    assert not bad.success and "joint_9_motor" in bad.message


def test_run_modal_test_without_joint_states_fails_cleanly(ros, start_modal_test):
    start_modal_test("wall_timeout_factor:=0.5", "wall_timeout_margin_s:=1.0")
    client = ros.node("flexmodal_test_modal_client").create_client(RunModalTest, SERVICE)
    response = ros.call(client, _request(trigger_impulse=False, duration=0.5), timeout=30.0)
    assert not response.success and "no joint states" in response.message
    response = ros.call(client, _request(impulse_service="/nobody/apply_wrench", duration=0.5), timeout=30.0)
    assert not response.success and "joint states" in response.message


def test_compute_modal_parameters_sampled_data(ros):
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[Parameter("robot", value="scompi")])
    ros.add_node(node)
    client = ros.node("flexmodal_test_client").create_client(ComputeModalParameters,
                                                             "/modal_analysis/compute_modal_parameters")
    req = ComputeModalParameters.Request(positions=[float(v) for v in Q8], controller_rate_hz=1000.0)
    res = ros.call(client, req)
    assert res.success, res.message
    expected = sampled_modal_analysis(load_robot("scompi"), Q8, 1000.0)
    np.testing.assert_allclose(res.result.frequencies_hz, expected.frequencies_hz, rtol=1e-12)
    req.hold = "first-order"
    res = ros.call(client, req)
    assert not res.success and "hold" in res.message
    req.hold, req.controller_rate_hz = "", math.nan
    res = ros.call(client, req)
    assert not res.success and "controller_rate_hz" in res.message

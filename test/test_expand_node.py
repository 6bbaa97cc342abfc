"""modal_analysis_server: polynomial fast path of ~/modal_parameters and ~/expand_modal_parameters
(real rclpy nodes, real service calls, the console script).

Acceptance (issue 15): along the thesis LWR4 trajectory (4.29)-(4.30) the live topic with
modal_method=polynomial differs from the exact AMA by ≤ 0.5 % in f and ≤ 0.5 pp in ζ, re-expanding
when the robot leaves the trust region; bad requests are answered with success=false.
"""
import math
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from flexmodal_interfaces.msg import ModalParameters
from flexmodal_interfaces.srv import ExpandModalParameters
from flexmodal_ros.core.errors import FlexmodalError
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
from flexmodal_ros.expansion import ModalPolynomial
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.robot.trajectory import THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, point_to_point

NS = "/expand_test"          # own namespace: no service name shared with other test files' servers
SRV = f"{NS}/modal_analysis/expand_modal_parameters"


def _spin_for(ros, seconds):
    end = time.monotonic() + seconds
    ros.spin_until(lambda: time.monotonic() > end, seconds + 1.0, "spin")


def test_live_polynomial_path_along_thesis_trajectory(ros):
    node = ModalAnalysisServer(context=ros.context, namespace=NS, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("publish_rate_hz", value=50.0),
        Parameter("joint_state_timeout_s", value=2.0), Parameter("modal_method", value="polynomial")])
    ros.add_node(node)
    model = load_robot("kuka_lwr4")
    client = ros.node("live_client")
    received = []
    client.create_subscription(ModalParameters, f"{NS}/modal_analysis/modal_parameters", received.append, 50)
    pub = client.create_publisher(JointState, "/joint_states", 10)
    times = np.linspace(0.0, THESIS_LWR4_T, 31)
    qs = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, times)[0]
    f_err, z_err = [], []
    for k, q in enumerate(qs):
        js = JointState(name=list(model.joint_names), position=[float(v) for v in q])
        js.header.stamp.sec = k + 1
        deadline = time.monotonic() + 20.0
        while not any(m.stamp.sec == k + 1 for m in received):
            assert time.monotonic() < deadline, f"no ~/modal_parameters for configuration {k}"
            pub.publish(js)
            _spin_for(ros, 0.03)
        msg = next(m for m in received if m.stamp.sec == k + 1)
        exact = modal_analysis(model, q)
        np.testing.assert_allclose(msg.positions, q)
        assert msg.num_modes == exact.num_modes and msg.stable == exact.stable
        f_err.append(np.max(np.abs(np.array(msg.frequencies_hz) / exact.frequencies_hz - 1)))
        z_err.append(np.max(np.abs(np.array(msg.damping_ratios) - exact.damping_ratios)))
        np.testing.assert_allclose(msg.motor_equilibrium, exact.motor_equilibrium, rtol=1e-12)
    tracker = node.tracker
    print(f"live fast path: max |Δf|/f = {max(f_err):.2e}, max |Δζ| = {100 * max(z_err):.2e} pp, "
          f"expansions {tracker.expansions}, answers {tracker.counts}")
    assert max(f_err) <= 5e-3 and max(z_err) <= 5e-3
    assert tracker.expansions >= 2 and tracker.counts["polynomial"] >= 1


def _request(positions, order=0, modes=(), use_for_live=False, output_path="", names=()):
    req = ExpandModalParameters.Request()
    req.joint_names = list(names)
    req.positions = [float(v) for v in positions]
    req.order, req.modes = order, list(modes)
    req.use_for_live, req.output_path = use_for_live, output_path
    return req


def test_expand_service_console_script(ros, ros_process, tmp_path):
    ros_process(["modal_analysis_server", "--ros-args", "-r", f"__ns:={NS}", "-p", "robot:=planar_2r",
                 "-p", "modal_method:=polynomial"], wait_for_service=(SRV, ExpandModalParameters))
    client = ros.node("expand_client").create_client(ExpandModalParameters, SRV)
    model = load_robot("planar_2r")
    q0 = np.array([0.3, 0.5])
    resp = ros.call(client, _request(q0, order=3, use_for_live=True, output_path=str(tmp_path / "c.npz")))
    assert resp.success, resp.message
    exact = modal_analysis(model, q0)
    assert (resp.order, resp.num_parameters, resp.num_terms) == (3, 2, 10)
    assert list(resp.mode_numbers) == [1, 2, 3, 4] and resp.trust_radius > 0
    coeffs = (np.array(resp.eigenvalue_coefficients_real) + 1j * np.array(resp.eigenvalue_coefficients_imag)).reshape(10, 4)
    np.testing.assert_allclose(coeffs[0], exact.eigenvalues, rtol=1e-12)
    exps = np.array(resp.multi_indices).reshape(10, 2)
    assert exps.sum(axis=1).max() == 3 and exps[0].tolist() == [0, 0]
    np.testing.assert_allclose(resp.result.frequencies_hz, exact.frequencies_hz, rtol=1e-12)
    poly = ModalPolynomial.load(tmp_path / "c.npz")
    q = q0 + [0.02, -0.01]
    np.testing.assert_allclose(poly.evaluate(q).frequencies_hz[0], modal_analysis(model, q).frequencies_hz, rtol=1e-5)
    named = ros.call(client, _request([0.5, 0.3], names=["joint_2", "joint_1"], modes=[1]))
    assert named.success and list(named.mode_numbers) == [1] and named.num_terms == 10
    assert named.result.positions.tolist() == [0.3, 0.5]


@pytest.fixture
def server(ros):
    node = ModalAnalysisServer(context=ros.context, namespace=NS,
                               parameter_overrides=[Parameter("robot", value="planar_2r")])
    return ros.add_node(node)


@pytest.mark.parametrize("kwargs, field", [
    (dict(positions=[0.1]), "positions"),
    (dict(positions=[0.1, math.nan]), "NaN"),
    (dict(positions=[0.1, 0.2], modes=[9]), "modes"),
    (dict(positions=[0.1, 0.2], modes=[0]), "modes"),
    (dict(positions=[0.1, 0.2], names=["joint_1", "elbow"]), "joint_names"),
    (dict(positions=[0.1, 0.2], output_path="/nonexistent_dir/c.npz"), "output_path"),
])
def test_bad_expand_requests(ros, server, kwargs, field):
    client = ros.node("bad_expand_client").create_client(ExpandModalParameters, SRV)
    resp = ros.call(client, _request(**kwargs))
    assert not resp.success and field in resp.message, resp.message
    ok = ros.call(client, _request([0.3, 0.5], use_for_live=True))
    assert ok.success and ok.order == 3 and any("use_for_live ignored" in w for w in ok.warnings)


def test_bad_fast_path_parameters(ros):
    for name, value in (("modal_method", "fast"), ("expansion_order", 0), ("expansion_tolerance", -1.0)):
        with pytest.raises(FlexmodalError, match=name.split("_")[0]):
            ModalAnalysisServer(context=ros.context, namespace=NS, parameter_overrides=[
                Parameter("robot", value="planar_2r"), Parameter(name, value=value)])

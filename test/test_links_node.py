"""``~/compute_link_modes`` on the modal analysis server: real rclpy, real service calls.

Oracle: Table 10 of di Castri & Messina (2011) (notes_002 §3.2), three-link arm at θ2, θ3 = 90°, −90°.
"""
import math

import numpy as np
import pytest
from rclpy.parameter import Parameter

from flexmodal_interfaces.srv import ComputeLinkModes, ComputeModalParameters
from flexmodal_ros.links.solve import MAX_MODES
from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
from links_tables import THREE_LINK, printed

SRV = "/modal_analysis/compute_link_modes"
TABLE_10 = np.radians([0.0, 90.0, -90.0])


def _request(positions, joint_names=(), model="", num_modes=0, joint_model="", thickness_factor=0.0,
             regime=""):
    req = ComputeLinkModes.Request()
    req.joint_names = list(joint_names)
    req.positions = [float(v) for v in positions]
    req.model, req.num_modes, req.joint_model = model, num_modes, joint_model
    req.thickness_factor, req.regime = float(thickness_factor), regime
    return req


def _check_table_10(resp, key):
    assert resp.success, resp.message
    assert resp.num_modes == 10 and len(resp.frequencies_hz) == 10
    for (value, unit), f in zip(printed(THREE_LINK[10][key]), resp.frequencies_hz):
        assert abs(f - value) <= unit, (key, value, f)


def test_console_script_serves_table_10(ros, ros_process):
    """The real executable on the three-link arm: Table 10 (T and EB), shapes, and the existing
    flexible-joint service still answering on the same node."""
    ros_process(["modal_analysis_server", "--ros-args", "-p", "robot:=three_link_arm"],
                wait_for_service=(SRV, ComputeLinkModes))
    node = ros.node("link_modes_client")
    client = node.create_client(ComputeLinkModes, SRV)
    resp = ros.call(client, _request(TABLE_10))
    _check_table_10(resp, "T")
    assert resp.model == "timoshenko" and resp.joint_model == "rigid" and resp.regime == "full"
    assert list(resp.link_names) == ["link_1", "link_2", "link_3"]
    assert max(resp.singular_ratios) < 1e-7 and not any(resp.above_cutoff)
    rows, cols = resp.mode_shape_rows, resp.mode_shape_cols
    P = len(resp.station_x)
    assert (rows, cols) == (2 * 3 * P, 10) and len(resp.mode_shapes) == rows * cols
    pts = np.reshape(resp.station_positions, (3 * P, 2))
    np.testing.assert_allclose(pts[P - 1], [1.5, 0.0], atol=1e-12)  # end of link 1 on the x axis
    np.testing.assert_allclose(pts[-1], [3.0, 1.5], atol=1e-12)  # link 2 up (+90°), link 3 along x (−90°)
    _check_table_10(ros.call(client, _request(TABLE_10, model="euler-bernoulli")), "EB")
    named = ros.call(client, _request([-math.pi / 2, 0.0, math.pi / 2],
                                      joint_names=["joint_3", "joint_1", "joint_2"]))
    np.testing.assert_allclose(named.frequencies_hz, resp.frequencies_hz, rtol=1e-12)
    joint_client = node.create_client(ComputeModalParameters, "/modal_analysis/compute_modal_parameters")
    req = ComputeModalParameters.Request()
    req.positions = [0.0, 0.5, -0.5]
    joint = ros.call(joint_client, req)
    assert joint.success and joint.result.num_modes == 6


@pytest.fixture
def server(ros):
    """In-process three-link server in the test's context (same code as the executable); the
    node's work bound max_link_modes raised to the core's maximum, so that the core's own checks
    answer (the below-cut-off count is found before any root is searched)."""
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[Parameter("robot", value="three_link_arm"),
                                                                         Parameter("max_link_modes", value=MAX_MODES)])
    return ros.add_node(node)


@pytest.mark.parametrize("kwargs, field", [
    (dict(positions=[0.0, math.nan, 0.0]), "NaN"),
    (dict(positions=[0.0, 1.0]), "positions"),
    (dict(positions=[0.0, 1.0, 1.0], joint_names=["joint_1", "elbow", "joint_3"]), "joint_names"),
    (dict(positions=[0.0, 1.0, 1.0], model="rayleigh"), "model"),
    (dict(positions=[0.0, 1.0, 1.0], num_modes=500), "num_modes: 500 is more than this node's max_link_modes (50)"),
    (dict(positions=[0.0, 1.0, 1.0], num_modes=50, regime="below-cutoff"), "cut-off"),
    (dict(positions=[0.0, 1.0, 1.0], regime="upper"), "regime"),
    (dict(positions=[0.0, 1.0, 1.0], joint_model="hinged"), "joint_model"),
    (dict(positions=[0.0, 1.0, 1.0], thickness_factor=-2.0), "thickness_factor"),
])
def test_bad_link_requests_answered_and_node_keeps_serving(ros, server, kwargs, field):
    client = ros.node("bad_link_client").create_client(ComputeLinkModes, SRV)
    resp = ros.call(client, _request(**kwargs))
    assert not resp.success and field in resp.message, resp.message
    ok = ros.call(client, _request(TABLE_10, num_modes=3))
    assert ok.success and ok.num_modes == 3


def test_elastic_joints_and_thickness_through_the_service(ros, server):
    client = ros.node("joint_client").create_client(ComputeLinkModes, SRV)
    rigid = ros.call(client, _request(TABLE_10, num_modes=4))
    elastic = ros.call(client, _request(TABLE_10, num_modes=4, joint_model="elastic"))
    servo = ros.call(client, _request(TABLE_10, num_modes=4, joint_model="servo"))
    assert elastic.success and servo.success and elastic.joint_model == "elastic"
    assert np.all(np.array(servo.frequencies_hz) < np.array(elastic.frequencies_hz))
    assert np.all(np.array(elastic.frequencies_hz) < np.array(rigid.frequencies_hz))
    thick = ros.call(client, _request(TABLE_10, num_modes=4, thickness_factor=2.0))
    assert thick.success and thick.thickness_factor == 2.0 and thick.frequencies_hz[0] > rigid.frequencies_hz[0]


def test_robot_without_links_says_so(ros):
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[Parameter("robot", value="planar_2r")])
    ros.add_node(node)
    client = ros.node("no_links_client").create_client(ComputeLinkModes, SRV)
    resp = ros.call(client, _request([0.1, 0.2]))
    assert not resp.success and resp.message == "robot planar_2r has no flexible links (no links: section in its YAML)"

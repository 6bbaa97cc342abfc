"""flexmodal_interfaces: generated types, real service round trips, and the ROS environment.

Run as a script (``python test/test_interfaces.py``) this file is the tiny echo server node used by
the cross-process test.
"""
import os
import subprocess
import sys
from pathlib import Path

import rclpy

from flexmodal_interfaces.msg import ModalParameters
from ros_stops import stalled_in_rclpy_teardown
from flexmodal_interfaces.srv import (ApplyWrench, ComputeModalMap, ComputeModalParameters,
                                      IdentifyJointParameters)

REPO = Path(__file__).resolve().parents[1]
ECHO_SERVICE = "/flexmodal_test/compute_modal_parameters"

MODAL_PARAMETERS_FIELDS = [
    "stamp", "joint_names", "positions", "motor_equilibrium", "num_modes", "frequencies_hz",
    "damping_ratios", "eigenvalues_real", "eigenvalues_imag", "mode_shape_rows", "mode_shape_cols",
    "mode_shapes_real", "mode_shapes_imag", "real_eigenvalues", "stable", "stability",
    "unstable_eigenvalues_real", "unstable_eigenvalues_imag", "warnings",
]


def echo_modal_parameters(request, response):
    """Fill a response whose every field is a known function of the request (for round-trip checks).

    Two joints' worth of data: 2 modes, 4x2 mode shapes, values derived from the tool and wrench
    fields so that a wrongly transported request field shows up in the response.
    """
    n = len(request.positions)
    result = response.result
    result.stamp.sec, result.stamp.nanosec = 12, 345
    result.joint_names = list(request.joint_names)
    result.positions = list(request.positions)
    result.motor_equilibrium = [q + request.tool_mass for q in request.positions]
    result.num_modes = n
    result.frequencies_hz = list(request.tool_inertia[:n])
    result.damping_ratios = list(request.kp[:n])
    result.eigenvalues_real = list(request.wrench[:n])
    result.eigenvalues_imag = list(request.wrench[3:3 + n])
    result.mode_shape_rows, result.mode_shape_cols = 2 * n, n
    result.mode_shapes_real = [float(i) for i in range(2 * n * n)]
    result.mode_shapes_imag = [-float(i) for i in range(2 * n * n)]
    result.real_eigenvalues = list(request.kd)
    result.stable = not request.override_wrench
    result.unstable_eigenvalues_real = list(request.tool_com)
    result.unstable_eigenvalues_imag = [0.0, 0.0, 0.0]
    response.success = request.override_tool
    response.message = "echo:" + ",".join(request.joint_names)
    return response


def make_request():
    request = ComputeModalParameters.Request()
    request.joint_names = ["joint_a", "joint_b"]
    request.positions = [0.25, -1.5]
    request.kp = [0.03, 0.04]
    request.kd = [-7.0]
    request.override_tool = True
    request.tool_mass = 2.5
    request.tool_com = [0.1, 0.2, 0.3]
    request.tool_inertia = [11.5, 23.25, 3.0, 0.0, 4.0, 0.0, 5.0, 0.0, 6.0]
    request.override_wrench = True
    request.wrench = [-0.5, -0.25, 1.0, 31.0, 47.0, 2.0]
    return request


def assert_echoed(response):
    """The response equals echo_modal_parameters(make_request())."""
    assert response.success is True
    assert response.message == "echo:joint_a,joint_b"
    r = response.result
    assert (r.stamp.sec, r.stamp.nanosec) == (12, 345)
    assert list(r.joint_names) == ["joint_a", "joint_b"]
    assert list(r.positions) == [0.25, -1.5]
    assert list(r.motor_equilibrium) == [2.75, 1.0]
    assert r.num_modes == 2
    assert list(r.frequencies_hz) == [11.5, 23.25]
    assert list(r.damping_ratios) == [0.03, 0.04]
    assert list(r.eigenvalues_real) == [-0.5, -0.25]
    assert list(r.eigenvalues_imag) == [31.0, 47.0]
    assert (r.mode_shape_rows, r.mode_shape_cols) == (4, 2)
    assert list(r.mode_shapes_real) == [float(i) for i in range(8)]
    assert list(r.mode_shapes_imag) == [-float(i) for i in range(8)]
    assert list(r.real_eigenvalues) == [-7.0]
    assert r.stable is False
    assert list(r.unstable_eigenvalues_real) == [0.1, 0.2, 0.3]


def test_generated_types_match_the_interface_contract():
    assert list(ModalParameters.get_fields_and_field_types()) == MODAL_PARAMETERS_FIELDS
    request = ComputeModalParameters.Request()
    assert (len(request.tool_com), len(request.tool_inertia), len(request.wrench)) == (3, 9, 6)
    assert ComputeModalMap.Response.get_fields_and_field_types()["results"] == \
        "sequence<flexmodal_interfaces/ModalParameters>"
    assert ComputeModalMap.Response.get_fields_and_field_types()["mode_order"] == "sequence<int32>"
    identify = IdentifyJointParameters.Request.get_fields_and_field_types()
    assert identify["mode_indices"] == "sequence<int32>" and identify["seed"] == "int64"
    assert len(ApplyWrench.Request().wrench) == 6
    # The action ~/identify carries the service's request and response fields (issue 11 item 5).
    from flexmodal_interfaces.action import Identify
    assert Identify.Goal.get_fields_and_field_types() == IdentifyJointParameters.Request.get_fields_and_field_types()
    assert Identify.Result.get_fields_and_field_types() == IdentifyJointParameters.Response.get_fields_and_field_types()
    assert list(Identify.Feedback.get_fields_and_field_types()) == ["starts_done", "starts_total",
                                                                    "best_objective", "elapsed_s"]


def test_process_uses_loopback_and_a_private_domain(ros):
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    domain = int(os.environ["ROS_DOMAIN_ID"])
    assert 1 <= domain <= 101
    assert ros.context.get_domain_id() == domain


def test_compute_modal_parameters_round_trip_between_two_nodes(ros):
    server = ros.node("flexmodal_test_echo_server")
    server.create_service(ComputeModalParameters, ECHO_SERVICE, echo_modal_parameters)
    client = ros.node("flexmodal_test_client").create_client(ComputeModalParameters, ECHO_SERVICE)
    assert_echoed(ros.call(client, make_request()))


def test_compute_modal_parameters_round_trip_across_processes(ros, ros_process):
    server = ros_process([sys.executable, __file__],
                         wait_for_service=(ECHO_SERVICE, ComputeModalParameters))
    client = ros.node("flexmodal_test_client").create_client(ComputeModalParameters, ECHO_SERVICE)
    assert_echoed(ros.call(client, make_request()))
    code = server.stop()
    if code == 1 and stalled_in_rclpy_teardown(server.log_path.read_text(errors="replace")):
        return          # the middleware stalled the clean-up: cut at the stop bound (ros_stops.py)
    assert code == 0, server.log()


def source_env_script(tmp_path, **overrides):
    """Environment after `. scripts/env.sh` (sourced twice) in a bash started in ``tmp_path``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "VIRTUAL_ENV")}
    env.update(overrides)
    script = REPO / "scripts" / "env.sh"
    output = subprocess.run(["bash", "-c", f". '{script}' && . '{script}' && env -0"], cwd=tmp_path,
                            env=env, capture_output=True, check=True).stdout.decode()
    return dict(item.split("=", 1) for item in output.split("\0") if "=" in item)


def test_env_script_keeps_ros_on_loopback_and_exposes_the_interfaces(tmp_path):
    env = source_env_script(tmp_path)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert env["ROS_DOMAIN_ID"].isdigit()
    distro = os.environ.get("ROS_DISTRO", "kilted")      # the one this session runs (scripts/env.sh exports it)
    suffix = "" if distro == "kilted" else f"-{distro}"
    assert env["ROS_DISTRO"] == distro
    assert env["VIRTUAL_ENV"] == str(REPO / f".venv{suffix}")
    interfaces = str(REPO / f"build{suffix}" / "interfaces" / "install")
    assert env["AMENT_PREFIX_PATH"].split(":").count(interfaces) == 1
    assert env["LD_LIBRARY_PATH"].split(":").count(interfaces + "/lib") == 1
    assert source_env_script(tmp_path, ROS_DOMAIN_ID="17")["ROS_DOMAIN_ID"] == "17"


def main():
    """Echo server node for the cross-process test (environment from the ros_process fixture), run
    as the product's nodes are (nodes/entry_points.run_main, nodes/base.run_node): its stop is bounded
    by STOP_BOUND_S, so a clean-up the middleware stalls ends with exit code 1 and the stack dump
    (a plain rclpy.spin script once outlived the fixture's 10 s and was killed: CI, Kilted)."""
    from flexmodal_ros.nodes.base import run_node
    from flexmodal_ros.nodes.entry_points import run_main

    def echo_server():
        node = rclpy.create_node("flexmodal_test_echo_server")
        node.create_service(ComputeModalParameters, ECHO_SERVICE, echo_modal_parameters)
        return node

    run_main(lambda: lambda: run_node(echo_server, "test_interfaces.py"))


if __name__ == "__main__":
    main()

"""ROS 2 node `modal_analysis_server`: real rclpy clients, real service calls, live topic.

Oracles as in test_modal.py (notes_003 §3 Table 2.5, §2.4.2 extremes).
"""
import ast
import math
import time
from pathlib import Path

import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from flexmodal_interfaces.msg import ModalParameters
from flexmodal_interfaces.srv import ComputeModalMap, ComputeModalParameters
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
from flexmodal_ros.nodes.polled import PolledClient
from flexmodal_ros.robot.registry import load_robot, robot_paths
from test_modal import SCOMPI_Q1, SCOMPI_Q50, TABLE_2_5, Q_M_2_22

REPO = Path(__file__).resolve().parents[1]
SRV = "/modal_analysis/compute_modal_parameters"
MAP_SRV = "/modal_analysis/compute_modal_map"
Q8 = np.linspace(SCOMPI_Q1, SCOMPI_Q50, 50)[7]


def _request(positions, joint_names=(), kp=(), kd=(), tool_mass=None, wrench=None):
    req = ComputeModalParameters.Request()
    req.joint_names = list(joint_names)
    req.positions = [float(v) for v in positions]
    req.kp, req.kd = [float(v) for v in kp], [float(v) for v in kd]
    if tool_mass is not None:
        req.override_tool, req.tool_mass = True, float(tool_mass)
    if wrench is not None:
        req.override_wrench, req.wrench = True, [float(v) for v in wrench]
    return req


def _map_request(configs, track=True, tool_mass=None):
    req = ComputeModalMap.Request()
    req.num_configurations = len(configs)
    req.positions = np.asarray(configs, float).ravel().tolist()
    req.track_modes = track
    if tool_mass is not None:
        req.override_tool, req.tool_mass = True, float(tool_mass)
    return req


def _check_table_2_5(result, case):
    table = np.array(TABLE_2_5[case])
    f = np.array(result.frequencies_hz)
    tol = np.full(12, 5e-4)
    if case == "case2":
        tol[10] = 3e-3
    assert result.num_modes == 12 and result.stable
    assert np.all(np.abs(f / table[:, 0] - 1) <= tol)
    assert np.max(np.abs(100 * np.array(result.damping_ratios) - table[:, 1])) <= 0.03


def test_console_script_services_reproduce_thesis(ros, ros_process):
    """Starts the real executable; both services checked against Table 2.5 and §2.4.2, the first
    also through PolledClient (the same answer)."""
    ros_process(["modal_analysis_server", "--ros-args", "-p", "robot:=scompi"],
                wait_for_service=(SRV, ComputeModalParameters))
    node = ros.node("modal_test_client")
    client = node.create_client(ComputeModalParameters, SRV)
    map_client = node.create_client(ComputeModalMap, MAP_SRV)

    resp = ros.call(client, _request(Q8))
    assert resp.success, resp.message
    _check_table_2_5(resp.result, "case1")
    np.testing.assert_allclose(resp.result.motor_equilibrium, Q_M_2_22, atol=5e-4)
    assert resp.result.mode_shape_rows == 12 and resp.result.mode_shape_cols == 12
    u = np.reshape(resp.result.mode_shapes_real, (12, 12)) + 1j * np.reshape(resp.result.mode_shapes_imag, (12, 12))
    np.testing.assert_allclose(np.linalg.norm(u, axis=0), 1.0)

    resp2 = ros.call(client, _request(Q8, tool_mass=4.0))
    assert resp2.success, resp2.message
    _check_table_2_5(resp2.result, "case2")

    polled = PolledClient(node, ComputeModalParameters, SRV)      # the caller's low-latency path
    try:
        assert polled.wait_for_service(10.0)
        resp3 = polled.call(_request(Q8), 10.0)
    finally:
        polled.destroy()
    assert resp3.success and resp3.result.frequencies_hz == resp.result.frequencies_hz
    assert resp3.result.mode_shapes_real == resp.result.mode_shapes_real

    configs = np.linspace(SCOMPI_Q1, SCOMPI_Q50, 50)
    f, z = [], []
    for tool in (None, 4.0):
        mresp = ros.call(map_client, _map_request(configs, tool_mass=tool), timeout=30.0)
        assert mresp.success, mresp.message
        assert len(mresp.results) == 50 and len(mresp.mode_order) == 50 * 12
        _check_table_2_5(mresp.results[7], "case1" if tool is None else "case2")
        f += [r.frequencies_hz for r in mresp.results]
        z += [r.damping_ratios for r in mresp.results]
    f, z = np.array(f), 100 * np.array(z)
    assert abs(f.min() - 5.13) <= 0.01 and abs(f.max() - 851.14) <= 0.05
    assert abs(z.min() - 1.25) <= 0.01 and abs(z.max() - 80.61) <= 0.01


@pytest.fixture
def server(ros):
    """In-process planar_2r server in the test's context (fast; same code as the executable)."""
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("robot", value="planar_2r"), Parameter("publish_rate_hz", value=20.0),
        Parameter("joint_state_timeout_s", value=0.3)])
    return ros.add_node(node)


NAMES = ["joint_1", "joint_2"]


@pytest.mark.parametrize("kwargs, field", [
    (dict(positions=[0.1]), "positions"),
    (dict(positions=[0.1, 0.2, 0.3]), "positions"),
    (dict(positions=[0.1, math.nan]), "NaN"),
    (dict(positions=[0.1, math.inf]), "NaN or inf"),
    (dict(positions=[]), "positions"),
    (dict(positions=[0.1, 0.2], joint_names=["joint_1", "elbow"]), "joint_names"),
    (dict(positions=[0.1, 0.2], joint_names=["joint_1", "joint_1"]), "joint_names"),
    (dict(positions=[0.1, 0.2], joint_names=["joint_1"]), "joint_names"),
    (dict(positions=[0.1, 0.2], kp=[0.0]), "kp"),
    (dict(positions=[0.1, 0.2], kp=[-5.0, 3600.0]), "kp"),
    (dict(positions=[0.1, 0.2], kd=[1.0, 2.0, 3.0]), "kd"),
    (dict(positions=[0.1, 0.2], kd=[math.nan]), "kd"),
    (dict(positions=[0.1, 0.2], tool_mass=-1.0), "tool.mass"),
    (dict(positions=[0.1, 0.2], wrench=[0, 0, math.inf, 0, 0, 0]), "wrench"),
])
def test_bad_requests_answered_and_node_keeps_serving(ros, server, kwargs, field):
    client = ros.node("bad_client").create_client(ComputeModalParameters, SRV)
    resp = ros.call(client, _request(**kwargs))
    assert not resp.success and field in resp.message, resp.message
    ok = ros.call(client, _request([0.3, 0.5]))
    assert ok.success and ok.result.num_modes == 4


@pytest.mark.parametrize("num, positions, field", [
    (2, [0.1, 0.2, 0.3], "positions"),
    (0, [], "num_configurations"),
    (1, [0.1, math.nan], "NaN"),
])
def test_bad_map_requests(ros, server, num, positions, field):
    client = ros.node("bad_map_client").create_client(ComputeModalMap, MAP_SRV)
    req = ComputeModalMap.Request()
    req.num_configurations, req.positions = num, positions
    resp = ros.call(client, req)
    assert not resp.success and field in resp.message, resp.message
    assert ros.call(client, _map_request([[0.1, 0.2], [0.2, 0.3]])).success


def test_named_joints_and_per_joint_gains(ros, server):
    client = ros.node("named_client").create_client(ComputeModalParameters, SRV)
    model = load_robot("planar_2r")
    resp = ros.call(client, _request([0.5, 0.3], joint_names=["joint_2", "joint_1"], kp=[3000.0, 4000.0]))
    assert resp.success, resp.message
    from flexmodal_ros.robot.model import with_overrides
    expect = modal_analysis(with_overrides(model, kp=[4000.0, 3000.0]), [0.3, 0.5])
    np.testing.assert_allclose(resp.result.positions, [0.3, 0.5])
    np.testing.assert_allclose(resp.result.frequencies_hz, expect.frequencies_hz, rtol=1e-12)


def test_unstable_gains_reported_stable_false(ros, server):
    client = ros.node("unstable_client").create_client(ComputeModalParameters, SRV)
    resp = ros.call(client, _request([math.pi / 2, 0.0], kp=[1.0], kd=[0.0]))
    assert resp.success, resp.message
    assert resp.result.stable is False
    assert len(resp.result.unstable_eigenvalues_real) >= 1
    assert min(resp.result.unstable_eigenvalues_real) >= 0 and max(resp.result.real_eigenvalues) > 0


def test_live_topic_only_while_joint_states_fresh(ros, server):
    node = ros.node("live_client")
    received = []
    node.create_subscription(ModalParameters, "/modal_analysis/modal_parameters", received.append, 10)
    pub = node.create_publisher(JointState, "/joint_states", 10)
    js = JointState()
    js.name = ["joint_2", "joint_1", "joint_1_motor", "joint_2_motor"]  # extra joints are ignored
    js.position = [0.4, 1.1, 1.1, 0.4]
    js.header.stamp.sec = 42

    deadline = time.monotonic() + 10.0
    while len(received) < 3:  # publish at ~20 Hz until three results came back
        assert time.monotonic() < deadline, "no ~/modal_parameters received"
        pub.publish(js)
        _spin_for(ros, 0.05)
    msg = received[-1]
    expect = modal_analysis(load_robot("planar_2r"), [1.1, 0.4])
    np.testing.assert_allclose(msg.positions, [1.1, 0.4])
    np.testing.assert_allclose(msg.frequencies_hz, expect.frequencies_hz, rtol=1e-12)
    assert msg.stamp.sec == 42 and list(msg.joint_names) == NAMES
    # Stop publishing: after the timeout (0.3 s) the node goes quiet.
    _spin_for(ros, 0.6)
    count = len(received)
    _spin_for(ros, 0.6)
    assert len(received) == count


def _spin_for(ros, seconds):
    end = time.monotonic() + seconds
    ros.spin_until(lambda: time.monotonic() > end, seconds + 1.0, "spin")


def test_unknown_robot_fails_at_start(ros_process):
    proc = ros_process(["modal_analysis_server", "--ros-args", "-p", "robot:=no_such_robot"])
    proc.popen.wait(30)
    assert proc.popen.returncode != 0 and "unknown robot" in proc.log()


def test_launch_file_references_exist():
    """launch/launch_ros are not installable here: check the file compiles and what it references."""
    text = (REPO / "launch" / "modal_analysis.launch.py").read_text()
    tree = ast.parse(text)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    assert 'executable="modal_analysis_server"' in text and 'package="flexmodal_ros"' in text
    assert "modal_analysis_server = flexmodal_ros.nodes.entry_points:modal_analysis_server" in (REPO / "setup.py").read_text()
    for robot in ("scompi", "planar_2r", "kuka_lwr4"):
        assert all(p.is_file() for p in robot_paths(robot))
    declared = {"publish_rate_hz", "joint_state_timeout_s"}       # robot/urdf_path/params_path:
    assert all(f'"{name}"' in text for name in declared) and "ROBOT_ARGUMENTS" in text   # test_ros_user.py


# ----------------------------------------------------------------------------- issue 11 items 13, 14

def test_marginal_stability_and_limit_warnings_in_the_service(ros):
    """Item 14: an undamped closed loop (Re λ ≈ 1e-15 from round-off) is "marginally stable",
    not unstable; a configuration outside the URDF limits is computed with a warning."""
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("params_path", value=str(REPO / "test" / "data" / "planar_2r_undamped.yaml"))])
    ros.add_node(node)
    client = ros.node("marginal_client").create_client(ComputeModalParameters, SRV)
    resp = ros.call(client, _request([0.3, -0.7]))
    assert resp.success and resp.result.stability == "marginally stable" and resp.result.stable is False
    assert np.abs(resp.result.damping_ratios).max() < 1e-12 and list(resp.result.warnings) == []
    outside = ros.call(client, _request([4.0, -0.7]))
    assert outside.success and len(outside.result.warnings) == 1
    assert "joint_1 = 4 outside [-3.14159, 3.14159] (URDF position limits)" in outside.result.warnings[0]
    damped = ros.call(client, _request([0.3, -0.7], kd=[60.0]))
    assert damped.result.stability == "stable" and damped.result.stable


def test_map_size_is_bounded_with_a_pointer_to_the_cli(ros):
    """Item 13: 50 000 configurations used to block the node for 13 s and leave 1.1 GB resident."""
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("robot", value="planar_2r"), Parameter("max_map_configurations", value=100)])
    ros.add_node(node)
    client = ros.node("big_map_client").create_client(ComputeModalMap, MAP_SRV)
    t0 = time.monotonic()
    resp = ros.call(client, _map_request(np.zeros((50_000, 2))))
    assert not resp.success and time.monotonic() - t0 < 5.0
    assert "num_configurations: 50000 is more than this node's max_map_configurations (100)" in resp.message
    assert "flexmodal sweep" in resp.message and "--store" in resp.message
    ok = ros.call(client, _map_request([[0.1, 0.2], [3.5, 0.3]]))
    assert ok.success and ok.results[1].warnings and not ok.results[0].warnings


# rclpy's own executor logs the handed-on exception with RcutilsLogger.warn, deprecated in Kilted
@pytest.mark.filterwarnings("ignore:Deprecated in favor of:DeprecationWarning")
def test_service_thread_answers_under_the_lock_and_hands_its_failure_to_the_executor(ros):
    """nodes/polled.py ServiceThread (the modal server's ~/compute_modal_parameters): a request is
    answered on the thread's own thread while it holds the lock (holding the lock elsewhere defers
    the answer), the name resolves in the node's namespace, an exception in the handler is raised
    by the executor's next spin, and stop() ends the thread and takes the service off the graph."""
    import threading
    from flexmodal_ros.nodes.polled import ServiceThread

    node = ros.node("flexmodal_test_service_thread")
    lock, threads = threading.Lock(), set()

    def handler(request, response):
        assert lock.locked()
        threads.add(threading.get_ident())
        if request.positions and math.isnan(request.positions[0]):
            raise RuntimeError("handler failed on purpose")
        response.success, response.message = True, f"{len(request.positions)} positions"
        return response

    served = ServiceThread(node, ComputeModalParameters, "~/echo", handler, lock)
    assert served.name == "/flexmodal_test_service_thread/echo"
    served.start()
    client = node.create_client(ComputeModalParameters, served.name)
    try:
        request = ComputeModalParameters.Request(positions=[1.0, 2.0])
        answer = ros.call(client, request)
        assert answer.success and answer.message == "2 positions"
        assert threads and threading.get_ident() not in threads
        with lock:
            future = client.call_async(request)
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:
                ros.executor.spin_once(timeout_sec=0.02)
            assert not future.done()
        ros.spin_until(future.done, 10.0, "answer deferred by the lock")
        client.call_async(ComputeModalParameters.Request(positions=[math.nan]))
        with pytest.raises(RuntimeError, match="handler failed on purpose"):
            ros.spin_until(lambda: False, 10.0, "the failure")
    finally:
        served.stop()
    assert not served._thread.is_alive()
    served.stop()                                                  # a second call does nothing
    ros.spin_until(lambda: not client.service_is_ready(), 10.0, "service gone from the graph")


def test_polled_client_gets_its_own_answer_and_times_out_with_the_service_named(ros):
    """nodes/polled.py PolledClient: a blocking call answered by a real service (the modal
    server's ServiceThread on another node), names resolved in the client node's namespace, a
    wrong request type or timeout refused, a timeout naming the service, the late answer to the
    call that timed out discarded (the next call gets its own), an absent service reported by
    wait_for_service."""
    import threading
    from flexmodal_ros.nodes.polled import ServiceThread

    server_node = ros.node("flexmodal_test_polled_server", namespace="/arm")
    client_node = ros.node("flexmodal_test_polled_client", namespace="/arm")
    lock = threading.Lock()

    def handler(request, response):
        response.success, response.message = True, f"{len(request.positions)} positions"
        return response

    served = ServiceThread(server_node, ComputeModalParameters, "echo", handler, lock)
    served.start()
    client = PolledClient(client_node, ComputeModalParameters, "echo")
    absent = PolledClient(client_node, ComputeModalParameters, "no_such_service")
    try:
        assert client.name == "/arm/echo" and client.wait_for_service(10.0)
        answer = client.call(ComputeModalParameters.Request(positions=[1.0, 2.0]), 5.0)
        assert answer.success and answer.message == "2 positions"
        with pytest.raises(TypeError, match="/arm/echo: request must be a ComputeModalParameters.Request"):
            client.call(ComputeModalMap.Request(), 5.0)
        for bad in (0.0, -1.0, math.nan, math.inf, "5"):
            with pytest.raises(ValueError, match="/arm/echo: timeout must be a positive number of seconds"):
                client.call(ComputeModalParameters.Request(), bad)
        with lock:                                      # the server cannot answer in time
            with pytest.raises(TimeoutError, match=r"/arm/echo: no response within 0.2 s"):
                client.call(ComputeModalParameters.Request(positions=[1.0]), 0.2)
        time.sleep(0.2)                                 # the late answer ("1 positions") arrives
        answer = client.call(ComputeModalParameters.Request(positions=[1.0, 2.0, 3.0]), 5.0)
        assert answer.message == "3 positions"
        assert not absent.wait_for_service(0.3)
        with pytest.raises(TimeoutError, match="/arm/no_such_service: no response within 0.1 s"):
            absent.call(ComputeModalParameters.Request(), 0.1)
    finally:
        client.destroy()
        absent.destroy()
        served.stop()



def test_polled_client_call_ends_when_the_context_shuts_down(ros_env):
    """A PolledClient call waiting for an answer ends with an error naming the shutdown as soon as
    its context is shut down (not after its timeout)."""
    import threading
    import rclpy
    from rclpy.context import Context
    from flexmodal_ros.nodes.polled import PolledClient

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("flexmodal_test_polled_shutdown", context=context)
    client = PolledClient(node, ComputeModalParameters, "nobody_answers")
    threading.Timer(0.3, rclpy.shutdown, kwargs={"context": context}).start()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="/nobody_answers: the ROS context was shut down during the call"):
        client.call(ComputeModalParameters.Request(), 30.0)
    assert time.monotonic() - start < 5.0

"""ROS 2 node `identification_server`: real process, real rclpy client, real service calls.

Oracle: thesis Table 3.2 case 1 (notes_003 §4): unrounded model data at the Table 3.1
configurations, modes 1 and 4 → k = (2000, 1600), d_f = (3.91, 2.21), d_fm = (2.04, 1.68), F* ≈ 0.
"""
import numpy as np

from flexmodal_interfaces.srv import IdentifyJointParameters
from flexmodal_ros.robot.registry import load_robot
from test_identification import TABLE_3_1_Q, model_modes

SRV = "/joint_identification/identify_joint_parameters"


def _request(data, **fields):
    req = IdentifyJointParameters.Request()
    req.num_configurations = len(data.q)
    req.positions = data.q.ravel().tolist()
    req.modes_per_configuration = np.bincount(data.config).tolist()
    req.frequencies_hz = data.frequency_hz.tolist()
    req.damping_ratios = data.damping_ratio.tolist()
    for key, value in fields.items():
        setattr(req, key, value)
    return req


def _start(ros_process):
    return ros_process(["identification_server", "--ros-args", "-p", "robot:=planar_2r",
                        "-p", "starts:=30"], wait_for_service=(SRV, IdentifyJointParameters))


def test_case_1_bad_request_and_keeps_serving(ros, ros_process):
    _start(ros_process)
    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q, (0, 3))
    client = ros.node("identification_client").create_client(IdentifyJointParameters, SRV)

    bad = ros.call(client, _request(data, damping_ratios=[1.2, *data.damping_ratio[1:].tolist()]))
    assert not bad.success and "damping_ratio" in bad.message
    short = ros.call(client, _request(data, positions=data.q.ravel().tolist()[:-1]))
    assert not short.success and "positions" in short.message

    res = ros.call(client, _request(data, seed=0, objective="determinant"), timeout=60.0)
    assert res.success, res.message
    assert list(res.joint_names) == ["joint_1", "joint_2"]
    np.testing.assert_allclose(res.stiffness, [2000.0, 1600.0], atol=0.1)
    np.testing.assert_allclose(res.link_damping, [3.91, 2.21], atol=0.01)
    np.testing.assert_allclose(res.motor_damping, [2.04, 1.68], atol=0.01)
    assert res.objective <= 1e-8
    assert len(res.residuals) == 60 and len(res.unknown_names) == 6
    assert len(res.standard_deviations) == 6 and res.jacobian_rank == 6

    only_k = ros.call(client, _request(data, unknowns=["k"], starts=3))   # node default objective
    assert only_k.success and list(only_k.unknown_names) == ["k/joint_1", "k/joint_2"]
    np.testing.assert_allclose(only_k.stiffness, [2000.0, 1600.0], rtol=1e-6)
    assert only_k.residual_noise_ratio < 1e-6

    # Item 6: measured modes paired with the wrong model modes cannot be fitted: no success.
    swapped = ros.call(client, _request(data, unknowns=["k"], starts=3, mode_indices=[1, 2] * 15))
    assert not swapped.success and swapped.residual_noise_ratio > 10
    assert "does not reproduce the data" in swapped.message


def test_long_run_does_not_block_other_requests(ros, ros_process):
    _start(ros_process)
    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q, (0, 3))
    client = ros.node("identification_client").create_client(IdentifyJointParameters, SRV)
    ros.spin_until(client.service_is_ready, 10.0, "service")
    long = client.call_async(_request(data.with_damping(data.damping_ratio + 0.01),
                                      objective="eigenvalue", starts=150))
    quick = client.call_async(_request(data, unknowns=["x"]))
    ros.spin_until(quick.done, 20.0, "quick answer")
    assert not long.done()                           # the long run is still going ...
    assert not quick.result().success and "unknowns" in quick.result().message
    ros.spin_until(long.done, 120.0, "long answer")  # ... and completes afterwards
    assert long.result().success


# ----------------------------------------------------------------------------- issue 11 items 4, 5, 6, 10

def _descendants(pid):
    """PIDs of every process below ``pid`` (from /proc)."""
    from pathlib import Path
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def test_bounded_sizes_time_limit_and_parameters_served_under_load(ros, ros_process):
    """Item 5: a request with starts = 2^32 - 1 fails with the documented maximum (the node used
    to allocate 192 GiB and die); five long requests run while the parameter service and new
    requests are answered at once; the server-side time limit ends them with a message."""
    import time
    from rcl_interfaces.srv import GetParameters

    ros_process(["identification_server", "--ros-args", "-p", "robot:=planar_2r", "-p", "time_limit_s:=4",
                 "-p", "k_max:=5000"],            # an integer for a double parameter (item 10)
                wait_for_service=(SRV, IdentifyJointParameters))
    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q, (0, 3))
    node = ros.node("identification_client")
    client = node.create_client(IdentifyJointParameters, SRV)
    params = node.create_client(GetParameters, "/joint_identification/get_parameters")

    huge = ros.call(client, _request(data, starts=4294967295))
    assert not huge.success and "starts: must be in 1..10000, got 4294967295" in huge.message
    many = ros.call(client, _request(data, num_configurations=4294967295))
    assert not many.success and "num_configurations: 4294967295 is more than the maximum of 1000" in many.message

    long = [client.call_async(_request(data, starts=10000)) for _ in range(5)]
    time.sleep(0.5)
    t0 = time.monotonic()
    answer = ros.call(params, GetParameters.Request(names=["time_limit_s", "workers"]))
    assert time.monotonic() - t0 < 2.0
    assert [v.double_value for v in answer.values[:1]] == [4.0] and answer.values[1].integer_value == 2
    quick = ros.call(client, _request(data, unknowns=["x"]))
    assert not quick.success and "unknowns" in quick.message and time.monotonic() - t0 < 3.0
    assert not any(f.done() for f in long)
    ros.spin_until(lambda: all(f.done() for f in long), 20.0, "the long requests to end")
    for f in long:
        assert not f.result().success and "time limit of 4 s reached" in f.result().message
    assert time.monotonic() - t0 < 8.0


def test_action_feedback_cancel_and_no_orphan_workers(ros, ros_process):
    """Item 5: ~/identify as an action (feedback, cancel); item 4: the worker processes end with
    the server even when it is killed (SIGKILL: no chance to clean up)."""
    import os
    import signal
    import time
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from flexmodal_interfaces.action import Identify

    server = ros_process(["identification_server", "--ros-args", "-p", "robot:=planar_2r"],
                         wait_for_service=(SRV, IdentifyJointParameters))
    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q, (0, 3))
    node = ros.node("identification_action_client")
    action = ActionClient(node, Identify, "/joint_identification/identify")
    ros.spin_until(lambda: action.server_is_ready(), 10.0, "action server")
    goal = Identify.Goal()
    for key in Identify.Goal.get_fields_and_field_types():
        setattr(goal, key, getattr(_request(data, starts=10000), key))
    feedback = []
    sent = action.send_goal_async(goal, feedback_callback=lambda msg: feedback.append(msg.feedback))
    ros.spin_until(sent.done, 10.0, "goal accepted")
    handle = sent.result()
    assert handle.accepted
    ros.spin_until(lambda: feedback, 20.0, "feedback")
    assert feedback[-1].starts_total == 10000 and 0 < feedback[-1].starts_done < 10000
    t0 = time.monotonic()
    ros.spin_until(handle.cancel_goal_async().done, 5.0, "cancel response")
    result = handle.get_result_async()
    ros.spin_until(result.done, 10.0, "result after cancel")
    assert time.monotonic() - t0 < 5.0              # a residual evaluation is ~1 ms: prompt even under load
    assert result.result().status == GoalStatus.STATUS_CANCELED
    assert not result.result().result.success and result.result().result.message == "cancelled"

    client = node.create_client(IdentifyJointParameters, SRV)
    ros.spin_until(client.service_is_ready, 5.0, "service")
    client.call_async(_request(data, starts=10000))
    ros.spin_until(lambda: len(_descendants(server.popen.pid)) >= 3, 10.0, "forkserver + 2 workers")
    time.sleep(1.0)                                 # the workers are computing
    workers = _descendants(server.popen.pid)
    os.kill(server.popen.pid, signal.SIGKILL)
    server.popen.wait()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in workers):
        time.sleep(0.1)
    alive = [p for p in workers if os.path.exists(f"/proc/{p}")]
    assert not alive, f"worker processes left running after the server was killed: {alive}"


def test_parameter_type_mismatch_is_one_line(ros_process):
    """Item 10: starts:=1e9 (a double for an integer parameter) ends the node with one line
    naming the parameter, not an InvalidParameterTypeException traceback."""
    proc = ros_process(["identification_server", "--ros-args", "-p", "robot:=planar_2r", "-p", "starts:=1e9"])
    assert proc.popen.wait(30) == 2
    log = proc.log()
    assert "parameter starts: must be in [1, 10000], got 1e+09" in log and "Traceback" not in log

"""feedforward_pd_controller and flexible_joint_simulator nodes: fail-safe behaviour with real rclpy
nodes and topics, the 1 kHz closed loop through ROS, and the bringup/launch wiring."""
import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.flexible_joint.linear_model import static_compensation
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.robot.registry import load_robot, robot_paths
from flexmodal_ros.simulation import THESIS_VELOCITY_SCALE, rest_state, thesis_trajectory

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


class Probe:
    """Test-side node: publishes joint states and trajectories, records commands and statuses."""

    def __init__(self, ros, model):
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray, String
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from trajectory_msgs.msg import JointTrajectory

        self.ros, self.model = ros, model
        self.node = ros.node("flexmodal_test_probe")
        self.commands, self.statuses = [], []
        self.command_sub = self.node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                                         lambda m: self.commands.append(np.array(m.data)), 100)
        self.node.create_subscription(String, "/feedforward_pd_controller/status",
                                      lambda m: self.statuses.append(m.data),
                                      QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.states = self.node.create_publisher(JointState, "/joint_states", 10)
        self.trajectories = self.node.create_publisher(JointTrajectory,
                                                       "/feedforward_pd_controller/reference_trajectory", 10)

    def connected(self, controller):
        """The probe and ``controller`` matched each other's joint states and commands, both ways
        (:func:`matched_both_ways`)."""
        return (self.states.get_subscription_count() > 0 and self.command_sub.get_publisher_count() > 0
                and matched_both_ways(controller))

    def publish_state(self, t, q, mutate=None):
        from flexmodal_ros.nodes.conversions import plant_joint_state
        x, hold = rest_state(self.model, q)
        n = self.model.n
        msg = plant_joint_state(self.model, t, x[:n], x[2 * n:3 * n], x[n:2 * n], x[3 * n:], hold, hold)
        if mutate:
            mutate(msg)
        self.states.publish(msg)

    def wait_status(self, pattern, timeout=10.0):
        self.ros.spin_until(lambda: any(re.search(pattern, s) for s in self.statuses), timeout,
                            f"status matching {pattern!r} (got {self.statuses})")

    def wait_commands(self, count, timeout=10.0):
        target = len(self.commands) + count
        self.ros.spin_until(lambda: len(self.commands) >= target, timeout, f"{count} commands")
        return self.commands[-1]


def matched_both_ways(controller):
    """True when a controller with native cycles has its C reader and writer matched with a
    joint-state publisher and a command subscriber. They are a DDS participant of their own
    (nodes/native_cycle.py), which matches another participant's endpoints on its own schedule: a
    publisher may see the controller subscribed before the controller's reader accepts its samples.
    Always true for the Python cycles (the test's own participant)."""
    native = controller.native_cycle
    return native is None or min(native.matched()) > 0


@pytest.fixture
def controller(ros, lwr):
    from rclpy.parameter import Parameter
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    node = FeedforwardPdController(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("state_timeout_s", value=0.2)])
    ros.add_node(node)
    probe = Probe(ros, lwr)
    ros.spin_until(lambda: probe.connected(node), 10.0, "controller subscribed")
    return node, probe


def test_hold_then_stale_static_torque(controller, lwr, ros):
    node, probe = controller
    q = np.full(lwr.n, 0.2)
    probe.publish_state(1.0, q)
    hold = probe.wait_commands(1)
    static = static_compensation(lwr, create_data(lwr), q) / lwr.W
    np.testing.assert_allclose(hold, static, atol=1e-8)          # at the equilibrium (2.3)
    probe.wait_status(r"^stale", timeout=5.0)                    # no more states → STALE
    stale = probe.wait_commands(1)
    np.testing.assert_allclose(stale, static, atol=1e-8)
    probe.publish_state(2.0, q + 0.01)                           # states again → HOLD there
    probe.wait_status(r"^hold: valid joint state at t=2")


def test_nan_and_unknown_joint_states_are_rejected(controller, lwr, ros):
    node, probe = controller
    q = np.zeros(lwr.n)

    def nan_velocity(msg):
        msg.velocity[3] = float("nan")

    def rename(msg):
        msg.name = [f"other_{i}" for i in range(len(msg.name))]

    probe.publish_state(0.5, q, nan_velocity)
    probe.wait_status(r"joint state rejected: joint_states\.velocity: NaN or inf for joint_4")
    assert node.ctrl.mode.value == "waiting" and not probe.commands   # nothing sent for it
    probe.publish_state(0.6, q, rename)            # another kind of message: not throttled
    probe.wait_status(r"joint state rejected: joint_states\.name: missing the position and velocity "
                      r"state interfaces of joint_1")
    assert node.ctrl.counters.rejected_samples == 2 and not probe.commands


@pytest.mark.parametrize("mutate, reason", [
    (lambda m: m.points.reverse(), r"time_from_start|times: must be strictly increasing"),
    (lambda m: m.points[1].positions.__setitem__(2, float("nan")), r"positions: contains NaN"),
    (lambda m: m.joint_names.__setitem__(0, "elbow"), r"joint_names: unknown joint\(s\) elbow"),
])
def test_bad_trajectories_are_rejected_and_hold_continues(controller, lwr, ros, mutate, reason):
    from flexmodal_ros.nodes.conversions import core_to_trajectory
    node, probe = controller
    times, positions = thesis_trajectory(lwr)
    probe.publish_state(1.0, positions[0])
    probe.wait_commands(1)
    msg = core_to_trajectory(lwr.joint_names, times + 0.5, positions)
    mutate(msg)
    probe.trajectories.publish(msg)
    probe.wait_status("trajectory rejected: .*" + reason)
    probe.publish_state(1.5, positions[0])
    probe.wait_commands(1)
    assert node.ctrl.mode.value == "hold" and node.ctrl.counters.rejected_trajectories == 1


def test_simulator_rejects_bad_commands_and_applies_wrenches(ros, lwr):
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger
    from flexmodal_interfaces.srv import ApplyWrench
    from flexmodal_ros.nodes.flexible_joint_simulator import FlexibleJointSimulator

    sim = FlexibleJointSimulator(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("real_time_factor", value=2.0)])
    ros.add_node(sim)
    probe = ros.node("flexmodal_test_sim_probe")
    states = []
    probe.create_subscription(JointState, "/joint_states", states.append, 100)
    commands = probe.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
    ros.spin_until(lambda: len(states) > 5, 10.0, "joint states")
    first = states[-1]
    assert list(first.name[:2]) == ["joint_1", "joint_2"] and first.name[7] == "joint_1_motor"
    assert len(first.position) == len(first.velocity) == len(first.effort) == 14
    ros.spin_until(lambda: commands.get_subscription_count() > 0, 10.0, "simulator subscribed")
    commands.publish(Float64MultiArray(data=[1.0, 2.0]))
    commands.publish(Float64MultiArray(data=[float("nan")] * lwr.n))
    stats = lambda: json.loads(ros.call(probe.create_client(Trigger, "/flexible_joint_simulator/statistics"),
                                        Trigger.Request()).message)
    ros.spin_until(lambda: stats()["commands_rejected"] == 2, 10.0, "two rejected commands")
    count = len(states)
    ros.spin_until(lambda: len(states) > count + 20, 10.0, "simulation keeps running")
    np.testing.assert_allclose(states[-1].position[:lwr.n], 0.0, atol=1e-6)   # held, not disturbed
    client = probe.create_client(ApplyWrench, "/flexible_joint_simulator/apply_wrench")
    bad = ros.call(client, ApplyWrench.Request(wrench=[0.0, 50.0, 0, 0, 0, 0], duration=0.0))
    assert not bad.success and "duration" in bad.message
    # Issue 11 item 13: 1e20 N for 1e20 s used to be accepted.
    huge = ros.call(client, ApplyWrench.Request(wrench=[1e20, 0, 0, 0, 0, 0], duration=0.05))
    assert not huge.success and "force magnitude 1e+20 N is above the limit of 10000 N" in huge.message
    long = ros.call(client, ApplyWrench.Request(wrench=[50.0, 0, 0, 0, 0, 0], duration=1e20))
    assert not long.success and "duration: 1e+20 s is longer than the limit of 60 s" in long.message
    ok = ros.call(client, ApplyWrench.Request(wrench=[50.0, 0.0, 0, 0, 0, 0], duration=0.05))  # moment about y
    assert ok.success
    count = len(states)
    ros.spin_until(lambda: len(states) > count + 100, 10.0, "response to the wrench")
    assert np.abs(np.array(states[-1].position[:lwr.n])).max() > 1e-4           # the robot moved


def test_a_state_the_middleware_refuses_is_dropped_and_counted_then_a_run_of_them_stops_visibly(ros, monkeypatch):
    """A publication of the state that fails (rmw's "cannot publish data" under a slow reliable
    reader; here: the publisher destroyed under the running loop) is a dropped sample: counted in
    ~/statistics, the simulation goes on; PUBLISH_FAILURES_MAX in a row stop it as a fault on
    ~/status and ~/statistics, and the node keeps serving (a CI run of test_simulator_faults saw the
    first such failure end the simulation)."""
    import rclpy.node
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger
    from flexmodal_ros.nodes import flexible_joint_simulator as module

    monkeypatch.setattr(module, "PUBLISH_FAILURES_MAX", 200)
    sim = module.FlexibleJointSimulator(context=ros.context, parameter_overrides=[
        Parameter("robot", value="planar_2r")])
    ros.add_node(sim)
    probe = ros.node("flexmodal_test_drop_probe")
    client = probe.create_client(Trigger, "/flexible_joint_simulator/statistics")
    stats = lambda: json.loads(ros.call(client, Trigger.Request()).message)
    ros.spin_until(lambda: stats()["steps"] > 50, 10.0, "simulation running")
    assert stats()["publish_failures"] == 0
    rclpy.node.Node.destroy_publisher(sim, sim.state_pub)
    ros.spin_until(lambda: stats()["publish_failures"] > 0, 10.0, "a failed publication counted")
    ros.spin_until(lambda: stats()["fault"] is not None, 10.0, "the run of failures ends the simulation")
    after = stats()
    assert "publications of the state in a row failed" in after["fault"], after["fault"]
    assert after["publish_failures"] >= 200 and after["steps"] >= 200     # it kept simulating until then


def test_simulator_re_anchors_its_schedule_after_a_stall(ros_process, ros):
    """A stalled simulator (SIGSTOP for 0.3 s) resumes at real time instead of integrating the
    missed periods back to back: the stall shows up as one schedule slip of about 0.3 s and the
    simulation time lags wall time by it."""
    import os
    import signal
    import time
    from std_srvs.srv import Trigger

    sim = ros_process(["flexible_joint_simulator", "--ros-args", "-p", "robot:=planar_2r"],
                      wait_for_service=("/flexible_joint_simulator/statistics", Trigger))
    client = ros.node("flexmodal_test_stall_probe").create_client(Trigger, "/flexible_joint_simulator/statistics")
    def stats():
        """(wall time before the call, after it, the statistics read in between)"""
        sent = time.monotonic()
        answer = json.loads(ros.call(client, Trigger.Request()).message)
        return sent, time.monotonic(), answer

    stats()                                    # first call: service discovery
    sent0, back0, before = stats()
    os.kill(sim.popen.pid, signal.SIGSTOP)
    time.sleep(0.3)
    os.kill(sim.popen.pid, signal.SIGCONT)
    time.sleep(0.4)
    sent1, back1, after = stats()
    assert after["schedule_slips"] - before["schedule_slips"] >= 1
    slipped = after["slipped_s"] - before["slipped_s"]
    assert 0.25 <= slipped <= 0.45
    # simulation time advanced by the wall time between the two readings less the slips (each
    # reading lies somewhere within its call; a step may be up to a period late without a slip)
    advanced = after["sim_time"] - before["sim_time"] + slipped
    assert sent1 - back0 - 0.01 <= advanced <= back1 - sent0 + 0.01, (sent1 - back0, advanced, back1 - sent0)


def test_ros_closed_loop_tracks_the_thesis_trajectory(ros_process, lwr):
    """Acceptance: simulator + controller nodes (separate processes), 1 kHz, thesis trajectory:
    max link tracking error ≤ 5e-3 rad; PD only is worse. The simulator runs in lockstep (never
    integrates on a stale command) so the assertion does not depend on the machine's load."""
    from flexmodal_ros.nodes.demo import SuiteClient
    from flexmodal_ros.nodes.bringup import _ros_value

    times, positions = thesis_trajectory(lwr)
    ros_process(["flexible_joint_simulator", "--ros-args", "-p", "robot:=kuka_lwr4", "-p",
                 f"initial_positions:={_ros_value(positions[0])}", "-p", "lockstep:=true", "-p",
                 "real_time_factor:=1.0"])
    # state_timeout_s 0.5: on a 2-core machine under a load of 12, the controller process was seen
    # starved of joint states for 59-330 ms, which the default 0.05 s turns into STALE aborts.
    ros_process(["feedforward_pd_controller", "--ros-args", "-p", "robot:=kuka_lwr4",
                 "-p", f"velocity_scale:={THESIS_VELOCITY_SCALE}", "-p", "state_timeout_s:=0.5"])
    client = SuiteClient(lwr, name="flexmodal_test_client")
    try:
        client.wait_for_status("hold", timeout=60.0)
        ff = client.track(times, positions, settle=0.2, timeout=120.0).summary()
        client.reset_simulation()
        client.set_feedforward(False)
        pd = client.track(times, positions, settle=0.2, timeout=120.0).summary()
    finally:
        client.close()
    assert ff["max_tracking_error_rad"] <= 5e-3, "\n".join(client.statuses)
    assert pd["max_tracking_error_rad"] >= 10 * ff["max_tracking_error_rad"]


def test_launch_file_and_bringup_reference_existing_things():
    import xml.etree.ElementTree as ET
    from flexmodal_ros.nodes.bringup import (DEFAULT_ROBOT, DISCOVERY_PROFILE_VARIABLE, NODES, discovery_profile,
                                             node_commands, ros_environment)

    launch = ROOT / "launch" / "bringup.launch.py"
    tree = ast.parse(launch.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "flexmodal_ros.nodes.bringup" for alias in node.names}
    assert {"NODES", "DEFAULT_ROBOT"} <= imported
    assert "generate_launch_description" in {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert {"ROBOT_ARGUMENTS", "launch_robot_parameters"} <= imported   # robot/urdf_path/params_path
    assert DEFAULT_ROBOT == "kuka_lwr4"
    # node executables enter through the light entry module (a Ctrl-C during their imports: exit 0)
    scripts = re.findall(r'"(\w+) = flexmodal_ros\.nodes\.entry_points:(\w+)"', (ROOT / "setup.py").read_text())
    declared = {name: function for name, function in scripts}
    for executable, _ in NODES:
        assert declared.get(executable) == executable
        assert (ROOT / "flexmodal_ros" / "nodes" / f"{executable}.py").is_file()
    for path in robot_paths(DEFAULT_ROBOT):
        assert path.is_file()
    for argv in node_commands(DEFAULT_ROBOT):
        assert Path(argv[0]).is_file() and "robot:=kuka_lwr4" in argv
    assert {"DISCOVERY_PROFILE_VARIABLE", "discovery_profile"} <= imported
    profile = discovery_profile()
    ns = "{http://www.eprosima.com}"
    participant = ET.parse(profile).getroot().find(f"{ns}profiles/{ns}participant")
    assert participant.get("is_default_profile") == "true"
    assert ros_environment({})[DISCOVERY_PROFILE_VARIABLE] == str(profile)
    assert ros_environment({DISCOVERY_PROFILE_VARIABLE: "mine.xml"})[DISCOVERY_PROFILE_VARIABLE] == "mine.xml"


class _Log:
    """Collects what a node would log (apply_realtime only needs info/warning)."""

    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))


def test_realtime_requests_fail_soft_and_bad_values_name_the_field(ros):
    from rclpy.parameter import Parameter
    from flexmodal_ros.core.errors import FlexmodalError
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController
    from flexmodal_ros.nodes.realtime import apply_realtime

    log = _Log()
    assert apply_realtime(log, 0, 4096) == "normal scheduling"     # no such CPU: warning, no error
    assert log.lines and log.lines[0][0] == "warning" and "cpu 4096" in log.lines[0][1]
    assert apply_realtime(_Log(), 0, -1) == "normal scheduling"
    with pytest.raises(FlexmodalError, match="realtime_priority"):
        FeedforwardPdController(context=ros.context, parameter_overrides=[
            Parameter("robot", value="kuka_lwr4"), Parameter("realtime_priority", value=150)])


def test_timing_window_keeps_the_last_samples():
    from flexmodal_ros.nodes.realtime import TimingWindow

    window = TimingWindow(4)
    assert window.distribution("x", 1.0)["x_p50"] is None
    for value in (100.0, 1.0, 2.0, 3.0, 4.0):                       # 100 falls out of the window
        window.append(value)
    stats = window.distribution("x", 2.5)
    assert len(window) == 4 and stats["x_max"] == 4.0 and stats["x_samples"] == 4 and stats["x_over"] == 2
    assert stats["x_p50"] == pytest.approx(2.5)
    window.clear()
    assert len(window) == 0
    window.extend(np.array([1.0, 2.0]))                              # the native cycle's compute times
    window.append(3.0)
    window.extend(np.array([4.0, 5.0, 6.0, 7.0, 8.0]))
    assert len(window) == 4 and sorted(window.values()) == [5.0, 6.0, 7.0, 8.0]


# ----------------------------------------------------------------------------- issue 11 items 7-10

def test_implausible_state_and_huge_or_fast_trajectories_are_rejected(controller, lwr, ros):
    """Item 7: a state with 1e308 is rejected (no command for it). Item 8: a 100 000-point
    trajectory is refused from its size, before deserialization (it used to hold the control
    thread for ~6 s); a 0.5 rad step in 2 ms exceeds the URDF speed limit."""
    import time
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from flexmodal_ros.nodes.conversions import core_to_trajectory

    from rclpy.parameter import Parameter

    node, probe = controller
    # Building and sending the 100 000-point message takes this process ~0.3 s without a joint
    # state: the controller's own thread would rightly go stale after the fixture's 0.2 s.
    assert node.set_parameters([Parameter("state_timeout_s", value=10.0)])[0].successful
    q = np.zeros(lwr.n)

    def huge(msg):
        msg.position[lwr.n] = 1e308                          # joint_1_motor

    probe.publish_state(0.5, q, huge)
    probe.wait_status(r"joint state rejected: joint_states\.position: joint_1_motor = 1e\+308 is implausible")
    assert node.ctrl.mode.value == "waiting" and not probe.commands
    probe.publish_state(1.0, q)
    probe.wait_commands(1)

    msg = JointTrajectory(joint_names=list(lwr.joint_names))
    point = JointTrajectoryPoint(positions=[0.0] * lwr.n)
    msg.points = [JointTrajectoryPoint(positions=point.positions, time_from_start=Duration(sec=k))
                  for k in range(100_000)]
    t0 = time.monotonic()
    probe.trajectories.publish(msg)
    probe.wait_status(r"trajectory rejected: points: \d+ bytes, more than max_trajectory_points \(1000\)")
    assert time.monotonic() - t0 < 5.0 and node.ctrl.counters.rejected_trajectories == 1
    probe.publish_state(1.1, q)
    probe.wait_commands(1)                                     # still controlling

    probe.trajectories.publish(core_to_trajectory(lwr.joint_names, [0.0, 0.002], [q, q + 0.5]))
    probe.wait_status(r"trajectory rejected: points: segment 0 -> 1 needs a peak speed of 615\.2/s on joint_1")
    assert node.ctrl.mode.value == "hold"


def test_frozen_and_backwards_stamps(controller, lwr, ros):
    """Item 9: a frozen stamp goes stale although states keep arriving; stamps going backwards at
    200 Hz for 1 s give a handful of status messages, not one per sample."""
    import time
    node, probe = controller
    q = np.full(lwr.n, 0.1)
    end = time.monotonic() + 0.6
    while time.monotonic() < end:                             # 0.6 s > state_timeout_s 0.2
        probe.publish_state(2.0, q)
        ros.executor.spin_once(timeout_sec=0.01)
    probe.wait_status(r"^stale: joint-state stamp frozen at t=2\.0000 s")
    probe.publish_state(2.5, q)
    probe.wait_status(r"^hold: valid joint state at t=2\.5")
    count, end, k = len(probe.statuses), time.monotonic() + 1.0, 0
    while time.monotonic() < end:
        probe.publish_state(3.0 + (0.01 if k % 2 else 0.0) + 0.0001 * k, q)     # every other one goes back
        ros.executor.spin_once(timeout_sec=0.005)
        k += 1
    ros.spin_until(lambda: node.ctrl.counters.cycles > 50, 5.0, "cycles")
    backwards = [s for s in probe.statuses[count:] if "went backwards" in s]
    assert 1 <= len(backwards) <= 4 and k > 100
    assert any("similar messages suppressed" in s for s in backwards) or len(backwards) == 1


def test_gains_and_thresholds_are_settable_parameters(ros, lwr):
    """Item 10: kp/kd and the fail-safe thresholds through the parameter services (what
    `ros2 param set` calls): applied between cycles, validated, type mismatches refused with a
    reason (gains the loop sampled at rate_hz cannot take among them); an integer for a double
    parameter is accepted at start-up and at run time."""
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from flexmodal_ros.flexible_joint.linear_model import setpoint_motor_torque
    from flexmodal_ros.robot.model import with_overrides
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    node = FeedforwardPdController(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("state_timeout_s", value=1)])   # int for a double
    ros.add_node(node)
    assert node.ctrl.state_timeout == 1.0
    probe = Probe(ros, lwr)
    client = probe.node.create_client(SetParameters, "/feedforward_pd_controller/set_parameters")

    def set_param(name, kind, **value):
        request = SetParameters.Request(parameters=[ParameterMsg(name=name, value=ParameterValue(type=kind, **value))])
        return ros.call(client, request).results[0]

    q = np.full(lwr.n, 0.2)
    ros.spin_until(lambda: probe.connected(node), 10.0, "controller subscribed")
    probe.publish_state(1.0, q)
    probe.wait_commands(1)
    ok = set_param("kp", ParameterType.PARAMETER_DOUBLE_ARRAY, double_array_value=[2500.0] * lwr.n)
    assert ok.successful, ok.reason
    probe.wait_status(r"parameters set: kp = \[2500\.0")
    x, _ = rest_state(lwr, q)
    n = lwr.n
    q_m, qd_m = x[n:2 * n], x[3 * n:]
    probe.publish_state(1.001, q)
    tau = probe.wait_commands(1)
    expected = setpoint_motor_torque(with_overrides(lwr, kp=2500.0), create_data(lwr), q, q_m, qd_m)
    np.testing.assert_allclose(tau, expected, atol=1e-8)
    for name, kind, value, reason in (
            ("kp", ParameterType.PARAMETER_DOUBLE_ARRAY, dict(double_array_value=[-1.0]), "kp: must be > 0"),
            ("kd", ParameterType.PARAMETER_STRING, dict(string_value="abc"), "expected a list of numbers"),
            ("kp", ParameterType.PARAMETER_DOUBLE_ARRAY, dict(double_array_value=[1.0]), "would be unstable"),
            # 3x the YAML's kd: the continuous loop is stable, the one the node runs (1 kHz, the
            # command one period late) is not
            ("kd", ParameterType.PARAMETER_DOUBLE_ARRAY, dict(double_array_value=[450.0]),
             "sampled at 1000 Hz with its command one period late at the measured position would be unstable"),
            ("velocity_scale", ParameterType.PARAMETER_DOUBLE, dict(double_value=-2.0), "velocity_scale: must be a positive number"),
            ("rate_hz", ParameterType.PARAMETER_DOUBLE, dict(double_value=500.0), "read-only")):
        refused = set_param(name, kind, **value)
        assert not refused.successful and reason in refused.reason, refused.reason
    assert set_param("max_trajectory_points", ParameterType.PARAMETER_DOUBLE, double_value=50.0).successful
    assert node.ctrl.limits.max_trajectory_points == 50
    assert set_param("start_tolerance", ParameterType.PARAMETER_INTEGER, integer_value=1).successful
    assert node.ctrl.start_tolerance == 1.0
    np.testing.assert_array_equal(node.ctrl.law.kp, 2500.0)


def test_integer_for_a_double_parameter_starts_the_modal_server(ros):
    """Item 10: publish_rate_hz:=10 (an integer) used to end in InvalidParameterTypeException."""
    from rclpy.parameter import Parameter
    from flexmodal_ros.core.errors import FlexmodalError
    from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer

    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("robot", value="planar_2r"), Parameter("publish_rate_hz", value=10)])
    ros.add_node(node)
    assert node.get_parameter("publish_rate_hz").value == 10.0
    with pytest.raises(FlexmodalError, match="parameter joint_state_timeout_s: expected a number"):
        ModalAnalysisServer(context=ros.context, parameter_overrides=[
            Parameter("robot", value="planar_2r"), Parameter("joint_state_timeout_s", value="fast")])


# rclpy's own executor logs the handed-on exception with RcutilsLogger.warn, deprecated in Kilted
@pytest.mark.filterwarnings("ignore:Deprecated in favor of:DeprecationWarning")
def test_subscription_thread_takes_messages_under_the_lock_and_hands_its_failure_to_the_executor(ros):
    """nodes/polled.py SubscriptionThread (the controller's cycle thread): every message reaches
    ``on_message`` on its own thread while holding the lock (holding it elsewhere defers the
    message), ``on_idle`` runs about every idle period, an exception in the thread is raised by
    the executor's next spin, and stop() ends the thread."""
    import threading
    import time
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import String
    from flexmodal_ros.nodes.polled import SubscriptionThread

    node = ros.node("flexmodal_test_polled")
    pub = node.create_publisher(String, "/flexmodal_test_polled", 10)
    lock, got, idles, threads = threading.Lock(), [], [], set()

    def on_message(raw):
        assert lock.locked()
        threads.add(threading.get_ident())
        got.append(deserialize_message(raw, String).data)
        if got[-1] == "fail":
            raise RuntimeError("handler failed on purpose")

    served = SubscriptionThread(node, String, "/flexmodal_test_polled", 10, on_message,
                                lambda: idles.append(time.monotonic()), 0.01, lock, raw=True)
    served.start()
    try:
        ros.spin_until(lambda: pub.get_subscription_count() > 0, 10.0, "subscribed")
        pub.publish(String(data="a"))
        ros.spin_until(lambda: got == ["a"], 10.0, "first message")
        assert threads and threading.get_ident() not in threads
        with lock:
            pub.publish(String(data="b"))
            time.sleep(0.2)
            assert got == ["a"]
        ros.spin_until(lambda: got == ["a", "b"], 10.0, "message deferred by the lock")
        count = len(idles)
        time.sleep(0.2)
        assert 5 <= len(idles) - count <= 25                  # ~20 idle calls at 100 Hz
        pub.publish(String(data="fail"))
        with pytest.raises(RuntimeError, match="handler failed on purpose"):
            ros.spin_until(lambda: False, 10.0, "the failure")
    finally:
        served.stop()
    assert not served._thread.is_alive()


def test_shaping_a_reference_does_not_stop_the_cycles(ros, lwr):
    """shaping:=zvd: the shaping of an accepted reference (tens of ms) runs outside the control
    thread's lock, so cycles go on meanwhile (counted across the controller's own shaping step).
    state_timeout_s 1 s: a loaded 2-core machine may starve the control thread for > 50 ms."""
    import threading
    import time
    from pathlib import Path
    from rclpy.parameter import Parameter
    from flexmodal_ros.nodes.conversions import core_to_trajectory
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController
    from flexmodal_ros.shaping.trajectory_file import read_waypoints

    node = ros.add_node(FeedforwardPdController(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("shaping", value="zvd"),
        Parameter("state_timeout_s", value=1.0)]))
    probe = Probe(ros, lwr)
    ros.spin_until(lambda: probe.connected(node), 10.0, "controller subscribed")
    path = read_waypoints(lwr, Path(__file__).resolve().parent.parent / "docs" / "shaping" / "kuka_lwr4_move.yaml")
    q0 = np.array(path.positions[0])
    during_shaping, shape = [], node.ctrl.shape_trajectory

    def cycles():                                 # under the lock: the C cycles are adopted
        with node.lock:
            return node.ctrl.counters.cycles

    def counted_shaping(checked):                 # the controller's own step, cycles counted around it
        before = cycles()
        shaped = shape(checked)
        during_shaping.append(cycles() - before)
        return shaped

    node.ctrl.shape_trajectory = counted_shaping
    stop = threading.Event()

    def states():                                 # ~500 Hz from a thread of their own
        k = 0
        while not stop.is_set():
            probe.publish_state(1.0 + 0.002 * k, q0)
            k += 1
            time.sleep(0.002)

    sender = threading.Thread(target=states)
    sender.start()
    try:
        probe.wait_status(r"^hold: valid joint state")
        probe.trajectories.publish(core_to_trajectory(lwr.joint_names, np.array(path.times),
                                                      np.array(path.positions)))
        probe.wait_status(r"^trajectory accepted: .*shaped zvd", timeout=60.0)
    finally:
        stop.set()
        sender.join()
    assert during_shaping and during_shaping[0] > 0


@pytest.mark.parametrize("link_state", ["absolute", "deflection"])
def test_native_cycles_give_the_python_cycles_commands_to_the_bit(ros, lwr, link_state):
    """native_cycle true (steady cycles in C: nodes/native_cycle.py) and false (every cycle in
    Python), side by side on the same joint states, one sample at a time: hold, two trajectories
    (crossing a segment boundary, finishing, aborted by time going backwards), a NaN sample, a
    frozen stamp, saturated cycles. Both publish the same commands to the bit, report the same
    statuses and count the same cycles, rejects and saturations; most cycles ran in C."""
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, String
    from trajectory_msgs.msg import JointTrajectory
    from flexmodal_ros.export.convention import StateConvention
    from flexmodal_ros.nodes.conversions import core_to_trajectory, plant_joint_state
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    probe = ros.node("native_cycle_probe")
    nodes, commands, statuses, trajectories = {}, {}, {}, {}
    for name, native in (("ctrl_c", True), ("ctrl_py", False)):
        nodes[name] = ros.add_node(FeedforwardPdController(
            context=ros.context, cli_args=["--ros-args", "-r", f"__node:={name}",
                                           "-r", f"/effort_controller/commands:=/{name}/commands"],
            parameter_overrides=[Parameter("robot", value="kuka_lwr4"), Parameter("native_cycle", value=native),
                                 Parameter("link_state", value=link_state), Parameter("state_timeout_s", value=5.0)]))
        commands[name], statuses[name] = [], []
        probe.create_subscription(Float64MultiArray, f"/{name}/commands",
                                  lambda m, out=commands[name]: out.append(np.array(m.data)), 1000)
        probe.create_subscription(String, f"/{name}/status", lambda m, out=statuses[name]: out.append(m.data),
                                  QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        trajectories[name] = probe.create_publisher(JointTrajectory, f"/{name}/reference_trajectory", 10)
    assert nodes["ctrl_c"].native_cycle is not None and nodes["ctrl_py"].native_cycle is None
    states = probe.create_publisher(JointState, "/joint_states", 10)
    ros.spin_until(lambda: states.get_subscription_count() == 2
                   and all(p.get_subscription_count() for p in trajectories.values())
                   and all(matched_both_ways(node) for node in nodes.values()), 10.0, "controllers subscribed")
    convention, n = StateConvention(lwr, link_state), lwr.n

    def processed(node):
        with node.lock:                       # the C cycles are adopted under the lock
            return node.ctrl.counters.cycles + node.ctrl.counters.rejected_samples

    def send(t, q, motor_offset=0.0, mutate=None):
        x, hold = rest_state(lwr, q)
        reported = convention.from_model(x[:n], x[2 * n:3 * n], x[n:2 * n] + motor_offset, x[3 * n:])
        msg = plant_joint_state(lwr, t, *reported, hold, hold)
        if mutate:
            mutate(msg)
        before = {name: processed(node) for name, node in nodes.items()}
        states.publish(msg)
        ros.spin_until(lambda: all(processed(node) > before[name] for name, node in nodes.items()), 10.0,
                       f"sample t={t} processed")
        # and its command received: the controllers' publishers keep the last 10 (COMMAND_QOS), so a
        # probe lagging more than 10 cycles behind can lose one (CI under load, 2026-11-28: the counts
        # never met)
        ros.spin_until(lambda: all(len(commands[name]) == cycles(node) for name, node in nodes.items()), 10.0,
                       f"commands of sample t={t} received")

    def cycles(node):
        with node.lock:
            return node.ctrl.counters.cycles

    def track(q_from, start, status_count):
        waypoints = np.array([q_from + 0.001, q_from + 0.002])
        for name, publisher in trajectories.items():
            publisher.publish(core_to_trajectory(lwr.joint_names, np.array([0.1, 0.2]), waypoints, start))
        ros.spin_until(lambda: all(sum(s.startswith("trajectory accepted") for s in out) == status_count
                                   for out in statuses.values()), 10.0, "trajectory accepted by both")

    def nan_velocity(msg):
        msg.velocity = [float("nan")] + list(msg.velocity[1:])

    q0 = np.array([0.1, 0.3, -0.1, -0.6, 0.1, 0.4, 0.1])
    t = 1.0
    for _ in range(30):
        send(t := t + 1e-3, q0)
    track(q0, t + 0.01, 1)                  # starts in 10 samples; segments [0, 0.1), [0.1, 0.2) s
    for k in range(240):                     # hold, tracking over both segments, finished, hold
        t += 1e-3
        if k == 50:
            send(t, q0, mutate=nan_velocity)         # rejected
        elif k == 60:
            send(t - 1e-3, q0)                       # frozen stamp
        elif 80 <= k < 83:
            send(t, q0, motor_offset=0.08)           # saturated
        else:
            send(t, q0)
    track(q0, t + 0.01, 2)
    for k in range(80):                      # aborted by time going backwards, then hold
        send(t := t + 1e-3 if k != 40 else t - 0.05, q0)
    stats = {name: node.statistics() for name, node in nodes.items()}
    ros.spin_until(lambda: all(len(commands[name]) == stats[name]["cycles"] for name in nodes), 10.0, "commands")
    c, py = stats["ctrl_c"], stats["ctrl_py"]
    assert len(commands["ctrl_c"]) == len(commands["ctrl_py"]) == c["cycles"]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(commands["ctrl_c"], commands["ctrl_py"]))
    assert statuses["ctrl_c"] == statuses["ctrl_py"]
    for key in ("mode", "cycles", "rejected_samples", "saturated_cycles", "saturated_per_joint"):
        assert c[key] == py[key], key
    assert c["rejected_samples"] == 1 and c["saturated_cycles"] == 3 and c["mode"] == "hold"
    assert any(s.startswith("hold: trajectory finished") for s in statuses["ctrl_c"])
    assert any("time went backwards" in s for s in statuses["ctrl_c"])
    assert c["compute_us_samples"] == c["cycles"] and py["native_cycles"] == 0
    assert c["native_cycles"] > 0.8 * c["cycles"], c


def test_native_cycle_refuses_what_it_cannot_run(ros, lwr, tmp_path, monkeypatch):
    """The C cycles need the compiled law and the flexmodal_native package installed (make setup,
    colcon build): BuildError naming what is missing (the node then warns and runs every cycle in
    Python)."""
    from flexmodal_ros.control import FailSafeController
    from flexmodal_ros.core.errors import BuildError
    from flexmodal_ros.nodes.conversions import JointStateReader, TorqueCommandWriter
    from flexmodal_ros.nodes.native_cycle import NativeCycleThread, native_library_path
    from flexmodal_ros.nodes.realtime import TimingWindow

    node = ros.node("native_cycle_refusals")

    def start(ctrl):
        return NativeCycleThread(node, "/joint_states", 1, "/commands", 1, ctrl, JointStateReader(lwr),
                                 TorqueCommandWriter(lwr.n), TimingWindow(10), print, print, 0.01, 0.001)

    with pytest.raises(BuildError, match="not compiled C"):
        start(FailSafeController(lwr, compiled=False))
    assert native_library_path().is_file()                   # make setup built and exposed it
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))
    with pytest.raises(BuildError, match="the flexmodal_native package is not installed .*make setup"):
        start(FailSafeController(lwr))


def test_native_cycle_checks_the_c_state_layout_field_by_field():
    """native_cycle.py's ctypes mirror of fm_cycle_t matches the library's table of field names,
    offsets and sizes; a mirror with two fields swapped, a field of another size, a missing or an
    extra field is refused with the field named, even when the total size is the same."""
    import ctypes
    from flexmodal_ros.core.errors import BuildError
    from flexmodal_ros.nodes.native_cycle import _CycleState, _library, check_layout, layout_table

    lib = _library()                                      # checked on load
    table, size = layout_table(lib), lib.fm_state_size()
    assert [row[0] for row in table] == [name for name, *_ in _CycleState._fields_]
    check_layout(_CycleState, table, size)
    fields = list(_CycleState._fields_)

    def mirror(changed):
        return type("Mirror", (ctypes.Structure,), {"_fields_": changed})

    k = [name for name, *_ in fields].index("previous_t")
    swapped = fields[:k] + [fields[k + 1], fields[k]] + fields[k + 2:]      # same size, same total
    with pytest.raises(BuildError, match=f"disagree on field {k}: previous_t in C, tracking in Python"):
        check_layout(mirror(swapped), table, size)
    resized = [(name, ctypes.c_int32) if name == "armed" else (name, kind) for name, kind in fields]
    with pytest.raises(BuildError, match="disagree on field armed: offset 0 / size 8 in C, offset 0 / size 4 in Py"):
        check_layout(mirror(resized), table, size)
    with pytest.raises(BuildError, match="field error only in C"):
        check_layout(mirror(fields[:-1]), table, size)
    with pytest.raises(BuildError, match="field spare only in Python"):
        check_layout(mirror(fields + [("spare", ctypes.c_int64)]), table, size)


def test_controller_without_a_c_compiler_starts_serves_and_stops_cleanly(ros_env, tmp_path, ros):
    """No C compiler (PATH without cc/gcc, CC naming a missing binary) and an empty cache: the
    generated law cannot be compiled, so the console-script controller warns once (reason and
    cost), runs the law on CasADi's virtual machine (every cycle in Python), answers ~/statistics,
    and ends with exit code 0 on SIGINT, without the AttributeError a half-built node used to raise
    at shutdown."""
    from conftest import RosProcess, _resolve_executable, _wait_until_served
    from std_srvs.srv import Trigger

    (tmp_path / "bin").mkdir()
    env = {**ros_env, "PATH": str(tmp_path / "bin"), "CC": str(tmp_path / "no_such_cc"),
           "FLEXMODAL_CACHE": str(tmp_path / "cache")}
    process = RosProcess([_resolve_executable("feedforward_pd_controller"), "--ros-args", "-p", "robot:=planar_2r"],
                         env, tmp_path / "controller.log")
    try:
        _wait_until_served(process, "/feedforward_pd_controller/statistics", Trigger, 60.0)
        client = ros.node("no_compiler_probe").create_client(Trigger, "/feedforward_pd_controller/statistics")
        stats = json.loads(ros.call(client, Trigger.Request()).message)
        assert stats["mode"] == "waiting" and stats["native_cycles"] == 0
    finally:
        code = process.stop()
    log = process.log(100)
    assert code == 0 and "Traceback" not in log, log
    assert log.count("control law: cannot compile it (no C compiler found") == 1, log
    assert "CasADi's virtual machine instead: ~25x the compiled law's time per cycle" in log
    assert "native_cycle: the C cycles are unavailable" not in log          # one warning, not two
    assert "steady cycles in Python" in log


def test_controller_with_a_read_only_home_runs_the_law_uncompiled(ros, lwr, monkeypatch, capfd):
    """A home where the compiled-law cache cannot be created (FLEXMODAL_CACHE unset): the warning
    names the directory and FLEXMODAL_CACHE, and the controller holds with the same commands as
    with the compiled law."""
    from rclpy.parameter import Parameter
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    monkeypatch.delenv("FLEXMODAL_CACHE", raising=False)
    monkeypatch.setenv("HOME", "/proc/1")              # procfs: no ~/.cache can be made, even as root
    node = ros.add_node(FeedforwardPdController(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("state_timeout_s", value=5.0)]))
    assert node.ctrl.law.compiled is None and node.native_cycle is None
    err = capfd.readouterr().err
    assert re.search(r"control law: cannot compile it \(cache directory /proc/1/\.cache/flexmodal_ros not writable "
                     r".*set FLEXMODAL_CACHE\); evaluating it with CasADi's virtual machine", err), err
    probe = Probe(ros, lwr)
    ros.spin_until(lambda: probe.connected(node), 10.0, "controller subscribed")
    q = np.full(lwr.n, 0.2)
    probe.publish_state(1.0, q)
    hold = probe.wait_commands(1)
    np.testing.assert_allclose(hold, static_compensation(lwr, create_data(lwr), q) / lwr.W, atol=1e-8)


def test_a_controller_that_fails_to_start_shuts_its_context_down_cleanly(ros_env):
    """rclpy (Kilted) destroys every node of a context at shutdown, also one whose constructor
    raised: destroy_node stops only what was made."""
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter
    from flexmodal_ros.core.errors import FlexmodalError
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    context = Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(FlexmodalError, match="realtime_priority") as failure:
            FeedforwardPdController(context=context, parameter_overrides=[
                Parameter("robot", value="kuka_lwr4"), Parameter("realtime_priority", value=150)])
        assert failure.traceback                  # keeps the half-built node alive until the shutdown
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("native", [True, False])
def test_a_destroyed_controller_leaves_no_joint_state_reader(ros, native):
    """destroy_node releases the joint-state reader of either cycle path (the native cycle's C
    endpoint, the Python path's helper node): a publisher of /joint_states sees it go. A release
    left to the thread's end once skipped the native endpoint, whose reader then stayed in the
    graph for the rest of the process."""
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    states = ros.node("reader_probe").create_publisher(JointState, "/joint_states", 10)
    node = FeedforwardPdController(context=ros.context, parameter_overrides=[
        Parameter("robot", value="planar_2r"), Parameter("native_cycle", value=native)])
    assert (node.native_cycle is not None) == native
    ros.spin_until(lambda: states.get_subscription_count() == 1, 10.0, "the controller's reader matched")
    node.destroy_node()
    ros.spin_until(lambda: states.get_subscription_count() == 0, 10.0, "the controller's reader gone")


def test_a_stop_after_the_context_shut_down_logs_on_the_console_not_through_rosout(ros_env):
    """nodes/polled.stop_logger: while the context is valid, the node's own logger; after its
    shutdown (Ctrl-C) a console logger ``<node>.stopping``, which no /rosout publisher serves, so
    a late "still busy" warning does not make rcl report "publisher's context is invalid"
    (test_shutdown.py's BAD_OUTPUT)."""
    import rclpy
    from rclpy.context import Context
    from flexmodal_ros.nodes.polled import stop_logger

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("stop_logger_probe", context=context)
    try:
        assert stop_logger(node.get_logger(), context) is node.get_logger()
    finally:
        rclpy.shutdown(context=context)
    late = stop_logger(node.get_logger(), context)
    assert late is not node.get_logger() and late.name == f"{node.get_logger().name}.stopping"
    assert late.warning("a late warning")
    node.destroy_node()

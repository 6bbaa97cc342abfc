"""mujoco_simulator node and sim time (issue 16): real nodes, real rclpy, the exported robot on
MuJoCo; the controller and the modal server in the ``deflection`` convention; use_sim_time with
both simulators."""
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.export.convention import StateConvention
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.simulation import THESIS_VELOCITY_SCALE, run_closed_loop, thesis_trajectory


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


def _ros_list(values):
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def test_mujoco_simulator_publishes_the_exported_convention_and_rejects_bad_commands(ros, lwr):
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger
    from flexmodal_interfaces.srv import ApplyWrench
    from flexmodal_ros.nodes.mujoco_simulator import MujocoSimulatorNode

    q0 = np.full(lwr.n, 0.3)
    sim = MujocoSimulatorNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("real_time_factor", value=2.0),
        Parameter("initial_positions", value=q0.tolist())])
    ros.add_node(sim)
    probe = ros.node("flexmodal_test_mujoco_probe")
    states, clocks = [], []
    probe.create_subscription(JointState, "/joint_states", states.append, 100)
    probe.create_subscription(Clock, "/clock", clocks.append, 100)
    commands = probe.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
    ros.spin_until(lambda: len(states) > 5 and clocks, 10.0, "joint states and clock")
    first = states[-1]
    assert list(first.name) == list(lwr.joint_names) + [f"{j}_motor" for j in lwr.joint_names]
    conv = StateConvention(lwr, "deflection")
    link, motor = np.array(first.position[:lwr.n]), np.array(first.position[lwr.n:])
    np.testing.assert_allclose(conv.positions_to_model(link, motor)[0], q0, atol=1e-9)   # q = s_e + s_m
    assert np.abs(link).max() > 1e-3                            # the elastic joints report deflections
    ros.spin_until(lambda: commands.get_subscription_count() > 0, 10.0, "simulator subscribed")
    commands.publish(Float64MultiArray(data=[1.0, 2.0]))
    commands.publish(Float64MultiArray(data=[float("nan")] * lwr.n))
    stats = lambda: json.loads(ros.call(probe.create_client(Trigger, "/mujoco_simulator/statistics"),
                                        Trigger.Request()).message)
    ros.spin_until(lambda: stats()["commands_rejected"] == 2, 10.0, "two rejected commands")
    count = len(states)
    ros.spin_until(lambda: len(states) > count + 20, 10.0, "simulation keeps running")
    last = states[-1]
    np.testing.assert_allclose(last.position, first.position, atol=1e-8)     # held, never NaN
    client = probe.create_client(ApplyWrench, "/mujoco_simulator/apply_wrench")
    bad = ros.call(client, ApplyWrench.Request(wrench=[0.0, 50.0, 0, 0, 0, 0], duration=0.0))
    assert not bad.success and "duration" in bad.message
    bad = ros.call(client, ApplyWrench.Request(wrench=[0.0, float("nan"), 0, 0, 0, 0], duration=0.01))
    assert not bad.success and "NaN" in bad.message
    assert ros.call(client, ApplyWrench.Request(wrench=[0.0, 50.0, 0, 0, 0, 0], duration=0.006)).success
    count = len(states)
    ros.spin_until(lambda: len(states) > count + 100, 10.0, "response to the wrench")
    assert np.abs(np.array(states[-1].position) - np.array(first.position)).max() > 1e-5
    assert clocks[-1].clock.sec + 1e-9 * clocks[-1].clock.nanosec > 0.1


def test_modal_server_reads_exported_states_in_sim_time(ros, lwr):
    """The modal server with link_state deflection and use_sim_time: its live topic carries the link
    configuration q = s_e + s_m of the MuJoCo robot, stamped in simulation time."""
    from rclpy.parameter import Parameter
    from flexmodal_interfaces.msg import ModalParameters
    from flexmodal_ros.flexible_joint.ama import modal_analysis
    from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
    from flexmodal_ros.nodes.mujoco_simulator import MujocoSimulatorNode

    q0 = np.linspace(-0.4, 0.4, lwr.n)
    ros.add_node(MujocoSimulatorNode(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("initial_positions", value=q0.tolist())]))
    ros.add_node(ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("robot", value="kuka_lwr4"), Parameter("link_state", value="deflection"),
        Parameter("use_sim_time", value=True), Parameter("publish_rate_hz", value=20.0)]))
    received = []
    ros.node("flexmodal_test_modal_probe").create_subscription(
        ModalParameters, "/modal_analysis/modal_parameters", received.append, 10)
    ros.spin_until(lambda: len(received) >= 2, 20.0, "live modal parameters")
    msg = received[-1]
    np.testing.assert_allclose(msg.positions, q0, atol=1e-8)
    np.testing.assert_allclose(msg.frequencies_hz, modal_analysis(lwr, q0).frequencies_hz, rtol=1e-8)
    stamp = msg.stamp.sec + 1e-9 * msg.stamp.nanosec
    assert 0.0 < stamp < 100.0                                  # simulation time, not the epoch


@pytest.mark.parametrize("engine", ["builtin", "mujoco"])
def test_sim_time_watchdog_stops_with_the_simulation(ros, ros_process, lwr, engine):
    """use_sim_time with both simulators: while the simulator process is stopped (SIGSTOP 0.4 s),
    simulation time stands still, so the sim-time controller does not declare its states stale;
    the steady-clock controller (real-robot case) does (state_timeout 0.05 s)."""
    from rclpy.parameter import Parameter
    from std_msgs.msg import String
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController

    simulator = {"builtin": "flexible_joint_simulator", "mujoco": "mujoco_simulator"}[engine]
    link_state = "deflection" if engine == "mujoco" else "absolute"
    sim = ros_process([simulator, "--ros-args", "-p", "robot:=kuka_lwr4", "-p",
                       f"initial_positions:={_ros_list(np.full(lwr.n, 0.2))}"])
    statuses = {"sim": [], "steady": []}
    for key, use_sim_time in (("sim", True), ("steady", False)):
        node = FeedforwardPdController(
            context=ros.context, namespace=key, parameter_overrides=[
                Parameter("robot", value="kuka_lwr4"), Parameter("state_timeout_s", value=0.05),
                Parameter("use_sim_time", value=use_sim_time), Parameter("link_state", value=link_state)],
            cli_args=["--ros-args", "-r", f"/effort_controller/commands:=/{key}/ignored_commands"])
        ros.add_node(node)
        ros.node(f"flexmodal_test_{key}_status").create_subscription(
            String, f"/{key}/feedforward_pd_controller/status", lambda m, k=key: statuses[k].append(m.data),
            QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    hold = lambda key: any(s.startswith("hold") for s in statuses[key])
    ros.spin_until(lambda: hold("sim") and hold("steady"), 30.0, "both controllers hold")
    assert sim.running()
    before = {key: len(values) for key, values in statuses.items()}
    os.kill(sim.popen.pid, signal.SIGSTOP)
    try:
        end = time.monotonic() + 0.4
        ros.spin_until(lambda: time.monotonic() > end, 5.0, "0.4 s with the simulator stopped")
    finally:
        os.kill(sim.popen.pid, signal.SIGCONT)
    stale = lambda key: [s for s in statuses[key][before[key]:] if s.startswith("stale")]
    ros.spin_until(lambda: stale("steady"), 5.0, "steady-clock STALE")
    end = time.monotonic() + 0.3
    ros.spin_until(lambda: time.monotonic() > end, 5.0, "simulation running again")
    assert not stale("sim"), statuses["sim"]


@pytest.mark.slow
def test_ros_controller_on_mujoco_tracks_within_twice_the_builtin(ros_process, lwr):
    """Acceptance: mujoco_simulator + feedforward_pd_controller (separate processes, sim time,
    link_state deflection, lockstep), thesis trajectory on kuka_lwr4: max link error within 2x the
    built-in simulator's (same lockstep loop, offline) and >= 100x better than PD only."""
    from flexmodal_ros.nodes.demo import SuiteClient

    times, positions = thesis_trajectory(lwr)
    ros_process(["mujoco_simulator", "--ros-args", "-p", "robot:=kuka_lwr4", "-p",
                 f"initial_positions:={_ros_list(positions[0])}", "-p", "lockstep:=true"])
    ros_process(["feedforward_pd_controller", "--ros-args", "-p", "robot:=kuka_lwr4", "-p",
                 "link_state:=deflection", "-p", "use_sim_time:=true", "-p",
                 f"velocity_scale:={THESIS_VELOCITY_SCALE}"])   # the thesis motion exceeds the URDF speeds
    client = SuiteClient(lwr, name="flexmodal_test_mujoco_client", simulator="/mujoco_simulator",
                         link_state="deflection")
    try:
        client.wait_for_status("hold", timeout=60.0)
        ff = client.track(times, positions, settle=0.2, timeout=180.0).summary()
        client.reset_simulation()
        client.set_feedforward(False)
        pd = client.track(times, positions, settle=0.2, timeout=180.0).summary()
    finally:
        client.close()
    builtin = run_closed_loop(lwr, times, positions, 3.2).summary()      # lockstep: no command delay
    assert ff["max_tracking_error_rad"] <= 2 * builtin["max_tracking_error_rad"]
    assert pd["max_tracking_error_rad"] >= 100 * ff["max_tracking_error_rad"]


LAUNCH = Path(__file__).resolve().parent.parent / "launch"


def test_launch_files_reference_what_exists():
    """gazebo.launch.py / mujoco.launch.py: the shared tables they import exist, the executables they
    start are console scripts, the Gazebo wiring names the ROS packages and controllers it needs."""
    import ast
    import re
    from flexmodal_ros.nodes import bringup

    scripts = set(re.findall(r'"(\w+) = flexmodal_ros\.nodes\.\w+:main"',
                             (LAUNCH.parent / "setup.py").read_text()))
    for name in ("gazebo.launch.py", "mujoco.launch.py"):
        tree = ast.parse((LAUNCH / name).read_text())
        assert "generate_launch_description" in {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "flexmodal_ros.nodes.bringup" for alias in node.names}
        assert imported and all(hasattr(bringup, item) for item in imported)
    assert {executable for executable, _ in bringup.MUJOCO_NODES} <= scripts
    text = (LAUNCH / "gazebo.launch.py").read_text()
    for needed in ('"ros_gz_sim"', '"create"', '"ros_gz_bridge"', "/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock",
                   '"robot_state_publisher"', '"spawner"', '"joint_state_broadcaster"', '"effort_controller"',
                   '"feedforward_pd_controller"'):
        assert needed in text
    assert bringup.EXPORTED_ROBOT_PARAMS["feedforward_pd_controller"] == {"link_state": "deflection",
                                                                         "use_sim_time": True}


def test_gazebo_launch_exports_the_robot_at_start_up(tmp_path):
    """With ROS 2's launch installed (a ROS workspace; not the CI machine): the launch-time export
    writes the URDF, controllers YAML and world, and starts the expected executables."""
    pytest.importorskip("launch_ros")
    import importlib.util
    from launch import LaunchContext
    from launch_ros.actions import Node

    spec = importlib.util.spec_from_file_location("gazebo_launch", LAUNCH / "gazebo.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    context = LaunchContext()
    for name, (default, _) in module.ARGUMENTS.items():
        context.launch_configurations[name] = default
    context.launch_configurations.update(robot="scompi", output_dir=str(tmp_path))
    actions = module.export_and_start(context)
    assert {p.name for p in tmp_path.iterdir()} == {"scompi.urdf", "scompi_controllers.yaml", "scompi_world.sdf"}
    executables = [a.node_executable for a in actions if isinstance(a, Node)]
    assert executables == ["robot_state_publisher", "create", "parameter_bridge", "spawner", "spawner",
                           "feedforward_pd_controller", "modal_analysis_server"]

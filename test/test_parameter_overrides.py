"""A parameter given to a node that it does not have is an error naming it (nodes/parameter_overrides.py):
rclpy alone keeps such an override and the node runs on its default."""
import subprocess
import sys
import time

from flexmodal_ros.nodes.parameter_overrides import unknown_parameters


def _node(ros, namespace="/arm"):
    node = ros.node("flexible_joint_simulator", namespace=namespace)
    node.declare_parameter("rate_hz", 1000.0)
    node.declare_parameter("initial_positions", [0.0, 0.0])
    node.declare_parameter("realtime.priority", 0)
    return node


def test_overrides_meant_for_the_node_are_checked(ros, tmp_path):
    node = _node(ros)
    params = tmp_path / "params.yaml"
    params.write_text(
        "/**:\n  ros__parameters:\n    only_for_the_controller: 1.0\n    rate_hz: 500.0\n"      # every node: not checked
        "/arm/flexible_joint_simulator:\n  ros__parameters:\n    initial_positon: [0.1, 0.2]\n"
        "    realtime:\n      priority: 10\n      prority: 10\n"
        "/**/flexible_joint_simulator:\n  ros__parameters:\n    rate_hzz: 1.0\n"
        "/other/flexible_joint_simulator:\n  ros__parameters:\n    not_this_node: 1.0\n"
        "feedforward_pd_controller:\n  ros__parameters:\n    kp: [1.0]\n")
    argv = ["flexible_joint_simulator", "--ros-args", "-p", "rate_hz:=10", "-p", "gain:=2",
            "-p", "flexible_joint_simulator:initial_positions:=[0.0, 0.0]",
            "-p", "flexible_joint_simulator:rate:=3", "-p", "feedforward_pd_controller:kp:=[1.0]",
            "--params-file", str(params), "--", "-p", "not_a_ros_argument:=1"]
    unknown = unknown_parameters(node, argv)
    assert unknown == [
        "parameter 'gain' (-p gain:=2) is not a parameter of this node",
        "parameter 'rate' (-p flexible_joint_simulator:rate:=3) is not a parameter of this node (did you mean 'rate_hz'?)",
        f"parameter 'initial_positon' ({params}, section '/arm/flexible_joint_simulator') is not a parameter of "
        "this node (did you mean 'initial_positions'?)",
        f"parameter 'realtime.prority' ({params}, section '/arm/flexible_joint_simulator') is not a parameter of "
        "this node (did you mean 'realtime.priority'?)",
        f"parameter 'rate_hzz' ({params}, section '/**/flexible_joint_simulator') is not a parameter of this node "
        "(did you mean 'rate_hz'?)",
    ], unknown


def test_declared_and_rclpy_parameters_pass(ros):
    node = _node(ros, namespace="/")
    argv = ["x", "--ros-args", "-p", "rate_hz:=10", "-p", "use_sim_time:=true", "-r", "__ns:=/arm",
            "--log-level", "warn", "--ros-args", "-p", "realtime.priority:=3"]
    assert unknown_parameters(node, argv) == []
    assert unknown_parameters(node, ["x", "-p", "gain:=2"]) == []          # not ROS arguments


def test_a_node_given_an_unknown_parameter_exits_with_one_line(ros_env):
    """The real simulator process: exit code 2 and the line (the node is built, then ended before it spins)."""
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "flexmodal_ros.nodes.flexible_joint_simulator", "--ros-args",
                          "-p", "robot:=planar_2r", "-p", "rate_hzz:=500.0"],
                         env=ros_env, capture_output=True, text=True, timeout=120)
    lines = [line for line in run.stdout.splitlines() if "error" in line]
    assert run.returncode == 2, run.stdout + run.stderr
    assert lines == ["flexible_joint_simulator: error: parameter 'rate_hzz' (-p rate_hzz:=500.0) is not a parameter "
                     "of this node (did you mean 'rate_hz'?)"], run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert time.monotonic() - start < 60

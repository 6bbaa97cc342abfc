"""Start the ``modal_analysis`` node (flexmodal_ros modal_analysis_server) for one robot.

    ros2 launch flexmodal_ros modal_analysis.launch.py                  # scompi (bundled)
    ros2 launch flexmodal_ros modal_analysis.launch.py robot:=kuka_lwr4
    ros2 launch flexmodal_ros modal_analysis.launch.py params_path:=/path/robot.yaml \
        [urdf_path:=/path/robot.urdf]

Arguments: ``robot`` / ``urdf_path`` / ``params_path`` (empty default = not given; see
``flexmodal_ros.nodes.bringup.launch_robot_parameters``), ``publish_rate_hz``,
``joint_state_timeout_s``, ``modal_method`` (exact | polynomial), ``expansion_order``,
``expansion_tolerance``, ``trust_radius``, ``method`` (mcs | rcs | ucs, closed-chain robots such as
parallelogram_arm), ``namespace`` (empty = none: the node and its relative ``joint_states`` go
into ``/<namespace>``).
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch_ros.actions import Node

from flexmodal_ros.core.errors import ConfigError
from flexmodal_ros.nodes.bringup import (DISCOVERY_PROFILE_VARIABLE, ROBOT_ARGUMENTS, check_namespace,
                                         discovery_profile, launch_robot_parameters)

DEFAULT_ROBOT = "scompi"
ARGUMENTS = {
    "publish_rate_hz": ("10.0", "rate of ~/modal_parameters while joint states are fresh [Hz]", float),
    "joint_state_timeout_s": ("0.5", "joint states older than this are stale [s]", float),
    "modal_method": ("exact", "live ~/modal_parameters: exact AMA or polynomial fast path", str),
    "expansion_order": ("3", "Taylor order of the polynomial fast path", int),
    "expansion_tolerance": ("0.002", "relative eigenvalue error estimate that triggers a re-expansion", float),
    "trust_radius": ("0.0", "max |q - q0| of an expansion [rad or m]; 0 = automatic", float),
    "method": ("", "constrained linearization mcs|rcs|ucs (closed-chain robots; empty: mcs for "
               "them, the flexible-joint AMA otherwise)", str),
}


def _node(context):
    values = context.launch_configurations
    model = launch_robot_parameters(**{name: values[name] for name in ROBOT_ARGUMENTS},
                                    default_robot=DEFAULT_ROBOT)
    settings = {name: _typed(name, values[name], kind) for name, (_, _, kind) in ARGUMENTS.items()}
    namespace = check_namespace(values["namespace"])
    return [Node(package="flexmodal_ros", executable="modal_analysis_server", name="modal_analysis",
                 namespace=namespace or None, output="screen", parameters=[{**model, **settings}])]


def _typed(name, text, kind):
    try:
        return kind(text)
    except ValueError:
        what = {float: "a number", int: "an integer"}[kind]
        raise ConfigError(f"{name}: expected {what}, got {text!r}") from None


def generate_launch_description():
    profile = os.environ.get(DISCOVERY_PROFILE_VARIABLE) or str(discovery_profile())
    declared = [DeclareLaunchArgument(name, default_value="", description=text)
                for name, text in ROBOT_ARGUMENTS.items()]
    declared += [DeclareLaunchArgument(name, default_value=default, description=text)
                 for name, (default, text, _) in ARGUMENTS.items()]
    declared.append(DeclareLaunchArgument("namespace", default_value="", description="namespace of the node "
                                          "and its relative topics (empty: none)"))
    return LaunchDescription([*declared, SetEnvironmentVariable(DISCOVERY_PROFILE_VARIABLE, profile),
                              OpaqueFunction(function=_node)])

"""The suite on the exported robot in MuJoCo: mujoco_simulator (headless), the feedforward+PD
controller and the modal-analysis server reading /joint_states in the exported ``deflection``
convention on simulation time (/clock of the simulator), and the identification server.

    ros2 launch flexmodal_ros mujoco.launch.py robot:=kuka_lwr4 [model_path:=robot.xml] [lockstep:=true]

``model_path``: an MJCF from ``flexmodal export --format mjcf`` (empty: exported at start-up);
``integration_rate_hz``: MuJoCo steps per second; ``namespace`` (empty = none: the nodes, their
relative topics and the robot's clock ``/<namespace>/clock`` go into ``/<namespace>``). Without ROS 2's launch tools:
``flexmodal_bringup`` does not cover this; ``python -m flexmodal_ros.nodes.demo --engine mujoco`` runs it.
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from flexmodal_ros.nodes.bringup import (DEFAULT_ROBOT, DISCOVERY_PROFILE_VARIABLE, MUJOCO_NODES, EXPORTED_ROBOT_PARAMS,
                                         check_namespace, discovery_profile)

SIMULATOR_ARGUMENTS = {
    "model_path": ("", "exported MJCF (empty: export the robot at start-up)", str),
    "lockstep": ("false", "simulator waits for each command", bool),
    "integration_rate_hz": ("2000.0", "MuJoCo steps per second", float),
    "real_time_factor": ("1.0", "1 = real time, 0 = as fast as possible", float),
}


def _nodes(context):
    robot = LaunchConfiguration("robot")
    namespace = check_namespace(context.launch_configurations["namespace"])
    remappings = [("/clock", f"{namespace}/clock")] if namespace else []
    simulator_params = {name: ParameterValue(LaunchConfiguration(name), value_type=kind)
                        for name, (_, _, kind) in SIMULATOR_ARGUMENTS.items()}
    nodes = []
    for executable, name in MUJOCO_NODES:
        params = {"robot": robot, **EXPORTED_ROBOT_PARAMS.get(name, {})}
        if executable == "mujoco_simulator":
            params.update(simulator_params)
        # No name=: launch would remap __node for every node of the process, helper nodes included
        # (nodes/polled.py); the executables name their nodes themselves.
        nodes.append(Node(package="flexmodal_ros", executable=executable, output="screen", parameters=[params],
                          namespace=namespace or None, remappings=remappings))
    return nodes


def generate_launch_description():
    profile = os.environ.get(DISCOVERY_PROFILE_VARIABLE) or str(discovery_profile())
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value=DEFAULT_ROBOT,
                              description="bundled robot: scompi, planar_2r, kuka_lwr4"),
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace of the nodes, their topics and the robot's clock (empty: none)"),
        *[DeclareLaunchArgument(name, default_value=default, description=text)
          for name, (default, text, _) in SIMULATOR_ARGUMENTS.items()],
        SetEnvironmentVariable(DISCOVERY_PROFILE_VARIABLE, profile),
        OpaqueFunction(function=_nodes),
    ])

"""Bring up flexmodal_ros for one robot: simulator, feedforward+PD controller, modal analysis and
identification servers.

    ros2 launch flexmodal_ros bringup.launch.py                         # kuka_lwr4 (bundled)
    ros2 launch flexmodal_ros bringup.launch.py robot:=scompi
    ros2 launch flexmodal_ros bringup.launch.py params_path:=/path/robot.yaml [urdf_path:=/path/robot.urdf]
    ros2 launch flexmodal_ros bringup.launch.py calibration:=true          # + the calibration node

Arguments ``robot`` / ``urdf_path`` / ``params_path`` (empty default = not given; see
``flexmodal_ros.nodes.bringup.launch_robot_parameters``). Without ROS 2's launch tools,
``flexmodal_bringup --robot kuka_lwr4`` starts the same nodes (flexmodal_ros/nodes/bringup.py holds
the shared node table NODES).
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch_ros.actions import Node

from flexmodal_ros.nodes.bringup import (DEFAULT_ROBOT, DISCOVERY_PROFILE_VARIABLE, NODES, OPTIONAL_ARGUMENTS,
                                         ROBOT_ARGUMENTS, discovery_profile, launch_robot_parameters, optional_nodes)


def _nodes(context):
    given = {name: context.launch_configurations[name] for name in ROBOT_ARGUMENTS}
    model = launch_robot_parameters(**given, default_robot=DEFAULT_ROBOT)
    extra = optional_nodes({name: context.launch_configurations[name] for name in OPTIONAL_ARGUMENTS})
    return [Node(package="flexmodal_ros", executable=executable, name=name, output="screen",
                 parameters=[model])
            for executable, name in NODES + extra]


def generate_launch_description():
    profile = os.environ.get(DISCOVERY_PROFILE_VARIABLE) or str(discovery_profile())
    arguments = [DeclareLaunchArgument(name, default_value="", description=text)
                 for name, text in ROBOT_ARGUMENTS.items()]
    arguments += [DeclareLaunchArgument(name, default_value="false", description=text)
                  for name, text in OPTIONAL_ARGUMENTS.items()]
    return LaunchDescription([
        *arguments,
        SetEnvironmentVariable(DISCOVERY_PROFILE_VARIABLE, profile),
        OpaqueFunction(function=_nodes),
    ])

"""Bring up flexmodal_ros for one robot: simulator, feedforward+PD controller, modal analysis and
identification servers, each with ``robot:=<robot>`` (bundled config/<robot>.yaml + urdf/<robot>.urdf).

    ros2 launch flexmodal_ros bringup.launch.py robot:=kuka_lwr4

Without ROS 2's launch tools, ``flexmodal_bringup --robot kuka_lwr4`` starts the same nodes
(flexmodal_ros/nodes/bringup.py holds the shared node table NODES).
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from flexmodal_ros.nodes.bringup import DEFAULT_ROBOT, DISCOVERY_PROFILE_VARIABLE, NODES, discovery_profile


def generate_launch_description():
    robot = LaunchConfiguration("robot")
    nodes = [Node(package="flexmodal_ros", executable=executable, name=name, output="screen",
                  parameters=[{"robot": robot}])
             for executable, name in NODES]
    profile = os.environ.get(DISCOVERY_PROFILE_VARIABLE) or str(discovery_profile())
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value=DEFAULT_ROBOT,
                              description="bundled robot: scompi, planar_2r, kuka_lwr4"),
        SetEnvironmentVariable(DISCOVERY_PROFILE_VARIABLE, profile),
        *nodes,
    ])

"""Bring up flexmodal_ros for one robot: simulator, feedforward+PD controller, modal analysis and
identification servers.

    ros2 launch flexmodal_ros bringup.launch.py                         # kuka_lwr4 (bundled)
    ros2 launch flexmodal_ros bringup.launch.py robot:=scompi
    ros2 launch flexmodal_ros bringup.launch.py params_path:=/path/robot.yaml [urdf_path:=/path/robot.urdf]
    ros2 launch flexmodal_ros bringup.launch.py robot:=planar_2r namespace:=arm1   # one robot per namespace
    ros2 launch flexmodal_ros bringup.launch.py calibration:=true          # + the calibration node

Arguments ``robot`` / ``urdf_path`` / ``params_path`` (empty default = not given; see
``flexmodal_ros.nodes.bringup.launch_robot_parameters``); ``namespace`` (empty = none: every node,
its relative topics ``joint_states`` / ``effort_controller/commands`` and the robot's clock
``/<namespace>/clock`` go into ``/<namespace>``); ``use_sim_time`` (true: the controller and the
modal server run on the simulator's /clock, so a slow simulation slows their time instead of
tripping the 0.05 s stale-state limit; false: steady clock, as on a real robot). Without ROS 2's
launch tools, ``flexmodal_bringup --robot kuka_lwr4 [--namespace arm1]`` starts the same nodes
(flexmodal_ros/nodes/bringup.py holds the shared node table NODES).
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch_ros.actions import Node

from flexmodal_ros.core.errors import ConfigError
from flexmodal_ros.nodes.bringup import (DEFAULT_ROBOT, DISCOVERY_PROFILE_VARIABLE, NODES, OPTIONAL_ARGUMENTS,
                                         ROBOT_ARGUMENTS, SIMULATED_PLANT_PARAMS, check_namespace,
                                         discovery_profile, launch_robot_parameters, optional_nodes)

ARGUMENTS = {
    "namespace": ("", "namespace of this robot's nodes, topics and clock (empty: none)"),
    "use_sim_time": ("true", "controller and modal server on the simulator's /clock (false: steady clock)"),
}


def _nodes(context):
    given = {name: context.launch_configurations[name] for name in ROBOT_ARGUMENTS}
    model = launch_robot_parameters(**given, default_robot=DEFAULT_ROBOT)
    namespace = check_namespace(context.launch_configurations["namespace"])
    sim_time = context.launch_configurations["use_sim_time"].strip().lower()
    if sim_time not in ("true", "false"):
        raise ConfigError(f"use_sim_time: expected true or false, got {sim_time!r}")
    extra = optional_nodes({name: context.launch_configurations[name] for name in OPTIONAL_ARGUMENTS})
    remappings = [("/clock", f"{namespace}/clock")] if namespace else []
    return [Node(package="flexmodal_ros", executable=executable, name=name, namespace=namespace or None,
                 output="screen", remappings=remappings,
                 parameters=[{**model, **(SIMULATED_PLANT_PARAMS.get(name, {}) if sim_time == "true" else {})}])
            for executable, name in NODES + extra]


def generate_launch_description():
    profile = os.environ.get(DISCOVERY_PROFILE_VARIABLE) or str(discovery_profile())
    arguments = [DeclareLaunchArgument(name, default_value="", description=text)
                 for name, text in ROBOT_ARGUMENTS.items()]
    arguments += [DeclareLaunchArgument(name, default_value=default, description=text)
                  for name, (default, text) in ARGUMENTS.items()]
    arguments += [DeclareLaunchArgument(name, default_value="false", description=text)
                  for name, text in OPTIONAL_ARGUMENTS.items()]
    return LaunchDescription([
        *arguments,
        SetEnvironmentVariable(DISCOVERY_PROFILE_VARIABLE, profile),
        OpaqueFunction(function=_nodes),
    ])

"""The suite on Gazebo (gz-sim) with gz_ros2_control: the robot exported at start-up
(``flexmodal export``: rotor link, ``<joint>_motor``, elastic joint per flexible joint; the
ros2_control block; the controllers YAML; a world with the robot's gravity and physics engine).

    ros2 launch flexmodal_ros gazebo.launch.py robot:=kuka_lwr4 gear_ratio:=160

Starts: ``gz sim`` on the exported world (ros_gz_sim's gz_sim.launch.py), robot_state_publisher
with the exported URDF, ``ros_gz_sim create`` from /robot_description, ros_gz_bridge for /clock,
the controller_manager spawners of joint_state_broadcaster and effort_controller (forward command
controller on the motor joints' effort: /effort_controller/commands), the feedforward+PD
controller and the modal-analysis server with ``link_state: deflection`` and ``use_sim_time``.

Arguments: ``robot``; ``rotor`` (gear = rotor I_r = B/N² on a mimic joint, needs an engine with
mimic constraints, selected in the world: bullet-featherstone; body = rotor link of inertia B, any
engine, dartsim); ``link_damping`` (elastic | motor); ``gear_ratio`` (N where the params give B
only; empty = the params' N); ``output_dir`` (where the description files are written; empty = a
temporary directory ``$TMPDIR/flexmodal_gazebo_<robot>_*``, removed when the launch ends or fails).
"""
import os
import shutil
import tempfile
from pathlib import Path

from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction, RegisterEventHandler,
                            SetEnvironmentVariable)
from launch.event_handlers import OnShutdown
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from flexmodal_ros.nodes.bringup import DEFAULT_ROBOT, DISCOVERY_PROFILE_VARIABLE, EXPORTED_ROBOT_PARAMS, discovery_profile

ARGUMENTS = {
    "robot": (DEFAULT_ROBOT, "bundled robot: scompi, planar_2r, kuka_lwr4"),
    "rotor": ("gear", "rotor inertia mapping: gear (mimic joint, bullet-featherstone) or body (any engine)"),
    "link_damping": ("elastic", "link damping d_f on the elastic (deflection) or the motor joint"),
    "gear_ratio": ("", "gear ratio N where the params give B only (empty: the params' N)"),
    "output_dir": ("", "directory for the exported URDF, controllers YAML and world (empty: temporary)"),
}


def export_and_start(context):
    """Export the robot for Gazebo, then the actions that use the files. A temporary directory
    (no ``output_dir``) is removed when the export fails and when the launch shuts down."""
    value = lambda name: LaunchConfiguration(name).perform(context)
    robot = value("robot")
    ratio = value("gear_ratio")
    try:
        ratio = float(ratio) if ratio else None
    except ValueError:
        raise RuntimeError(f"gear_ratio: expected a number, got '{ratio}'") from None
    given = value("output_dir")
    out = Path(given) if given else Path(tempfile.mkdtemp(prefix=f"flexmodal_gazebo_{robot}_"))
    try:
        result = _export(robot, out, value("rotor"), value("link_damping"), ratio)
    except BaseException:
        if not given:
            shutil.rmtree(out, ignore_errors=True)
        raise
    cleanup = [] if given else [RegisterEventHandler(OnShutdown(
        on_shutdown=lambda event, context: shutil.rmtree(out, ignore_errors=True)))]
    description = result.description.read_text()
    sim_time = {"use_sim_time": True}
    gz_sim = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("ros_gz_sim"), "launch", "gz_sim.launch.py"])),
        launch_arguments={"gz_args": f"-r {result.world}"}.items())
    spawner = lambda name, *extra: Node(package="controller_manager", executable="spawner", output="screen",
                                        arguments=[name, "--controller-manager", "/controller_manager", *extra])
    suite = [Node(package="flexmodal_ros", executable=executable, output="screen",   # no name=: see mujoco.launch.py
                  parameters=[{"robot": robot, **EXPORTED_ROBOT_PARAMS[name]}])
             for executable, name in (("feedforward_pd_controller", "feedforward_pd_controller"),
                                      ("modal_analysis_server", "modal_analysis"))]
    return [
        gz_sim,
        Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
             parameters=[{"robot_description": description, **sim_time}]),
        Node(package="ros_gz_sim", executable="create", output="screen",
             arguments=["-topic", "robot_description", "-name", robot]),
        Node(package="ros_gz_bridge", executable="parameter_bridge", output="screen",
             arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"], parameters=[sim_time]),
        spawner("joint_state_broadcaster"),
        spawner("effort_controller", "--param-file", str(result.controllers)),
        *suite,
        *cleanup,
    ]


def _export(robot, out, rotor, link_damping, ratio):
    """The exported files of ``robot`` in ``out`` (ExportResult); RuntimeError naming the launch
    arguments for a bad combination."""
    from flexmodal_ros.core.errors import ConfigError
    from flexmodal_ros.export import export_files
    from flexmodal_ros.robot.registry import load_robot

    out.mkdir(parents=True, exist_ok=True)
    try:
        return export_files(load_robot(robot), "urdf", out / f"{robot}.urdf", rotor=rotor,
                            link_damping=link_damping, gear_ratio=ratio)
    except ConfigError as exc:      # name the launch arguments, not the CLI flags
        raise RuntimeError(f"{exc} [launch arguments: gear_ratio:=N (the gear ratio of the drives) or "
                           f"rotor:=body]") from None


def generate_launch_description():
    profile = os.environ.get(DISCOVERY_PROFILE_VARIABLE) or str(discovery_profile())
    return LaunchDescription([
        *[DeclareLaunchArgument(name, default_value=default, description=text)
          for name, (default, text) in ARGUMENTS.items()],
        SetEnvironmentVariable(DISCOVERY_PROFILE_VARIABLE, profile),
        OpaqueFunction(function=export_and_start),
    ])

"""Start the ``modal_analysis`` node (flexmodal_ros modal_analysis_server) for one robot.

    ros2 launch flexmodal_ros modal_analysis.launch.py robot:=kuka_lwr4
    ros2 launch flexmodal_ros modal_analysis.launch.py robot:= \
        urdf_path:=/path/robot.urdf params_path:=/path/robot.yaml

Arguments: ``robot`` (bundled name: scompi, planar_2r, kuka_lwr4; empty to use the files),
``urdf_path``, ``params_path`` (flexibility YAML), ``publish_rate_hz``, ``joint_state_timeout_s``,
``method`` (mcs | rcs | ucs, closed-chain robots such as parallelogram_arm).
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

ARGUMENTS = {
    "robot": ("scompi", "bundled robot name (empty: use urdf_path/params_path)", str),
    "urdf_path": ("", "URDF file (empty: the one named in params_path)", str),
    "params_path": ("", "flexibility parameter YAML (used when robot is empty)", str),
    "publish_rate_hz": ("10.0", "rate of ~/modal_parameters while joint states are fresh [Hz]", float),
    "joint_state_timeout_s": ("0.5", "joint states older than this are stale [s]", float),
    "method": ("", "constrained linearization mcs|rcs|ucs (closed-chain robots; empty: mcs for "
               "them, the flexible-joint AMA otherwise)", str),
}


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text, _) in ARGUMENTS.items()]
    parameters = {name: ParameterValue(LaunchConfiguration(name), value_type=kind)
                  for name, (_, _, kind) in ARGUMENTS.items()}
    node = Node(package="flexmodal_ros", executable="modal_analysis_server", name="modal_analysis",
                output="screen", parameters=[parameters])
    return LaunchDescription(declared + [node])

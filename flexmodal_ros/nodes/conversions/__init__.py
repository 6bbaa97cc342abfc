"""Conversions between flexmodal_interfaces / ROS messages and the ROS-free core types, one module
per interface family. The only place where message fields are read or filled; nodes call these
functions and the core never sees a message.

- :mod:`.stamps` — time stamps; :mod:`.cdr` — serialized messages read and written in place;
- :mod:`.joint_states` — sensor_msgs/JointState (controller samples, plant states);
- :mod:`.commands` — the motor torque commands; :mod:`.trajectories` — JointTrajectory references;
- :mod:`.modal_messages`, :mod:`.closed_chain_messages`, :mod:`.link_messages`,
  :mod:`.expansion_messages`, :mod:`.identification_messages`, :mod:`.modal_test_messages` — the
  services and actions of flexmodal_interfaces.
"""
from .cdr import SerializedMessage
from .closed_chain_messages import (closed_chain_map_request_to_core, closed_chain_map_to_response,
                                    closed_chain_request_to_core, closed_chain_result_to_msg, closed_chain_values,
                                    joint_state_to_closed_chain)
from .commands import TorqueCommandWriter, command_to_torque
from .expansion_messages import expansion_request_to_core, expansion_to_response
from .identification_messages import identification_request_to_core, identification_result_to_response
from .joint_states import (MOTOR_SUFFIX, STATE_INTERFACES_HINT, ByteLayout, JointStateReader, JointStateWriter,
                           joint_state_to_sample, plant_joint_state)
from .link_messages import link_modes_request_to_core, link_modes_to_response
from .modal_messages import (joint_state_to_configuration, modal_map_request_to_core, modal_map_to_response,
                             modal_request_to_core, modal_result_to_msg, sampled_request_options)
from .modal_test_messages import modal_test_request_to_core, modal_test_result_to_response
from .stamps import seconds_to_stamp, serialized_stamp_ns, split_seconds, stamp_to_seconds
from .trajectories import core_to_trajectory, max_trajectory_bytes, trajectory_to_core

__all__ = ["ByteLayout", "JointStateReader", "JointStateWriter", "MOTOR_SUFFIX", "STATE_INTERFACES_HINT",
           "SerializedMessage", "TorqueCommandWriter", "closed_chain_map_request_to_core",
           "closed_chain_map_to_response", "closed_chain_request_to_core", "closed_chain_result_to_msg",
           "closed_chain_values", "command_to_torque", "core_to_trajectory", "expansion_request_to_core",
           "expansion_to_response", "identification_request_to_core", "identification_result_to_response",
           "joint_state_to_closed_chain", "joint_state_to_configuration", "joint_state_to_sample",
           "link_modes_request_to_core", "link_modes_to_response", "max_trajectory_bytes",
           "modal_map_request_to_core", "modal_map_to_response", "modal_request_to_core",
           "modal_result_to_msg", "modal_test_request_to_core", "modal_test_result_to_response",
           "plant_joint_state", "sampled_request_options", "seconds_to_stamp", "serialized_stamp_ns",
           "split_seconds", "stamp_to_seconds", "trajectory_to_core"]

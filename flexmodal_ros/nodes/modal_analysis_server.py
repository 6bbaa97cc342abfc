"""ROS 2 node ``modal_analysis``: configuration-dependent modal analysis as services and a live topic.

Parameters: ``robot`` (bundled robot name) or ``urdf_path`` + ``params_path`` (flexibility YAML;
an empty ``urdf_path`` takes the URDF named in the YAML); ``publish_rate_hz`` (live topic rate,
default 10); ``joint_state_timeout_s`` (joint states older than this are stale, default 0.5);
``max_map_configurations`` (largest ``~/compute_modal_map`` request, default 2000 ≈ 0.5 s for the
7-joint LWR4; larger maps belong to the CLI, ``flexmodal sweep``). Integers are accepted for the
double parameters; a wrong type ends the node with a one-line error.

Services ``~/compute_modal_parameters`` (flexmodal_interfaces/ComputeModalParameters) and
``~/compute_modal_map`` (ComputeModalMap); subscription ``/joint_states`` (sensor_msgs/JointState,
the newest taken at publish_rate_hz);
publisher ``~/modal_parameters`` (ModalParameters), only while joint states are fresh.
Bad requests are answered with ``success=false`` and a message naming the field. Results for
configurations outside the URDF position limits carry a warning (ModalParameters.warnings).
"""
import time

import numpy as np
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from flexmodal_interfaces.msg import ModalParameters
from flexmodal_interfaces.srv import ComputeModalMap, ComputeModalParameters

from ..errors import FlexmodalError
from ..modal import limit_warnings, modal_analysis
from ..model import create_data
from ..sweep import modal_map
from .common import Throttle, declare_robot_model, declare_typed, run_node
from .polled import PolledSubscription
from .conversions import (joint_state_to_configuration, modal_map_request_to_core,
                          modal_map_to_response, modal_request_to_core, modal_result_to_msg)

REQUEST_ERRORS = (FlexmodalError, ValueError, np.linalg.LinAlgError, MemoryError)
MAX_MAP_CONFIGURATIONS = 2000


class ModalAnalysisServer(Node):
    """Thin shell: requests → conversions → :mod:`flexmodal_ros.modal` / :mod:`flexmodal_ros.sweep`."""

    def __init__(self, **kwargs):
        super().__init__("modal_analysis", **kwargs)
        self.model = declare_robot_model(self)
        rate = declare_typed(self, "publish_rate_hz", 10.0)
        self.timeout = declare_typed(self, "joint_state_timeout_s", 0.5)
        self.max_map = declare_typed(self, "max_map_configurations", MAX_MAP_CONFIGURATIONS)
        if not rate > 0 or not self.timeout > 0:
            raise FlexmodalError("parameters: publish_rate_hz and joint_state_timeout_s must be > 0")
        if self.max_map < 1:
            raise FlexmodalError(f"parameter max_map_configurations: must be >= 1, got {self.max_map}")
        self.data = create_data(self.model)
        self._throttle = Throttle(5.0)
        self.latest = None  # (serialized JointState, monotonic time it was taken)
        self.create_service(ComputeModalParameters, "~/compute_modal_parameters", self.on_parameters)
        self.create_service(ComputeModalMap, "~/compute_modal_map", self.on_map)
        # Joint states arrive at up to 1 kHz: polled at publish_rate_hz instead of one executor
        # callback each (nodes/polled.py); only the newest is deserialized and converted.
        self.joint_states = PolledSubscription(self, "joint_states", JointState, "/joint_states", 1, raw=True)
        self.publisher = self.create_publisher(ModalParameters, "~/modal_parameters", 10)
        self.create_timer(1.0 / rate, self.on_timer)
        self.get_logger().info(f"modal analysis of '{self.model.name}' ({self.model.n} joints) ready")

    def on_parameters(self, request, response):
        try:
            model, q = modal_request_to_core(self.model, request)
            result = modal_analysis(model, q, self.data)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        response.result = modal_result_to_msg(result, self.model.joint_names, self.get_clock().now().to_msg(),
                                              limit_warnings(self.model, q, "positions"))
        response.success, response.message = True, ""
        return response

    def on_map(self, request, response):
        if request.num_configurations > self.max_map:
            return _failed(response, f"num_configurations: {request.num_configurations} is more than this node's "
                                     f"max_map_configurations ({self.max_map}); compute large maps with the "
                                     "CLI (flexmodal sweep --configs FILE or --grid ...), or split the request")
        try:
            model, qs = modal_map_request_to_core(self.model, request)
            mmap = modal_map(model, qs, track=request.track_modes)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        modal_map_to_response(mmap, response, self.get_clock().now().to_msg(), self.model)
        response.success, response.message = True, ""
        return response

    def on_timer(self):
        raw = self.joint_states.take_latest()
        if raw is not None:
            self.latest = (raw, time.monotonic())
        if self.latest is None or time.monotonic() - self.latest[1] > self.timeout:
            return
        msg = deserialize_message(self.latest[0], JointState)
        try:
            q = joint_state_to_configuration(self.model, msg)
        except FlexmodalError as exc:
            if self._throttle():
                self.get_logger().warn(f"ignoring joint state: {exc}")
            return
        stamp = msg.header.stamp
        result = modal_analysis(self.model, q, self.data)
        self.publisher.publish(modal_result_to_msg(result, self.model.joint_names, stamp,
                                                   limit_warnings(self.model, q, "joint_states")))

    def destroy_node(self):
        if hasattr(self, "joint_states"):
            self.joint_states.destroy()
        return super().destroy_node()


def _failed(response, exc):
    text = "out of memory: the request is too large" if isinstance(exc, MemoryError) else str(exc)
    response.success, response.message = False, text
    return response


def main(args=None):
    return run_node(ModalAnalysisServer, "modal_analysis_server", args)


if __name__ == "__main__":
    raise SystemExit(main())

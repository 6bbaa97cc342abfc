"""ROS 2 node ``joint_identification``: joint stiffness and damping from modal data (thesis ch. 3).

Parameters: ``robot`` (bundled robot name) or ``urdf_path`` + ``params_path``; defaults used when a
request leaves them empty/zero: ``objective`` (determinant|eigenvalue), ``starts`` (30), ``k_max``
(5000), ``d_max`` (100); ``workers`` (multistart processes, default 2).

Service ``~/identify_joint_parameters`` (flexmodal_interfaces/IdentifyJointParameters). It runs in
a reentrant callback group, so with the MultiThreadedExecutor of :func:`main` a long identification
does not block the node's other callbacks (or a second request). Bad requests are answered with
``success=false`` and a message naming the field.
"""
import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from flexmodal_interfaces.srv import IdentifyJointParameters

from ..errors import FlexmodalError
from ..identification import (D_MAX_DEFAULT, DEFAULT_OBJECTIVE, DEFAULT_STARTS, K_MAX_DEFAULT,
                              OBJECTIVES, identify)
from .common import declare_robot_model, run_node
from .conversions import identification_request_to_core, identification_result_to_response

REQUEST_ERRORS = (FlexmodalError, ValueError, np.linalg.LinAlgError)


class IdentificationServer(Node):
    """Thin shell: request → conversions → :func:`flexmodal_ros.identification.identify`."""

    def __init__(self, **kwargs):
        super().__init__("joint_identification", **kwargs)
        self.model = declare_robot_model(self)
        self.defaults = dict(objective=self.declare_parameter("objective", DEFAULT_OBJECTIVE).value,
                             starts=self.declare_parameter("starts", DEFAULT_STARTS).value,
                             k_max=self.declare_parameter("k_max", K_MAX_DEFAULT).value,
                             d_max=self.declare_parameter("d_max", D_MAX_DEFAULT).value)
        self.workers = self.declare_parameter("workers", 2).value
        if self.defaults["objective"] not in OBJECTIVES:
            raise FlexmodalError(f"parameters: objective must be one of {', '.join(OBJECTIVES)}")
        if self.workers < 1 or self.defaults["starts"] < 1:
            raise FlexmodalError("parameters: workers and starts must be >= 1")
        self.create_service(IdentifyJointParameters, "~/identify_joint_parameters", self.on_identify,
                            callback_group=ReentrantCallbackGroup())
        self.get_logger().info(f"joint identification for '{self.model.name}' ({self.model.n} joints) ready")

    def on_identify(self, request, response):
        try:
            kwargs = identification_request_to_core(self.model, request)
            for key, default in self.defaults.items():
                kwargs[key] = default if kwargs[key] is None else kwargs[key]
            result = identify(self.model, workers=self.workers, **kwargs)
        except REQUEST_ERRORS as exc:
            response.success, response.message = False, str(exc)
            return response
        return identification_result_to_response(result, response)


def main(args=None):
    return run_node(IdentificationServer, "identification_server", args,
                    make_executor=lambda: MultiThreadedExecutor(num_threads=4))


if __name__ == "__main__":
    raise SystemExit(main())

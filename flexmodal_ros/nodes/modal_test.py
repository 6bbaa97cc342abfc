"""ROS 2 node ``modal_test``: impact test on a robot or the simulator, as a service.

Service ``~/run_modal_test`` (flexmodal_interfaces/RunModalTest): records ``/joint_states`` for
the requested duration of joint-state time — optionally first calling the simulator's impulse
service (``flexible_joint_simulator/apply_wrench``) after ``pre_trigger`` seconds — writes the
record as a ROS 2 bag, reads it back (:mod:`flexmodal_ros.oma.bags`), identifies the modes
(:mod:`flexmodal_ros.oma`) and returns them with the model's modes at the recorded configuration
(median of the link positions) and the match; the stabilization diagram, oma.json and oma.csv go
next to the bag. On a real robot: call the service, hit the robot, read the table.

Parameters: ``robot`` or ``urdf_path`` + ``params_path``; ``output_dir``
(flexmodal_output/modal_test); ``storage`` (sqlite3 or mcap); ``wall_timeout_factor`` (3) and
``wall_timeout_margin_s`` (5): the test fails when the record takes longer than 3× its duration
+ 5 s of wall time, or the impulse service does not answer within the margin.
Bad requests and failed tests answer ``success=false`` with a message; the node keeps serving.
"""
import threading
import time
from pathlib import Path

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from flexmodal_interfaces.srv import ApplyWrench, RunModalTest

from ..core.errors import FlexmodalError
from ..oma.bags import REQUEST_FIELDS, read_joint_states, write_serialized
from ..oma.pipeline import run_oma, write_outputs
from .base import declare_robot_model, run_node
from .conversions import modal_test_request_to_core, modal_test_result_to_response, serialized_stamp_ns
from .polled import PolledSubscription

DEFAULT_IMPULSE_SERVICE = "/flexible_joint_simulator/apply_wrench"
QUEUE_DEPTH = 5000          # joint states held by DDS between two polls (5 s at 1 kHz)
POLL_PERIOD = 0.005         # [s]


class ModalTestNode(Node):
    """Thin shell: request → record (polled raw subscription) → bag → :func:`run_oma` → response."""

    def __init__(self, **kwargs):
        super().__init__("modal_test", **kwargs)
        self.model = declare_robot_model(self)
        self.output_dir = Path(self.declare_parameter("output_dir", "flexmodal_output/modal_test").value)
        self.storage = self.declare_parameter("storage", "sqlite3").value
        self.timeout_factor = self.declare_parameter("wall_timeout_factor", 3.0).value
        self.timeout_margin = self.declare_parameter("wall_timeout_margin_s", 5.0).value
        if self.storage not in ("sqlite3", "mcap"):
            raise FlexmodalError(f"storage: must be sqlite3 or mcap, got {self.storage!r}")
        self.states = PolledSubscription(self, JointState, "/joint_states",
                                         QoSProfile(depth=QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE),
                                         raw=True)
        # The impulse client answers in its own callback group while ~/run_modal_test waits for it
        # (two executor threads, see main): no helper node, so name remappings stay unique.
        self._client_group = MutuallyExclusiveCallbackGroup()
        self.create_service(RunModalTest, "~/run_modal_test", self.on_run)
        self.get_logger().info(f"modal test of '{self.model.name}' ready (~/run_modal_test)")

    def on_run(self, request, response):
        try:
            options = modal_test_request_to_core(self.model, request)
            folder = Path(options["output_dir"] or self.output_dir) / time.strftime("test_%Y%m%d_%H%M%S")
            messages = self._record(options)
            bag = write_serialized(folder / "record", messages, "/joint_states", self.storage)
            record = read_joint_states(bag, "/joint_states", options["channels"], fields=REQUEST_FIELDS)
            links = read_joint_states(bag, "/joint_states", list(self.model.joint_names))
            q = np.median(links.values, axis=0)
            result = run_oma(record, options["model"], q, options["method"])
            result = write_outputs(result, folder)
        except (FlexmodalError, ValueError, np.linalg.LinAlgError) as exc:
            response.success, response.message = False, str(exc)
            return response
        modal_test_result_to_response(result, response, bag)
        response.success, response.message = True, f"{result.identified.num_modes} modes identified"
        return response

    def _record(self, options):
        """Serialized joint states [(stamp ns, bytes)] covering ``duration`` of stamp time."""
        self.states.take_all()                              # drop what arrived before the request
        messages, triggered = [], not options["trigger_impulse"]
        wall_limit = time.monotonic() + self.timeout_factor * options["duration"] + self.timeout_margin
        while True:
            for raw in self.states.take_all():
                messages.append((serialized_stamp_ns(raw), raw))
            span = (messages[-1][0] - messages[0][0]) * 1e-9 if messages else 0.0
            if not triggered and span >= options["pre_trigger"]:
                self._impulse(options)
                triggered = True
            if triggered and span >= options["duration"]:
                return messages
            if time.monotonic() > wall_limit:
                got = f"{len(messages)} joint states ({span:.3f} s)" if messages else "no joint states"
                raise FlexmodalError(f"duration: recorded {got} on /joint_states within "
                                     f"{self.timeout_factor:g} x {options['duration']:g} s + "
                                     f"{self.timeout_margin:g} s of wall time")
            self.states.wait(POLL_PERIOD)

    def _impulse(self, options):
        client = self.create_client(ApplyWrench, options["impulse_service"] or DEFAULT_IMPULSE_SERVICE,
                                    callback_group=self._client_group)
        try:
            if not client.wait_for_service(timeout_sec=self.timeout_margin):
                raise FlexmodalError(f"impulse_service: {client.srv_name} is not available")
            request = ApplyWrench.Request(wrench=list(options["wrench"]), duration=options["impulse_duration"])
            done = threading.Event()
            future = client.call_async(request)
            future.add_done_callback(lambda _: done.set())
            done.wait(self.timeout_margin)
            answer = future.result() if future.done() else None
            if answer is None or not answer.success:
                raise FlexmodalError(f"impulse_service: {getattr(answer, 'message', 'no answer in time')}")
        finally:
            self.destroy_client(client)

    def destroy_node(self):
        if hasattr(self, "states"):
            self.states.destroy()
        return super().destroy_node()


def main(args=None):
    return run_node(ModalTestNode, "modal_test", args, make_executor=lambda: MultiThreadedExecutor(2))


if __name__ == "__main__":
    raise SystemExit(main())

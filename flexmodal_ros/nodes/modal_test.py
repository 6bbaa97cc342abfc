"""ROS 2 node ``modal_test``: impact test on a robot or the simulator, as a service.

Service ``~/run_modal_test`` (flexmodal_interfaces/RunModalTest): records ``joint_states``
(relative: ``__ns`` / launch ``namespace`` apply) for the requested duration of joint-state time —
optionally first calling the simulator's impulse service (``flexible_joint_simulator/apply_wrench``,
relative too) after ``pre_trigger`` seconds — writes the record as a ROS 2 bag, reads it back
(:mod:`flexmodal_ros.oma.bags`), identifies the modes (:mod:`flexmodal_ros.oma`) and returns them
with the model's modes at the recorded configuration (median of the link positions) and the match;
the stabilization diagram, oma.json and oma.csv go next to the bag. On a real robot: call the
service, hit the robot, read the table.

Every field is checked before anything is recorded: the numbers and names
(:func:`~flexmodal_ros.nodes.conversions.modal_test_request_to_core`), ``duration`` <=
``max_duration_s``, ``impulse_service`` a valid ROS service name (rclpy's name validation) that is
served, ``output_dir`` inside the node's output directory and creatable, and — with the first
joint state — ``channels`` and the robot's joints present in ``joint_states``.

Parameters: ``robot`` or ``urdf_path`` + ``params_path``; ``output_dir`` (the directory every test
folder goes into: a request's ``output_dir`` is a folder inside it, anything resolving outside it
— absolute paths elsewhere, ``..``, symbolic links out — is refused; empty =
``<ROS log dir>/flexmodal/modal_test``, nodes/base.py :func:`declare_output_root`; each test gets a
new folder ``test_<date>_<time>[_k]``, nothing is overwritten); ``storage`` (sqlite3 or mcap);
``max_duration_s`` (60: the longest record a request may ask for; the bound on one request's work
and memory, ~1 MB per second at 1 kHz); ``wall_timeout_factor`` (3) and ``wall_timeout_margin_s``
(5): the test fails when the record takes longer than 3× its duration + 5 s of wall time, or the
impulse service does not answer within the margin. A recording in progress ends within
``POLL_PERIOD`` when the node shuts down (Ctrl-C). Bad requests and failed tests answer
``success=false`` with a message; no request can end the node (nodes/base.py
:class:`GuardedNode`).
"""
import threading
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import NameValidationException
from rclpy.executors import MultiThreadedExecutor
from rclpy.expand_topic_name import expand_topic_name
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.validate_full_topic_name import validate_full_topic_name
from sensor_msgs.msg import JointState

from flexmodal_interfaces.srv import ApplyWrench, RunModalTest

from ..core.errors import FlexmodalError
from ..core.validation import shown, shown_names
from ..oma.bags import REQUEST_FIELDS, read_joint_states, write_serialized
from ..oma.pipeline import run_oma, write_outputs
from .base import confined_path, declare_output_root, declare_typed, declare_robot_model, run_node
from .guard import GuardedNode
from .conversions import modal_test_request_to_core, modal_test_result_to_response, serialized_stamp_ns
from .polled import PolledSubscription

DEFAULT_IMPULSE_SERVICE = "flexible_joint_simulator/apply_wrench"
QUEUE_DEPTH = 5000          # joint states held by DDS between two polls (5 s at 1 kHz)
POLL_PERIOD = 0.005         # [s]
MAX_DURATION_S = 60.0       # default of max_duration_s


class ModalTestNode(GuardedNode):
    """Thin shell: request → checks → record (polled raw subscription) → bag → :func:`run_oma` → response."""

    def __init__(self, **kwargs):
        super().__init__("modal_test", **kwargs)
        self.model = declare_robot_model(self)
        self.output_root, _ = declare_output_root(self)
        self.storage = declare_typed(self, "storage", "sqlite3")
        self.max_duration = declare_typed(self, "max_duration_s", MAX_DURATION_S)
        self.timeout_factor = declare_typed(self, "wall_timeout_factor", 3.0)
        self.timeout_margin = declare_typed(self, "wall_timeout_margin_s", 5.0)
        if self.storage not in ("sqlite3", "mcap"):
            raise FlexmodalError(f"storage: must be sqlite3 or mcap, got {shown(self.storage)}")
        for name, value in (("max_duration_s", self.max_duration), ("wall_timeout_factor", self.timeout_factor),
                            ("wall_timeout_margin_s", self.timeout_margin)):
            if not 0 < value < float("inf"):
                raise FlexmodalError(f"parameter {name}: must be a positive number, got {value}")
        self._stopping = threading.Event()
        self.states = PolledSubscription(self, JointState, "joint_states",
                                         QoSProfile(depth=QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE),
                                         raw=True)
        # The impulse client answers in its own callback group while ~/run_modal_test waits for it
        # (two executor threads, see main): no helper node, so name remappings stay unique.
        self._client_group = MutuallyExclusiveCallbackGroup()
        self.create_service(RunModalTest, "~/run_modal_test", self.on_run)
        self.get_logger().info(f"modal test of '{self.model.name}' ready (~/run_modal_test, files under "
                               f"{self.output_root})")

    def on_run(self, request, response):
        try:
            options = modal_test_request_to_core(self.model, request)
            if options["duration"] > self.max_duration:
                raise FlexmodalError(f"duration: {options['duration']:g} s is longer than this node's "
                                     f"max_duration_s ({self.max_duration:g} s)")
            client = self._impulse_client(options) if options["trigger_impulse"] else None
            folder = None
            try:
                folder = self._test_folder(options["output_dir"])
                messages = self._record(options, client)
            except BaseException:
                if folder is not None and not any(folder.iterdir()):
                    folder.rmdir()              # nothing recorded: no empty folder left behind
                raise
            finally:
                if client is not None:
                    self.destroy_client(client)
            topic = self.states.topic
            bag = write_serialized(folder / "record", messages, topic, self.storage)
            record = read_joint_states(bag, topic, options["channels"], fields=REQUEST_FIELDS)
            links = read_joint_states(bag, topic, list(self.model.joint_names))
            q = np.median(links.values, axis=0)
            result = run_oma(record, options["model"], q, options["method"])
            result = write_outputs(result, folder)
        except (FlexmodalError, ValueError, np.linalg.LinAlgError) as exc:
            response.success, response.message = False, str(exc)
            return response
        modal_test_result_to_response(result, response, bag)
        response.success, response.message = True, f"{result.identified.num_modes} modes identified"
        return response

    def _test_folder(self, requested):
        """A new folder for this test's files inside the output directory (inside the request's
        ``output_dir`` folder if given); FlexmodalError naming output_dir."""
        parent = confined_path(self.output_root, requested, "output_dir", overwrite=True) if requested \
            else self.output_root
        stem = time.strftime("test_%Y%m%d_%H%M%S")
        for k in range(100):
            folder = parent / (stem if k == 0 else f"{stem}_{k}")
            try:
                folder.mkdir(parents=True)
                return folder
            except FileExistsError:
                if not parent.is_dir():
                    break
            except OSError as exc:
                raise FlexmodalError(f"output_dir: cannot create a folder in {str(parent)!r} "
                                     f"({exc.strerror})") from None
        raise FlexmodalError(f"output_dir: cannot create a folder in {str(parent)!r} (not a directory, or "
                             "100 tests in the same second)")

    def _impulse_client(self, options):
        """A client of the impulse service named by the request, once it is served; FlexmodalError
        naming impulse_service for an invalid name or a service nobody serves."""
        name = options["impulse_service"] or DEFAULT_IMPULSE_SERVICE
        try:
            full = expand_topic_name(name, self.get_name(), self.get_namespace())
            validate_full_topic_name(full, is_service=True)
        except (NameValidationException, ValueError, TypeError) as exc:
            reason = str(exc).strip().splitlines()[0].split(", at /")[0]
            raise FlexmodalError(f"impulse_service: {shown(name)} is not a valid ROS service name ({reason})") from None
        client = self.create_client(ApplyWrench, full, callback_group=self._client_group)
        deadline = time.monotonic() + self.timeout_margin
        while not client.service_is_ready():
            if time.monotonic() > deadline or not self._running():
                self.destroy_client(client)
                raise FlexmodalError(f"impulse_service: {full} is not available (no server within "
                                     f"{self.timeout_margin:g} s)")
            time.sleep(0.02)
        return client

    def _running(self):
        return self.context.ok() and not self._stopping.is_set()

    def _record(self, options, client):
        """Serialized joint states [(stamp ns, bytes)] covering ``duration`` of stamp time."""
        self.states.take_all()                              # drop what arrived before the request
        messages, triggered = [], client is None
        wall_limit = time.monotonic() + self.timeout_factor * options["duration"] + self.timeout_margin
        while True:
            if not self._running():
                raise FlexmodalError("interrupted: the node is shutting down")
            for raw in self.states.take_all():
                if not messages:
                    self._check_names(raw, options["channels"])
                messages.append((serialized_stamp_ns(raw), raw))
            span = (messages[-1][0] - messages[0][0]) * 1e-9 if messages else 0.0
            if not triggered and span >= options["pre_trigger"]:
                self._impulse(client, options)
                triggered = True
            if triggered and span >= options["duration"]:
                return messages
            if time.monotonic() > wall_limit:
                got = f"{len(messages)} joint states ({span:.3f} s)" if messages else "no joint states"
                raise FlexmodalError(f"duration: recorded {got} on {self.states.topic} within "
                                     f"{self.timeout_factor:g} x {options['duration']:g} s + "
                                     f"{self.timeout_margin:g} s of wall time")
            self.states.wait(POLL_PERIOD)

    def _check_names(self, raw, channels):
        """FlexmodalError naming channels (or the robot's joints) absent from the first joint state."""
        names = set(deserialize_message(raw, JointState).name)
        for field, wanted in (("channels", channels), ("robot", self.model.joint_names)):
            unknown = [j for j in wanted if j not in names]
            if unknown:
                raise FlexmodalError(f"{field}: {shown_names(unknown)} not in {self.states.topic} "
                                     f"(it has {', '.join(sorted(names))})")

    def _impulse(self, client, options):
        request = ApplyWrench.Request(wrench=list(options["wrench"]), duration=options["impulse_duration"])
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        deadline = time.monotonic() + self.timeout_margin
        while not done.wait(POLL_PERIOD) and time.monotonic() < deadline and self._running():
            pass
        answer = future.result() if future.done() else None
        if answer is None or not answer.success:
            raise FlexmodalError(f"impulse_service: {getattr(answer, 'message', 'no answer in time')}")

    def destroy_node(self):
        if hasattr(self, "_stopping"):   # construction may have been interrupted before
            self._stopping.set()
        if hasattr(self, "states"):
            self.states.destroy()
        return super().destroy_node()


def main(args=None):
    return run_node(ModalTestNode, "modal_test", args, make_executor=lambda: MultiThreadedExecutor(2))


if __name__ == "__main__":
    raise SystemExit(main())

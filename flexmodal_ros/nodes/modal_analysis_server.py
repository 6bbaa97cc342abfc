"""ROS 2 node ``modal_analysis``: configuration-dependent modal analysis as services and a live topic.

Parameters: ``robot`` (bundled robot name) or ``urdf_path`` + ``params_path`` (flexibility YAML;
an empty ``urdf_path`` takes the URDF named in the YAML); ``publish_rate_hz`` (live topic rate,
default 10); ``joint_state_timeout_s`` (joint states older than this are stale, default 0.5; in
simulation time with ``use_sim_time``); ``link_state`` (absolute | deflection: how /joint_states
reports the link position, flexmodal_ros/export/convention.py); polynomial fast path
(:mod:`flexmodal_ros.expansion.live`): ``modal_method`` ("exact", default, or "polynomial"),
``expansion_order`` (3), ``expansion_tolerance`` (relative eigenvalue error estimate that triggers a
re-expansion; 0 = the core's default, 2e-3), ``trust_radius`` (rad or m, max-norm; 0 = automatic);
``method`` (mcs | rcs | ucs: constrained linearization; closed-chain robots always use it,
default mcs; set for a serial robot it selects the constrained path too);
``max_map_configurations`` (largest ``~/compute_modal_map`` answered inline, default 2000;
larger maps are refused with a pointer to the out-of-core CLI path, ``flexmodal sweep ...
--store``); bounds on the work of one request, checked before it starts (what each costs:
docs/ros_robustness.md, measured by the scripts of docs/benchmarks.md):
``max_expansion_terms`` (500: an expansion of order t in p joints has C(p + t, t) terms; kuka_lwr4
up to order 4, scompi 5, planar_2r 20) and ``max_link_modes`` (40, at most the core's 200) and
``link_time_limit_s`` (30: a link-mode request runs in a worker process killed at this limit,
nodes/modal_services/link_service.py);
``output_dir`` (the directory ``~/expand_modal_parameters`` writes ``output_path`` files into:
a relative ``output_path`` is taken inside it, anything resolving outside it is refused; empty =
``<ROS log dir>/flexmodal/modal_analysis``, nodes/base.py :func:`declare_output_root`) and
``overwrite_outputs`` (false: an existing file is never replaced). Every parameter is read-only
(``use_sim_time`` too: the timing clock is chosen at start). Integers are accepted for the double
parameters; a wrong type or value ends the node with a one-line error.

Services ``~/compute_modal_parameters`` (flexmodal_interfaces/ComputeModalParameters; with
``controller_rate_hz`` > 0 the sampled-data loop, :mod:`flexmodal_ros.flexible_joint.sampled`),
``~/compute_modal_map`` (ComputeModalMap), ``~/expand_modal_parameters``
(ExpandModalParameters: polynomial eigenpairs about a configuration), ``~/compute_link_modes``
(ComputeLinkModes: beam-link modes, for robots whose YAML has a ``links:`` section) and
``~/shape_trajectory`` (ShapeTrajectory: waypoints → the input-shaped reference sampled for any
trajectory controller, :func:`flexmodal_ros.shaping.shaped_samples.shape_samples`; work bounds in
nodes/conversions/shaping_messages.py; limits refused, never time-scaled); subscription
``joint_states`` (sensor_msgs/JointState, relative: ``__ns`` / launch ``namespace`` apply;
the newest taken at publish_rate_hz);
publisher ``~/modal_parameters`` (ModalParameters), only while joint states are fresh.
Bad requests are answered with ``success=false`` and a message naming the field; no request can
end the node (nodes/base.py :class:`GuardedNode`: an unexpected failure is answered
"internal error (...)", logged once, and the node keeps serving). Results for
configurations outside the URDF position limits carry a warning (ModalParameters.warnings).
``~/compute_modal_parameters`` is answered by a thread of its own (nodes/polled.py ServiceThread:
take, handler, send, without the executor's dispatch per request); the executor runs the rest,
and the two share one lock, so no two callbacks of the node ever run at once. The node is a shell:
each capability's requests are answered by its service class in :mod:`.modal_services`.
"""
import threading

from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from flexmodal_interfaces.msg import ModalParameters
from flexmodal_interfaces.srv import (ComputeLinkModes, ComputeModalMap, ComputeModalParameters,
                                      ExpandModalParameters, ShapeTrajectory)

from ..core.errors import FlexmodalError
from ..export.convention import check_link_state
from .base import (REQUEST_ERRORS, Throttle, declare_output_root, declare_robot_model, declare_typed, run_node,
                   seconds, timing_clock)
from .guard import GuardedNode
from .modal_services.expansion_service import MAX_EXPANSION_TERMS, ExpansionService, check_expansion_options
from .modal_services.flexible_joint_service import MAX_MAP_CONFIGURATIONS, FlexibleJointService
from .modal_services.link_service import LINK_TIME_LIMIT_S, MAX_LINK_MODES, LinkService, check_max_link_modes
from .modal_services.shaping_service import ShapingService
from .polled import PolledSubscription, ServiceThread, locked


class ModalAnalysisServer(GuardedNode):
    """Thin shell: parameters, services, the live topic; requests answered by the capability
    services of :mod:`.modal_services`."""

    def __init__(self, **kwargs):
        super().__init__("modal_analysis", **kwargs)
        # Closed-chain robots (YAML loop closures), or any robot with `method` set, go through
        # flexmodal_ros.constrained (method: mcs | rcs | ucs; modal_services/closed_chain_service.py).
        method = declare_typed(self, "method", "")
        self.model = declare_robot_model(self, closed_chain=True, constrained=bool(method))
        rate = declare_typed(self, "publish_rate_hz", 10.0)
        self.timeout = declare_typed(self, "joint_state_timeout_s", 0.5)
        link_state = check_link_state(declare_typed(self, "link_state", "absolute"), error=FlexmodalError)
        self.timing_clock = timing_clock(self)    # stale-state checks in sim time with use_sim_time
        self.max_map_configurations = max_map = declare_typed(self, "max_map_configurations", MAX_MAP_CONFIGURATIONS)
        if not rate > 0 or not self.timeout > 0:
            raise FlexmodalError("parameters: publish_rate_hz and joint_state_timeout_s must be > 0")
        if max_map < 1:
            raise FlexmodalError(f"parameter max_map_configurations: must be >= 1, got {max_map}")
        expansion = {name: declare_typed(self, name, default) for name, default in (
            ("modal_method", "exact"), ("expansion_order", 3), ("expansion_tolerance", 0.0), ("trust_radius", 0.0),
            ("max_expansion_terms", MAX_EXPANSION_TERMS))}
        check_expansion_options(*expansion.values())
        max_link_modes = check_max_link_modes(declare_typed(self, "max_link_modes", MAX_LINK_MODES))
        link_time_limit = declare_typed(self, "link_time_limit_s", LINK_TIME_LIMIT_S)
        output_root, overwrite = declare_output_root(self)
        self._throttle = Throttle(5.0)
        self.latest = None  # (serialized JointState, monotonic time it was taken)
        if getattr(self.model, "closed_chain", False):
            # deferred: the constrained core (SciPy sparse, ARPACK, CasADi), only for closed-chain robots
            from .modal_services.closed_chain_service import ClosedChainService
            self.modes = ClosedChainService(self.model, method, max_map)
            self.expansion = None
        else:
            self.expansion = ExpansionService(self.model, expansion["modal_method"], expansion["expansion_order"],
                                              expansion["expansion_tolerance"] or None,
                                              expansion["trust_radius"] or None, expansion["max_expansion_terms"],
                                              output_root, overwrite)
            self.modes = FlexibleJointService(self.model, max_map, link_state, self.expansion.tracker)
        self.links = LinkService(self.model, max_link_modes, link_time_limit)
        # ~/compute_modal_parameters on a thread of its own (nodes/polled.py ServiceThread: no
        # executor dispatch per request); every executor callback holds the same lock.
        self.lock = threading.Lock()
        self.parameters_service = ServiceThread(self, ComputeModalParameters, "~/compute_modal_parameters",
                                                self._answer(self.modes.parameters, "~/compute_modal_parameters"),
                                                self.lock)
        self.shaping = ShapingService(self.model)
        for srv_type, name, handler in ((ComputeModalMap, "~/compute_modal_map", self.modes.modal_map),
                                        (ExpandModalParameters, "~/expand_modal_parameters", self._expand),
                                        (ComputeLinkModes, "~/compute_link_modes", self.links.link_modes),
                                        (ShapeTrajectory, "~/shape_trajectory", self.shaping.shape_trajectory)):
            self.create_service(srv_type, name, locked(self.lock, self._answer(handler, name)))
        # Joint states arrive at up to 1 kHz: polled at publish_rate_hz instead of one executor
        # callback each (nodes/polled.py); only the newest is deserialized and converted.
        self.joint_states = PolledSubscription(self, JointState, "joint_states", 1, raw=True)
        self.publisher = self.create_publisher(ModalParameters, "~/modal_parameters", 10)
        self.create_timer(1.0 / rate, locked(self.lock, self.on_timer))
        self.parameters_service.start()
        self.get_logger().info(f"modal analysis of '{self.model.name}' ({self.model.n} joints) ready")

    @property
    def tracker(self):
        """The live topic's polynomial fast path (None: exact AMA)."""
        return self.expansion.tracker if self.expansion is not None else None

    @property
    def max_map(self):
        """max_map_configurations: the largest ~/compute_modal_map answered inline."""
        return self.max_map_configurations

    def _answer(self, handler, name):
        """A service callback around ``handler(request, response, stamp)``: success (message: the
        string the handler returns, if any), or (through the node's guard) success=false with the
        reason for a request it cannot answer."""
        def answer(request, response):
            message = handler(request, response, self.get_clock().now().to_msg())
            response.success, response.message = True, message if isinstance(message, str) else ""
            return response
        return self.guarded(answer, name, service=True)

    def _expand(self, request, response, stamp):
        if self.expansion is None:
            raise FlexmodalError(f"robot {self.model.name} is a closed-chain robot: expansion is for "
                                 "flexible-joint (serial) robots")
        self.expansion.expand(request, response, stamp)

    def on_timer(self):
        raw = self.joint_states.take_latest()
        if raw is not None:
            self.latest = (raw, seconds(self.timing_clock))
        if self.latest is None or seconds(self.timing_clock) - self.latest[1] > self.timeout:
            return
        msg = deserialize_message(self.latest[0], JointState)
        try:
            self.publisher.publish(self.modes.live(msg, msg.header.stamp))
        except REQUEST_ERRORS as exc:
            if self._throttle():
                self.get_logger().warning(f"ignoring joint state: {exc}")

    def destroy_node(self):
        if hasattr(self, "parameters_service"):
            self.parameters_service.stop()
        if hasattr(self, "links"):
            self.links.close()
        if hasattr(self, "joint_states"):
            self.joint_states.destroy()
        return super().destroy_node()


def main(args=None):
    return run_node(ModalAnalysisServer, "modal_analysis_server", args)


if __name__ == "__main__":
    raise SystemExit(main())

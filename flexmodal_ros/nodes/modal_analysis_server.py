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
``max_map_configurations`` (largest ``~/compute_modal_map`` answered inline, default 2000 ≈ 0.5 s
for the 7-joint LWR4; larger maps are refused with a pointer to the out-of-core CLI path,
``flexmodal sweep ... --store``). Integers are accepted for the double parameters; a wrong type
ends the node with a one-line error.

Services ``~/compute_modal_parameters`` (flexmodal_interfaces/ComputeModalParameters; with
``controller_rate_hz`` > 0 the sampled-data loop, :mod:`flexmodal_ros.flexible_joint.sampled`),
``~/compute_modal_map`` (ComputeModalMap), ``~/expand_modal_parameters``
(ExpandModalParameters: polynomial eigenpairs about a configuration), ``~/compute_link_modes``
(ComputeLinkModes: beam-link modes, for robots whose YAML has a ``links:`` section) and
``~/shape_trajectory`` (ShapeTrajectory: waypoints → the input-shaped reference sampled for any
trajectory controller, :func:`flexmodal_ros.shaping.shaper_design.shape_samples`; work bounds in
nodes/shaping_conversions.py; limits refused, never time-scaled); subscription
``/joint_states`` (sensor_msgs/JointState,
the newest taken at publish_rate_hz);
publisher ``~/modal_parameters`` (ModalParameters), only while joint states are fresh.
Bad requests are answered with ``success=false`` and a message naming the field. Results for
configurations outside the URDF position limits carry a warning (ModalParameters.warnings).
``~/compute_modal_parameters`` is answered by a thread of its own (nodes/polled.py ServiceThread:
take, handler, send, without the executor's dispatch per request); the executor runs the rest,
and the two share one lock, so no two callbacks of the node ever run at once.
"""
import threading
import warnings

import numpy as np
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from flexmodal_interfaces.msg import ModalParameters
from flexmodal_interfaces.srv import (ComputeLinkModes, ComputeModalMap, ComputeModalParameters,
                                      ExpandModalParameters, ShapeTrajectory)

from ..core.errors import FlexmodalError, InputError
from ..export.convention import check_link_state
from ..links.arm import has_links, link_arm_from_model
from ..flexible_joint.modal import limit_warnings, modal_analysis
from ..robot.model import create_data
from ..flexible_joint.sweep import modal_map
from .base import Throttle, declare_robot_model, declare_typed, run_node, seconds, timing_clock
from .constrained_modal import ClosedChainModal
from .polled import PolledSubscription, ServiceThread, locked
from ..robot.trajectory import PiecewiseC4Trajectory
from ..shaping.shaper_design import shape_samples
from .shaping_conversions import MAX_SHAPE_SAMPLES, shape_request_to_core, shaped_samples_to_response
from .conversions import (expansion_request_to_core, expansion_to_response, joint_state_to_configuration,
                          link_modes_request_to_core, link_modes_to_response,
                          modal_map_request_to_core, modal_map_to_response, modal_request_to_core,
                          modal_result_to_msg, sampled_request_options)

REQUEST_ERRORS = (FlexmodalError, ValueError, np.linalg.LinAlgError, MemoryError)
MAX_MAP_CONFIGURATIONS = 2000   # ≈ 0.5 s of one core for the 7-joint LWR4


def check_map_request_size(num_configurations, limit):
    """Refuse maps above ``limit`` configurations: they belong to the out-of-core CLI path."""
    if num_configurations > limit:
        raise FlexmodalError(
            f"num_configurations: {num_configurations} is more than this node's max_map_configurations "
            f"({limit}); compute large maps out of core with `flexmodal sweep --robot NAME --grid ... "
            f"--store MAP.zarr [--scheduler local:N|tcp://HOST:PORT]` (README: Dask), or split the request")


class ModalAnalysisServer(Node):
    """Thin shell: requests → conversions → :mod:`flexmodal_ros.flexible_joint.modal` / :mod:`flexmodal_ros.flexible_joint.sweep`."""

    def __init__(self, **kwargs):
        super().__init__("modal_analysis", **kwargs)
        # Closed-chain robots (YAML loop closures), or any robot with `method` set, go through
        # flexmodal_ros.constrained (method: mcs | rcs | ucs; nodes/constrained_modal.py).
        method = declare_typed(self, "method", "")
        self.model = declare_robot_model(self, closed_chain=True, constrained=bool(method))
        self.closed_chain = (ClosedChainModal(self.model, method)
                             if getattr(self.model, "closed_chain", False) else None)
        rate = declare_typed(self, "publish_rate_hz", 10.0)
        self.timeout = declare_typed(self, "joint_state_timeout_s", 0.5)
        self.link_state = check_link_state(declare_typed(self, "link_state", "absolute"), error=FlexmodalError)
        self._clock = timing_clock(self)    # stale-state checks in sim time with use_sim_time
        self.max_map = declare_typed(self, "max_map_configurations", MAX_MAP_CONFIGURATIONS)
        if not rate > 0 or not self.timeout > 0:
            raise FlexmodalError("parameters: publish_rate_hz and joint_state_timeout_s must be > 0")
        if self.max_map < 1:
            raise FlexmodalError(f"parameter max_map_configurations: must be >= 1, got {self.max_map}")
        self.data = create_data(self.model)
        self._throttle = Throttle(5.0)
        self.latest = None  # (serialized JointState, monotonic time it was taken)
        # ~/compute_modal_parameters on a thread of its own (nodes/polled.py ServiceThread: no
        # executor dispatch per request); every executor callback holds the same lock.
        self.lock = threading.Lock()
        self.parameters_service = ServiceThread(self, ComputeModalParameters, "~/compute_modal_parameters",
                                                self.on_parameters, self.lock)
        self.create_service(ComputeModalMap, "~/compute_modal_map", locked(self.lock, self.on_map))
        self._init_polynomial_fast_path()
        self.link_arm = link_arm_from_model(self.model) if has_links(self.model) else None
        self.create_service(ComputeLinkModes, "~/compute_link_modes", locked(self.lock, self.on_link_modes))
        self.create_service(ShapeTrajectory, "~/shape_trajectory", locked(self.lock, self.on_shape_trajectory))
        # Joint states arrive at up to 1 kHz: polled at publish_rate_hz instead of one executor
        # callback each (nodes/polled.py); only the newest is deserialized and converted.
        self.joint_states = PolledSubscription(self, JointState, "/joint_states", 1, raw=True)
        self.publisher = self.create_publisher(ModalParameters, "~/modal_parameters", 10)
        self.create_timer(1.0 / rate, locked(self.lock, self.on_timer))
        self.parameters_service.start()
        self.get_logger().info(f"modal analysis of '{self.model.name}' ({self.model.n} joints) ready")

    def on_parameters(self, request, response):
        if self.closed_chain:
            return self.on_closed_chain_parameters(request, response)
        try:
            model, q = modal_request_to_core(self.model, request)
            rate, hold = sampled_request_options(request)
            if rate is None:
                result = modal_analysis(model, q, self.data)
            else:                                  # SciPy's expm: imported only when asked for
                from ..flexible_joint.sampled import sampled_modal_analysis
                result = sampled_modal_analysis(model, q, rate, hold, self.data)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        modal_result_to_msg(result, self.model.joint_names, self.get_clock().now().to_msg(),
                            limit_warnings(self.model, q, "positions"), msg=response.result)
        response.success, response.message = True, ""
        return response

    def on_closed_chain_parameters(self, request, response):
        try:
            response.result = self.closed_chain.parameters(request, self.get_clock().now().to_msg())
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        response.success, response.message = True, ""
        return response

    def on_map(self, request, response):
        if self.closed_chain:
            return self.on_closed_chain_map(request, response)
        try:
            check_map_request_size(request.num_configurations, self.max_map)
            model, qs = modal_map_request_to_core(self.model, request)
            mmap = modal_map(model, qs, track=request.track_modes)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        modal_map_to_response(mmap, response, self.get_clock().now().to_msg(), self.model)
        response.success, response.message = True, ""
        return response

    def on_link_modes(self, request, response):
        from ..links import link_modes

        try:
            if self.link_arm is None:
                raise InputError(f"robot {self.model.name} has no flexible links (no links: section in its YAML)")
            arm, q, model, num_modes, regime = link_modes_request_to_core(self.link_arm, request)
            result = link_modes(arm, q, num_modes, model, regime)
            link_modes_to_response(arm, result, regime, response)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        response.success, response.message = True, ""
        return response

    def on_shape_trajectory(self, request, response):
        try:
            if self.closed_chain:
                raise InputError("shape_trajectory: not available for closed-chain robots (flexible-joint "
                                 "serial robots only)")
            req = shape_request_to_core(self.model, request)
            samples = shape_samples(req.model, PiecewiseC4Trajectory(req.times, req.positions), req.kind,
                                    req.shaper_design, req.rate_hz, max_samples=MAX_SHAPE_SAMPLES)
            return shaped_samples_to_response(samples, req, self.model, response)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        except Exception as exc:       # a node never dies of a request: answer, log once, keep serving
            self.get_logger().error(f"shape_trajectory: unexpected {type(exc).__name__}: {exc}")
            return _failed(response, FlexmodalError(f"internal error ({type(exc).__name__}: {exc})"))

    def on_closed_chain_map(self, request, response):
        try:
            check_map_request_size(request.num_configurations, self.max_map)
            self.closed_chain.modal_map(request, response, self.get_clock().now().to_msg())
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        response.success, response.message = True, ""
        return response

    def on_timer(self):
        raw = self.joint_states.take_latest()
        if raw is not None:
            self.latest = (raw, seconds(self._clock))
        if self.latest is None or seconds(self._clock) - self.latest[1] > self.timeout:
            return
        msg = deserialize_message(self.latest[0], JointState)
        if self.closed_chain:
            return self.publish_closed_chain(msg)
        try:
            q = joint_state_to_configuration(self.model, msg, self.link_state)
        except FlexmodalError as exc:
            if self._throttle():
                self.get_logger().warn(f"ignoring joint state: {exc}")
            return
        stamp = msg.header.stamp
        result = self._live_result(q)
        self.publisher.publish(modal_result_to_msg(result, self.model.joint_names, stamp,
                                                   limit_warnings(self.model, q, "joint_states")))

    # --- polynomial fast path (live topic) and ~/expand_modal_parameters ---------------------------
    def _init_polynomial_fast_path(self):
        method = self.declare_parameter("modal_method", "exact").value
        order = self.declare_parameter("expansion_order", 3).value
        tolerance = self.declare_parameter("expansion_tolerance", 0.0).value
        radius = self.declare_parameter("trust_radius", 0.0).value
        if method not in ("exact", "polynomial"):
            raise FlexmodalError(f"parameters: modal_method must be 'exact' or 'polynomial', got {method!r}")
        if order < 1 or tolerance < 0 or radius < 0:
            raise FlexmodalError("parameters: expansion_order must be >= 1, expansion_tolerance and "
                                 "trust_radius >= 0 (0 = the core's default / automatic)")
        self.expansion_order, self.expansion_tolerance = int(order), float(tolerance) or None
        self.tracker = None
        if method == "polynomial":            # the parametric core is imported only when used
            from ..expansion.live import PolynomialModalTracker

            self.tracker = PolynomialModalTracker(self.model, self.expansion_order, self.expansion_tolerance,
                                                  radius or None)
            self.tracker.warm_up()
        self.create_service(ExpandModalParameters, "~/expand_modal_parameters", locked(self.lock, self.on_expand))

    def _live_result(self, q):
        """Live modal parameters: polynomial fast path if enabled, exact AMA otherwise."""
        return self.tracker(q) if self.tracker is not None else modal_analysis(self.model, q, self.data)

    def on_expand(self, request, response):
        from ..expansion.recursion import expand
        from ..expansion.flexible_joint import FlexibleJointSystem
        from ..expansion.live import LIVE_TOLERANCE

        try:
            args = expansion_request_to_core(self.model, request)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                poly = expand(FlexibleJointSystem(self.model), args["q"], args["order"] or self.expansion_order,
                              args["modes"], left=False, tolerance=self.expansion_tolerance or LIVE_TOLERANCE)
            if args["output_path"]:
                poly.save(args["output_path"])
            if args["use_for_live"] and self.tracker is not None:
                self.tracker.install(poly)
            result = modal_analysis(self.model, args["q"], self.data)
        except REQUEST_ERRORS as exc:
            return _failed(response, exc)
        except OSError as exc:
            return _failed(response, FlexmodalError(f"output_path: cannot write ({exc.strerror})"))
        notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        if args["use_for_live"] and self.tracker is None:
            notes.append("use_for_live ignored: the node runs with modal_method 'exact'")
        expansion_to_response(poly, result, self.model.joint_names, response, notes,
                              self.get_clock().now().to_msg())
        response.success, response.message = True, ""
        return response

    def publish_closed_chain(self, msg):
        try:
            self.publisher.publish(self.closed_chain.live(msg, msg.header.stamp))
        except REQUEST_ERRORS as exc:
            if self._throttle():
                self.get_logger().warn(f"ignoring joint state: {exc}")

    def destroy_node(self):
        if hasattr(self, "parameters_service"):
            self.parameters_service.stop()
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

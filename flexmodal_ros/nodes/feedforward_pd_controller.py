"""ROS 2 node ``feedforward_pd_controller``: flexible-joint feedforward + motor PD torque controller.

Runs :class:`flexmodal_ros.control.FailSafeController` (tracking law, hold law (2.2)-(2.3) and the
fail-safe policy documented there). One control cycle per ``joint_states`` sample (the simulator,
or gz_ros2_control's joint_state_broadcaster, publishes at ``rate_hz``): the sample's stamp is the
cycle time, the command goes out on ``effort_controller/commands`` (std_msgs/Float64MultiArray,
motor torques [N m] in URDF joint order). Topic names are relative (``-r __ns:=/arm1`` or launch
``namespace:=arm1``: ``/arm1/joint_states``, ``/arm1/effort_controller/commands``). On the steady clock the cycles run on a thread of their
own that waits for joint states only, and the same thread checks a watchdog ``watchdog_rate_hz``
times per second. With ``native_cycle`` (true, read-only) that thread runs in C: the steady cycles
(HOLD, or TRACKING inside the loaded segment, with a plausible new sample and a finite,
unsaturated command) run there without Python, every other sample and the overdue watchdog run
the Python cycle, with the same commands to the bit; false, or flexmodal_native not installed (a
warning says so): every cycle in Python (the three cycle engines: flexmodal_ros/nodes/cycle_engines.py).
The generated control law is compiled at
start (cached); without a C compiler or a writable cache (``FLEXMODAL_CACHE``) it runs on CasADi's
virtual machine instead (a warning says so; every cycle in Python). With ``use_sim_time`` the
executor runs both (a joint-state callback and a timer on simulation time): it also takes /clock,
and a watchdog on another thread could read a simulation time newer than the states it has seen.
The watchdog publishes the STALE static-hold command when no valid joint state arrived for
``state_timeout_s`` (the drive holds the last command in between, zero-order hold).

Parameters, read-only: ``robot`` or ``urdf_path`` + ``params_path`` (gains kp/kd and effort limits
from there); ``link_state`` ("absolute": /joint_states of the built-in simulator; "deflection":
exported robots in Gazebo or ``mujoco_simulator``, whose commands are then the motor-joint efforts
W τ_m: flexmodal_ros/export/convention.py); ``use_sim_time`` (watchdog and stale-state checks on
the ROS clock, i.e. simulation time: a slow simulation slows the controller's time instead of
tripping ``state_timeout_s``; otherwise the steady clock, for real robots); ``rate_hz`` (1000, the expected joint-state rate: cycles are reported late in the
statistics when they are more than one period apart); ``watchdog_rate_hz`` (100);
``shaping`` (none | zv | zvd | ei: each accepted reference is input-shaped with the modes of the
configurations along it, computed with the current gains, flexmodal_ros/shaping; the added delay
is reported on ``~/status`` with the acceptance; on the steady clock the shaping runs outside the
lock, so the cycles go on meanwhile); ``shaping_modal`` (exact | polynomial: the shaped
modes' exact eigenvalues at every path sample, or their polynomial eigenvalues); ``shaper_design``
(fixed | robust | time-varying | auto, default auto: flexmodal_ros/shaping/shaper_design.py; the
design chosen, why, the predicted residual and, when it dominates, what the shaper does not treat
are on ``~/status`` with the acceptance); ``realtime_priority`` /
``cpu`` (SCHED_FIFO and CPU pinning, off by default: flexmodal_ros/nodes/realtime.py);
``max_excitation_torque`` (declared as 10 % of the URDF effort limits per joint; one value = every
joint [N m]) and ``max_excitation_duration_s`` (1.0): bounds of ``~/excite``.
Settable at run time (``ros2 param set``; checked, refused with a reason, applied between two
cycles): ``use_feedforward`` (true; false = PD only); ``kp``, ``kd`` (declared with the params
YAML's gains, so ``ros2 param get/dump`` show the gains in use; a single number sets every joint,
``ros2 param set /feedforward_pd_controller kp 3000.0``; an empty list the YAML's again; refused if
the closed loop at the measured position would not be stable, continuous or sampled at ``rate_hz``
with the command one period late); ``state_timeout_s`` (0.05);
``start_tolerance`` (0.05 rad or m: the first waypoint must be this close to the measured
position); ``position_margin`` (0.1), ``velocity_scale`` (1.0), ``velocity_limits`` (declared
with the URDF's, per joint, before ``velocity_scale``: the speed limit is velocity_limits ×
velocity_scale), ``acceleration_limits`` (declared as 10 per s × the speed limit, and following
velocity_limits and velocity_scale until set itself), ``state_velocity_factor`` (3.0),
``max_trajectory_points`` (1000), ``max_trajectory_duration_s`` (3600), ``max_start_delay_s`` (60:
a reference stamped to start later than this after the last joint state is refused): see
:class:`flexmodal_ros.control.SafetyLimits`. Per-joint lists take one number for every joint. Integers
are accepted for double parameters; other type mismatches are refused with a one-line reason.
Read-only: everything else, ``use_sim_time`` included.

Out of the limits (:mod:`flexmodal_ros.control.failsafe`): joint states beyond the URDF position
limits + ``position_margin`` that keep coming for ``state_timeout_s`` are the measured state: the
controller holds there (mode ``out_of_limits`` on ``~/status``), refuses trajectories, and goes
back to HOLD once the robot is inside again; service ``~/recover`` (std_srvs/Trigger) moves it back
inside with one bounded C⁴ segment within the speed and acceleration limits.

Topics in: ``joint_states`` (link joints and ``<joint>_motor``), ``~/reference_trajectory``
(trajectory_msgs/JointTrajectory: waypoints joined by C⁴ 9th-order segments timed by
time_from_start; when every point carries velocities and accelerations, samples of a reference
followed through their C⁴ interpolation and not shaped again, e.g. the output of the modal
server's ``~/shape_trajectory``, :class:`flexmodal_ros.robot.trajectory.SampledC4Trajectory`; header.stamp = start time on the joint-state clock, zero = now (the first cycle that runs it, reported as "tracking started at t=..."); a message too
large for max_trajectory_points is refused before it is deserialized, so that a huge trajectory
cannot hold up the control cycles). Out:
``effort_controller/commands``, ``~/status`` (std_msgs/String: mode changes, rejected inputs,
saturation, faults of the node's callbacks; a message repeated within 1 s is sent once, the next
one counts the suppressed ones).
Service ``~/excite`` (flexmodal_interfaces/Excite): a motor torque pulse or chirp added to the hold
law's torque before the saturation, at the next cycle or at a given joint-state time, only while
holding and within the bounds above (FailSafeController.excite; the steady C cycles pause while one
is scheduled). Service ``~/statistics`` (std_srvs/Trigger, JSON in ``message``: cycles, compute time
per cycle [µs] = from the start of the joint-state callback (serialized sample in hand: reading
it is part of the cycle) to the command handed to the publisher: compute_us_p50/p90/p99/p999/max over the last 20 s, compute_us_samples and
compute_us_over (count above 200 µs); late_cycles = cycles that started
more than 1.5 periods after the previous one, native_cycles = cycles run in C, counters, mode); ``~/reset_statistics`` (Trigger:
clears the compute-time window and late_cycles, e.g. right before a trajectory).
"""
import json
import sys
import time

from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from flexmodal_interfaces.srv import Excite

from ..control import failsafe_controller
from ..control.excitation import EXCITATION_MAX_DURATION, default_excitation_limit
from ..core.errors import FlexmodalError
from ..export.convention import check_link_state
from ..shaping import DEFAULT_DESIGN, ReferenceShaper, check_design, check_modal, check_shaping
from .base import declare_robot_model, declare_typed, run_node, seconds, timing_clock
from .controller_parameters import declare_settable, safety_limits
from .controller_status import StatusReporter
from .cycle_engines import select_engine
from .guard import GuardedNode
from .conversions import (JointStateReader, TorqueCommandWriter, excite_request_to_core, max_trajectory_bytes,
                          trajectory_to_core)
from .polled import locked
from .conversions.shaping_messages import trajectory_rates_to_core
from .realtime import TimingWindow, apply_realtime, declare_realtime

STATS_WINDOW = 20_000      # compute times kept for the statistics: the last 20 s at 1 kHz
COMPUTE_BUDGET_US = 200.0   # issue 6 acceptance: p99 compute per cycle <= 200 µs


class FeedforwardPdController(GuardedNode):
    """Thin shell: joint states / trajectories → conversions → FailSafeController → commands; the
    cycles run on one of the engines of :mod:`.cycle_engines`."""

    def __init__(self, **kwargs):
        super().__init__("feedforward_pd_controller", **kwargs)
        self.model = declare_robot_model(self)
        p = {name: declare_typed(self, name, default) for name, default in (
            ("rate_hz", 1000.0), ("watchdog_rate_hz", 100.0), ("link_state", "absolute"), ("shaping", "none"),
            ("shaping_modal", "exact"), ("shaper_design", DEFAULT_DESIGN), ("native_cycle", True),
            ("max_excitation_torque", [float(v) for v in default_excitation_limit(self.model)]),
            ("max_excitation_duration_s", EXCITATION_MAX_DURATION))}
        self.shaping = check_shaping(p["shaping"], FlexmodalError)
        self.shaper_design = check_design(p["shaper_design"], FlexmodalError)
        self.shaping_modal = check_modal(p["shaping_modal"], FlexmodalError)
        link_state = check_link_state(p["link_state"], error=FlexmodalError)
        self.timing_clock = timing_clock(self)      # sim time with use_sim_time, else steady
        for name in ("rate_hz", "watchdog_rate_hz"):
            if not p[name] > 0:
                raise FlexmodalError(f"{name}: must be > 0, got {p[name]}")
        realtime = declare_realtime(self)
        self.settable = declare_settable(self, self.model)
        self.ctrl = failsafe_controller(self.model, self.get_logger().warning, p["rate_hz"])
        self.ctrl.set_excitation_limits(p["max_excitation_torque"], p["max_excitation_duration_s"])
        self._read_state = JointStateReader(self.model, link_state)
        self._apply_parameters(self.settable.values)
        self.compute_us = TimingWindow(STATS_WINDOW)
        self._serialize_command = TorqueCommandWriter(
            self.model.n, self.model.W if link_state == "deflection" else None)
        self.status = StatusReporter(self)
        self.status_pub = self.status.publisher
        self.fault_listeners.append(self.status.publish)
        on_joint_state, on_watchdog = (self.guarded(f, name) for f, name in (
            (self.on_joint_state, "joint_states"), (self.on_watchdog, "watchdog")))
        # Best effort, newest only: a lost state costs one cycle instead of stalling the ones after
        # it until the reliable protocol repairs the loss (matches reliable publishers too). Raw:
        # the callback gets the serialized bytes (no message object built per sample).
        states_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.period = 1.0 / p["rate_hz"]
        self.engine = select_engine(self, self.ctrl, self._read_state, self._serialize_command, self.compute_us,
                                    on_joint_state, on_watchdog, self.period, 1.0 / p["watchdog_rate_hz"],
                                    states_qos, self.timing_clock, p["native_cycle"])
        self.lock, self.timing = self.engine.lock, self.engine.timing
        self.control_thread, self.native_cycle = self.engine.thread, self.engine.native
        self.settable.on_change(locked(self.lock, self._apply_parameters))
        self.create_subscription(JointTrajectory, "~/reference_trajectory", self.on_trajectory, 10, raw=True)
        self.create_service(Trigger, "~/statistics", self.on_statistics)
        self.create_service(Excite, "~/excite", self.on_excite)
        self.create_service(Trigger, "~/reset_statistics", locked(self.lock, self.on_reset_statistics))
        self.create_service(Trigger, "~/recover", locked(self.lock, self.on_recover))
        scheduling = apply_realtime(self.get_logger(), *realtime)
        if self.control_thread is not None:
            self.control_thread.start()     # inherits the scheduling just applied
        self.get_logger().info(f"controlling '{self.model.name}' (kp {self.ctrl.model.kp.tolist()}, kd "
                               f"{self.ctrl.model.kd.tolist()}), feedforward "
                               f"{'on' if self.ctrl.use_feedforward else 'off'}, shaping {self.shaping} "
                               f"({self.shaping_modal} modes), steady cycles in "
                               f"{'C' if self.native_cycle else 'Python'}, {scheduling}")

    def destroy_node(self):
        # also called by rclpy on a node whose construction failed: only what was made is stopped
        if getattr(self, "control_thread", None) is not None:
            self.control_thread.stop()
        return super().destroy_node()

    def _apply_parameters(self, values):
        """The settable parameters → controller (checked first, then taken over together)."""
        v = values
        limits = safety_limits(v)
        self.ctrl.configure(kp=v["kp"], kd=v["kd"], limits=limits, state_timeout=v["state_timeout_s"],
                            start_tolerance=v["start_tolerance"])
        self.ctrl.use_feedforward = v["use_feedforward"]
        if self.shaping != "none":          # the modes along a path depend on the gains
            self.ctrl.shaper = ReferenceShaper(self.ctrl.model, self.shaping, modal=self.shaping_modal,
                                               shaper_design=self.shaper_design,
                                               law="feedforward" if v["use_feedforward"] else "pd_only")
        self._read_state.bounds, self._read_state.outer_bounds = self.ctrl.state_bounds, self.ctrl.plausible_bounds
        changed = [k for k in values if values[k] != self.settable.values.get(k)]
        if changed and hasattr(self, "status"):
            self.status.report("parameters set: " + ", ".join(f"{k} = {values[k]}" for k in changed))

    def on_joint_state(self, serialized):
        start = time.perf_counter()
        try:
            sample = self._read_state.from_bytes(serialized)
        except FlexmodalError as exc:
            self.ctrl.counters.rejected_samples += 1
            self.status.report_throttled(f"joint state rejected: {exc}")
            return
        try:
            self.ctrl.update_state(sample, seconds(self.timing_clock), validated=True)
        except FlexmodalError as exc:
            self.status.report_throttled(f"joint state rejected: {exc}")
            return
        command = self.ctrl.compute()
        if command is not None:
            self._send(command)
            self.compute_us.append(1e6 * (time.perf_counter() - start))
            timing = self.timing
            if timing.last_cycle >= 0 and start - timing.last_cycle > 1.5 * timing.period:
                timing.late_cycles += 1
            timing.last_cycle = start
        self.status.flush_events(self.ctrl.events)

    def on_watchdog(self):
        command = self.ctrl.watchdog(seconds(self.timing_clock))
        if command is not None:
            self._send(command)
        self.status.flush_events(self.ctrl.events)

    def on_trajectory(self, serialized):
        limit = max_trajectory_bytes(self.model.n, self.ctrl.limits.max_trajectory_points)
        try:
            if len(serialized) > limit:
                raise FlexmodalError(f"points: {len(serialized)} bytes, more than max_trajectory_points "
                                     f"({self.ctrl.limits.max_trajectory_points}) waypoints can take")
            try:
                msg = deserialize_message(serialized, JointTrajectory)
            except RuntimeError as exc:
                raise FlexmodalError(f"not a valid serialized JointTrajectory ({exc})") from None
            reference = trajectory_to_core(self.model, msg, self.ctrl.limits.max_trajectory_points)
            velocities, accelerations = trajectory_rates_to_core(self.model, msg)
        except FlexmodalError as exc:
            with self.lock:
                self.ctrl.counters.rejected_trajectories += 1
                self.status.report_throttled(f"trajectory rejected: {exc}")
            return
        try:
            with self.lock:
                checked = self.ctrl.check_trajectory(*reference, now=seconds(self.timing_clock), velocities=velocities,
                                                     accelerations=accelerations)
            shaped = self.ctrl.shape_trajectory(checked)        # the shaping takes a while: the cycles go on
            with self.lock:
                description = self.ctrl.accept_trajectory(shaped)
                # reported before the lock is let go: the next cycle may start it, and its "tracking
                # started" must follow the acceptance on ~/status
                self.status.report(description, warn="WARNING" in description)
        except FlexmodalError as exc:
            with self.lock:
                self.status.report_throttled(f"trajectory rejected: {exc}")

    def on_recover(self, request, response):
        try:
            text = self.ctrl.recover()
        except FlexmodalError as exc:
            response.success, response.message = False, str(exc)
            return response
        self.status.report(text)
        response.success, response.message = True, text
        return response

    def on_excite(self, request, response):
        """A motor excitation on top of the hold law (FailSafeController.excite): checked, then
        scheduled between two cycles."""
        try:
            excitation, start_now = excite_request_to_core(self.model, request)
            with self.lock:
                description = self.ctrl.excite(excitation, start_now)
        except FlexmodalError as exc:
            with self.lock:
                self.status.report_throttled(f"excitation rejected: {exc}")
            response.success, response.message = False, str(exc)
            return response
        with self.lock:
            self.status.report(description)
        response.success, response.message = True, description
        response.start_time = 0.0 if start_now else float(excitation.start)
        return response

    def on_statistics(self, request, response):
        response.success = True
        response.message = json.dumps(self.statistics())
        return response

    def on_reset_statistics(self, request, response):
        self.compute_us.clear()
        self.timing.late_cycles, self.timing.last_cycle = 0, -1.0
        response.success, response.message = True, "compute-time and late-cycle statistics cleared"
        return response

    def statistics(self):
        """Cycle counts, compute time per cycle [µs] (distribution over the last cycles), mode. The
        counters and the window are copied under the lock, the distribution is computed after it."""
        with self.lock:
            c = self.ctrl.counters
            out = {"mode": self.ctrl.mode.value, "cycles": c.cycles, "rejected_samples": c.rejected_samples,
                   "rejected_trajectories": c.rejected_trajectories, "saturated_cycles": c.saturated_cycles,
                   "saturated_per_joint": dict(zip(self.model.joint_names, list(c.saturated_per_joint))),
                   "late_cycles": self.timing.late_cycles, "native_cycles": self.engine.native_cycles}
            compute_us = self.compute_us.values()
        return {**out, **self.compute_us.distribution("compute_us", COMPUTE_BUDGET_US, compute_us)}

    def _send(self, command):
        self.engine.publish(self._serialize_command(command.tau))
        self.status.saturated(self.model.joint_names, command.saturated)


# A thread waiting for the GIL gets it after at most this long [s] (Python's default: 5 ms): the
# control thread waits no longer than that behind the shaping of a new reference.
GIL_SWITCH_INTERVAL = 2e-4


def main(args=None):
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    return run_node(FeedforwardPdController, "feedforward_pd_controller", args)


if __name__ == "__main__":
    raise SystemExit(main())

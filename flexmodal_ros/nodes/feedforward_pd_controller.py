"""ROS 2 node ``feedforward_pd_controller``: flexible-joint feedforward + motor PD torque controller.

Runs :class:`flexmodal_ros.control.FailSafeController` (tracking law, hold law (2.2)-(2.3) and the
fail-safe policy documented there). One control cycle per ``/joint_states`` sample (the simulator,
or gz_ros2_control's joint_state_broadcaster, publishes at ``rate_hz``): the sample's stamp is the
cycle time, the command goes out on ``/effort_controller/commands`` (std_msgs/Float64MultiArray,
motor torques [N m] in URDF joint order). On the steady clock the cycles run on a thread of their
own that waits for joint states only (flexmodal_ros/nodes/polled.py: SubscriptionThread; the
executor keeps the trajectories, parameters and services, which never run during a cycle), and the
same thread checks a watchdog ``watchdog_rate_hz`` times per second. With ``native_cycle`` (true,
read-only) that thread runs in C (flexmodal_ros/nodes/native_cycle.py): the steady cycles (HOLD, or
TRACKING inside the loaded segment, with a plausible new sample and a finite, unsaturated command)
run there without Python, every other sample and the overdue watchdog run the Python cycle, with
the same commands to the bit; false, or no C compiler or rcl headers (a warning says so): every
cycle in Python. With ``use_sim_time`` the
executor runs both (a joint-state callback and a timer on simulation time): it also takes /clock,
and a watchdog on another thread could read a simulation time newer than the states it has seen.
The watchdog publishes the STALE static-hold command when no valid joint state arrived for
``state_timeout_s`` (the drive holds the last command in between, zero-order hold).

Parameters, read-only: ``robot`` or ``urdf_path`` + ``params_path`` (gains kp/kd and effort limits
from there); ``link_state`` ("absolute": /joint_states of the built-in simulator; "deflection":
exported robots in Gazebo or ``mujoco_simulator``, whose commands are then the motor-joint efforts
W τ_m: flexmodal_ros/export/convention.py); ``use_sim_time`` (watchdog and stale-state checks on
the ROS clock, i.e. simulation time; otherwise the steady clock); ``rate_hz`` (1000, the expected joint-state rate: cycles are reported late in the
statistics when they are more than one period apart); ``watchdog_rate_hz`` (100);
``shaping`` (none | zv | zvd | ei: each accepted reference is input-shaped with the modes of the
configurations along it, computed with the current gains, flexmodal_ros/shaping; the added delay
is reported on ``~/status`` with the acceptance; on the steady clock the shaping runs outside the
lock, so the cycles go on meanwhile); ``shaping_modal`` (exact | polynomial: the shaped
modes' exact eigenvalues at every path sample, or their polynomial eigenvalues); ``realtime_priority`` /
``cpu`` (SCHED_FIFO and CPU pinning, off by default: flexmodal_ros/nodes/realtime.py).
Settable at run time (``ros2 param set``; checked, refused with a reason, applied between two
cycles): ``use_feedforward`` (true; false = PD only); ``kp``, ``kd`` (empty = the params YAML;
one value = every joint, or one per joint; refused if the closed loop at the measured position
would not be stable); ``state_timeout_s`` (0.05); ``start_tolerance`` (0.05 rad or m: the first
waypoint must be this close to the measured position); ``position_margin`` (0.1), ``velocity_scale``
(1.0 × the URDF velocity limits), ``velocity_limits`` / ``acceleration_limits`` (empty = URDF / 10 ×
the velocity limit per s), ``state_velocity_factor`` (3.0), ``max_trajectory_points`` (1000),
``max_trajectory_duration_s`` (3600): see :class:`flexmodal_ros.control.SafetyLimits`. Integers
are accepted for double parameters; other type mismatches are refused with a one-line reason.

Topics in: ``/joint_states`` (link joints and ``<joint>_motor``), ``~/reference_trajectory``
(trajectory_msgs/JointTrajectory: waypoints joined by C⁴ 9th-order segments timed by
time_from_start; header.stamp = start time on the joint-state clock, zero = now (the first cycle that runs it, reported as "tracking started at t=..."); a message too
large for max_trajectory_points is refused before it is deserialized, so that a huge trajectory
cannot hold up the control cycles). Out:
``/effort_controller/commands``, ``~/status`` (std_msgs/String: mode changes, rejected inputs,
saturation; a message repeated within 1 s is sent once, the next one counts the suppressed ones).
Service ``~/statistics`` (std_srvs/Trigger, JSON in ``message``: cycles, compute time
per cycle [µs] = from the start of the joint-state callback (serialized sample in hand: reading
it is part of the cycle) to the command handed to the publisher: compute_us_p50/p90/p99/p999/max over the last 20 s, compute_us_samples and
compute_us_over (count above 200 µs); late_cycles = cycles that started
more than 1.5 periods after the previous one, native_cycles = cycles run in C, counters, mode); ``~/reset_statistics`` (Trigger:
clears the compute-time window and late_cycles, e.g. right before a trajectory).
"""
import json
import sys
import threading
import time

from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..control import FailSafeController, SafetyLimits
from ..core.errors import BuildError, FlexmodalError
from ..export.convention import check_link_state
from ..shaping import ReferenceShaper, check_modal, check_shaping
from .base import (DOUBLE_ARRAY, MessageThrottle, SettableParameters, declare_robot_model, declare_typed,
                     run_node, seconds, timing_clock)
from .conversions import JointStateReader, TorqueCommandWriter, max_trajectory_bytes, trajectory_to_core
from .native_cycle import NativeCycleThread
from .polled import SubscriptionThread, locked
from .realtime import CycleTiming, TimingWindow, apply_realtime, declare_realtime

STATS_WINDOW = 20_000      # compute times kept for the statistics: the last 20 s at 1 kHz
COMPUTE_BUDGET_US = 200.0   # issue 6 acceptance: p99 compute per cycle <= 200 µs


class FeedforwardPdController(Node):
    """Thin shell: joint states / trajectories → conversions → FailSafeController → commands."""

    def __init__(self, **kwargs):
        super().__init__("feedforward_pd_controller", **kwargs)
        self.model = declare_robot_model(self)
        p = {name: declare_typed(self, name, default) for name, default in (
            ("rate_hz", 1000.0), ("watchdog_rate_hz", 100.0), ("link_state", "absolute"), ("shaping", "none"),
            ("shaping_modal", "exact"), ("native_cycle", True))}
        self.shaping = check_shaping(p["shaping"], FlexmodalError)
        self.shaping_modal = check_modal(p["shaping_modal"], FlexmodalError)
        link_state = check_link_state(p["link_state"], error=FlexmodalError)
        self._clock = timing_clock(self)      # sim time with use_sim_time, else steady
        for name in ("rate_hz", "watchdog_rate_hz"):
            if not p[name] > 0:
                raise FlexmodalError(f"{name}: must be > 0, got {p[name]}")
        realtime = declare_realtime(self)
        defaults = SafetyLimits()
        self.settable = SettableParameters(self)
        for name, default in (("use_feedforward", True), ("kp", DOUBLE_ARRAY), ("kd", DOUBLE_ARRAY),
                              ("state_timeout_s", 0.05), ("start_tolerance", 0.05),
                              ("position_margin", defaults.position_margin),
                              ("velocity_scale", defaults.velocity_scale),
                              ("velocity_limits", DOUBLE_ARRAY), ("acceleration_limits", DOUBLE_ARRAY),
                              ("state_velocity_factor", defaults.state_velocity_factor),
                              ("max_trajectory_points", defaults.max_trajectory_points),
                              ("max_trajectory_duration_s", defaults.max_trajectory_duration)):
            self.settable.declare(name, default)
        self.ctrl = FailSafeController(self.model)
        self._read_state = JointStateReader(self.model, link_state)
        self._apply_parameters(self.settable.values)
        self.compute_us = TimingWindow(STATS_WINDOW)
        self._throttle = MessageThrottle(1.0)
        self._event_mode = None             # mode of the last reported controller event
        self.command_pub = self.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self._serialize_command = TorqueCommandWriter(
            self.model.n, self.model.W if link_state == "deflection" else None)
        self.status_pub = self.create_publisher(
            String, "~/status", QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        # Best effort, newest only: a lost state costs one cycle instead of stalling the ones after
        # it until the reliable protocol repairs the loss (matches reliable publishers too). Raw:
        # the callback gets the serialized bytes (no message object built per sample).
        states_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.period = 1.0 / p["rate_hz"]
        watchdog_period = 1.0 / p["watchdog_rate_hz"]
        self.native_cycle = None
        if self._clock.clock_type is not ClockType.STEADY_TIME:
            # sim time: the executor takes /clock, so it runs the cycles and the watchdog too
            self.control_thread, self.lock, self.timing = None, threading.Lock(), CycleTiming(self.period)
            self.create_subscription(JointState, "/joint_states", locked(self.lock, self.on_joint_state), states_qos,
                                     raw=True)
            self.create_timer(watchdog_period, locked(self.lock, self.on_watchdog), clock=self._clock)
        elif p["native_cycle"] and (native := self._native_cycle(states_qos, watchdog_period)) is not None:
            self.control_thread = self.native_cycle = native
            self.lock, self.timing = native.lock, native.timing
        else:
            self.lock, self.timing = threading.Lock(), CycleTiming(self.period)
            self.control_thread = SubscriptionThread(self, JointState, "/joint_states", states_qos, self.on_joint_state,
                                                     self.on_watchdog, watchdog_period, self.lock, raw=True)
        self.settable.on_change(locked(self.lock, self._apply_parameters))
        self.create_subscription(JointTrajectory, "~/reference_trajectory", self.on_trajectory, 10, raw=True)
        self.create_service(Trigger, "~/statistics", self.on_statistics)
        self.create_service(Trigger, "~/reset_statistics", locked(self.lock, self.on_reset_statistics))
        scheduling = apply_realtime(self.get_logger(), *realtime)
        if self.control_thread is not None:
            self.control_thread.start()     # inherits the scheduling just applied
        self.get_logger().info(f"controlling '{self.model.name}' (kp {self.ctrl.model.kp.tolist()}, kd "
                               f"{self.ctrl.model.kd.tolist()}), feedforward "
                               f"{'on' if self.ctrl.use_feedforward else 'off'}, shaping {self.shaping} "
                               f"({self.shaping_modal} modes), steady cycles in "
                               f"{'C' if self.native_cycle else 'Python'}, {scheduling}")

    def _native_cycle(self, states_qos, watchdog_period):
        """The C cycles (native_cycle.py), or None with a warning saying why they cannot run."""
        try:
            return NativeCycleThread(self, "/joint_states", states_qos, self.ctrl, self._read_state,
                                     self._serialize_command, self.command_pub, self.compute_us, self.on_joint_state,
                                     self.on_watchdog, watchdog_period, self.period)
        except BuildError as exc:
            self.get_logger().warning(f"native_cycle: the C cycles are unavailable ({exc}); every cycle runs "
                                      "in Python")
            return None

    def destroy_node(self):
        if self.control_thread is not None:
            self.control_thread.stop()
        return super().destroy_node()

    def _apply_parameters(self, values):
        """The settable parameters → controller (checked first, then taken over together)."""
        v = values
        limits = SafetyLimits(position_margin=v["position_margin"], velocity_scale=v["velocity_scale"],
                              velocity_limits=v["velocity_limits"] or None,
                              acceleration_limits=v["acceleration_limits"] or None,
                              state_velocity_factor=v["state_velocity_factor"],
                              max_trajectory_points=v["max_trajectory_points"],
                              max_trajectory_duration=v["max_trajectory_duration_s"])
        if not 0 < v["velocity_scale"] < float("inf"):
            raise FlexmodalError(f"velocity_scale: must be a positive number, got {v['velocity_scale']}")
        gains = {key: v[key] or getattr(self.model, key) for key in ("kp", "kd")}   # empty = params YAML
        self.ctrl.configure(kp=gains["kp"], kd=gains["kd"], limits=limits, state_timeout=v["state_timeout_s"],
                            start_tolerance=v["start_tolerance"])
        self.ctrl.use_feedforward = v["use_feedforward"]
        if self.shaping != "none":          # the modes along a path depend on the gains
            self.ctrl.shaper = ReferenceShaper(self.ctrl.model, self.shaping, modal=self.shaping_modal)
        self._read_state.bounds = self.ctrl.state_bounds
        changed = [k for k in values if values[k] != self.settable.values.get(k)]
        if changed and hasattr(self, "status_pub"):
            self._report("parameters set: " + ", ".join(f"{k} = {values[k]}" for k in changed))

    def on_joint_state(self, serialized):
        start = time.perf_counter()
        try:
            sample = self._read_state.from_bytes(serialized)
        except FlexmodalError as exc:
            self.ctrl.counters.rejected_samples += 1
            self._report_throttled(f"joint state rejected: {exc}")
            return
        try:
            self.ctrl.update_state(sample, seconds(self._clock), validated=True)
        except FlexmodalError as exc:
            self._report_throttled(f"joint state rejected: {exc}")
            return
        command = self.ctrl.compute()
        if command is not None:
            self._send(command)
            self.compute_us.append(1e6 * (time.perf_counter() - start))
            timing = self.timing
            if timing.last_cycle >= 0 and start - timing.last_cycle > 1.5 * timing.period:
                timing.late_cycles += 1
            timing.last_cycle = start
        self._flush_events()

    def on_watchdog(self):
        command = self.ctrl.watchdog(seconds(self._clock))
        if command is not None:
            self._send(command)
        self._flush_events()

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
        except FlexmodalError as exc:
            with self.lock:
                self.ctrl.counters.rejected_trajectories += 1
                self._report_throttled(f"trajectory rejected: {exc}")
            return
        try:
            with self.lock:
                checked = self.ctrl.check_trajectory(*reference, now=seconds(self._clock))
            shaped = self.ctrl.shape_trajectory(checked)        # tens of ms: the cycles go on
            with self.lock:
                description = self.ctrl.accept_trajectory(shaped)
        except FlexmodalError as exc:
            with self.lock:
                self._report_throttled(f"trajectory rejected: {exc}")
            return
        with self.lock:
            self._report(description, warn="WARNING" in description)

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
                   "late_cycles": self.timing.late_cycles,
                   "native_cycles": self.native_cycle.native_cycles if self.native_cycle else 0}
            compute_us = self.compute_us.values()
        return {**out, **self.compute_us.distribution("compute_us", COMPUTE_BUDGET_US, compute_us)}

    def _send(self, command):
        self.command_pub.publish(self._serialize_command(command.tau))
        if command.saturated.any():
            joints = [j for j, s in zip(self.model.joint_names, command.saturated) if s]
            self._report_throttled(f"torque saturated at the effort limit: {', '.join(joints)}")

    def _flush_events(self):
        """Report the controller's events: a change of mode always, a repeat of the same mode
        (e.g. HOLD re-entered because the joint-state time keeps going backwards at 1 kHz)
        throttled per kind of message."""
        while self.ctrl.events:
            text = self.ctrl.events.pop(0)
            mode = text.split(":", 1)[0]
            if mode == self._event_mode:
                text = self._throttle(text)
            self._event_mode = mode
            if text:
                self._report(text)

    def _report_throttled(self, text):
        """Warn and publish ``text``, each kind of message at most once per second (bad inputs can
        arrive at 1 kHz); the next one of a kind says how many were suppressed."""
        text = self._throttle(text)
        if text:
            self._report(text, warn=True)

    def _report(self, text, warn=False):
        if warn:
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        self.status_pub.publish(String(data=text))


# A thread waiting for the GIL gets it after at most this long [s] (Python's default: 5 ms): the
# control thread waits no longer than that behind the shaping of a new reference.
GIL_SWITCH_INTERVAL = 2e-4


def main(args=None):
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    return run_node(FeedforwardPdController, "feedforward_pd_controller", args)


if __name__ == "__main__":
    raise SystemExit(main())

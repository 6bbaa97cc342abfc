"""ROS 2 node ``feedforward_pd_controller``: flexible-joint feedforward + motor PD torque controller.

Runs :class:`flexmodal_ros.control.FailSafeController` (tracking law, hold law (2.2)-(2.3) and the
fail-safe policy documented there). One control cycle per ``joint_states`` sample (the simulator,
or gz_ros2_control's joint_state_broadcaster, publishes at ``rate_hz``): the sample's stamp is the
cycle time, the command goes out on ``effort_controller/commands`` (std_msgs/Float64MultiArray,
motor torques [N m] in URDF joint order). Topic names are relative (``-r __ns:=/arm1`` or launch
``namespace:=arm1``: ``/arm1/joint_states``, ``/arm1/effort_controller/commands``). On the steady clock the cycles run on a thread of their
own that waits for joint states only (flexmodal_ros/nodes/polled.py: SubscriptionThread; the
executor keeps the trajectories, parameters and services, which never run during a cycle), and the
same thread checks a watchdog ``watchdog_rate_hz`` times per second. With ``native_cycle`` (true,
read-only) that thread runs in C (flexmodal_ros/nodes/native_cycle.py, the flexmodal_native
package built at install time, reading the joint states and writing every command on an rcl node
of its own): the steady cycles (HOLD, or TRACKING inside the loaded segment, with a plausible new
sample and a finite, unsaturated command) run there without Python, every other sample and the
overdue watchdog run the Python cycle, with the same commands to the bit; false, or flexmodal_native
not installed (a warning says so): every cycle in Python. The generated control law is compiled at
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
the closed loop at the measured position would not be stable); ``state_timeout_s`` (0.05);
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
import threading
import time

from rclpy.clock import ClockType
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from flexmodal_interfaces.srv import Excite

from ..control import FailSafeController, SafetyLimits
from ..control.excitation import EXCITATION_MAX_DURATION, default_excitation_limit
from ..control.limits import ACCELERATION_PER_VELOCITY, DEFAULT_VELOCITY_LIMIT
from ..core.errors import BuildError, FlexmodalError
from ..export.convention import check_link_state
from ..shaping import DEFAULT_DESIGN, ReferenceShaper, check_design, check_modal, check_shaping
from .base import (MessageThrottle, SettableParameters, declare_robot_model, declare_typed,
                   run_node, seconds, timing_clock)
from .guard import GuardedNode
from .conversions import (JointStateReader, TorqueCommandWriter, excite_request_to_core, max_trajectory_bytes,
                          trajectory_to_core)
from .native_cycle import NativeCycleThread
from .polled import SubscriptionThread, locked
from .conversions.shaping_messages import trajectory_rates_to_core
from .realtime import CycleTiming, TimingWindow, apply_realtime, declare_realtime

STATES, COMMANDS = "joint_states", "effort_controller/commands"   # relative: namespaces apply
COMMAND_QOS = QoSProfile(depth=10)        # reliable, volatile, keep last 10
STATS_WINDOW = 20_000      # compute times kept for the statistics: the last 20 s at 1 kHz
COMPUTE_BUDGET_US = 200.0   # issue 6 acceptance: p99 compute per cycle <= 200 µs


class FeedforwardPdController(GuardedNode):
    """Thin shell: joint states / trajectories → conversions → FailSafeController → commands."""

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
        self.settable = self._declare_settable()
        self.ctrl = self._controller()
        self.ctrl.set_excitation_limits(p["max_excitation_torque"], p["max_excitation_duration_s"])
        self._read_state = JointStateReader(self.model, link_state)
        self._apply_parameters(self.settable.values)
        self.compute_us = TimingWindow(STATS_WINDOW)
        self._throttle = MessageThrottle(1.0)
        self._event_mode = None             # mode of the last reported controller event
        self._serialize_command = TorqueCommandWriter(
            self.model.n, self.model.W if link_state == "deflection" else None)
        self.status_pub = self.create_publisher(
            String, "~/status", QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.fault_listeners.append(lambda text: self.status_pub.publish(String(data=text)))
        on_joint_state, on_watchdog = (self.guarded(f, name) for f, name in (
            (self.on_joint_state, "joint_states"), (self.on_watchdog, "watchdog")))
        # Best effort, newest only: a lost state costs one cycle instead of stalling the ones after
        # it until the reliable protocol repairs the loss (matches reliable publishers too). Raw:
        # the callback gets the serialized bytes (no message object built per sample).
        states_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.period = 1.0 / p["rate_hz"]
        watchdog_period = 1.0 / p["watchdog_rate_hz"]
        self.command_pub = self.native_cycle = None
        if self.timing_clock.clock_type is not ClockType.STEADY_TIME:
            # sim time: the executor takes /clock, so it runs the cycles and the watchdog too
            self.control_thread, self.lock, self.timing = None, threading.Lock(), CycleTiming(self.period)
            self.create_subscription(JointState, STATES, locked(self.lock, on_joint_state), states_qos, raw=True)
            self.create_timer(watchdog_period, locked(self.lock, on_watchdog), clock=self.timing_clock)
        elif p["native_cycle"] and (native := self._native_cycle(states_qos, watchdog_period, on_joint_state,
                                                                 on_watchdog)) is not None:
            self.control_thread = self.native_cycle = native      # it writes the commands too
            self.lock, self.timing = native.lock, native.timing
        else:
            self.lock, self.timing = threading.Lock(), CycleTiming(self.period)
            self.control_thread = SubscriptionThread(self, JointState, STATES, states_qos, on_joint_state,
                                                     on_watchdog, watchdog_period, self.lock, raw=True)
        if self.native_cycle is None:
            self.command_pub = self.create_publisher(Float64MultiArray, COMMANDS, COMMAND_QOS)
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

    def _controller(self):
        """The FailSafeController with the generated law compiled (user code generation, cached:
        flexmodal_ros/robot/inverse_dynamics/build.py); without a C compiler or a writable cache,
        the same law on CasADi's virtual machine, with a warning saying why and what it costs."""
        try:
            return FailSafeController(self.model)
        except BuildError as exc:
            self.get_logger().warning(
                f"control law: cannot compile it ({exc}); evaluating it with CasADi's virtual machine instead: "
                "~25x the compiled law's time per cycle (~0.1 ms instead of ~4 us), and every cycle runs in "
                "Python (no native_cycle)")
            return FailSafeController(self.model, compiled=False)

    def _native_cycle(self, states_qos, watchdog_period, on_joint_state, on_watchdog):
        """The C cycles (native_cycle.py), or None with a warning saying why they cannot run."""
        try:
            return NativeCycleThread(self, STATES, states_qos, COMMANDS, COMMAND_QOS, self.ctrl, self._read_state,
                                     self._serialize_command, self.compute_us, on_joint_state,
                                     on_watchdog, watchdog_period, self.period)
        except BuildError as exc:
            if self.ctrl.law.compiled is not None:        # else the law's warning said so
                self.get_logger().warning(
                    f"native_cycle: the C cycles are unavailable ({exc}); every cycle runs in Python: ~3x the "
                    "compute time per cycle at p99 (benchmarks/bench_controller_ros.py)")
            return None

    def _declare_settable(self):
        """The run-time parameters, declared with their effective values (module docstring)."""
        defaults, m = SafetyLimits(), self.model
        settable = SettableParameters(self)
        for name, default in (("use_feedforward", True), ("state_timeout_s", 0.05), ("start_tolerance", 0.05),
                              ("position_margin", defaults.position_margin), ("velocity_scale", defaults.velocity_scale),
                              ("state_velocity_factor", defaults.state_velocity_factor),
                              ("max_trajectory_points", defaults.max_trajectory_points),
                              ("max_trajectory_duration_s", defaults.max_trajectory_duration),
                              ("max_start_delay_s", defaults.max_start_delay)):
            settable.declare(name, default)
        urdf_velocity = [float(v) if v < float("inf") else DEFAULT_VELOCITY_LIMIT for v in m.velocity_limit]
        for name, default in (("kp", m.kp), ("kd", m.kd), ("velocity_limits", urdf_velocity)):
            settable.declare(name, [float(v) for v in default], per_joint=True)

        def acceleration(v):
            return [ACCELERATION_PER_VELOCITY * a * v["velocity_scale"] for a in v["velocity_limits"]]
        settable.declare("acceleration_limits", acceleration(settable.values), per_joint=True)
        settable.follow("acceleration_limits", ("velocity_limits", "velocity_scale"), acceleration)
        return settable

    def destroy_node(self):
        # also called by rclpy on a node whose construction failed: only what was made is stopped
        if getattr(self, "control_thread", None) is not None:
            self.control_thread.stop()
        return super().destroy_node()

    def _apply_parameters(self, values):
        """The settable parameters → controller (checked first, then taken over together)."""
        v = values
        limits = SafetyLimits(position_margin=v["position_margin"], velocity_scale=v["velocity_scale"],
                              velocity_limits=v["velocity_limits"], acceleration_limits=v["acceleration_limits"],
                              state_velocity_factor=v["state_velocity_factor"],
                              max_trajectory_points=v["max_trajectory_points"],
                              max_trajectory_duration=v["max_trajectory_duration_s"],
                              max_start_delay=v["max_start_delay_s"])
        if not 0 < v["velocity_scale"] < float("inf"):
            raise FlexmodalError(f"velocity_scale: must be a positive number, got {v['velocity_scale']}")
        self.ctrl.configure(kp=v["kp"], kd=v["kd"], limits=limits, state_timeout=v["state_timeout_s"],
                            start_tolerance=v["start_tolerance"])
        self.ctrl.use_feedforward = v["use_feedforward"]
        if self.shaping != "none":          # the modes along a path depend on the gains
            self.ctrl.shaper = ReferenceShaper(self.ctrl.model, self.shaping, modal=self.shaping_modal,
                                               shaper_design=self.shaper_design,
                                               law="feedforward" if v["use_feedforward"] else "pd_only")
        self._read_state.bounds, self._read_state.outer_bounds = self.ctrl.state_bounds, self.ctrl.plausible_bounds
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
            self.ctrl.update_state(sample, seconds(self.timing_clock), validated=True)
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
        command = self.ctrl.watchdog(seconds(self.timing_clock))
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
            velocities, accelerations = trajectory_rates_to_core(self.model, msg)
        except FlexmodalError as exc:
            with self.lock:
                self.ctrl.counters.rejected_trajectories += 1
                self._report_throttled(f"trajectory rejected: {exc}")
            return
        try:
            with self.lock:
                checked = self.ctrl.check_trajectory(*reference, now=seconds(self.timing_clock), velocities=velocities,
                                                     accelerations=accelerations)
            shaped = self.ctrl.shape_trajectory(checked)        # tens of ms: the cycles go on
            with self.lock:
                description = self.ctrl.accept_trajectory(shaped)
        except FlexmodalError as exc:
            with self.lock:
                self._report_throttled(f"trajectory rejected: {exc}")
            return
        with self.lock:
            self._report(description, warn="WARNING" in description)

    def on_recover(self, request, response):
        try:
            text = self.ctrl.recover()
        except FlexmodalError as exc:
            response.success, response.message = False, str(exc)
            return response
        self._report(text)
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
                self._report_throttled(f"excitation rejected: {exc}")
            response.success, response.message = False, str(exc)
            return response
        with self.lock:
            self._report(description)
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
                   "late_cycles": self.timing.late_cycles,
                   "native_cycles": self.native_cycle.native_cycles if self.native_cycle else 0}
            compute_us = self.compute_us.values()
        return {**out, **self.compute_us.distribution("compute_us", COMPUTE_BUDGET_US, compute_us)}

    def _send(self, command):
        serialized = self._serialize_command(command.tau)
        if self.native_cycle is not None:
            self.native_cycle.publish(serialized)     # the C cycles' writer: one writer, in cycle order
        else:
            self.command_pub.publish(serialized)
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

"""ROS 2 node ``flexible_joint_simulator``: the flexible-joint plant (2.1) in place of Gazebo.

Same topics as gz_ros2_control's effort interface: subscribes ``effort_controller/commands``
(std_msgs/Float64MultiArray, n motor torques [N m] in URDF joint order, zero-order held), publishes
``joint_states`` (sensor_msgs/JointState stamped with simulation time: link joints then
``<joint>_motor``; positions, velocities, efforts = spring torque on the link / applied motor
torque) and ``/clock`` (rosgraph_msgs/Clock) every 1/rate_hz of simulation time. Topic names are
relative: ``-r __ns:=/arm1`` (launch ``namespace:=arm1``) gives ``/arm1/joint_states`` and
``/arm1/effort_controller/commands``; ``/clock`` is the ROS clock topic (bringup remaps it to
``/<namespace>/clock`` for a namespaced robot, so that two simulators do not share one clock).

Parameters: ``robot`` (bundled name) or ``urdf_path`` + ``params_path``; ``rate_hz`` (1000,
publication and command sampling rate); ``integration_rate_hz`` (RK4 step, an integer
multiple of rate_hz, >= 2000; default the larger of 2000 and the rate resolving the robot's fastest
closed-loop mode at ``initial_positions``, h·|λ|max <= 1.5: kuka_lwr4 2000, scompi 4000; a lower
value is warned about); ``real_time_factor`` (1.0 = real time, 2.0 = twice as fast,
0 = unpaced); ``initial_positions`` (link positions [rad or m], empty = zeros; the robot starts at
rest in the equilibrium (2.3), held by the static torque of (2.2) until the first command);
``lockstep`` (false); ``lockstep_timeout_s`` (0.02); ``realtime_priority`` / ``cpu`` (SCHED_FIFO
and CPU pinning, off by default: flexmodal_ros/nodes/realtime.py); ``setpoint_law`` (false): the
simulator itself holds the robot at ``initial_positions`` with the set-point law (2.2), evaluated
continuously inside every integration step (the thesis' impact-test set-up, ch. 2.4.3, as a drive's
fast internal loop would; :class:`flexmodal_ros.simulation.plant.SetpointLaw`) — commands received on
``/effort_controller/commands`` are then rejected and counted; ``max_wrench_force_n`` (1e4),
``max_wrench_moment_nm`` (1e3), ``max_wrench_duration_s`` (60): bounds of ``~/apply_wrench``
(force and moment magnitudes, duration; at most 32 impulses active at once).

Valid range and faults (no silent reset): every integration step is checked
(:mod:`flexmodal_ros.simulation.simulator`: finite, no joint faster than 0.05 rad or m per step,
i.e. 100 rad/s at 2 kHz; MuJoCo also its bad-acceleration warning). A step that leaves the range
stops the simulation at the last valid state: ``~/status`` (std_msgs/String, transient local)
says why ("fault: ..."), nothing more is published on ``joint_states`` and ``/clock`` (simulation
time stops; a controller on the steady clock goes STALE), commands are counted as rejected and
``~/apply_wrench`` is refused, until ``~/reset`` acknowledges the fault: back to the initial state
at t = 0, reported on ``~/status`` too. ``~/statistics`` carries the fault (null when running).

Command timing. Real time (default): every period the loop publishes the state, samples the latest
received command (zero-order hold) and integrates one period with it, then sleeps until the next
period; a controller that answers each state within one period therefore acts with exactly one
period of delay (``run_closed_loop(..., command_delay_cycles=1)`` offline). When the loop falls
more than one period behind its schedule (the process or the machine was stalled), it re-anchors
the schedule instead of running the missed periods back to back: like Gazebo, the simulation then
lags wall time by the stall, and the controller never sees a burst of states faster than real
time. Lockstep: after
publishing a state the loop waits up to ``lockstep_timeout_s`` wall seconds for the answer and
integrates with it (no delay; the simulation slows down when the machine cannot keep up, like
Gazebo's lockstep with ros2_control); keep the timeout below the controller's ``state_timeout_s``
so that a lost message costs one late step instead of a STALE abort.

Services: ``~/apply_wrench`` (flexmodal_interfaces/ApplyWrench, impulse at the tool point),
``~/excite`` (flexmodal_interfaces/Excite: a motor torque pulse or chirp added to the commanded
motor input, sampled at every period like the command; bounded by ``max_excitation_torque`` (declared
as 10 % of the URDF effort limits per joint) and ``max_excitation_duration_s`` (1.0); not with ``setpoint_law``),
``~/reset`` (std_srvs/Trigger: back to the initial state, simulation time 0; clears a fault),
``~/statistics``
(std_srvs/Trigger, JSON in ``message``: steps, simulation time, commands received/rejected,
late_steps = steps integrated without a command received since the previous sampling instant
(counted once the controller has sent its first command), overrun_steps = steps that started more
than one period behind the real-time schedule, schedule_slips / slipped_s = re-anchorings of the
schedule and the wall time [s] given up by them, publish_delay_us_p50/p90/p99/p999/max =
publication time minus its scheduled time over the last 20 s, _over = more than one period,
publish_failures = states the middleware refused to publish: dropped, warned about once, the
simulation goes on; PUBLISH_FAILURES_MAX in a row stop it as a fault).
Bad commands (wrong length, NaN) are rejected and logged; the simulation keeps running with the
previous command.
"""
import json
import math
import threading
import time
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger

from flexmodal_interfaces.srv import ApplyWrench, Excite

from ..control.excitation import EXCITATION_MAX_DURATION, default_excitation_limit
from ..core.errors import FlexmodalError
from ..core.validation import per_joint
from ..simulation import FlexibleJointPlant, ImpulseLimits, SetpointLaw, SimulationFault, Simulator, rest_state
from ..simulation.drive import CommandInput, DrivenPlant
from ..simulation.pacing import RealTimePacing, check_rates
from ..calibration.offline_plants import STEP_LIMIT, rk4_step
from .base import Throttle, declare_robot_model, declare_typed, run_node
from .guard import GuardedNode
from .conversions import JointStateWriter, command_to_torque, excite_request_to_core
from .polled import STOP_JOIN_S, PolledSubscription, stop_logger
from .realtime import TimingWindow, apply_realtime, declare_realtime

STATS_WINDOW = 20_000      # publication delays kept for the statistics: the last 20 s
# History of /joint_states: lets a subscriber that falls a little behind (a recorder) still get
# every sample.
STATE_HISTORY = 100
FAULT_POLL_S = 0.05         # [s] commands drained this often while the simulation is stopped
PUBLISH_FAILURES_MAX = 1000  # failed publications in a row (1 s at 1 kHz) before the loop stops as a fault


class StateOutput:
    """The simulator's publications of each state (/joint_states) and its /clock. One the
    middleware refuses (rmw's "cannot publish data" when a reliable reader is too slow to take its
    samples, ros2/rmw#209) is a dropped sample: counted in the node's ~/statistics
    (publish_failures), warned about once, the simulation goes on; PUBLISH_FAILURES_MAX in a row
    raise, which ends the loop as a fault (FlexibleJointSimulator._loop)."""

    def __init__(self, state_pub, clock_pub, lock, stats, logger, running):
        """``lock`` guards ``stats`` (the node's ~/statistics counters); ``running()`` is False once
        the node stops or its context shuts down (a failure then is the shutdown's, raised)."""
        self.state_pub, self.clock_pub, self.lock, self.stats = state_pub, clock_pub, lock, stats
        self.logger, self.running = logger, running
        self.failed_in_row, self.warned = 0, False

    def publish(self, state, clock):
        try:
            self.state_pub.publish(state)
            self.clock_pub.publish(clock)
        except Exception as exc:   # noqa: BLE001 - rclpy raises its RCLError, which it does not export
            if not self.running():
                raise
            with self.lock:
                self.stats["publish_failures"] += 1
                self.failed_in_row += 1
                if self.failed_in_row >= PUBLISH_FAILURES_MAX:
                    raise RuntimeError(f"{self.failed_in_row} publications of the state in a row failed, the "
                                       f"last: {type(exc).__name__}: {exc}") from exc
                if not self.warned:
                    self.warned = True
                    self.logger.warning(
                        f"publishing a state failed ({type(exc).__name__}: {exc}): the sample is dropped and "
                        f"counted in ~/statistics publish_failures; {PUBLISH_FAILURES_MAX} in a row stop the "
                        "simulation")
            return
        self.failed_in_row = 0


def declare_input_bounds(node, model):
    """The bounds of ``~/apply_wrench`` (:class:`ImpulseLimits` from ``max_wrench_force_n``,
    ``max_wrench_moment_nm``, ``max_wrench_duration_s``) and of ``~/excite`` (``max_excitation_torque``
    (n,) [N m], ``max_excitation_duration_s`` [s]), declared on ``node``; FlexmodalError unless all > 0."""
    defaults = ImpulseLimits()
    limits = ImpulseLimits(*(declare_typed(node, name, float(default)) for name, default in (
        ("max_wrench_force_n", defaults.force), ("max_wrench_moment_nm", defaults.moment),
        ("max_wrench_duration_s", defaults.duration))))
    if not min(limits.force, limits.moment, limits.duration) > 0:
        raise FlexmodalError(f"parameters: max_wrench_* must be > 0, got {limits}")
    excitation_torque = declare_typed(node, "max_excitation_torque",
                                      [float(v) for v in default_excitation_limit(model)])
    excitation_limit = per_joint(excitation_torque, model.n, "max_excitation_torque", FlexmodalError)
    excitation_duration = declare_typed(node, "max_excitation_duration_s", EXCITATION_MAX_DURATION)
    if not (excitation_limit > 0).all() or not excitation_duration > 0:
        raise FlexmodalError("parameters: max_excitation_torque and max_excitation_duration_s must be > 0")
    return limits, excitation_limit, excitation_duration


def resolved_integration_rate(model, initial_positions, rate_hz):
    """The integration rate [Hz] that resolves ``model``'s fastest closed-loop mode at
    ``initial_positions`` (the offline plants' :func:`~flexmodal_ros.calibration.offline_plants.rk4_step`:
    a multiple of ``rate_hz``, h·|λ|max <= STEP_LIMIT), or None when the inputs are not usable
    (they are refused with their own error further on)."""
    q0 = list(initial_positions) or [0.0] * model.n
    if not (rate_hz > 0 and len(q0) == model.n and all(map(math.isfinite, q0))):
        return None
    return rate_hz * round(1.0 / (rate_hz * rk4_step(model, q0, 1.0 / rate_hz)))


def declare_integration_rate(node, model, p, floor):
    """Declare ``integration_rate_hz`` with its effective default, the larger of ``floor`` and
    :func:`resolved_integration_rate` (``p``: rate_hz, initial_positions); a lower value set by
    the user is warned about once. Returns the value."""
    resolved = resolved_integration_rate(model, p["initial_positions"], p["rate_hz"])
    value = declare_typed(node, "integration_rate_hz", max(floor, resolved or 0.0))
    if resolved and value < resolved:
        node.get_logger().warning(
            f"integration_rate_hz {value:g}: below {resolved:g} Hz, the rate at which this robot's fastest "
            f"closed-loop mode is resolved (h·|λ|max <= {STEP_LIMIT:g} at initial_positions, the default "
            f"here); its fastest modes are simulated with errors of a few percent in frequency and damping "
            f"(a calibration of scompi at 2 kHz was 10 σ off)")
    return value


class FlexibleJointSimulator(GuardedNode):
    """Thin shell around :class:`flexmodal_ros.simulation.simulator.Simulator`; the loop runs in a thread.

    Subclasses swap the plant (``mujoco_simulator``): :meth:`_make_simulator` returns any object with
    the Simulator interface (t, reset, set_command, apply_impulse, advance, sample, efforts)."""

    NODE_NAME = "flexible_joint_simulator"
    ENGINE = "RK4"
    EFFORT_IS_MOTOR_TORQUE = True       # commands are τ_m (False: motor-joint efforts W τ_m)
    MIN_INTEGRATION_RATE_HZ = 2000.0
    DEFAULT_INTEGRATION_RATE_HZ = 2000.0

    def __init__(self, **kwargs):
        super().__init__(self.NODE_NAME, **kwargs)
        self.model = declare_robot_model(self)
        p = {name: declare_typed(self, name, default) for name, default in (
            ("rate_hz", 1000.0), ("initial_positions", [0.0] * self.model.n))}
        p["integration_rate_hz"] = declare_integration_rate(self, self.model, p, self.DEFAULT_INTEGRATION_RATE_HZ)
        p.update({name: declare_typed(self, name, default) for name, default in (
            ("real_time_factor", 1.0), ("lockstep", False), ("lockstep_timeout_s", 0.02), ("setpoint_law", False))})
        check_rates(p["rate_hz"], p["integration_rate_hz"], self.MIN_INTEGRATION_RATE_HZ, p["real_time_factor"],
                    p["lockstep_timeout_s"])
        realtime = declare_realtime(self)
        q0 = list(p["initial_positions"]) or [0.0] * self.model.n
        limits, self.excitation_limit, self.excitation_duration = declare_input_bounds(self, self.model)
        self.sim = self._make_simulator(q0, 1.0 / p["integration_rate_hz"], limits)
        self.law = SetpointLaw(self.model, q0) if p["setpoint_law"] else None
        self.period = 1.0 / p["rate_hz"]
        self.rtf = p["real_time_factor"]
        self.lockstep, self.lockstep_timeout = p["lockstep"], p["lockstep_timeout_s"]
        self.lock = threading.Lock()
        self.stats = dict(steps=0, commands_received=0, commands_rejected=0, late_steps=0, overrun_steps=0,
                          schedule_slips=0, slipped_s=0.0, publish_failures=0)
        self.input = CommandInput(self.sim, self.model, self.stats, self.excitation_limit, self.excitation_duration,
                                  motor_joint_efforts=not self.EFFORT_IS_MOTOR_TORQUE)
        self.plant = DrivenPlant(self.sim, self.input, self.law, self.ENGINE)
        self.pacing = RealTimePacing(self.period, self.rtf, self.stats)
        self.publish_delay_us = TimingWindow(STATS_WINDOW)
        self._throttle = Throttle(1.0)
        self._reset_requested = False
        self.fault = None           # why the simulation stopped (None: running), until ~/reset
        self._serialize_state = JointStateWriter(self.model)     # states go out as serialized bytes
        self.state_pub = self.create_publisher(JointState, "joint_states", STATE_HISTORY)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10)
        self.output = StateOutput(self.state_pub, self.clock_pub, self.lock, self.stats, self.get_logger(),
                                  lambda: self._running and rclpy.ok(context=self.context))
        self.status_pub = self.create_publisher(
            String, "~/status", QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.fault_listeners.append(lambda text: self.status_pub.publish(String(data=text)))
        # Read by the simulation thread at each sampling instant, as a drive reads its command
        # register (no executor callback per command: nodes/polled.py). Best effort (matches
        # reliable publishers too): a lost command costs one late step, where a reliable reader
        # would hold back every later command until the lost one is repaired.
        self.commands = PolledSubscription(self, Float64MultiArray, "effort_controller/commands",
                                           QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.create_service(ApplyWrench, "~/apply_wrench", self.on_apply_wrench)
        self.create_service(Excite, "~/excite", self.on_excite)
        self.create_service(Trigger, "~/reset", self.on_reset)
        self.create_service(Trigger, "~/statistics", self.on_statistics)
        scheduling = apply_realtime(self.get_logger(), *realtime)
        self._running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        self.get_logger().info(f"simulating '{self.model.name}' at {p['integration_rate_hz']:g} Hz ({self.ENGINE}), "
                               f"publishing at {p['rate_hz']:g} Hz, real_time_factor {self.rtf:g}, "
                               f"{'lockstep' if self.lockstep else 'real time (1 period command delay)'}, "
                               f"{scheduling}")

    def _make_simulator(self, q0, dt, limits):
        """The plant at rest in the equilibrium (2.3) of q0, integrated with step dt [s], impulse
        wrenches bounded by ``limits`` (:class:`~flexmodal_ros.simulation.plant.ImpulseLimits`)."""
        plant = FlexibleJointPlant(self.model, dt)
        x0, hold = rest_state(self.model, q0, field="initial_positions")
        return Simulator(plant, x0, hold, limits)

    def _read_commands(self):
        """Take the received commands (call with the lock held): the last valid one becomes the
        pending command; bad ones are counted and logged (throttled)."""
        refusal = ("" if self.fault is not None else None if self.law is None
                   else "command rejected: setpoint_law is on (the simulator runs (2.2) itself)")
        self.input.take(self.commands.take_all(), lambda msg: command_to_torque(self.model, msg), refusal,
                        lambda text: self._throttle() and self.get_logger().warning(text))

    def on_apply_wrench(self, request, response):
        try:
            with self.lock:
                if self.fault is not None:
                    raise FlexmodalError(f"the simulation is stopped ({self.fault}); call ~/reset first")
                self.sim.apply_impulse(list(request.wrench), request.duration)
                t = self.sim.t
        except FlexmodalError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success = True
        response.message = f"wrench applied from t={t:.4f} s for {request.duration:g} s"
        return response

    def on_excite(self, request, response):
        try:
            excitation, start_now = excite_request_to_core(self.model, request)
            self.input.check(excitation)
            with self.lock:
                if self.law is not None:
                    raise FlexmodalError("excitation: not with setpoint_law (the simulator's own law holds the robot)")
                start = self.input.schedule(excitation, start_now)
        except FlexmodalError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success, response.start_time = True, float(start)
        response.message = f"excitation {excitation.kind} from t={start:.4f} s for {excitation.duration:g} s"
        return response

    def on_reset(self, request, response):
        with self.lock:
            self.plant.reset()
            self._reset_requested = True
            fault, self.fault = self.fault, None
        text = "simulation reset to the initial state, t = 0" + (f" (fault acknowledged: {fault})" if fault else "")
        self.status_pub.publish(String(data=text))
        response.success, response.message = True, text
        return response

    def on_statistics(self, request, response):
        with self.lock:
            stats = dict(self.stats, sim_time=self.sim.t, mode="lockstep" if self.lockstep else "real time",
                         fault=self.fault)
            delays = self.publish_delay_us.values()
        stats.update(self.publish_delay_us.distribution("publish_delay_us", 1e6 * self.period, delays))
        response.success, response.message = True, json.dumps(stats)
        return response

    def _state_messages(self):
        """Serialized /joint_states and /clock messages of the current state."""
        return self._serialize_state(self.sim.t, *self.sim.sample(), *self.sim.efforts())

    def _loop(self):
        """Run the simulation; after a fault (or an unexpected error in the loop: the same policy)
        wait for ~/reset, draining the commands meanwhile."""
        while self._running and rclpy.ok(context=self.context):
            try:
                if self.fault is None:
                    self._run()
                else:
                    with self.lock:
                        self._read_commands()
                    time.sleep(FAULT_POLL_S)
            except Exception as exc:   # noqa: BLE001 - publishing fails once rclpy shut the context down (Ctrl-C)
                if not (self._running and rclpy.ok(context=self.context)):
                    return
                with self.lock:
                    self._stop(f"fault: the simulation loop failed: {type(exc).__name__}: {exc}")

    def _stop(self, text):
        """Stop the simulation at the last valid state (call with the lock held) and report why."""
        self.fault = text
        self.get_logger().error(f"{text}; the simulation is stopped until ~/reset")
        self.status_pub.publish(String(data=f"{text}; the simulation is stopped (nothing is published) until "
                                            "~/reset"))

    def _run(self):
        pacing = self.pacing
        pacing.anchor()
        while self._running and rclpy.ok(context=self.context) and self.fault is None:
            with self.lock:
                if self._reset_requested:
                    self._reset_requested = False
                    pacing.anchor()
                if self.lockstep:
                    self._read_commands()   # answers to earlier states: not for this one
                    self.input.pending = None
                state, clock = self._state_messages()
                scheduled = pacing.scheduled(self.sim.t)
            published = time.monotonic()
            self.output.publish(state, clock)
            if self.lockstep:
                self.commands.wait(self.lockstep_timeout)
            with self.lock:
                if self._reset_requested:
                    continue
                pacing.published(published, scheduled, self.publish_delay_us)
                self._read_commands()
                try:
                    self.plant.step(self.period)     # zero-order hold of the latest command, plus the excitation
                except SimulationFault as exc:
                    self._stop(f"fault: {exc}")
                    return
                self.stats["steps"] += 1
                t = self.sim.t
            pacing.wait(t, self.lock)

    def destroy_node(self):
        self._running = False
        if hasattr(self, "thread"):  # construction may have failed on a bad parameter
            self.thread.join(timeout=STOP_JOIN_S)
            if self.thread.is_alive():
                stop_logger(self.get_logger(), self.context).warning(
                    f"the simulation loop is still busy {STOP_JOIN_S:g} s after its stop: not waited for")
            self.commands.destroy()
        return super().destroy_node()


def main(args=None):
    return run_node(FlexibleJointSimulator, "flexible_joint_simulator", args)


if __name__ == "__main__":
    raise SystemExit(main())

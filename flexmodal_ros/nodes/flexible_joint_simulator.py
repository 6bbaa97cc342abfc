"""ROS 2 node ``flexible_joint_simulator``: the flexible-joint plant (2.1) in place of Gazebo.

Same topics as gz_ros2_control's effort interface: subscribes ``/effort_controller/commands``
(std_msgs/Float64MultiArray, n motor torques [N m] in URDF joint order, zero-order held), publishes
``/joint_states`` (sensor_msgs/JointState stamped with simulation time: link joints then
``<joint>_motor``; positions, velocities, efforts = spring torque on the link / applied motor
torque) and ``/clock`` (rosgraph_msgs/Clock) every 1/rate_hz of simulation time.

Parameters: ``robot`` (bundled name) or ``urdf_path`` + ``params_path``; ``rate_hz`` (1000,
publication and command sampling rate); ``integration_rate_hz`` (4000, RK4 step, an integer
multiple of rate_hz, >= 2000); ``real_time_factor`` (1.0 = real time, 2.0 = twice as fast,
0 = unpaced); ``initial_positions`` (link positions [rad or m], empty = zeros; the robot starts at
rest in the equilibrium (2.3), held by the static torque of (2.2) until the first command);
``lockstep`` (false; true = after each published state wait up to ``lockstep_timeout_s`` wall
seconds for a new command before integrating: the simulation never runs on a stale command and
slows down instead when the machine cannot keep up, like Gazebo's lockstep with ros2_control).

Services: ``~/apply_wrench`` (flexmodal_interfaces/ApplyWrench, impulse at the tool point),
``~/reset`` (std_srvs/Trigger: back to the initial state, simulation time 0), ``~/statistics``
(std_srvs/Trigger, JSON in ``message``: steps, simulation time, commands received/rejected,
late_steps = steps whose command was missing or arrived more than one period (wall time, scaled
by real_time_factor) after the state was published, overrun_steps = steps the loop fell behind
its real-time schedule). Bad commands (wrong length, NaN) are rejected and
logged; the simulation keeps running with the previous command.
"""
import json
import threading
import time

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from flexmodal_interfaces.srv import ApplyWrench

from ..errors import FlexmodalError
from ..simulation import FlexibleJointPlant, Simulator, rest_state
from .common import declare_robot_model, run_node
from .conversions import command_to_torque, plant_joint_state, seconds_to_stamp


class FlexibleJointSimulator(Node):
    """Thin shell around :class:`flexmodal_ros.simulation.Simulator`; the loop runs in a thread."""

    def __init__(self, **kwargs):
        super().__init__("flexible_joint_simulator", **kwargs)
        self.model = declare_robot_model(self)
        p = {name: self.declare_parameter(name, default).value for name, default in (
            ("rate_hz", 1000.0),
            ("integration_rate_hz", 4000.0), ("real_time_factor", 1.0),
            ("initial_positions", Parameter.Type.DOUBLE_ARRAY), ("lockstep", False), ("lockstep_timeout_s", 0.1))}
        self._check(p)
        q0 = [0.0] * self.model.n if p["initial_positions"] is None else list(p["initial_positions"])
        plant = FlexibleJointPlant(self.model, 1.0 / p["integration_rate_hz"])
        x0, hold = rest_state(self.model, q0, field="initial_positions")
        self.sim = Simulator(plant, x0, hold)
        self.period = 1.0 / p["rate_hz"]
        self.rtf = p["real_time_factor"]
        self.lockstep, self.lockstep_timeout = p["lockstep"], p["lockstep_timeout_s"]
        self.lock = threading.Lock()
        self.new_command = threading.Event()
        self.stats = dict(steps=0, commands_received=0, commands_rejected=0, late_steps=0, overrun_steps=0)
        self._arrival = 0.0
        self._last_warning = -float("inf")
        self._fresh = False
        self._commanded = False
        self._reset_requested = False
        self.state_pub = self.create_publisher(JointState, "/joint_states", 10)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10)
        self.create_subscription(Float64MultiArray, "/effort_controller/commands", self.on_command, 10)
        self.create_service(ApplyWrench, "~/apply_wrench", self.on_apply_wrench)
        self.create_service(Trigger, "~/reset", self.on_reset)
        self.create_service(Trigger, "~/statistics", self.on_statistics)
        self._running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        self.get_logger().info(f"simulating '{self.model.name}' at {p['integration_rate_hz']:g} Hz (RK4), "
                               f"publishing at {p['rate_hz']:g} Hz, real_time_factor {self.rtf:g}"
                               f"{', lockstep' if self.lockstep else ''}")

    @staticmethod
    def _check(p):
        if not p["rate_hz"] > 0:
            raise FlexmodalError(f"rate_hz: must be > 0, got {p['rate_hz']}")
        ratio = p["integration_rate_hz"] / p["rate_hz"]
        if p["integration_rate_hz"] < 2000 or abs(ratio - round(ratio)) > 1e-9:
            raise FlexmodalError(f"integration_rate_hz: must be >= 2000 and a multiple of rate_hz, "
                                 f"got {p['integration_rate_hz']}")
        if not p["real_time_factor"] >= 0:
            raise FlexmodalError(f"real_time_factor: must be >= 0 (0 = unpaced), got {p['real_time_factor']}")
        if not p["lockstep_timeout_s"] > 0:
            raise FlexmodalError(f"lockstep_timeout_s: must be > 0, got {p['lockstep_timeout_s']}")

    def on_command(self, msg):
        try:
            tau = command_to_torque(self.model, msg)
        except FlexmodalError as exc:
            self.stats["commands_rejected"] += 1
            now = time.monotonic()
            if now - self._last_warning >= 1.0:   # rclpy's own throttling inspects frames per call
                self._last_warning = now
                self.get_logger().warning(f"command rejected: {exc}")
            return
        with self.lock:
            self.sim.set_command(tau)
            self.stats["commands_received"] += 1
            self._fresh = self._commanded = True
            self._arrival = time.monotonic()
        self.new_command.set()

    def on_apply_wrench(self, request, response):
        try:
            with self.lock:
                self.sim.apply_impulse(list(request.wrench), request.duration)
                t = self.sim.t
        except FlexmodalError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success = True
        response.message = f"wrench applied from t={t:.4f} s for {request.duration:g} s"
        return response

    def on_reset(self, request, response):
        with self.lock:
            self.sim.reset()
            self._reset_requested = True
            self._commanded = self._fresh = False
        response.success, response.message = True, "simulation reset to the initial state, t = 0"
        return response

    def on_statistics(self, request, response):
        with self.lock:
            stats = dict(self.stats, sim_time=self.sim.t)
        response.success, response.message = True, json.dumps(stats)
        return response

    def _publish(self):
        with self.lock:
            t = self.sim.t
            q, qd, q_m, qd_m = self.sim.sample()
            link_effort, motor_effort = self.sim.efforts()
        self.state_pub.publish(plant_joint_state(self.model, t, q, qd, q_m, qd_m, link_effort, motor_effort))
        self.clock_pub.publish(Clock(clock=seconds_to_stamp(t)))

    def _loop(self):
        wall0 = time.monotonic()
        while self._running and rclpy.ok(context=self.context):
            if self.lockstep:
                self.new_command.clear()
            published = time.monotonic()
            self._publish()
            if self.lockstep:
                self.new_command.wait(self.lockstep_timeout)
            deadline = published + (self.period / self.rtf if self.rtf > 0 else self.period)
            with self.lock:
                if self._reset_requested:
                    self._reset_requested = False
                    wall0 = time.monotonic()
                    continue
                if self._commanded and (not self._fresh or self._arrival > deadline):
                    self.stats["late_steps"] += 1
                self._fresh = False
                try:
                    self.sim.advance(self.period)
                except FlexmodalError as exc:
                    self.get_logger().error(f"{exc}; resetting to the initial state")
                    self.sim.reset()
                self.stats["steps"] += 1
                target = wall0 + self.sim.t / self.rtf if self.rtf > 0 else None
            if target is not None:
                delay = target - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif -delay > self.period / self.rtf:
                    self.stats["overrun_steps"] += 1

    def destroy_node(self):
        self._running = False
        if hasattr(self, "thread"):  # construction may have failed on a bad parameter
            self.new_command.set()
            self.thread.join(timeout=2.0)
        return super().destroy_node()


def main(args=None):
    return run_node(FlexibleJointSimulator, "flexible_joint_simulator", args)


if __name__ == "__main__":
    raise SystemExit(main())

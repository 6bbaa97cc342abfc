"""A robot behind the suite's topics as a calibration plant (flexmodal_ros/calibration/campaign.py).

Speaks what any suite robot speaks — the built-in ``flexible_joint_simulator``, ``mujoco_simulator``,
a real robot through gz_ros2_control — with the ``feedforward_pd_controller`` in the loop:

- ``/joint_states`` (polled raw subscription, parsed by
  :class:`~flexmodal_ros.nodes.conversions.JointStateReader` in the robot's ``link_state``
  convention): the measured state and the records (every sample, stamp time);
- ``<controller>/reference_trajectory``: moves (a C⁴ segment from the measured position, timed
  for the controller's URDF speed/acceleration limits; the controller checks the limits again);
- ``<controller>/excite`` (flexmodal_interfaces/Excite): motor pulses at a given joint-state time;
- ``<controller>/set_parameters``: the experiment's gains kd (checked by the controller: refused
  if the closed loop would not be stable);
- ``<controller>/status``: acceptance or rejection of a trajectory.

Every wait is bounded in wall time (``wall_factor`` × the joint-state time waited + ``margin_s``);
a robot that stops publishing, a refused trajectory or an excitation the controller refuses raise
FlexmodalError, and the campaign ends with the data measured so far, the robot holding. Times
are joint-state (stamp) times, so a simulator running faster or slower than real time works the
same. No numerics here: the plant only moves, waits and records.

``python -m flexmodal_ros.nodes.topic_plant calibrate ... --plant ros`` is ``flexmodal calibrate
--plant ros`` (the CLI starts it: it may not import the nodes) with :func:`run_ros_calibration`.
"""
from __future__ import annotations

import threading
import time

import numpy as np
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from flexmodal_interfaces.srv import Excite

from ..calibration.campaign import CampaignStop, calibrate
from ..cli import main as cli_main
from ..calibration.eigen_sensitivity import LoopModel
from ..calibration.offline_plants import channel_names, move_duration
from ..control import SafetyLimits
from ..control.excitation import MotorExcitation
from ..core.errors import FlexmodalError
from ..oma.record import make_record
from .conversions import JointStateReader, core_to_trajectory, excite_request
from .polled import PolledSubscription

QUEUE_DEPTH = 5000        # joint states held between two polls (5 s at 1 kHz)
POLL_PERIOD = 0.005       # [s]
START_LEAD_S = 0.05       # an excitation is scheduled this far ahead of the last joint state [s]


class TopicPlant:
    """The plant interface of :func:`~flexmodal_ros.calibration.campaign.calibrate` on ROS topics
    (module docstring). ``node``: the rclpy node that owns the subscriptions and clients (its
    executor must spin while the calibration runs in another thread); ``controller``: the
    controller node's name (with namespace); ``callback_group`` for the clients."""

    def __init__(self, node, model, controller="/feedforward_pd_controller", link_state="absolute",
                 rate_hz=1000.0, hold="zoh-delay", channels="both", wall_factor=3.0, margin_s=10.0,
                 callback_group=None, stop=None):
        self.node, self.model = node, model
        self.controller = controller.rstrip("/")
        self.rate, self.channels_mode = float(rate_hz), channels
        self.loop = LoopModel(self.rate, hold)
        self.wall_factor, self.margin = float(wall_factor), float(margin_s)
        self.stop = stop
        self.reader = JointStateReader(model, link_state)
        self.states = PolledSubscription(node, JointState, "joint_states",
                                         QoSProfile(depth=QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE),
                                         raw=True)
        self.trajectory_pub = node.create_publisher(JointTrajectory, f"{self.controller}/reference_trajectory", 10)
        self.excite_client = node.create_client(Excite, f"{self.controller}/excite", callback_group=callback_group)
        self.parameter_client = node.create_client(SetParameters, f"{self.controller}/set_parameters",
                                                   callback_group=callback_group)
        self._status, self._status_lock = [], threading.Lock()
        # Volatile: only lines published from now on (the controller keeps its last ones for late
        # joiners, which must not be taken for the answer to this plant's trajectories).
        self.status_sub = node.create_subscription(
            String, f"{self.controller}/status", self._on_status,
            QoSProfile(depth=50, durability=DurabilityPolicy.VOLATILE), callback_group=callback_group)
        limits = SafetyLimits()
        self.velocity_limit, self.acceleration_limit, _ = limits.resolved(model)
        self._last = None

    @property
    def sample_rate_hz(self) -> float:
        return self.rate

    def destroy(self):
        self.states.destroy()
        self.node.destroy_publisher(self.trajectory_pub)
        self.node.destroy_subscription(self.status_sub)
        self.node.destroy_client(self.excite_client)
        self.node.destroy_client(self.parameter_client)

    # -- joint states
    def _on_status(self, msg):
        with self._status_lock:
            self._status.append(msg.data)

    def _samples(self):
        """Parse the joint states received since the last call (samples the reader refuses are skipped)."""
        out = []
        for raw in self.states.take_all():
            try:
                out.append(self.reader.from_bytes(raw))
            except FlexmodalError:
                continue
        if out:
            self._last = out[-1]
        return out

    def _check_stop(self):
        if self.stop is not None:
            self.stop.check()

    def _wait_until(self, t_end, log=None, what="joint states"):
        """Take joint states until one is stamped at or after ``t_end`` [s] (appended to ``log``)."""
        start = self._last.t if self._last is not None else None
        span = 0.0 if start is None else max(0.0, t_end - start)
        deadline = time.monotonic() + self.wall_factor * span + self.margin
        while True:
            self._check_stop()
            for sample in self._samples():
                if log is not None:
                    log.append(sample)
            if self._last is not None and self._last.t >= t_end:
                return
            if time.monotonic() > deadline:
                if self._last is None:
                    raise FlexmodalError(f"joint_states: none arrived within {self.margin:g} s of wall time "
                                         f"(waiting for {what})")
                raise FlexmodalError(f"joint_states: {what} until t={t_end:.4f} s did not arrive within "
                                     f"{self.wall_factor:g} x {span:.3g} s + {self.margin:g} s of wall time "
                                     f"(the last at t={self._last.t:.4f} s)")
            self.states.wait(POLL_PERIOD)

    def measured(self):
        """(q, q̇, q_m, q̇_m) of the newest joint state (waits up to margin_s for a first one)."""
        self._samples()
        if self._last is None:
            self._wait_until(-np.inf, what="a first joint state")
        s = self._last
        return np.array(s.q), np.array(s.qd), np.array(s.q_m), np.array(s.qd_m)

    # -- actions
    def move_to(self, q_target, margin_s=0.1):
        q_now = self.measured()[0]
        T = move_duration(self.model, q_now, q_target, self.velocity_limit, self.acceleration_limit)
        with self._status_lock:
            self._status.clear()
        msg = core_to_trajectory(self.model.joint_names, [0.0, T], [q_now, np.asarray(q_target, float)])
        t0 = self._last.t
        self._wait_matched()
        self.trajectory_pub.publish(msg)
        self._wait_status(("trajectory accepted",), ("trajectory rejected",))
        self._wait_until(t0 + T + margin_s, what="the move")
        self._wait_status(("hold: trajectory finished",), ("stale", "trajectory aborted"), required=False)
        return T

    def _wait_matched(self):
        """Wait (up to margin_s) until the controller's trajectory subscription is matched: a
        message published before is lost (volatile topic)."""
        deadline = time.monotonic() + self.margin
        while self.trajectory_pub.get_subscription_count() == 0:
            self._check_stop()
            if time.monotonic() > deadline:
                raise FlexmodalError(f"{self.trajectory_pub.topic_name}: no subscriber within {self.margin:g} s "
                                     "(is feedforward_pd_controller running?)")
            time.sleep(POLL_PERIOD)

    def _wait_status(self, good, bad, required=True):
        """Wait for a controller status line starting with one of ``good`` (FlexmodalError on one
        containing any of ``bad``, or none of ``good`` within margin_s when ``required``)."""
        deadline = time.monotonic() + self.margin
        while time.monotonic() < deadline:
            self._check_stop()
            with self._status_lock:
                lines, self._status = self._status, []
            for line in lines:
                if any(b in line for b in bad):
                    raise FlexmodalError(f"controller: {line}")
                if any(line.startswith(g) for g in good):
                    return line
            if not required:
                return None
            time.sleep(POLL_PERIOD)
        raise FlexmodalError(f"controller: no '{good[0]}' on {self.controller}/status within {self.margin:g} s "
                             "(is feedforward_pd_controller running for this robot?)")

    def settle(self, duration):
        self.measured()
        self._wait_until(self._last.t + float(duration), what="settling")

    def set_gains(self, kp, kd):
        """The controller's kp, kd (run-time parameters; the controller refuses unstable ones)."""
        params = [Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                                                            double_array_value=[float(v) for v in values]))
                  for name, values in (("kp", kp), ("kd", kd))]
        answer = self._call(self.parameter_client, SetParameters.Request(parameters=params))
        failed = [r.reason for r in answer.results if not r.successful]
        if failed:
            raise FlexmodalError(f"controller gains refused: {'; '.join(failed)}")

    def _call(self, client, request):
        if not client.wait_for_service(timeout_sec=self.margin):
            raise FlexmodalError(f"controller: service {client.srv_name} is not available")
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        if not done.wait(self.margin) or future.result() is None:
            raise FlexmodalError(f"controller: no answer from {client.srv_name} within {self.margin:g} s")
        return future.result()

    def excite_and_record(self, excitation, before, after):
        """Record ``before`` [s], a motor excitation through ``<controller>/excite`` scheduled at
        a joint-state time, and ``after`` [s] of free decay; a Record of the chosen channels."""
        if not isinstance(excitation, MotorExcitation):
            raise FlexmodalError("excitation: only motor pulses through the controller on a ROS plant")
        log = []
        self.measured()
        self._wait_until(self._last.t + float(before), log, "the rest before the excitation")
        start = self._last.t + START_LEAD_S
        answer = self._call(self.excite_client, excite_request(self.model.joint_names, excitation, start))
        if not answer.success:
            raise FlexmodalError(f"controller refused the excitation: {answer.message}")
        end = start + excitation.duration + 2.0 / self.rate     # the first cycle after start, one period of delay
        self._wait_until(end + float(after), log, "the free decay")
        t = np.array([s.t for s in log])
        q = np.array([s.q for s in log])
        q_m = np.array([s.q_m for s in log])
        values = {"both": np.hstack([q, q_m]), "link": q, "motor": q_m}[self.channels_mode]
        meta = {"source": f"ROS robot ({self.controller})", "excitation": excitation.shifted(start).to_dict()}
        return make_record(t, values, channel_names(self.model, self.channels_mode), excitation_end=end,
                           metadata=meta)


def run_ros_calibration(model, settings, out_dir, controller, link_state, rate_hz, hold, progress=None):
    """``flexmodal calibrate --plant ros``: a node of its own (``flexmodal_calibrate``) spinning on a
    thread while :func:`~flexmodal_ros.calibration.campaign.calibrate` drives a
    :class:`TopicPlant`; Ctrl-C cancels (the robot is left holding)."""
    import rclpy   # deferred: the ROS plant only
    from rclpy.executors import MultiThreadedExecutor

    rclpy.init()
    node = rclpy.create_node("flexmodal_calibrate")
    executor = MultiThreadedExecutor(2)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    stop = CampaignStop()
    plant = TopicPlant(node, model, controller, link_state, rate_hz, hold, stop=stop)
    try:
        return calibrate(model, plant, settings, out_dir, progress, stop)
    except KeyboardInterrupt:
        stop.cancel()
        raise
    finally:
        plant.destroy()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv=None):
    """``flexmodal`` (``calibrate --plant ros``) with the ROS plant."""
    return cli_main(argv, ros_runner=run_ros_calibration)


if __name__ == "__main__":
    raise SystemExit(main())

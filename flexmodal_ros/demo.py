"""``make demo`` (``python -m flexmodal_ros.demo``): the main job on the KUKA LWR4, through ROS 2.

1. Starts the suite (flexmodal_ros/nodes/bringup.py: simulator, feedforward+PD controller, modal
   analysis and identification servers) for kuka_lwr4 as separate processes, the simulator at rest
   in the thesis start configuration q0, 1 kHz joint states and commands, real time.
2. Asks the modal-analysis service for the natural frequencies and damping ratios at the start,
   middle and end configurations of the thesis trajectory (notes_003 §5, T = 3 s).
3. Sends the trajectory to the controller (feedforward + PD), records /joint_states; resets the
   simulator, switches the controller to PD only (same gains), sends it again.
4. Runs the same two cases offline (flexmodal_ros.simulation, no ROS) and prints the summary:
   tracking errors ROS vs offline, peak motor torques, controller compute time per cycle
   (p50/p99), late cycles, and the modal table.
5. Writes to ``--output-dir`` (default flexmodal_output/demo): tracking.png (ROS runs),
   offline.png, summary.json, and the node logs (*.log).

Exit code 0 when the ROS feedforward run tracks within 5e-3 rad; 1 otherwise; 2 on bad input.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .errors import FlexmodalError
from .robots import load_robot
from .simulation import ClosedLoopResult, run_closed_loop, save_closed_loop_plot, thesis_trajectory
from .trajectory import PiecewiseC4Trajectory

DEFAULT_OUTPUT = "flexmodal_output/demo"
ROS_TOLERANCE_RAD = 5e-3
CONTROLLER = "/feedforward_pd_controller"
SIMULATOR = "/flexible_joint_simulator"
MODAL = "/modal_analysis"


class SuiteClient:
    """rclpy client of the running suite: records joint states, sends trajectories, calls services."""

    def __init__(self, model, name="flexmodal_demo", alive=None):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rcl_interfaces.srv import SetParameters
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from std_srvs.srv import Trigger
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from trajectory_msgs.msg import JointTrajectory

        from flexmodal_interfaces.srv import ComputeModalParameters

        self.model = model
        self.alive = alive or (lambda: None)
        self.context = Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor.add_node(self.node)
        self.states, self.statuses, self.recording = [], [], False
        self.latest = None
        self.node.create_subscription(JointState, "/joint_states", self._on_state, 1000)
        self.node.create_subscription(String, f"{CONTROLLER}/status", lambda m: self.statuses.append(m.data),
                                      QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.trajectory_pub = self.node.create_publisher(JointTrajectory, f"{CONTROLLER}/reference_trajectory", 10)
        self.modal = self.node.create_client(ComputeModalParameters, f"{MODAL}/compute_modal_parameters")
        self.reset = self.node.create_client(Trigger, f"{SIMULATOR}/reset")
        self.sim_stats = self.node.create_client(Trigger, f"{SIMULATOR}/statistics")
        self.ctrl_stats = self.node.create_client(Trigger, f"{CONTROLLER}/statistics")
        self.set_params = self.node.create_client(SetParameters, f"{CONTROLLER}/set_parameters")

    def _on_state(self, msg):
        from .nodes.conversions import joint_state_to_sample
        sample = joint_state_to_sample(self.model, msg)
        self.latest = sample
        if self.recording:
            self.states.append((sample, np.array(msg.effort[self.model.n:], dtype=float)))

    def spin_until(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while not predicate():
            self.alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout} s")
            self.executor.spin_once(timeout_sec=0.05)

    def call(self, client, request, timeout=30.0):
        self.spin_until(client.service_is_ready, timeout, f"service {client.srv_name}")
        future = client.call_async(request)
        self.spin_until(future.done, timeout, f"response of {client.srv_name}")
        return future.result()

    def wait_for_status(self, text, timeout=30.0, since=0):
        """Index of the first controller status after ``since`` containing ``text``."""
        found = lambda: next((i for i in range(since, len(self.statuses)) if text in self.statuses[i]), None)
        self.spin_until(lambda: found() is not None, timeout, f"controller status '{text}'")
        return found()

    def modal_parameters(self, q):
        from flexmodal_interfaces.srv import ComputeModalParameters
        request = ComputeModalParameters.Request(joint_names=list(self.model.joint_names),
                                                 positions=[float(v) for v in q])
        response = self.call(self.modal, request)
        if not response.success:
            raise FlexmodalError(f"modal service: {response.message}")
        return response.result

    def statistics(self, client):
        from std_srvs.srv import Trigger
        return json.loads(self.call(client, Trigger.Request()).message)

    def reset_simulation(self):
        from std_srvs.srv import Trigger
        since = len(self.statuses)
        if not self.call(self.reset, Trigger.Request()).success:
            raise FlexmodalError("simulator reset failed")
        self.wait_for_status("hold", since=since)

    def set_feedforward(self, on):
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters
        value = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=bool(on))
        result = self.call(self.set_params, SetParameters.Request(
            parameters=[Parameter(name="use_feedforward", value=value)])).results[0]
        if not result.successful:
            raise FlexmodalError(f"use_feedforward: {result.reason}")

    def track(self, times, positions, lead=0.3, settle=0.5, timeout=60.0):
        """Send the waypoints to start ``lead`` s (simulation time) after the latest joint state,
        record until ``settle`` s after the end; a :class:`ClosedLoopResult` (t from the start)."""
        from .nodes.conversions import core_to_trajectory
        self.spin_until(lambda: self.latest is not None, timeout, "joint states")
        start = self.latest.t + lead
        since = len(self.statuses)
        self.states, self.recording = [], True
        self.trajectory_pub.publish(core_to_trajectory(self.model.joint_names, times, positions, start))
        index = self.wait_for_status("trajectory", since=since)
        if "rejected" in self.statuses[index]:
            raise FlexmodalError(self.statuses[index])
        end = start + times[-1] + settle
        self.spin_until(lambda: self.latest.t >= end, timeout, f"simulation time {end:.2f} s")
        self.recording = False
        return recorded_result(self.model, self.states, PiecewiseC4Trajectory(times, positions), start, end)

    def close(self):
        import rclpy
        self.executor.remove_node(self.node)
        self.node.destroy_node()
        self.executor.shutdown()
        rclpy.try_shutdown(context=self.context)


def recorded_result(model, states, path, start, end):
    """:class:`ClosedLoopResult` of recorded (JointSample, motor effort) pairs with start <= t <= end."""
    rows = [(s, tau) for s, tau in states if start <= s.t <= end + 1e-9]
    if not rows:
        raise FlexmodalError("no joint states recorded during the trajectory")
    t = np.array([s.t - start for s, _ in rows])
    tau = np.array([tau for _, tau in rows])
    return ClosedLoopResult(t=t, q=np.array([s.q for s, _ in rows]),
                            q_ref=np.array([path.sample(ti)[0] for ti in t]),
                            q_m=np.array([s.q_m for s, _ in rows]), tau=tau,
                            saturated=np.abs(tau) >= model.effort_limit)


def modal_table(labels, results):
    """Text table: mode, then f [Hz] and ζ [%] for each configuration."""
    head = f"{'mode':>4}" + "".join(f"{label + ' f[Hz]':>16}{'ζ[%]':>8}" for label in labels)
    lines = [head]
    for i in range(max(len(r.frequencies_hz) for r in results)):
        line = f"{i + 1:>4}"
        for r in results:
            line += (f"{r.frequencies_hz[i]:>16.3f}{100 * r.damping_ratios[i]:>8.2f}"
                     if i < len(r.frequencies_hz) else " " * 24)
        lines.append(line)
    return "\n".join(lines)


def run_ros(model, times, positions, out, rtf):
    """Bring the suite up, run both cases through ROS; returns (results, modal results, stats)."""
    from .nodes import bringup
    params = {"flexible_joint_simulator": {"initial_positions": positions[0], "real_time_factor": rtf,
                                           "lockstep": True}}
    processes = bringup.start(model.name, params, log_dir=out)
    client = None
    try:
        client = SuiteClient(model, alive=lambda: bringup.check_running(processes))
        client.wait_for_status("hold", timeout=60.0)
        path = PiecewiseC4Trajectory(times, positions)
        configs = {"start": positions[0], "middle": path.sample(times[-1] / 2)[0], "end": positions[-1]}
        modal = {label: client.modal_parameters(q) for label, q in configs.items()}
        results = {"feedforward+PD": client.track(times, positions)}
        stats = {"simulator_ff": client.statistics(client.sim_stats),
                 "controller_ff": client.statistics(client.ctrl_stats)}
        client.reset_simulation()
        client.set_feedforward(False)
        results["PD only"] = client.track(times, positions)
        return results, modal, stats
    finally:
        if client is not None:
            client.close()
        bringup.stop(processes)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m flexmodal_ros.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="kuka_lwr4", help="bundled 7-joint robot (default kuka_lwr4)")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT, help=f"default {DEFAULT_OUTPUT}")
    parser.add_argument("--real-time-factor", type=float, default=1.0, help="simulator pacing (default 1)")
    args = parser.parse_args(argv)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", "42")
    started = time.monotonic()
    try:
        model = load_robot(args.robot)
        times, positions = thesis_trajectory(model)
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        ros, modal, stats = run_ros(model, times, positions, out, args.real_time_factor)
    except FlexmodalError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    offline = {label: run_closed_loop(model, times, positions, times[-1] + 0.5, use_feedforward=ff)
               for label, ff in (("feedforward+PD", True), ("PD only", False))}
    save_closed_loop_plot(ros, out / "tracking.png")
    save_closed_loop_plot(offline, out / "offline.png")
    summary = report(model, ros, offline, modal, stats, time.monotonic() - started)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"plots, summary.json and node logs in {out}/")
    return 0 if summary["ros"]["feedforward+PD"]["max_tracking_error_rad"] <= ROS_TOLERANCE_RAD else 1


def report(model, ros, offline, modal, stats, elapsed):
    """Print the summary and return it as a dict."""
    summary = {"robot": model.name, "ros": {k: r.summary() for k, r in ros.items()},
               "offline": {k: r.summary() for k, r in offline.items()}, "statistics": stats,
               "modal": {label: {"frequencies_hz": list(r.frequencies_hz), "damping_ratios": list(r.damping_ratios)}
                         for label, r in modal.items()}}
    print(f"\n=== flexmodal_ros demo: {model.name}, thesis trajectory T = 3 s, 1 kHz through ROS 2 ===")
    print(f"{'case':<16}{'ROS max|e| rad':>16}{'ROS rms rad':>14}{'offline max|e|':>16}{'|ROS-offline|':>15}")
    for label in ros:
        r, o = summary["ros"][label], summary["offline"][label]
        print(f"{label:<16}{r['max_tracking_error_rad']:>16.3e}{r['rms_tracking_error_rad']:>14.3e}"
              f"{o['max_tracking_error_rad']:>16.3e}"
              f"{abs(r['max_tracking_error_rad'] - o['max_tracking_error_rad']):>15.3e}")
    ratio = summary["ros"]["PD only"]["max_tracking_error_rad"] / summary["ros"]["feedforward+PD"]["max_tracking_error_rad"]
    print(f"PD only / feedforward+PD max error ratio (ROS): {ratio:.0f}x")
    for label in ros:
        print(f"peak |τ_m| {label:<16}" + " ".join(f"{v:7.2f}" for v in summary["ros"][label]["peak_motor_torque"])
              + "  N m")
    print("effort limits               " + " ".join(f"{v:7.2f}" for v in model.effort_limit) + "  N m")
    c, s = stats["controller_ff"], stats["simulator_ff"]
    late = s["late_steps"] / max(1, s["steps"])
    print(f"controller compute per cycle: p50 {c['compute_us_p50']:.0f} µs, p99 {c['compute_us_p99']:.0f} µs, "
          f"max {c['compute_us_max']:.0f} µs over {c['compute_samples']} cycles")
    print(f"late cycles (command later than 1 ms after the state): {100 * late:.2f} %; "
          f"simulator pacing overruns: {s['overrun_steps']} of {s['steps']} steps")
    print("\nmodal analysis service (closed loop, natural frequency f and damping ratio ζ):")
    print(modal_table(list(modal), list(modal.values())))
    print(f"\ndemo finished in {elapsed:.1f} s")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())

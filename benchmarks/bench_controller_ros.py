"""Controller compute time per cycle in ROS (issue 17: p99 <= 100 µs at 1 kHz) next to the limit
of this machine. Run: `. scripts/env.sh; python benchmarks/bench_controller_ros.py`.

Both run against the real ``flexible_joint_simulator`` node (kuka_lwr4, 1 kHz /joint_states,
loopback only), one after the other in interleaved rounds (drift hits them alike):
1. the ``feedforward_pd_controller`` node (holding its start position), its ``~/statistics`` over
   each round: compute time = serialized sample in hand → command handed to rmw;
2. the same per-sample work in C on rcl with no Python per cycle (``rcl_control_cycle.c``, compiled
   here against the rcl headers of the venv): take, parse, the node's generated control law (hold),
   serialize, publish, measured the same way, and split into the work before the publish and the
   publish itself. What the C loop needs above the target is rmw's publish on this machine.
Options: --rounds, --seconds (per round and side).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

from flexmodal_ros.ccompile import kernel_library
from flexmodal_ros.control import LAW_INPUTS, LAW_OUTPUTS, ControlLaw, law_layout
from flexmodal_ros.linearize import setpoint_reference
from flexmodal_ros.model import create_data
from flexmodal_ros.robots import load_robot

RATE_HZ = 1000.0
ROBOT = "kuka_lwr4"
HEADERS = ("rcl", "rcutils", "rmw", "rosidl_runtime_c", "rosidl_typesupport_interface", "rcl_yaml_param_parser",
           "type_description_interfaces", "rosidl_dynamic_typesupport", "service_msgs", "builtin_interfaces",
           "rcl_interfaces")


def cycle_library():
    """The C cycle compiled against the venv's rcl (ROS 2 wheels: headers under <prefix>/include)."""
    prefix = Path(sys.prefix)
    flags = ["-O2", "-fPIC", "-shared", *(f"-I{prefix / 'include' / h}" for h in HEADERS),
             f"-L{prefix / 'lib'}", f"-Wl,-rpath,{prefix / 'lib'}", "-Wl,--no-as-needed", "-lrcl", "-lrmw", "-lrcutils"]
    lib = ctypes.CDLL(str(kernel_library(Path(__file__).with_name("rcl_control_cycle.c"), tuple(flags))))
    lib.run_cycles.restype = ctypes.c_int
    lib.run_cycles.argtypes = ([ctypes.c_size_t] * 3 + [ctypes.c_int] + [ctypes.c_void_p] * 6 + [ctypes.c_int] * 4)
    return lib


def percentiles(values):
    return f"p50 {np.percentile(values, 50):.1f} µs, p99 {np.percentile(values, 99):.1f} µs"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
    import rclpy
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.type_support import check_is_valid_msg_type
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger
    from flexmodal_ros.nodes.polled import PolledClient

    model = load_robot(ROBOT)
    n, cycles = model.n, int(args.seconds * RATE_HZ)
    law = ControlLaw(model)                          # the node's generated law, in its hold mode
    law.tracking[0] = 0.0
    law.r_hold[:] = setpoint_reference(model, create_data(model), np.zeros(n))
    compiled = law.run.__self__
    inputs, outputs = law_layout(LAW_INPUTS, n)[0], law_layout(LAW_OUTPUTS, n)[0]
    lib = cycle_library()
    bindir = Path(sysconfig.get_path("scripts"))
    simulator = subprocess.Popen([str(bindir / "flexible_joint_simulator"), "--ros-args", "-p", f"robot:={ROBOT}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rclpy.init()
    node = rclpy.create_node("bench_controller_ros")
    check_is_valid_msg_type(JointState)
    with node.handle:
        states = _rclpy.Subscription(node.handle, JointState, "/joint_states",
                                     QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT).get_c_qos_profile(),
                                     None)
    commands = node.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
    times = np.zeros(2 * cycles)
    node_p50, node_p99, c_ready, c_published = [], [], [], []
    try:
        for _ in range(args.rounds):
            controller = subprocess.Popen([str(bindir / "feedforward_pd_controller"), "--ros-args", "-p",
                                           f"robot:={ROBOT}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            reset = PolledClient(node, Trigger, "/feedforward_pd_controller/reset_statistics")
            statistics = PolledClient(node, Trigger, "/feedforward_pd_controller/statistics")
            try:
                assert reset.wait_for_service(30.0) and statistics.wait_for_service(30.0)
                time.sleep(1.0)                                   # past start-up and the first samples
                reset.call(Trigger.Request(), 10.0)
                time.sleep(args.seconds)
                stats = json.loads(statistics.call(Trigger.Request(), 10.0).message)
            finally:
                reset.destroy()
                statistics.destroy()
                controller.terminate()
                controller.wait(10)
            node_p50.append(stats["compute_us_p50"])
            node_p99.append(stats["compute_us_p99"])
            time.sleep(0.5)
            done = lib.run_cycles(states.pointer, commands.handle.pointer, node.context.handle.pointer, cycles,
                                  times.ctypes.data, ctypes.cast(compiled._fn, ctypes.c_void_p).value,
                                  *compiled._args[:4], n, inputs["q_m"].start, inputs["qd_m"].start,
                                  outputs["tau"].start)
            if done != cycles:
                raise SystemExit(f"C cycle failed with code {done}")
            per_cycle = times.reshape(-1, 2)
            c_ready.append(per_cycle[:, 0].copy())
            c_published.append(per_cycle[:, 1].copy())
            print(f"round: node p50 {node_p50[-1]:.1f} µs, p99 {node_p99[-1]:.1f} µs ({stats['compute_us_samples']} "
                  f"cycles) | C on rcl: to the command {percentiles(c_ready[-1])}; handed to rmw "
                  f"{percentiles(c_published[-1])}")
    finally:
        node.destroy_node()
        rclpy.shutdown()
        simulator.terminate()
        simulator.wait(10)
    ready, published = np.concatenate(c_ready), np.concatenate(c_published)
    print(f"controller compute per cycle in ROS, {ROBOT} at {RATE_HZ:g} Hz, {args.rounds} rounds of {args.seconds:g} s "
          f"(target p99 <= 100 µs): node p50 {np.median(node_p50):.1f} µs, p99 {np.median(node_p99):.1f} µs "
          f"(median over rounds)")
    print(f"  limit of this machine, the same work in C on rcl (no Python): handed to rmw {percentiles(published)}; "
          f"of which parse + law + serialize {percentiles(ready)} -> node p99 / C p99 = "
          f"{np.median(node_p99) / np.percentile(published, 99):.2f}x")


if __name__ == "__main__":
    main()

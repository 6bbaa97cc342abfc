"""Controller compute time per cycle in ROS (issue 17: p99 <= 100 µs at 1 kHz) next to the limit
of this machine. Run: `. scripts/env.sh; python benchmarks/bench_controller_ros.py`.

All run against the real ``flexible_joint_simulator`` node (kuka_lwr4, 1 kHz /joint_states,
loopback only), one after the other in interleaved rounds (drift hits them alike):
1. the ``feedforward_pd_controller`` node (holding its start position) as shipped, its steady
   cycles in C (``native_cycle`` true: flexmodal_ros/nodes/native_cycle.py), its ``~/statistics``
   over each round: compute time = serialized sample in hand → command handed to rmw, late cycles;
2. the same node with ``native_cycle:=false`` (every cycle in Python), the same statistics;
3. the limit: the bare per-sample work in C on rcl with no fail-safe policy and no Python at all
   (flexmodal_native/src/bare_control_cycle.c, built at install time as libflexmodal_bare_cycle.so,
   reading and writing on an rcl context and node of its own as the node's C cycles do): take,
   parse, the node's generated control law (hold), serialize, publish, measured the same way, and
   split into the work before the publish and the publish itself (rmw's publish is most of it on
   this machine).
Options: --rounds, --seconds (per round and side), --realtime PRIORITY (SCHED_FIFO and the 0 µs
wake-up latency request, flexmodal_ros/nodes/realtime.py, for the simulator, the controller nodes
and this process's C loop alike).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sysconfig
import time
from pathlib import Path

import numpy as np

from _shared import add_quick_option, machine_load
from flexmodal_ros.control import LAW_INPUTS, LAW_OUTPUTS, ControlLaw, law_layout
from flexmodal_ros.flexible_joint.linear_model import setpoint_reference
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.nodes.native_cycle import BARE_LIBRARY, native_library_path
from flexmodal_ros.nodes.realtime import apply_realtime
from flexmodal_ros.robot.registry import load_robot

RATE_HZ = 1000.0
ROBOT = "kuka_lwr4"
SIDES = {"native": "true", "python": "false"}     # the node's native_cycle parameter per side


def cycle_library():
    """The bare C cycle installed by the flexmodal_native package."""
    lib = ctypes.CDLL(str(native_library_path(BARE_LIBRARY)))
    lib.bare_open.restype = ctypes.c_void_p
    lib.bare_open.argtypes = [ctypes.c_char_p] * 4 + [ctypes.c_int64]
    lib.bare_error.restype = ctypes.c_char_p
    lib.bare_error.argtypes = lib.bare_close.argtypes = [ctypes.c_void_p]
    lib.run_cycles.restype = ctypes.c_int
    lib.run_cycles.argtypes = ([ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p] * 6 + [ctypes.c_int] * 4)
    return lib


def percentiles(values):
    return f"p50 {np.percentile(values, 50):.1f} µs, p99 {np.percentile(values, 99):.1f} µs"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--realtime", type=int, default=0, metavar="PRIORITY",
                    help="realtime_priority of the simulator and the controller nodes (0: normal scheduling)")
    add_quick_option(ap)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 0.3
    print(machine_load())
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
    import rclpy

    model = load_robot(ROBOT)
    n, cycles = model.n, int(args.seconds * RATE_HZ)
    law = ControlLaw(model)                          # the node's generated law, in its hold mode
    law.tracking[0] = 0.0
    law.r_hold[:] = setpoint_reference(model, create_data(model), np.zeros(n))
    inputs, outputs = law_layout(LAW_INPUTS, n)[0], law_layout(LAW_OUTPUTS, n)[0]
    lib = cycle_library()
    bindir = Path(sysconfig.get_path("scripts"))
    simulator = subprocess.Popen([str(bindir / "flexible_joint_simulator"), "--ros-args", "-p", f"robot:={ROBOT}",
                                  "-p", f"realtime_priority:={args.realtime}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rclpy.init()
    node = rclpy.create_node("bench_controller_ros")
    if args.realtime:
        apply_realtime(node.get_logger(), args.realtime, -1)     # the C loop below as the nodes
    error = ctypes.create_string_buffer(256)
    bare = lib.bare_open(b"_bench_controller_ros_bare_cycle", b"/joint_states", b"/effort_controller/commands",
                         error, len(error))
    if not bare:
        raise SystemExit(f"bare C cycle: {error.value.decode()}")
    times = np.zeros(3 * cycles)
    node_stats, c_ready, c_published, c_late = {side: [] for side in SIDES}, [], [], []
    try:
        for _ in range(args.rounds):
            for side, native in SIDES.items():
                node_stats[side].append(run_node(node, bindir, native, args.seconds, args.realtime))
            time.sleep(0.5)
            done = lib.run_cycles(bare, cycles, times.ctypes.data, *law.compiled.pointers(), n,
                                  inputs["q_m"].start, inputs["qd_m"].start, outputs["tau"].start)
            if done != cycles:
                raise SystemExit(f"C cycle failed with code {done} ({lib.bare_error(bare).decode()})")
            per_cycle = times.reshape(-1, 3)
            c_ready.append(per_cycle[:, 0].copy())
            c_published.append(per_cycle[:, 1].copy())
            c_late.append(100.0 * np.mean(np.diff(per_cycle[:, 2]) > 1.5e6 / RATE_HZ))
            print("round: " + " | ".join(f"node {side} {summary(node_stats[side][-1])}" for side in SIDES)
                  + f" | C on rcl: to the command {percentiles(c_ready[-1])}; handed to rmw "
                  f"{percentiles(c_published[-1])}, late {c_late[-1]:.3f} %")
    finally:
        lib.bare_close(bare)
        node.destroy_node()
        rclpy.shutdown()
        simulator.terminate()
        simulator.wait(10)
    ready, published = np.concatenate(c_ready), np.concatenate(c_published)
    limit_p99 = np.percentile(published, 99)
    print(f"controller compute per cycle in ROS, {ROBOT} at {RATE_HZ:g} Hz, {args.rounds} rounds of {args.seconds:g} s "
          f"(target p99 <= 100 µs, late cycles <= 0.2 %; medians over rounds):")
    for side, rounds in node_stats.items():
        p50, p99 = (np.median([r[f"compute_us_{q}"] for r in rounds]) for q in ("p50", "p99"))
        late = np.median([100.0 * r["late_cycles"] / max(1, r["cycles"]) for r in rounds])
        native = np.median([100.0 * r["native_cycles"] / max(1, r["cycles"]) for r in rounds])
        print(f"  node, native_cycle {SIDES[side]}: p50 {p50:.1f} µs, p99 {p99:.1f} µs "
              f"({p99 / limit_p99:.2f}x the limit's p99), late cycles {late:.3f} %, cycles run in C {native:.1f} %")
    print(f"  limit of this machine, the bare work in C on rcl (no policy, no Python): handed to rmw "
          f"{percentiles(published)}; of which parse + law + serialize {percentiles(ready)}; late cycles "
          f"{np.median(c_late):.3f} % (gaps in the simulator's 1 kHz states)")
    print(machine_load())


def run_node(node, bindir, native, seconds, realtime):
    """~/statistics of a feedforward_pd_controller (native_cycle:=``native``, realtime_priority:=
    ``realtime``) over ``seconds``."""
    from std_srvs.srv import Trigger
    from flexmodal_ros.nodes.polled import PolledClient

    controller = subprocess.Popen([str(bindir / "feedforward_pd_controller"), "--ros-args", "-p", f"robot:={ROBOT}",
                                   "-p", f"native_cycle:={native}", "-p", f"realtime_priority:={realtime}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    reset = PolledClient(node, Trigger, "/feedforward_pd_controller/reset_statistics")
    statistics = PolledClient(node, Trigger, "/feedforward_pd_controller/statistics")
    try:
        assert reset.wait_for_service(30.0) and statistics.wait_for_service(30.0)
        time.sleep(1.0)                                   # past start-up and the first samples
        reset.call(Trigger.Request(), 10.0)
        time.sleep(seconds)
        return json.loads(statistics.call(Trigger.Request(), 10.0).message)
    finally:
        reset.destroy()
        statistics.destroy()
        controller.terminate()
        try:
            controller.wait(10)
        except subprocess.TimeoutExpired:
            controller.kill()
            raise


def summary(stats):
    return (f"p50 {stats['compute_us_p50']:.1f} µs, p99 {stats['compute_us_p99']:.1f} µs, late {stats['late_cycles']}"
            f" of {stats['cycles']}, in C {stats['native_cycles']}")


if __name__ == "__main__":
    main()

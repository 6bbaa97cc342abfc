"""Controller and simulator hot paths (kuka_lwr4, thesis trajectory), no ROS transport.

Per control cycle of the feedforward_pd_controller node: serialized JointState → sample, the
fail-safe controller (one generated C call: trajectory segment, feedforward (4.6)-(4.10), PD,
saturation) and the serialized Float64MultiArray command; baseline in the same run: the same
cycle with the control law run by CasADi's virtual machine (``ControlLaw(compiled=False)``). Per 1 ms of the flexible_joint_simulator: the RK4 steps at the
node's integration rate (default 2 kHz: 2 steps) + the serialized JointState. Prints the distribution
(p50/p99/max) per repeat and the median over repeats; a cycle is "late" when it alone takes longer
than the 1 ms period. These are hot-loop figures: in the nodes, a cycle that follows 1 ms of
waiting costs about twice as much (cold caches; see flexmodal_ros/nodes/realtime.py), which is
what ``make demo`` reports; the spaced runs show it: the same cycles, each after 0.9 ms of sleep
or of a busy loop. Run: ``python benchmarks/bench_controller.py``.
"""
import argparse
import statistics
import time

import numpy as np

from _shared import add_quick_option, machine_load
from flexmodal_ros.control import FailSafeController, SafetyLimits
from flexmodal_ros.nodes.conversions import JointStateReader, JointStateWriter, TorqueCommandWriter
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.simulation import (THESIS_VELOCITY_SCALE, FlexibleJointPlant, Simulator, rest_state,
                                     thesis_trajectory)

PERIOD = 1e-3


GAP = 0.9e-3          # idle time before each cycle in the spaced runs [s]


def controller_cycles(model, cycles, compiled=True, gap=None):
    """Compute times [µs] of ``cycles`` controller cycles along the trajectory; ``gap``: None
    (back to back), "sleep" or "spin" (``GAP`` s of ``time.sleep`` or of a busy loop before each
    cycle, as between two 1 kHz joint states)."""
    times, positions = thesis_trajectory(model)
    x0, hold = rest_state(model, positions[0])
    sim = Simulator(FlexibleJointPlant(model), x0, hold)
    ctrl = FailSafeController(model, compiled=compiled, limits=SafetyLimits(velocity_scale=THESIS_VELOCITY_SCALE))
    read = JointStateReader(model, bounds=ctrl.state_bounds)        # plausibility bounds, as in the node
    serialize, state = TorqueCommandWriter(model.n), JointStateWriter(model)
    out = []
    for k in range(cycles):
        serialized, _ = state(k * PERIOD, *sim.sample(), *sim.efforts())
        if gap == "sleep":
            time.sleep(GAP)
        elif gap == "spin":
            until = time.perf_counter() + GAP
            while time.perf_counter() < until:
                pass
        start = time.perf_counter()
        ctrl.update_state(read.from_bytes(serialized), k * PERIOD, validated=True)
        if k == 0:
            ctrl.set_trajectory(times, positions)
        command = ctrl.compute()
        serialize(command.tau)
        out.append(1e6 * (time.perf_counter() - start))
        sim.set_command(command.tau)
        if k % 10 == 0:        # keep the robot moving with the trajectory, cheaply
            sim.advance(10 * PERIOD)
    return np.array(out)


def simulator_periods(model, periods, rate_hz):
    """Wall times [µs] of ``periods`` simulated milliseconds (integration at ``rate_hz`` + JointState)."""
    _, positions = thesis_trajectory(model)
    x0, hold = rest_state(model, positions[0])
    sim = Simulator(FlexibleJointPlant(model, 1.0 / rate_hz), x0, hold)
    state = JointStateWriter(model)
    out = []
    for _ in range(periods):
        start = time.perf_counter()
        sim.advance(PERIOD)
        state(sim.t, *sim.sample(), *sim.efforts())
        out.append(1e6 * (time.perf_counter() - start))
    return np.array(out)


def describe(label, runs):
    """Print the median over repeats of p50/p99/max/late; returns the median p50 [µs]."""
    p50 = [np.percentile(r, 50) for r in runs]
    p99 = [np.percentile(r, 99) for r in runs]
    late = [100.0 * np.mean(r > 1e6 * PERIOD) for r in runs]
    print(f"{label}: median over {len(runs)} repeats: p50 {statistics.median(p50):.1f} µs, "
          f"p99 {statistics.median(p99):.1f} µs, max {statistics.median([r.max() for r in runs]):.1f} µs, "
          f"late (> 1 ms) {statistics.median(late):.2f} %")
    return statistics.median(p50)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--integration-rate", type=float, default=2000.0,
                        help="simulator RK4 rate [Hz] (node default 2000)")
    add_quick_option(parser)
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.cycles = 1, 60
    print(machine_load())
    model = load_robot("kuka_lwr4")
    controller_cycles(model, 50)  # warm-up (builds/loads the generated feedforward library)
    fast = describe("controller cycle", [controller_cycles(model, args.cycles) for _ in range(args.repeats)])
    slow = describe("baseline: same cycle, law on CasADi's VM",
                    [controller_cycles(model, args.cycles, compiled=False) for _ in range(args.repeats)])
    print(f"controller cycle p50: baseline / generated C = {slow / fast:.1f}x")
    for gap, how in (("sleep", "time.sleep"), ("spin", "a busy loop")):
        describe(f"controller cycle after {GAP * 1e3:g} ms of {how} (1 kHz spacing)",
                 [controller_cycles(model, args.cycles // 3, gap=gap) for _ in range(args.repeats)])
    steps = int(round(args.integration_rate * PERIOD))
    describe(f"simulator 1 ms ({steps} RK4 steps at {args.integration_rate:g} Hz)",
             [simulator_periods(model, args.cycles, args.integration_rate) for _ in range(args.repeats)])
    print(machine_load())


if __name__ == "__main__":
    main()

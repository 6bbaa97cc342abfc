"""Benchmark of input shaping (issue 19). Run: `. scripts/env.sh; python benchmarks/bench_shaping.py`.

Shapes a 7-joint (kuka_lwr4), 5 s point-to-point reference (the thesis q0 -> qf, notes_003 §5,
stretched to T = 5 s; joint 6 moves 3.7 rad) with ZVD, ready for a 1 kHz controller, as the
controller does on acceptance (flexmodal_ros.shaping.shape_trajectory: modes along the path,
selection, the shaper at every sample, splines, the exact shaped reference at 200 Hz knots and the
C⁴ piecewise polynomial a control cycle evaluates). Target <= 50 ms. In one run, median of repeats:

1. exact: the closed-loop AMA at 100 Hz along the path (501 configurations: eigenvalues and mode
   shapes at every 10th for MAC tracking and the mode selection; at the others the shaped modes'
   eigenvalues by Newton continuation with the K̄ > 0 stability certificate,
   flexmodal_ros.flexible_joint.continuation, which the breakdown compares with the full eigenvalue-only
   AMA there);
2. polynomial: the same anchors, then the shaped modes' eigenvalues from expansions in the path
   parameter (flexmodal_ros.expansion.path), two-point Taylor interpolation between them;
3. fixed-frequency: the same ZVD (same modes) from the start configuration's modes only, no AMA
   along the path (flexmodal_ros.shaping.shape_with); the baseline.

Prints median wall and CPU time over the repeats, interleaved (one round of every case per repeat,
so that a changing load hits all alike; the machine may be shared: wall includes waiting for a
core, the load average is printed with the numbers, and the best wall time is the one closest to
a quiet machine), the ratios to (3), the agreement of (2) with (1), a
breakdown and the cost of one control cycle's ``sample(t)``. Options: --repeats N.

``--service`` (issue 32): the modal server's ``~/shape_trajectory`` round trip instead, on the
README's kuka_lwr4 move (docs/shaping/kuka_lwr4_move.yaml: 0.4 s, ZVD, design auto, answer at
200 Hz; each call's goal moved by a further 1e-7 rad so that every call is a path the server has
not answered yet, then the same request again, answered from the server's cache), from a client in this process to ``modal_analysis_server`` started as a process (set
ROS_DOMAIN_ID; `. scripts/env.sh` keeps discovery on loopback): median (p50), p90, p99 (nearest
rank) and best wall time over the repeats (at least 100) after one warm-up call, target p50 <= 50
ms, against the same shaping in this process (flexmodal_ros.shaping.shaped_samples.shape_samples)
measured in the same run.
"""
import argparse
import os
import statistics
import time

import numpy as np

from _shared import add_quick_option
from flexmodal_ros.flexible_joint.linear_model import closed_loop_state_matrix, configuration_terms
from flexmodal_ros.flexible_joint.ama import modal_analysis, modal_analysis_batch
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.modes import track_modes
from flexmodal_ros.expansion.flexible_joint import segment_taylor_map
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.shaping import (DEFAULT_EXPANSION_ORDER, convolve, path_modes, shape_trajectory, shape_with,
                                   shaper_schedule, zvd)
from flexmodal_ros.shaping.reference import ShapedTrajectory, path_samples
from flexmodal_ros.shaping.schedule import _continued, _interpolated
from flexmodal_ros.simulation import thesis_trajectory
from flexmodal_ros.robot.trajectory import PiecewiseC4Trajectory

KNOT_RATE_HZ = 200.0
AMA_RATE_HZ = 100.0
DURATION = 5.0


def timed(fn, repeats):
    """(median wall [s], median CPU [s], last result) of ``fn()`` over ``repeats`` runs."""
    wall, cpu, out = [], [], None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu), out


def interleaved(cases, repeats):
    """{name: (median wall [s], median CPU [s], last result, best wall [s])} of the callables
    ``cases``, run in turn ``repeats`` times (each round runs every case once)."""
    walls, cpus, outs = ({name: [] for name in cases} for _ in range(3))
    for _ in range(repeats):
        for name, fn in cases.items():
            w0, c0 = time.perf_counter(), time.process_time()
            outs[name] = fn()
            walls[name].append(time.perf_counter() - w0)
            cpus[name].append(time.process_time() - c0)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name]), outs[name], min(walls[name]))
            for name in cases}


def load():
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def service_round_trip(repeats):
    """p50 / p90 / p99 / best [s] of ~/shape_trajectory calls and of shape_samples in this process."""
    import signal
    import subprocess
    from pathlib import Path

    import rclpy
    from flexmodal_interfaces.srv import ShapeTrajectory
    from flexmodal_ros.nodes.conversions import core_to_trajectory
    from flexmodal_ros.shaping.shaped_samples import shape_samples
    from flexmodal_ros.shaping.trajectory_file import read_waypoints

    model = load_robot("kuka_lwr4")
    move = read_waypoints(model, Path(__file__).resolve().parent.parent / "docs" / "shaping" / "kuka_lwr4_move.yaml")
    server = subprocess.Popen(["modal_analysis_server", "--ros-args", "-p", "robot:=kuka_lwr4"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rclpy.init()
    try:
        node = rclpy.create_node("bench_shape_trajectory")
        client = node.create_client(ShapeTrajectory, "/modal_analysis/shape_trajectory")
        if not client.wait_for_service(timeout_sec=120.0):
            raise SystemExit("bench_shaping: ~/shape_trajectory did not come up within 120 s")
        def request(i):                 # goal of joint 2 moved by i × 1e-7 rad: a new path for the server's cache
            positions = np.array(move.positions, float)
            positions[-1, 1] += i * 1e-7
            return ShapeTrajectory.Request(trajectory=core_to_trajectory(model.joint_names, move.times, positions))

        def call(req):
            t0 = time.perf_counter()
            future = client.call_async(req)
            rclpy.spin_until_future_complete(node, future, timeout_sec=60.0)
            answer = future.result()
            if answer is None or not answer.success:
                raise SystemExit(f"bench_shaping: the call failed: {answer and answer.message}")
            return time.perf_counter() - t0, answer

        call(request(0))                                   # the first call warms the server up
        walls, cached = [], []
        for i in range(repeats):
            wall, response = call(request(i + 1))          # a path the server has not seen
            walls.append(wall)
            cached.append(call(request(i + 1))[0])         # the same request again: the server's cache
        inproc = interleaved({"core": lambda: shape_samples(model, move, "zvd", "auto", 200.0)}, repeats)["core"]
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
        server.send_signal(signal.SIGINT)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    walls.sort()
    cached.sort()
    p90, p99 = (walls[min(len(walls) - 1, int(q * len(walls)))] for q in (0.9, 0.99))
    print(f"~/shape_trajectory round trip, kuka_lwr4 README move, ZVD auto ({response.shaper_design}), "
          f"{len(response.trajectory.points)} samples at 200 Hz: p50 {statistics.median(walls) * 1e3:.1f} ms "
          f"(target <= 50), p90 {p90 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, best {walls[0] * 1e3:.1f} ms over {len(walls)} calls; "
          f"the same shaping in this process (shape_samples): median {inproc[0] * 1e3:.1f} ms wall, "
          f"{inproc[1] * 1e3:.1f} ms CPU (ratio {statistics.median(walls) / inproc[0]:.2f}); the same request again "
          f"(answered from the server's cache of its last answers): p50 {statistics.median(cached) * 1e3:.1f} ms; {load()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--service", action="store_true", help="~/shape_trajectory round trip (issue 32)")
    add_quick_option(parser)
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    if args.service:
        service_round_trip(3 if args.quick else max(args.repeats, 100))
        return
    model = load_robot("kuka_lwr4")
    _, positions = thesis_trajectory(model)
    path = PiecewiseC4Trajectory([0.0, DURATION], positions)
    segment_taylor_map(model, DEFAULT_EXPANSION_ORDER)          # built once per robot (the controller: at start)
    for modal in ("exact", "polynomial"):                       # warm-up (imports, caches)
        shape_trajectory(model, path, "zvd", knot_rate_hz=KNOT_RATE_HZ, modal=modal)
    print(f"{load()} at start")

    _, pm = shape_trajectory(model, path, "zvd", ama_rate_hz=AMA_RATE_HZ)
    start = modal_analysis(model, path.positions[0])
    sel = [int(np.argmin(np.abs(start.frequencies_hz - f))) for f in pm.frequencies_hz[0, list(pm.selected)]]
    fixed = convolve(*(zvd(start.frequencies_hz[i], start.damping_ratios[i]) for i in sel))
    _, _, qs = path_samples(path, AMA_RATE_HZ)
    samples = qs.shape[0]
    others = np.setdiff1d(np.arange(samples), pm.anchors)
    M, KG, _ = configuration_terms(model, create_data(model), qs)
    A = closed_loop_state_matrix(model, M, KG)
    full = modal_analysis_batch(model, qs[pm.anchors])
    order, _ = track_modes(full)
    guess = _interpolated(np.array([r.eigenvalues[o] for r, o in zip(full, order)]), pm.anchors, samples)

    def continuation():          # the exact path at the other samples: terms, certificate, Newton
        M, KG, _ = configuration_terms(model, create_data(model), qs[others])
        return _continued(model, M, KG, guess.copy(), others, pm.selected, pm.anchors, full, order)
    schedule = shaper_schedule(pm, "zvd")
    cases = {modal: (lambda modal=modal: shape_trajectory(model, path, "zvd", knot_rate_hz=KNOT_RATE_HZ,
                                                          ama_rate_hz=AMA_RATE_HZ, modal=modal))
             for modal in ("exact", "polynomial")}
    cases.update({
        "fixed": lambda: shape_with(path, fixed, knot_rate_hz=KNOT_RATE_HZ),
        "fixed_ama": lambda: (modal_analysis(model, path.positions[0]),
                              shape_with(path, fixed, knot_rate_hz=KNOT_RATE_HZ)),
        "anchors": lambda: modal_analysis_batch(model, qs[pm.anchors], shapes=True),
        "others": lambda: modal_analysis_batch(model, qs[others], shapes=False),
        "continuation": continuation,
        "modes_exact": lambda: path_modes(model, path, AMA_RATE_HZ),
        "modes_polynomial": lambda: path_modes(model, path, AMA_RATE_HZ, modal="polynomial"),
        "schedule": lambda: shaper_schedule(pm, "zvd"),
        "table": lambda: ShapedTrajectory(path, schedule, knot_rate_hz=KNOT_RATE_HZ),
        "bare": lambda: np.linalg.eigvals(A)})
    runs = interleaved(cases, args.repeats)        # one round of every case per repeat: the same load for all
    wall = {name: run[0] for name, run in runs.items()}
    traj, pm = runs["exact"][2]
    poly_traj, poly_pm = runs["polynomial"][2]
    fwall, fcpu, _, fbest = runs["fixed"]
    print(f"kuka_lwr4, {DURATION:g} s reference, 7 joints, ZVD on modes {[k + 1 for k in pm.selected]}, "
          f"piecewise polynomial with {traj._knots.size} knots ({KNOT_RATE_HZ:g} Hz + segment starts of the copies)")
    for modal in ("exact", "polynomial"):
        w, cpu, _, best = runs[modal]
        how = (f"AMA at {AMA_RATE_HZ:g} Hz: {samples} configurations" if modal == "exact" else
               f"{pm.anchors.size} anchors + {poly_pm.expansion_samples.size} expansions of order "
               f"{DEFAULT_EXPANSION_ORDER}")
        print(f"configuration-dependent, {modal} ({how}): {w * 1e3:.1f} ms wall (best {best * 1e3:.1f}), "
              f"{cpu * 1e3:.1f} ms CPU (target <= 50 ms); / fixed: {w / fwall:.2f} (wall), {cpu / fcpu:.2f} (CPU)")
    print(f"fixed-frequency (start configuration's modes, no AMA along the path): {fwall * 1e3:.1f} ms wall "
          f"(best {fbest * 1e3:.1f}), {fcpu * 1e3:.1f} ms CPU; with its one AMA: {wall['fixed_ama'] * 1e3:.1f} ms; "
          f"{load()}")

    s = list(pm.selected)
    t = np.arange(0.0, max(traj.duration, poly_traj.duration), 1e-3)
    y_exact, y_poly = traj.evaluate(t), poly_traj.evaluate(t)
    ratios = [np.abs(y_poly[:, k] - y_exact[:, k]).max() / np.abs(y_exact[:, k]).max() for k in range(5)]
    df = np.abs(poly_pm.frequencies_hz[:, s] / pm.frequencies_hz[:, s] - 1).max()
    dz = np.abs(poly_pm.damping_ratios[:, s] - pm.damping_ratios[:, s]).max()
    print(f"polynomial vs exact: max |Δf|/f {df:.1e}, max |Δζ| {dz:.1e}, error at the anchors "
          f"{poly_pm.anchor_error:.1e}; shaped reference max |Δy^(k)| / max |y^(k)|, k = 0..4: "
          + " ".join(f"{r:.1e}" for r in ratios))

    cycles = np.arange(0.0, traj.duration, 1e-3)
    t_cycle = timed(lambda: [traj.sample(t) for t in cycles], 3)[0] / cycles.size
    per_expansion = (wall["modes_polynomial"] - wall["anchors"]) / poly_pm.expansion_samples.size
    left = runs["continuation"][2].size
    print(f"breakdown (wall): AMA with shapes at {pm.anchors.size} anchors {wall['anchors'] * 1e3:.1f} ms; "
          f"at the other {others.size}: continuation of the {len(s)} shaped modes (terms, certificate, Newton) "
          f"{wall['continuation'] * 1e3:.1f} ms ({left} samples left for a full AMA), against the full "
          f"eigenvalue-only AMA {wall['others'] * 1e3:.1f} ms ({wall['others'] / others.size * 1e6:.0f} us/config); "
          f"path modes (+ tracking, selection) exact {wall['modes_exact'] * 1e3:.1f} ms, polynomial "
          f"{wall['modes_polynomial'] * 1e3:.1f} ms ({per_expansion * 1e3:.1f} ms per expansion with its checks); "
          f"shaper design + splines {wall['schedule'] * 1e3:.1f} ms; piecewise polynomial "
          f"{wall['table'] * 1e3:.1f} ms; per control cycle (sample) {t_cycle * 1e6:.1f} us")
    print(f"floor: bare numpy.linalg.eigvals of the {samples} 28x28 state matrices, 1 thread: "
          f"{wall['bare'] * 1e3:.1f} ms; {load()} at the end")


if __name__ == "__main__":
    main()

"""Benchmarks of the modal analysis (issue 3). Run: `. scripts/env.sh; python benchmarks/bench_modal.py`.

Prints medians of repeated runs:
1. single configuration `modal_analysis` (scompi, kuka_lwr4), target <= 0.5 ms;
2. batch throughput for kuka_lwr4 (f, zeta, mode shapes), 1 and 2 worker threads, target >= 5000
   configs/s on 2 cores, and the ratio of the 1-worker time per configuration to bare
   `numpy.linalg.eig` (with vectors) on the same state matrices;
3. `~/compute_modal_parameters` round trip to the `modal_analysis_server` executable (1000 calls),
   targets median <= 2 ms, p99 <= 10 ms.
Options: --quick (fewer repetitions), --skip-ros.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from flexmodal_ros.linearize import state_matrix
from flexmodal_ros.modal import linearized_batch, modal_analysis, modal_analysis_batch
from flexmodal_ros.model import create_data
from flexmodal_ros.robots import load_robot


def median_time(fn, repeats):
    """Median wall time [s] of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def random_configs(model, m, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(model.position_lower, -np.pi), np.minimum(model.position_upper, np.pi)
    return rng.uniform(lo, hi, (m, model.n))


def bench_single(robot, repeats):
    model = load_robot(robot)
    data = create_data(model)
    qs = random_configs(model, 200)
    per = median_time(lambda: [modal_analysis(model, q, data) for q in qs], repeats) / len(qs)
    print(f"single configuration {robot:<10} ({4 * model.n}x{4 * model.n} A): {per * 1e3:.3f} ms")


def bench_batch(repeats, m):
    model = load_robot("kuka_lwr4")
    qs = random_configs(model, m, seed=1)
    (Mb, Db, Kb), _ = linearized_batch(model, create_data(model), qs)
    A = state_matrix(Mb, Db, Kb)
    bare = median_time(lambda: np.linalg.eig(A), repeats) / m
    print(f"bare numpy.linalg.eig (vectors), {A.shape[1]}x{A.shape[2]}, 1 thread: {bare * 1e6:.1f} us/config")
    for workers in (1, 2):
        per = median_time(lambda: modal_analysis_batch(model, qs, workers=workers), repeats) / m
        print(f"batch kuka_lwr4, {workers} worker(s): {1 / per:,.0f} configs/s ({per * 1e6:.1f} us/config, "
              f"{per / bare:.2f}x bare eig per config)")


def bench_service(calls):
    """Round trip of ~/compute_modal_parameters to the console-script node (loopback only)."""
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
    import rclpy
    from flexmodal_interfaces.srv import ComputeModalParameters

    exe = os.path.join(os.path.dirname(sys.executable), "modal_analysis_server")
    server = subprocess.Popen([exe, "--ros-args", "-p", "robot:=kuka_lwr4"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=os.environ.copy())
    rclpy.init()
    node = rclpy.create_node("bench_modal_client")
    try:
        client = node.create_client(ComputeModalParameters, "/modal_analysis/compute_modal_parameters")
        if not client.wait_for_service(timeout_sec=30.0):
            raise RuntimeError("modal_analysis_server did not come up")
        req = ComputeModalParameters.Request()
        req.positions = [0.1, 0.5, -0.2, -1.2, 0.3, 0.8, 0.0]
        times = []
        for _ in range(calls + 20):
            t0 = time.perf_counter()
            future = client.call_async(req)
            rclpy.spin_until_future_complete(node, future, timeout_sec=5.0)
            assert future.result().success
            times.append(time.perf_counter() - t0)
        times = np.array(times[20:]) * 1e3  # first calls warm up discovery and caches
        print(f"service round trip kuka_lwr4 ({calls} calls): median {np.median(times):.2f} ms, "
              f"p99 {np.percentile(times, 99):.2f} ms")
    finally:
        node.destroy_node()
        rclpy.shutdown()
        server.terminate()
        server.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-ros", action="store_true")
    args = ap.parse_args()
    repeats = 3 if args.quick else 7
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for robot in ("scompi", "kuka_lwr4"):
        bench_single(robot, repeats)
    bench_batch(repeats, 2000 if args.quick else 8000)
    if not args.skip_ros:
        bench_service(200 if args.quick else 1000)


if __name__ == "__main__":
    main()

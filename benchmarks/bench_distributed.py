"""Modal maps on Dask vs today's local batch path (issue 18), kuka_lwr4, eigenvalues only
(frequencies, damping, stability: the out-of-core path without mode shapes).

Throughput (configurations/s, median of ``--repeats``) on a lazily generated grid of ``--configs``
(≥ 10⁵) configurations:
  local batch      ``modal_analysis_batch(..., shapes=False)`` in memory, 1 and 2 threads (today)
  local store      ``sweep_to_store`` with local threads (no Dask), 2 threads
  dask store       ``sweep_to_store`` on a LocalCluster of 1 and 2 worker processes, started once
                   before timing (its start-up is printed separately)
Every repeat runs all variants back to back; ratio = dask store (2 workers) / local batch
(2 threads) per repeat, median over repeats; the issue's target is ≥ 0.85.

``--rss N`` runs one ``flexmodal``-equivalent store sweep of N configurations on ``local:2`` in a
fresh process and prints the client's peak RSS (the client process also hosts the scheduler);
the default run launches it for 10⁶ configurations. The load average is printed next to every
figure: the machine is shared.

    python benchmarks/bench_distributed.py                     # 10⁵ throughput + 10⁶ RSS
    python benchmarks/bench_distributed.py --configs 200000 --repeats 3 --rss-configs 1000000
"""
import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _shared import add_quick_option, machine_load
from flexmodal_ros.distributed import sweep_to_store
from flexmodal_ros.distributed.executors import LOOPBACK_CLUSTER
from flexmodal_ros.flexible_joint.ama import modal_analysis_batch
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.flexible_joint.sweep import grid_spec


def kuka_grid(model, num):
    """A lazy 3-axis grid (joints 2, 3, 4) of a·b·c ≥ ``num`` configurations (10⁶: 100³)."""
    side = int(np.ceil(num ** (1 / 3)))
    sizes = [side, side, int(np.ceil(num / side ** 2))]
    return grid_spec(model, np.full(7, 0.1), {
        "joint_2": np.linspace(-1.5, 1.5, sizes[0]), "joint_3": np.linspace(-1.0, 1.0, sizes[1]),
        "joint_4": np.linspace(0.1, 1.9, sizes[2])})


def load():
    return "load %.2f/%.2f/%.2f" % os.getloadavg()


def throughput(configs, repeats, cluster_sizes=(1, 2)):
    """Each repeat runs every variant back to back (same load conditions); medians per variant and
    the median of the per-repeat ratios."""
    from distributed import LocalCluster

    model = load_robot("kuka_lwr4")
    grid = kuka_grid(model, configs)
    size = grid.size
    print(f"kuka_lwr4, {size} configurations (lazy 3-axis grid), eigenvalues only, "
          f"{os.cpu_count()} CPUs, {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        clusters = {}
        for n in cluster_sizes:
            t0 = time.perf_counter()
            clusters[n] = stack.enter_context(LocalCluster(n_workers=n, **LOOPBACK_CLUSTER))
            print(f"LocalCluster({n}) start-up {time.perf_counter() - t0:.1f} s ({load()})", flush=True)

        def store(**kw):
            return sweep_to_store(model, grid, Path(tmp) / f"map{time.monotonic_ns()}.zarr", track=False, **kw)

        variants = {
            "local batch, 1 thread": lambda: modal_analysis_batch(model, grid.rows(), workers=1, shapes=False),
            "dask store, 1 worker": lambda: store(scheduler=clusters[1].scheduler_address),
            "local batch, 2 threads": lambda: modal_analysis_batch(model, grid.rows(), workers=2, shapes=False),
            "dask store, 2 workers": lambda: store(scheduler=clusters[2].scheduler_address),
            "local store, 2 threads": lambda: store(workers=2),
        }
        variants = {name: fn for name, fn in variants.items()
                    if "dask" not in name or int(name.split(", ")[1][0]) in clusters}
        rates = {name: [] for name in variants}
        for rep in range(repeats):
            for name, fn in variants.items():
                before = load()
                t0 = time.perf_counter()
                fn()
                rates[name].append(size / (time.perf_counter() - t0))
                print(f"  repeat {rep + 1}: {name:<24} {rates[name][-1]:8.0f} configs/s  ({before} → {load()})",
                      flush=True)
    for name, values in rates.items():
        print(f"{name:<26} median {statistics.median(values):8.0f} configs/s", flush=True)
    for n, local in ((1, "local batch, 1 thread"), (2, "local batch, 2 threads")):
        dask = f"dask store, {n} worker{'s' if n > 1 else ''}"
        if dask not in rates:
            continue
        ratios = [d / b for d, b in zip(rates[dask], rates[local])]
        print(f"ratio {dask} / {local}: median {statistics.median(ratios):.3f} "
              f"(per repeat {', '.join(f'{r:.3f}' for r in ratios)})"
              + ("  target >= 0.85" if n == 2 else ""), flush=True)
    return rates


def peak_rss_kib():
    """VmHWM of this process [KiB]: its own peak RSS (``ru_maxrss`` would carry over the parent's
    peak through fork + exec on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss(configs):
    """Client side of a store sweep of ``configs`` configurations on local:2; prints one JSON line."""
    model = load_robot("kuka_lwr4")
    grid = kuka_grid(model, configs)
    with tempfile.TemporaryDirectory() as tmp:
        start_load = load()
        t0 = time.perf_counter()
        run = sweep_to_store(model, grid, Path(tmp) / "map.zarr", scheduler="local:2", track=False)
        elapsed = time.perf_counter() - t0
        store_bytes = sum(f.stat().st_size for f in (Path(tmp) / "map.zarr").rglob("*") if f.is_file())
    print(json.dumps({"configurations": grid.size, "elapsed_s": round(elapsed, 1),
                      "configs_per_s": round(grid.size / elapsed), "chunks": run.computed,
                      "client_peak_rss_mib": round(peak_rss_kib() / 1024, 1),
                      "store_mib": round(store_bytes / 2 ** 20, 1),
                      "load_before": start_load, "load_after": load()}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=100_000, help="throughput grid size (default 1e5)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rss-configs", type=int, default=1_000_000, help="client RSS run size (default 1e6; 0 skips)")
    ap.add_argument("--rss", type=int, help=argparse.SUPPRESS)   # child process of the RSS run
    ap.add_argument("--skip-throughput", action="store_true")
    add_quick_option(ap)
    args = ap.parse_args()
    if args.rss:
        peak_rss(args.rss)
        return
    if args.quick:
        args.configs, args.repeats, args.rss_configs = 500, 1, 0
    print(machine_load())
    if not args.skip_throughput:
        throughput(args.configs, args.repeats, (1,) if args.quick else (1, 2))
    if args.rss_configs:
        print(f"client peak RSS, {args.rss_configs} configurations on local:2 (fresh process):", flush=True)
        subprocess.run([sys.executable, __file__, "--rss", str(args.rss_configs)], check=True)
    print(machine_load())


if __name__ == "__main__":
    main()

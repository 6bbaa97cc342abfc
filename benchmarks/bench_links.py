"""Benchmarks of the flexible-link modes (issue 13). Run: `. scripts/env.sh; python benchmarks/bench_links.py`.

Prints, for the three-link arm (Table 8), Timoshenko links, first 10 frequencies:
1. one configuration, cold (no guess) and warm (the previous configuration of a 2° sweep as the
   guess), median per configuration over random configurations, target <= 10 ms on one core, with
   the baseline measured in the same run: the notes' method, a 5000-point scan of the paper's
   det M(ω) plus Brent refinement (notes_002 §2), and its ratio;
2. the 91 x 91 (θ2, θ3) map over [-90°, 90°]² with mode tracking, 2 worker processes, target <= 60 s;
3. the independent FE model (quadratic Timoshenko elements): elements per link and time to reach
   the exact frequencies within 1e-3, 1e-4, 1e-5 and 1e-7 (max relative error, first 10 modes).
Options: --quick (fewer configurations, a 31 x 31 map), --skip-map.
"""
import argparse
import os
import resource
import statistics
import time

import numpy as np
from scipy.optimize import brentq

from _shared import add_quick_option, machine_load
from flexmodal_ros.links import link_modal_map, link_modes, load_link_arm
from flexmodal_ros.links.characteristic import characteristic_matrix, equilibrate
from flexmodal_ros.links.fe import fe_frequencies
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.flexible_joint.sweep import config_grid


def configurations(m, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([np.zeros(m), rng.uniform(-np.pi, np.pi, (m, 2))])


CPU = {}  # median CPU time [s] of the last per_call, by label


def per_call(fn, items, label=None):
    """Median wall time [s] of fn(item) over items, and the results; the median CPU time of this
    process goes to CPU[label] (wall time on a machine shared with other jobs overstates the cost)."""
    times, cpu, out = [], [], []
    for item in items:
        t0, c0 = time.perf_counter(), time.process_time()
        out.append(fn(item))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    CPU[label] = statistics.median(cpu)
    return statistics.median(times), out


def scan_brent(arm, q, f_max_hz, points=5000, model="timoshenko"):
    """Baseline (notes_002 §2): sign changes of det of the equilibrated M(ω) on a grid up to
    f_max, each refined by Brent; returns the roots [Hz]."""
    def sign_det(w):
        m, _, _ = equilibrate(characteristic_matrix(arm, q, w, model))
        s, logdet = np.linalg.slogdet(m)
        return s

    def det(w):
        m, _, _ = equilibrate(characteristic_matrix(arm, q, w, model))
        s, logdet = np.linalg.slogdet(m)
        return s * np.exp(logdet / m.shape[-1])

    w = 2 * np.pi * np.linspace(f_max_hz / points, f_max_hz, points)
    signs = sign_det(w)
    return np.array([brentq(det, w[i], w[i + 1], xtol=1e-12) for i in np.nonzero(np.diff(signs))[0]]) / (2 * np.pi)


def bench_single(arm, m):
    qs = configurations(m)
    cold, results = per_call(lambda q: link_modes(arm, q, 10), qs, "cold")
    print(f"one configuration, cold: {cold * 1e3:.2f} ms wall, {CPU['cold'] * 1e3:.2f} ms CPU (median of {m}; "
          f"target <= 10 ms on one core)")
    sweep = np.column_stack([np.zeros(91), np.radians(np.full(91, -45.0)), np.radians(np.linspace(-90, 90, 91))])
    guess = [None]

    def warm(q):
        res = link_modes(arm, q, 10, guess=guess[0])
        guess[0] = res.omegas
        return res

    warm_time, _ = per_call(warm, sweep, "warm")
    print(f"one configuration, warm (2° steps, previous roots as the guess): {warm_time * 1e3:.2f} ms wall, "
          f"{CPU['warm'] * 1e3:.2f} ms CPU")
    base, base_roots = per_call(lambda q: scan_brent(arm, q, 1.02 * results[0].frequencies_hz[-1]),
                                qs[:max(3, m // 10)], "base")
    print(f"baseline scan (5000 points) + Brent on det M: {base * 1e3:.1f} ms wall, {CPU['base'] * 1e3:.1f} ms CPU "
          f"per configuration -> ours {CPU['base'] / CPU['cold']:.1f}x (cold), {CPU['base'] / CPU['warm']:.1f}x "
          f"(warm) faster in CPU time")
    agree = max(np.abs(b[:10] / r.frequencies_hz - 1).max() for b, r in zip(base_roots, results))
    print(f"  baseline vs ours, max relative difference of the 10 frequencies: {agree:.1e}")


def bench_map(arm, num, workers):
    model = load_robot("three_link_arm")
    axis = np.radians(np.linspace(-90, 90, num))
    qs = config_grid(model, np.zeros(3), {"joint_2": axis, "joint_3": axis})
    t0 = time.perf_counter()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    mmap = link_modal_map(arm, qs, 10, workers=workers)
    dt = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    print(f"{num} x {num} map ({len(qs)} configurations, tracked, {workers} worker processes): {dt:.1f} s wall "
          f"({dt / len(qs) * 1e3:.2f} ms/configuration), {cpu:.1f} s CPU in the workers = {cpu / workers:.1f} s "
          f"on {workers} dedicated cores (target <= 60 s for 91 x 91 on 2 cores); load average "
          f"{os.getloadavg()[0]:.1f}; {len(mmap.crossings)} crossings")


def bench_fe(arm):
    q = np.radians([0.0, -45.0, 90.0])
    t_exact, runs = per_call(lambda _: link_modes(arm, q, 10).frequencies_hz, range(7), "exact")
    exact = runs[0]
    t_exact = CPU["exact"]
    print(f"exact (this solver), Table 9 configuration: {t_exact * 1e3:.2f} ms CPU")
    for target in (1e-3, 1e-4, 1e-5, 1e-7):
        best = (np.inf, None)
        for elements in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 50, 75, 100, 150):
            _, (fe,) = per_call(lambda n: fe_frequencies(arm, q, 10, "timoshenko", n), [elements], "fe")
            err = np.abs(fe / exact - 1).max()
            best = min(best, (err, elements))
            if err <= target:
                _, _ = per_call(lambda n: fe_frequencies(arm, q, 10, "timoshenko", n), [elements] * 5, "fe")
                print(f"FE within {target:.0e}: {elements} elements per link ({err:.1e}), {CPU['fe'] * 1e3:.1f} ms "
                      f"CPU = {CPU['fe'] / t_exact:.1f}x the exact solver")
                break
        else:
            print(f"FE within {target:.0e}: not reached with up to 150 elements per link (best {best[0]:.1e} "
                  f"with {best[1]}); the exact roots agree with a dense scan of det M to ~1e-12")
    _, (fe,) = per_call(lambda n: fe_frequencies(arm, q, 10, "timoshenko", n), [50], "fe50")
    print(f"FE cross-check as in the tests (50 elements per link): {CPU['fe50'] * 1e3:.1f} ms CPU, "
          f"max relative difference {np.abs(fe / exact - 1).max():.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_quick_option(parser)
    parser.add_argument("--skip-map", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(machine_load())
    arm = load_link_arm("three_link_arm")
    link_modes(arm, [0.0, 0.3, 0.3], 10)  # imports and caches
    bench_single(arm, 3 if args.quick else 200)
    if not args.quick:
        bench_fe(arm)
    if not args.skip_map:
        bench_map(arm, 3 if args.quick else 91, 1 if args.quick else args.workers)
    print(machine_load())


if __name__ == "__main__":
    main()

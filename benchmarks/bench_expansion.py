"""Benchmarks of the parametric eigenpairs (issue 15). Run: `. scripts/env.sh; python benchmarks/bench_expansion.py`.

Prints medians of repeated runs, both paths measured in the same run:
1. the paper's task (ERLS arm, 51 points): exact eigen-solution at the 51 points (batched eig of the
   46x46 first-order form, + the re-linearization) vs polynomial evaluation of the 3 analysed
   eigenpairs (λ, φ, ψ) at the same points — target >= 99 % less (paper: 0.135 s vs 0.008 s, 94 %);
2. kuka_lwr4, t = 3, per configuration: polynomial evaluation of all modes (λ and φ) and the whole
   live step (sorted ModeSet + motor equilibrium) vs the exact AMA — target <= 50 µs vs ~370 µs;
3. expansion time for t = 1…5: kuka_lwr4 (all 17 eigenpairs, right vectors, x = q, p = 7) and the
   ERLS arm (3 pairs, right + left, x = {q, q̇}, p = 4): symbolic build (once per model), Taylor
   coefficients of the matrices, recursion (28).
Options: --quick (fewer repetitions, t <= 4).
"""
import argparse
import time
import warnings

import numpy as np

from _shared import add_quick_option, machine_load, median_time   # benchmarks/ is on sys.path when run as a script
from flexmodal_ros.expansion.erls import ErlsSystem, linearize_batch, load_erls
from flexmodal_ros.expansion.erls.erls_task import expand_at_half_time, straight_path
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.expansion import FlexibleJointSystem, eigenpairs_batch, expand
from flexmodal_ros.expansion.recursion import ExpansionWarning
from flexmodal_ros.expansion.live import PolynomialModalTracker
from flexmodal_ros.robot.registry import load_robot, share_dir

Q0 = np.array([0.3, 0.5, -0.2, 1.0, 0.4, -0.6, 0.2])


def bench_paper(repeats):
    arm = load_erls(share_dir() / "config" / "erls_2link.yaml")
    traj = straight_path(arm)
    setup = expand_at_half_time(arm, traj)
    points, poly = setup.points, setup.polynomial
    mats = linearize_batch(arm, points)
    x = np.hstack([traj.q, traj.qd])
    poly.evaluate(x, warn=False)
    t_eig = median_time(lambda: eigenpairs_batch(*mats), repeats)
    t_np = median_time(lambda: np.linalg.eig(np.linalg.solve(
        np.block([[mats[1], mats[0]], [mats[0], np.zeros_like(mats[0])]]),
        np.block([[-mats[2], np.zeros_like(mats[0])], [np.zeros_like(mats[0]), mats[0]]]))), repeats)
    t_lin = median_time(lambda: linearize_batch(arm, points), repeats)
    t_poly = median_time(lambda: poly.evaluate(x, warn=False), 10 * repeats)
    print(f"1. paper task, 51 points: exact eigen-solutions {t_eig * 1e3:.1f} ms (bare numpy eig of B⁻¹A "
          f"{t_np * 1e3:.1f} ms; + re-linearization {t_lin * 1e3:.1f} ms) vs polynomial λ, φ, ψ of 3 pairs "
          f"{t_poly * 1e3:.3f} ms: {100 * (1 - t_poly / t_eig):.2f} % less ({100 * (1 - t_poly / t_np):.2f} % "
          f"vs bare eig; paper: 0.135 s vs 0.008 s, 94 %)")


def bench_kuka_live(repeats):
    model = load_robot("kuka_lwr4")
    data = create_data(model)
    tracker = PolynomialModalTracker(model, order=3)
    tracker(Q0)
    poly = tracker.polynomial
    rng = np.random.default_rng(0)
    qs = Q0 + rng.uniform(-0.5, 0.5, (200, 7)) * poly.trust_radius
    t_exact = median_time(lambda: [modal_analysis(model, q, data) for q in qs], repeats) / len(qs)
    t_eval = median_time(lambda: [poly.evaluate(q, left=False, warn=False) for q in qs], repeats) / len(qs)
    t_live = median_time(lambda: [tracker(q) for q in qs], repeats) / len(qs)
    c_exact = median_cpu(lambda: [modal_analysis(model, q, data) for q in qs], repeats) / len(qs)
    c_eval = median_cpu(lambda: [poly.evaluate(q, left=False, warn=False) for q in qs], repeats) / len(qs)
    c_live = median_cpu(lambda: [tracker(q) for q in qs], repeats) / len(qs)
    print(f"2. kuka_lwr4 t = 3 ({poly.num_terms} terms, {poly.num_pairs} eigenpairs), per configuration, wall "
          f"(CPU) time: polynomial λ, φ {t_eval * 1e6:.1f} µs ({c_eval * 1e6:.1f}), live step (sorted "
          f"ModalResult) {t_live * 1e6:.1f} µs ({c_live * 1e6:.1f}) vs exact AMA {t_exact * 1e6:.1f} µs "
          f"({c_exact * 1e6:.1f}): {t_exact / t_eval:.1f}x / {t_exact / t_live:.1f}x faster; sources {tracker.counts}")


def median_cpu(fn, repeats):
    """Median CPU time [s] of this process for ``fn()`` (less sensitive than wall time to other
    jobs on a shared machine; numpy's BLAS threads count too)."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return float(np.median(times))


def bench_expansion_times(max_order, repeats):
    kuka = load_robot("kuka_lwr4")
    setup = expand_at_half_time(load_erls(share_dir() / "config" / "erls_2link.yaml"))
    erls, numbers = setup.system, setup.mode_numbers
    print("3. expansion time (symbolic build, once per model and order | matrix Taylor coefficients | "
          "whole expansion incl. coefficients):")
    for name, fresh, kwargs in (
            ("kuka_lwr4 (17 pairs, right)", lambda: FlexibleJointSystem(kuka, Q0), {"left": False}),
            ("ERLS arm (3 pairs, right+left)", lambda: ErlsSystem(erls.model, erls.point, erls.kinds),
             {"modes": numbers})):
        for t in range(1, max_order + 1):
            system = fresh()
            start = time.perf_counter()
            system.taylor(system.x0, t)            # builds (and caches) the CasADi functions
            build = time.perf_counter() - start
            coef = median_time(lambda: system.taylor(system.x0, t), repeats)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExpansionWarning)
                total = median_time(lambda: expand(system, order=t, **kwargs), repeats)
            print(f"   {name:<31} t = {t}: build {build:6.2f} s | coefficients {coef * 1e3:8.2f} ms | "
                  f"expansion {total * 1e3:8.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_quick_option(parser)
    args = parser.parse_args()
    repeats = 1 if args.quick else 7
    print(machine_load())
    bench_paper(repeats)
    bench_kuka_live(repeats)
    bench_expansion_times(2 if args.quick else 5, 1 if args.quick else 5)
    print(machine_load())


if __name__ == "__main__":
    main()

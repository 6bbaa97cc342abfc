"""Benchmark of input shaping (issue 19). Run: `. scripts/env.sh; python benchmarks/bench_shaping.py`.

Shapes a 7-joint (kuka_lwr4), 5 s point-to-point reference (the thesis q0 -> qf, notes_003 §5,
stretched to T = 5 s) with ZVD, ready for a 1 kHz controller, as the controller does on acceptance:

1. configuration-dependent: exact closed-loop AMA at 100 Hz along the path (501 samples,
   eigenvalues only, + mode shapes at every 10th sample for MAC tracking and the mode selection),
   tracked modes, the shaper designed at every sample, splines, the exact shaped reference at
   200 Hz knots and the C⁴ piecewise polynomial a control cycle evaluates
   (flexmodal_ros.shaping.shape_trajectory); target <= 50 ms;
2. fixed-frequency: the same ZVD (same modes) from the start configuration's modes only, no AMA
   along the path (flexmodal_ros.shaping.shape_with); the baseline.

Prints the median over repeats of each, their ratio, a breakdown of (1), the CPU time (the
machine may be shared: wall time includes waiting for a core) and the cost of one control cycle's
``sample(t)``. Options: --repeats N.
"""
import argparse
import os
import statistics
import time

import numpy as np

from flexmodal_ros.linearize import closed_loop_state_matrix, configuration_terms
from flexmodal_ros.modal import modal_analysis, modal_analysis_batch
from flexmodal_ros.model import create_data
from flexmodal_ros.robots import load_robot
from flexmodal_ros.shaping import convolve, path_modes, shape_trajectory, shape_with, shaper_schedule, zvd
from flexmodal_ros.shaping.reference import ShapedTrajectory, path_samples
from flexmodal_ros.simulation import thesis_trajectory
from flexmodal_ros.trajectory import PiecewiseC4Trajectory

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    model = load_robot("kuka_lwr4")
    _, positions = thesis_trajectory(model)
    path = PiecewiseC4Trajectory([0.0, DURATION], positions)
    shape_trajectory(model, path, "zvd", knot_rate_hz=KNOT_RATE_HZ)          # warm-up (imports, caches)

    wall, cpu, (traj, pm) = timed(lambda: shape_trajectory(model, path, "zvd", knot_rate_hz=KNOT_RATE_HZ,
                                                           ama_rate_hz=AMA_RATE_HZ), args.repeats)
    samples = pm.eta.size
    print(f"kuka_lwr4, {DURATION:g} s reference, 7 joints, ZVD on modes {[k + 1 for k in pm.selected]}, "
          f"piecewise polynomial with {traj._knots.size} knots ({KNOT_RATE_HZ:g} Hz + segment starts of the copies)")
    print(f"configuration-dependent (AMA at {AMA_RATE_HZ:g} Hz: {samples} configurations): "
          f"{wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU (target <= 50 ms)")

    start = modal_analysis(model, path.positions[0])
    sel = [int(np.argmin(np.abs(start.frequencies_hz - f))) for f in pm.frequencies_hz[0, list(pm.selected)]]
    fixed = convolve(*(zvd(start.frequencies_hz[i], start.damping_ratios[i]) for i in sel))
    fwall, fcpu, _ = timed(lambda: shape_with(path, fixed, knot_rate_hz=KNOT_RATE_HZ), args.repeats)
    fwall_ama, _, _ = timed(lambda: (modal_analysis(model, path.positions[0]),
                                     shape_with(path, fixed, knot_rate_hz=KNOT_RATE_HZ)), args.repeats)
    print(f"fixed-frequency (start configuration's modes, no AMA along the path): {fwall * 1e3:.1f} ms wall, "
          f"{fcpu * 1e3:.1f} ms CPU; with its one AMA: {fwall_ama * 1e3:.1f} ms")
    print(f"ratio configuration-dependent / fixed: {wall / fwall:.2f} (wall), {cpu / fcpu:.2f} (CPU)")

    _, _, qs = path_samples(path, AMA_RATE_HZ)
    t_eig, _, _ = timed(lambda: modal_analysis_batch(model, qs, shapes=False), args.repeats)
    M, KG, _ = configuration_terms(model, create_data(model), qs)
    A = closed_loop_state_matrix(model, M, KG)
    t_bare, _, _ = timed(lambda: np.linalg.eigvals(A), args.repeats)
    t_shp, _, _ = timed(lambda: modal_analysis_batch(model, qs[::10], shapes=True), args.repeats)
    t_modes, _, _ = timed(lambda: path_modes(model, path, AMA_RATE_HZ), args.repeats)
    schedule = shaper_schedule(pm, "zvd")
    t_sched, _, _ = timed(lambda: shaper_schedule(pm, "zvd"), args.repeats)
    t_table, _, _ = timed(lambda: ShapedTrajectory(path, schedule, knot_rate_hz=KNOT_RATE_HZ), args.repeats)
    t_cycle, _, _ = timed(lambda: [traj.sample(t) for t in np.arange(0.0, traj.duration, 1e-3)], 3)
    print(f"breakdown: AMA eigenvalues {t_eig * 1e3:.1f} ms ({t_eig / samples * 1e6:.0f} us/config), "
          f"AMA with shapes at {qs[::10].shape[0]} anchors {t_shp * 1e3:.1f} ms, path_modes total "
          f"(+ tracking, selection) {t_modes * 1e3:.1f} ms; shaper design + splines {t_sched * 1e3:.1f} ms; "
          f"piecewise polynomial {t_table * 1e3:.1f} ms; per control cycle (sample) "
          f"{t_cycle / np.arange(0.0, traj.duration, 1e-3).size * 1e6:.1f} us")
    print(f"floor: bare numpy.linalg.eigvals of the {samples} 28x28 state matrices, 1 thread: {t_bare * 1e3:.1f} ms; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()

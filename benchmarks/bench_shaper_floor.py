"""What limits the residual on the moves whose shaped modes change by > 20 % (issue 32, second round).

Run: `. scripts/env.sh; python benchmarks/bench_shaper_floor.py [--seed 1] [--moves 20]`.

kuka_lwr4 with viscous friction only, the random moves of benchmarks/bench_shaper_design.py (same
seed, same order, the first ``--moves`` the shaper accepts), PD with static compensation, ZVD. On
each move whose shaped modes change by > 20 % along the path, every constant-or-scheduled design
is simulated on one common window (0.5 s after the longest reference, 2 kHz RK4): fixed,
time-varying, robust, robust-long (1.5× as long, ±20 %), robust-coriolis (when auto built it) and a
robust design 2× as long (±20 %).
Printed per design: the simulated residual peak and its ratio to fixed, the predicted linear
residual (linearized model along the path, decayed to the common time) and the design's own
Coriolis/centrifugal estimate (flexmodal_ros.shaping.untreated.second_order) and the forcing
model's residual of the shaped modes (flexmodal_ros.shaping.path_forcing). A design whose
linear prediction is ~1 % of its simulated residual shows the floor: what the linearized model
leaves out (second-order excitation of the reference), which no design of the linear model removes.
Moves run in two processes. ``--quick``: the first 2 accepted moves (usually none with > 20 %).
"""
import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.robot.trajectory import PiecewiseC4Trajectory
from flexmodal_ros.shaping import path_modes
from flexmodal_ros.shaping.prediction import modal_amplitudes
from flexmodal_ros.shaping.reference import DEFAULT_KNOT_RATE_HZ, ShapedTrajectory
from flexmodal_ros.shaping.robust_design import robust_schedule
from flexmodal_ros.shaping.shaper_design import shape_with_design
from flexmodal_ros.shaping.path_forcing import forcing_residual, path_forcing
from flexmodal_ros.shaping.untreated import modal_forcing, second_order
from flexmodal_ros.shaping.vibration import compare, random_moves, simulate_move

DT, WINDOW = 5e-4, 0.5


def plant():
    return with_overrides(load_robot("kuka_lwr4"), d_c=0.0, d_cm=0.0)


def big_moves(seed, count):
    """(index, times, positions, change) of the accepted moves with > 20 % mode change."""
    model, gen, out, accepted = plant(), random_moves(load_robot("kuka_lwr4"), seed), [], 0
    while accepted < count:
        times, positions = next(gen)
        path = PiecewiseC4Trajectory(times, positions)
        try:
            _, _, choice = shape_with_design(model, path, "zvd")
        except InputError:
            continue
        accepted += 1
        if choice is None:
            continue
        sel = list(choice.selected)
        f = path_modes(model, path, modes=sel).frequencies_hz[:, sel]
        change = float(np.max((f.max(axis=0) - f.min(axis=0)) / f[0]))
        if change > 0.2:
            out.append((accepted - 1, times, positions, change))
    return out


def one_move(args):
    index, times, positions, change = args
    model = plant()
    path = PiecewiseC4Trajectory(times, positions)
    _, pm, choice = shape_with_design(model, path, "zvd")
    schedules = {k: v for k, v in choice.schedules.items()}
    if "robust-long" not in schedules:
        schedules["robust-long"] = robust_schedule(pm, path, "zvd", length=1.5, delta=0.2)
    schedules["robust x2"] = robust_schedule(pm, path, "zvd", length=2.0, delta=0.2)
    refs = {k: ShapedTrajectory(path, s, k, DEFAULT_KNOT_RATE_HZ) for k, s in schedules.items()}
    end = max(r.duration for r in refs.values())
    forcing = modal_forcing(model, pm)
    runs = {k: simulate_move(model, times, positions, "zvd", "pd", reference=r, until=end + WINDOW, dt=DT)
            for k, r in refs.items()}
    peaks = {k: v["peak_m"] for k, v in compare(runs, WINDOW).items()}
    full = path_forcing(model, pm, path)
    rows = {k: (peaks[k], float(np.nansum(pm.contributions * np.abs(modal_amplitudes(r, pm, end=end)))),
                float(np.sum(second_order(model, pm, r, end, forcing))), r.added_delay,
                float(forcing_residual(full, pm, r, end).sum())) for k, r in refs.items()}
    return index, change, choice.chosen, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="the first 2 accepted moves (a check that the script runs)")
    args = parser.parse_args()
    if args.quick:
        args.moves = 2
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; kuka_lwr4 viscous, seed {args.seed}")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        for index, change, chosen, rows in pool.map(one_move, big_moves(args.seed, args.moves)):
            fixed = rows["fixed"][0]
            print(f"move {index} (modes change {100 * change:.0f} %, auto chose {chosen}):")
            for k, (peak, linear, second, delay, model_m) in rows.items():
                print(f"  {k:15s} simulated {peak:.3g} m ({peak / fixed:.2f}x fixed); predicted linear {linear:.2g} m "
                      f"({100 * linear / peak:.0f} % of simulated), own Coriolis estimate {second:.2g} m; forcing model "
                      f"{model_m:.2g} m; +{delay:.3f} s")
    print(f"wall {time.perf_counter() - t0:.0f} s; load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

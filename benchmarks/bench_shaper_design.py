"""Shaper design along the path (issue 32): auto against fixed and no shaping on random moves.

Run: `. scripts/env.sh; python benchmarks/bench_shaper_design.py [--seed 1] [--moves 20] [--quick]`.

For each case (kuka_lwr4 without and with its motor Coulomb friction, scompi), random
point-to-point moves (flexmodal_ros.shaping.vibration.random_moves: start and goal uniform within
the URDF limits, 0.2-1 s, scaled to the URDF speed limit and 10 × it in acceleration), PD with
static compensation (``law="pd"``), ZVD; the end-effector residual peak over a 0.5 s window after
the longest reference (2 kHz RK4, 1 kHz control). Prints per case: the designs auto chose, the
distribution (median, worst) of auto / fixed-start ZVD and of unshaped / auto over the moves that
excite the modes (unshaped peak > 1e-4 m), the moves whose shaped modes change by > 20 % along the
path (auto / fixed on each), and how many residuals auto reports as dominated by what the shaper
does not treat. Then the three moves of issue 32's table (time-varying and auto against fixed),
and the robust design with the controller's model stiffness 0.8 and 1.2 × the plant's. Moves run
in two processes. ``--quick``: 3 moves per case and no model-error case (a check that the script
runs, < 1 min).
"""
import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.robot.trajectory import PiecewiseC4Trajectory
from flexmodal_ros.shaping import path_modes
from flexmodal_ros.shaping.trajectory_file import read_waypoints
from flexmodal_ros.shaping.vibration import compare_designs, random_moves

DT, WINDOW = 5e-4, 0.5
DOCS = Path(__file__).resolve().parent.parent / "docs" / "shaping"
ISSUE_MOVES = [("scompi", [0, -0.5236, 2.0944, -0.1745, -2.0944, 0], [0, -0.3, 1.8, 0.1, -1.8, 0], 0.3),
               ("scompi", [0, -0.5236, 2.0944, -0.1745, -2.0944, 0], [0, -0.3, 1.8, 0.1, -1.8, 0], 0.5),
               ("kuka_lwr4", [0, 1.2, 0, 1.2, 0, 0, 0], [0, 1.6, 0, 0.7, 0, 0, 0], 0.5)]


def plant(robot, coulomb=False):
    model = load_robot(robot)
    return model if coulomb else with_overrides(model, d_c=0.0, d_cm=0.0)


def one_move(args):
    robot, coulomb, times, positions, designs, scale = args
    model = plant(robot, coulomb)
    try:
        r, choices = compare_designs(model, times, positions, "zvd", "pd", designs, stiffness_scale=scale,
                                     window=WINDOW, dt=DT)
    except InputError as exc:
        return {"refused": str(exc)}
    choice = choices[designs[-1]]
    sel = list(choice.selected)
    f = path_modes(model, PiecewiseC4Trajectory(times, positions), modes=sel).frequencies_hz[:, sel]
    return {"peak": {k: v["peak_m"] for k, v in r.items()}, "delay": {k: v["added_delay_s"] for k, v in r.items()},
            "chosen": choice.chosen, "dominated": choice.dominated, "T": float(times[-1]),
            "change": float(np.max((f.max(axis=0) - f.min(axis=0)) / f[0]))}


def random_case(pool, robot, coulomb, seed, count):
    gen = random_moves(load_robot(robot), seed)
    out, refused = [], 0
    while len(out) < count:
        batch = [next(gen) for _ in range(count - len(out))]
        for r in pool.map(one_move, [(robot, coulomb, t, p, ("fixed", "auto"), 1.0) for t, p in batch]):
            if "refused" in r:
                refused += 1
            else:
                out.append(r)
    return out, refused


def dist(values):
    return f"median {statistics.median(values):.3g}, worst {max(values) if values else float('nan'):.3g}"


def report(robot, coulomb, results, refused):
    ratio = [r["peak"]["auto"] / r["peak"]["fixed"] for r in results]
    excite = [r for r in results if r["peak"]["none"] > 1e-4]
    gain = [r["peak"]["none"] / r["peak"]["auto"] for r in excite]
    chosen = {d: sum(r["chosen"] == d for r in results) for d in ("fixed", "time-varying", "robust", "robust-long",
                                                                     "robust-coriolis")}
    print(f"{robot} {'with' if coulomb else 'without'} Coulomb: {len(results)} moves ({refused} refused), auto chose "
          + ", ".join(f"{k} {v}" for k, v in chosen.items()))
    print(f"  auto / fixed peak: {dist(ratio)} (best {min(ratio):.3g}); within 1.10: "
          f"{sum(x <= 1.10 for x in ratio)}/{len(ratio)}")
    if gain:
        print(f"  unshaped / auto over {len(excite)} moves with unshaped > 1e-4 m: median {statistics.median(gain):.3g}, "
              f"worst {min(gain):.3g}; >= 10x: {sum(g >= 10 for g in gain)}/{len(gain)}, the others reported "
              f"dominated: {sum(r['dominated'] for r, g in zip(excite, gain) if g < 10)}/{sum(g < 10 for g in gain)}")
    big = [r for r in results if r["change"] > 0.2]
    big_ratio = [r["peak"]["auto"] / r["peak"]["fixed"] for r in big]
    print(f"  modes change > 20 %: {len(big)} moves, auto / fixed "
          + (f"{dist(big_ratio)}; <= 0.5 (2x better): {sum(x <= 0.5 for x in big_ratio)}/{len(big)}: " if big else "")
          + (", ".join(f"{r['peak']['auto'] / r['peak']['fixed']:.2f} ({r['chosen']}, change {100 * r['change']:.0f} %"
                       f"{', dominated' if r['dominated'] else ''})" for r in big) or "-"))
    print(f"  dominated (reported): {sum(r['dominated'] for r in results)}/{len(results)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 moves per case, no model-error case")
    args = parser.parse_args()
    count = 3 if args.quick else args.moves
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; seed {args.seed}, {count} moves per case")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        for robot, coulomb in (("kuka_lwr4", False), ("kuka_lwr4", True), ("scompi", False)):
            report(robot, coulomb, *random_case(pool, robot, coulomb, args.seed, count))
        print("issue 32 table moves (viscous friction only): peak [m], ratio to fixed-start ZVD")
        jobs = [(robot, False, np.array([0.0, T]), np.array([q0, qf]), ("fixed", "time-varying", "auto"), 1.0)
                for robot, q0, qf, T in (ISSUE_MOVES[:1] if args.quick else ISSUE_MOVES)]
        for (robot, q0, qf, T), r in zip(ISSUE_MOVES, pool.map(one_move, jobs)):
            p = r["peak"]
            print(f"  {robot} T={T:g}: none {p['none']:.3g}, fixed {p['fixed']:.3g}, time-varying {p['time-varying']:.3g} "
                  f"({p['time-varying'] / p['fixed']:.2f}x fixed), auto ({r['chosen']}) {p['auto']:.3g} "
                  f"({p['auto'] / p['fixed']:.2f}x fixed, {p['none'] / p['auto']:.0f}x below none)")
        if not args.quick:
            print("model stiffness off (controller's model k = s x the plant's), README acceptance moves, PD law:")
            jobs, labels = [], []
            for robot, move in (("kuka_lwr4", "kuka_lwr4_move.yaml"), ("scompi", "scompi_transfer_approach.yaml")):
                path = read_waypoints(load_robot(robot), DOCS / move)
                for s in (1.0, 0.8, 1.2):
                    jobs.append((robot, False, np.array(path.times), np.array(path.positions),
                                 ("fixed", "time-varying", "robust"), s))
                    labels.append((robot, s))
            for (robot, s), r in zip(labels, pool.map(one_move, jobs)):
                p = r["peak"]
                print(f"  {robot} s={s:g}: none {p['none']:.3g}, fixed {p['fixed']:.3g}, time-varying "
                      f"{p['time-varying']:.3g}, robust {p['robust']:.3g} ({p['none'] / p['robust']:.0f}x below none)")
    print(f"wall {time.perf_counter() - t0:.0f} s; load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

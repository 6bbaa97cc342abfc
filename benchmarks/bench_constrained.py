"""Benchmarks of the constrained linearizations (issue 14). Run:
`. scripts/env.sh; python benchmarks/bench_constrained.py [--quick] [--plot FILE]`.

Times cover, like the source's Tables 1 and 4, the evaluation of the linearization terms and the
eigensolution (plus, for UCS, the spurious filter), not the static equilibrium (the UCS penalty
equilibrium is solved beforehand and reported separately). Medians of repeated runs; the source's
MATLAB times (i7-4790K, 4 GHz) are printed alongside.

1. N-loop four-bar, N = 1, 5, 10, 15, 20, dense, each method (target N = 20: ≤ 1 ms/method);
2. flexible pendulum n_p = 10, 25, 50, 75, 100: dense (full spectrum; MCS by eigh, RCS/UCS by
   QZ) and sparse (first four modes, shift-invert ARPACK + refinement); targets n_p = 100:
   ≤ 0.5 s dense, ≤ 0.1 s sparse; Table 5 differences from MCS;
3. scaling plot n_p = 10…400 (sparse, three methods; dense up to --dense-max) → PNG.
Runs with one BLAS thread unless OPENBLAS_NUM_THREADS is set.
"""
import argparse
import os
import time

# One BLAS thread: on the shared 2-core machine a multi-threaded OpenBLAS makes dense eigh/QZ
# several times slower under load (measured: eigh of 602x602 7.4 s vs 0.38 s).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench_modal import median_time
from flexmodal_ros.constrained import modal_analysis, static_equilibrium
from flexmodal_ros.constrained.equilibrium import penalty_equilibrium
from flexmodal_ros.constrained.models import load_paper_model

METHODS = ("mcs", "rcs", "ucs")
PAPER_TABLE_1_MS = {1: (0.115, 0.108, 0.185), 5: (0.188, 0.356, 0.548), 10: (0.313, 0.954, 1.684),
                    15: (0.556, 1.872, 3.612), 20: (0.752, 4.517, 6.152)}
PAPER_TABLE_4_S = {10: (0.015, 0.020, 0.019), 25: (0.185, 0.176, 0.170), 50: (1.338, 1.229, 1.219),
                   75: (6.411, 5.800, 5.388), 100: (17.940, 16.072, 14.228)}


def _prepared(model):
    system = model.system
    eq = static_equilibrium(system, model.guess)
    t0 = time.perf_counter()
    q_p = penalty_equilibrium(system, eq, model.penalty.alpha, model.penalty.omega)
    return system, eq, q_p, time.perf_counter() - t0


def _run(system, eq, q_p, penalty, method, data, **kw):
    return modal_analysis(system, eq, method, penalty=penalty, q_penalty=q_p, data=data, **kw)


def bench_fourbar(repeats):
    print("1. N-loop four-bar, dense (median ms per linearization + eigensolution)")
    print(f"{'N':>3} {'n':>4} {'MCS':>8} {'RCS':>8} {'UCS':>8}   paper MCS/RCS/UCS [ms]")
    for N, paper in PAPER_TABLE_1_MS.items():
        model = load_paper_model("fourbar", loops=N)
        system, eq, q_p, _ = _prepared(model)
        data = system.create_data()
        ms = [1e3 * median_time(lambda m=m: _run(system, eq, q_p, model.penalty, m, data), repeats)
              for m in METHODS]
        print(f"{N:>3} {system.n:>4} {ms[0]:>8.3f} {ms[1]:>8.3f} {ms[2]:>8.3f}   "
              f"{paper[0]:.3f}/{paper[1]:.3f}/{paper[2]:.3f}")


def bench_pendulum(elements_list, repeats, dense_max):
    print("\n2. flexible double pendulum (median s); dense = full spectrum, sparse = first 4 modes")
    print(f"{'n_p':>4} {'n':>5} {'MCS':>8} {'RCS':>8} {'UCS':>8} | {'MCS sp':>8} {'RCS sp':>8} "
          f"{'UCS sp':>8} | paper MCS/RCS/UCS [s] | |RCS-MCS| |UCS-MCS|re |UCS-MCS|im")
    rows = {}
    for n_p in elements_list:
        model = load_paper_model("pendulum", elements=n_p)
        system, eq, q_p, _ = _prepared(model)
        data = system.create_data()
        dense, first = [np.nan] * 3, {}
        if n_p <= dense_max:
            reps = repeats if n_p <= 25 else 1
            dense = [median_time(lambda m=m: _run(system, eq, q_p, model.penalty, m, data), reps)
                     for m in METHODS]
        sparse = []
        for m in METHODS:
            sparse.append(median_time(lambda m=m: _run(system, eq, q_p, model.penalty, m, data,
                                                       num_modes=4), repeats))
            first[m] = _run(system, eq, q_p, model.penalty, m, data, num_modes=4).eigenvalues[:4]
        d_rcs = np.abs(first["rcs"] - first["mcs"]).max()
        d_ucs = first["ucs"] - first["mcs"]
        paper = PAPER_TABLE_4_S.get(n_p)
        paper_text = "/".join(f"{v:.3f}" for v in paper) if paper else "-"
        print(f"{n_p:>4} {system.n:>5} {dense[0]:>8.3f} {dense[1]:>8.3f} {dense[2]:>8.3f} | "
              f"{sparse[0]:>8.4f} {sparse[1]:>8.4f} {sparse[2]:>8.4f} | {paper_text:>21} | "
              f"{d_rcs:.1e}  {np.abs(d_ucs.real).max():.1e}  {np.abs(d_ucs.imag).max():.1e}")
        rows[n_p] = (dense, sparse)
    return rows


def plot_scaling(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_p = np.array(sorted(rows))
    fig, ax = plt.subplots(figsize=(8, 5))
    for k, method in enumerate(METHODS):
        color = plt.cm.tab10(k)
        dense = np.array([rows[n][0][k] for n in n_p])
        sparse = np.array([rows[n][1][k] for n in n_p])
        ax.loglog(n_p, sparse, "o-", color=color, label=f"{method.upper()} sparse, first 4 modes")
        ok = np.isfinite(dense)
        ax.loglog(n_p[ok], dense[ok], "s--", color=color, label=f"{method.upper()} dense, all modes")
    paper = np.array(sorted(PAPER_TABLE_4_S))
    ax.loglog(paper, [PAPER_TABLE_4_S[n][0] for n in paper], "k:", label="paper MCS (MATLAB)")
    ax.set_xlabel("elements per link n_p")
    ax.set_ylabel("linearization + eigensolution [s]")
    ax.set_title("Flexible double pendulum: time vs model size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    ap.add_argument("--plot", default="constrained_scaling.png", help="scaling plot PNG path")
    ap.add_argument("--dense-max", type=int, default=100, help="largest n_p solved densely")
    ap.add_argument("--max-elements", type=int, default=400, help="largest n_p of the scaling plot")
    args = ap.parse_args()
    repeats = 5 if args.quick else 21
    bench_fourbar(repeats)
    sizes = [10, 25, 50, 75, 100, 150, 200, 300, 400]
    sizes = [n for n in sizes if n <= (100 if args.quick else args.max_elements)]
    rows = bench_pendulum(sizes, 3 if args.quick else 5, args.dense_max)
    plot_scaling(rows, args.plot)


if __name__ == "__main__":
    main()

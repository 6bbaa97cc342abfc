"""Benchmarks of the constrained linearizations (issue 14). Run:
`. scripts/env.sh; python benchmarks/bench_constrained.py [--quick] [--plot FILE]`.

Times cover, like the source's Tables 1 and 4, the evaluation of the linearization terms and the
eigensolution (plus, for UCS, the spurious filter), not the static equilibrium (the UCS penalty
equilibrium is solved beforehand). Medians of repeated runs; the source's MATLAB times (i7-4790K,
4 GHz) are printed alongside. Every target is printed with its ratio to the target and to a
baseline measured in the same run: the eigensolution alone as a plain SciPy implementation
would pay it (below); for the sparse path bare ``scipy.sparse.linalg.eigs`` (shift-invert,
σ = 0, no refinement) on the same sparse pencil.

1. N-loop four-bar, N = 1, 5, 10, 15, 20, dense, each method; target N = 20: ≤ 1 ms per method.
2. flexible pendulum n_p = 10, 25, 50, 75, 100: dense (full spectrum) and sparse (first four
   modes, shift-invert ARPACK + refinement), Table 5 differences from MCS; targets n_p = 100:
   ≤ 0.5 s dense, ≤ 0.1 s sparse; what bounds the dense RCS/UCS (the bare LAPACK call on the
   pencil the product solves); those bare calls again with two BLAS threads.
Baselines: MCS bare ``scipy.linalg.eigh(K_r, M_r)`` (the same undamped reduced problem); RCS, UCS
bare ``scipy.linalg.eig`` on the full first-order pencil (2n + m; 2n).
3. scaling plot n_p = 10…400 (sparse, three methods; dense up to --dense-max) → PNG.
Runs with one BLAS thread unless OPENBLAS_NUM_THREADS is set; prints the load average.
"""
import argparse
import os

# One BLAS thread: on the shared 2-core machine a multi-threaded OpenBLAS makes dense eigh/QZ
# several times slower under load (section 2 measures the two-thread case once).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from threadpoolctl import threadpool_limits

from _shared import add_quick_option, machine_load, median_time
from flexmodal_ros.constrained import modal_analysis, static_equilibrium
from flexmodal_ros.constrained.pencils import index_one_pencil, second_order_pencil
from flexmodal_ros.constrained.equilibrium import penalty_equilibrium
from flexmodal_ros.constrained.linearizations import (_dense, mcs_linearization, rcs_linearization,
                                                 ucs_linearization)
from flexmodal_ros.constrained.paper_models import load_paper_model
from flexmodal_ros.linalg.lapack import generalized_eig, standard_eig

METHODS = ("mcs", "rcs", "ucs")
PAPER_TABLE_1_MS = {1: (0.115, 0.108, 0.185), 5: (0.188, 0.356, 0.548), 10: (0.313, 0.954, 1.684),
                    15: (0.556, 1.872, 3.612), 20: (0.752, 4.517, 6.152)}
PAPER_TABLE_4_S = {10: (0.015, 0.020, 0.019), 25: (0.185, 0.176, 0.170), 50: (1.338, 1.229, 1.219),
                   75: (6.411, 5.800, 5.388), 100: (17.940, 16.072, 14.228)}
FOURBAR_TARGET_S, DENSE_TARGET_S, SPARSE_TARGET_S = 1e-3, 0.5, 0.1


def _load():
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def _prepared(model):
    system = model.system
    eq = static_equilibrium(system, model.guess)
    q_p = penalty_equilibrium(system, eq, model.penalty.alpha, model.penalty.omega)
    return system, eq, q_p


def _run(system, eq, q_p, penalty, method, data, **kw):
    return modal_analysis(system, eq, method, penalty=penalty, q_penalty=q_p, data=data, **kw)


def _baselines(system, eq, q_p, penalty):
    """Per method (label, order, fn): the bare SciPy eigensolution a plain implementation pays —
    MCS: scipy.linalg.eigh(K_r, M_r) (the undamped reduced model, its whole spectrum); RCS and
    UCS: scipy.linalg.eig on the full first-order pencil (index-3 descriptor 2n + m; 2n)."""
    mcs = mcs_linearization(system, eq)
    M_r, K_r = _dense(mcs.M), _dense(mcs.K)
    ucs = ucs_linearization(system, eq, penalty, q_penalty=q_p)
    A_u, E_u = second_order_pencil(*(_dense(a) for a in (ucs.M, ucs.C, ucs.K)))[:2]
    rcs = rcs_linearization(system, eq)
    A_r, E_r = _dense(rcs.A), _dense(rcs.E)
    return {"mcs": ("eigh(K_r, M_r)", M_r.shape[0], lambda: sla.eigh(K_r, M_r)),
            "rcs": ("eig(A, E)", A_r.shape[0], lambda: sla.eig(A_r, E_r)),
            "ucs": ("eig(A, E)", A_u.shape[0], lambda: sla.eig(A_u, E_u))}


def _target_line(label, seconds, target, baseline, baseline_text, unit=1.0, unit_name="s"):
    verdict = "met" if seconds <= target else "MISSED"
    print(f"  {label:<26} {seconds * unit:8.3f} {unit_name}  target ≤ {target * unit:g} {unit_name} "
          f"({seconds / target:.2f}× target, {verdict}); baseline {baseline_text} "
          f"{baseline * unit:.3f} {unit_name} (product/baseline {seconds / baseline:.2f}×)")


def bench_fourbar(repeats, loops=None):
    """Table 1 timings and the N = 20 targets; ``repeats`` calls per median (``loops``: only the
    rows N <= loops, for --quick; the targets then refer to the last row)."""
    print(f"1. N-loop four-bar, dense (median ms per linearization + eigensolution; {_load()})")
    print(f"{'N':>3} {'n':>4} {'MCS':>8} {'RCS':>8} {'UCS':>8}   paper MCS/RCS/UCS [ms]")
    for N, paper in PAPER_TABLE_1_MS.items():
        if loops and N > loops:
            continue
        model = load_paper_model("fourbar", loops=N)
        system, eq, q_p = _prepared(model)
        data = system.create_data()
        sec = [median_time(lambda m=m: _run(system, eq, q_p, model.penalty, m, data), repeats)
               for m in METHODS]
        print(f"{N:>3} {system.n:>4} {1e3 * sec[0]:>8.3f} {1e3 * sec[1]:>8.3f} {1e3 * sec[2]:>8.3f}"
              f"   {paper[0]:.3f}/{paper[1]:.3f}/{paper[2]:.3f}")
    baselines = _baselines(system, eq, q_p, model.penalty)
    print(f"   targets N = 20 (baseline: bare SciPy eigensolution of the method's model, order):")
    for m, s in zip(METHODS, sec):
        text, order, fn = baselines[m]
        _target_line(m.upper(), s, FOURBAR_TARGET_S, median_time(fn, repeats),
                     f"{text} ({order})", 1e3, "ms")
    ucs = ucs_linearization(system, eq, model.penalty, q_penalty=q_p)
    A, E = second_order_pencil(*(_dense(a) for a in (ucs.M, ucs.C, ucs.K)))[:2]
    state = np.linalg.solve(E, A)
    bound = median_time(lambda: standard_eig(state), repeats)
    print(f"   UCS bound: its 2n = {A.shape[0]} eigenpairs (all are needed to classify the 2m "
          f"penalty modes by their vectors); bare dgeev on the {A.shape[0]}-order state matrix "
          f"{1e3 * bound:.3f} ms, numpy.linalg.eig "
          f"{1e3 * median_time(lambda: np.linalg.eig(state), repeats):.3f} ms")


def bench_pendulum(elements_list, repeats, dense_max):
    print(f"\n2. flexible double pendulum (median s; {_load()}); dense = full spectrum, sparse = "
          f"first 4 modes")
    print(f"{'n_p':>4} {'n':>5} {'MCS':>8} {'RCS':>8} {'UCS':>8} | {'MCS sp':>8} {'RCS sp':>8} "
          f"{'UCS sp':>8} | paper MCS/RCS/UCS [s] | |RCS-MCS| |UCS-MCS|re |UCS-MCS|im")
    rows, last = {}, None
    for n_p in elements_list:
        model = load_paper_model("pendulum", elements=n_p)
        system, eq, q_p = _prepared(model)
        data = system.create_data()
        dense, first = [np.nan] * 3, {}
        if n_p <= dense_max:
            dense = [median_time(lambda m=m: _run(system, eq, q_p, model.penalty, m, data), repeats)
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
        if n_p == 100:
            last = (model, system, eq, q_p, dense, sparse)
    if last is not None:
        _pendulum_targets(*last, repeats)
    return rows


def _pendulum_targets(model, system, eq, q_p, dense, sparse, repeats):
    print(f"   targets n_p = 100, sparse (baseline: bare scipy.sparse.linalg.eigs, σ = 0, as many "
          f"Ritz values as the product asks, on the same sparse first-order pencil):")
    for m, s in zip(METHODS, sparse):
        lin = {"mcs": lambda: mcs_linearization(system, eq, sparse=True),
               "rcs": lambda: rcs_linearization(system, eq, sparse=True),
               "ucs": lambda: ucs_linearization(system, eq, model.penalty, sparse=True,
                                                q_penalty=q_p)}[m]()
        if m == "rcs":
            A, E = lin.A, lin.E
        else:
            k = lin.M.shape[0]
            E = sp.block_diag([sp.identity(k), sp.csc_matrix(lin.M)], format="csc")
            A = sp.bmat([[None, sp.identity(k)], [-sp.csc_matrix(lin.K), -sp.csc_matrix(lin.C)]],
                        format="csc")
        ritz = 2 * (4 + eq.constraint_rank + 2) + 2 if m == "ucs" else 2 * 4 + 2
        base = median_time(lambda: spla.eigs(A, k=ritz, M=E, sigma=0.0), repeats)
        _target_line(f"{m.upper()} sparse (order {A.shape[0]})", s, SPARSE_TARGET_S, base, "eigs")
    print(f"   targets n_p = 100, dense (baseline: bare SciPy eigensolution of the method's model, "
          f"order; one run each):")
    baselines = _baselines(system, eq, q_p, model.penalty)
    for m, s in zip(METHODS, dense):
        text, order, fn = baselines[m]
        _target_line(f"{m.upper()} dense", s, DENSE_TARGET_S, median_time(fn, 1),
                     f"{text} ({order})")
    rcs = rcs_linearization(system, eq)
    Ar, Er, _, squared = index_one_pencil(rcs)
    qz = median_time(lambda: generalized_eig(Ar, Er), 3)
    ucs = ucs_linearization(system, eq, model.penalty, q_penalty=q_p)
    A, E = second_order_pencil(*(_dense(a) for a in (ucs.M, ucs.C, ucs.K)))[:2]
    state = np.linalg.solve(E, A)
    geev = median_time(lambda: standard_eig(state), 3)
    print(f"   bounds (bare LAPACK call, median of 3): RCS = QZ (dggev) on the exactly deflated "
          f"index-1 pencil of order {Ar.shape[0]}{' (μ = s² form, undamped)' if squared else ''}: "
          f"{qz:.3f} s of {dense[1]:.3f} s; UCS = dgeev on its {A.shape[0]}-order state matrix "
          f"(2n eigenpairs; damped, so no μ form): {geev:.3f} s of {dense[2]:.3f} s")
    with threadpool_limits(2, user_api="blas"):
        qz2 = median_time(lambda: generalized_eig(Ar, Er), 3)
        geev2 = median_time(lambda: standard_eig(state), 3)
    print(f"   the same bare calls with 2 BLAS threads ({_load()}): QZ {qz2:.3f} s, dgeev "
          f"{geev2:.3f} s (one thread: {qz:.3f} s, {geev:.3f} s); the product runs on one thread")


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
    add_quick_option(ap)
    ap.add_argument("--plot", default="constrained_scaling.png", help="scaling plot PNG path ('' = none)")
    ap.add_argument("--dense-max", type=int, default=100, help="largest n_p solved densely")
    ap.add_argument("--max-elements", type=int, default=400, help="largest n_p of the scaling plot")
    args = ap.parse_args()
    print(machine_load())
    if args.quick:
        bench_fourbar(1, loops=5)
        bench_pendulum([10], 1, args.dense_max)
        print(f"done ({_load()})")
        return
    bench_fourbar(201)
    sizes = [n for n in (10, 25, 50, 75, 100, 150, 200, 300, 400) if n <= args.max_elements]
    rows = bench_pendulum(sizes, 5, args.dense_max)
    if args.plot:
        plot_scaling(rows, args.plot)
    print(f"done ({_load()})")


if __name__ == "__main__":
    main()

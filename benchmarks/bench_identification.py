"""Benchmark of the identification (thesis ch. 3): Table 3.2 cases, objective cost, objectives compared.

    . scripts/env.sh && python benchmarks/bench_identification.py [--repeats 3] [--starts 30]

1. Each Table 3.2 case (planar_2r, unrounded model data at the Table 3.1 configurations, damping
   shifted by 0, -0.5, +0.5, -1, +1, -2, +2 pp): identified values, F*, wall time (median of
   ``--repeats`` runs, ``--starts`` starts, 2 worker processes).
2. Time per objective evaluation (residual vector, determinant objective) vectorized over the
   measurements vs a Python loop over measurements; Jacobian time; eigenvalue objective time.
3. Determinant (3.31) vs eigenvalue matching under damping noise: thesis-style absolute shifts
   (±1, ±2 pp) and zero-mean random noise (σ = 1, 2 pp, 3 draws): max |Δk|/k and max |Δd|.
"""
import argparse
import time

import numpy as np

from _shared import add_quick_option, machine_load
from flexmodal_ros.identification.fit import identify
from flexmodal_ros.identification.inverse_eigen import IdentificationProblem, measured_eigenvalues
from flexmodal_ros.identification.measurements import modal_data_arrays
from flexmodal_ros.flexible_joint.linear_model import assemble
from flexmodal_ros.flexible_joint.ama import modal_analysis_batch
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.core.workers import WorkerPool

# Thesis Table 3.1 configurations (q1, q2) [rad] and Table 3.2 results (k1 k2 df1 df2 dfm1 dfm2, F*).
TABLE_3_1_Q = [(1.474, 1.765), (0.133, 1.947), (2.193, 0.839), (0.667, 0.501), (0.946, 0.443),
               (2.24, 2.208), (-1.373, 1.717), (0.849, 0.179), (0.549, 2.582), (2.945, 2.577),
               (-2.307, 2.945), (1.627, 0.974), (-2.088, 1.638), (2.335, 1.686), (1.856, 2.96)]
SHIFTS = [0.0, -0.005, 0.005, -0.01, 0.01, -0.02, 0.02]
TABLE_3_2 = [
    ([2000, 1600, 3.91, 2.21, 2.04, 1.68], 2.49e-11), ([1997.6, 1600.3, 2.84, 2.10, 2.86, 0.00], 9.98e9),
    ([2002.3, 1600.1, 4.99, 2.31, 1.09, 3.98], 9.15e9), ([1995.0, 1601.8, 1.78, 1.97, 3.55, 0.0], 5.30e10),
    ([2004.9, 1600.1, 6.10, 2.41, 0.0, 6.20], 3.65e10), ([1994.0, 1604.5, 0.0, 1.66, 2.82, 0.0], 2.61e11),
    ([2005.4, 1600.7, 7.96, 2.64, 0.0, 10.46], 1.50e11)]


def planar_data():
    """Unrounded modes 1 and 4 of the true planar_2r model at the Table 3.1 configurations."""
    model = load_robot("planar_2r")
    q = np.array(TABLE_3_1_Q)
    res = modal_analysis_batch(model, q)
    f = np.array([[r.frequencies_hz[0], r.frequencies_hz[3]] for r in res]).ravel()
    z = np.array([[r.damping_ratios[0], r.damping_ratios[3]] for r in res]).ravel()
    return model, modal_data_arrays(q, np.repeat(np.arange(len(q)), 2), f, z, np.tile([0, 3], len(q)))


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def loop_residuals(problem, p):
    """Reference: one measurement at a time (assemble, S̄⁻¹ sandwich, det), no vectorization."""
    k, d_f, d_fm = problem.full_parameters(p)
    lam, omega = measured_eigenvalues(problem.data.frequency_hz, problem.data.damping_ratio)
    out = []
    for i, c in enumerate(problem.data.config):
        _, D, K = assemble(problem.M[c], problem.KG[c], k, d_f=d_f, d_fm=d_fm, **problem.fixed)
        S = problem.Sinv[c]
        A = (lam[i] ** 2 * np.eye(2 * problem.n) + lam[i] * (S @ D @ S) + S @ K @ S) / omega[i]
        det = np.linalg.det(A)
        out += [det.real, det.imag]
    return np.array(out)


def bench_cases(model, data, starts, repeats, cases=None):
    print(f"\n## Table 3.2 cases ({starts} starts, median of {repeats}): 2 processes of a persistent pool "
          "(as in the server) / one process (what a one-shot `flexmodal identify` picks: a first pool "
          "costs ~4 s to start)")
    print("case  shift   k1       k2       df1    df2    dfm1   dfm2   F*          thesis F*   "
          "max|dk|  max|dd|  pool [s]  1 proc [s]")
    with WorkerPool(2, preload=["flexmodal_ros.identification.fit"]) as pool:
        for f in [pool.submit(int) for _ in range(2)]:
            f.result()
        for case, (shift, (ref, F_ref)) in enumerate(zip(SHIFTS, TABLE_3_2), start=1):
            if cases is None or case <= cases:
                _case(model, data, starts, repeats, case, shift, ref, F_ref, pool)


def _case(model, data, starts, repeats, case, shift, ref, F_ref, pool):
    shifted = data.with_damping(data.damping_ratio + shift)
    run = lambda **kw: identify(model, shifted, objective="determinant", starts=starts, seed=0, **kw)
    one, _ = median_time(lambda: run(workers=1), repeats)
    t, res = median_time(lambda: run(pool=pool), repeats)
    v, ref = res.values, np.array(ref)
    print(f"{case:<5} {shift * 100:+.1f}pp " + " ".join(f"{x:8.2f}" if i < 2 else f"{x:6.2f}"
                                                  for i, x in enumerate(v))
          + f" {res.objective:10.4g}  {F_ref:10.3g}  {np.abs(v[:2] - ref[:2]).max():7.2f}  "
          f"{np.abs(v[2:] - ref[2:]).max():7.3f}  {t:8.2f}  {one:10.2f}")


def bench_evaluation(model, data, repeats, n=2000):
    print("\n## Time per evaluation (planar_2r, N = 30 measurements, 6 unknowns)")
    det = IdentificationProblem(model, data, objective="determinant")
    eig = IdentificationProblem(model, data, objective="eigenvalue")
    p = np.r_[model.k, model.d_f, model.d_fm] * 1.01
    assert np.allclose(det.residuals(p), loop_residuals(det, p), rtol=1e-9)
    rows = [("determinant residuals, vectorized", lambda: det.residuals(p)),
            ("determinant residuals, loop over measurements", lambda: loop_residuals(det, p)),
            ("determinant Jacobian (exact, adjugate)", lambda: det.jacobian(p)),
            ("eigenvalue residuals", lambda: eig.residuals(p)),
            ("eigenvalue Jacobian (exact)", lambda: eig.jacobian(p))]
    result = {}
    for name, fn in rows:
        reps = n if "loop" not in name else max(1, n // 10)
        t, _ = median_time(lambda: [fn() for _ in range(reps)], repeats)
        result[name] = t / reps
        print(f"{name:<48} {t / reps * 1e6:9.1f} µs")
    speedup = result["determinant residuals, loop over measurements"] / result["determinant residuals, vectorized"]
    print(f"speed-up of vectorizing over measurements: {speedup:.1f}x")


def bench_objectives(model, data, starts, scenarios_max=None):
    print(f"\n## Determinant (3.31) vs eigenvalue matching ({starts} starts); truth k = "
          f"{model.k.tolist()}, d_f = {model.d_f.tolist()}, d_fm = {model.d_fm.tolist()}")
    truth = np.r_[model.k, model.d_f, model.d_fm]
    rng = np.random.default_rng(1)
    scenarios = [(f"shift {s * 100:+.0f} pp", data.damping_ratio + s) for s in (-0.01, 0.01, -0.02, 0.02)]
    for sigma in (0.01, 0.02):
        scenarios += [(f"random σ={sigma * 100:.0f} pp #{i}",
                       np.clip(data.damping_ratio + sigma * rng.standard_normal(data.num_measurements),
                               1e-3, 0.99)) for i in range(3)]
    print("scenario              objective     max|dk|/k   max|d_f err|  max|d_fm err|")
    for name, zeta in scenarios[:scenarios_max]:
        for objective in ("determinant", "eigenvalue"):
            res = identify(model, data.with_damping(zeta), objective=objective, starts=starts, workers=2)
            err = res.values - truth
            print(f"{name:<21} {objective:<12} {np.abs(err[:2] / truth[:2]).max():10.2e}  "
                  f"{np.abs(err[2:4]).max():11.3f}  {np.abs(err[4:]).max():11.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--starts", type=int, default=30)
    add_quick_option(parser)
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.starts = 1, 2
    print(machine_load())
    model, data = planar_data()
    bench_cases(model, data, args.starts, args.repeats, 1 if args.quick else None)
    bench_evaluation(model, data, args.repeats, 10 if args.quick else 2000)
    bench_objectives(model, data, args.starts, 1 if args.quick else None)
    print(machine_load())


if __name__ == "__main__":
    main()

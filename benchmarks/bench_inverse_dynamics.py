"""Benchmark of the symbolic flexible-joint inverse dynamics (issue 5, thesis ch. 4 §4.4.4 / §4.5.3).

Prints (medians of repeated runs):
1. operation counts of the generated code for kuka_lwr4 next to the thesis (1289 add/sub, 1516 mul,
   12 sin/cos for τ, τ', τ'');
2. generic all-revolute chains n = 5..30 (random DH-like geometry and full inertias, no zero
   parameters): counts next to the fitted thesis cost 323n - 309 add/sub and 389n - 325 mul (4.26),
   generation time next to the thesis' Maple 82 s (n = 5) ... 7047 s (n = 30);
3. evaluation time of the whole set (τ, τ', τ'', q_m, q_m', q_m'', τ_m) for kuka_lwr4: per call in
   C (a C loop around the generated function) and from Python (FlexibleJointFeedforward.__call__),
   next to the thesis' 19.3 µs (MATLAB mex); also the CasADi VM and the Pinocchio reference.

Run:  .venv/bin/python benchmarks/bench_inverse_dynamics.py [--max-n 30] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np
import pinocchio as pin

from _shared import add_quick_option, generic_chain, machine_load
from flexmodal_ros.robot.inverse_dynamics import FlexibleJointFeedforward, feedforward_numeric
from flexmodal_ros.robot.inverse_dynamics.build import CFLAGS, count_operations, emit_c, feedforward_function, find_compiler
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.robot.trajectory import THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, point_to_point

THESIS_LWR4 = {"add": 1289, "mul": 1516, "trig": 12}
THESIS_GEN_TIME = {5: 82.0, 30: 7047.0}          # s, Maple 2018, i7-2720QM (thesis §4.5.3)


def generation(pm, repeats):
    """(op counts of τ, τ', τ'', median generation time [s]: SX graph + CSE + C text)."""
    times, source = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        source = emit_c(feedforward_function(pm, None, "bench"))
        times.append(time.perf_counter() - t0)
    return count_operations(source), statistics.median(times)


def c_loop_time(info, calls=200000, repeats=7):
    """Median time per call [µs] of the generated function in a C loop (same flags as the library)."""
    n = info.n
    harness = f"""
#include <stdio.h>
#include <time.h>
int {info.symbol}(const double** arg, double** res, long long* iw, double* w, int mem);
int main(void) {{
  double x[{5 * n}], y[{7 * n}], w[1]; long long iw[1]; double acc = 0;
  const double* arg[1] = {{x}}; double* res[1] = {{y}};
  for (int r = 0; r < {repeats}; ++r) {{
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long k = 0; k < {calls}; ++k) {{
      for (int i = 0; i < {5 * n}; ++i) x[i] = 0.1 * (i % 7) + 1e-7 * (k % 13) - 0.2;
      {info.symbol}(arg, res, iw, w, 0); acc += y[{7 * n - 1}];
    }}
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.6f\\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / {calls});
  }}
  fprintf(stderr, "%g\\n", acc);
  return 0;
}}
"""
    with tempfile.TemporaryDirectory() as tmp:
        main_c, exe = Path(tmp) / "main.c", Path(tmp) / "bench"
        main_c.write_text(harness)
        flags = [f for f in CFLAGS if f not in ("-shared", "-fPIC")]
        subprocess.run([find_compiler(), *flags, str(main_c), info.source, "-o", str(exe), "-lm"], check=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    return statistics.median(float(v) for v in out)


def python_time(fn, repeats=7, number=5000):
    """Median time per call [µs] of fn() over ``repeats`` runs of ``number`` calls."""
    return statistics.median(t / number * 1e6 for t in timeit.repeat(fn, number=number, repeat=repeats))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-n", type=int, default=30)
    parser.add_argument("--json", help="also write the results to this JSON file")
    add_quick_option(parser)
    args = parser.parse_args()
    quick = args.quick
    max_n = 5 if quick else args.max_n
    report = {}
    print(machine_load())

    lwr = load_robot("kuka_lwr4")
    ops, gen = generation(lwr.pin, 1 if quick else 5)
    ff = FlexibleJointFeedforward(lwr)
    full = ff.library.operations
    ratio = (ops["add"] + ops["mul"]) / (THESIS_LWR4["add"] + THESIS_LWR4["mul"])
    print("== kuka_lwr4 operation counts (τ, τ', τ'')")
    print(f"   this generator : {ops['add']} add/sub, {ops['mul']} mul, {ops['div']} div, {ops['trig']} sin/cos, "
          f"{ops['other']} other; generation {gen:.3f} s")
    print(f"   thesis (Maple) : {THESIS_LWR4['add']} add/sub, {THESIS_LWR4['mul']} mul, {THESIS_LWR4['trig']} sin/cos;"
          f" ratio (add+mul) = {ratio:.3f} (acceptance <= 1.5, goal <= 1.0)")
    print(f"   whole feedforward set incl. q_m, q_m', q_m'', τ_m: {full}")
    report["kuka_lwr4"] = {"rigid_terms": ops, "feedforward": full, "thesis": THESIS_LWR4,
                           "ratio_add_mul": ratio, "generation_s": gen}

    print("== generic all-revolute chains (τ, τ', τ'')")
    print(f"   {'n':>3} {'add/sub':>8} {'323n-309':>9} {'mul':>7} {'389n-325':>9} {'trig':>5} {'gen [s]':>8} thesis gen [s]")
    report["generic"] = []
    for n in range(5, max_n + 1, 5):
        ops, gen = generation(generic_chain(n), 1 if quick else 3 if n <= 15 else 1)
        print(f"   {n:>3} {ops['add']:>8} {323 * n - 309:>9} {ops['mul']:>7} {389 * n - 325:>9} {ops['trig']:>5} "
              f"{gen:>8.2f} {THESIS_GEN_TIME.get(n, '')}")
        report["generic"].append({"n": n, "operations": ops, "thesis_add": 323 * n - 309,
                                  "thesis_mul": 389 * n - 325, "generation_s": gen})

    states = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, 1.2)
    vm = FlexibleJointFeedforward(lwr, compiled=False)
    x, y = np.array(states, float), np.empty((7, lwr.n))
    q0 = np.array(states[0])
    rnea_data = lwr.pin.createData()
    reps, scale = (1, 0.01) if quick else (7, 1.0)
    timing = {"c_us": c_loop_time(ff.library, calls=int(200000 * scale), repeats=reps),
              "python_us": python_time(lambda: ff(*states), reps, int(5000 * scale)),
              "python_evaluate_us": python_time(lambda: ff.evaluate(x, y), reps, int(5000 * scale)),
              "ctypes_call_us": python_time(ff._c.run, reps, int(5000 * scale)),
              "pin_rnea_us": python_time(lambda: pin.rnea(lwr.pin, rnea_data, q0, x[1], x[2]), reps, int(5000 * scale)),
              "casadi_vm_us": python_time(lambda: vm(*states), reps, max(1, int(500 * scale))),
              "pinocchio_reference_us": python_time(lambda: feedforward_numeric(lwr, *states), reps,
                                                    max(1, int(50 * scale)))}
    print("== kuka_lwr4 evaluation of τ, τ', τ'', q_m, q_m', q_m'', τ_m per call (median of 7 runs)")
    print(f"   C loop {timing['c_us']:.2f} µs (goal <= 5) | Python FlexibleJointFeedforward {timing['python_us']:.2f} µs "
          f"(goal <= 20) | thesis MATLAB mex 19.3 µs")
    print(f"   evaluate(x, out) {timing['python_evaluate_us']:.2f} µs (target <= 2.5) = "
          f"{timing['python_evaluate_us'] / timing['ctypes_call_us']:.2f}x the bare ctypes call "
          f"{timing['ctypes_call_us']:.2f} µs | pin.rnea from Python (τ only) {timing['pin_rnea_us']:.2f} µs")
    print(f"   CasADi VM fallback {timing['casadi_vm_us']:.1f} µs | Pinocchio reference {timing['pinocchio_reference_us']:.0f} µs")
    report["kuka_lwr4"]["timing"] = timing
    report["cflags"] = list(CFLAGS)
    report["cpu_count"] = os.cpu_count()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

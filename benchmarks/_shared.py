"""Helpers shared by the benchmark scripts (not a benchmark itself; the bench_*.py scripts import
it, never each other): timing, the machine-load line every script prints with its figures, the
--quick option, and the synthetic robots several scripts measure.

``--quick`` (every script): tiny sizes and one repeat, so that the test suite can check that each
script still runs (test/test_benchmarks.py); its numbers are not measurements.
"""
import os
import statistics
import time

import numpy as np


def median_time(fn, repeats):
    """Median wall time [s] of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(max(1, int(repeats))):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine_load():
    """'machine: N CPUs, load average 1/5/15 min a/b/c' (printed with every set of figures)."""
    one, five, fifteen = os.getloadavg()
    return f"machine: {os.cpu_count()} CPUs, load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min)"


def add_quick_option(parser):
    """--quick: tiny sizes, one repeat (the test suite runs every script so; not a measurement)."""
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and one repeat: checks that the script runs, not a measurement")


def generic_chain(n, seed=0):
    """Pinocchio model of an all-revolute chain of ``n`` joints with DH-like placements
    Tz(d) Tx(a) Rx(α), all parameters nonzero, random positive-definite link inertias."""
    import pinocchio as pin   # deferred: pinocchio (only the scripts that build chains need it)

    rng = np.random.default_rng(seed)
    pm = pin.Model()
    parent = 0
    for i in range(n):
        d, a, alpha = rng.uniform(0.1, 0.5), rng.uniform(0.1, 0.5), rng.uniform(0.2, 1.3)
        placement = pin.SE3(pin.rpy.rpyToMatrix(alpha, 0, 0), np.array([a, 0.0, d])) if i else pin.SE3.Identity()
        parent = pm.addJoint(parent, pin.JointModelRZ(), placement, f"j{i}")
        A = rng.uniform(-0.1, 0.1, (3, 3))
        inertia = A @ A.T + np.diag(rng.uniform(0.05, 0.2, 3))
        pm.appendBodyToJoint(parent, pin.Inertia(rng.uniform(1, 5), rng.uniform(0.02, 0.2, 3), inertia),
                             pin.SE3.Identity())
    pm.gravity.linear = np.array([0.0, 0.0, -9.81])
    return pm

"""Why CasADi: the same jet-RNEA (τ, τ̇, τ̈) built with symengine or SymPy expressions instead.

Runs flexmodal_ros.robot.inverse_dynamics.symbolic.rnea_jets unchanged, with its CasADi namespace
swapped for a thin adapter over the other library, then applies that library's CSE and counts
the operations left (``sympy.count_ops``). Compare with the CasADi counts printed by
``benchmarks/bench_inverse_dynamics.py`` (same robots, same generic chains).

    python benchmarks/compare_symbolic_backends.py            # symengine: seconds
    python benchmarks/compare_symbolic_backends.py --sympy    # SymPy: n = 5 only, about 10 minutes
"""
import argparse
import sys
import time
import types
from pathlib import Path

import numpy as np
import sympy
import symengine

import flexmodal_ros.robot.inverse_dynamics.symbolic as symbolic
from flexmodal_ros.robot.registry import load_robot

sys.path.insert(0, str(Path(__file__).parent))
from _shared import add_quick_option, generic_chain, machine_load  # noqa: E402


class Vec:
    """3-vector of scalar expressions with the arithmetic rnea_jets uses."""

    def __init__(self, items):
        self.items = list(items)

    def __getitem__(self, i):
        return self.items[i]

    def __add__(self, other):
        return Vec(a + b for a, b in zip(self.items, other.items))

    def __sub__(self, other):
        return Vec(a - b for a, b in zip(self.items, other.items))

    def __mul__(self, s):
        return Vec(a * s for a in self.items)

    __rmul__ = __mul__


def adapter(lib):
    """A stand-in for the ``casadi`` module over symengine or SymPy (``lib``)."""
    def constant(v):
        return lib.Integer(int(v)) if v in (-1.0, 0.0, 1.0) else lib.Float(float(v))

    def sx(value):
        arr = np.asarray(value, dtype=float)
        return constant(float(arr)) if arr.ndim == 0 else Vec(constant(v) for v in arr)

    def mtimes(A, v):
        return Vec(sum((A[i][j] * v[j] for j in range(3)), lib.Integer(0)) for i in range(3))

    SX = types.SimpleNamespace(zeros=lambda rows, cols: Vec([lib.Integer(0)] * rows))
    return types.SimpleNamespace(
        SX=type("SX", (), {"__new__": lambda cls, value: sx(value), "zeros": staticmethod(SX.zeros)}),
        vertcat=lambda *xs: Vec(lib.sympify(x) for x in xs), cos=lib.cos, sin=lib.sin, sign=lib.sign,
        blockcat=lambda rows: rows, mtimes=mtimes)


def run(lib, pin_model, label):
    n = pin_model.nv
    symbolic.ca = adapter(lib)
    t0 = time.perf_counter()
    qs = [[lib.Symbol(f"x{k}_{i}") for i in range(n)] for k in range(5)]
    tau = symbolic.rnea_jets(symbolic.canonical_chain(pin_model), pin_model.gravity.linear, qs)
    exprs = [e for jet in tau for e in jet.items]
    t1 = time.perf_counter()
    replacements, reduced = lib.cse(exprs)
    t2 = time.perf_counter()
    ops = sum(sympy.count_ops(sympy.sympify(str(expr))) for _, expr in replacements) + \
        sum(sympy.count_ops(sympy.sympify(str(expr))) for expr in reduced)
    print(f"{lib.__name__:>9} {label:<10} n={n:2d}  build {t1 - t0:8.2f} s  cse {t2 - t1:8.2f} s  "
          f"operations after cse {ops}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sympy", action="store_true", help="SymPy instead of symengine (n = 5 only, slow)")
    add_quick_option(parser)
    args = parser.parse_args()
    print(machine_load())
    if args.quick:
        run(symengine, generic_chain(2), "generic")
        return
    if args.sympy:
        run(sympy, generic_chain(5), "generic")
        return
    run(symengine, load_robot("kuka_lwr4").pin, "kuka_lwr4")
    for n in (5, 10, 15, 20, 30):
        run(symengine, generic_chain(n), "generic")


if __name__ == "__main__":
    main()

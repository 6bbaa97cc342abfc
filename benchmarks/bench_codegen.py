"""Code generation end to end (issue 17): a 30-joint flexible-joint robot, cold and warm cache.

Run: `. scripts/env.sh; python benchmarks/bench_codegen.py [--n 30] [--repeats 3]`.

The robot is a random all-revolute DH chain (non-zero a, d, α, full inertias) written with
`flexmodal dh2urdf` plus a flexibility YAML, so the measured path is the user's: URDF + YAML →
model → `FlexibleJointFeedforward` (SX graph of the RNEA jets, CSE, C text, operation counts,
gcc, load). Prints, as medians:
- cold cache (a new, empty cache directory each time): total, of which generation and compile
  (target: total <= 5 s at n = 30);
- warm cache (the library is there): total (target <= 0.2 s), and the `flexmodal codegen` command
  as a process (includes Python start-up and imports);
- the operation counts stored with the library (read on a cache hit, not regenerated).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from _shared import add_quick_option, machine_load
from flexmodal_ros.robot.dh import dh_to_urdf, load_dh
from flexmodal_ros.robot.inverse_dynamics import FlexibleJointFeedforward
from flexmodal_ros.robot.model import load_model


def box_inertia(rng, mass):
    """Inertia about the COM of a solid box of ``mass`` with random sides 0.1-0.5 m, randomly
    rotated: a rigid body's (positive definite, triangle inequalities hold), as the loader demands."""
    a, b, c = rng.uniform(0.1, 0.5, 3)
    moments = mass / 12 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    return R @ np.diag(moments) @ R.T


def write_robot(folder, n, seed=0):
    """URDF + flexibility YAML of a random n-joint revolute chain in ``folder``; (urdf, params)."""
    rng = np.random.default_rng(seed)
    links = []
    for i in range(n):
        mass = float(rng.uniform(1, 5))
        inertia = box_inertia(rng, mass)
        links.append({"joint": f"joint_{i + 1}", "type": "revolute", "theta": 0.0,
                      "d": float(rng.uniform(0.1, 0.3)), "a": float(rng.uniform(0.1, 0.3)),
                      "alpha": float(rng.uniform(0.2, 1.3)), "mass": mass,
                      "com": rng.uniform(-0.05, 0.05, 3).tolist(),
                      "inertia": [float(inertia[0, 0]), float(inertia[0, 1]), float(inertia[0, 2]),
                                  float(inertia[1, 1]), float(inertia[1, 2]), float(inertia[2, 2])],
                      "limits": {"lower": -3.0, "upper": 3.0, "effort": 500.0, "velocity": 3.0}})
    table = folder / f"chain_{n}.dh.yaml"
    table.write_text(yaml.safe_dump({"name": f"chain_{n}", "base_link": "base_link", "links": links}))
    urdf = folder / f"chain_{n}.urdf"
    name, base, rows = load_dh(table)
    urdf.write_text(dh_to_urdf(name, rows, base))
    params = folder / f"chain_{n}.yaml"
    params.write_text(yaml.safe_dump({
        "robot": f"chain_{n}", "urdf": urdf.name, "gravity": [0.0, 0.0, -9.81],
        "joints": {f"joint_{i + 1}": {"k": 1e4, "d_f": 1.0, "d_fm": 0.1, "d_c": 0.5, "d_cm": 0.2,
                                      "B": 0.5, "kp": 5e3, "kd": 50.0} for i in range(n)}}))
    return urdf, params


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    add_quick_option(ap)
    args = ap.parse_args()
    if args.quick:
        args.n, args.repeats = 2, 1
    print(machine_load())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        urdf, params = write_robot(tmp, args.n)
        model = load_model(urdf, params)
        cold, gen, comp = [], [], []
        for k in range(args.repeats):
            cache = tmp / f"cache_{k}"
            t0 = time.perf_counter()
            info = FlexibleJointFeedforward(model, cache=cache).library
            cold.append(time.perf_counter() - t0)
            gen.append(info.generation_s)
            comp.append(info.compile_s)
        warm = []
        for _ in range(1 if args.quick else max(5, args.repeats)):
            t0 = time.perf_counter()
            FlexibleJointFeedforward(model, cache=tmp / "cache_0")
            warm.append(time.perf_counter() - t0)
        env = dict(os.environ, FLEXMODAL_CACHE=str(tmp / "cache_0"))
        cli = []
        for _ in range(1 if args.quick else 3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "codegen", "--urdf", str(urdf), "--params",
                            str(params), "--json"], check=True, capture_output=True, env=env)
            cli.append(time.perf_counter() - t0)
    med = statistics.median
    print(f"n = {args.n}: cold cache {med(cold):.2f} s (target <= 5; generation {med(gen):.2f} s, "
          f"compile {med(comp):.2f} s), warm cache {med(warm) * 1e3:.0f} ms (target <= 200)")
    print(f"`flexmodal codegen` process on a warm cache (Python start-up and imports included): {med(cli):.2f} s")
    print(f"operations {info.operations}; τ, τ', τ'' alone {info.operations_rigid}")
    print(machine_load())


if __name__ == "__main__":
    main()

"""The single-configuration AMA on the LAPACK extension and on its fallback, against a bare
``numpy.linalg.eig`` / ``eigvals`` of the same state matrix, interleaved in one run (issue 28:
target <= 1.3x with NumPy 1.26.4 / SciPy 1.11.4 and with the newest pins).
Run: `. scripts/env.sh; python benchmarks/bench_lapack.py [--rounds N] [--quick]` (docs/linalg.md has results).
"""
import argparse
import statistics
import time

import numpy as np
import scipy

from _shared import add_quick_option, machine_load
import flexmodal_ros.linalg.lapack as lapack
from flexmodal_ros.flexible_joint.ama import linearized_batch, modal_analysis
from flexmodal_ros.flexible_joint.linear_model import state_matrix
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.robot.registry import load_robot

CASES = (("kuka_lwr4", [0.1, 0.5, -0.2, -1.2, 0.3, 0.8, 0.0]), ("scompi", None))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="interleaved rounds of 20 calls each")
    add_quick_option(parser)
    args = parser.parse_args()
    rounds, calls = (1, 1) if args.quick else (args.rounds, 20)
    print(f"NumPy {np.__version__}, SciPy {scipy.__version__}; extension: "
          f"{lapack.extension_status()[1] or 'active'}; {machine_load()}")
    paths = (True, False) if lapack.extension_status()[0] is not None else (False,)
    for robot, q in CASES:
        model = load_robot(robot)
        data = create_data(model)
        q = np.asarray(q if q is not None else np.full(model.n, 0.1), float)
        (Mb, Db, Kb), _ = linearized_batch(model, data, q[None])
        A = state_matrix(Mb, Db, Kb)[0]
        n = 4 * model.n
        solvers = {(c, s): lapack.RepeatedEig(n, s, compiled=c) for c in paths for s in (True, False)}

        def ama(compiled, shapes):
            lapack._PER_THREAD.__dict__[(n, shapes)] = solvers[(compiled, shapes)]   # this thread's solver
            return modal_analysis(model, q, data, shapes=shapes)
        fns = {"eig": lambda: np.linalg.eig(A), "eigvals": lambda: np.linalg.eigvals(A)}
        fns.update({key: (lambda key=key: ama(*key)) for key in solvers})
        samples = {k: [] for k in fns}
        for _ in range(rounds):
            for key, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples[key].append((time.perf_counter() - t0) / calls)
        med = {k: statistics.median(v) for k, v in samples.items()}
        print(f"{robot}: bare eig {med['eig'] * 1e6:.1f} us, bare eigvals {med['eigvals'] * 1e6:.1f} us")
        for c in paths:
            print(f"  {'extension' if c else 'fallback '}: with shapes {med[(c, True)] * 1e6:.1f} us = "
                  f"{med[(c, True)] / med['eig']:.2f}x bare eig; eigenvalues only {med[(c, False)] * 1e6:.1f} us = "
                  f"{med[(c, False)] / med['eigvals']:.2f}x bare eigvals")
    lapack._PER_THREAD.__dict__.clear()


if __name__ == "__main__":
    main()

"""Identification of joint stiffness and damping by multistart bounded least squares (thesis
§3.4, (3.28)-(3.30); MATLAB lsqnonlin + MultiStart there): :func:`identify` draws uniformly random
starts in the box, solves each with SciPy's trust-region reflective ``least_squares`` (on a
:class:`~flexmodal_ros.core.workers.WorkerPool` when that pays), polishes the best one and reports
it (:mod:`.report`). The problem itself is :mod:`.inverse_eigen`. Multistarts run on a
:class:`~flexmodal_ros.core.workers.WorkerPool` (given, or a temporary one) and stop early through a
:class:`~flexmodal_ros.core.workers.StopToken`.
"""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, wait

import numpy as np
from scipy.optimize import least_squares

from ..core.errors import InputError
from ..core.validation import shown
from ..core.workers import NO_STOP, WorkerPool
from .inverse_eigen import (DEFAULT_OBJECTIVE, DEFAULT_STARTS, MAX_STARTS, NOISE_DAMPING, NOISE_FREQUENCY_REL,
                            OBJECTIVES, IdentificationProblem, check_problem_size, parse_unknowns)
from .measurements import ModalData, bound, positive_value
from .report import assess

# Handing a request's chunks of starts to a running WorkerPool and collecting them [s] (process
# round trips of pickled problems; benchmarks/bench_identification.py).
POOL_DISPATCH_S = 0.05


def identify(model, data: ModalData, unknowns=None, objective=DEFAULT_OBJECTIVE, starts=DEFAULT_STARTS,
             seed=0, k_max=None, d_max=None, workers=2, noise=(NOISE_FREQUENCY_REL, NOISE_DAMPING),
             pool=None, stop=NO_STOP, progress=None, run_starts=None):
    """Identify the ``unknowns`` (subset of k, d_f, d_fm; default all) of ``model`` from ``data``.

    Bounded least squares (3.28)-(3.30) from ``starts`` points drawn uniformly in the box
    [0, k_max] / [0, d_max] (default (3.42): 5000, 100) with ``numpy.random.default_rng(seed)``
    (the result does not depend on ``workers``, the number of processes; scripts using
    ``workers`` > 1 need the ``if __name__ == "__main__"`` guard of multiprocessing). With
    ``workers`` > 1 or a ``pool`` the first start runs in this process and times the problem: the
    others go to the pool only if its cost (starting a temporary one,
    :meth:`~flexmodal_ros.core.workers.WorkerPool.start_cost`, or handing chunks to a running one,
    ``POOL_DISPATCH_S``) plus their share per worker takes less than running them here, so no
    worker count is slower than one worker.
    ``noise`` = (σ_f/f, σ_ζ) is the measurement noise assumed by the success test and the
    identifiability report. ``pool``: a :class:`~flexmodal_ros.core.workers.WorkerPool` to use instead
    of a temporary one of ``workers`` processes; ``stop``: a
    :class:`~flexmodal_ros.core.workers.StopToken` (raises :class:`~flexmodal_ros.core.workers.Interrupted`);
    ``progress(done, total, best_F)`` is called as local solutions finish.
    ``run_starts(problem, x0)`` replaces both: it returns what :func:`solve_starts` gives for ``x0``
    (starts, P), in start order (e.g. on Dask: :func:`flexmodal_ros.distributed.run_starts`).
    """
    starts, seed, noise = check_options(model, data, unknowns, objective, starts, seed, k_max, d_max, noise)
    workers = _count(workers, "workers", 64)
    problem = IdentificationProblem(model, data, unknowns, objective, k_max, d_max)
    x0 = np.random.default_rng(seed).uniform(size=(starts, len(problem.names)))
    if run_starts is not None:
        local = run_starts(problem, x0)
    elif starts > 1 and (pool is not None or workers > 1):
        began = time.perf_counter()
        local = solve_starts(problem, x0[:1], stop)                 # times one start in this process
        alone = (time.perf_counter() - began) * (starts - 1)       # the rest here [s]
        cost = POOL_DISPATCH_S if pool is not None else WorkerPool.start_cost()
        count = pool.workers if pool is not None else workers
        rest = None if progress is None else (          # counts include the first start
            lambda done, total, best: progress(done + 1, total + 1, min(best, local[0][1])))
        if cost + alone / count >= alone:                          # a pool does not pay: stay here
            local += solve_starts(problem, x0[1:], stop, rest)
        elif pool is not None:
            local += _run_starts(pool, problem, x0[1:], stop, rest)
        else:
            with WorkerPool(workers, preload=[__name__]) as own:
                local += _run_starts(own, problem, x0[1:], own.token(stop.deadline), rest)
    else:
        local = solve_starts(problem, x0, stop, progress)
    best = min(range(starts), key=lambda i: (local[i][1], i))
    x, F, _, status, message = _polish(problem, local[best], stop)
    p = x * problem.upper
    return assess(problem, p, F, status > 0, message, local, seed, noise)


def check_options(model, data, unknowns=None, objective=DEFAULT_OBJECTIVE, starts=DEFAULT_STARTS, seed=0,
                  k_max=None, d_max=None, noise=(NOISE_FREQUENCY_REL, NOISE_DAMPING)):
    """The cheap checks of :func:`identify` (same arguments), without building the problem:
    InputError naming the field. Returns (starts, seed, noise) as int, int, (float, float)."""
    kinds = parse_unknowns(unknowns)
    if objective not in OBJECTIVES:
        raise InputError(f"objective: must be one of {', '.join(OBJECTIVES)}, got {shown(objective)}")
    starts = _count(starts, "starts", MAX_STARTS)
    seed = int(seed)
    if seed < 0:
        raise InputError(f"seed: must be >= 0, got {seed}")
    for value, field in ((k_max, "k_max"), (d_max, "d_max")):
        if value is not None:
            bound(value, field)
    noise = tuple(positive_value(v, name) for v, name in zip(noise, ("frequency_noise", "damping_noise")))
    check_problem_size(model.n, data.q.shape[0], data.num_measurements, len(kinds) * model.n)
    return starts, seed, noise


def _count(value, field, maximum):
    """An integer in 1..maximum (InputError naming the field)."""
    if isinstance(value, bool) or not float(value).is_integer():
        raise InputError(f"{field}: expected an integer, got {shown(value)}")
    value = int(value)
    if not 1 <= value <= maximum:
        raise InputError(f"{field}: must be in 1..{maximum}, got {value}")
    return value


def _local_solve(problem: IdentificationProblem, x0, stop=NO_STOP):
    """One bounded TRF least-squares run in scaled unknowns x = p / upper ∈ [0, 1]."""
    up = problem.upper

    def fun(x):
        stop.check()
        return problem.residuals(x * up)

    jac = lambda x: problem.jacobian(x * up) * up
    problem.check_finite(x0 * up)            # SciPy would only say "Residuals are not finite in the initial point."
    sol = least_squares(fun, x0, jac=jac, bounds=(0.0, 1.0), method="trf",
                        xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=200 * (x0.size + 1))
    return sol.x, float(sol.fun @ sol.fun), int(sol.nfev), int(sol.status), str(sol.message)


def _polish(problem, best, stop=NO_STOP):
    """Refine the best multistart solution with unbounded Levenberg-Marquardt, kept only if it
    stays in the box and lowers F. TRF stops on its gradient test in weakly determined, nearly
    flat directions (e.g. the wrist stiffnesses of scompi from low modes); LM finishes them."""
    up = problem.upper

    def fun(x):
        stop.check()
        return problem.residuals(x * up)

    sol = least_squares(fun, best[0], jac=lambda x: problem.jacobian(x * up) * up, method="lm",
                        xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=100 * (up.size + 1))
    F = float(sol.fun @ sol.fun)
    if np.all((sol.x >= 0) & (sol.x <= 1)) and F < best[1]:
        return sol.x, F, best[2] + int(sol.nfev), best[3], best[4]
    return best


def solve_starts(problem, x0s, stop=NO_STOP, progress=None):
    """Local solutions (x, F, nfev, status, message) from each start of ``x0s`` (s, P), in order:
    the unit of work that every multistart executor maps over chunks of starts (``stop`` and
    ``progress`` as in :func:`identify`)."""
    out = []
    for x0 in x0s:
        out.append(_local_solve(problem, x0, stop))
        stop.report(out[-1][1])
        if progress:
            progress(len(out), len(x0s), min(r[1] for r in out))
    return out


def _run_starts(pool, problem, x0, stop, progress=None):
    """Local solutions for every start, in chunks on ``pool``'s workers (a few per worker); the
    workers count finished starts in ``stop``'s shared counters, reported to ``progress`` every
    0.5 s. The first failure or interruption stops the other chunks."""
    chunks = np.array_split(np.arange(len(x0)), min(len(x0), 4 * pool.workers))
    futures = {pool.submit(solve_starts, problem, x0[c], stop): k for k, c in enumerate(chunks)}
    parts, reported = [None] * len(chunks), 0
    try:
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            stop.check()
            for future in finished:
                parts[futures[future]] = future.result()
            done, best = stop.progress()
            if progress and done > reported:
                reported = done
                progress(min(done, len(x0)), len(x0), best)
    except BaseException as exc:
        for future in futures:
            future.cancel()
        pool.cancel(stop)
        pool.discard_if_broken(exc)
        raise
    return [r for part in parts for r in part]

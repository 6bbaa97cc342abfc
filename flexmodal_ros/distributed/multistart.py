"""Identification multi-starts on an executor: chunks of starts mapped over
:func:`flexmodal_ros.identification.fit.solve_starts` (the seam ``identify(..., run_starts=...)``)."""
from __future__ import annotations

import numpy as np

from ..identification.fit import solve_starts
from ..modes import progress_bar
from .executors import map_chunks

TASKS_PER_SLOT = 4   # chunks per worker thread: balances the load, keeps each task ≥ a few solves


def run_starts(executor, problem, x0: np.ndarray, starts_per_task: int | None = None,
               progress: bool = False) -> list:
    """Local solutions for the starts ``x0`` (s, P), in start order, solved in chunks of
    ``starts_per_task`` (default: s / (4 × worker threads)) on ``executor``
    (:func:`~flexmodal_ros.distributed.open_executor`). Each start is solved exactly as locally,
    so the best solution for a seed does not depend on where it ran."""
    x0 = np.asarray(x0, float)
    per_task = starts_per_task or max(1, -(-len(x0) // (TASKS_PER_SLOT * executor.slots)))
    bounds = [(s, min(s + per_task, len(x0))) for s in range(0, len(x0), per_task)]
    parts = [None] * len(bounds)
    with progress_bar(len(x0), "multistart", unit="start", enabled=progress) as bar:
        def handle(k, solutions):
            parts[k] = solutions
            bar.update(len(solutions))

        map_chunks(executor, lambda k: (solve_starts, problem, x0[slice(*bounds[k])]),
                   range(len(bounds)), handle)
    return [sol for part in parts for sol in part]

"""Link modes over many configurations: warm-started sweeps, MAC tracking, worker processes.

The configuration sets (grid, line) and the tracking/plots are the shared ones
(:mod:`flexmodal_ros.flexible_joint.sweep`, :mod:`flexmodal_ros.modes.modeset`); this module only computes the
:class:`~flexmodal_ros.links.shapes.LinkModes` of each configuration. Consecutive configurations
warm-start each other (the previous roots are the guess, confirmed by the Wittrick–Williams
count); chunks of consecutive configurations go to worker processes (the solver is Python-bound,
so threads would not run in parallel).
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..flexible_joint.ama import check_configurations
from ..modes import map_modes, progress_bar
from ..core.validation import finite_vector, positive
from .arm import with_joints
from .solve import check_request, link_modes

CHUNK = 64


def _sweep(arm, qs, num_modes, model, regime, progress=None):
    out, guess = [], None
    for q in qs:
        res = link_modes(arm, q, num_modes, model, regime, guess)
        guess = res.omegas
        out.append(res)
        if progress:
            progress(1)
    return out


def _chunk(args):
    return _sweep(*args)


def link_modes_batch(arm, configurations, num_modes: int = 10, model: str = "timoshenko",
                     regime: str = "full", workers: int | None = None, progress=None) -> list:
    """:func:`~flexmodal_ros.links.solve.link_modes` for configurations (m, n) [rad], in order.

    ``workers`` > 1 splits the list into chunks of consecutive configurations solved in that many
    processes (default: the CPUs available, at most 2); ``progress(k)`` after each k done."""
    qs = check_configurations(arm, configurations, "configurations")
    check_request(num_modes, model, regime)
    workers = max(1, min(workers or min(2, len(os.sched_getaffinity(0))), len(qs)))
    if workers == 1 or len(qs) < 2 * CHUNK:
        return _sweep(arm, qs, num_modes, model, regime, progress)
    chunks = [qs[i:i + CHUNK] for i in range(0, len(qs), CHUNK)]
    results = []
    with ProcessPoolExecutor(workers) as pool:
        for part in pool.map(_chunk, [(arm, c, num_modes, model, regime) for c in chunks]):
            results.extend(part)
            if progress:
                progress(len(part))
    return results


def link_modal_map(arm, configurations, num_modes: int = 10, model: str = "timoshenko",
                   regime: str = "full", track: bool = True, workers: int | None = None,
                   progress: bool = False):
    """:class:`~flexmodal_ros.modes.modal_map.ModalMap` of link modes over ``configurations`` (m, n) [rad],
    MAC-tracked along the sequence (use serpentine grids, :func:`flexmodal_ros.flexible_joint.sweep.config_grid`)."""
    qs = check_configurations(arm, configurations, "configurations")
    with progress_bar(len(qs), "link modes", enabled=progress) as bar:
        results = link_modes_batch(arm, qs, num_modes, model, regime, workers, bar.update)
    return map_modes(arm.joint_names, qs, results, track)


def joint_stiffness_sweep(arm, q, stiffness, num_modes: int = 10, model: str = "timoshenko",
                          regime: str = "full"):
    """Link modes at joint angles ``q`` [rad] for each joint stiffness k_T in ``stiffness``
    [N m/rad] (the same on every joint; ascending), as a MAC-tracked
    :class:`~flexmodal_ros.modes.modal_map.ModalMap` over the coordinate ``k_T`` (the paper's Table 7 study,
    here with the exact model). Uses the arm's joint model (``elastic`` if it is ``rigid``)."""
    k = np.sort(positive(finite_vector(stiffness, None, "stiffness"), "stiffness"))
    joint_model = "elastic" if arm.joint_model == "rigid" else arm.joint_model
    results, guess = [], None
    for value in k:
        res = link_modes(with_joints(arm, joint_model, stiffness=value), q, num_modes, model, regime, guess)
        guess = res.omegas
        results.append(res)
    return map_modes(("k_T",), k[:, None], results, True)

"""Modes across configurations and sources: MAC, tracking, crossings, eigenvalue and mode matching.

The one home of every assignment between two sets of modes in the package: along a sweep
(:func:`track_modes`, by MAC), between neighbouring samples of a path (:func:`match_eigenvalues`,
by eigenvalue distance), between measured and model modes (:func:`pair_modes`, by frequency and
MAC with gates), and across chunks of a distributed map (:func:`mac_assignment`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.errors import InputError
from .modeset import ModeSet


def mac(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Modal assurance criterion |aᴴb|² / ((aᴴa)(bᴴb)) between the columns of a (r, p) and b (r, s)."""
    num = np.abs(a.conj().T @ b) ** 2
    return num / np.outer(np.sum(np.abs(a) ** 2, 0), np.sum(np.abs(b) ** 2, 0))


def _assignment(cost):
    """(rows, cols) of the minimum-cost assignment (Hungarian) of the (r, s) ``cost``."""
    from scipy.optimize import linear_sum_assignment  # deferred: scipy.optimize (heavy import)

    return linear_sum_assignment(cost)


def mac_assignment(reference_shapes: np.ndarray, shapes: np.ndarray) -> np.ndarray:
    """perm (p,) with ``shapes[:, perm[j]]`` the column of ``shapes`` (r, s ≥ p) matching column j
    of ``reference_shapes`` (r, p): maximum total MAC (Hungarian assignment)."""
    rows, cols = _assignment(-mac(reference_shapes, shapes))
    perm = np.empty(reference_shapes.shape[1], int)
    perm[rows] = cols
    return perm


def match_eigenvalues(targets, eigenvalues) -> np.ndarray:
    """Indices into ``eigenvalues`` (..., s) of the values matching ``targets`` (..., k ≤ s), row by
    row over the leading dimensions: minimum total |Δλ| (Hungarian assignment; where every target's
    nearest eigenvalue is a different one, that is simply the nearest)."""
    targets, eigenvalues = np.asarray(targets), np.asarray(eigenvalues)
    if targets.ndim == 1:
        return match_eigenvalues(targets[None], eigenvalues[None])[0]
    cost = np.abs(targets[..., :, None] - eigenvalues[..., None, :])
    pick = cost.argmin(axis=-1)
    flat_cost, flat_pick = cost.reshape((-1,) + cost.shape[-2:]), pick.reshape((-1, pick.shape[-1]))
    ordered = np.sort(flat_pick, axis=1)
    for i in np.flatnonzero((np.diff(ordered, axis=1) == 0).any(axis=1)):
        rows, cols = _assignment(flat_cost[i])
        flat_pick[i, rows] = cols
    return flat_pick.reshape(pick.shape)


def pair_modes(frequencies_a, frequencies_b, macs=None, frequency_gate: float = 0.05,
               mac_gate: float = 0.5) -> dict:
    """{index in b: index in a} pairing modes a (p,) with modes b (s,) — e.g. identified with model
    modes: a pair is feasible when |f_a − f_b|/f_b ≤ ``frequency_gate`` and MAC ≥ ``mac_gate``
    (``macs`` (p, s), None: shapes not compared); among feasible pairs the assignment minimizes
    Σ (relative frequency difference + 1 − MAC)."""
    fa, fb = np.asarray(frequencies_a, float), np.asarray(frequencies_b, float)
    macs = np.ones((fa.size, fb.size)) if macs is None else np.asarray(macs, float)
    if not (fa.size and fb.size):
        return {}
    rel = np.abs(fa[:, None] - fb[None, :]) / fb[None, :]
    feasible = (rel <= frequency_gate) & (macs >= mac_gate)
    rows, cols = _assignment(np.where(feasible, rel + (1 - macs), 1e6))
    return {int(c): int(r) for r, c in zip(rows, cols) if feasible[r, c]}


@dataclass(frozen=True)
class Crossing:
    """Tracked modes ``modes`` (0-based) swap frequency order between configurations
    ``between`` = (i, i + 1) (0-based); ``description`` is 1-based for humans."""

    modes: tuple
    between: tuple
    description: str


def track_modes(mode_sets: Sequence[ModeSet]):
    """Follow modes along a sequence of neighbouring configurations.

    Tracked mode j is the j-th mode (by frequency) of the first configuration; in each next
    configuration it is the mode whose shape best matches (maximum total MAC, Hungarian
    assignment) its shape in the previous one. Returns ``(order, crossings)``: ``order[i, j]`` is
    the index in ``mode_sets[i]``'s sorted modes of tracked mode j; ``crossings`` lists frequency
    order swaps between tracked modes.
    """
    if any(r.mode_shapes.shape[0] == 0 for r in mode_sets):
        raise InputError("track_modes: mode shapes were not computed (eigenvalues-only analysis); "
                         "tracking needs them")
    counts = {r.num_modes for r in mode_sets}
    if len(counts) != 1:
        raise InputError(f"track_modes: the number of oscillatory modes changes along the sweep "
                         f"({sorted(counts)}); modes cannot be tracked")
    order = np.empty((len(mode_sets), counts.pop()), dtype=int)
    order[0] = np.arange(order.shape[1])
    for i in range(1, len(mode_sets)):
        order[i] = mac_assignment(mode_sets[i - 1].mode_shapes[:, order[i - 1]], mode_sets[i].mode_shapes)
    return order, _crossings(mode_sets, order)


def _crossings(mode_sets, order) -> list[Crossing]:
    return crossings_from_tracked(np.array([r.frequencies_hz[o] for r, o in zip(mode_sets, order)]))


def crossings_from_tracked(f: np.ndarray, offset: int = 0) -> list[Crossing]:
    """Frequency order swaps between consecutive rows of tracked frequencies ``f`` (m, modes) [Hz];
    row i is configuration ``offset`` + i (0-based), so a long map can be scanned in slices."""
    f = np.asarray(f, float)
    sign = np.sign(f[:, :, None] - f[:, None, :])
    rows, a_idx, b_idx = np.nonzero(np.triu(sign[:-1] * sign[1:] < 0))
    out = []
    for r, a, b in zip(rows, a_idx, b_idx):
        i = offset + r + 1
        desc = (f"modes {a + 1} and {b + 1} cross between configurations {i} and {i + 1} "
                f"(near {0.5 * (f[r + 1, a] + f[r + 1, b]):.4g} Hz)")
        out.append(Crossing((int(a), int(b)), (i - 1, i), desc))
    return out

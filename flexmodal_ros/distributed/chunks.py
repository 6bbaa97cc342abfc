"""The unit of work of a distributed modal map: one chunk of configurations, run where it lands.

A chunk is a contiguous slice of the configuration sequence, a multiple of the eigen-batch kernel
size (:func:`flexmodal_ros.flexible_joint.ama.modal_analysis_batch`, 256 configurations per vectorized
assembly + batched ``eig``). Grid chunks travel as the small :class:`~flexmodal_ros.flexible_joint.sweep.ConfigGrid`
plus (start, stop): their rows are generated on the worker. The results come back as a few dense
arrays (:class:`ChunkResult`), not one object per configuration; eigenvalue-only chunks never
build any (:func:`flexmodal_ros.flexible_joint.ama.modal_analysis_arrays`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.ama import modal_analysis_arrays, modal_analysis_batch
from ..modes import MARGINAL, STABLE, UNSTABLE, track_modes

KERNEL_BATCH = 256                 # configurations per vectorized assembly + batched eig
STABILITY_CODES = (STABLE, MARGINAL, UNSTABLE)   # stored as 0, 1, 2


@dataclass(frozen=True)
class ChunkOptions:
    """``shapes``: compute eigenvectors (needed by ``track`` and ``store_shapes``); ``track``: MAC
    tracking inside the chunk; ``store_shapes``: return every mode shape; ``width``: padded mode
    count (2n, the most oscillatory modes a 4n-state system has)."""

    shapes: bool
    track: bool
    store_shapes: bool
    width: int


@dataclass(frozen=True)
class ChunkResult:
    """Configurations ``start``..``start``+c−1 of one chunk (NaN / −1 padded to ``width`` modes).

    ``frequencies_hz``, ``damping_ratios`` (c, width) in ascending-frequency order per
    configuration; ``num_modes`` (c,); ``stability`` (c,) codes of :data:`STABILITY_CODES`;
    ``mode_shapes`` (c, 2n, width) or None; ``chunk_order`` (c, width): tracked order inside the
    chunk (tracked mode j = the chunk's first configuration's j-th mode), or None;
    ``first_shapes``/``last_shapes`` (2n, width): shapes of the first configuration (sorted) and of
    the last one (in chunk-tracked order), to join chunks; ``error``: why tracking failed, or "".
    """

    index: int
    start: int
    configurations: np.ndarray
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    num_modes: np.ndarray
    stability: np.ndarray
    mode_shapes: np.ndarray | None
    chunk_order: np.ndarray | None
    first_shapes: np.ndarray | None
    last_shapes: np.ndarray | None
    error: str = ""


def rows_of(piece, start: int, stop: int) -> np.ndarray:
    """Configurations of a chunk: ``piece`` is the (c, n) array itself or a lazy grid."""
    return piece if isinstance(piece, np.ndarray) else piece.rows(start, stop)


def analyse_rows(model, piece, start: int, stop: int, shapes: bool = True):
    """:func:`~flexmodal_ros.flexible_joint.ama.modal_analysis_batch` of one chunk (one thread): ModalResults."""
    return modal_analysis_batch(model, rows_of(piece, start, stop), workers=1,
                                chunk_size=KERNEL_BATCH, shapes=shapes)


def compute_chunk(model, piece, index: int, start: int, stop: int,
                  options: ChunkOptions) -> ChunkResult:
    """Modal analysis of configurations ``start``..``stop``−1 packed into a :class:`ChunkResult`."""
    code = {label: i for i, label in enumerate(STABILITY_CODES)}
    if not options.shapes:
        qs = rows_of(piece, start, stop)
        arrays = modal_analysis_arrays(model, qs, chunk_size=KERNEL_BATCH)
        freq, zeta = (np.full((len(qs), options.width), np.nan) for _ in range(2))
        freq[:, :arrays.frequencies_hz.shape[1]] = arrays.frequencies_hz
        zeta[:, :arrays.damping_ratios.shape[1]] = arrays.damping_ratios
        return ChunkResult(index, start, np.array(qs, float), freq, zeta, arrays.num_modes.astype(np.int16),
                           np.array([code[s] for s in arrays.stability], np.int8), None, None, None, None, "")
    results = analyse_rows(model, piece, start, stop, options.shapes)
    c, width = len(results), options.width
    freq = np.full((c, width), np.nan)
    zeta = np.full((c, width), np.nan)
    count = np.empty(c, np.int16)
    stability = np.array([code[r.stability] for r in results], np.int8)
    for i, r in enumerate(results):
        m = count[i] = r.num_modes
        freq[i, :m], zeta[i, :m] = r.frequencies_hz, r.damping_ratios
    shapes = _padded_shapes(results, width) if options.shapes else None
    order, first, last, error = None, None, None, ""
    if options.track:
        try:
            order = _padded_order(track_modes(results)[0], width)
        except InputError as exc:
            error = f"configurations {start + 1}..{stop}: {exc}"
        else:
            first = shapes[0]
            last = np.take_along_axis(shapes[-1], np.maximum(order[-1], 0)[None, :], axis=1)
    return ChunkResult(index, start, np.array([r.q for r in results]), freq, zeta, count,
                       stability, shapes if options.store_shapes else None, order, first, last,
                       error)


def _padded_shapes(results, width):
    rows = results[0].mode_shapes.shape[0]
    out = np.full((len(results), rows, width), np.nan, complex)
    for i, r in enumerate(results):
        out[i, :, :r.num_modes] = r.mode_shapes
    return out


def _padded_order(order, width):
    out = np.full((order.shape[0], width), -1, np.int16)
    out[:, :order.shape[1]] = order
    return out

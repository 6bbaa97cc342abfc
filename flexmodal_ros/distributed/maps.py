"""Modal maps on an executor: in memory (:func:`map_results`, :func:`modal_map`: the flexible-joint
map of :func:`flexmodal_ros.flexible_joint.sweep.modal_map` with its chunks on a scheduler) or
streamed to a Zarr store (:func:`sweep_to_store`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError
from ..flexible_joint.ama import check_configurations
from ..flexible_joint import sweep
from ..flexible_joint.sweep import MAX_CONFIGURATIONS, ConfigGrid, check_map_size
from ..modes import ModalMap, map_modes, progress_bar
from .chunks import KERNEL_BATCH, ChunkOptions, analyse_rows, compute_chunk
from .executors import DEFAULT_TIMEOUT_S, map_chunks, open_executor
from .store import finalize, map_identity, open_for_writing
from ..core.validation import shown

DEFAULT_CHUNK = 4096   # configurations per task: 16 kernel batches, ~1 s of one core for 7 joints


def _source(model, configurations):
    """A lazy :class:`ConfigGrid` as it is, anything else as a checked (m, n) array."""
    if isinstance(configurations, ConfigGrid):
        if configurations.base.size != model.n:
            raise InputError(f"configurations: the grid has {configurations.base.size} joints, "
                             f"the robot {model.n}")
        return configurations, configurations.size
    qs = check_configurations(model, configurations, "configurations")
    return qs, qs.shape[0]


def _piece(source, start, stop):
    """What a task needs to rebuild its rows: the grid itself (small) or the slice of the list."""
    return source if isinstance(source, ConfigGrid) else source[start:stop]


def _check_chunk(chunk_size):
    if isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or int(chunk_size) < 1:
        raise InputError(f"chunk_size: must be a positive integer, got {shown(chunk_size)}")
    return int(chunk_size)


def modal_map(model, configurations, track: bool = True, workers: int | None = None, progress: bool = False,
              scheduler=None, max_configurations=MAX_CONFIGURATIONS) -> ModalMap:
    """:func:`flexmodal_ros.flexible_joint.sweep.modal_map` with the chunks computed on ``scheduler``
    (``local:N``, ``tcp://HOST:PORT`` or an executor from :func:`open_executor`; None: local
    threads, the same function), same numbers (:func:`map_results`)."""
    if scheduler is None:
        return sweep.modal_map(model, configurations, track, workers, progress, max_configurations)
    qs = check_configurations(model, configurations, "configurations")
    check_map_size(len(qs), max_configurations)
    with progress_bar(len(qs), "modal map", enabled=progress) as bar:
        results = map_results(model, qs, scheduler, progress=bar.update)
    return map_modes(model.joint_names, qs, results, track)


def map_results(model, configurations, scheduler=None, shapes: bool = True,
                chunk_size: int | None = None, workers: int | None = None, progress=None,
                timeout: float = DEFAULT_TIMEOUT_S) -> list:
    """ModalResults of every configuration, in order, computed chunk by chunk on ``scheduler``
    (as :func:`sweep_to_store`). Same numbers as :func:`~flexmodal_ros.flexible_joint.ama.modal_analysis_batch`.
    ``chunk_size`` defaults to an even split over the worker threads (4 chunks each), in whole
    kernel batches, at most 4096. ``progress(k)`` is called with the configurations of each
    finished chunk."""
    source, m = _source(model, configurations)
    with open_executor(scheduler, workers, timeout) as executor:
        chunk = _check_chunk(chunk_size) if chunk_size is not None else min(
            DEFAULT_CHUNK, KERNEL_BATCH * -(-m // (4 * executor.slots * KERNEL_BATCH)))
        bounds = [(s, min(s + chunk, m)) for s in range(0, m, chunk)]
        parts = [None] * len(bounds)

        def task(k):
            return (analyse_rows, model, _piece(source, *bounds[k]), *bounds[k], shapes)

        def handle(k, results):
            parts[k] = results
            if progress:
                progress(len(results))

        map_chunks(executor, task, range(len(bounds)), handle)
    return [r for part in parts for r in part]


@dataclass(frozen=True)
class StoreRun:
    """Outcome of :func:`sweep_to_store`: the store ``path``, chunks ``computed`` by this run and
    ``resumed`` (already in the store), and the store's ``summary`` (ranges, stability counts,
    crossings)."""

    path: Path
    computed: int
    resumed: int
    summary: dict


def sweep_to_store(model, configurations, store, scheduler=None, track: bool = True,
                   store_shapes: bool = False, chunk_size: int | None = None,
                   workers: int | None = None, progress: bool = False,
                   timeout: float = DEFAULT_TIMEOUT_S) -> StoreRun:
    """Modal map of ``configurations`` ((m, n) array or lazy :class:`ConfigGrid`) streamed to the
    Zarr store at ``store`` (layout: :mod:`flexmodal_ros.distributed.store`).

    Work runs in chunks of ``chunk_size`` configurations (default 4096, or the store's own when
    resuming) on ``scheduler`` (``local:N``, ``tcp://HOST:PORT``, an executor from
    :func:`~flexmodal_ros.distributed.open_executor`; None: ``workers`` local threads).
    Mode shapes are computed when ``track`` (MAC tracking, joined across chunks at the end) or
    ``store_shapes`` asks for them; otherwise only eigenvalues (frequencies, damping, stability;
    modes stay in frequency order). An existing store of the same map resumes: only chunks not
    marked done are computed. The client holds at most 2 × (worker threads) chunk results.
    """
    source, m = _source(model, configurations)
    path = Path(store)
    chunk = _resume_chunk(path) if chunk_size is None else _check_chunk(chunk_size)
    identity = map_identity(model, source, chunk, track, store_shapes)
    width = 2 * model.n
    target = open_for_writing(path, identity, model.n, width, 2 * model.n)
    done = target.done()
    todo = [k for k in range(target.num_chunks) if not done[k]]
    options = ChunkOptions(shapes=track or store_shapes, track=track, store_shapes=store_shapes,
                           width=width)
    with progress_bar(m, f"modal map → {path.name}", enabled=progress) as bar:
        bar.update(m - sum(stop - start for start, stop in map(target.bounds, todo)))
        if todo:
            with open_executor(scheduler, workers, timeout) as executor:
        
                def task(k):
                    start, stop = target.bounds(k)
                    return (compute_chunk, model, _piece(source, start, stop), k, start, stop, options)

                def handle(k, result):
                    if result.error:
                        raise InputError(f"tracking: {result.error}; rerun with --no-track "
                                         f"(and a new --store path)")
                    target.write(result)
                    bar.update(result.num_modes.size)

                map_chunks(executor, task, todo, handle)
    summary = finalize(target)
    return StoreRun(path, len(todo), target.num_chunks - len(todo), summary)


def _resume_chunk(path: Path) -> int:
    """Chunk size of an existing store (so that a plain re-run resumes), else the default."""
    # deferred: Zarr
    import zarr

    if not path.is_dir():
        return DEFAULT_CHUNK
    try:
        ident = zarr.open_group(str(path), mode="r", use_consolidated=False).attrs["identity"]
        return int(ident["chunk_size"])
    except Exception:  # noqa: BLE001 - not a store: open_for_writing reports it
        return DEFAULT_CHUNK

"""Beyond one machine: modal maps and identification multi-starts on Dask, maps streamed to disk.

What it holds:

- :mod:`.executors` — the executor choice: local threads (the default, today's numbers) or a
  Dask cluster (``--scheduler tcp://HOST:PORT``, or ``local:N`` = an embedded ``LocalCluster`` of N
  worker processes listening on 127.0.0.1 only); Dask futures with ``retries``, at most
  2 × (worker threads) chunks in flight.
- :mod:`.chunks` — the task: one chunk of configurations (a multiple of the 256-configuration
  eigen-batch of :func:`flexmodal_ros.flexible_joint.ama.modal_analysis_batch`; grid rows generated on the
  worker from the lazy :class:`flexmodal_ros.flexible_joint.sweep.ConfigGrid`), packed into dense arrays,
  MAC-tracked inside the chunk (:func:`flexmodal_ros.modes.tracking.track_modes`).
- :mod:`.store` — the out-of-core result: a Zarr store written chunk by chunk, resumable, checked
  against the robot/model/grid it belongs to; a closing pass joins the tracking across chunk
  boundaries (the last shapes of chunk k against the first of chunk k + 1, Hungarian MAC
  assignment as in ``track_modes``, so the tracked order equals a single in-memory sweep's) and
  lists crossings; plots are drawn from the store (:func:`flexmodal_ros.modes.modal_map.plot_tracked`).
- :mod:`.maps` — :func:`sweep_to_store` and :func:`map_results` (in memory, for
  :func:`flexmodal_ros.flexible_joint.sweep.modal_map` with a scheduler).
- :mod:`.multistart` — :func:`run_starts`: the multistart of
  :func:`flexmodal_ros.identification.fit.identify` mapped over chunks of starts.

Why Zarr rather than Parquet: a modal map is a set of dense N-d arrays over one configuration
axis — f and ζ (m, modes), complex mode shapes (m, 2n, modes), chunk-boundary shapes — not a
table of scalar records. Zarr stores them as they are (complex128 natively, NaN padding, named
dimensions that ``xarray.open_zarr`` turns into a labelled Dataset, ``dask.array.from_zarr`` for
lazy arrays, ``.to_dataframe()`` for pandas). Its array shape is fixed up front from the grid size,
so a chunk computed in any order is one independent write of its own Zarr chunk at a known offset:
no row-group ordering, no append log, and resume is a look at ``chunk_done``. Parquet would need
the shapes flattened into 2·(2n)² real columns per row, one file per chunk plus an index to
resume, and gives no N-d view.

Eigenvalue-only stores (no ``track``, no shapes): MAC tracking needs mode shapes, so nothing is
tracked; modes stay in ascending-frequency order per configuration and crossings are not
detected (as ``flexmodal sweep --no-track``).
"""
from ..core.lazy import lazy_exports

# Names imported on first use: parsing --scheduler does not load Dask or the identification.
__getattr__, __all__ = lazy_exports(__name__, {
    "executors": ("DaskExecutor", "LocalExecutor", "open_executor", "parse_scheduler"),
    "maps": ("DEFAULT_CHUNK", "StoreRun", "map_results", "modal_map", "sweep_to_store"),
    "multistart": ("run_starts",),
    "store": ("open_store", "plot_store", "tracked_rows"),
})

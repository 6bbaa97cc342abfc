"""Where chunks run: threads of this process (the default, today's path) or a Dask cluster.

Both executors offer the same calls (``submit``, ``wait_first``, ``cancel``), so :func:`map_chunks`
feeds either with at most ``2 × slots`` chunks in flight. Every task carries its own arguments (the
robot model pickles to ~40 kB): nothing lives only on one worker, so a lost worker's chunks can
always be recomputed elsewhere (scattered data could not).
Dask does the scheduling (placement, work stealing, rescheduling the tasks of a lost worker,
``retries`` for tasks that raised); the bounded submission only keeps the client's memory and the
results waiting on workers proportional to the cluster, not to the grid.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import re
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor
from typing import Callable, Iterable

from ..core.errors import FlexmodalError, InputError
from ..flexible_joint.ama import default_workers
from ..core.validation import shown

DEFAULT_TIMEOUT_S = 10.0   # connecting to a scheduler, waiting for its first worker
WORKER_CLOSE_S = 10.0     # closing a local cluster: longest wait for its workers to close first
DEFAULT_RETRIES = 2        # re-runs of a chunk whose task raised (lost workers: the scheduler's own count)
# LocalCluster keywords: single-threaded worker processes; scheduler, nannies, workers and the
# scheduler's always-on HTTP routes (health, metrics) on 127.0.0.1, random ports, no dashboard.
LOOPBACK_CLUSTER = dict(threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, worker_dashboard_address=None,
                        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
_LOCAL = re.compile(r"^local:(\d+)$")
_REMOTE = re.compile(r"^tcp://[^\s/:]+:\d+$")


def parse_scheduler(spec: str) -> tuple[str, object]:
    """``"local:N"`` → ("local", N); ``"tcp://HOST:PORT"`` → ("tcp", spec); InputError otherwise."""
    text = str(spec).strip()
    local = _LOCAL.match(text)
    if local:
        n = int(local.group(1))
        if n < 1:
            raise InputError(f"--scheduler {text}: a local cluster needs at least 1 worker")
        return "local", n
    if _REMOTE.match(text):
        return "tcp", text
    raise InputError(f"--scheduler: expected tcp://HOST:PORT or local:N, got {shown(text)}")


class LocalExecutor:
    """``workers`` threads in this process (numpy's LAPACK releases the GIL), as
    :func:`flexmodal_ros.flexible_joint.ama.modal_analysis_batch`."""

    def __init__(self, workers: int | None = None):
        if workers is not None and int(workers) < 1:
            raise InputError(f"workers: must be >= 1, got {workers}")
        self.slots = int(workers or default_workers())
        self._pool = ThreadPoolExecutor(self.slots)

    def submit(self, fn, *args):
        return self._pool.submit(fn, *args)

    def wait_first(self, futures):
        return concurrent.futures.wait(futures, return_when=FIRST_COMPLETED)

    def cancel(self, futures):
        for f in futures:
            f.cancel()

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    """A ``distributed.Client``: tasks with ``retries``, one slot per worker thread."""

    def __init__(self, client, retries: int = DEFAULT_RETRIES):
        self.client = client
        self.retries = int(retries)

    @property
    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, fn, *args):
        return self.client.submit(fn, *args, retries=self.retries, pure=False)

    def wait_first(self, futures):
        # deferred: Dask distributed
        from distributed import wait
        return wait(futures, return_when="FIRST_COMPLETED")

    def cancel(self, futures):
        if futures:
            self.client.cancel(list(futures))

    def close(self):
        self.client.close()


@contextlib.contextmanager
def open_executor(scheduler=None, workers: int | None = None, timeout: float = DEFAULT_TIMEOUT_S):
    """Context manager giving a :class:`LocalExecutor` (``scheduler`` None; ``workers`` threads) or a
    :class:`DaskExecutor` connected to ``scheduler`` (see :func:`parse_scheduler`); an executor
    passed as ``scheduler`` is used as it is and left open (one cluster for several calls).

    ``local:N`` starts a ``LocalCluster`` of N single-threaded worker processes whose scheduler,
    nannies and workers listen on 127.0.0.1 only, with no dashboard; it is closed on exit.
    ``tcp://HOST:PORT`` connects to a running ``dask scheduler`` and waits up to ``timeout`` [s]
    for it and for at least one worker; failing that, an InputError says so.
    """
    if isinstance(scheduler, (LocalExecutor, DaskExecutor)):
        yield scheduler
        return
    if scheduler is None:
        executor = LocalExecutor(workers)
        try:
            yield executor
        finally:
            executor.close()
        return
    kind, value = parse_scheduler(scheduler)
    # deferred: Dask distributed
    from distributed import Client, LocalCluster
    from .worker_logging import QuietHeartbeatAtClose      # deferred: Dask distributed (imports it)

    with contextlib.ExitStack() as stack:
        if kind == "local":
            cluster = stack.enter_context(LocalCluster(n_workers=value, **LOOPBACK_CLUSTER))
            client = stack.enter_context(Client(cluster))
            client.register_plugin(QuietHeartbeatAtClose())
            stack.callback(_close_workers_first, client, cluster)
        else:
            client = stack.enter_context(_connect(value, timeout))
        yield DaskExecutor(client)


def _close_workers_first(client, cluster, timeout=WORKER_CLOSE_S):
    """Scale the local cluster to no worker and wait (up to ``timeout`` [s]) until the scheduler
    has none, before the client and the cluster close: a worker still running when the scheduler
    closes logs a CommClosedError traceback from its heartbeat (seen once in a loaded CI run; a
    worker's own close can still race its heartbeat: :mod:`.worker_logging`)."""
    cluster.scale(0)
    deadline = time.monotonic() + timeout
    while client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.05)


def _connect(address: str, timeout: float):
    # deferred: Dask distributed
    from distributed import Client

    try:
        client = Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError) as exc:
        raise InputError(f"--scheduler {address}: no Dask scheduler reachable within {timeout:g} s "
                         f"({type(exc).__name__}); start one with `dask scheduler` and workers with "
                         f"`dask worker {address}`, or use --scheduler local:N") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError):
        client.close()
        raise InputError(f"--scheduler {address}: the scheduler has no worker after {timeout:g} s; "
                         f"start some with `dask worker {address}`") from None
    return client


def map_chunks(executor, task: Callable[[object], tuple], items: Iterable,
               handle: Callable[[object, object], None]) -> None:
    """Run ``executor.submit(*task(item))`` for every item, at most ``2 × executor.slots`` at once,
    and call ``handle(item, result)`` in completion order (results are not kept).

    A task that still fails after Dask's retries, or whose workers kept dying, raises a
    :class:`FlexmodalError` naming the item; the chunks still in flight are cancelled.
    """
    items = iter(items)
    pending = {}

    def top_up():
        window = 2 * executor.slots
        for item in items:
            pending[executor.submit(*task(item))] = item
            if len(pending) >= window:
                return

    try:
        top_up()
        while pending:
            done, _ = executor.wait_first(list(pending))
            for future in done:
                item = pending.pop(future)
                handle(item, _result(future, item))
            top_up()
    finally:
        executor.cancel(list(pending))


def _result(future, item):
    try:
        return future.result()
    except FlexmodalError:
        raise
    except Exception as exc:  # noqa: BLE001 - remote failure: reported with the chunk it hit
        name = type(exc).__name__
        hint = (" (its workers died repeatedly; see distributed.scheduler.allowed-failures)"
                if name == "KilledWorker" else "")
        raise FlexmodalError(f"chunk {item}: failed{hint}: {name}: {exc}") from exc

"""A local cluster's close, without the heartbeat traceback of a worker that is closing.

A worker whose close has begun (``Status.closing``) closes its connections; a heartbeat already on
its way then fails with "CommClosedError: ConnectionPool closing." and distributed logs it as an
error with a traceback ("Failed to communicate with scheduler during heartbeat."): a race inside
distributed's own close (dask/distributed 2026.8; also nv-morpheus/Morpheus#1990), seen in CI
twice in `flexmodal sweep --scheduler local:2`, which closes its cluster with every task done
(:func:`~.executors.open_executor` scales it to no worker first). :class:`QuietHeartbeatAtClose`,
registered on the workers of the clusters :func:`~.executors.open_executor` starts, drops that one
message while the worker is closing or closed; the same message from a running worker, and every
other record, is logged as before.
"""
from __future__ import annotations

import logging

from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat"
CLOSING = (Status.closing, Status.closing_gracefully, Status.closed)
WORKER_LOGGER = "distributed.worker"


def dropped(message: str, status) -> bool:
    """Whether a worker in ``status`` leaves the log record ``message`` out (module docstring)."""
    return status in CLOSING and message.startswith(HEARTBEAT_FAILED)


class _Filter(logging.Filter):
    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def filter(self, record):
        return not dropped(record.getMessage(), self.worker.status)


class QuietHeartbeatAtClose(WorkerPlugin):
    """Worker plugin: the :class:`logging.Filter` of :func:`dropped` on distributed's worker logger,
    for the worker process's life (a worker's close tears its plugins down before the heartbeat in
    flight fails, so the filter is not removed then)."""

    name = "flexmodal-quiet-heartbeat-at-close"

    def setup(self, worker):
        logging.getLogger(WORKER_LOGGER).addFilter(_Filter(worker))

"""Beam-link robots in the ``modal_analysis`` node: ``~/compute_link_modes`` (flexmodal_ros.links).

Bounds on one request's work: ``num_modes`` <= the node's ``max_link_modes`` (checked before any
work), and a wall-time limit ``link_time_limit_s``: the root search's cost depends on the request
in ways no size check catches (on three_link_arm it grows by four orders of magnitude between
thickness_factor 30 and 1000: ``benchmarks/bench_links.py``, docs/benchmarks.md), so the computation runs in a worker process
(:class:`~flexmodal_ros.core.workers.WorkerPool`, one worker, started with the node) that is
killed at the limit; the request is then answered "time limit" and the next one gets a new worker.
"""
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool

from ...core.errors import FlexmodalError, InputError
from ...core.workers import WorkerPool
from ...links.arm import has_links, link_arm_from_model
from ...links.solve import MAX_MODES, link_modes
from ..conversions import link_modes_request_to_core, link_modes_to_response

# Default of the node's max_link_modes, the bound on one request's size: the root search and
# confirmation grow fast with the number of modes (three_link_arm on this project's machine: 40
# modes 1.3 s, 60 modes 8.9 s; the core's MAX_MODES = 200 takes minutes).
MAX_LINK_MODES = 40
LINK_TIME_LIMIT_S = 30.0    # default of the node's link_time_limit_s


def check_max_link_modes(value):
    """The node's max_link_modes parameter (1 .. the core's MAX_MODES); FlexmodalError otherwise."""
    if not 1 <= value <= MAX_MODES:
        raise FlexmodalError(f"parameter max_link_modes: must be in [1, {MAX_MODES}], got {value}")
    return value


class LinkService:
    """Answers ComputeLinkModes for ``model`` (a robot whose YAML has a ``links:`` section; others
    are refused with the reason); at most ``max_modes`` modes and ``time_limit`` seconds per
    request (module docstring). :meth:`close` ends the worker."""

    def __init__(self, model, max_modes=MAX_LINK_MODES, time_limit=LINK_TIME_LIMIT_S):
        if not 0 < time_limit < float("inf"):
            raise FlexmodalError(f"parameter link_time_limit_s: must be a positive number, got {time_limit}")
        self.model, self.max_modes, self.time_limit = model, max_modes, time_limit
        self.arm = link_arm_from_model(model) if has_links(model) else None
        self.pool = None
        if self.arm is not None:
            self._start_worker()

    def _start_worker(self):
        self.pool = WorkerPool(1, preload=["flexmodal_ros.links.solve"])
        self.pool.start()                      # the worker now, not at the first request

    def link_modes(self, request, response, stamp=None):
        if self.arm is None:
            raise InputError(f"robot {self.model.name} has no flexible links (no links: section in its YAML)")
        if request.num_modes > self.max_modes:
            raise InputError(f"num_modes: {request.num_modes} is more than this node's max_link_modes "
                             f"({self.max_modes}); ask for fewer modes")
        arm, q, model, num_modes, regime = link_modes_request_to_core(self.arm, request)
        future = self.pool.submit(link_modes, arm, q, num_modes, model, regime)
        try:
            result = future.result(timeout=self.time_limit)
        except FutureTimeout:
            self._restart()
            raise FlexmodalError(f"time limit: the link modes took longer than this node's link_time_limit_s "
                                 f"({self.time_limit:g} s) and were stopped; ask for fewer modes or a smaller "
                                 "thickness_factor") from None
        except BrokenProcessPool:
            self._restart()
            raise FlexmodalError("the link-mode worker process died (out of memory?); the request was not "
                                 "answered, the next one gets a new worker") from None
        link_modes_to_response(arm, result, regime, response)

    def _restart(self):
        self.pool.shutdown(timeout=0.0)        # kills the worker still computing
        self._start_worker()

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(timeout=0.5)
            self.pool = None

"""Worker processes for long computations (identification multistarts), bound to their owner.

:class:`WorkerPool` is a persistent :class:`concurrent.futures.ProcessPoolExecutor` (forkserver
start method: safe to use from a multithreaded ROS node) whose workers

- die with the process that owns the pool: each worker asks the kernel for SIGKILL when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``); its parent is the forkserver, which exits as soon as
  its "alive" pipe reaches end of file. multiprocessing hands the pipe's write end to every
  worker too (so that workers could start processes of their own), which would keep the
  forkserver, and so the workers, alive after the owner died: the workers close it. A node
  killed with SIGKILL therefore leaves no worker computing; a node shut down normally calls
  :meth:`WorkerPool.shutdown`.
- ignore SIGINT: Ctrl-C on a terminal reaches the whole process group; the owner stops the pool
  (no KeyboardInterrupt tracebacks from the workers, also not while they start: the forkserver is
  started with SIGINT blocked, a mask its children inherit).
- stop early on request: a :class:`StopToken` (a deadline on CLOCK_MONOTONIC, which all processes
  of the machine share, and a cancel flag in shared memory) is checked by the computation at
  convenient points (:meth:`StopToken.check`, e.g. once per residual evaluation), which raises
  :class:`Interrupted`; the same token carries progress counters (:meth:`StopToken.report`,
  :meth:`StopToken.progress`) that the owner reads while the workers compute.

Hand-written because neither the standard library nor the usual task libraries (joblib, Dask)
tie worker lifetime to the owner with PDEATHSIG or give cross-process cancellation of a running
task without killing the worker.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .fallbacks import warn_fallback

PR_SET_PDEATHSIG = 1            # <linux/prctl.h>
STOP_SLOTS = 256                # tokens that can be live at once per pool
# Time to start a pool and run a first task [s], measured on the 2-core development machine under
# load: 3.9 s the first time in a process (the forkserver starts and imports NumPy, SciPy,
# Pinocchio), 0.2 s afterwards (the forkserver stays for the life of the process).
START_COLD_S, START_WARM_S = 4.0, 0.25
_started = False                # a pool has started in this process (the forkserver is warm)

_worker_shared = None           # in a worker: (cancel flags, done counts, best values) of its pool


class Interrupted(Exception):
    """A computation stopped by its :class:`StopToken`; ``reason`` is "cancelled" or "time limit"."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class StopToken:
    """Deadline (``time.monotonic()`` value, None = none), cancel flag and progress counters of
    one computation. Picklable: sent to the workers with the task; there it uses its pool's
    shared arrays."""

    def __init__(self, deadline=None, shared=None, slot=None):
        self.deadline, self._shared, self.slot = deadline, shared, slot

    def __getstate__(self):
        return {"deadline": self.deadline, "slot": self.slot}

    def __setstate__(self, state):
        self.deadline, self.slot = state["deadline"], state["slot"]
        self._shared = _worker_shared

    @property
    def cancelled(self):
        return self.slot is not None and self._shared is not None and bool(self._shared[0][self.slot])

    def report(self, value):
        """One more unit of work done, with result ``value`` (the best, i.e. lowest, is kept)."""
        if self.slot is not None and self._shared is not None:
            _, done, best = self._shared
            done[self.slot] += 1                  # one writer at a time per slot is not guaranteed:
            best[self.slot] = min(best[self.slot], value)   # counts are progress hints, not results

    def progress(self):
        """(units done, lowest value reported) so far, over every process."""
        if self.slot is None or self._shared is None:
            return 0, float("inf")
        _, done, best = self._shared
        return int(done[self.slot]), float(best[self.slot])

    def check(self):
        """Raise :class:`Interrupted` if cancelled or past the deadline (cheap: call it often)."""
        if self.cancelled:
            raise Interrupted("cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Interrupted("time limit")


NO_STOP = StopToken()


def _init_worker(*shared):
    """Worker start-up: die with the parent, leave SIGINT to the owner, remember the shared arrays."""
    global _worker_shared
    _worker_shared = shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = multiprocessing.forkserver._forkserver
    if server._forkserver_alive_fd is not None:  # only the owner may keep the forkserver alive
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError) as exc:   # not Linux
        warn_fallback("flexmodal_ros.core.workers", "prctl(PR_SET_PDEATHSIG)", f"{exc}; not Linux",
                      "idle workers end with the forkserver when the parent exits",
                      "a worker busy with a task outlives a parent that was killed until the task ends")
    if os.getppid() != parent:          # the parent died before prctl took effect
        os._exit(1)


def _start_forkserver():
    """Start the forkserver (if not running) with SIGINT blocked: the mask is inherited by the
    forkserver and every worker it forks, so a Ctrl-C to the process group cannot interrupt a
    worker while it is still importing (before :func:`_init_worker` makes it ignore SIGINT)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class WorkerPool:
    """``workers`` persistent processes (see the module docstring); ``preload``: modules the
    forkserver imports once, so that workers start fast. Thread-safe."""

    def __init__(self, workers, preload=()):
        if int(workers) < 1:
            raise ValueError(f"workers: must be >= 1, got {workers}")
        self.workers = int(workers)
        self._ctx = multiprocessing.get_context("forkserver")
        if preload:
            self._ctx.set_forkserver_preload(list(preload))
        self._flags = self._ctx.RawArray("b", STOP_SLOTS)
        self._shared = (self._flags, self._ctx.RawArray("q", STOP_SLOTS), self._ctx.RawArray("d", STOP_SLOTS))
        self._free = list(range(STOP_SLOTS))
        self._lock = threading.Lock()
        self._executor = None
        self._closed = False

    @staticmethod
    def start_cost():
        """Estimated seconds to start a pool in this process now (START_COLD_S / START_WARM_S)."""
        return START_WARM_S if _started else START_COLD_S

    def _pool(self):
        global _started
        if self._closed:
            raise Interrupted("cancelled")
        if self._executor is None:
            _started = True
            _start_forkserver()
            self._executor = ProcessPoolExecutor(self.workers, mp_context=self._ctx,
                                                 initializer=_init_worker, initargs=self._shared)
        return self._executor

    def submit(self, fn, *args):
        """``fn(*args)`` in a worker; a concurrent.futures Future. A pool broken by a dead worker
        (e.g. killed for lack of memory) is replaced for the next submission."""
        with self._lock:
            try:
                return self._pool().submit(fn, *args)
            except BrokenProcessPool:
                self._executor = None
                return self._pool().submit(fn, *args)

    def discard_if_broken(self, exc):
        """After a task failed with ``exc``: forget a broken executor (the next submit starts anew)."""
        if isinstance(exc, BrokenProcessPool):
            with self._lock:
                self._executor = None

    def token(self, deadline=None):
        """A new :class:`StopToken` (release it with :meth:`release`)."""
        with self._lock:
            if not self._free:
                raise RuntimeError("WorkerPool: too many live stop tokens")
            slot = self._free.pop()
        self._flags[slot] = 0
        self._shared[1][slot], self._shared[2][slot] = 0, float("inf")
        return StopToken(deadline, self._shared, slot)

    def cancel(self, token):
        """Ask every computation holding ``token`` to stop."""
        if token.slot is not None:
            self._flags[token.slot] = 1

    def release(self, token):
        with self._lock:
            if token.slot is not None and token.slot not in self._free:
                self._free.append(token.slot)

    def shutdown(self, timeout=2.0):
        """Stop every computation and end the workers (waits up to ``timeout`` s, then kills)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        for slot in range(STOP_SLOTS):
            self._flags[slot] = 1
        if executor is None:
            return
        processes = list(getattr(executor, "_processes", {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

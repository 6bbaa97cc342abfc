"""Worker processes for long computations (identification multistarts), bound to their owner.

:class:`WorkerPool` is a persistent :class:`concurrent.futures.ProcessPoolExecutor` (forkserver
start method: safe to use from a multithreaded ROS node) whose workers

- die with the process that owns the pool: each worker runs a watcher thread that waits on a
  process file descriptor of the owner (``os.pidfd_open``, Linux >= 5.3; elsewhere it polls the
  owner's pid every ``WATCH_PERIOD_S``) and ends the worker as soon as the owner has exited. A
  node killed with SIGKILL therefore leaves no worker computing; the forkserver, whose "alive"
  pipe the owner and its workers hold, exits once they are gone. A node shut down normally
  calls :meth:`WorkerPool.shutdown`.
- ignore SIGINT: Ctrl-C on a terminal reaches the whole process group; the owner stops the pool
  (no KeyboardInterrupt tracebacks from the workers, also not while they start: the forkserver is
  spawned with SIGINT ignored, a disposition it and its children inherit).
- stop early on request: a :class:`StopToken` (a deadline on CLOCK_MONOTONIC, which all processes
  of the machine share, and a cancel flag in shared memory) is checked by the computation at
  convenient points (:meth:`StopToken.check`, e.g. once per residual evaluation), which raises
  :class:`Interrupted`; the same token carries progress counters (:meth:`StopToken.report`,
  :meth:`StopToken.progress`) that the owner reads while the workers compute.
- are ended by :meth:`WorkerPool.shutdown` even inside a computation that does not check its
  token: past the timeout, the pool raises a shared "end" generation that the watcher threads
  read within ``WATCH_PERIOD_S``.

Only the public interfaces of ``multiprocessing``, ``concurrent.futures`` and ``os`` are used.
Hand-written because neither the standard library nor the usual task libraries (joblib, Dask)
tie worker lifetime to the owner or give cross-process cancellation of a running task without
killing the worker.
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.forkserver
import os
import select
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .fallbacks import warn_fallback

STOP_SLOTS = 256                # tokens that can be live at once per pool
WATCH_PERIOD_S = 0.05           # a worker's watcher: how often it reads the pool's "end" generation
# Longest wait, at shutdown, for a worker still starting (unpickling its start-up data): the
# owner must keep the pool's semaphores until then, or the worker fails with a traceback.
START_BOUND_S = 8.0
ORPHAN_WAIT_S = 1.0         # shutdown: wait for a worker the executor did not register before killing it
# Time to start a pool and run a first task [s], measured on the 2-core development machine under
# load: 3.9 s the first time in a process (the forkserver starts and imports NumPy, SciPy,
# Pinocchio), 0.2 s afterwards (the forkserver stays for the life of the process).
START_COLD_S, START_WARM_S = 4.0, 0.25
_started = False                # a pool has started in this process (the forkserver is warm)
_forkserver_ready = False       # the forkserver has served a process (_await_forkserver)
_open_pools = set()             # pools with a started executor not shut down yet (shutdown_all; a strong
                                # reference: the pool of an interrupted constructor has no other)

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


def _init_worker(owner, generation, end, *shared):
    """Worker start-up: leave SIGINT to the owner, remember the shared arrays, and start the
    watcher that ends this process when the owner exits or the pool ends ``generation``."""
    global _worker_shared
    _worker_shared = shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        owner_fd = os.pidfd_open(owner)
    except ProcessLookupError:              # the owner died before this worker started
        os._exit(1)
    except (AttributeError, OSError) as exc:    # not Linux, or a kernel older than 5.3
        owner_fd = None
        warn_fallback("flexmodal_ros.core.workers", "os.pidfd_open", f"{exc}",
                      f"the worker polls its owner's pid every {WATCH_PERIOD_S:g} s",
                      "an owner that exited but was not yet reaped by its parent keeps its workers alive until then")
    threading.Thread(target=_watch_owner, args=(owner, owner_fd, generation, end),
                     name="flexmodal-owner-watch", daemon=True).start()


def _watch_owner(owner, owner_fd, generation, end):
    """End this worker (``os._exit``) when the owner has exited or ``end[0] >= generation``."""
    poller = None
    if owner_fd is not None:
        poller = select.poll()
        poller.register(owner_fd, select.POLLIN)
    while True:
        if poller is not None:
            if poller.poll(WATCH_PERIOD_S * 1000.0):
                os._exit(1)
        else:
            time.sleep(WATCH_PERIOD_S)
            try:
                os.kill(owner, 0)
            except (ProcessLookupError, PermissionError):   # gone, or its pid reused by another user
                os._exit(1)
        if end[0] >= generation:
            os._exit(1)


def _start_forkserver():
    """Start the forkserver (if not running) with SIGINT ignored while it is spawned: an ignored
    signal stays ignored across exec, so the forkserver and every worker it forks ignore SIGINT
    from their first instruction and a Ctrl-C to the process group cannot interrupt them while they
    import (the forkserver's preload imports SciPy: ~1 s). Blocking SIGINT instead does not carry
    over: CPython's spawn resets the child's signal mask (measured: SigBlk 0 in the forkserver).
    The owner's handler (Python's, or the one rclpy installed) is saved and restored as is with
    sigaction; a SIGINT sent to the owner during those few milliseconds is lost."""
    with _sigint_ignored():
        multiprocessing.forkserver.ensure_running()


def _await_forkserver(ctx):
    """Wait, once per process, until the forkserver serves (its preload imported: ~1-4 s cold), by
    starting and joining a process that only returns. The wait happens here, in the caller's thread,
    where a stop signal may interrupt it — a probe left starting holds no semaphore — and not inside
    a worker's start, which :meth:`WorkerPool.shutdown` has to wait for (it would hold a stop for the
    whole preload)."""
    global _forkserver_ready
    if not _forkserver_ready:
        probe = ctx.Process(target=os.getpid, name="flexmodal-forkserver-probe", daemon=True)
        probe.start()
        probe.join()
        _forkserver_ready = True


SIGACTION_BYTES = 512       # > sizeof(struct sigaction) on every Linux ABI (152 on x86_64 / aarch64)


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT's disposition set to SIG_IGN inside, the previous one (any handler) restored after."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ignore, saved = ctypes.create_string_buffer(SIGACTION_BYTES), ctypes.create_string_buffer(SIGACTION_BYTES)
        ctypes.memmove(ignore, ctypes.byref(ctypes.c_void_p(int(signal.SIG_IGN))), ctypes.sizeof(ctypes.c_void_p))
        swapped = libc.sigaction(int(signal.SIGINT), ignore, saved) == 0   # sa_handler is the first field
    except (OSError, AttributeError):       # no sigaction: spawn without the protection
        swapped = False
    try:
        yield
    finally:
        if swapped:
            libc.sigaction(int(signal.SIGINT), saved, None)


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
        self._end = self._ctx.RawArray("q", 1)        # executors of generation <= end[0] must end
        self._generation = 0
        self._free = list(range(STOP_SLOTS))
        self._lock = threading.Lock()
        self._executor = None
        self._warmup = None                 # first task of the current executor: its worker started
        self._processes = []                # worker processes started by this pool (multiprocessing.Process)
        self._spawn_lock = threading.Lock() # held while workers are started (_spawning)
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
            _await_forkserver(self._ctx)
            self._generation += 1
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=self._ctx, initializer=_init_worker,
                initargs=(os.getpid(), self._generation, self._end, *self._shared))
            _open_pools.add(self)
            self._warmup = self._spawning(self._executor.submit, int)
        return self._executor

    def _spawning(self, call, *args):
        """``call(*args)`` on a thread of its own, remembering the worker processes it started (the
        executor starts them in ``submit``; :func:`multiprocessing.active_children` before and
        after). A stop signal raises KeyboardInterrupt in the main thread only: had it landed inside
        the call, between a worker's start and the bookkeeping of the executor (which alone tells
        that worker to end) and of this pool, the worker would be left starting while this process
        exited and released the pool's semaphores (a "SemLock._rebuild ... FileNotFoundError"
        traceback, CI). The caller may be interrupted while it waits; the call itself completes,
        and :meth:`shutdown` waits for it (``_spawn_lock``)."""
        outcome = {}

        def run():
            with self._spawn_lock:
                before = {p.pid for p in multiprocessing.active_children()}
                try:
                    outcome["result"] = call(*args)
                except BaseException as exc:    # noqa: BLE001 - raised again in the caller
                    outcome["error"] = exc
                finally:
                    self._processes.extend(p for p in multiprocessing.active_children() if p.pid not in before)

        spawner = threading.Thread(target=run, name="flexmodal-pool-spawn", daemon=True)
        spawner.start()
        spawner.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    def start(self):
        """Start the workers' executor now (its first worker starts in the background)."""
        with self._lock:
            self._pool()

    def submit(self, fn, *args):
        """``fn(*args)`` in a worker; a concurrent.futures Future. A pool broken by a dead worker
        (e.g. killed for lack of memory) is replaced for the next submission."""
        with self._lock:
            try:
                return self._spawning(self._pool().submit, fn, *args)
            except BrokenProcessPool:
                self._executor = None
                return self._spawning(self._pool().submit, fn, *args)

    def discard_if_broken(self, exc):
        """After a task failed with ``exc``: forget a broken executor (the next submit starts anew)."""
        if isinstance(exc, BrokenProcessPool):
            with self._lock:
                broken, self._executor = self._executor, None
            if broken is not None:
                broken.shutdown(wait=False, cancel_futures=True)

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
        """Stop every computation and end the workers: waits up to ``timeout`` s for them to end,
        then ends them (their watchers read the "end" generation). A worker still starting is
        waited for (up to START_BOUND_S), as the pool's semaphores must outlive its start-up, and so
        is a start in flight whose caller a stop signal interrupted (:meth:`_spawning`); a worker that
        still has not ended then (never reached its watcher, or never registered by the executor) is
        given ORPHAN_WAIT_S and killed."""
        _open_pools.discard(self)
        with self._lock:
            self._closed = True
        if self._spawn_lock.acquire(timeout=START_BOUND_S):   # a start whose caller a stop signal
            self._spawn_lock.release()                       # interrupted has ended
        with self._lock:
            executor, self._executor = self._executor, None
            warmup, generation = self._warmup, self._generation
            processes, self._processes = self._processes, []
        for slot in range(STOP_SLOTS):
            self._flags[slot] = 1
        if executor is None:
            return
        if warmup is not None:              # the first task: it runs once the first worker started
            with contextlib.suppress(Exception):        # done, failed or broken: all the same here
                warmup.result(timeout=START_BOUND_S)
        # One call, in a thread: a second shutdown() call of the executor would not wait any more.
        waiter = threading.Thread(target=executor.shutdown, kwargs={"wait": True, "cancel_futures": True},
                                  name="flexmodal-pool-shutdown", daemon=True)
        waiter.start()
        waiter.join(timeout)
        if waiter.is_alive():               # a computation that does not check its token
            self._end[0] = generation
            waiter.join(WATCH_PERIOD_S * 20 + 1.0)
        # Every worker this pool started has ended now, unless it never reached its watcher (stuck
        # starting) or the executor never registered it: each is given ORPHAN_WAIT_S, then killed.
        for process in processes:
            process.join(ORPHAN_WAIT_S)
            if process.is_alive():
                process.kill()
                process.join(1.0)
        waiter.join(1.0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def shutdown_all(timeout=2.0):
    """Shut down every pool of this process that is still open (:meth:`WorkerPool.shutdown`): the
    end of a node whose construction was interrupted (a stop signal while it started its workers)
    leaves no pool to the interpreter's exit, where its semaphores went while a worker was still
    starting (a "SemLock._rebuild ... FileNotFoundError" traceback in the node's log, CI)."""
    for pool in list(_open_pools):
        pool.shutdown(timeout)

"""Optional real-time scheduling for the 1 kHz nodes (simulator, controller): SCHED_FIFO and CPU pinning.

Parameters declared by :func:`declare_realtime`: ``realtime_priority`` (0 = the normal scheduler,
default; 1-99 = SCHED_FIFO at that priority) and ``cpu`` (-1 = no pinning, default; k = run on CPU
k only). Both apply to every thread of the process that exists when the node is built (the rclpy
executor and the DDS threads) and are inherited by threads started later. A priority > 0 also
holds a PM QoS request of 0 µs CPU wake-up latency (``/dev/cpu_dma_latency``, as cyclictest does)
while the process runs: idle CPUs poll instead of halting (a CPU woken from halt runs the next
Python several times slower; measurements: docs/controller.md). Requesting any of this where the OS does not
allow it (no CAP_SYS_NICE / RLIMIT_RTPRIO, CPU not in the process' set, no access to
/dev/cpu_dma_latency) logs one warning and the node runs on without it: never an error.

Linux RT throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % by default) keeps a runaway
SCHED_FIFO thread from locking up the CPU it runs on.
"""
import gc
import os
import struct

from ..core.errors import FlexmodalError
import numpy as np

CPU_LATENCY_DEVICE = "/dev/cpu_dma_latency"
_held_requests = []   # open PM QoS file descriptors: the request lasts as long as the process


def declare_realtime(node):
    """Declare ``realtime_priority`` and ``cpu``; FlexmodalError naming the field if out of range."""
    # deferred: Pinocchio, PyYAML, rcl_interfaces (ROS message types, built interfaces), rclpy (through nodes.base)
    from .base import declare_typed

    priority = declare_typed(node, "realtime_priority", 0)
    cpu = declare_typed(node, "cpu", -1)
    if not 0 <= priority <= 99:
        raise FlexmodalError(f"realtime_priority: must be 0 (normal) or 1..99 (SCHED_FIFO), got {priority}")
    if cpu < -1:
        raise FlexmodalError(f"cpu: must be -1 (no pinning) or a CPU index, got {cpu}")
    return priority, cpu


def apply_realtime(logger, priority, cpu):
    """Apply SCHED_FIFO ``priority`` (if > 0) and pinning to ``cpu`` (if >= 0) to all threads of this
    process; log what was applied, or one warning naming what the OS refused. With a priority, the
    objects allocated so far are also frozen out of the cyclic garbage collector (shorter GC
    passes at run time). Returns a one-line description."""
    applied, refused = [], []
    threads = [int(t) for t in os.listdir("/proc/self/task")]
    if priority > 0:
        gc.freeze()
        try:
            for tid in threads:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
            applied.append(f"SCHED_FIFO priority {priority}")
        except (OSError, AttributeError) as exc:
            refused.append(f"realtime_priority {priority} not permitted ({exc})")
        try:
            _held_requests.append(_request_zero_wakeup_latency())
            applied.append("CPU wake-up latency 0 µs")
        except OSError as exc:
            refused.append(f"{CPU_LATENCY_DEVICE} not writable ({exc})")
    if cpu >= 0:
        try:
            for tid in threads:
                os.sched_setaffinity(tid, {cpu})
            applied.append(f"pinned to CPU {cpu}")
        except (OSError, AttributeError) as exc:
            refused.append(f"cpu {cpu} not available ({exc})")
    for reason in refused:
        logger.warning(f"{reason}: running without it")
    text = ", ".join(applied) or "normal scheduling"
    if applied:
        logger.info(f"real-time scheduling: {text} ({len(threads)} threads)")
    return text


def _request_zero_wakeup_latency():
    """Open the PM QoS device and request 0 µs; the returned descriptor must stay open."""
    fd = os.open(CPU_LATENCY_DEVICE, os.O_WRONLY)
    try:
        os.write(fd, struct.pack("i", 0))
    except OSError:
        os.close(fd)
        raise
    return fd


class TimingWindow:
    """The last ``size`` timing samples [µs] in a preallocated ring buffer (appending allocates
    nothing). Keep ``size`` moderate (the nodes keep 20 000 samples): the
    statistics are computed while holding the GIL, i.e. while a 1 kHz loop of the same process waits."""

    def __init__(self, size):
        self._values = np.empty(size)
        self._count = 0
        np.percentile(self._values[:1], [50])   # the first call sets NumPy up lazily: not at run time

    @property
    def capacity(self):
        """Samples kept."""
        return self._values.size

    def append(self, value):
        self._values[self._count % self._values.size] = value
        self._count += 1

    def extend(self, values):
        """Append the samples of ``values`` (1-D array) in order."""
        values = values[-self._values.size:]
        self._values[(self._count + np.arange(values.size)) % self._values.size] = values
        self._count += values.size

    def clear(self):
        self._count = 0

    def __len__(self):
        return min(self._count, self._values.size)

    def values(self):
        """Copy of the samples in the window (cheap: take it under a lock, analyse it outside)."""
        return self._values[:len(self)].copy()

    def distribution(self, prefix, limit, values=None):
        """{prefix_p50, _p90, _p99, _p999, _max: value (None when empty), prefix_samples: count,
        prefix_over: count above ``limit``} of ``values`` (default: the window)."""
        values = self.values() if values is None else values
        keys = [f"{prefix}_{k}" for k in ("p50", "p90", "p99", "p999", "max")]
        quantiles = np.percentile(values, [50, 90, 99, 99.9, 100]).tolist() if values.size else [None] * 5
        return {**dict(zip(keys, quantiles)), f"{prefix}_samples": int(values.size),
                f"{prefix}_over": int((values > limit).sum())}


class CycleTiming:
    """Start time [s] of the last control cycle (-1: none yet), late cycles counted and the
    expected ``period`` [s] (the fields of :class:`~flexmodal_ros.nodes.native_cycle.NativeCycleThread`'s
    state, which its C cycles update, for a node whose cycles all run in Python)."""

    def __init__(self, period):
        self.period, self.last_cycle, self.late_cycles = period, -1.0, 0

"""The controller node's steady 1 kHz cycles in C, with no Python per cycle (``native_cycle``).

A cycle in Python costs several times the same work in C on rcl (code touched after each 1 ms
sleep runs several times slower than hot; figures: benchmarks/bench_controller_ros.py,
docs/controller.md). :class:`NativeCycleThread` therefore serves the
joint states from ``libflexmodal_control_cycle.so``, built at install time (``make setup``,
``colcon build``) by the ``flexmodal_native`` package and found through the ament index: a cycle
whose outcome the fail-safe policy fixes in advance — HOLD, or TRACKING inside the segment already
loaded into the generated law, a sample of the learned byte layout whose stamp advanced and whose
values are within the state bounds, a finite and unsaturated result — runs in C; every other
sample, and the watchdog once a sample is overdue, runs the node's Python cycle with the same
bytes. Which cycles are steady is decided by
:meth:`~flexmodal_ros.control.FailSafeController.steady_cycle` (the policy stays in
flexmodal_ros/control/failsafe.py).

The C side reads the joint states and writes the commands on an rcl context and node of its own
(no rclpy object is handed to C): a hidden node ``_<node>_native_cycle`` in the node's namespace,
on the topics the node resolves (namespace and remappings apply), in the node's ROS domain
(``ROS_DOMAIN_ID`` and ``ROS_AUTOMATIC_DISCOVERY_RANGE`` are read from the environment by rcl as by
rclpy). While it runs, the node's Python cycles publish their commands through the same C writer
(:meth:`NativeCycleThread.publish`): one writer, commands in cycle order.

Consistency: the C side and Python share one mutex (:class:`CycleLock`, the node's ``lock``).
Whenever Python holds it, it first adopts the cycles run in C (last sample, receipt time, cycle
count, compute times: :meth:`~flexmodal_ros.control.FailSafeController.adopt_steady_cycles`), so
it sees the state it would have had running every cycle itself; when it lets go, it arms the C
side again from the controller's state (mode, trajectory segment, bounds, layout). Gains, the
feedforward switch and the hold reference live in the law's input vector, which both sides use.
The state both sides share is ``fm_cycle_t`` in control_cycle.c, mirrored by :class:`_CycleState`;
the library's table of field names, offsets and sizes is checked against the mirror field by field
(:func:`check_layout`) before the library is used.
"""
import ctypes
import re
import weakref
from pathlib import Path

import numpy as np
from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from rclpy.qos import ReliabilityPolicy

from ..core.errors import BuildError
from .polled import _ServingThread

PACKAGE = "flexmodal_native"
LIBRARY = "libflexmodal_control_cycle.so"
BARE_LIBRARY = "libflexmodal_bare_cycle.so"


def native_library_path(name=LIBRARY):
    """Path of ``name`` installed by the flexmodal_native package (found through the ament index,
    i.e. ``$AMENT_PREFIX_PATH``). BuildError saying how to build it when it is not installed."""
    try:
        prefix = Path(get_package_prefix(PACKAGE))
    except (PackageNotFoundError, ValueError):
        raise BuildError(f"the {PACKAGE} package is not installed (not in the ament index of AMENT_PREFIX_PATH): "
                         f"build it with `make setup` (then `. scripts/env.sh`) or `colcon build`") from None
    path = prefix / "lib" / name
    if not path.is_file():
        raise BuildError(f"{path} is missing: rebuild the {PACKAGE} package (`make setup` or `colcon build`)")
    return path


_P, _I, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double


class _CycleState(ctypes.Structure):
    """Mirror of control_cycle.c's fm_cycle_t (field meanings there; checked by :func:`check_layout`)."""
    _fields_ = [("armed", _I), ("n", _I), ("size", _I), ("regions", _I * 6), ("pattern", _P), ("stamp_at", _I),
                ("values_at", _I), ("gather", _P), ("motor_scale", _P), ("lower", _P), ("upper", _P),
                ("previous_t", _D), ("tracking", _I), ("hold_until", _D), ("t0", _D), ("segment_begin", _D),
                ("segment_end", _D), ("law", _P), ("arg", _P), ("res", _P), ("iw", _P), ("w", _P),
                ("u_tracking", _I), ("u_s", _I), ("u_T", _I), ("u_q_m", _I), ("u_qd_m", _I), ("y_tau", _I),
                ("y_n_saturated", _I), ("y_n_nonfinite", _I), ("command", _P), ("command_length", _I),
                ("command_data_at", _I), ("effort_scale", _P), ("idle_period", _D),
                ("state_timeout", _D), ("advanced", _D), ("has_sample", _I), ("fast_cycles", _I),
                ("native_total", _I), ("last_values", _P), ("last_t", _D), ("last_received", _D),
                ("compute_us", _P), ("compute_capacity", _I), ("compute_head", _I), ("period", _D),
                ("last_cycle", _D), ("late_cycles", _I), ("running", _I), ("mutex", _P),
                ("error", ctypes.c_char * 256)]


class _Field(ctypes.Structure):
    """control_cycle.c's fm_field_t: one row of the library's layout table."""
    _fields_ = [("name", ctypes.c_char_p), ("offset", _I), ("size", _I)]


def check_layout(structure, table, struct_size):
    """BuildError naming the first difference between the ctypes ``structure`` and the C layout
    ``table`` [(name, offset, size)] of a struct of ``struct_size`` bytes: a field missing on
    either side, in another order, at another offset or of another size, or another total size."""
    mirror = [(name, getattr(structure, name).offset, getattr(structure, name).size)
              for name, *_ in structure._fields_]
    where = f"{LIBRARY} and {__name__}.{structure.__name__}"
    for k, (c, py) in enumerate(zip(table, mirror)):
        if c[0] != py[0]:
            raise BuildError(f"{where} disagree on field {k}: {c[0]} in C, {py[0]} in Python")
        if c[1:] != py[1:]:
            raise BuildError(f"{where} disagree on field {c[0]}: offset {c[1]} / size {c[2]} in C, "
                             f"offset {py[1]} / size {py[2]} in Python")
    if len(table) != len(mirror):
        extra, side = (table[len(mirror):], "C") if len(table) > len(mirror) else (mirror[len(table):], "Python")
        raise BuildError(f"{where} disagree: field {extra[0][0]} only in {side}")
    if struct_size != ctypes.sizeof(structure):
        raise BuildError(f"{where} disagree on the struct's size: {struct_size} in C, "
                         f"{ctypes.sizeof(structure)} in Python")


def layout_table(lib):
    """The library's fm_state_fields() table as [(name, offset, size)]."""
    lib.fm_state_fields.restype = ctypes.POINTER(_Field)
    rows, table = lib.fm_state_fields(), []
    while rows[len(table)].name is not None:
        row = rows[len(table)]
        table.append((row.name.decode(), row.offset, row.size))
    return table


_SAMPLE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint8), ctypes.c_int64)
_IDLE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int)


def _library():
    """The control-cycle library loaded and checked (BuildError when it is not installed, cannot
    be loaded or does not match _CycleState)."""
    path = native_library_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise BuildError(f"cannot load {path} ({exc})") from None
    lib.fm_state_size.restype = _I
    check_layout(_CycleState, layout_table(lib), lib.fm_state_size())
    lib.fm_mutex_new.restype = _P
    for name in ("fm_mutex_free", "fm_lock", "fm_unlock", "fm_wake", "fm_close"):
        getattr(lib, name).argtypes = [_P]
    lib.fm_open.restype = _P
    lib.fm_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _I, _I, ctypes.c_char_p, _I, _I,
                            ctypes.c_char_p, _I]
    lib.fm_publish.argtypes = [_P, ctypes.c_char_p, _I]
    lib.fm_publish.restype = _I
    lib.fm_matched.argtypes = [_P, ctypes.POINTER(_I), ctypes.POINTER(_I)]
    lib.fm_matched.restype = _I
    lib.fm_error.argtypes = [_P]
    lib.fm_error.restype = ctypes.c_char_p
    lib.fm_serve.argtypes = [ctypes.POINTER(_CycleState), _P, _SAMPLE_CALLBACK, _IDLE_CALLBACK]
    lib.fm_serve.restype = _I
    return lib


def _side(qos):
    """(history depth, best effort) of a QoSProfile for the C reader or writer."""
    return qos.depth, int(qos.reliability == ReliabilityPolicy.BEST_EFFORT)


class CycleLock:
    """The mutex shared with the C cycles, as a context manager for the node's Python callbacks:
    entering adopts the cycles run in C, leaving arms the C side from the controller's state."""

    def __init__(self, cycle):
        self._cycle, self._lib, self._mutex = cycle, cycle.lib, cycle.state.mutex

    def __enter__(self):
        self._lib.fm_lock(self._mutex)          # ctypes lets the GIL go while it blocks
        try:
            self._cycle.adopt()
        except BaseException:
            self._lib.fm_unlock(self._mutex)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self._cycle.arm()
        finally:
            self._lib.fm_unlock(self._mutex)


class NativeCycleThread(_ServingThread):
    """Joint states on ``topic`` (sensor_msgs/JointState, ``qos``) served by the C cycles on a
    thread of its own; commands written on ``command_topic`` (std_msgs/Float64MultiArray,
    ``command_qos``) by the C side, for both paths (:meth:`publish`). Topic names are resolved by
    ``node``.

    ``ctrl``: the node's FailSafeController (compiled law); ``reader``: its JointStateReader;
    ``writer``: its TorqueCommandWriter; ``compute_us``: the node's TimingWindow (compute times of
    the C cycles are added when Python adopts them); ``on_message(serialized)`` / ``on_idle()``: the
    node's Python cycle and watchdog, called from the thread with the lock held for every sample and
    watchdog tick that is not steady; ``idle_period`` [s] between watchdog checks; ``period`` [s]:
    the expected sample period (late cycles). :attr:`lock` (a :class:`CycleLock`) is the lock for
    the node's other callbacks and :attr:`timing` holds last_cycle [s, -1 = none], late_cycles and
    period for both paths. BuildError when the C side cannot run (law not compiled, library not
    installed or not matching, reader or writer not created)."""

    def __init__(self, node, topic, qos, command_topic, command_qos, ctrl, reader, writer, compute_us, on_message,
                 on_idle, idle_period, period):
        if ctrl.law.compiled is None:
            raise BuildError("the control law is not compiled C")
        self.lib = _library()
        self.topic, self.command_topic = node.resolve_topic_name(topic), node.resolve_topic_name(command_topic)
        self.ctrl, self.reader, self.compute_us = ctrl, reader, compute_us
        self._on_message, self._on_idle = on_message, on_idle
        self._callback_error = None
        n = ctrl.model.n
        self.state = st = _CycleState()
        st.mutex = self.lib.fm_mutex_new()
        if not st.mutex:
            raise BuildError("cannot create the cycle mutex")
        weakref.finalize(self, self.lib.fm_mutex_free, st.mutex)   # after the lock's last user
        self.lock, self.timing = CycleLock(self), st
        st.n, st.idle_period, st.period, st.last_cycle, st.running = n, idle_period, period, -1.0, 1
        self._last_values = np.zeros(4 * n)
        self._compute_ring = np.zeros(compute_us.capacity)
        st.last_values, st.compute_us = self._last_values.ctypes.data, self._compute_ring.ctypes.data
        st.compute_capacity = self._compute_ring.size
        self._bind_law(ctrl.law)
        self._command, data_at, scale = writer.native_buffer()
        self._effort_scale = None if scale is None else np.ascontiguousarray(scale, float)
        st.command = ctypes.addressof(ctypes.c_char.from_buffer(self._command))
        st.command_length, st.command_data_at = len(self._command), data_at
        st.effort_scale = None if scale is None else self._effort_scale.ctypes.data
        self._layout = self._bounds = None
        self._callbacks = (_SAMPLE_CALLBACK(self._sample_callback), _IDLE_CALLBACK(self._idle_callback))
        name = re.sub(r"[^A-Za-z0-9_]", "_", f"_{node.get_name()}_native_cycle")
        error = ctypes.create_string_buffer(256)
        self._endpoint = self.lib.fm_open(name.encode(), node.get_namespace().encode(), self.topic.encode(),
                                          *_side(qos), self.command_topic.encode(), *_side(command_qos),
                                          error, len(error))
        if not self._endpoint:
            raise BuildError(f"cannot create the C reader and writer ({error.value.decode(errors='replace')})")
        self._close = weakref.finalize(self, self.lib.fm_close, self._endpoint)
        super().__init__(node, self.topic, self.lock)
        self.arm()

    def _bind_law(self, law):
        st, (fn, arg, res, iw, w) = self.state, law.compiled.pointers()
        st.law, st.arg, st.res, st.iw, st.w = fn, arg, res, iw, w
        u0, y0 = law.u.ctypes.data, law.y.ctypes.data
        for field, view, base in (("u_tracking", law.tracking, u0), ("u_s", law.s, u0), ("u_T", law.T, u0),
                                  ("u_q_m", law.q_m, u0), ("u_qd_m", law.qd_m, u0), ("y_tau", law.tau, y0),
                                  ("y_n_saturated", law.n_saturated, y0), ("y_n_nonfinite", law.n_nonfinite, y0)):
            setattr(st, field, (view.ctypes.data - base) // 8)

    @property
    def native_cycles(self):
        """Cycles run in C since start."""
        return self.state.native_total

    def matched(self):
        """(joint-state publishers matched by the C reader, command subscribers matched by the C
        writer): the C side is a participant of its own, so a publisher that sees this reader
        (``get_subscription_count``) may still send a first sample before the reader matched it."""
        publishers, subscribers = _I(), _I()
        if self.lib.fm_matched(self._endpoint, ctypes.byref(publishers), ctypes.byref(subscribers)) != 0:
            raise RuntimeError(f"{self.topic}: {self.lib.fm_error(self._endpoint).decode(errors='replace')}")
        return publishers.value, subscribers.value

    def publish(self, serialized):
        """Publish a serialized Float64MultiArray command through the C writer (the node's Python
        cycles, holding the lock); RuntimeError naming the topic if rmw refuses it."""
        if not self._close.alive:
            raise RuntimeError(f"{self.command_topic}: the native cycle is stopped")
        if self.lib.fm_publish(self._endpoint, serialized, len(serialized)) != 0:
            raise RuntimeError(f"{self.command_topic}: publish failed "
                               f"({self.lib.fm_error(self._endpoint).decode(errors='replace')})")

    def adopt(self):
        """Take over the cycles run in C since the last call (holding the lock)."""
        st = self.state
        count = st.fast_cycles
        if not count:
            return
        n = self.ctrl.model.n
        values = self._last_values.copy()
        self.ctrl.adopt_steady_cycles(st.last_t, values[:n], values[n:2 * n], values[2 * n:3 * n], values[3 * n:],
                                      st.last_received, count)
        ring, head = self._compute_ring, st.compute_head
        recent = np.arange(head - min(count, ring.size), head) % ring.size
        self.compute_us.extend(ring[recent])
        st.fast_cycles = 0

    def arm(self):
        """Set the C side from the controller's state (holding the lock)."""
        st, ctrl = self.state, self.ctrl
        sample, advanced = ctrl.last_sample, ctrl.advanced
        st.has_sample = sample is not None
        st.advanced = advanced if advanced is not None else 0.0
        st.state_timeout = ctrl.state_timeout
        steady, layout = ctrl.steady_cycle(), self.reader.native_layout()
        st.armed = 0
        if steady is None or layout is None or self.reader.bounds is None:
            return
        if layout is not self._layout:
            self._set_layout(layout)
        if self.reader.bounds is not self._bounds:
            self._bounds = self.reader.bounds
            self._lower, self._upper = (np.ascontiguousarray(b, dtype=float) for b in self._bounds)
            st.lower, st.upper = self._lower.ctypes.data, self._upper.ctypes.data
        st.previous_t, st.tracking, st.hold_until = steady.previous_t, steady.tracking, steady.hold_until
        st.t0, st.segment_begin, st.segment_end = steady.t0, steady.segment_begin, steady.segment_end
        st.armed = 1

    def _set_layout(self, layout):
        st = self.state
        self._layout = layout
        self._pattern = np.frombuffer(layout.pattern, dtype=np.uint8).copy()
        self._gather = np.ascontiguousarray(layout.gather, dtype=np.int64)
        self._motor_scale = None if layout.motor_scale is None else np.ascontiguousarray(layout.motor_scale, float)
        st.size, st.stamp_at, st.values_at = layout.size, layout.stamp_at, layout.values_at
        for k, value in enumerate(np.ravel(layout.regions)):
            st.regions[k] = int(value)
        st.pattern, st.gather = self._pattern.ctypes.data, self._gather.ctypes.data
        st.motor_scale = None if self._motor_scale is None else self._motor_scale.ctypes.data

    def _sample_callback(self, buffer, length):
        return self._python_cycle(lambda: self._on_message(ctypes.string_at(buffer, length)))

    def _idle_callback(self):
        return self._python_cycle(self._on_idle)

    def _python_cycle(self, run):
        """The node's Python cycle or watchdog, called by fm_serve holding the mutex; 1 = stop."""
        try:
            self.adopt()
            run()
            self.arm()
            return 0
        except BaseException as exc:      # noqa: BLE001 - raised again by _serve in the thread
            self._callback_error = exc
            return 1

    def _wake(self):
        self.state.running = 0
        self.lib.fm_wake(self._endpoint)

    RELEASED_BY_THREAD = False    # the endpoint is closed by stop() once the thread has ended, else at collection

    def _release(self):
        if not self._thread.is_alive():       # else at collection (weakref.finalize)
            self._close()

    def _serve(self):
        code = self.lib.fm_serve(ctypes.byref(self.state), self._endpoint, *self._callbacks)
        if code == 1:
            raise self._callback_error
        if code < 0:
            raise RuntimeError(f"{self.topic}: native control cycle stopped: "
                               f"{self.state.error.decode(errors='replace')}")

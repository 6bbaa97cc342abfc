"""The controller node's steady 1 kHz cycles in C, with no Python per cycle (``native_cycle``).

On this project's machine a cycle in Python costs ~80 µs median and ~150 µs at p99 (code touched
after each 1 ms sleep runs several times slower than hot), against ~26 / ~60 µs for the same work
in C on rcl (benchmarks/bench_controller_ros.py). :class:`NativeCycleThread` therefore serves the
``/joint_states`` subscription from ``control_cycle.c`` (compiled once per machine against the
installed rcl, :func:`rcl_build_flags`): a cycle whose outcome the fail-safe policy fixes in
advance — HOLD, or TRACKING inside the segment already loaded into the generated law, a sample of
the learned byte layout whose stamp advanced and whose values are within the state bounds, a
finite and unsaturated result — runs in C; every other sample, and the watchdog once a sample is
overdue, runs the node's Python cycle with the same bytes. Which cycles are steady is decided by
:meth:`~flexmodal_ros.control.FailSafeController.steady_cycle` (the policy stays in flexmodal_ros/control/failsafe.py).

Consistency: the C side and Python share one mutex (:class:`CycleLock`, the node's ``lock``).
Whenever Python holds it, it first adopts the cycles run in C (last sample, receipt time, cycle
count, compute times: :meth:`~flexmodal_ros.control.FailSafeController.adopt_steady_cycles`), so
it sees the state it would have had running every cycle itself; when it lets go, it arms the C
side again from the controller's state (mode, trajectory segment, bounds, layout). Gains, the
feedforward switch and the hold reference live in the law's input vector, which both sides use.
"""
import ctypes
import os
import sys
import weakref
from pathlib import Path

import numpy as np

from ..core.ccompile import kernel_library
from ..core.errors import BuildError
from .polled import PolledSubscription, _ServingThread

SOURCE = Path(__file__).with_name("control_cycle.c")
# ROS 2 packages whose headers control_cycle.c includes (directly or through rcl/rcl.h)
RCL_HEADER_PACKAGES = ("rcl", "rcutils", "rmw", "rosidl_runtime_c", "rosidl_typesupport_interface",
                       "rcl_yaml_param_parser", "type_description_interfaces", "rosidl_dynamic_typesupport",
                       "service_msgs", "builtin_interfaces", "rcl_interfaces")


def rcl_build_flags():
    """Compiler flags for a shared library that calls rcl: headers and libraries of the first
    prefix that has them (this Python's prefix: the ROS 2 wheels; then $AMENT_PREFIX_PATH: an
    installed ROS 2). BuildError when none has rcl's headers."""
    prefixes = [sys.prefix, *filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep))]
    for prefix in map(Path, prefixes):
        if (prefix / "include" / "rcl" / "rcl" / "rcl.h").is_file() and (prefix / "lib" / "librcl.so").is_file():
            lib = prefix / "lib"
            return ("-O2", "-fPIC", "-shared", *(f"-I{prefix / 'include' / p}" for p in RCL_HEADER_PACKAGES),
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-Wl,--no-as-needed", "-lrcl", "-lrmw", "-lrcutils", "-lpthread")
    raise BuildError(f"rcl headers not found (include/rcl/rcl/rcl.h under {', '.join(prefixes)})")


_P, _I, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double


class _CycleState(ctypes.Structure):
    """Mirror of control_cycle.c's fm_cycle_t (field meanings there)."""
    _fields_ = [("armed", _I), ("n", _I), ("size", _I), ("regions", _I * 6), ("pattern", _P), ("stamp_at", _I),
                ("values_at", _I), ("gather", _P), ("motor_scale", _P), ("lower", _P), ("upper", _P),
                ("previous_t", _D), ("tracking", _I), ("hold_until", _D), ("t0", _D), ("segment_begin", _D),
                ("segment_end", _D), ("law", _P), ("arg", _P), ("res", _P), ("iw", _P), ("w", _P),
                ("u_tracking", _I), ("u_s", _I), ("u_T", _I), ("u_q_m", _I), ("u_qd_m", _I), ("y_tau", _I),
                ("y_n_saturated", _I), ("y_n_nonfinite", _I), ("command", _P), ("command_length", _I),
                ("command_data_at", _I), ("effort_scale", _P), ("publisher", _P), ("idle_period", _D),
                ("state_timeout", _D), ("advanced", _D), ("has_sample", _I), ("fast_cycles", _I),
                ("native_total", _I), ("last_values", _P), ("last_t", _D), ("last_received", _D),
                ("compute_us", _P), ("compute_capacity", _I), ("compute_head", _I), ("period", _D),
                ("last_cycle", _D), ("late_cycles", _I), ("running", _I), ("mutex", _P),
                ("error", ctypes.c_char * 256)]


_SAMPLE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint8), ctypes.c_int64)
_IDLE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int)


def _library():
    """control_cycle.c loaded (BuildError when it cannot be built or does not match _CycleState)."""
    try:
        lib = ctypes.CDLL(str(kernel_library(SOURCE, rcl_build_flags())))
    except OSError as exc:
        raise BuildError(f"cannot load the native control cycle ({exc})") from None
    lib.fm_state_size.restype = _I
    if lib.fm_state_size() != ctypes.sizeof(_CycleState):
        raise BuildError("control_cycle.c and native_cycle.py disagree on the cycle state's layout")
    lib.fm_mutex_new.restype = _P
    for name in ("fm_mutex_free", "fm_lock", "fm_unlock"):
        getattr(lib, name).argtypes = [_P]
    lib.fm_serve.argtypes = [ctypes.POINTER(_CycleState), _P, _P, _P, _SAMPLE_CALLBACK, _IDLE_CALLBACK]
    lib.fm_serve.restype = _I
    return lib


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
    """``topic`` (sensor_msgs/JointState, ``qos``) served by control_cycle.c on a thread of its own.

    ``ctrl``: the node's FailSafeController (compiled law); ``reader``: its JointStateReader;
    ``writer``: its TorqueCommandWriter; ``publisher``: the command publisher; ``compute_us``: the
    node's TimingWindow (compute times of the C cycles are added when Python adopts them);
    ``on_message(serialized)`` / ``on_idle()``: the node's Python cycle and watchdog, called from
    the thread with the lock held for every sample and watchdog tick that is not steady;
    ``idle_period`` [s] between watchdog checks; ``period`` [s]: the expected sample period (late
    cycles). :attr:`lock` (a :class:`CycleLock`) is the lock for the node's other callbacks and
    :attr:`timing` holds last_cycle [s, -1 = none], late_cycles and period for both paths.
    BuildError when the C side cannot be built (no compiler, no rcl headers)."""

    def __init__(self, node, topic, qos, ctrl, reader, writer, publisher, compute_us, on_message, on_idle,
                 idle_period, period):
        if ctrl.law.compiled is None:
            raise BuildError("the control law is not compiled C")
        self.lib = _library()
        from sensor_msgs.msg import JointState

        self.subscription = PolledSubscription(node, JointState, topic, qos, raw=True)
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
        st.publisher = publisher.handle.pointer
        self._publisher = publisher                 # kept alive while C publishes on it
        self._layout = self._bounds = None
        self._callbacks = (_SAMPLE_CALLBACK(self._sample_callback), _IDLE_CALLBACK(self._idle_callback))
        self._context_pointer = node.context.handle.pointer
        super().__init__(node, self.subscription.topic, self.lock)
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
        self.subscription.wake()

    def _release(self):
        self.subscription.destroy()

    def _serve(self):
        code = self.lib.fm_serve(ctypes.byref(self.state), self.subscription.handle.pointer,
                                 self.subscription.wake_condition.pointer, self._context_pointer, *self._callbacks)
        if code == 1:
            raise self._callback_error
        if code < 0:
            raise RuntimeError(f"{self.subscription.topic}: native control cycle stopped: "
                               f"{self.state.error.decode(errors='replace')}")

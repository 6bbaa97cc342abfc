"""What every flexmodal node shares: typed parameters, the robot-model parameters, the clock for
timing, log throttling, the output directory of files a service writes (:func:`confined_path`),
the entry point (:func:`run_node`). The callback guard every node class derives from is
:class:`~flexmodal_ros.nodes.guard.GuardedNode` (re-exported here).
"""
import os
import re
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import rclpy
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter

from ..core.errors import FlexmodalError
from ..constrained.closed_chain import resolve_any_model, resolve_closed_chain
from ..robot.registry import resolve_model
from ..core.validation import shown
from . import stop_request
from .parameter_overrides import unknown_parameters

DOUBLE_ARRAY = Parameter.Type.DOUBLE_ARRAY
_KIND_NAMES = {bool: "a bool", int: "an integer", float: "a number (double)", str: "a string",
               DOUBLE_ARRAY: "a list of numbers"}


def declare_typed(node, name, default, read_only=True, description=""):
    """Declare parameter ``name`` whose type is that of ``default`` (bool, int, float, str, a list of
    floats, or ``DOUBLE_ARRAY`` for a list of numbers without default) and return its value in
    that type.

    The parameter is declared with dynamic typing, so that an override of another type does not
    raise rclpy's InvalidParameterTypeException: integers are accepted for doubles
    (``publish_rate_hz:=10``), integral doubles for integers, integers in number lists; anything
    else raises a FlexmodalError naming the parameter (the node then exits with one line). Read-only
    parameters are refused by rclpy at run time; settable ones are checked by
    :class:`SettableParameters` with the same :func:`typed_value`."""
    kind = DOUBLE_ARRAY if default is DOUBLE_ARRAY or isinstance(default, list) else type(default)
    initial = None if default is DOUBLE_ARRAY else default
    stored = node.declare_parameter(name, initial,
                                    ParameterDescriptor(dynamic_typing=True, description=description)).value
    given = initial if stored is None else stored                   # `name:=`: not given
    value = typed_value(name, given, kind)
    if value is not None and (type(stored) is not type(value) or kind is DOUBLE_ARRAY):
        node.set_parameters([Parameter(name, value=value)])       # stored as converted (ros2 param get)
    if read_only:
        node.set_descriptor(name, ParameterDescriptor(dynamic_typing=True, read_only=True, description=description))
    return value


def typed_value(name, value, kind):
    """``value`` converted to ``kind`` (see :func:`declare_typed`); FlexmodalError naming ``name``."""
    def fail():
        got = "nothing" if value is None else f"{type(value).__name__} {shown(value)}"
        return FlexmodalError(f"parameter {name}: expected {_KIND_NAMES[kind]}, got {got}")

    if kind is DOUBLE_ARRAY:
        if value is None:
            return None
        items = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else None
        if items is None or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in items):
            raise fail()
        return [float(v) for v in items]
    if isinstance(value, bool) != (kind is bool):
        raise fail()
    if kind is float and isinstance(value, (int, float)):
        return float(value)
    if kind is int and isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if not isinstance(value, kind):
        raise fail()
    return value


class SettableParameters:
    """Parameters that may change at run time (``ros2 param set``): each declared with
    :func:`declare_typed` (not read-only) and an ``apply(values)`` callback that validates the new
    values (dict name → typed value, the unchanged ones included) and takes them over, or raises
    FlexmodalError naming the problem: the set is then refused with that reason and nothing
    changes (``apply`` checks everything before it changes anything). It runs in the node's
    executor, i.e. between the node's other callbacks. Register it after the declarations.

    Per-joint lists (``declare(..., per_joint=True)``, declared with their effective values so
    that ``ros2 param get/dump`` show them): a single number sets every joint (``ros2 param set
    /node kp 3000.0`` stores [3000.0, ...]) and an empty list the declared default again. A list
    may :meth:`follow` others (e.g. acceleration limits derived from the velocity limits)."""

    def __init__(self, node):
        self.node = node
        self.values, self._kinds, self._apply = {}, {}, None
        self._per_joint = {}                   # name → declared default (list of floats)
        self._follow, self._explicit, self._generated = {}, set(), set()

    def declare(self, name, default, description="", per_joint=False):
        self._kinds[name] = DOUBLE_ARRAY if default is DOUBLE_ARRAY or isinstance(default, list) else type(default)
        self.values[name] = declare_typed(self.node, name, default, read_only=False, description=description)
        if per_joint:
            self._per_joint[name] = [float(v) for v in default]
            if not self.values[name]:          # `name:=[]` at start: the default
                self.values[name] = self._per_joint[name]
                self.node.set_parameters([Parameter(name, value=self.values[name])])
        return self.values[name]

    def follow(self, name, sources, compute):
        """Per-joint list ``name`` takes ``compute(values)`` whenever one of ``sources`` changes,
        until it is set itself (setting it to an empty list makes it follow again)."""
        self._follow[name] = (tuple(sources), compute)
        if self.values[name] != compute(self.values):
            self._explicit.add(name)

    def on_change(self, apply):
        """Register ``apply(values)`` (called with every settable value, after the type checks)."""
        if self._apply is None:
            if hasattr(self.node, "add_pre_set_parameters_callback"):
                self.node.add_pre_set_parameters_callback(self._pre_set)
            self.node.add_on_set_parameters_callback(self._on_set)
        self._apply = apply

    def _per_joint_value(self, name, value):
        """A per-joint value as set: a number → every joint; an empty list or none → None (default)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return [float(value)] * len(self._per_joint[name])
        if value is None or (isinstance(value, (list, tuple)) or hasattr(value, "tolist")) and not len(value):
            return None
        return value

    def _pre_set(self, params):
        """Per-joint numbers and empty lists expanded; followers added or recomputed."""
        out, given, self._generated = [], {}, set()
        for p in params:
            if p.name in self._per_joint:
                value = self._per_joint_value(p.name, p.value)
                if value is None and p.name not in self._follow:
                    value = list(self._per_joint[p.name])
                if value is not None:
                    p = Parameter(p.name, value=value)
                given[p.name] = value
            out.append(p)
        values = dict(self.values)
        for name, value in given.items():
            if value is not None:
                values[name] = value
        for p in params:
            if p.name in self._kinds and p.name not in self._per_joint:
                values[p.name] = p.value
        changed = {p.name for p in params}
        for name, (sources, compute) in self._follow.items():
            reset = name in given and given[name] is None
            if reset or (name not in changed and name not in self._explicit and changed & set(sources)):
                try:
                    value = [float(v) for v in compute(values)]
                except (TypeError, ValueError):
                    continue                   # a bad source: refused by the on-set check
                out = [q for q in out if q.name != name] + [Parameter(name, value=value)]
                self._generated.add(name)
        return out

    def _on_set(self, params):
        mine = [p for p in params if p.name in self._kinds]
        if not mine:
            return SetParametersResult(successful=True)
        try:
            values = dict(self.values)
            for p in mine:
                value = p.value
                if p.name in self._per_joint:          # also for rclpy without pre-set callbacks
                    value = self._per_joint_value(p.name, value) or list(self._per_joint[p.name])
                values[p.name] = typed_value(p.name, value, self._kinds[p.name])
            self._apply(values)
        except FlexmodalError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.values = values
        for p in mine:
            if p.name in self._follow:
                (self._explicit.discard if p.name in self._generated else self._explicit.add)(p.name)
        return SetParametersResult(successful=True)


def declare_robot_model(node, closed_chain=False, constrained=False):
    """Declare ``robot`` / ``urdf_path`` / ``params_path`` and return the robot model they name.

    ``closed_chain=True`` also accepts robots with loop closures (returned as
    :class:`~flexmodal_ros.constrained.closed_chain.ClosedChainRobot`); ``constrained=True`` returns
    every robot that way."""
    robot, urdf, params = (declare_typed(node, name, "")
                           for name in ("robot", "urdf_path", "params_path"))
    if not robot and not params:
        raise FlexmodalError("parameters: set 'robot' or 'params_path' (and optionally 'urdf_path')")
    if constrained:
        return resolve_closed_chain(robot or None, urdf or None, params or None)
    if closed_chain:
        return resolve_any_model(robot or None, urdf or None, params or None)
    return resolve_model(robot or None, urdf or None, params or None)


def timing_clock(node):
    """The clock for a node's timing (watchdogs, stale-state checks): the ROS clock when the node
    runs with ``use_sim_time`` (it then stops and runs with the simulation: Gazebo, the simulators'
    /clock), the steady clock otherwise (a real robot). Read it with :func:`seconds`."""
    if node.get_parameter("use_sim_time").value:
        return node.get_clock()
    return Clock(clock_type=ClockType.STEADY_TIME)


def seconds(clock):
    """Current time of ``clock`` [s]. The steady clock is read directly (``time.monotonic``:
    CLOCK_MONOTONIC, the clock rcl's steady time reads on Linux), without building an rclpy Time."""
    if clock.clock_type is ClockType.STEADY_TIME:
        return time.monotonic()
    return clock.now().nanoseconds * 1e-9


class Throttle:
    """True at most once per ``period`` [s] of steady time — cheap enough for 1 kHz callbacks
    (rclpy's ``throttle_duration_sec`` inspects the call stack on every call)."""

    def __init__(self, period):
        self.period = period
        self._last = -float("inf")

    def __call__(self):
        now = time.monotonic()
        if now - self._last < self.period:
            return False
        self._last = now
        return True


_NUMBERS = re.compile(r"[-+]?\d[\d.]*(?:e[-+]?\d+)?")


class MessageThrottle:
    """Status messages of one kind (the same text once its numbers are masked) pass at most once
    per ``period`` [s]; the next one that passes tells how many were suppressed. ``__call__``
    returns the text to send, or None."""

    def __init__(self, period, kinds=256):
        self.period, self.kinds = period, kinds
        self._last = {}                 # kind → [time sent, suppressed since]

    def __call__(self, text):
        kind = _NUMBERS.sub("#", text)
        now = time.monotonic()
        entry = self._last.get(kind)
        if entry is not None and now - entry[0] < self.period:
            entry[1] += 1
            return None
        if entry is None and len(self._last) >= self.kinds:        # bounded memory
            self._last.clear()
        suppressed = entry[1] if entry else 0
        self._last[kind] = [now, 0]
        return text + (f" ({suppressed} similar messages suppressed in the last {now - entry[0]:.1f} s)"
                       if suppressed else "")


# --- files written for a request ----------------------------------------------------------------

NAME_MAX_BYTES = 255        # longest file name component (Linux NAME_MAX)
PATH_MAX_BYTES = 4000       # longest path accepted (Linux PATH_MAX is 4096)


def default_output_root(node):
    """``<ROS log directory>/flexmodal/<node name>``: rclpy's logging directory ($ROS_LOG_DIR, else
    $ROS_HOME/log, else ~/.ros/log)."""
    try:
        log_dir = Path(rclpy.logging.get_logging_directory())
    except (AttributeError, RuntimeError):     # older rclpy: the same rule by hand
        home = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
        log_dir = Path(os.environ.get("ROS_LOG_DIR") or os.path.join(home, "log"))
    return log_dir / "flexmodal" / node.get_name()


def declare_output_root(node, default=None):
    """Declare the read-only parameters ``output_dir`` (the directory every file a service of the
    node writes must stay in; empty = :func:`default_output_root`) and ``overwrite_outputs``
    (false: a request naming an existing file is refused) and return (root, overwrite). The
    directory is created (FlexmodalError naming the parameter if it cannot be)."""
    root = declare_typed(node, "output_dir", "", description="directory the node's services write files "
                         "into (requests cannot leave it); empty = <ROS log dir>/flexmodal/<node>")
    overwrite = declare_typed(node, "overwrite_outputs", False, description="requests may replace existing files")
    root = Path(root).expanduser() if root else (default or default_output_root(node))
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FlexmodalError(f"parameter output_dir: cannot create {str(root)!r} ({exc.strerror})") from None
    return Path(os.path.realpath(root)), overwrite


def confined_path(root, requested, field, overwrite=False, suffix=""):
    """The file or directory ``requested`` by a request (relative to ``root``, or absolute inside
    it) resolved with every symbolic link followed, with ``suffix`` appended when it lacks it (a
    writer that adds one, e.g. ``.npz``). FlexmodalError naming ``field`` (as the request spells
    it) when the name is not a valid path (NUL byte, a component over 255 bytes, over 4000 bytes,
    not UTF-8), resolves outside ``root`` (``..``, absolute paths elsewhere, symbolic links out),
    or names an existing entry while ``overwrite`` is false."""
    if not isinstance(requested, str) or not requested.strip() or "\x00" in requested:
        raise FlexmodalError(f"{field}: expected a file name, got {shown(requested)}")
    try:
        raw = requested.encode("utf-8")
    except UnicodeEncodeError:
        raise FlexmodalError(f"{field}: not valid UTF-8: {shown(requested)}") from None
    if len(raw) > PATH_MAX_BYTES or any(len(part.encode()) > NAME_MAX_BYTES for part in Path(requested).parts):
        raise FlexmodalError(f"{field}: the path or one of its names is too long (names <= {NAME_MAX_BYTES} "
                             f"bytes, paths <= {PATH_MAX_BYTES} bytes)")
    root = Path(os.path.realpath(root))
    path = Path(requested).expanduser()
    if suffix and path.suffix != suffix:
        path = path.with_name(path.name + suffix)
    resolved = Path(os.path.realpath(root / path))
    if resolved != root and root not in resolved.parents:
        raise FlexmodalError(f"{field}: {shown(requested)} resolves to {str(resolved)!r}, outside the node's output "
                             f"directory {str(root)!r} (parameter output_dir); give a path inside it")
    if resolved == root:
        raise FlexmodalError(f"{field}: {shown(requested)} is the output directory itself; name a file or folder in it")
    if os.path.lexists(resolved) and not overwrite:
        raise FlexmodalError(f"{field}: {str(resolved)!r} already exists (the node's parameter overwrite_outputs "
                             "is false: files are never replaced)")
    return resolved


# The fault policy's constants (nodes/guard.py): logging and what counts as a request error.
FAULT_LOG_PERIOD = 10.0     # a fault of one kind is logged at most once per this many seconds
FAULT_LOG_BURST = 5         # and at most this many fault lines per second over all kinds
REQUEST_ERRORS = (FlexmodalError, ValueError, np.linalg.LinAlgError, MemoryError)


def fault_text(exc):
    """One line for a failed callback: the message of a request error (bad input the user can
    fix), else "internal error (<type>: <text> at <file>:<line>)"."""
    if isinstance(exc, MemoryError):
        return "out of memory: the request is too large for this machine"
    if isinstance(exc, REQUEST_ERRORS):
        return str(exc)
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"internal error ({type(exc).__name__}: {str(exc)[:500]}{where}); the node keeps serving"


SHUTDOWN_CHECK_S = 0.2     # run_node: longest executor wait between two checks of the context [s]


def run_node(node_factory, executable, args=None, make_executor=SingleThreadedExecutor):
    """Console-script body: init rclpy, build the node, spin until Ctrl-C or shutdown.

    A configuration error while building the node prints one line and returns exit code 2; so does
    a parameter given to the node that it does not have (:mod:`.parameter_overrides`).
    Ctrl-C (SIGINT) or SIGTERM at any point after ``rclpy.init``, also while the node is being
    built, ends the node cleanly with exit code 0 (before it: :func:`console_entry`). Under ``ros2
    launch`` one Ctrl-C reaches a node twice (the terminal signals the whole process group, then
    launch signals each node), so SIGINT and SIGTERM are ignored once the clean-up has begun: a
    second signal cannot interrupt it with a KeyboardInterrupt traceback (launch still escalates
    to SIGKILL if a node hangs). A callback interrupted by the shutdown (its publish fails once the
    context is gone) ends the node the same way. Any other exception that reaches the executor (a
    callback outside :class:`GuardedNode`'s guard, a serving thread's failure) is logged and the
    node keeps spinning: no request or message can end it. The executor waits at most
    SHUTDOWN_CHECK_S between checks of the context: with one unbounded wait, about one SIGINT or
    SIGTERM in 15 (measured on the controller node, either cycle path) left the executor in
    rcl_wait for good and the node never exited.
    """
    rclpy.init(args=args)
    context = rclpy.get_default_context()
    node = executor = None
    try:
        node = node_factory()
        unknown = unknown_parameters(node, sys.argv if args is None else args)
        if unknown:
            print(f"{executable}: error: {'; '.join(unknown)}", flush=True)
            return 2
        executor = make_executor()
        executor.add_node(node)
        while rclpy.ok():
            try:
                executor.spin_once(timeout_sec=SHUTDOWN_CHECK_S)
            except (KeyboardInterrupt, ExternalShutdownException):
                raise
            except Exception as exc:        # noqa: BLE001 - the fault policy: log, keep serving
                # The signal handler shuts the context down while a callback may be running: its
                # next publish then fails (RCLError "publisher's context is invalid"). That is the
                # shutdown, not a fault. So is an error the stop signal's KeyboardInterrupt was turned
                # into inside rclpy's C++ code before the context went down (stop_request).
                if not rclpy.ok() or stop_request.requested.is_set():
                    break
                _log_unguarded(node, exc)
    except FlexmodalError as exc:
        if node is not None:
            raise
        print(f"{executable}: error: {exc}", flush=True)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if rclpy.ok():
            raise
    finally:
        _ignore_stop_signals()
        if executor is not None:
            executor.shutdown(timeout_sec=SHUTDOWN_WAIT_S)
        if node is not None:
            node.destroy_node()
        # pools a node started and did not shut down: one interrupted while it was being built
        workers = sys.modules.get("flexmodal_ros.core.workers")
        if workers is not None:
            workers.shutdown_all()
        rclpy.try_shutdown()
        context.destroy()            # the participant leaves the graph now, not at interpreter exit
        _ignore_stop_signals()       # rclpy's shutdown restores the handlers it replaced
    return 0


SHUTDOWN_WAIT_S = 1.0       # run_node: longest wait for running callbacks at shutdown [s]


def _log_unguarded(node, exc):
    text = f"callback failed: {fault_text(exc)}"
    if hasattr(node, "report_fault"):
        node.report_fault(text)
    else:
        node.get_logger().error(text, throttle_duration_sec=FAULT_LOG_PERIOD)


def _ignore_stop_signals():
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)

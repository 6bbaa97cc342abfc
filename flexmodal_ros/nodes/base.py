"""What every flexmodal node shares: typed parameters, the robot-model parameters, the clock for
timing, log throttling, the entry point."""
import re
import signal
import time

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter

from ..core.errors import FlexmodalError
from ..constrained.closed_chain import resolve_any_model, resolve_closed_chain
from ..robot.registry import resolve_model
from ..core.validation import shown

DOUBLE_ARRAY = Parameter.Type.DOUBLE_ARRAY
_KIND_NAMES = {bool: "a bool", int: "an integer", float: "a number (double)", str: "a string",
               DOUBLE_ARRAY: "a list of numbers"}


def declare_typed(node, name, default, read_only=True, description=""):
    """Declare parameter ``name`` whose type is that of ``default`` (bool, int, float, str, or
    ``DOUBLE_ARRAY`` for a list of numbers without default) and return its value in that type.

    The parameter is declared with dynamic typing, so that an override of another type does not
    raise rclpy's InvalidParameterTypeException: integers are accepted for doubles
    (``publish_rate_hz:=10``), integral doubles for integers, integers in number lists; anything
    else raises a FlexmodalError naming the parameter (the node then exits with one line). Read-only
    parameters are refused by rclpy at run time; settable ones are checked by
    :class:`SettableParameters` with the same :func:`typed_value`."""
    kind = default if default is DOUBLE_ARRAY else type(default)
    stored = node.declare_parameter(name, None if default is DOUBLE_ARRAY else default,
                                    ParameterDescriptor(dynamic_typing=True, description=description)).value
    given = default if stored is None and kind is not DOUBLE_ARRAY else stored   # `name:=`: not given
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
    executor, i.e. between the node's other callbacks. Register it after the declarations."""

    def __init__(self, node):
        self.node = node
        self.values, self._kinds, self._apply = {}, {}, None

    def declare(self, name, default, description=""):
        self._kinds[name] = DOUBLE_ARRAY if default is DOUBLE_ARRAY else type(default)
        self.values[name] = declare_typed(self.node, name, default, read_only=False, description=description)
        return self.values[name]

    def on_change(self, apply):
        """Register ``apply(values)`` (called with every settable value, after the type checks)."""
        if self._apply is None:
            self.node.add_on_set_parameters_callback(self._on_set)
        self._apply = apply

    def _on_set(self, params):
        from rcl_interfaces.msg import SetParametersResult

        mine = [p for p in params if p.name in self._kinds]
        if not mine:
            return SetParametersResult(successful=True)
        try:
            values = dict(self.values)
            for p in mine:
                values[p.name] = typed_value(p.name, p.value, self._kinds[p.name])
            self._apply(values)
        except FlexmodalError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.values = values
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


SHUTDOWN_CHECK_S = 0.2     # run_node: longest executor wait between two checks of the context [s]


def run_node(node_factory, executable, args=None, make_executor=SingleThreadedExecutor):
    """Console-script body: init rclpy, build the node, spin until Ctrl-C or shutdown.

    A configuration error while building the node prints one line and returns exit code 2.
    Ctrl-C (SIGINT) or SIGTERM at any point after ``rclpy.init``, also while the node is being
    built, ends the node cleanly with exit code 0. Under ``ros2 launch`` one Ctrl-C reaches a node
    twice (the terminal signals the whole process group, then launch signals each node), so
    SIGINT and SIGTERM are ignored once the clean-up has begun: a second signal cannot interrupt
    it with a KeyboardInterrupt traceback (launch still escalates to SIGKILL if a node hangs). A
    callback interrupted by the shutdown (its publish fails once the context is gone) ends the
    node the same way. The executor waits at most SHUTDOWN_CHECK_S between checks of the context:
    with one unbounded wait, about one SIGINT or SIGTERM in 15 (measured on the controller node,
    either cycle path) left the executor in rcl_wait for good and the node never exited.
    """
    rclpy.init(args=args)
    node = executor = None
    try:
        node = node_factory()
        executor = make_executor()
        executor.add_node(node)
        while rclpy.ok():
            executor.spin_once(timeout_sec=SHUTDOWN_CHECK_S)
    except FlexmodalError as exc:
        if node is not None:
            raise
        print(f"{executable}: error: {exc}", flush=True)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # The signal handler shuts the context down while a callback may be running: its next
        # publish then fails (RCLError "publisher's context is invalid"). That is the shutdown,
        # not a fault; anything raised while the context is still valid is one.
        if rclpy.ok():
            raise
    finally:
        _ignore_stop_signals()
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        _ignore_stop_signals()       # rclpy's shutdown restores the handlers it replaced
    return 0


def _ignore_stop_signals():
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)

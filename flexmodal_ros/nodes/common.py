"""What every flexmodal node shares: typed parameters, the robot-model parameters, log throttling,
the entry point."""
import re
import time

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter

from ..errors import FlexmodalError
from ..robots import resolve_model
from ..validation import shown

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


def declare_robot_model(node):
    """Declare ``robot`` / ``urdf_path`` / ``params_path`` and return the robot model they name."""
    robot, urdf, params = (declare_typed(node, name, "")
                           for name in ("robot", "urdf_path", "params_path"))
    if not robot and not params:
        raise FlexmodalError("parameters: set 'robot' or 'params_path' (and optionally 'urdf_path')")
    return resolve_model(robot or None, urdf or None, params or None)


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


def run_node(node_factory, executable, args=None, make_executor=SingleThreadedExecutor):
    """Console-script body: init rclpy, build the node, spin until Ctrl-C or shutdown.

    A configuration error while building the node prints one line and returns exit code 2.
    """
    rclpy.init(args=args)
    try:
        node = node_factory()
    except FlexmodalError as exc:
        print(f"{executable}: error: {exc}", flush=True)
        rclpy.try_shutdown()
        return 2
    executor = make_executor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0

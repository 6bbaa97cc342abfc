"""The callback guard of every flexmodal node (:class:`GuardedNode`).

Fault policy: no callback — service, action, subscription, timer, guard condition, parameter
callback, and the handlers a node passes to its serving threads (:meth:`GuardedNode.guarded`) —
can end the node. A service answers ``success=false`` with the reason (a request error: its
message; anything else: "internal error (<type>: <text> at <file>:<line>)"), an action goal is
aborted with that result, a topic or timer callback drops the message; the fault is logged once per
kind and period (:data:`FAULT_LOG_PERIOD`), told to the node's ``fault_listeners`` (e.g. a
``~/status`` topic), and the node keeps serving. :func:`~flexmodal_ros.nodes.base.run_node` never
re-raises an exception that reaches the executor either. docs/ros_robustness.md has the fuzz
campaign that checks it.
"""
import contextlib
import functools
import inspect
import time

from rcl_interfaces.msg import ParameterDescriptor, ParameterType, SetParametersResult
from rclpy.node import Node

from .base import FAULT_LOG_BURST, FAULT_LOG_PERIOD, REQUEST_ERRORS, MessageThrottle, fault_text


class GuardedNode(Node):
    """An rclpy Node whose callbacks cannot end it (the fault policy of the module docstring).

    Every callback registered through the Node API (services — also rclpy's own parameter
    services —, subscriptions, timers, guard conditions, parameter callbacks) is wrapped by
    :meth:`guarded`; pass handlers given to other entities (serving threads, action servers:
    :func:`guarded_action_server`) through :meth:`guarded` yourself. ``fault_listeners``: callables
    given each fault text that is logged (after the throttle), e.g. to publish it on ``~/status``.
    ``use_sim_time`` is read-only: the clock a node times with is chosen at start."""

    def __init__(self, node_name, **kwargs):
        self._fault_throttle = MessageThrottle(FAULT_LOG_PERIOD)
        self._fault_window = [0.0, 0]          # start of the current second, faults logged in it
        self.fault_listeners = []
        self.faults = 0                        # callbacks that failed since start
        super().__init__(node_name, **kwargs)
        # The nodes choose their clock at start (timing_clock): use_sim_time cannot change later.
        self.set_descriptor("use_sim_time", ParameterDescriptor(
            type=ParameterType.PARAMETER_BOOL, read_only=True,
            description="simulation time (/clock) instead of the system and steady clocks; fixed at start"))

    def guarded(self, callback, where, service=False):
        """``callback`` that never raises an Exception: with ``service=True`` a failed call
        returns a fresh response with success=false and the reason (a response without those
        fields: empty); otherwise None (a parameter callback: an unsuccessful result). Coroutine
        functions stay coroutine functions. KeyboardInterrupt and SystemExit pass."""
        if getattr(callback, "_flexmodal_guarded", False):
            return callback
        if inspect.iscoroutinefunction(callback):
            async def guarded(*args):
                try:
                    return await callback(*args)
                except Exception as exc:       # noqa: BLE001 - the fault policy: answer, log, keep serving
                    return self._fault(where, exc, args if service else None)
        elif not _takes_arguments(callback):   # timers and guard conditions: rclpy inspects the signature
            def guarded():
                try:
                    return callback()
                except Exception as exc:       # noqa: BLE001
                    return self._fault(where, exc)
        else:
            def guarded(*args):
                try:
                    return callback(*args)
                except Exception as exc:       # noqa: BLE001
                    return self._fault(where, exc, args if service else None)
        functools.update_wrapper(guarded, callback)
        guarded._flexmodal_guarded = True
        return guarded

    def _fault(self, where, exc, service_args=None):
        text = fault_text(exc)
        if not self.context.ok():
            # the context is shutting down (Ctrl-C): rcl entities refuse work in flight; that is the
            # shutdown, not a fault of the node (said at debug level only)
            self.get_logger().debug(f"{where} during shutdown: {text}")
        else:
            self.faults += 1
            if not isinstance(exc, REQUEST_ERRORS) or isinstance(exc, MemoryError):
                self.report_fault(f"{where}: {text}")
        if service_args is None:
            return None
        response = type(service_args[1])()
        if hasattr(response, "success"):
            response.success = False
        if hasattr(response, "message"):
            response.message = text
        return response

    def report_fault(self, text):
        """Log ``text`` as an error (throttled per kind and overall) and tell the listeners."""
        text = self._fault_throttle(text)
        now = time.monotonic()
        window = self._fault_window
        if now - window[0] >= 1.0:
            window[0], window[1] = now, 0
        if text is None or window[1] >= FAULT_LOG_BURST:
            return
        window[1] += 1
        self.get_logger().error(text)
        for listener in list(self.fault_listeners):
            with contextlib.suppress(Exception):       # a listener's own failure (e.g. the context is
                listener(text)                          # shutting down) is not a second fault to report

    # Every callback registered through the Node API is guarded.
    def create_service(self, srv_type, srv_name, callback, **kwargs):
        return super().create_service(srv_type, srv_name, self.guarded(callback, srv_name, service=True), **kwargs)

    def create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs):
        return super().create_subscription(msg_type, topic, self.guarded(callback, topic), qos_profile, **kwargs)

    def create_timer(self, timer_period_sec, callback, *args, **kwargs):
        return super().create_timer(timer_period_sec, self.guarded(callback, "timer"), *args, **kwargs)

    def create_guard_condition(self, callback, *args, **kwargs):
        return super().create_guard_condition(self.guarded(callback, "guard condition"), *args, **kwargs)

    def add_on_set_parameters_callback(self, callback):
        def checked(params):
            try:
                return callback(params)
            except Exception as exc:           # noqa: BLE001
                self._fault("set parameters", exc)
                return SetParametersResult(successful=False, reason=fault_text(exc))
        return super().add_on_set_parameters_callback(checked)

    def add_pre_set_parameters_callback(self, callback):
        def checked(params):
            try:
                return callback(params)
            except Exception as exc:           # noqa: BLE001 - an empty list refuses the set
                self._fault("set parameters", exc)
                return []
        return super().add_pre_set_parameters_callback(checked)


def _takes_arguments(callback):
    try:
        return bool(inspect.signature(callback).parameters)
    except (TypeError, ValueError):
        return True


def guarded_action_server(node, action_type, name, execute_callback, **kwargs):
    """rclpy ActionServer whose callbacks are guarded: a failed execute aborts the goal with
    ``action_type.Result(success=False, message=reason)`` (fields the result has), a failed goal
    or cancel callback rejects."""
    from rclpy.action import ActionServer, CancelResponse, GoalResponse   # deferred: rclpy.action, only the identification node

    async def _execute(goal_handle):
        try:
            return await _maybe_await(execute_callback(goal_handle))
        except Exception as exc:               # noqa: BLE001
            response = node._fault(name, exc, (None, action_type.Result()))
            with contextlib.suppress(Exception):       # the goal may be gone already
                if goal_handle.is_active:
                    goal_handle.abort()
            return response
    for key, refusal in (("goal_callback", GoalResponse.REJECT), ("cancel_callback", CancelResponse.REJECT)):
        if kwargs.get(key) is not None:
            kwargs[key] = _refusing(node, kwargs[key], refusal, f"{name} {key}")
    return ActionServer(node, action_type, name, execute_callback=_execute, **kwargs)


async def _maybe_await(value):
    return await value if inspect.isawaitable(value) else value


def _refusing(node, callback, refusal, where):
    def checked(*args):
        try:
            return callback(*args)
        except Exception as exc:               # noqa: BLE001
            node._fault(where, exc)
            return refusal
    return checked

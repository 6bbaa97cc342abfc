"""Subscriptions, services and clients served off the node's executor, on public rclpy only.

rclpy's SingleThreadedExecutor spends per received message a wait-set rebuild over every entity of
the node, a take, a task and a callback in Python (at 1 kHz a large share of a core per
subscription: benchmarks/bench_modal.py, docs/modal_analysis.md), and a request waits behind the node's other callbacks. The entities
here therefore live on a small **helper node** of their own, spun by an executor of their own:

- the helper node is created in the main node's context and namespace, with no parameter
  services, no rosout and no type-description service, and without the context's global
  arguments; the entity is created on it under the name the **main** node resolves
  (``Node.resolve_topic_name`` / ``resolve_service_name``: the main node's name, namespace and
  remappings apply as to its own entities, and nothing is remapped twice). Its name is the main
  node's with a leading underscore and the entity's name (``_feedforward_pd_controller_joint_states``):
  a hidden node (``ros2 node list`` lists it with ``--all`` only), unique as its main node is;
- its executor is rclpy's ``EventsExecutor`` (``rclpy.experimental``, Jazzy and Kilted: messages
  are taken in C++ as rmw reports them, ~5 % of a core per 1 kHz subscription, and a service round
  trip costs what a wait set of its own did) when this rclpy has it, otherwise
  ``SingleThreadedExecutor`` (warned once: ~4x the CPU per message, ~0.2 ms more per service round
  trip). ``FLEXMODAL_EXECUTOR=single`` forces the latter (``events``, the default, takes the former
  when available), e.g. to rule the experimental executor out.

:class:`PolledSubscription`: messages kept for a reader that takes them at its own pace (the
simulator samples the latest command once per period; the modal server needs the latest joint
state at publish_rate_hz; recorders drain the queue every few ms). :class:`SubscriptionThread`
serves a subscription on its helper's thread for a node that must answer every message at once
(the controller's 1 kHz joint states) while its own executor keeps the node's other, rarer
callbacks; :class:`ServiceThread` does the same for a service whose round trip counts (the modal
server's ~/compute_modal_parameters). Both run their callbacks holding a lock that the node's
executor callbacks take as well (:func:`locked`). :class:`PolledClient` is the caller's side: a
blocking call that spins its helper's executor in the calling thread until the answer is in (for
a Python stack that calls ~/compute_modal_parameters in a loop, e.g. a gain scheduler).
"""
import math
import os
import re
import threading
import time
from collections import deque

import rclpy.logging
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, qos_profile_services_default

from ..core.errors import FlexmodalError
from ..core.validation import shown

try:        # Jazzy's rclpy 7.1.6 and Kilted's 9.1.2 have it; older ones do not
    from rclpy.experimental import EventsExecutor
except ImportError:
    EventsExecutor = None

EXECUTOR_ENV = "FLEXMODAL_EXECUTOR"
SPIN_SLICE_S = 0.1       # longest wait of a helper executor before it checks whether to stop [s]
STOP_JOIN_S = 0.5        # stop(): longest wait for the thread's callback in progress [s]; see _ServingThread
SERVICE_POLL_S = 0.01    # PolledClient.wait_for_service: discovery checked this often [s]
_FALLBACK_COST = ("about 4x the CPU per received message (~20 % of a core per 1 kHz subscription) and ~0.2 ms "
                  "more per service round trip")
_announced = set()       # executor notices already logged in this process
_helper_names = set()    # helper node names in use in this process


def executor_kind():
    """"events" (rclpy's EventsExecutor) or "single" (SingleThreadedExecutor, the public fallback):
    what the helper nodes use, from ``$FLEXMODAL_EXECUTOR`` (events | single; empty = events) and
    whether this rclpy has the EventsExecutor. FlexmodalError naming the variable for other values."""
    wanted = os.environ.get(EXECUTOR_ENV, "").strip().lower() or "events"
    if wanted not in ("events", "single"):
        raise FlexmodalError(f"{EXECUTOR_ENV}: expected events or single, got {shown(wanted)}")
    return "events" if wanted == "events" and EventsExecutor is not None else "single"


def _make_executor(node):
    """A new executor for a helper of ``node``; the fallback is logged once per process."""
    kind = executor_kind()
    if kind == "single" and kind not in _announced:
        _announced.add(kind)
        if EventsExecutor is None:
            node.get_logger().warning(
                "rclpy.experimental.EventsExecutor is not available in this rclpy: subscriptions and services "
                f"served off the executor (nodes/polled.py) use SingleThreadedExecutor, {_FALLBACK_COST}")
        else:
            node.get_logger().info(f"{EXECUTOR_ENV}=single: subscriptions and services served off the executor "
                                   f"(nodes/polled.py) use SingleThreadedExecutor, {_FALLBACK_COST}")
    return EventsExecutor(context=node.context) if kind == "events" else SingleThreadedExecutor(context=node.context)


def locked(lock, callback):
    """``callback`` holding ``lock``: for the executor's callbacks of a node whose
    :class:`SubscriptionThread` or :class:`ServiceThread` takes the same lock."""
    def holding(*args):
        with lock:
            return callback(*args)
    return holding


class _Helper:
    """A hidden helper node of ``node`` for the entity named ``resolved`` (see the module
    docstring) and the executor that spins it; :meth:`destroy` releases both."""

    def __init__(self, node, resolved):
        base = re.sub(r"[^A-Za-z0-9_]", "_", f"_{node.get_name()}_{resolved.strip('/').split('/')[-1]}")
        name, k = base, 1
        while name in _helper_names:
            k += 1
            name = f"{base}_{k}"
        self.node = Node(name, context=node.context, namespace=node.get_namespace(), use_global_arguments=False,
                         enable_rosout=False, start_parameter_services=False,
                         parameter_overrides=[Parameter("start_type_description_service", value=False)])
        _helper_names.add(name)
        self.name = name
        try:
            self.executor = _make_executor(node)
            self.executor.add_node(self.node)
        except BaseException:
            self.destroy()
            raise

    def destroy(self):
        executor = getattr(self, "executor", None)
        if executor is not None:
            executor.shutdown()
        self.node.destroy_node()
        _helper_names.discard(self.name)


def stop_logger(logger, context):
    """``logger`` (a node's) while ``context`` is valid; after its shutdown (Ctrl-C) a console
    logger named ``<node>.stopping`` that no /rosout publisher serves: through the node's logger
    rcl would print "Failed to publish log message to rosout: publisher's context is invalid"
    beside the message."""
    return logger if context.ok() else rclpy.logging.get_logger(f"{logger.name}.stopping")


class _ServingThread:
    """What :class:`SubscriptionThread`, :class:`ServiceThread` and the controller's native cycle
    share: a thread named ``name`` that serves one entity (:meth:`_serve`, until :meth:`stop`)
    holding ``lock`` for its callbacks. An exception other than the context's shutdown ends the
    thread and is raised again in the node's executor (``failure`` guard condition): the node fails
    as it would in an executor callback. Started by :meth:`start` (threads inherit the scheduling
    policy and CPU affinity of the starting thread: flexmodal_ros/nodes/realtime.py), ended by
    :meth:`stop` (before the node is destroyed; a second call does nothing).

    :meth:`stop` waits at most STOP_JOIN_S for the thread. A thread still busy then (a callback that
    has not returned, or a wait inside the middleware: one Ctrl-C on Jazzy left a helper's
    EventsExecutor in ``spin_once`` for more than 2 s in 1 of ~180 start-up stops, cold caches) is
    logged with a warning and left to end on its own; a helper thread releases its helper node
    itself when it does (the native cycle's endpoint is closed at collection).
    A stop, e.g. Ctrl-C, therefore never waits longer than STOP_JOIN_S per thread."""

    RELEASED_BY_THREAD = True   # the thread, ending after a stop, releases the entity (else: stop() or collection)

    def __init__(self, node, name, lock):
        self._lock, self._context, self._running, self._stopped = lock, node.context, False, False
        self._error, self._logger, self._released = None, node.get_logger(), False
        self._release_lock = threading.Lock()
        self._failure = node.create_guard_condition(self._raise_error)
        self._thread = threading.Thread(target=self._guarded, name=f"{node.get_name()}:{name}", daemon=True)

    def start(self):
        self._running = True
        self._thread.start()

    def stop(self):
        """End the thread (waits up to STOP_JOIN_S for the callback in progress) and release the
        entity, now or, for a thread still busy, when the thread ends."""
        if self._stopped:
            return
        self._stopped, self._running = True, False
        self._wake()
        if self._thread.is_alive():
            self._thread.join(STOP_JOIN_S)
        if self._thread.is_alive():
            later = "when it ends" if self.RELEASED_BY_THREAD else "at collection"
            stop_logger(self._logger, self._context).warning(
                f"thread {self._thread.name} still busy {STOP_JOIN_S:g} s after its stop (a callback or a wait in "
                f"the middleware): not waited for; its entity is released {later}")
        else:
            self._release_once()

    def _guarded(self):
        try:
            self._serve()
        except Exception as exc:          # noqa: BLE001 - handed to the executor, see the class docstring
            if self._running and self._context.ok():
                self._error = exc
                self._failure.trigger()
        finally:
            if self._stopped and self.RELEASED_BY_THREAD:     # also after the context's shutdown
                self._release_once()

    def _release_once(self):
        with self._release_lock:
            if self._released:
                return
            self._released = True
        self._release()

    def _raise_error(self):
        raise self._error


class _HelperThread(_ServingThread):
    """A :class:`_ServingThread` whose entity lives on a :class:`_Helper`, spun on the thread."""

    def __init__(self, node, resolved, lock):
        self.helper = _Helper(node, resolved)
        try:
            super().__init__(node, resolved, lock)
        except BaseException:
            self.helper.destroy()
            raise

    def _wake(self):
        self.helper.executor.wake()

    def _release(self):
        self.helper.destroy()

    def _serve(self):
        executor = self.helper.executor
        while self._running:
            executor.spin_once(timeout_sec=SPIN_SLICE_S)


class PolledSubscription:
    """``topic`` of ``msg_type`` on ``node`` with ``qos`` (a QoSProfile or a history depth), its
    messages kept for :meth:`take_all` / :meth:`take_latest` (at most the history depth, oldest
    dropped first, as the middleware's queue would); ``raw=True`` keeps serialized messages. A
    helper node's executor takes them as they arrive (module docstring); :meth:`destroy` ends it."""

    def __init__(self, node, msg_type, topic, qos, raw=False):
        qos = qos if isinstance(qos, QoSProfile) else QoSProfile(depth=qos)
        self.msg_type, self.raw = msg_type, raw
        self.topic = node.resolve_topic_name(topic)        # namespace, remapping
        self._queue = deque(maxlen=None if qos.history == HistoryPolicy.KEEP_ALL else max(1, qos.depth))
        self._arrived = threading.Condition()
        self._server = _HelperThread(node, self.topic, threading.Lock())
        self._server.helper.node.create_subscription(msg_type, self.topic, self._keep, qos, raw=raw)
        self._server.start()

    def _keep(self, message):
        with self._arrived:
            self._queue.append(message)
            self._arrived.notify_all()

    def take_all(self):
        """Every message kept since the last call, oldest first."""
        with self._arrived:
            messages = list(self._queue)
            self._queue.clear()
        return messages

    def take_latest(self):
        """The newest kept message (older ones are dropped), or None."""
        messages = self.take_all()
        return messages[-1] if messages else None

    def wait(self, timeout):
        """Block until a message is kept, :meth:`wake` is called or ``timeout`` [s] passed."""
        with self._arrived:
            if not self._queue:
                self._arrived.wait(timeout)

    def wake(self):
        """End a :meth:`wait` in another thread now."""
        with self._arrived:
            self._arrived.notify_all()

    def destroy(self):
        """Release the subscription and its helper node (before the node is destroyed)."""
        self._server.stop()
        self.wake()


class SubscriptionThread(_HelperThread):
    """``topic`` of ``msg_type`` (``qos``) served on a thread of its own (:class:`_ServingThread`):
    ``on_message(message)`` for every message taken, and ``on_idle()`` once every ``idle_period``
    [s] of steady time (also when no message comes), both while holding ``lock`` (the node's
    executor callbacks take the same lock, so they never run during either). The thread spins a
    helper node holding this subscription and the idle timer alone (module docstring): a message
    costs the take and the callback, not the rebuild of a wait set over every entity of the node."""

    def __init__(self, node, msg_type, topic, qos, on_message, on_idle, idle_period, lock, raw=False):
        self.topic = node.resolve_topic_name(topic)
        super().__init__(node, self.topic, lock)
        helper = self.helper.node
        helper.create_subscription(msg_type, self.topic, locked(lock, on_message), qos, raw=raw)
        def idle():                    # no argument: rclpy passes a TimerInfo to a callback that takes one
            with lock:
                on_idle()

        helper.create_timer(idle_period, idle, clock=Clock(clock_type=ClockType.STEADY_TIME))


class ServiceThread(_HelperThread):
    """Service ``name`` of ``srv_type`` (default service QoS) answered on a thread of its own
    (:class:`_ServingThread`): ``handler(request, response)`` (a fresh response, returned) holding
    ``lock``. The service lives on a helper node (module docstring) under the name ``node``
    resolves (:attr:`name`), visible to ``ros2 service`` as any of the node's services."""

    def __init__(self, node, srv_type, name, handler, lock):
        self.srv_type = srv_type
        self.name = node.resolve_service_name(name)
        super().__init__(node, self.name, lock)
        self.helper.node.create_service(srv_type, self.name, locked(lock, handler),
                                        qos_profile=qos_profile_services_default)


class PolledClient:
    """Client of service ``name`` of ``srv_type`` (``qos``, default service QoS) whose
    :meth:`call` sends a request and spins the executor of its own helper node (module docstring)
    in the calling thread until the answer is in: no executor thread in between, and the node's
    own executor never sees the answers (the node may be spun by it in another thread
    meanwhile). ``name`` is resolved by ``node`` (its namespace and remappings apply). Calls from
    several threads run one at a time. Released by :meth:`destroy` (before the node)."""

    def __init__(self, node, srv_type, name, qos=qos_profile_services_default):
        self.srv_type = srv_type
        self._context = node.context
        self.name = node.resolve_service_name(name)
        self._helper = _Helper(node, self.name)
        self._client = self._helper.node.create_client(srv_type, self.name, qos_profile=qos)
        self._lock = threading.Lock()

    def service_is_ready(self):
        """True once a server of this service is discovered."""
        return self._client.service_is_ready()

    def wait_for_service(self, timeout):
        """True once a server is discovered, False after ``timeout`` [s] without one."""
        deadline = time.monotonic() + self._checked_timeout(timeout)
        while not self.service_is_ready():
            if time.monotonic() > deadline:
                return False
            time.sleep(SERVICE_POLL_S)
        return True

    def call(self, request, timeout):
        """The response to ``request`` (a ``srv_type.Request``); TimeoutError naming the service
        after ``timeout`` [s] without it, RuntimeError if the context is shut down meanwhile. An
        answer to an earlier call that timed out, arriving late, is discarded."""
        if not isinstance(request, self.srv_type.Request):
            raise TypeError(f"{self.name}: request must be a {self.srv_type.__name__}.Request, "
                            f"got {type(request).__name__}")
        timeout = self._checked_timeout(timeout)
        executor = self._helper.executor
        with self._lock:
            future = self._client.call_async(request)
            deadline = time.monotonic() + timeout
            try:
                while not future.done() and (left := deadline - time.monotonic()) > 0 and self._context.ok():
                    executor.spin_until_future_complete(future, timeout_sec=min(left, SPIN_SLICE_S))
            except Exception:           # noqa: BLE001 - the executor's shutdown: reported below
                if self._context.ok():
                    raise
            if future.done():
                return future.result()
            self._client.remove_pending_request(future)      # a late answer is dropped
        if not self._context.ok():
            raise RuntimeError(f"{self.name}: the ROS context was shut down during the call")
        raise TimeoutError(f"{self.name}: no response within {timeout:g} s")

    def _checked_timeout(self, timeout):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ValueError(f"{self.name}: timeout must be a positive number of seconds, got {shown(timeout)}")
        return timeout

    def destroy(self):
        """Release the client and its helper node (before the node is destroyed)."""
        self._helper.destroy()

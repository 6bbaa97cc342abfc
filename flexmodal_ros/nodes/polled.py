"""A subscription read by polling instead of by an executor callback (for 1 kHz topics).

rclpy's executor costs ~200 µs of CPU per received message on this project's machine (wait-set
rebuild, take, callback dispatch in Python): at 1 kHz that is a fifth of a core per subscriber. A
reader that needs each message only at its own pace (the simulator samples the latest command
once per period; the modal server needs the latest joint state at publish_rate_hz; the demo
recorder drains the queue every few ms) takes the messages itself with rclpy's take/wait calls,
as ``rclpy.wait_for_message`` does. The subscription is created on the node's own rcl handle but
not registered with the node, so no executor sees it (an executor would take the messages
first), and no second node exists: the node's resolved name, namespace and remappings
(``-r __node:=NAME``, ``-r __ns:=/ns``, ``-r /joint_states:=...``) apply to it as to any of its
subscriptions. DDS still receives and queues every message (up to the history depth) in its own
threads.

:class:`SubscriptionThread` serves such a subscription on a thread of its own, for a node that
must answer every message at once (the controller's 1 kHz joint states) while its executor keeps
the node's other, rarer callbacks. :class:`ServiceThread` does the same for a service whose
round trip counts (the modal server's ~/compute_modal_parameters): a request costs the take, the
handler and the send, not the executor's wait-set rebuild, task and future. Both hold a lock
that the node's executor callbacks take as well (:func:`locked`). :class:`PolledClient` is the
caller's side: a blocking call that waits for its own response on a wait set of its own (for a
Python stack that calls ~/compute_modal_parameters in a loop, e.g. a gain scheduler).
"""
import math
import threading
import time

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.qos import QoSProfile, qos_profile_services_default
from rclpy.type_support import check_is_valid_msg_type, check_is_valid_srv_type


def locked(lock, callback):
    """``callback`` holding ``lock``: for the executor's callbacks of a node whose
    :class:`SubscriptionThread` or :class:`ServiceThread` takes the same lock."""
    def holding(*args):
        with lock:
            return callback(*args)
    return holding


class PolledSubscription:
    """``topic`` of ``msg_type`` on ``node`` with ``qos`` (a QoSProfile or a history depth);
    ``raw=True`` keeps serialized messages."""

    def __init__(self, node, msg_type, topic, qos, raw=False):
        check_is_valid_msg_type(msg_type)          # imports the type support
        qos = qos if isinstance(qos, QoSProfile) else QoSProfile(depth=qos)
        self.msg_type, self.raw = msg_type, raw
        with node.handle:
            self.handle = _rclpy.Subscription(node.handle, msg_type, topic, qos.get_c_qos_profile(), None)
        self.topic = self.handle.get_topic_name()    # resolved (namespace, remapping)
        self._wake = _rclpy.GuardCondition(node.context.handle)
        self._wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, 0, node.context.handle)

    def take_all(self):
        """Every message queued since the last call, oldest first."""
        messages = []
        while (taken := self.handle.take_message(self.msg_type, self.raw)) is not None:
            messages.append(taken[0])
        return messages

    def take_latest(self):
        """The newest queued message (older ones are dropped), or None."""
        messages = self.take_all()
        return messages[-1] if messages else None

    def wait(self, timeout):
        """Block until a message is queued, :meth:`wake` is called or ``timeout`` [s] passed."""
        self._wait_set.clear_entities()
        self._wait_set.add_subscription(self.handle)
        self._wait_set.add_guard_condition(self._wake)
        self._wait_set.wait(int(timeout * 1e9))

    def wake(self):
        """End a :meth:`wait` in another thread now."""
        self._wake.trigger_guard_condition()

    @property
    def wake_condition(self):
        """The guard condition :meth:`wake` triggers (for a C waiter on the same subscription)."""
        return self._wake

    def destroy(self):
        """Release the subscription (before the node is destroyed)."""
        self.handle.destroy_when_not_in_use()
        self._wake.destroy_when_not_in_use()
        self._wait_set.destroy_when_not_in_use()


SERVICE_WAIT_NS = 100_000_000     # longest wait of ServiceThread / PolledClient before it checks its context [ns]
SERVICE_POLL_S = 0.01             # PolledClient.wait_for_service: discovery checked this often [s]


class _ServingThread:
    """What :class:`SubscriptionThread` and :class:`ServiceThread` share: a thread named
    ``name`` that serves one entity (:meth:`_serve`, until :meth:`stop`) holding ``lock`` for its
    callbacks. An exception other than the context's shutdown ends the thread and is raised again
    in the executor (``failure`` guard condition): the node fails as it would in an executor
    callback. Started by :meth:`start` (threads inherit the scheduling policy and CPU affinity of
    the starting thread: flexmodal_ros/nodes/realtime.py), ended by :meth:`stop` (before the node
    is destroyed; a second call does nothing)."""

    def __init__(self, node, name, lock):
        self._lock, self._context, self._running, self._stopped = lock, node.context, False, False
        self._error = None
        self._failure = node.create_guard_condition(self._raise_error)
        self._thread = threading.Thread(target=self._guarded, name=f"{node.get_name()}:{name}", daemon=True)

    def start(self):
        self._running = True
        self._thread.start()

    def stop(self):
        """End the thread (waits for the callback in progress) and release the entity."""
        if self._stopped:
            return
        self._stopped, self._running = True, False
        self._wake()
        if self._thread.is_alive():
            self._thread.join()
        self._release()

    def _guarded(self):
        try:
            self._serve()
        except Exception as exc:          # noqa: BLE001 - handed to the executor, see the class docstring
            if self._running and self._context.ok():
                self._error = exc
                self._failure.trigger()

    def _raise_error(self):
        raise self._error


class SubscriptionThread(_ServingThread):
    """A :class:`PolledSubscription` served by a thread of its own (:class:`_ServingThread`):
    after each wake-up, ``on_message(newest)`` for the newest queued message (older ones are
    dropped), then ``on_idle()`` once every ``idle_period`` [s] of steady time (also when no
    message comes), both while holding ``lock`` (the node's executor callbacks take the same
    lock, so they never run during either). The thread waits on this subscription alone: a
    message costs the take and the callback only, not the executor's rebuild of its wait set over
    every entity of the node."""

    def __init__(self, node, msg_type, topic, qos, on_message, on_idle, idle_period, lock, raw=False):
        self.subscription = PolledSubscription(node, msg_type, topic, qos, raw)
        self._on_message, self._on_idle, self._idle_period = on_message, on_idle, idle_period
        super().__init__(node, self.subscription.topic, lock)

    def _wake(self):
        self.subscription.wake()

    def _release(self):
        self.subscription.destroy()

    def _serve(self):
        next_idle = time.monotonic() + self._idle_period
        subscription = self.subscription
        while self._running:
            subscription.wait(max(0.0, next_idle - time.monotonic()))
            newest = subscription.take_latest()
            with self._lock:
                if newest is not None:
                    self._on_message(newest)
                now = time.monotonic()
                if now >= next_idle:
                    self._on_idle()
                    next_idle += self._idle_period
                    if next_idle <= now:            # behind (a long callback): no burst of catch-ups
                        next_idle = now + self._idle_period


class ServiceThread(_ServingThread):
    """Service ``name`` of ``srv_type`` on ``node`` (default service QoS) answered by a thread of
    its own (:class:`_ServingThread`): each request is taken and answered with
    ``handler(request, response)`` (a fresh response, returned) while holding ``lock``. Like
    :class:`PolledSubscription`, the service lives on the node's rcl handle (name resolution and
    remapping as for the node's services, visible to ``ros2 service``) but is not registered with
    the node, so no executor takes its requests."""

    def __init__(self, node, srv_type, name, handler, lock):
        check_is_valid_srv_type(srv_type)          # imports the type support
        self.srv_type, self._handler = srv_type, handler
        with node.handle:
            self.handle = _rclpy.Service(node.handle, srv_type, name, qos_profile_services_default.get_c_qos_profile())
        self.name = self.handle.name
        self._wake_condition = _rclpy.GuardCondition(node.context.handle)
        self._wait_set = _rclpy.WaitSet(0, 1, 0, 0, 1, 0, node.context.handle)
        super().__init__(node, self.name, lock)

    def _wake(self):
        self._wake_condition.trigger_guard_condition()

    def _release(self):
        self.handle.destroy_when_not_in_use()
        self._wake_condition.destroy_when_not_in_use()
        self._wait_set.destroy_when_not_in_use()

    def _serve(self):
        request_type, response_type = self.srv_type.Request, self.srv_type.Response
        while self._running and self._context.ok():
            self._wait_set.clear_entities()
            self._wait_set.add_service(self.handle)
            self._wait_set.add_guard_condition(self._wake_condition)
            self._wait_set.wait(SERVICE_WAIT_NS)    # bounded: a context shut down without stop() ends it
            while self._running and (taken := self.handle.service_take_request(request_type))[0] is not None:
                request, header = taken
                with self._lock:
                    response = self._handler(request, response_type())
                self.handle.service_send_response(response, header.request_id)


class PolledClient:
    """Client of service ``name`` of ``srv_type`` on ``node`` (default service QoS) whose
    :meth:`call` sends a request and waits for its answer on a wait set of its own, in the calling
    thread: no executor, task or future per call (rclpy's ``Client.call`` needs an executor
    spinning in another thread; ``call_async`` + ``spin_until_future_complete`` rebuilds the
    executor's wait set over every entity of the node at each wake-up). Like
    :class:`ServiceThread`, the client lives on the node's rcl handle (the node's namespace and
    remappings apply to ``name``) but is not registered with the node, so the node's executor
    never takes its answers: the node may be spun by an executor in another thread meanwhile.
    Calls from several threads run one at a time. Released by :meth:`destroy` (before the node)."""

    def __init__(self, node, srv_type, name, qos=qos_profile_services_default):
        check_is_valid_srv_type(srv_type)          # imports the type support
        self.srv_type = srv_type
        self._context = node.context
        with node.handle:
            self.handle = _rclpy.Client(node.handle, srv_type, name, qos.get_c_qos_profile())
        self.name = self.handle.service_name        # resolved (namespace, remapping)
        self._wait_set = _rclpy.WaitSet(0, 0, 0, 1, 0, 0, node.context.handle)
        self._lock = threading.Lock()

    def service_is_ready(self):
        """True once a server of this service is discovered."""
        return self.handle.service_server_is_available()

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
        response_type = self.srv_type.Response
        timeout = self._checked_timeout(timeout)
        with self._lock:
            sequence = self.handle.send_request(request)
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0 and self._context.ok():
                self._wait_set.clear_entities()
                self._wait_set.add_client(self.handle)
                self._wait_set.wait(min(int(left * 1e9), SERVICE_WAIT_NS))
                while (taken := self.handle.take_response(response_type))[0] is not None:
                    header, response = taken
                    if header.request_id.sequence_number == sequence:
                        return response
        if not self._context.ok():
            raise RuntimeError(f"{self.name}: the ROS context was shut down during the call")
        raise TimeoutError(f"{self.name}: no response within {timeout:g} s")

    def _checked_timeout(self, timeout):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ValueError(f"{self.name}: timeout must be a positive number of seconds, got {timeout!r}")
        return timeout

    def destroy(self):
        """Release the client (before the node is destroyed)."""
        self.handle.destroy_when_not_in_use()
        self._wait_set.destroy_when_not_in_use()

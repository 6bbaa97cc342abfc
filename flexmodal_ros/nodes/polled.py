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
the node's other, rarer callbacks.
"""
import threading
import time

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.qos import QoSProfile
from rclpy.type_support import check_is_valid_msg_type


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

    def destroy(self):
        """Release the subscription (before the node is destroyed)."""
        self.handle.destroy_when_not_in_use()
        self._wake.destroy_when_not_in_use()


class SubscriptionThread:
    """A :class:`PolledSubscription` served by a thread of its own: after each wake-up,
    ``on_message(newest)`` for the newest queued message (older ones are dropped), then
    ``on_idle()`` once every ``idle_period`` [s] of steady time (also when no message comes), both
    while holding ``lock`` (the node's executor callbacks take the same lock, so they never run
    during either). The thread waits on this subscription alone: a message costs the take and the
    callback only, not the executor's rebuild of its wait set over every entity of the node.

    An exception other than the context's shutdown ends the thread and is raised again in the
    executor (``failure`` guard condition): the node fails as it would in an executor callback.
    Started by :meth:`start` (threads inherit the scheduling policy and CPU affinity of the
    starting thread: flexmodal_ros/nodes/realtime.py), ended by :meth:`stop` (before the node is
    destroyed)."""

    def __init__(self, node, msg_type, topic, qos, on_message, on_idle, idle_period, lock, raw=False):
        self.subscription = PolledSubscription(node, msg_type, topic, qos, raw)
        self._on_message, self._on_idle, self._idle_period = on_message, on_idle, idle_period
        self._lock, self._context, self._running = lock, node.context, False
        self._error = None
        self._failure = node.create_guard_condition(self._raise_error)
        self._thread = threading.Thread(target=self._run, name=f"{node.get_name()}:{self.subscription.topic}",
                                        daemon=True)

    def start(self):
        self._running = True
        self._thread.start()

    def stop(self):
        """End the thread (waits for the callback in progress) and release the subscription; a
        second call does nothing."""
        if self.subscription is None:
            return
        self._running = False
        self.subscription.wake()
        if self._thread.is_alive():
            self._thread.join()
        self.subscription.destroy()
        self.subscription = None

    def _run(self):
        next_idle = time.monotonic() + self._idle_period
        subscription = self.subscription
        try:
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
        except Exception as exc:          # noqa: BLE001 - handed to the executor, see the class docstring
            if self._running and self._context.ok():
                self._error = exc
                self._failure.trigger()

    def _raise_error(self):
        raise self._error

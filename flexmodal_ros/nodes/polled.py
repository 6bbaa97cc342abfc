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
"""
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
        self._wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, node.context.handle)

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
        """Block until a message is queued or ``timeout`` [s] passed."""
        self._wait_set.clear_entities()
        self._wait_set.add_subscription(self.handle)
        self._wait_set.wait(int(timeout * 1e9))

    def destroy(self):
        """Release the subscription (before the node is destroyed)."""
        self.handle.destroy_when_not_in_use()

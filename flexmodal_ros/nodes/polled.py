"""A subscription read by polling instead of by an executor callback (for 1 kHz topics).

rclpy's executor costs ~200 µs of CPU per received message on this project's machine (wait-set
rebuild, take, callback dispatch in Python): at 1 kHz that is a fifth of a core per subscriber. A
reader that needs each message only at its own pace (the simulator samples the latest command
once per period; the modal server needs the latest joint state at publish_rate_hz; the demo
recorder drains the queue every few ms) takes the messages itself with rclpy's take/wait calls,
as ``rclpy.wait_for_message`` does. The subscription lives on a helper node ``<node>_<suffix>``
that no executor spins (an executor would take the messages first). DDS still receives and
queues every message (up to the history depth) in its own threads.
"""
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node


class PolledSubscription:
    """``topic`` of ``msg_type`` with ``qos`` (a QoSProfile or a history depth); ``raw=True`` keeps
    serialized messages."""

    def __init__(self, node, suffix, msg_type, topic, qos, raw=False):
        self.node = Node(f"{node.get_name()}_{suffix}", context=node.context)
        self.raw = raw
        self.sub = self.node.create_subscription(msg_type, topic, lambda _: None, qos, raw=raw)
        self._wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, node.context.handle)

    def take_all(self):
        """Every message queued since the last call, oldest first."""
        messages = []
        while (taken := self.sub.handle.take_message(self.sub.msg_type, self.raw)) is not None:
            messages.append(taken[0])
        return messages

    def take_latest(self):
        """The newest queued message (older ones are dropped), or None."""
        messages = self.take_all()
        return messages[-1] if messages else None

    def wait(self, timeout):
        """Block until a message is queued or ``timeout`` [s] passed."""
        self._wait_set.clear_entities()
        self._wait_set.add_subscription(self.sub.handle)
        self._wait_set.wait(int(timeout * 1e9))

    def destroy(self):
        self.node.destroy_node()

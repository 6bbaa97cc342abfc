"""The controller node's ``~/status`` topic and log: one line per event of the fail-safe
controller, rejected input, saturation or fault; a message repeated within 1 s is sent once, the
next one counts the suppressed ones (:class:`~flexmodal_ros.nodes.base.MessageThrottle`)."""
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String

from .base import MessageThrottle


class StatusReporter:
    """``~/status`` (std_msgs/String, transient local) and the log of ``node``."""

    def __init__(self, node):
        self._logger = node.get_logger()
        self.publisher = node.create_publisher(
            String, "~/status", QoSProfile(depth=20, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self._throttle = MessageThrottle(1.0)
        self._event_mode = None             # mode of the last reported controller event

    def publish(self, text):
        """``text`` on ``~/status`` only (e.g. a fault the guard already logged)."""
        self.publisher.publish(String(data=text))

    def report(self, text, warn=False):
        """Log ``text`` (warning or info) and publish it."""
        if warn:
            self._logger.warning(text)
        else:
            self._logger.info(text)
        self.publish(text)

    def report_throttled(self, text):
        """Warn and publish ``text``, each kind of message at most once per second (bad inputs can
        arrive at 1 kHz); the next one of a kind says how many were suppressed."""
        text = self._throttle(text)
        if text:
            self.report(text, warn=True)

    def flush_events(self, events):
        """Report the controller's ``events`` (emptied): a change of mode always, a repeat of the
        same mode (e.g. HOLD re-entered because the joint-state time keeps going backwards at 1 kHz)
        throttled per kind of message."""
        while events:
            text = events.pop(0)
            mode = text.split(":", 1)[0]
            if mode == self._event_mode:
                text = self._throttle(text)
            self._event_mode = mode
            if text:
                self.report(text)

    def saturated(self, joint_names, saturated):
        """Report (throttled) the joints of a command saturated at the effort limit."""
        if saturated.any():
            joints = [j for j, s in zip(joint_names, saturated) if s]
            self.report_throttled(f"torque saturated at the effort limit: {', '.join(joints)}")

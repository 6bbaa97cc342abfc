"""ROS 2 traffic stays on loopback (issue 2 acceptance: a capture on the external interface sees none).

A raw AF_PACKET capture (needs root, as on the development and CI machines) listens on every
interface while two real nodes discover each other, exchange messages and a service call. RTPS
frames (the DDS wire protocol, magic bytes ``RTPS``) must show up on ``lo`` — proving that the
capture sees ROS traffic at all — and never on any other interface.
"""
import socket
import threading
import time

from std_msgs.msg import String
from flexmodal_interfaces.srv import ComputeModalParameters

ETH_P_ALL = 0x0003


def interfaces():
    return [name for _, name in socket.if_nameindex()]


class Capture:
    """Counts frames carrying RTPS per interface until stopped."""

    def __init__(self):
        self.counts = {}
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(ETH_P_ALL))
        self._sock.settimeout(0.1)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                frame, address = self._sock.recvfrom(65535)
            except socket.timeout:
                continue
            if b"RTPS" in frame:
                self.counts[address[0]] = self.counts.get(address[0], 0) + 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sock.close()


def test_rtps_traffic_only_on_loopback(ros):
    with Capture() as capture:
        talker, listener = ros.node("confinement_talker"), ros.node("confinement_listener")
        received = []
        listener.create_subscription(String, "confinement_topic", received.append, 10)
        pub = talker.create_publisher(String, "confinement_topic", 10)
        server = talker.create_service(ComputeModalParameters, "confinement_service",
                                       lambda req, res: setattr(res, "success", True) or res)
        client = listener.create_client(ComputeModalParameters, "confinement_service")
        deadline = time.monotonic() + 10.0
        while len(received) < 5 and time.monotonic() < deadline:
            pub.publish(String(data="hello"))
            ros.executor.spin_once(timeout_sec=0.05)
        assert len(received) >= 5
        assert ros.call(client, ComputeModalParameters.Request()).success
        settle = time.monotonic() + 2.0  # keep capturing periodic discovery announcements
        ros.spin_until(lambda: time.monotonic() > settle, timeout=5.0, what="capture window")
        talker.destroy_service(server)
    assert capture.counts.get("lo", 0) > 0, f"capture saw no RTPS on lo at all: {capture.counts}"
    leaked = {name: count for name, count in capture.counts.items() if name != "lo"}
    assert not leaked, f"RTPS frames left loopback on {leaked} (interfaces: {interfaces()})"


def test_native_cycle_participant_stays_on_loopback(ros):
    """The controller's native cycle reads joint states and writes commands on an rcl context of
    its own (nodes/native_cycle.py): rcl_init in C reads ROS_AUTOMATIC_DISCOVERY_RANGE and
    ROS_DOMAIN_ID as rclpy does, so its traffic stays on loopback as well."""
    import numpy as np
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from flexmodal_ros.nodes.conversions import plant_joint_state
    from flexmodal_ros.nodes.feedforward_pd_controller import FeedforwardPdController
    from flexmodal_ros.robot.registry import load_robot
    from flexmodal_ros.simulation import rest_state

    model = load_robot("planar_2r")
    with Capture() as capture:
        controller = ros.add_node(FeedforwardPdController(context=ros.context, parameter_overrides=[
            Parameter("robot", value="planar_2r"), Parameter("state_timeout_s", value=5.0)]))
        assert controller.native_cycle is not None
        probe = ros.node("confinement_probe")
        commands = []
        probe.create_subscription(Float64MultiArray, "/effort_controller/commands", commands.append, 100)
        states = probe.create_publisher(JointState, "/joint_states", 10)
        x, hold = rest_state(model, np.zeros(model.n))
        n = model.n
        deadline = time.monotonic() + 10.0
        k = 0
        while len(commands) < 20 and time.monotonic() < deadline:
            k += 1
            states.publish(plant_joint_state(model, 1.0 + 1e-3 * k, x[:n], x[2 * n:3 * n], x[n:2 * n], x[3 * n:],
                                             hold, hold))
            ros.executor.spin_once(timeout_sec=0.005)
        assert len(commands) >= 20
        assert controller.statistics()["native_cycles"] > 0           # the C participant's traffic
        settle = time.monotonic() + 2.0
        ros.spin_until(lambda: time.monotonic() > settle, timeout=5.0, what="capture window")
    assert capture.counts.get("lo", 0) > 0, f"capture saw no RTPS on lo at all: {capture.counts}"
    leaked = {name: count for name, count in capture.counts.items() if name != "lo"}
    assert not leaked, f"RTPS frames left loopback on {leaked} (interfaces: {interfaces()})"

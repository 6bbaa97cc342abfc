"""Issue 28: the nodes use public rclpy only, and serve with either executor of their helper nodes
(nodes/polled.py: rclpy's EventsExecutor, or the SingleThreadedExecutor fallback forced by
FLEXMODAL_EXECUTOR=single), on the Jazzy and the Kilted rclpy alike."""
import json
import re
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRIVATE_RCLPY = re.compile(r"_rclpy\b|rclpy\.impl|\.handle\.pointer")
EXECUTORS = ["events", "single"]


def test_no_private_rclpy_in_the_package_and_the_benchmarks():
    """No rclpy._rclpy / rclpy.impl (the pybind module whose constructors differ between Jazzy and
    Kilted) and no .pointer of an rclpy handle anywhere in flexmodal_ros/ or benchmarks/."""
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for folder in ("flexmodal_ros", "benchmarks") for path in sorted((ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if PRIVATE_RCLPY.search(line)]
    assert not found, "private rclpy use:\n" + "\n".join(found)


def test_executor_kind_follows_the_environment_and_names_a_bad_value(monkeypatch):
    from flexmodal_ros.core.errors import FlexmodalError
    from flexmodal_ros.nodes import polled

    monkeypatch.delenv(polled.EXECUTOR_ENV, raising=False)
    assert polled.EventsExecutor is not None                  # Jazzy's 7.1.6 and Kilted's 9.1.2 have it
    assert polled.executor_kind() == "events"
    monkeypatch.setenv(polled.EXECUTOR_ENV, "Single ")
    assert polled.executor_kind() == "single"
    monkeypatch.setenv(polled.EXECUTOR_ENV, "multi")
    with pytest.raises(FlexmodalError, match="FLEXMODAL_EXECUTOR: expected events or single, got 'multi'"):
        polled.executor_kind()


@pytest.mark.parametrize("kind", EXECUTORS)
def test_polled_entities_serve_with_either_executor(ros, monkeypatch, kind):
    """With each executor: a ServiceThread answers a PolledClient (names resolved and remapped by
    the main node), a PolledSubscription keeps the messages up to its depth, a SubscriptionThread
    hands every message and its idle ticks to its thread; the helper nodes are hidden and named
    after their main node."""
    from std_msgs.msg import String
    from std_srvs.srv import Trigger
    from flexmodal_ros.nodes.polled import PolledClient, PolledSubscription, ServiceThread, SubscriptionThread

    monkeypatch.setenv("FLEXMODAL_EXECUTOR", kind)
    expected = "EventsExecutor" if kind == "events" else "SingleThreadedExecutor"     # (a factory: no class)
    server_node = ros.node("polled_server", namespace="/arm",
                           cli_args=["--ros-args", "-r", "trigger:=remapped_trigger"])
    client_node = ros.node("polled_client", namespace="/arm")
    lock, calls = threading.Lock(), []

    def handler(request, response):
        calls.append(threading.get_ident())
        response.success, response.message = True, f"call {len(calls)}"
        return response

    served = ServiceThread(server_node, Trigger, "trigger", handler, lock)
    client = PolledClient(client_node, Trigger, "remapped_trigger")
    messages, idles = [], []
    publisher = client_node.create_publisher(String, "/polled_topic", 10)
    kept = PolledSubscription(server_node, String, "/polled_topic", 3)
    thread = SubscriptionThread(server_node, String, "/polled_topic", 10, messages.append,
                                lambda: idles.append(time.monotonic()), 0.01, lock)
    try:
        assert served.name == "/arm/remapped_trigger" and client.name == "/arm/remapped_trigger"
        assert type(served.helper.executor).__name__ == type(thread.helper.executor).__name__ == expected
        assert served.helper.node.get_name() == "_polled_server_remapped_trigger"
        assert served.helper.node.get_namespace() == "/arm"
        served.start()
        thread.start()
        assert client.wait_for_service(10.0)
        answer = client.call(Trigger.Request(), 10.0)
        assert answer.success and answer.message == "call 1" and threading.get_ident() not in calls
        ros.spin_until(lambda: publisher.get_subscription_count() == 2, 10.0, "subscribed")
        for k in range(5):
            publisher.publish(String(data=str(k)))
        ros.spin_until(lambda: len(messages) == 5, 10.0, "every message on the thread")
        assert [m.data for m in messages] == ["0", "1", "2", "3", "4"]
        time.sleep(0.1)
        assert [m.data for m in kept.take_all()] == ["2", "3", "4"]      # depth 3: oldest dropped
        assert kept.take_latest() is None
        count = len(idles)
        time.sleep(0.2)
        assert 5 <= len(idles) - count <= 25                             # ~20 ticks at 100 Hz
    finally:
        kept.destroy()
        thread.stop()
        served.stop()
        client.destroy()


@pytest.mark.parametrize("kind", EXECUTORS)
def test_a_stop_waits_for_a_busy_thread_at_most_its_bound(ros, monkeypatch, capfd, kind):
    """A SubscriptionThread whose callback does not return: stop() gives up after STOP_JOIN_S with a
    warning naming the thread, the helper node stays until the callback returns, and the thread
    then releases it (the helper node leaves the graph)."""
    from std_msgs.msg import String
    from flexmodal_ros.nodes import polled

    monkeypatch.setenv("FLEXMODAL_EXECUTOR", kind)
    node = ros.node("busy_owner")
    entered, release = threading.Event(), threading.Event()

    def on_message(message):
        entered.set()
        release.wait(10.0)

    publisher = node.create_publisher(String, "/busy_topic", 10)
    thread = polled.SubscriptionThread(node, String, "/busy_topic", 10, on_message, lambda: None, 1.0,
                                       threading.Lock())
    helper = thread.helper.name
    thread.start()
    try:
        ros.spin_until(lambda: publisher.get_subscription_count() == 1, 10.0, "subscribed")
        publisher.publish(String(data="x"))
        assert entered.wait(10.0)
        start = time.monotonic()
        thread.stop()
        waited = time.monotonic() - start
        assert polled.STOP_JOIN_S <= waited < polled.STOP_JOIN_S + 0.5, waited
        assert helper in node.get_node_names()                       # still busy: not released
        assert f"thread busy_owner:/busy_topic still busy {polled.STOP_JOIN_S:g} s after its stop" \
            in capfd.readouterr().err
    finally:
        release.set()
    ros.spin_until(lambda: helper not in node.get_node_names(), 10.0, "the helper released by its thread")
    thread.stop()                                                    # a second stop does nothing


@pytest.mark.parametrize("kind", EXECUTORS)
def test_nodes_start_and_serve_with_either_executor(ros, ros_env, tmp_path, kind):
    """The console-script nodes with FLEXMODAL_EXECUTOR=events and =single: the simulator's 1 kHz
    states reach the controller (every cycle in Python here: its SubscriptionThread), whose
    statistics answer; the modal server answers ~/compute_modal_parameters (ServiceThread) from a
    PolledClient. With =single each node says once which executor it uses and what it costs."""
    from conftest import RosProcess, _resolve_executable
    from std_srvs.srv import Trigger
    from flexmodal_interfaces.srv import ComputeModalParameters
    from flexmodal_ros.nodes.polled import PolledClient

    env = {**ros_env, "FLEXMODAL_EXECUTOR": kind}
    argv = {"sim": ["flexible_joint_simulator", "--ros-args", "-p", "robot:=planar_2r"],
            "ctrl": ["feedforward_pd_controller", "--ros-args", "-p", "robot:=planar_2r", "-p", "native_cycle:=false"],
            "modal": ["modal_analysis_server", "--ros-args", "-p", "robot:=planar_2r"]}
    processes = {key: RosProcess([_resolve_executable(a[0]), *a[1:]], env, tmp_path / f"{key}.log")
                 for key, a in argv.items()}
    node = ros.node("executor_probe")
    statistics = PolledClient(node, Trigger, "/feedforward_pd_controller/statistics")
    modal = PolledClient(node, ComputeModalParameters, "/modal_analysis/compute_modal_parameters")
    try:
        assert statistics.wait_for_service(30.0) and modal.wait_for_service(30.0), \
            {key: p.log() for key, p in processes.items()}
        answer = _call(modal, ComputeModalParameters.Request(positions=[0.3, -0.4]))
        assert answer.success and answer.result.num_modes == 4, answer.message
        deadline = time.monotonic() + 20.0
        while (stats := json.loads(_call(statistics, Trigger.Request()).message))["cycles"] < 200:
            assert time.monotonic() < deadline, stats
            time.sleep(0.1)
        assert stats["native_cycles"] == 0
    finally:
        statistics.destroy()
        modal.destroy()
        codes = {key: p.stop() for key, p in processes.items()}
    assert codes == {"sim": 0, "ctrl": 0, "modal": 0}, {key: p.log() for key, p in processes.items()}
    for key, process in processes.items():
        log = process.log(200)
        assert "Traceback" not in log, log
        notices = log.count("FLEXMODAL_EXECUTOR=single: subscriptions and services served off the executor")
        assert notices == (kind == "single"), log


def _call(client, request):
    """The first call right after discovery can lose its answer (the server's writer may not have
    matched the client's reader yet): a few tries."""
    for attempt in range(5):
        try:
            return client.call(request, 2.0)
        except TimeoutError:
            if attempt == 4:
                raise

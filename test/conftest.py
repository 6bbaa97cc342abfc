"""Shared pytest fixtures for flexmodal_ros.

ROS isolation happens when this file is imported, i.e. before any test module is collected and
therefore before any ``rclpy.init``:

* ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (DDS never leaves loopback), always forced;
* ``ROS_DOMAIN_ID`` is set to a domain private to this pytest process, in 1..101, reserved with a
  lock file in the temp directory so that concurrent pytest sessions on the machine (other
  developers, xdist workers) never share a domain. A value exported by ``scripts/env.sh`` is
  overridden on purpose.
* the Fast DDS profile config/fastdds_discovery.xml (loopback-only receive sockets), unless one is
  set, through the variable the installed Fast DDS reads (flexmodal_ros/core/fastdds.py: Jazzy's
  2.x ``FASTRTPS_DEFAULT_PROFILES_FILE``, Kilted's 3.x ``FASTDDS_DEFAULT_PROFILES_FILE``).

Marker ``ros`` (set here at collection): every test that uses a ROS fixture below, directly or
through another fixture, or lives in a module that imports rclpy or a ROS interface package.
``make test-jazzy`` runs these (plus the README examples) on the second distribution.

Fixtures (ROS ones import rclpy lazily, so core-only test files do not pay for it):

``ros_env`` (session)
    ``dict`` environment for ROS subprocesses: ``os.environ`` with the two variables above and
    ``PYTHONUNBUFFERED=1``.
``ros`` (function)
    :class:`RosHarness`: a fresh ``rclpy`` Context and SingleThreadedExecutor for in-process node
    tests. ``ros.node(name)`` creates a node in that context and adds it to the executor;
    ``ros.call(client, request)`` waits for the service and returns the response, spinning the
    executor (so servers living in the same harness are served); ``ros.spin_until(predicate)``
    spins until a condition holds (e.g. a subscription received a message). Everything is
    destroyed and the context shut down at teardown.
``ros_process`` (function)
    Factory ``ros_process(argv, wait_for_service=(name, srv_type), timeout=30.0)`` that starts a
    console-script node (``["modal_analysis_server", "--ros-args", ...]``; bare names are looked up
    in the virtualenv's bin directory first) or any command as a subprocess with ``ros_env``, and,
    if asked, waits until the service is available (failing early with the process log if it
    exits). Returns a :class:`RosProcess`; every process still running is stopped (SIGINT, then
    SIGKILL) at teardown.
"""
from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import types
import time
from pathlib import Path

import pytest

from flexmodal_ros.core.fastdds import profile_variable

DOMAIN_ID_RANGE = range(1, 102)


def _reserve_domain_id():
    """Lock and return (domain id, open lock file) for a ROS domain no other pytest process holds."""
    start = os.getpid() % len(DOMAIN_ID_RANGE)
    for offset in range(len(DOMAIN_ID_RANGE)):
        domain = DOMAIN_ID_RANGE[(start + offset) % len(DOMAIN_ID_RANGE)]
        handle = open(Path(tempfile.gettempdir()) / f"flexmodal_ros_test_domain_{domain}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return domain, handle
    raise RuntimeError("conftest: every ROS_DOMAIN_ID in 1..101 is locked by another test session")


# Held open (and locked) for the lifetime of the pytest process.
_DOMAIN_ID, _DOMAIN_LOCK = _reserve_domain_id()
atexit.register(_DOMAIN_LOCK.close)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(_DOMAIN_ID)
os.environ.setdefault(profile_variable(),
                      str(Path(__file__).resolve().parent.parent / "config" / "fastdds_discovery.xml"))

ROS_FIXTURES = {"ros", "ros_process", "ros_env"}
# Top-level packages of the ROS 2 Python API (anything ending in _msgs/_srvs/_interfaces counts too).
ROS_PYTHON_ROOTS = {"rclpy", "ament_index_python", "rosidl_runtime_py"}
ROS_PYTHON_SUFFIXES = ("_msgs", "_srvs", "_interfaces")


def _imports_ros(module) -> bool:
    """Whether a test module has imported rclpy or a ROS interface package at its top level."""
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        root = name.split(".")[0] if isinstance(name, str) else ""
        if root in ROS_PYTHON_ROOTS or root.endswith(ROS_PYTHON_SUFFIXES):
            return True
    return False


def pytest_collection_modifyitems(config, items):
    modules = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module not in modules:
            modules[module] = _imports_ros(module)
        if ROS_FIXTURES & set(getattr(item, "fixturenames", ())) or modules.get(module, False):
            item.add_marker(pytest.mark.ros)


@pytest.fixture(scope="session")
def ros_env() -> dict:
    """Environment for ROS processes started by tests (loopback discovery, private domain)."""
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert os.environ["ROS_DOMAIN_ID"] == str(_DOMAIN_ID)
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


class RosHarness:
    """A fresh rclpy Context + SingleThreadedExecutor; nodes created here are spun by ``executor``."""

    def __init__(self):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self._nodes = []

    def node(self, name: str, **kwargs):
        """Create an rclpy Node in this context (kwargs go to ``Node``) and add it to the executor."""
        from rclpy.node import Node

        node = Node(name, context=self.context, **kwargs)
        self.add_node(node)
        return node

    def add_node(self, node):
        """Spin an already created node (it must use ``self.context``); destroyed at teardown."""
        self.executor.add_node(node)
        self._nodes.append(node)
        return node

    def spin_until(self, predicate, timeout: float = 10.0, what: str = "condition"):
        """Spin the executor until ``predicate()`` is true; ``TimeoutError`` naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout} s")
            self.executor.spin_once(timeout_sec=0.05)

    def call(self, client, request, timeout: float = 10.0):
        """Wait for ``client``'s service, call it with ``request`` and return the response."""
        self.spin_until(client.service_is_ready, timeout, f"service {client.srv_name} available")
        future = client.call_async(request)
        self.spin_until(future.done, timeout, f"response from {client.srv_name}")
        return future.result()

    def send_goal(self, client, goal, feedback_callback=None, attempts: int = 5, wait: float = 6.0):
        """Send ``goal`` on the ActionClient ``client`` and return its goal handle. A goal sent right
        after ``wait_for_server`` can lose its response: the server's reply writer may not have
        matched this client's reader yet (rmw: "failed to send response (timeout): client will not
        receive response"). The goal is then sent again, up to ``attempts`` times ``wait`` s; the
        callers' goals are independent of one another (a lost first one may make the server busy)."""
        for _ in range(attempts):
            sent = client.send_goal_async(goal, feedback_callback=feedback_callback)
            try:
                self.spin_until(sent.done, wait, "goal response")
                return sent.result()
            except TimeoutError:
                continue
        raise TimeoutError(f"no goal response after {attempts} attempts of {wait} s")

    def shutdown(self):
        import rclpy

        for node in self._nodes:
            self.executor.remove_node(node)
            node.destroy_node()
        self.executor.shutdown()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def ros(ros_env):
    """In-process ROS harness (fresh context + executor), shut down after the test."""
    harness = RosHarness()
    yield harness
    harness.shutdown()


class RosProcess:
    """A node running as a subprocess; stdout and stderr go to ``log_path``."""

    def __init__(self, argv, env, log_path: Path):
        self.argv = list(argv)
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT)

    def log(self, last_lines: int = 40) -> str:
        """Last lines of the process output."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-last_lines:])

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT (clean rclpy shutdown), SIGKILL after ``timeout`` s; returns the exit code."""
        if self.running():
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode


def _resolve_executable(name: str) -> str:
    """Absolute path of a command: the virtualenv's bin directory first, then PATH."""
    if os.sep in name:
        return name
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"executable {name!r} not found (run `make setup`?)")
    return found


def _wait_until_served(process: RosProcess, service_name: str, srv_type, timeout: float):
    """Block until ``service_name`` is served (in a throwaway context); fail if ``process`` dies first."""
    harness = RosHarness()
    try:
        client = harness.node("flexmodal_test_service_waiter").create_client(srv_type, service_name)
        deadline = time.monotonic() + timeout
        while not client.service_is_ready():
            if not process.running():
                pytest.fail(f"{process.argv[0]} exited with code {process.popen.returncode} before "
                            f"serving {service_name}:\n{process.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{service_name} not available within {timeout} s; "
                            f"{process.argv[0]} output:\n{process.log()}")
            harness.executor.spin_once(timeout_sec=0.1)
    finally:
        harness.shutdown()


@pytest.fixture
def ros_process(ros_env, tmp_path):
    """Factory starting ROS node subprocesses (see module docstring); stops them at teardown."""
    processes = []

    def start(argv, *, wait_for_service=None, timeout: float = 30.0) -> RosProcess:
        argv = [_resolve_executable(argv[0]), *argv[1:]]
        log_path = tmp_path / f"{Path(argv[0]).name}_{len(processes)}.log"
        process = RosProcess(argv, ros_env, log_path)
        processes.append(process)
        if wait_for_service is not None:
            _wait_until_served(process, *wait_for_service, timeout)
        return process

    yield start
    for process in processes:
        process.stop()

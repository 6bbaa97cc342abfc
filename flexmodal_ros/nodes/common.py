"""What every flexmodal node shares: the robot-model parameters, log throttling, the entry point."""
import signal
import time

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from ..errors import FlexmodalError
from ..robots import resolve_any_model, resolve_closed_chain, resolve_model


def declare_robot_model(node, closed_chain=False, constrained=False):
    """Declare ``robot`` / ``urdf_path`` / ``params_path`` and return the robot model they name.

    ``closed_chain=True`` also accepts robots with loop closures (returned as
    :class:`~flexmodal_ros.constrained.robot.ClosedChainRobot`); ``constrained=True`` returns
    every robot that way."""
    robot, urdf, params = (node.declare_parameter(name, "").value
                           for name in ("robot", "urdf_path", "params_path"))
    if not robot and not params:
        raise FlexmodalError("parameters: set 'robot' or 'params_path' (and optionally 'urdf_path')")
    if constrained:
        return resolve_closed_chain(robot or None, urdf or None, params or None)
    if closed_chain:
        return resolve_any_model(robot or None, urdf or None, params or None)
    return resolve_model(robot or None, urdf or None, params or None)


def timing_clock(node):
    """The clock for a node's timing (watchdogs, stale-state checks): the ROS clock when the node
    runs with ``use_sim_time`` (it then stops and runs with the simulation: Gazebo, the simulators'
    /clock), the steady clock otherwise (a real robot). Read it with :func:`seconds`."""
    if node.get_parameter("use_sim_time").value:
        return node.get_clock()
    return Clock(clock_type=ClockType.STEADY_TIME)


def seconds(clock):
    """Current time of ``clock`` [s]."""
    return clock.now().nanoseconds * 1e-9


class Throttle:
    """True at most once per ``period`` [s] of steady time — cheap enough for 1 kHz callbacks
    (rclpy's ``throttle_duration_sec`` inspects the call stack on every call)."""

    def __init__(self, period):
        self.period = period
        self._last = -float("inf")

    def __call__(self):
        now = time.monotonic()
        if now - self._last < self.period:
            return False
        self._last = now
        return True


def run_node(node_factory, executable, args=None, make_executor=SingleThreadedExecutor):
    """Console-script body: init rclpy, build the node, spin until Ctrl-C or shutdown.

    A configuration error while building the node prints one line and returns exit code 2.
    Ctrl-C (SIGINT) or SIGTERM at any point after ``rclpy.init``, also while the node is being
    built, ends the node cleanly with exit code 0. Under ``ros2 launch`` one Ctrl-C reaches a node
    twice (the terminal signals the whole process group, then launch signals each node), so
    SIGINT and SIGTERM are ignored once the clean-up has begun: a second signal cannot interrupt
    it with a KeyboardInterrupt traceback (launch still escalates to SIGKILL if a node hangs). A
    callback interrupted by the shutdown (its publish fails once the context is gone) ends the
    node the same way.
    """
    rclpy.init(args=args)
    node = executor = None
    try:
        node = node_factory()
        executor = make_executor()
        executor.add_node(node)
        executor.spin()
    except FlexmodalError as exc:
        if node is not None:
            raise
        print(f"{executable}: error: {exc}", flush=True)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # The signal handler shuts the context down while a callback may be running: its next
        # publish then fails (RCLError "publisher's context is invalid"). That is the shutdown,
        # not a fault; anything raised while the context is still valid is one.
        if rclpy.ok():
            raise
    finally:
        _ignore_stop_signals()
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        _ignore_stop_signals()       # rclpy's shutdown restores the handlers it replaced
    return 0


def _ignore_stop_signals():
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)

"""What every flexmodal node shares: the robot-model parameters, log throttling, the entry point."""
import time

import rclpy
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
    """
    rclpy.init(args=args)
    try:
        node = node_factory()
    except FlexmodalError as exc:
        print(f"{executable}: error: {exc}", flush=True)
        rclpy.try_shutdown()
        return 2
    executor = make_executor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0

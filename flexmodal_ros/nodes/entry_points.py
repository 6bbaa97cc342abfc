"""Console-script entry points of the nodes (setup.py): light on purpose.

A console script imports its entry module before it calls anything. The node modules take
seconds to import (rclpy, Pinocchio, CasADi, SciPy); a Ctrl-C or SIGTERM in that time (e.g. one
Ctrl-C right after ``ros2 launch flexmodal_ros bringup.launch.py``) would end the process with a
KeyboardInterrupt traceback and exit code -2. This module imports nothing heavy: it takes the
stop signals first, then imports the node module and runs its ``main`` (:func:`run_node` takes
over from ``rclpy.init``); a stop signal before that ends the process quietly with exit code 0.
"""
import importlib
import signal


def _run(module):
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        main = importlib.import_module(f"flexmodal_ros.nodes.{module}").main
        return main()
    except KeyboardInterrupt:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def modal_analysis_server():
    return _run("modal_analysis_server")


def identification_server():
    return _run("identification_server")


def feedforward_pd_controller():
    return _run("feedforward_pd_controller")


def flexible_joint_simulator():
    return _run("flexible_joint_simulator")


def mujoco_simulator():
    return _run("mujoco_simulator")


def modal_test():
    return _run("modal_test")

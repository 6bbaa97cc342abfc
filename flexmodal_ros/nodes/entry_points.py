"""Console-script entry points of the nodes (setup.py): light on purpose.

A console script imports its entry module before it calls anything. The node modules take
seconds to import (rclpy, Pinocchio, CasADi, SciPy); a Ctrl-C or SIGTERM in that time (e.g. one
Ctrl-C right after ``ros2 launch flexmodal_ros bringup.launch.py``) would end the process with a
KeyboardInterrupt traceback and exit code -2. This module imports nothing heavy: it takes the
stop signals first, then imports the node module and runs its ``main`` (:func:`run_node` takes
over from ``rclpy.init``); a stop signal before that ends the process quietly with exit code 0.

Once ``main`` has returned (the node destroyed, the ROS context shut down and destroyed: its
participant has left the graph), the process ends at once (``os._exit`` after flushing the
output): the interpreter's own finalization — garbage collection of Pinocchio, CasADi and rclpy
objects — took long enough on a loaded machine that ``ros2 launch`` escalated one Ctrl-C to
SIGTERM (every node "failed to terminate 5 s after SIGINT", all of them in "Garbage-collecting";
the measurement: docs/ros_robustness.md, "Shutdown").

A stop signal also bounds the whole stop: STOP_BOUND_S after it, a process still cleaning up
prints the stack of every thread ("Timeout (0:00:01.500000)!", :mod:`faulthandler`) and ends
with exit code 1. The waits it cuts short are the middleware's, under rclpy's ``destroy_node``:
Fast DDS 3.2 (the Kilted wheels) spins in ``DomainParticipant::set_listener`` while it destroys the
participant if a discovery callback is running, and starves that callback
(eProsima/Fast-DDS#6513), or deadlocks removing a writer; seen as a node ending 2.2-4.0 s after a
Ctrl-C, or not before ``ros2 launch`` killed it (docs/ros_robustness.md, "Shutdown"). Both hold
the GIL, so the bound is faulthandler's watchdog thread, which needs none.
"""
import contextlib
import faulthandler
import functools
import importlib
import os
import signal
import sys

from . import stop_request

STOP_BOUND_S = 1.5      # longest a stop signal's clean-up may take; then the process ends, code 1 [s]


def _run(module, stop_bound_s=STOP_BOUND_S):
    return run_main(lambda: importlib.import_module(f"flexmodal_ros.nodes.{module}").main, stop_bound_s)


def run_main(load_main, stop_bound_s=STOP_BOUND_S):
    """Run ``load_main()()`` as a console script's body: stop signals taken first, the process
    ended with ``os._exit`` and the body's exit code (a stop signal: 0). A stop signal's clean-up
    taking longer than ``stop_bound_s`` (None: unbounded) ends the process with exit code 1 and
    the stack of every thread on stderr (see the module's text)."""
    # While the node module is imported nothing has started yet: a stop signal ends the process
    # at once (raising into an import can leave a C extension half initialized: a Ctrl-C 1 s
    # after start crashed NumPy 1.26's import with SIGSEGV on Jazzy).
    signal.signal(signal.SIGINT, _exit_at_once)
    signal.signal(signal.SIGTERM, _exit_at_once)
    sys.unraisablehook = _unraisable
    try:
        main = load_main()
        signal.signal(signal.SIGINT, functools.partial(_interrupt, stop_bound_s))
        signal.signal(signal.SIGTERM, functools.partial(_interrupt, stop_bound_s))
        code = main()
    except KeyboardInterrupt:
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):      # a closed pipe or stream: nothing to flush to
            stream.flush()
    os._exit(code or 0)


def _interrupt(stop_bound_s, signum, frame):
    if not stop_request.requested.is_set():
        stop_request.requested.set()
        if stop_bound_s is not None:
            faulthandler.dump_traceback_later(stop_bound_s, exit=True)
    raise KeyboardInterrupt


def _unraisable(unraisable):
    """A stop signal's KeyboardInterrupt that lands in a callback Python cannot raise from (e.g.
    importlib's module-lock clean-up during a deferred import) is the stop, already flagged in
    :mod:`.stop_request` for :func:`~.base.run_node`: not printed as "Exception ignored". Neither
    is what it leaves behind: an rclpy object whose ``__init__`` it interrupted fails in ``__del__``
    on an attribute never set (CI, Jazzy: a Future, an executor's Task, of the controller stopped
    under load, "AttributeError: 'Task' object has no attribute '_exception'"; an executor of a
    node that the bringup stopped while it was being built, "'SingleThreadedExecutor' object has
    no attribute '_sigint_gc'")."""
    if stop_request.requested.is_set() and (isinstance(unraisable.exc_value, KeyboardInterrupt)
                                            or _half_built_rclpy_object(unraisable)):
        return
    sys.__unraisablehook__(unraisable)


def _half_built_rclpy_object(unraisable):
    where = unraisable.object
    return (isinstance(unraisable.exc_value, AttributeError)
            and getattr(where, "__qualname__", "") in ("Future.__del__", "Executor.__del__")
            and getattr(where, "__module__", "") in ("rclpy.task", "rclpy.executors"))


def _exit_at_once(signum, frame):
    os._exit(0)


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


def flexmodal_bringup():
    return _run("bringup", stop_bound_s=None)        # stops its nodes: their own bounds apply


def calibration_server():
    return _run("calibration_server")

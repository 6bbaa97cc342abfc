"""nodes/entry_points.py: a stop signal's KeyboardInterrupt that lands where Python cannot raise it."""
import subprocess
import sys

SCRIPT = r'''
import sys, weakref
from flexmodal_ros.nodes import entry_points, stop_request
sys.unraisablehook = entry_points._unraisable
class Box: pass
def stop_during_cleanup(_):
    raise KeyboardInterrupt             # as the stop signal's handler does inside importlib's lock clean-up
first = Box(); ref1 = weakref.ref(first, stop_during_cleanup)
STOPPED
del first
second = Box(); ref2 = weakref.ref(second, lambda _: 1 / 0)
del second
from rclpy.task import Task
half_built = Task.__new__(Task)         # a Task whose __init__ the stop signal interrupted
del half_built
print("ended")
'''


def _run(stopped):
    script = SCRIPT.replace("STOPPED", "stop_request.requested.set()" if stopped else "pass")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_the_stop_is_not_printed_as_an_ignored_exception():
    """CI of 2026-11-28 (Jazzy, bringup stopped during a deferred import): "Exception ignored in
    ... KeyboardInterrupt" in a node's log; and (Jazzy, controller stopped under load) the
    AttributeError of a half-built rclpy Task's __del__."""
    run = _run(stopped=True)
    assert run.stdout.strip() == "ended"
    assert "KeyboardInterrupt" not in run.stderr and "_exception" not in run.stderr, run.stderr
    assert "ZeroDivisionError" in run.stderr            # any other unraisable error is still printed


def test_an_interrupt_without_a_stop_request_is_still_printed():
    run = _run(stopped=False)
    assert "KeyboardInterrupt" in run.stderr and "ZeroDivisionError" in run.stderr
    assert "'Task' object has no attribute '_exception'" in run.stderr

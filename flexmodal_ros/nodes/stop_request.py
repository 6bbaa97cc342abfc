"""Whether this process was asked to stop (no rclpy: the console-script entry points import it first).

:mod:`.entry_points` sets :data:`requested` when SIGINT or SIGTERM arrives, before it raises
KeyboardInterrupt into the main thread. An exception raised inside rclpy's C++ code converts that
KeyboardInterrupt into another error (rclpy 7.1 on Jazzy: "RuntimeError: Unable to convert call
argument '0' to Python object" from the executor's ``take_message``) while the context may not yet
be shut down; :func:`~.base.run_node` reads the flag to treat it as the stop it is, not a fault.
"""
import threading

requested = threading.Event()

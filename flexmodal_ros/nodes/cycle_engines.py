"""The controller node's cycle engines behind one interface: what runs the control cycle of each
joint-state sample and the watchdog, and writes the commands.

- :class:`ExecutorEngine` (``use_sim_time``): the executor runs both (a joint-state subscription
  and a watchdog timer on simulation time, which it also takes from /clock); a watchdog on another
  thread could read a simulation time newer than the states it has seen.
- :class:`ThreadEngine` (steady clock): a thread of its own that waits for joint states only and
  checks the watchdog (:class:`~flexmodal_ros.nodes.polled.SubscriptionThread`); the executor keeps
  trajectories, parameters and services, which never run during a cycle.
- :class:`NativeEngine` (steady clock, ``native_cycle``): that thread in C
  (:class:`~flexmodal_ros.nodes.native_cycle.NativeCycleThread`, the flexmodal_native package
  built at install time, reading the joint states and writing every command on an rcl node of its
  own): the steady cycles (:mod:`flexmodal_ros.control.fast_path`) run there without Python, every
  other sample and the overdue watchdog run the Python cycle, with the same commands to the bit.

Each engine offers ``lock`` (held around everything that touches the controller), ``timing``
(:class:`~flexmodal_ros.nodes.realtime.CycleTiming`-like late-cycle bookkeeping), ``thread`` (the
thread to start and stop, or None), ``native`` (the C cycles or None), :meth:`publish` (one
serialized command) and ``native_cycles``. :func:`select_engine` picks one.
"""
import threading

from rclpy.clock import ClockType
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..core.errors import BuildError
from .native_cycle import NativeCycleThread
from .polled import SubscriptionThread, locked
from .realtime import CycleTiming

STATES, COMMANDS = "joint_states", "effort_controller/commands"   # relative: namespaces apply
COMMAND_QOS = QoSProfile(depth=10)        # reliable, volatile, keep last 10


class _PythonEngine:
    """Cycles in Python: commands through a publisher of the node."""
    native, native_cycles = None, 0

    def __init__(self, node, lock, period, thread):
        self.lock, self.timing, self.thread = lock, CycleTiming(period), thread
        self._publisher = node.create_publisher(Float64MultiArray, COMMANDS, COMMAND_QOS)

    def publish(self, serialized):
        self._publisher.publish(serialized)


class ExecutorEngine(_PythonEngine):
    """Joint-state callback and watchdog timer on the executor (simulation time)."""

    def __init__(self, node, states_qos, on_joint_state, on_watchdog, period, watchdog_period, clock):
        lock = threading.Lock()
        node.create_subscription(JointState, STATES, locked(lock, on_joint_state), states_qos, raw=True)
        node.create_timer(watchdog_period, locked(lock, on_watchdog), clock=clock)
        super().__init__(node, lock, period, None)


class ThreadEngine(_PythonEngine):
    """Joint states and watchdog on a thread of their own (steady clock)."""

    def __init__(self, node, states_qos, on_joint_state, on_watchdog, period, watchdog_period):
        lock = threading.Lock()
        thread = SubscriptionThread(node, JointState, STATES, states_qos, on_joint_state, on_watchdog,
                                    watchdog_period, lock, raw=True)
        super().__init__(node, lock, period, thread)


class NativeEngine:
    """The C cycles; they write every command, the Python cycles' too (one writer, in cycle order)."""

    def __init__(self, native):
        self.native = self.thread = native
        self.lock, self.timing = native.lock, native.timing

    @property
    def native_cycles(self):
        return self.native.native_cycles

    def publish(self, serialized):
        self.native.publish(serialized)


def select_engine(node, ctrl, reader, writer, compute_us, on_joint_state, on_watchdog, period, watchdog_period,
                  states_qos, clock, native_cycle):
    """The engine for ``node`` (module docstring): :class:`ExecutorEngine` when ``clock`` is not the
    steady clock; else :class:`NativeEngine` when ``native_cycle`` is asked for and available
    (else a warning saying why and what it costs), or :class:`ThreadEngine`."""
    if clock.clock_type is not ClockType.STEADY_TIME:
        return ExecutorEngine(node, states_qos, on_joint_state, on_watchdog, period, watchdog_period, clock)
    if native_cycle:
        try:
            return NativeEngine(NativeCycleThread(node, STATES, states_qos, COMMANDS, COMMAND_QOS, ctrl, reader,
                                                  writer, compute_us, on_joint_state, on_watchdog, watchdog_period,
                                                  period))
        except BuildError as exc:
            if ctrl.law.compiled is not None:        # else the law's warning said so
                node.get_logger().warning(
                    f"native_cycle: the C cycles are unavailable ({exc}); every cycle runs in Python: ~3x the "
                    "compute time per cycle at p99 (benchmarks/bench_controller_ros.py)")
    return ThreadEngine(node, states_qos, on_joint_state, on_watchdog, period, watchdog_period)

"""The contract between :class:`~.failsafe.FailSafeController` and a cycle run outside it (ROS-free):
the native C cycle of the controller node (flexmodal_ros/nodes/native_cycle.py,
flexmodal_native/src/control_cycle.c) runs the *steady* cycles, those that change nothing but the
sample, the receipt time and the cycle count.

:func:`steady_cycle` gives the conditions (:class:`SteadyCycle`) under which the next sample's cycle
is steady, or None when any sample may change more (WAITING, STALE, an excitation scheduled or
running, TRACKING a shaped (explicit) reference, no segment loaded). A sample meeting them — stamp
after ``previous_t``; finite and within the controller's ``state_bounds``; in HOLD before
``hold_until``, in TRACKING inside the loaded segment — whose law result (q_m, q̇_m into the law,
and in TRACKING the phase (t − t0 − segment_begin) / T) is finite with no joint saturated has the
same ``update_state`` + ``compute`` outcome as ``adopt_steady_cycles`` with that sample.
"""
import math
from typing import NamedTuple

from .law import Mode


class SteadyCycle(NamedTuple):
    """What makes the next sample's cycle steady (:func:`steady_cycle`): its stamp after
    ``previous_t`` [s]; ``tracking`` False (HOLD): before ``hold_until`` [s]; True (TRACKING):
    ``segment_begin`` <= t − ``t0`` < ``segment_end`` [s]."""
    previous_t: float
    tracking: bool
    hold_until: float = math.inf
    t0: float = 0.0
    segment_begin: float = 0.0
    segment_end: float = 0.0


def steady_cycle(mode, sample, trajectory, excitation):
    """:class:`SteadyCycle` for a controller in ``mode`` with last valid ``sample``, reference
    ``trajectory`` (:class:`~.admission.AdmittedTrajectory` or None) and ``excitation`` (scheduled
    or running, or None); None when the next cycle may change more (module docstring)."""
    if sample is None or excitation is not None:     # an excitation: every cycle in Python
        return None
    traj = trajectory
    if mode == Mode.HOLD:
        return SteadyCycle(sample.t, False, hold_until=traj.t0 if traj is not None else math.inf)
    if (mode == Mode.TRACKING and traj is not None and not traj.explicit and not traj.start_now
            and traj.segment_begin < traj.segment_end):
        return SteadyCycle(sample.t, True, t0=traj.t0, segment_begin=traj.segment_begin,
                           segment_end=traj.segment_end)
    return None

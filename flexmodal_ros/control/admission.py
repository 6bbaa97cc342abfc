"""Admission of a waypoint reference before the controller may track it (ROS-free).

:class:`TrajectoryAdmission` checks a reference against the measured state and the limits
(:class:`~.limits.SafetyLimits`: sizes, duration, URDF position limits, start tolerance, the peak
speed and acceleration of every C⁴ segment (4.29): |q̇| = η'_max |q_b − q_a| / T,
|q̈| = η''_max |q_b − q_a| / T², η'_max = 630/256, η''_max ≈ 9.372) and returns an
:class:`AdmittedTrajectory`, which loads its segments into the control law cycle by cycle.
"""
import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_array
from ..robot.trajectory import PiecewiseC4Trajectory
from .limits import LIMIT_TOLERANCE


class AdmittedTrajectory:
    """An accepted reference: waypoint trajectory (times from t0), its start time t0 [s] (for a
    ``start_now`` trajectory an estimate, replaced by the time of the first cycle that runs it) and
    the segment currently loaded into the control law."""

    def __init__(self, path, t0, start_now=False):
        self.path, self.t0, self.start_now = path, t0, start_now
        self.duration = path.duration
        self.explicit = float(getattr(path, "explicit", False))
        self.segment_begin, self.segment_end = 0.0, -1.0     # times of the loaded segment (none yet)

    def load(self, law, t):
        """Write the segment and phase at time t [s] from the start (0 <= t < duration) into ``law``
        (a path with ``explicit`` set, e.g. a shaped reference: its derivatives at t)."""
        law.explicit[0] = self.explicit
        if self.explicit:
            law.reference[:] = np.concatenate(self.path.sample(t))
            return
        if not self.segment_begin <= t < self.segment_end:
            k = self.path.segment_index(t)
            times, pos = self.path.times, self.path.positions
            self.segment_begin, self.segment_end = times[k], times[k + 1]
            law.q_a[:], law.q_b[:], law.T[0] = pos[k], pos[k + 1], self.segment_end - self.segment_begin
        law.s[0] = (t - self.segment_begin) / law.T[0]


class TrajectoryAdmission:
    """The checks of a reference for ``model`` with resolved ``velocity_limit``,
    ``acceleration_limit`` (n,) and the :class:`~.limits.SafetyLimits` ``limits``."""

    def __init__(self, model, limits, velocity_limit, acceleration_limit, start_tolerance):
        self.model, self.limits, self.start_tolerance = model, limits, start_tolerance
        self.velocity_limit, self.acceleration_limit = velocity_limit, acceleration_limit

    def check(self, sample, received, times, positions, start_time, now=None) -> AdmittedTrajectory:
        """The checked reference (InputError naming the field): waypoint ``times`` from the start and
        ``positions`` (m, n); ``sample`` the last valid joint sample, received at ``received`` [s];
        ``start_time`` None = now (estimated as the sample's time advanced by its age at ``now``)."""
        s = sample
        times = finite_array(times, "time_from_start", (None,))
        if times.size > self.limits.max_trajectory_points:
            raise InputError(f"points: {times.size} waypoints, more than max_trajectory_points "
                             f"({self.limits.max_trajectory_points})")
        positions = finite_array(positions, "positions", (times.size, self.model.n))
        if times.size == 0:
            raise InputError("points: the trajectory has no waypoints")
        if times[0] < 0:
            raise InputError(f"time_from_start: must be >= 0, got {times[0]:g} s at point 0")
        if times[-1] > self.limits.max_trajectory_duration:
            raise InputError(f"time_from_start: the trajectory lasts {times[-1]:g} s, longer than "
                             f"max_trajectory_duration ({self.limits.max_trajectory_duration:g} s)")
        if times[0] > 0:
            times = np.concatenate([[0.0], times])
            positions = np.vstack([s.q, positions])
        self.check_limits(positions)
        gap = np.abs(positions[0] - s.q)
        if gap.max() > self.start_tolerance:
            j = int(np.argmax(gap))
            raise InputError(f"positions: point 0 is {gap[j]:.4g} away from the measured position of "
                             f"{self.model.joint_names[j]} (start_tolerance {self.start_tolerance:g})")
        if start_time is None:
            t0 = s.t + (max(0.0, float(now) - received) if now is not None else 0.0)
        else:
            t0 = float(finite_array(start_time, "start_time", ()))
        if t0 < s.t:
            raise InputError(f"header.stamp: start time {t0:.4f} s is in the past (joint-state time "
                             f"{s.t:.4f} s)")
        path = PiecewiseC4Trajectory(times, positions)
        self.check_rates(path)
        return AdmittedTrajectory(path, t0, start_time is None)

    def check_rates(self, path):
        """InputError naming the segment and joint whose peak speed or acceleration exceeds the limits."""
        velocity, acceleration = path.peak_rates()
        for peaks, limit, what, unit in ((velocity, self.velocity_limit, "speed", "/s"),
                                         (acceleration, self.acceleration_limit, "acceleration", "/s^2")):
            bad = np.argwhere(peaks > limit * (1 + 1e-9))
            if bad.size:
                k, j = bad[0]
                raise InputError(f"points: segment {k} -> {k + 1} needs a peak {what} of {peaks[k, j]:.4g}{unit} on "
                                 f"{self.model.joint_names[j]}, above its limit {limit[j]:.4g}{unit} (slow the "
                                 f"segment down, or raise the controller's velocity/acceleration limits)")

    def check_limits(self, positions):
        """InputError naming the first waypoint and joint outside the URDF position limits."""
        m = self.model
        low = positions < m.position_lower - LIMIT_TOLERANCE
        high = positions > m.position_upper + LIMIT_TOLERANCE
        bad = np.argwhere(low | high)
        if bad.size:
            k, j = bad[0]
            raise InputError(f"positions: point {k} puts {m.joint_names[j]} at {positions[k, j]:.6g}, "
                             f"outside its limits [{m.position_lower[j]:.6g}, {m.position_upper[j]:.6g}]")

"""Admission of a waypoint reference before the controller may track it (ROS-free).

:class:`TrajectoryAdmission` checks a reference against the measured state and the limits
(:class:`~.limits.SafetyLimits`: sizes, duration, URDF position limits, start tolerance, start
delay, the peak
speed and acceleration of every C⁴ segment (4.29): |q̇| = η'_max |q_b − q_a| / T,
|q̈| = η''_max |q_b − q_a| / T², η'_max = 630/256, η''_max ≈ 9.372) and returns an
:class:`AdmittedTrajectory`, which loads its segments into the control law cycle by cycle.
:class:`TrackedReference` holds the controller's reference and runs the admission steps of
:meth:`~.failsafe.FailSafeController.set_trajectory` (check, shape, accept) and of ``recover``.
"""
from contextlib import contextmanager

import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_array
from ..robot.trajectory import PiecewiseC4Trajectory, SampledC4Trajectory
from .law import Mode
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

    def check(self, sample, received, times, positions, start_time, now=None, velocities=None,
              accelerations=None) -> AdmittedTrajectory:
        """The checked reference (InputError naming the field): waypoint ``times`` from the start and
        ``positions`` (m, n); ``sample`` the last valid joint sample, received at ``received`` [s];
        ``start_time`` None = now (estimated as the sample's time advanced by its age at ``now``).
        With ``velocities`` and ``accelerations`` (m, n) both given: samples of a reference,
        followed through their C⁴ interpolation (:class:`~flexmodal_ros.robot.trajectory.SampledC4Trajectory`)."""
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
        sampled = velocities is not None and accelerations is not None
        if sampled:
            velocities = finite_array(velocities, "velocities", (times.size, self.model.n))
            accelerations = finite_array(accelerations, "accelerations", (times.size, self.model.n))
        if times[0] > 0:
            times = np.concatenate([[0.0], times])
            positions = np.vstack([s.q, positions])
            if sampled:
                velocities, accelerations = (np.vstack([np.zeros(self.model.n), x]) for x in (velocities, accelerations))
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
        if t0 - s.t > self.limits.max_start_delay:
            raise InputError(f"header.stamp: start time {t0:.4f} s is {t0 - s.t:.4g} s after the joint-state time "
                             f"{s.t:.4f} s, more than max_start_delay ({self.limits.max_start_delay:g} s)")
        path = (SampledC4Trajectory(times, positions, velocities, accelerations) if sampled
                else PiecewiseC4Trajectory(times, positions))
        self.check_rates(path)
        return AdmittedTrajectory(path, t0, start_time is None)

    def recovery(self, sample, inset):
        """The bounded recovery move (:meth:`~.failsafe.FailSafeController.recover`): from the
        measured position ``sample.q`` to the nearest position ``inset`` inside the URDF limits,
        one C⁴ segment timed so that its peak speed and acceleration stay within the limits.
        AdmittedTrajectory starting now; InputError when it would last longer than
        max_trajectory_duration."""
        m = self.model
        lo = np.minimum(m.position_lower + inset, 0.5 * (m.position_lower + m.position_upper))
        hi = np.maximum(m.position_upper - inset, 0.5 * (m.position_lower + m.position_upper))
        target = np.clip(sample.q, lo, hi)
        unit = PiecewiseC4Trajectory(np.array([0.0, 1.0]), np.vstack([sample.q, target]))
        velocity, acceleration = unit.peak_rates()                # peaks of the move done in 1 s
        duration = 1.02 * max(float(np.max(velocity[0] / self.velocity_limit)),
                              float(np.sqrt(np.max(acceleration[0] / self.acceleration_limit))), 0.05)
        if duration > self.limits.max_trajectory_duration:
            raise InputError(f"recover: the move back inside the limits would take {duration:.4g} s, longer than "
                             f"max_trajectory_duration ({self.limits.max_trajectory_duration:g} s)")
        path = PiecewiseC4Trajectory(np.array([0.0, duration]), np.vstack([sample.q, target]))
        self.check_rates(path)
        return AdmittedTrajectory(path, sample.t, start_now=True)

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


class TrackedReference:
    """The reference the controller tracks or will track (``current``: an :class:`AdmittedTrajectory`
    or None) and the steps that admit one: :meth:`check` (against the measured state and the
    limits, :class:`TrajectoryAdmission`), :meth:`shape` (through a shaper), :meth:`ready` (the
    measured state still allows it); :meth:`recovery_move` out of the limits. Every InputError
    raised by a step is counted in ``counters.rejected_trajectories``.

    A reference (:meth:`~.failsafe.FailSafeController.set_trajectory`): waypoint times [s] from
    the start (strictly increasing) and positions (m, n) in URDF order; a start time [s] on the
    joint-state clock, or None = now: the first cycle that runs it (reported as "tracking started
    at t=..."; the acceptance message gives the estimate "last sample's time, advanced by its age").
    A first waypoint with time > 0 is preceded by the measured position at time 0. A reference
    accepted while tracking another replaces it: HOLD at the measured position until its start.
    With velocities and accelerations (m, n) the points are samples of a reference, followed
    through their C⁴ interpolation (:class:`~flexmodal_ros.robot.trajectory.SampledC4Trajectory`,
    limits checked at the samples) and never shaped again (e.g. the output of the modal server's
    ``~/shape_trajectory``); without them, waypoints joined by rest-to-rest segments."""

    def __init__(self, counters):
        self.counters = counters
        self.current = None
        self.recovery = None           # the recovery move while it is the reference

    def recovering(self):
        """True while the recovery move is the reference (accepted or being tracked)."""
        return self.recovery is not None and self.current is self.recovery

    def check(self, mode, sample, received, admission, times, positions, start_time=None, now=None,
              velocities=None, accelerations=None) -> AdmittedTrajectory:
        """The checked reference, not yet shaped (:meth:`TrajectoryAdmission.check` for the last
        valid ``sample`` received at ``received`` [s], controller in ``mode``)."""
        with self._counted():
            self._refuse(mode, sample)
            return admission.check(sample, received, times, positions, start_time, now, velocities, accelerations)

    def shape(self, traj: AdmittedTrajectory, shaper) -> AdmittedTrajectory:
        """``traj`` through ``shaper`` (None: unchanged; a sampled reference is tracked as given).
        Reads nothing the control cycles change, so it may run while they go on."""
        if shaper is None:
            return traj
        if isinstance(traj.path, SampledC4Trajectory):
            traj.path.summary = "sampled reference (velocities and accelerations given): tracked as given, not shaped"
            return traj
        with self._counted():
            return AdmittedTrajectory(shaper(traj.path), traj.t0, traj.start_now)

    def ready(self, mode, sample):
        """InputError (counted) when the measured state no longer allows a new reference (no valid
        sample, STALE, out of the limits or recovering)."""
        with self._counted():
            self._refuse(mode, sample)

    @staticmethod
    def describe(traj: AdmittedTrajectory) -> str:
        """The one-line acceptance message of ``traj``."""
        shaping = getattr(traj.path, "summary", "")
        return (f"trajectory accepted: {traj.path.times.size} waypoints, {traj.path.duration:.3f} s, "
                f"starting at t={traj.t0:.4f} s" + (f"; {shaping}" if shaping else ""))

    def recovery_move(self, mode, sample, admission, inset) -> str:
        """Out of the limits (``mode`` OUT_OF_LIMITS): the bounded recovery move
        (:meth:`TrajectoryAdmission.recovery`) becomes the reference, starting at the next cycle.
        Returns a one-line description; InputError in any other mode."""
        if mode != Mode.OUT_OF_LIMITS or sample is None:
            raise InputError(f"recover: the measured state is not outside the limits (controller is "
                             f"{mode.value}): nothing to recover")
        self.current = self.recovery = admission.recovery(sample, inset)
        target = ", ".join(f"{v:.4g}" for v in self.current.path.positions[-1])
        return f"recovery accepted: back inside the limits to [{target}] in {self.current.duration:.3f} s"

    def start_now(self, t, events):
        """A "start now" reference starts at the first cycle that runs it (sample time ``t``). Its
        start estimated at acceptance (last sample's time + its age) is too early when the samples
        were still behind: after a stall of this process the transport delivers the states queued
        meanwhile, and one of them may be the last sample when the trajectory is accepted; starting
        at that estimate would begin mid-trajectory."""
        traj = self.current
        if t - traj.t0 > 1e-3:
            events.append(f"trajectory start moved from t={traj.t0:.4f} s to t={t:.4f} s: the joint "
                          f"states were behind when it was accepted")
        traj.t0, traj.start_now = t, False

    def _refuse(self, mode, sample):
        if sample is None or mode in (Mode.WAITING, Mode.STALE):
            raise InputError(f"trajectory: no valid joint state (controller is {mode.value})")
        if mode == Mode.OUT_OF_LIMITS or self.recovering():
            raise InputError("trajectory: the measured state is outside the limits (controller is "
                             f"{Mode.OUT_OF_LIMITS.value}{', recovering' if self.recovering() else ''}): "
                             "trajectories are refused until it is back inside (recover moves it back)")

    @contextmanager
    def _counted(self):
        """Count an InputError raised inside as a rejected trajectory (and raise it on)."""
        try:
            yield
        except InputError:
            self.counters.rejected_trajectories += 1
            raise

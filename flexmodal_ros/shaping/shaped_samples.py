"""A shaped reference sampled for any trajectory controller, within the URDF limits (the modal
server's ``~/shape_trajectory``; no rclpy)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.blas import single_thread_blas
from ..core.errors import InputError
from ..robot.trajectory import ETA_PEAKS, PiecewiseC4Trajectory
from .design_choice import DEFAULT_DESIGN
from .reference import path_derivatives
from .schedule import DEFAULT_MAX_DAMPING
from .shaper_design import shape_with_design


@dataclass(frozen=True)
class ShapedSamples:
    """A shaped reference sampled for a trajectory controller: ``times`` (m,) [s] from 0 to the
    end (the last sample at the end), ``positions``, ``velocities``, ``accelerations`` (m, n) in
    URDF joint order; ``reference`` (ShapedTrajectory, or the path itself when no mode
    qualifies), ``path_modes``, ``design`` (:class:`DesignChoice` or None) and ``message`` (the
    summary, or why it was passed through)."""
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    reference: object
    path_modes: object
    design: object
    message: str

    @property
    def added_delay(self) -> float:
        return float(getattr(self.reference, "added_delay", 0.0))


def rate_limits(model, acceleration_per_velocity=10.0):
    """(velocity, acceleration) limits (n,) of the controller's defaults: the URDF velocity limit
    (10 rad/s or m/s where it gives none) and ``acceleration_per_velocity`` × it (the URDF has no
    acceleration limits; :class:`~flexmodal_ros.control.law.SafetyLimits`)."""
    velocity = np.where(np.isfinite(model.velocity_limit), model.velocity_limit, 10.0)
    return velocity, acceleration_per_velocity * velocity


def _check_within(model, what, values, limit, times, unit):
    bad = np.argwhere(np.abs(values) > limit * (1.0 + 1e-6))
    if bad.size:
        i, j = bad[0]
        over = float(np.max(np.abs(values[:, j]) / limit[j]))
        raise InputError(f"{what}: {model.joint_names[j]} reaches {abs(values[i, j]):.4g}{unit} at t = {times[i]:.3f} s, "
                         f"above its limit {limit[j]:.4g}{unit} ({over:.3g}x): slow the trajectory down")


@single_thread_blas
def shape_samples(model, path: PiecewiseC4Trajectory, kind="zvd", shaper_design=DEFAULT_DESIGN, rate_hz=200.0,
                  max_samples=None, **options) -> ShapedSamples:
    """Shape ``path`` (:func:`shape_with_design`) and sample it at ``rate_hz`` with velocities
    and accelerations, for a trajectory controller. Limits (the URDF's position and velocity
    limits, acceleration limits 10 × the velocity limits, :func:`rate_limits`): the waypoints must
    be within them (positions, and each segment's peak speed and acceleration), else InputError
    naming the point and joint; shaping keeps the positions within the waypoints' convex hull
    and, for the fixed and robust designs (non-negative constant impulses), the speeds and
    accelerations within the path's; the samples are checked again (a time-varying shaper can
    exceed them slightly) and a violation is refused with the joint, the value and the factor
    to slow down by: the trajectory is never time-scaled behind the caller's back.
    ``max_samples``: InputError before sampling when the answer would be longer. No selectable
    mode: the path itself is sampled, with a message saying so."""
    velocity, acceleration = rate_limits(model)
    low = path.positions < model.position_lower - 1e-9
    high = path.positions > model.position_upper + 1e-9
    bad = np.argwhere(low | high)
    if bad.size:
        k, j = bad[0]
        raise InputError(f"points[{k}].positions: {model.joint_names[j]} at {path.positions[k, j]:.6g}, outside its "
                         f"limits [{model.position_lower[j]:.6g}, {model.position_upper[j]:.6g}]")
    dq = np.abs(np.diff(path.positions, axis=0))
    T = np.diff(path.times)[:, None]
    for peaks, limit, what, unit in ((ETA_PEAKS[0] * dq / T, velocity, "speed", "/s"),
                                     (ETA_PEAKS[1] * dq / T ** 2, acceleration, "acceleration", "/s^2")):
        bad = np.argwhere(peaks > limit * (1.0 + 1e-9))
        if bad.size:
            k, j = bad[0]
            raise InputError(f"points: segment {k} -> {k + 1} needs a peak {what} of {peaks[k, j]:.4g}{unit} on "
                             f"{model.joint_names[j]}, above its limit {limit[j]:.4g}{unit} ({peaks[k, j] / limit[j]:.3g}x)")
    traj, pm, choice = shape_with_design(model, path, kind, shaper_design, **options)
    reference = path if traj is None else traj
    count = int(np.floor(reference.duration * rate_hz + 1e-9)) + 1
    if max_samples is not None and count + 1 > max_samples:
        raise InputError(f"sample_rate_hz: {count + 1} samples at {rate_hz:g} Hz over {reference.duration:.3f} s, "
                         f"more than this service's maximum ({max_samples})")
    t = np.arange(count) / rate_hz
    if reference.duration - t[-1] > 1e-9:
        t = np.r_[t, reference.duration]
    if traj is None:
        Y = path_derivatives(path, t)[0]
        message = (f"not shaped ({kind}): no mode of the closed loop qualifies (contribution threshold, damping "
                   f"below {options.get('max_damping', DEFAULT_MAX_DAMPING):g}); the path is sampled as it is")
    else:
        Y = traj.evaluate(t, 3)
        message = traj.summary
    Y[-1, 1:] = 0.0                                      # at rest at the end (round-off of the exact zeros)
    _check_within(model, "velocities", Y[:, 1], velocity, t, "/s")
    _check_within(model, "accelerations", Y[:, 2], acceleration, t, "/s^2")
    q = np.clip(Y[:, 0], model.position_lower, model.position_upper)   # convex combination: only round-off
    return ShapedSamples(t, q, Y[:, 1].copy(), Y[:, 2].copy(), reference, pm, choice, message)


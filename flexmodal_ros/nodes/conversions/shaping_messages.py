"""Conversions for input shaping: ShapeTrajectory requests/responses, JointTrajectory samples.

The only place where the fields of ``flexmodal_interfaces/srv/ShapeTrajectory`` and the velocities
and accelerations of a trajectory_msgs/JointTrajectory are read or filled; the core never sees a
message. Imported as ``nodes.conversions.shaping_messages`` (not re-exported by the package: it
loads the shaping capability).

Work bounds of ``~/shape_trajectory`` (checked before any work, docs/shaping/README.md): at most
``MAX_SHAPE_WAYPOINTS`` waypoints, ``MAX_SHAPE_DURATION_S`` of motion (the modal analysis runs at
100 configurations per second of motion: 60 s = 6,000 analyses; cost in docs/benchmarks.md),
``MAX_SAMPLE_RATE_HZ``, and ``MAX_SHAPE_SAMPLES`` output samples (rate × the shaped duration:
checked against the unshaped duration before the work and the shaped one before sampling).
"""
import array
from typing import NamedTuple

import numpy as np
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectoryPoint

from ...core.errors import InputError
from ...core.validation import finite_scalar
from ...flexible_joint.ama import configuration_from_names
from ...robot.model import with_overrides
from ...shaping import DEFAULT_DESIGN, check_design, check_shaping
from .trajectories import trajectory_to_core

MAX_SHAPE_WAYPOINTS = 200
MAX_SHAPE_DURATION_S = 60.0
MAX_SAMPLE_RATE_HZ = 1000.0
DEFAULT_SAMPLE_RATE_HZ = 200.0
MAX_SHAPE_SAMPLES = 20000
DEFAULT_SHAPER = "zvd"


def trajectory_rates_to_core(model, msg):
    """(velocities, accelerations) (m, n) in URDF order of a trajectory_msgs/JointTrajectory whose
    every point carries both (n values each): a sampled reference; (None, None) when no point
    carries any (waypoints). InputError naming the point for anything in between (some points
    with, some without, velocities without accelerations, wrong counts)."""
    points = msg.points
    nv = np.array([len(p.velocities) for p in points])
    na = np.array([len(p.accelerations) for p in points])
    if not nv.any() and not na.any():
        return None, None
    n = model.n
    for field, sizes in (("velocities", nv), ("accelerations", na)):
        if (sizes != n).any():
            k = int(np.argmax(sizes != n))
            raise InputError(f"points[{k}].{field}: expected {n} values (give velocities and accelerations on "
                             f"every point, or on none), got {sizes[k]}")
    names = list(msg.joint_names)
    order = [names.index(j) for j in model.joint_names]
    velocities = np.array([p.velocities for p in points], dtype=float)[:, order]
    accelerations = np.array([p.accelerations for p in points], dtype=float)[:, order]
    return velocities, accelerations


class ShapeRequest(NamedTuple):
    """A checked ShapeTrajectory request: ``model`` (with the request's gains), waypoint ``times``
    and ``positions`` (URDF order), ``kind``, ``shaper_design``, ``rate_hz``, the request's
    ``joint_names`` (answer order) and ``stamp`` (header.stamp, copied)."""
    model: object
    times: np.ndarray
    positions: np.ndarray
    kind: str
    shaper_design: str
    rate_hz: float
    joint_names: list
    stamp: object


def shape_request_to_core(model, request) -> ShapeRequest:
    """ShapeTrajectory.Request → :class:`ShapeRequest`; InputError naming the field for a bad
    value or a request beyond the work bounds (module docstring)."""
    msg = request.trajectory
    if len(msg.points) > MAX_SHAPE_WAYPOINTS:
        raise InputError(f"trajectory.points: {len(msg.points)} waypoints, more than this service's maximum "
                         f"({MAX_SHAPE_WAYPOINTS})")
    times, positions, _ = trajectory_to_core(model, msg)
    if times.size < 2:
        raise InputError("trajectory.points: at least 2 waypoints are needed to shape a motion")
    if times[0] != 0.0:
        raise InputError(f"trajectory.points[0].time_from_start: must be 0 (the start), got {times[0]:g} s")
    if times[-1] > MAX_SHAPE_DURATION_S:
        raise InputError(f"trajectory.points: the motion lasts {times[-1]:g} s, more than this service's maximum "
                         f"({MAX_SHAPE_DURATION_S:g} s)")
    kind = check_shaping(request.shaper or DEFAULT_SHAPER, InputError)
    if kind == "none":
        raise InputError("shaper: 'none' shapes nothing (choose from zv, zvd, ei)")
    design = check_design(request.shaper_design or DEFAULT_DESIGN, InputError)
    rate = finite_scalar(request.sample_rate_hz, "sample_rate_hz") or DEFAULT_SAMPLE_RATE_HZ
    if not 0 < rate <= MAX_SAMPLE_RATE_HZ:
        raise InputError(f"sample_rate_hz: must be in (0, {MAX_SAMPLE_RATE_HZ:g}] Hz (0 = "
                         f"{DEFAULT_SAMPLE_RATE_HZ:g}), got {rate:g}")
    if rate * times[-1] + 1 > MAX_SHAPE_SAMPLES:
        raise InputError(f"sample_rate_hz: {rate:g} Hz over {times[-1]:g} s is more than this service's maximum of "
                         f"{MAX_SHAPE_SAMPLES} samples")
    names = list(msg.joint_names)
    gains = {}
    for field in ("kp", "kd"):
        values = list(getattr(request, field))
        if len(values) > 1:
            values = configuration_from_names(model, names, values, field)
        gains[field] = values if len(values) else None
    if gains["kp"] is not None or gains["kd"] is not None:
        model = with_overrides(model, kp=gains["kp"], kd=gains["kd"])
    return ShapeRequest(model, times, positions, kind, design, rate, names, msg.header.stamp)


def _doubles(values) -> array.array:
    return array.array("d", np.ascontiguousarray(values, dtype=float).tobytes())


def shaped_samples_to_response(samples, request: ShapeRequest, model, response):
    """:class:`~flexmodal_ros.shaping.shaped_samples.ShapedSamples` → ShapeTrajectory.Response
    (trajectory in the request's joint order, design, modes, predicted residuals)."""
    order = [model.joint_names.index(j) for j in request.joint_names]
    traj = response.trajectory
    traj.header.stamp = request.stamp
    traj.joint_names = list(request.joint_names)
    # one array.array per field for all samples, sliced per point (slices are array.arrays: the
    # message setters take them without a per-element check); times rounded to the nanosecond as
    # split_seconds does (half to even)
    q, qd, qdd = (_doubles(x[:, order]) for x in (samples.positions, samples.velocities, samples.accelerations))
    n = len(order)
    secs, nanosecs = np.divmod(np.rint(np.asarray(samples.times, float) * 1e9).astype(np.int64), 1_000_000_000)
    traj.points = [JointTrajectoryPoint(positions=q[j:j + n], velocities=qd[j:j + n], accelerations=qdd[j:j + n],
                                        time_from_start=Duration(sec=sec, nanosec=nanosec))
                   for j, sec, nanosec in zip(range(0, len(q), n), secs.tolist(), nanosecs.tolist())]
    response.added_delay = samples.added_delay
    pm, choice = samples.path_modes, samples.design
    if choice is not None:
        sel = list(pm.selected)
        response.shaper_design, response.design_reason = choice.chosen, choice.reason
        response.shaped_modes = [k + 1 for k in sel]
        f, z = pm.frequencies_hz[:, sel], pm.damping_ratios[:, sel]
        response.frequencies_start_hz, response.frequencies_end_hz = _doubles(f[0]), _doubles(f[-1])
        response.frequency_min_hz, response.frequency_max_hz = _doubles(f.min(axis=0)), _doubles(f.max(axis=0))
        response.damping_start, response.damping_end = _doubles(z[0]), _doubles(z[-1])
        response.predicted_residual_unshaped = _doubles(np.nan_to_num(choice.unshaped.per_mode_m[sel]))
        response.predicted_residual_shaped = _doubles(np.nan_to_num(choice.predicted.per_mode_m[sel]))
        response.untreated_share = choice.untreated.share
    response.success, response.message = True, samples.message
    return response

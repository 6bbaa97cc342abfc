"""trajectory_msgs/JointTrajectory ↔ the controller's waypoint references."""

import numpy as np

from ...core.errors import InputError
from .stamps import seconds_to_stamp, split_seconds, stamp_to_seconds
from ...core.validation import shown, shown_names


def max_trajectory_bytes(n, points):
    """Largest serialized trajectory_msgs/JointTrajectory that can hold ``points`` waypoints of
    ``n`` joints with positions, velocities, accelerations and efforts (CDR: four sequences of
    n float64 with their lengths and alignment, the duration) plus 64 kiB of header and names:
    a bigger message is refused before it is deserialized."""
    return 65536 + points * (4 * (8 + 8 * n) + 8)


def trajectory_to_core(model, msg, max_points=None):
    """trajectory_msgs/JointTrajectory → (times [s] (m,), positions (m, n) in URDF order, start
    time [s] or None when header.stamp is zero = "start now"). InputError naming the field for
    unknown/missing/duplicate joint names, empty points, wrong position counts, more than
    ``max_points`` waypoints."""
    if max_points is not None and len(msg.points) > max_points:
        raise InputError(f"points: {len(msg.points)} waypoints, more than max_trajectory_points ({max_points})")

    names = list(msg.joint_names)
    unknown = [j for j in names if j not in model.joint_names]
    if unknown:
        raise InputError(f"joint_names: unknown joint(s) {shown_names(unknown)} (robot {model.name} has "
                         f"{', '.join(model.joint_names)})")
    if len(set(names)) != len(names) or len(names) != model.n:
        raise InputError(f"joint_names: need each of the {model.n} joints exactly once, got {shown(names)}")
    points = msg.points
    if not points:
        raise InputError("points: the trajectory has no waypoints")
    sizes = np.array([len(p.positions) for p in points])
    if (sizes != model.n).any():
        k = int(np.argmax(sizes != model.n))
        raise InputError(f"points[{k}].positions: expected {model.n} values, got {sizes[k]}")
    order = [names.index(j) for j in model.joint_names]
    positions = np.array([p.positions for p in points], dtype=float)[:, order]
    times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in points])
    start = stamp_to_seconds(msg.header.stamp)
    return times, positions, (start if start > 0 else None)


def core_to_trajectory(joint_names, times, positions, start_time=None):
    """(times [s], positions (m, n), start time [s] or None) → trajectory_msgs/JointTrajectory."""
    # deferred: builtin_interfaces (ROS message types, built interfaces)
    from builtin_interfaces.msg import Duration
    # deferred: trajectory_msgs (ROS message types, built interfaces)
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
    msg.joint_names = list(joint_names)
    if start_time is not None:
        msg.header.stamp = seconds_to_stamp(start_time)
    for t, pos in zip(times, positions):
        sec, nanosec = split_seconds(float(t))
        msg.points.append(JointTrajectoryPoint(positions=[float(v) for v in pos],
                                               time_from_start=Duration(sec=sec, nanosec=nanosec)))
    return msg

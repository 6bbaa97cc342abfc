"""Trajectory files of ``flexmodal shape`` / ``flexmodal simulate --trajectory``.

Input (YAML): at most ``MAX_WAYPOINTS`` (1000, the controller's max_trajectory_points) waypoints
joined by the rest-to-rest C⁴ profile (4.29)-(4.30), as the controller's
``~/reference_trajectory`` (trajectory_msgs/JointTrajectory) takes them::

    # times in s from the start (strictly increasing, the first one 0), positions in rad (m for
    # prismatic joints), one value per joint in the order of joint_names
    joint_names: [joint_1, joint_2, ...]      # optional: default = the robot's URDF order
    points:
      - {time: 0.0, positions: [0.0, 1.18, ...]}
      - {time: 0.4, positions: [0.0, 1.50, ...]}

Output (CSV): the shaped reference sampled at a fixed rate, one row per sample: ``time`` [s], then
for each joint ``<joint>`` [rad or m], ``<joint>_vel``, ``<joint>_acc``, ``<joint>_jerk``,
``<joint>_snap`` (derivatives 1..4, per s^k): the C⁴ reference the feedforward (4.6)-(4.10) needs.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..robot.trajectory import MAX_WAYPOINTS, PiecewiseC4Trajectory
from ..core.validation import finite_array, load_yaml_mapping, reject_unknown_keys

DERIVATIVE_SUFFIXES = ("", "_vel", "_acc", "_jerk", "_snap")


def read_waypoints(model, path) -> PiecewiseC4Trajectory:
    """The waypoint YAML file (module docstring) as a path in the robot's URDF joint order;
    InputError naming the file and the field for anything malformed."""
    doc = load_yaml_mapping(path, "trajectory file")
    where = f"trajectory file {path}"
    reject_unknown_keys(doc, ("joint_names", "points"), where)
    names = doc.get("joint_names") or list(model.joint_names)
    if not isinstance(names, list) or sorted(map(str, names)) != sorted(model.joint_names):
        raise InputError(f"{where}: joint_names must list each of {list(model.joint_names)} once, got {names}")
    points = doc.get("points")
    if not isinstance(points, list) or len(points) < 2:
        raise InputError(f"{where}: points must be a list of at least 2 waypoints")
    if len(points) > MAX_WAYPOINTS:
        raise InputError(f"{where}: points: {len(points)} waypoints, more than {MAX_WAYPOINTS} (the controller's "
                         "max_trajectory_points; flexmodal_ros/robot/trajectory.py MAX_WAYPOINTS)")
    times, positions = [], []
    for i, point in enumerate(points):
        if not isinstance(point, dict):
            raise InputError(f"{where}: points[{i}] must be a mapping with time and positions")
        reject_unknown_keys(point, ("time", "positions"), f"{where}: points[{i}]")
        if "time" not in point or "positions" not in point:
            raise InputError(f"{where}: points[{i}] needs time and positions")
        times.append(finite_array(point["time"], f"points[{i}].time", ()))
        positions.append(finite_array(point["positions"], f"points[{i}].positions", (len(names),)))
    if times[0] != 0.0:
        raise InputError(f"{where}: points[0].time must be 0, got {float(times[0]):g}")
    order = [list(names).index(j) for j in model.joint_names]
    return PiecewiseC4Trajectory(np.array(times), np.array(positions)[:, order])


def write_waypoints(path, joint_names, times, positions) -> Path:
    """Write a waypoint YAML file (module docstring)."""
    # deferred: PyYAML
    import yaml

    doc = {"joint_names": list(joint_names),
           "points": [{"time": float(t), "positions": [float(v) for v in q]} for t, q in zip(times, positions)]}
    path = Path(path)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    return path


def write_samples(path, joint_names, t, derivatives) -> Path:
    """CSV of a sampled reference (module docstring): t (m,) [s], derivatives (m, 5, n)."""
    path = Path(path)
    header = ["time"] + [f"{j}{s}" for s in DERIVATIVE_SUFFIXES for j in joint_names]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for ti, row in zip(t, derivatives):
            w.writerow([repr(float(ti))] + [repr(float(v)) for v in row.ravel()])
    return path


def read_samples(path):
    """(joint_names, t (m,), derivatives (m, 5, n)) of a CSV written by :func:`write_samples`."""
    path = Path(path)
    with path.open() as fh:
        rows = list(csv.reader(fh))
    if not rows or rows[0][0] != "time" or (len(rows[0]) - 1) % 5:
        raise InputError(f"samples file {path}: not a shaped-trajectory CSV (header time, then 5 columns per joint)")
    n = (len(rows[0]) - 1) // 5
    names = rows[0][1:n + 1]
    data = finite_array([[float(v) for v in r] for r in rows[1:]], f"samples file {path}")
    return names, data[:, 0], data[:, 1:].reshape(-1, 5, n)

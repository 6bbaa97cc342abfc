"""Configuration-dependent shapers: modes along a path, which modes to shape, the shaper schedule.

Along a waypoint path (:func:`~flexmodal_ros.shaping.reference.path_samples`: ``ama_rate_hz``
samples per second of motion, uniform along each straight joint-space segment) the closed-loop
AMA of the thesis (2.13)-(2.17) (:func:`~flexmodal_ros.modal.modal_analysis_batch`) gives f and ζ
of every mode: eigenvalues only at every sample; eigenvalues and mode shapes at every
``anchor_stride``-th sample (the *anchors*, and the last sample), where the modes are tracked by
MAC (:func:`~flexmodal_ros.modes.track_modes`). Between two anchors a tracked mode is the
eigenvalue closest to the straight-line interpolation of its anchor eigenvalues.

Mode selection (default): the end-effector contribution of tracked mode k at an anchor (the first,
middle and last anchor of every segment) is the
amplitude of its term in the end-effector step response to a motor-reference step K_P W Δq in the
segment's direction Δq. With the symmetric linearized matrices M̄, D̄, K̄ (2.9)-(2.11), the
receptance (λ² M̄ + λ D̄ + K̄)⁻¹ has the residue u uᵀ / (uᵀ (2λ M̄ + D̄) u) at the mode (λ, u)
(u the mode shape (2.18), [q; q_m] rows), so

    c_k = ‖J_p u_q‖ · |uᵀ b| / (|uᵀ (2λ M̄ + D̄) u| · |λ|),    b = [0; K_P W Δq],

J_p the translational Jacobian of the tool point (m per rad), c_k in m per unit move. Selected:
tracked modes whose largest c_k over the anchors is at least ``threshold`` × the largest of all
modes, and whose damping ratio stays below ``max_damping`` (more damped modes lose > 97 % of their
vibration per period at ζ = 0.5, and EI is tabulated up to 0.5). ``modes`` (0-based indices of the
modes of the first configuration, by frequency) overrides the selection.

Schedule: at every sample one shaper per selected mode from its (f, ζ) there, convolved
(:func:`~flexmodal_ros.shaping.shapers.convolve`) → :class:`~flexmodal_ros.shaping.reference.ShaperSchedule`.
``fixed=True`` uses the shaper of the first configuration everywhere (the fixed-frequency practice).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..modal import linearized_batch, modal_analysis_batch
from ..model import create_data, ee_jacobian
from ..modes import track_modes
from ..trajectory import PiecewiseC4Trajectory
from .reference import ShapedTrajectory, ShaperSchedule, path_samples
from .shapers import DEFAULT_TOLERANCE, KINDS, convolve, design

DEFAULT_AMA_RATE_HZ = 100.0
DEFAULT_THRESHOLD = 0.1
DEFAULT_MAX_DAMPING = 0.5
ANCHOR_STRIDE = 10


@dataclass(frozen=True)
class PathModes:
    """Modes along a path. ``segment``, ``eta`` (m,) sample positions, ``configurations`` (m, n);
    ``frequencies_hz`` / ``damping_ratios`` (m, K) of every tracked mode (K = modes of the first
    configuration, by frequency there); ``contributions`` (K,) end-effector contribution [m per
    unit move], largest over the first, middle and last anchor of each segment; ``selected`` tracked indices chosen (0-based);
    ``anchors`` sample indices with mode shapes."""
    segment: np.ndarray
    eta: np.ndarray
    configurations: np.ndarray
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    contributions: np.ndarray
    selected: tuple
    anchors: np.ndarray

    def to_dict(self) -> dict:
        sel = list(self.selected)
        return {"selected_modes": [k + 1 for k in sel],
                "contributions": self.contributions.tolist(),
                "start": {"frequencies_hz": self.frequencies_hz[0, sel].tolist(),
                          "damping_ratios": self.damping_ratios[0, sel].tolist()},
                "end": {"frequencies_hz": self.frequencies_hz[-1, sel].tolist(),
                        "damping_ratios": self.damping_ratios[-1, sel].tolist()},
                "frequency_range_hz": [[float(self.frequencies_hz[:, k].min()), float(self.frequencies_hz[:, k].max())]
                                       for k in sel],
                "samples": int(self.eta.size)}


def path_modes(model, path: PiecewiseC4Trajectory, ama_rate_hz=DEFAULT_AMA_RATE_HZ, modes=None,
               threshold=DEFAULT_THRESHOLD, max_damping=DEFAULT_MAX_DAMPING, anchor_stride=ANCHOR_STRIDE,
               workers=None) -> PathModes:
    """Tracked modes along ``path`` and the selection (module docstring). InputError when the closed
    loop is not asymptotically stable at a sample, when the number of oscillatory modes changes
    along the path (tracking impossible), or for a bad override."""
    if path.n != model.n:
        raise InputError(f"trajectory: {path.n} joints, the robot has {model.n}")
    segment, etas, qs = path_samples(path, ama_rate_hz)
    m = etas.size
    anchors = np.unique(np.r_[np.arange(0, m, max(1, int(anchor_stride))), m - 1])
    light = modal_analysis_batch(model, qs, workers=workers, shapes=False)
    full = modal_analysis_batch(model, qs[anchors], workers=workers, shapes=True)
    for i, r in enumerate(light):
        if not r.stable:
            raise InputError(f"trajectory: the closed loop is {r.stability} at path sample {i} "
                             f"(q = {np.round(qs[i], 4).tolist()}): no modal shaping possible")
    order, _ = track_modes(full)
    lam = _tracked_eigenvalues(light, anchors, np.array([r.eigenvalues[o] for r, o in zip(full, order)]))
    freq, zeta = np.abs(lam) / (2.0 * np.pi), -lam.real / np.abs(lam)
    picks = set()                    # contributions at the first, middle and last anchor of each segment
    for k in np.unique(segment[anchors]):
        idx = np.flatnonzero(segment[anchors] == k)
        picks |= {int(idx[0]), int(idx[len(idx) // 2]), int(idx[-1])}
    picks = sorted(picks)
    contrib = _contributions(model, path, qs[anchors[picks]], segment[anchors[picks]], [full[a] for a in picks],
                             order[picks])
    if modes is None:
        ok = (contrib >= threshold * contrib.max()) & (zeta.max(axis=0) < max_damping)
        selected = tuple(int(k) for k in np.flatnonzero(ok))
    else:
        selected = _checked_override(modes, lam.shape[1])
    return PathModes(segment, etas, qs, freq, zeta, contrib, selected, anchors)


def _checked_override(modes, count):
    picked = []
    for k in np.atleast_1d(np.asarray(modes)).tolist():
        if not isinstance(k, int) or not 0 <= k < count:
            raise InputError(f"modes: {k!r} is not a mode index in 0..{count - 1}")
        picked.append(k)
    if len(set(picked)) != len(picked):
        raise InputError(f"modes: repeated index in {picked}")
    return tuple(sorted(picked))


def _tracked_eigenvalues(light, anchors, anchor_lam):
    """(m, K) eigenvalue of every tracked mode at every sample: the sample's eigenvalue nearest the
    linear interpolation between the neighbouring anchors (Hungarian assignment when two tracked
    modes pick the same one)."""
    from scipy.optimize import linear_sum_assignment

    counts = {r.num_modes for r in light}
    if len(counts) != 1:
        raise InputError(f"trajectory: the number of oscillatory modes changes along the path "
                         f"({sorted(counts)}: a mode becomes overdamped); modes cannot be tracked")
    m, K = len(light), anchor_lam.shape[1]
    idx = np.arange(m)
    pred = np.empty((m, K), complex)
    for j in range(K):
        pred[:, j] = (np.interp(idx, anchors, anchor_lam[:, j].real)
                      + 1j * np.interp(idx, anchors, anchor_lam[:, j].imag))
    eig = np.array([r.eigenvalues for r in light])                       # (m, K)
    cost = np.abs(pred[:, :, None] - eig[:, None, :])                   # (m, tracked, sample modes)
    pick = cost.argmin(axis=2)
    for i in np.flatnonzero([len(set(row)) < K for row in pick]):
        rows, cols = linear_sum_assignment(cost[i])
        pick[i, rows] = cols
    return np.take_along_axis(eig, pick, axis=1)


def _contributions(model, path, qs, segs, results, order):
    """(K,) max over anchors of the end-effector contribution c_k of each tracked mode."""
    data = create_data(model)
    last = path.positions.shape[0] - 1
    out = np.zeros(order.shape[1])
    for a, (q, seg) in enumerate(zip(qs, segs)):
        move = path.positions[min(seg + 1, last)] - path.positions[seg]
        out = np.maximum(out, end_effector_contributions(model, data, q, move, results[a])[order[a]])
    return out


def end_effector_contributions(model, data, q, move, modes) -> np.ndarray:
    """c_k (module docstring) [m per unit move] of every mode of ``modes`` (a
    :class:`~flexmodal_ros.modal.ModalResult` at configuration q, with mode shapes) for a
    motor-reference step K_P W ``move`` (move (n,) in link coordinates)."""
    n = model.n
    (M, D, _), _ = linearized_batch(model, data, np.asarray(q, float)[None, :])
    b = np.concatenate([np.zeros(n), model.kp * model.W * np.asarray(move, float)])
    Jp = ee_jacobian(model, data, q)[:3]
    lam, u = modes.eigenvalues, modes.mode_shapes                       # (K,), (2n, K)
    norm = 2.0 * lam * np.einsum("ik,ij,jk->k", u, M[0], u) + np.einsum("ik,ij,jk->k", u, D[0], u)
    return np.linalg.norm(Jp @ u[:n], axis=0) * np.abs(b @ u) / (np.abs(norm) * np.abs(lam))


def shaper_schedule(modes: PathModes, kind: str, tolerance=DEFAULT_TOLERANCE, fixed=False) -> ShaperSchedule:
    """The configuration-dependent shaper of the selected modes at every sample (module docstring);
    ``fixed``: the first sample's shaper everywhere. InputError if no mode is selected."""
    if kind not in KINDS:
        raise InputError(f"shaping: unknown shaper {kind!r} (choose from none, {', '.join(KINDS)})")
    if not modes.selected:
        raise InputError("modes: no mode selected for shaping")
    f = modes.frequencies_hz[:, modes.selected]
    z = modes.damping_ratios[:, modes.selected]
    if fixed:
        f, z = np.broadcast_to(f[:1], f.shape), np.broadcast_to(z[:1], z.shape)
    shaper = convolve(*(design(kind, f[:, j], z[:, j], tolerance) for j in range(f.shape[1])))
    return ShaperSchedule(modes.segment, modes.eta, shaper.amplitudes, shaper.times, shaper.kind)


def shape_trajectory(model, path: PiecewiseC4Trajectory, kind: str, *, modes=None, threshold=DEFAULT_THRESHOLD,
                     max_damping=DEFAULT_MAX_DAMPING, tolerance=DEFAULT_TOLERANCE, fixed=False,
                     ama_rate_hz=DEFAULT_AMA_RATE_HZ, knot_rate_hz=None, workers=None):
    """Shape ``path`` with the configuration-dependent ``kind`` shaper ("zv", "zvd", "ei") of its
    selected modes. Returns (ShapedTrajectory, PathModes), or (None, PathModes) when no mode is
    selected (the caller passes the reference through unshaped and says so)."""
    if path.times.size < 2:
        raise InputError("trajectory: at least 2 waypoints are needed to shape a motion")
    pm = path_modes(model, path, ama_rate_hz, modes, threshold, max_damping, workers=workers)
    if not pm.selected:
        return None, pm
    schedule = shaper_schedule(pm, kind, tolerance, fixed)
    f0 = pm.frequencies_hz[0, list(pm.selected)]
    f1 = pm.frequencies_hz[-1, list(pm.selected)]
    summary = (f"shaped {kind}{' (fixed at the start configuration)' if fixed else ''} on mode(s) "
               f"{', '.join(str(k + 1) for k in pm.selected)} "
               f"({', '.join(f'{a:.3g}->{b:.3g}' for a, b in zip(f0, f1))} Hz)")
    traj = ShapedTrajectory(path, schedule, summary, knot_rate_hz)
    traj.summary = f"{summary}, added delay {traj.added_delay:.4f} s"
    return traj, pm

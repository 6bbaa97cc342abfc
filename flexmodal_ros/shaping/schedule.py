"""Configuration-dependent shapers: modes along a path, which modes to shape, the shaper schedule.

Along a waypoint path (:func:`~flexmodal_ros.shaping.reference.path_samples`: ``ama_rate_hz``
samples per second of motion, uniform along each straight joint-space segment) the modes come from
the closed-loop AMA of the thesis (2.13)-(2.17) (:func:`~flexmodal_ros.flexible_joint.ama.modal_analysis_batch`):
eigenvalues and mode shapes at every ``anchor_stride``-th sample and the last (the *anchors*),
where the modes are tracked by MAC (:func:`~flexmodal_ros.modes.tracking.track_modes`) and the modes to
shape are selected (below). f and ζ at the other samples come from

- ``modal="exact"``: the exact eigenvalues of the selected modes at every other sample. Without
  an external wrench and with D_m + K_D > 0 (:func:`~flexmodal_ros.flexible_joint.continuation.certificate_applies`)
  they come from Newton continuation (:func:`~flexmodal_ros.flexible_joint.continuation.continue_modes`,
  started from the straight-line interpolation of the anchor eigenvalues and the nearest anchor's
  mode shape; quadratic convergence to round-off) and stability from the
  K̄ > 0 certificate (:func:`~flexmodal_ros.flexible_joint.continuation.certified_stable`), with no full
  eigen-decomposition. A sample gets the full eigenvalue-only AMA instead when it is not
  certified (then its exact label decides), when a selected mode does not converge, leaves the
  upper half plane, or lands nearer another tracked mode's interpolation than its own; and so do
  all the other samples of a model the certificate does not decide (in ``workers`` threads,
  while the anchors are tracked). From a full AMA, a tracked mode is the eigenvalue nearest its
  interpolation (the value Newton converges to: tests compare the two to 1e-12). The other
  tracked modes are interpolated between the anchors;
- ``modal="polynomial"``: the selected modes only, as polynomial eigenvalues along the path
  (:func:`~flexmodal_ros.expansion.path.follow_path_modes`: Taylor expansions of order
  ``expansion_order`` in the path parameter of each segment, each reaching as far as its trust
  radius and verified there against the exact eigenvalues to ``expansion_tolerance``, tracked by
  the polynomials, two-point Taylor interpolation between the expansion points); the other tracked
  modes are interpolated linearly between the anchors (exact there). Stability is checked exactly
  at the anchors, the expansion points and the verification points, and from the selected modes'
  damping at every sample. ``anchor_error`` reports the measured accuracy (relative eigenvalue
  error at the anchors).

Mode selection (default): the end-effector contribution of tracked mode k at an anchor (the first,
middle and last anchor of every segment) is the
amplitude of its term in the end-effector step response to a motor-reference step K_P W Δq in the
segment's direction Δq. With the symmetric linearized matrices M̄, D̄, K̄ (2.9)-(2.11), the
receptance (λ² M̄ + λ D̄ + K̄)⁻¹ has the residue u uᵀ / (uᵀ (2λ M̄ + D̄) u) at the mode (λ, u)
(u the mode shape (2.18), [q; q_m] rows), so

    c_k = ‖J_p u_q‖ · |uᵀ b| / (|uᵀ (2λ M̄ + D̄) u| · |λ|),    b = [0; K_P W Δq],

J_p the translational Jacobian of the tool point (m per rad), c_k in m per unit move. Selected:
tracked modes whose largest c_k over the anchors is at least ``threshold`` × the largest of all
modes, and whose damping ratio stays below ``max_damping`` at the anchors (more damped modes lose
> 97 % of their vibration per period at ζ = 0.5, and EI is tabulated up to 0.5). ``modes``
(0-based indices of the modes of the first configuration, by frequency) overrides the selection.

Schedule: at every sample one shaper per selected mode from its (f, ζ) there, convolved
(:func:`~flexmodal_ros.shaping.shapers.convolve`) → :class:`~flexmodal_ros.shaping.reference.ShaperSchedule`.
``fixed=True`` uses the shaper of the first configuration everywhere (the fixed-frequency practice).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..core.blas import single_thread_blas
from ..core.errors import InputError
from ..flexible_joint.linear_model import configuration_terms
from ..flexible_joint.ama import ModalArrays, default_workers, linearized_batch, modal_analysis_arrays, modal_analysis_batch
from ..flexible_joint.continuation import certificate_applies, certified_stable, continue_modes
from ..robot.model import create_data, ee_jacobian
from ..modes import STABLE, frequencies_and_damping, is_oscillatory, match_eigenvalues, track_modes
from ..expansion.path import DEFAULT_ORDER as DEFAULT_EXPANSION_ORDER
from ..expansion.path import DEFAULT_TOLERANCE as DEFAULT_EXPANSION_TOLERANCE
from ..expansion.path import follow_path_modes
from ..robot.trajectory import PiecewiseC4Trajectory
from .reference import ShapedTrajectory, ShaperSchedule, path_samples
from .shapers import DEFAULT_TOLERANCE, KINDS, convolve, design
from ..core.validation import shown

DEFAULT_AMA_RATE_HZ = 100.0
DEFAULT_THRESHOLD = 0.1
DEFAULT_MAX_DAMPING = 0.5
ANCHOR_STRIDE = 10
MODAL_CHOICES = ("exact", "polynomial")


@dataclass(frozen=True)
class PathModes:
    """Modes along a path. ``segment``, ``eta`` (m,) sample positions, ``configurations`` (m, n);
    ``frequencies_hz`` / ``damping_ratios`` (m, K) of every tracked mode (K = modes of the first
    configuration, by frequency there; exact for the selected modes at every sample, for the
    others at the anchors and interpolated between them); ``contributions`` (K,) end-effector
    contribution [m per unit move], largest over the first, middle and last anchor of each
    segment; ``selected`` tracked indices chosen (0-based); ``anchors`` sample indices with mode
    shapes; ``modal`` "exact" or "polynomial"; ``expansion_samples`` sample indices of the
    polynomial expansions and ``anchor_error`` the largest relative error of the selected modes'
    polynomial eigenvalues at the anchors, where the exact ones are known (polynomial path; empty
    and 0 for the exact one); ``anchor_results`` the anchors' ModalResults (mode shapes; reused by
    the second-order estimate, :mod:`flexmodal_ros.shaping.untreated`)."""
    segment: np.ndarray
    eta: np.ndarray
    configurations: np.ndarray
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    contributions: np.ndarray
    selected: tuple
    anchors: np.ndarray
    modal: str = "exact"
    expansion_samples: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    anchor_error: float = 0.0
    anchor_results: tuple = field(default=(), repr=False, compare=False)

    def to_dict(self) -> dict:
        sel = list(self.selected)
        out = {"selected_modes": [k + 1 for k in sel],
               "contributions": self.contributions.tolist(),
               "start": {"frequencies_hz": self.frequencies_hz[0, sel].tolist(),
                         "damping_ratios": self.damping_ratios[0, sel].tolist()},
               "end": {"frequencies_hz": self.frequencies_hz[-1, sel].tolist(),
                       "damping_ratios": self.damping_ratios[-1, sel].tolist()},
               "frequency_range_hz": [[float(self.frequencies_hz[:, k].min()), float(self.frequencies_hz[:, k].max())]
                                      for k in sel],
               "samples": int(self.eta.size), "modal": self.modal}
        if self.modal == "polynomial":
            out.update(expansions=int(self.expansion_samples.size), anchor_error=self.anchor_error)
        return out


def check_modal(modal, error=InputError):
    """``modal`` if it is "exact" or "polynomial"; else ``error`` naming the choices."""
    if modal not in MODAL_CHOICES:
        raise error(f"modal: unknown value {shown(modal)} (choose from {', '.join(MODAL_CHOICES)})")
    return modal

# Configurations per batched AMA call in path_modes: small chunks keep both threads busy (one chunk
# per thread serializes the threads' GIL-held assembly and post-processing; benchmarks/bench_shaping.py).
SAMPLE_CHUNK = 32


@single_thread_blas
def path_modes(model, path: PiecewiseC4Trajectory, ama_rate_hz=DEFAULT_AMA_RATE_HZ, modes=None,
               threshold=DEFAULT_THRESHOLD, max_damping=DEFAULT_MAX_DAMPING, anchor_stride=ANCHOR_STRIDE,
               workers=None, modal="exact", expansion_order=DEFAULT_EXPANSION_ORDER,
               expansion_tolerance=DEFAULT_EXPANSION_TOLERANCE) -> PathModes:
    """Tracked modes along ``path`` and the selection (module docstring); ``modal``: "exact" or
    "polynomial" (``expansion_order``, ``expansion_tolerance``: the expansions' Taylor order and the
    relative eigenvalue error estimate that ends their reach). InputError when the closed loop is
    not asymptotically stable at a sample, when the number of oscillatory modes changes along the
    path (tracking impossible; seen at the anchors and at the samples that get a full AMA), or for
    a bad override."""
    check_modal(modal)
    if path.n != model.n:
        raise InputError(f"trajectory: {path.n} joints, the robot has {model.n}")
    segment, etas, qs = path_samples(path, ama_rate_hz)
    m = etas.size
    anchors = np.unique(np.r_[np.arange(0, m, max(1, int(anchor_stride))), m - 1])
    others = np.setdiff1d(np.arange(m), anchors) if modal == "exact" else np.zeros(0, int)
    newton = certificate_applies(model)
    pooled = np.zeros(0, int) if newton else others
    threads = max(1, min(workers or default_workers(),            # one chunk of work: one thread (no hand-offs)
                         -(-(anchors.size + pooled.size) // SAMPLE_CHUNK)))
    with _SampleSolver(model, qs, anchors, pooled, threads) as solver:
        if newton and others.size:      # the other samples' terms while the anchors are solved
            M, KG, _ = configuration_terms(model, create_data(model), qs[others])
        full = solver.anchors()
        _check_spectra([r.stability for r in full], [r.num_modes for r in full], anchors, qs, full[0].num_modes)
        order, _ = track_modes(full)
        anchor_lam = np.array([r.eigenvalues[o] for r, o in zip(full, order)])
        picks = set()                # contributions at the first, middle and last anchor of each segment
        for k in np.unique(segment[anchors]):
            idx = np.flatnonzero(segment[anchors] == k)
            picks |= {int(idx[0]), int(idx[len(idx) // 2]), int(idx[-1])}
        picks = sorted(picks)
        contrib = _contributions(model, path, qs[anchors[picks]], segment[anchors[picks]],
                                 [full[a] for a in picks], order[picks])
        if modes is None:
            calm = frequencies_and_damping(anchor_lam)[1].max(axis=0) < max_damping
            selected = tuple(int(k) for k in np.flatnonzero((contrib >= threshold * contrib.max()) & calm))
        else:
            selected = _checked_override(modes, anchor_lam.shape[1])
        light = solver.others()
    lam = _interpolated(anchor_lam, anchors, m)
    extra = {}
    if modal == "exact" and others.size:
        if newton:
            rest = _continued(model, M, KG, lam, others, selected, anchors, full, order)
            light = modal_analysis_arrays(model, qs[rest], SAMPLE_CHUNK) if rest.size else None
        else:
            rest = others
        if rest.size:
            _check_spectra(light.stability, light.num_modes.tolist(), rest, qs, anchor_lam.shape[1])
            lam[rest] = _nearest_eigenvalues(light.eigenvalues[:, :anchor_lam.shape[1]], lam[rest])
    elif modal == "polynomial" and selected:
        followed = follow_path_modes(model, path.positions, segment, etas, anchors,
                                     anchor_lam[:, list(selected)], expansion_order, expansion_tolerance)
        lam[:, list(selected)] = followed.eigenvalues
        extra = {"expansion_samples": followed.expansion_samples, "anchor_error": followed.anchor_error}
    freq, zeta = frequencies_and_damping(lam)
    return PathModes(segment, etas, qs, freq, zeta, contrib, selected, anchors, modal, anchor_results=tuple(full),
                     **extra)


def _continued(model, M, KG, lam, others, selected, anchors, full, order):
    """Exact path with the stability certificate: the selected modes' eigenvalues at the ``others``
    samples by Newton continuation (:func:`~flexmodal_ros.flexible_joint.continuation.continue_modes`) from
    the anchor interpolation ``lam`` (m, K) and the nearest anchor's mode shapes, written into
    ``lam``. Returns the samples left for a full eigenvalue analysis: not certified stable, or a
    selected mode that did not converge, left the upper half plane, or landed nearer another
    tracked mode's interpolation than its own."""
    stable = certified_stable(model, KG)
    sel = list(selected)
    if not sel:
        return others[~stable]
    near = np.abs(others[:, None] - anchors[None, :]).argmin(axis=1)
    shapes = np.array([r.mode_shapes[:model.n, o[sel]] for r, o in zip(full, order)])[near]
    guess = lam[others]
    cont = continue_modes(model, M, KG, guess[:, sel], shapes)
    own = np.abs(cont.eigenvalues - guess[:, sel])
    nearest_is_own = (own[:, :, None] <= np.abs(cont.eigenvalues[:, :, None] - guess[:, None, :])).all(axis=2)
    ok = stable & (cont.converged & is_oscillatory(cont.eigenvalues) & nearest_is_own).all(axis=1)
    rows = others[ok]
    lam[np.ix_(rows, sel)] = cont.eigenvalues[ok]
    return others[~ok]


class _SampleSolver:
    """The AMA along a path in ``workers`` threads of one pool (LAPACK runs in the C kernel, which
    releases the GIL): first the ``anchors`` (with mode shapes, for tracking and selection), then
    eigenvalues only at the ``others`` (the samples that need a full AMA, see the module
    docstring), each kind split evenly over the threads, so that the two kinds never compete for
    the cores and the caller can track the anchors' modes while the other samples are still being
    solved. Small chunks (``SAMPLE_CHUNK``) let one thread's Python work (Pinocchio terms, result
    objects) overlap the other's kernel call; the other samples stay padded arrays (no result
    objects). A context manager: leaving it ends the pool."""

    def __init__(self, model, qs, anchors, others, workers):
        self._width = 2 * model.n
        anchor_jobs = [(modal_analysis_batch, (model, qs[a]), {"workers": 1, "shapes": True, "chunk_size": SAMPLE_CHUNK})
                       for a in np.array_split(anchors, workers)]
        other_jobs = [(modal_analysis_arrays, (model, qs[o], SAMPLE_CHUNK), {})
                      for o in np.array_split(others, workers) if o.size]
        if workers == 1:
            # one chunk of work (a short path): solved in the caller's thread when asked for, no
            # pool — a thread start and two hand-offs cost more than the overlap with the
            # caller's Pinocchio terms gains, most of all on a loaded machine (scheduling delays)
            self._pool = None
            self._anchors, self._others = ([_Deferred(*job) for job in jobs] for jobs in (anchor_jobs, other_jobs))
            return
        self._pool = ThreadPoolExecutor(workers)
        self._anchors = [self._pool.submit(fn, *args, **kw) for fn, args, kw in anchor_jobs]
        self._others = [self._pool.submit(fn, *args, **kw) for fn, args, kw in other_jobs]

    def anchors(self) -> list:
        """The anchors' ModalResults, in sample order (waits for them)."""
        return [r for f in self._anchors for r in f.result()]

    def others(self) -> ModalArrays:
        """The other samples' eigenvalues, in sample order (waits for them)."""
        return ModalArrays.joined([f.result() for f in self._others], self._width)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        return False


class _Deferred:
    """A job run in the caller's thread on the first ``result()`` (the single-thread
    :class:`_SampleSolver`)."""

    def __init__(self, fn, args, kwargs):
        self._job, self._value = (fn, args, kwargs), None

    def result(self):
        if self._job is not None:
            fn, args, kwargs = self._job
            self._value, self._job = fn(*args, **kwargs), None
        return self._value


def _check_spectra(labels, counts, samples, qs, count):
    """InputError at the first sample whose closed loop is not asymptotically stable (``labels``)
    or whose number of oscillatory modes (``counts``) is not ``count``."""
    for i, label, found in zip(samples, labels, counts):
        if label != STABLE:
            raise InputError(f"trajectory: the closed loop is {label} at path sample {i} "
                             f"(q = {np.round(qs[i], 4).tolist()}): no modal shaping possible")
        if found != count:
            raise InputError(f"trajectory: the number of oscillatory modes changes along the path "
                             f"({count} -> {found} at sample {i}: a mode becomes overdamped); "
                             "modes cannot be tracked")


def _checked_override(modes, count):
    picked = []
    for k in np.atleast_1d(np.asarray(modes)).tolist():
        if not isinstance(k, int) or not 0 <= k < count:
            raise InputError(f"modes: {shown(k)} is not a mode index in 0..{count - 1}")
        picked.append(k)
    if len(set(picked)) != len(picked):
        raise InputError(f"modes: repeated index in {picked}")
    return tuple(sorted(picked))


def _interpolated(anchor_lam, anchors, m):
    """(m, K) straight-line interpolation of the anchors' tracked eigenvalues at every sample."""
    idx = np.arange(m)
    out = np.empty((m, anchor_lam.shape[1]), complex)
    for j in range(anchor_lam.shape[1]):
        out[:, j] = (np.interp(idx, anchors, anchor_lam[:, j].real)
                     + 1j * np.interp(idx, anchors, anchor_lam[:, j].imag))
    return out


def _nearest_eigenvalues(eig, guesses):
    """(r, K) eigenvalue of every tracked mode at r samples from their eigenvalues ``eig`` (r, K):
    the one nearest the mode's ``guesses`` (r, K) (the interpolation between the neighbouring
    anchors; Hungarian assignment when two tracked modes pick the same one)."""
    return np.take_along_axis(eig, match_eigenvalues(guesses, eig), axis=1)


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
    :class:`~flexmodal_ros.flexible_joint.ama.ModalResult` at configuration q, with mode shapes) for a
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
        raise InputError(f"shaping: unknown shaper {shown(kind)} (choose from none, {', '.join(KINDS)})")
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
                     ama_rate_hz=DEFAULT_AMA_RATE_HZ, knot_rate_hz=None, workers=None, modal="exact",
                     expansion_order=DEFAULT_EXPANSION_ORDER, expansion_tolerance=DEFAULT_EXPANSION_TOLERANCE):
    """Shape ``path`` with the configuration-dependent ``kind`` shaper ("zv", "zvd", "ei") of its
    selected modes, from the ``modal`` ("exact" or "polynomial") modes along it (:func:`path_modes`).
    Returns (ShapedTrajectory, PathModes), or (None, PathModes) when no mode is selected (the
    caller passes the reference through unshaped and says so)."""
    if path.times.size < 2:
        raise InputError("trajectory: at least 2 waypoints are needed to shape a motion")
    pm = path_modes(model, path, ama_rate_hz, modes, threshold, max_damping, workers=workers, modal=modal,
                    expansion_order=expansion_order, expansion_tolerance=expansion_tolerance)
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

"""The paper's validation task (Palomba & Vidoni 2019 §4, Figs. 2-5; notes_000 §4).

The end effector E of the two-link ERLS arm moves on a horizontal straight path of 0.3 m in
T = 0.5 s; the rigid coordinates follow by inverse kinematics. The model is linearized about the
dynamic equilibrium at T/2 and its eigenpairs are expanded in x = {q1, q2, q̇1, q̇2} up to degree 4;
at the 51 samples (Δt = 0.01 s) the exact eigenpairs (re-linearization at the actual operating
point) are compared with the polynomial ones: ε_f (30), ε_ξ (32), MAC (33) of right and left
eigenvectors, for the first three elastic modes.

Choices (the paper gives none of them, notes_000 §4/§6): the path runs from (0.45, −0.55) m to
(0.75, −0.55) m with a negative elbow angle q2 − q1 (−83° → −24°: the arm stretches, both links
stay below the horizontal, gravity along −y); this changes the first three elastic frequencies
by about 8 %, 14 % and 5 % (the first elastic mode is mostly link 1 bending with the elbow held by
link 2's inertia, which depends on the elbow angle); the time law is the rest-to-rest
9th-degree polynomial (4.29)-(4.30) of thesis ch. 4 (:mod:`flexmodal_ros.robot.trajectory`), so q̇ and q̈
vanish at both ends;
operating points are the nominal motion (q_f = 0, :func:`~.linearize.operating_point`); in the
polynomial, q̈ (not part of x) stays at its T/2 value while the exact reference uses q̈(t). The
rigid-body modes are the n_r eigenvalue pairs of smallest modulus; "elastic mode k" is the k-th
oscillatory mode above them (the paper's captions say "second/third/fourth vibration mode" while
its text says "first three elastic pairs"). The joints are unactuated in the linearization
(δu = 0), so the rigid-body modes of the moving arm are not asymptotically stable (at T/2 one
pair has Re λ ≈ +2 1/s); the expansion warning about it is recorded in ``warnings``.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.errors import InputError
from ...modes import mac, track_modes
from ..eigen import BiorthogonalModes, eigenpairs, eigenpairs_batch
from ..polynomial import ModalPolynomial
from ..recursion import ExpansionWarning, expand
from ...robot.trajectory import eta
from .erls_linearization import ErlsSystem, linearize, linearize_batch, operating_point

PAPER_T = 0.5                      # s
PAPER_SAMPLES = 51                 # Δt = 0.01 s
PAPER_ORDER = 4
PATH_START = (0.45, -0.55)         # m (this package's choice)
PATH_END = (0.75, -0.55)
PATH_ELBOW = -1                    # sign of the elbow angle q2 − q1
ANALYSED = 3                       # elastic modes compared


@dataclass(frozen=True)
class JointTrajectory:
    """Samples ``t`` (m,) [s], end-effector ``position`` (m, 2) [m], rigid coordinates ``q`` (m, n_r)
    [rad] (absolute angles), ``qd`` [rad/s], ``qdd`` [rad/s²]."""

    t: np.ndarray
    position: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


def straight_path(model, start=PATH_START, end=PATH_END, duration=PAPER_T, samples=PAPER_SAMPLES,
                  elbow=PATH_ELBOW) -> JointTrajectory:
    """End effector from ``start`` to ``end`` on a straight line with the rest-to-rest profile
    (4.30), rigid coordinates by closed-form inverse kinematics of the two-link arm (absolute
    angles: p = L1 e(q1) + L2 e(q2)) with the elbow angle q2 − q1 of sign ``elbow`` (±1),
    velocities and accelerations from the Jacobian."""
    if model.n_r != 2:
        raise InputError(f"model: the straight-path task needs a two-link arm, got {model.n_r} links")
    if duration <= 0 or int(samples) < 2 or elbow not in (-1, 1):
        raise InputError("straight_path: duration must be > 0 s, samples >= 2 and elbow ±1")
    L1, L2 = (link.length for link in model.links)
    a, b = np.asarray(start, float), np.asarray(end, float)
    t = np.linspace(0.0, duration, int(samples))
    s = eta(t / duration)                                      # (5, m): η and its derivatives
    p = a + np.outer(s[0], b - a)
    v = np.outer(s[1] / duration, b - a)
    acc = np.outer(s[2] / duration ** 2, b - a)
    r2 = np.sum(p * p, axis=1)
    c = (r2 - L1 ** 2 - L2 ** 2) / (2 * L1 * L2)
    if np.any(np.abs(c) > 1):
        raise InputError("path: some points are out of reach of the arm")
    gamma = np.arccos(c) * elbow                              # elbow angle q2 − q1
    q1 = np.arctan2(p[:, 1], p[:, 0]) - np.arctan2(L2 * np.sin(gamma), L1 + L2 * np.cos(gamma))
    q = np.column_stack([q1, q1 + gamma])
    perp = lambda ang: np.stack([-np.sin(ang), np.cos(ang)], axis=-1)
    J = np.stack([L1 * perp(q[:, 0]), L2 * perp(q[:, 1])], axis=-1)     # (m, 2, 2)
    qd = np.linalg.solve(J, v[..., None])[..., 0]
    e = lambda ang: np.stack([np.cos(ang), np.sin(ang)], axis=-1)
    Jdot_qd = -(L1 * e(q[:, 0]) * qd[:, :1] ** 2 + L2 * e(q[:, 1]) * qd[:, 1:] ** 2)
    qdd = np.linalg.solve(J, (acc - Jdot_qd)[..., None])[..., 0]
    return JointTrajectory(t, p, q, qd, qdd)


def elastic_mode_numbers(modes, n_r: int, count: int = ANALYSED) -> list[int]:
    """1-based numbers (ModeSet order) of the first ``count`` elastic modes: oscillatory modes that
    are not among the 2 n_r eigenvalues of smallest modulus (the rigid-body modes)."""
    osc = np.abs(modes.eigenvalues)
    tags = [(a, i) for i, a in enumerate(osc)] * 2 + [(abs(r), -1) for r in modes.real_eigenvalues]
    rigid = {i for _, i in sorted(tags, key=lambda tag: tag[0])[:2 * n_r]}
    elastic = [i + 1 for i in range(osc.size) if i not in rigid]
    if len(elastic) < count:
        raise InputError(f"only {len(elastic)} elastic modes found, {count} requested")
    return elastic[:count]


@dataclass(frozen=True)
class ValidationResult:
    """Curves over the samples (rows) for the analysed modes (columns): exact and polynomial
    ``f_exact``/``f_poly`` [Hz], ``zeta_exact``/``zeta_poly`` [-], ``eps_f`` [%] (30),
    ``eps_zeta`` [%] (32), ``mac_right``/``mac_left`` (33); ``trajectory``; ``polynomial``;
    ``mode_numbers`` at T/2; ``exact_modes`` (list of BiorthogonalModes); timings [s]:
    ``time_exact_eig`` (eigen-solutions only), ``time_exact`` (re-linearization + eigen-solutions),
    ``time_poly`` (polynomial λ, φ, ψ of the analysed pairs), all for the whole trajectory;
    ``warnings`` raised by the expansion."""

    trajectory: JointTrajectory
    polynomial: ModalPolynomial
    mode_numbers: list
    exact_modes: list
    f_exact: np.ndarray
    f_poly: np.ndarray
    zeta_exact: np.ndarray
    zeta_poly: np.ndarray
    eps_f: np.ndarray
    eps_zeta: np.ndarray
    mac_right: np.ndarray
    mac_left: np.ndarray
    time_exact_eig: float
    time_exact: float
    time_poly: float
    warnings: list

    def middle(self, fraction: float = 0.8) -> slice:
        """Rows of the middle ``fraction`` of the trajectory (by time)."""
        t = self.trajectory.t
        lo, hi = t[0] + (1 - fraction) / 2 * (t[-1] - t[0]), t[-1] - (1 - fraction) / 2 * (t[-1] - t[0])
        rows = np.flatnonzero((t >= lo - 1e-12) & (t <= hi + 1e-12))
        return slice(rows[0], rows[-1] + 1)

    def summary(self) -> dict:
        mid = self.middle()
        f = self.f_exact
        return {
            "mode_numbers": list(self.mode_numbers),
            "frequency_range_hz": [[float(f[:, j].min()), float(f[:, j].max())] for j in range(f.shape[1])],
            "frequency_variation_percent": (100 * (f.max(axis=0) / f.min(axis=0) - 1)).tolist(),
            "damping_range": [[float(z.min()), float(z.max())] for z in self.zeta_exact.T],
            "max_eps_f_middle_percent": self.eps_f[mid].max(axis=0).tolist(),
            "max_eps_f_percent": self.eps_f.max(axis=0).tolist(),
            "max_eps_zeta_middle_percent": self.eps_zeta[mid].max(axis=0).tolist(),
            "min_mac_right_middle": self.mac_right[mid].min(axis=0).tolist(),
            "min_mac_left_middle": self.mac_left[mid].min(axis=0).tolist(),
            "min_mac_right": self.mac_right.min(axis=0).tolist(),
            "min_mac_left": self.mac_left.min(axis=0).tolist(),
            "time_exact_eig_s": self.time_exact_eig, "time_exact_s": self.time_exact,
            "time_poly_s": self.time_poly,
            "reduction_percent": 100 * (1 - self.time_poly / self.time_exact_eig),
            "num_terms": self.polynomial.num_terms, "expansion_time_s": self.polynomial.expansion_time_s,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class PaperExpansion:
    """The expansion of the task: operating ``points`` of the trajectory, the parametric ``system``
    at T/2 (x = {q1, q2, q̇1, q̇2}), the analysed ``mode_numbers``, the ``polynomial`` and the
    ``warnings`` the expansion raised."""

    points: list
    system: ErlsSystem
    mode_numbers: list
    polynomial: ModalPolynomial
    warnings: list


def expand_at_half_time(model, trajectory: JointTrajectory | None = None, order: int = PAPER_ORDER,
                        analysed: int = ANALYSED) -> PaperExpansion:
    """Operating points along ``trajectory`` (default :func:`straight_path`) and the expansion of
    the first ``analysed`` elastic modes about the middle sample."""
    traj = trajectory if trajectory is not None else straight_path(model)
    mid = len(traj.t) // 2
    points = [operating_point(model, q, qd, qdd) for q, qd, qdd in zip(traj.q, traj.qd, traj.qdd)]
    system = ErlsSystem(model, points[mid], ("positions", "velocities"))
    lin = linearize(model, points[mid])
    numbers = elastic_mode_numbers(eigenpairs(lin.M, lin.C, lin.K).modes(), model.n_r, analysed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExpansionWarning)
        poly = expand(system, order=order, modes=numbers)
    return PaperExpansion(points, system, numbers, poly, [str(w.message) for w in caught])


def validation_task(model, trajectory: JointTrajectory | None = None, order: int = PAPER_ORDER,
                    analysed: int = ANALYSED) -> ValidationResult:
    """Run the §4 comparison (module docstring) and time both paths."""
    traj = trajectory if trajectory is not None else straight_path(model)
    mid = len(traj.t) // 2
    setup = expand_at_half_time(model, traj, order, analysed)
    points, numbers, poly = setup.points, setup.mode_numbers, setup.polynomial
    start = time.perf_counter()
    mats = linearize_batch(model, points)
    lin_time = time.perf_counter() - start
    start = time.perf_counter()
    exact = [e.modes() for e in eigenpairs_batch(*mats)]
    eig_time = time.perf_counter() - start
    x = np.hstack([traj.q, traj.qd])
    start = time.perf_counter()
    ev = poly.evaluate(x, warn=False)
    poly_time = time.perf_counter() - start

    order_idx = _tracked(exact, mid, [n - 1 for n in numbers])
    cols = np.arange(len(numbers))
    f_ex = np.array([m.frequencies_hz[o] for m, o in zip(exact, order_idx)])
    z_ex = np.array([m.damping_ratios[o] for m, o in zip(exact, order_idx)])
    mac_r = np.array([np.diag(mac(m.mode_shapes[:, o], ev.right[i])) for i, (m, o) in enumerate(zip(exact, order_idx))])
    mac_l = np.array([np.diag(mac(m.left_shapes[:, o], ev.left[i])) for i, (m, o) in enumerate(zip(exact, order_idx))])
    f_p, z_p = ev.frequencies_hz[:, cols], ev.damping_ratios[:, cols]
    return ValidationResult(traj, poly, numbers, exact, f_ex, f_p, z_ex, z_p,
                            100 * np.abs(f_ex - f_p) / f_ex, 100 * np.abs(z_ex - z_p) / np.abs(z_ex),
                            mac_r, mac_l, eig_time, lin_time + eig_time, poly_time, setup.warnings)


def _tracked(exact, mid, start_cols, window: int = 8):
    """Index (per sample) of the exact modes continuing modes ``start_cols`` of sample ``mid``:
    MAC tracking (:func:`~flexmodal_ros.modes.tracking.track_modes`) from T/2 towards both ends over the
    lowest ``window`` oscillatory modes."""
    size = min(min(m.num_modes for m in exact), max(start_cols) + 1 + window)
    subset = lambda m: BiorthogonalModes(**{**m.mode_fields(), "frequencies_hz": m.frequencies_hz[:size],
                                            "damping_ratios": m.damping_ratios[:size],
                                            "eigenvalues": m.eigenvalues[:size],
                                            "mode_shapes": m.mode_shapes[:, :size]},
                                         left_shapes=m.left_shapes[:, :size])
    out = np.zeros((len(exact), len(start_cols)), int)
    for seq in (range(mid, len(exact)), range(mid, -1, -1)):
        seq = list(seq)
        order, _ = track_modes([subset(exact[i]) for i in seq])
        for row, i in enumerate(seq):
            out[i] = order[row, start_cols]
    return out


def plot_validation(result: ValidationResult, directory, modes=None) -> list[Path]:
    """One PNG per analysed mode (``modes``: 0-based columns, default all) with the six panels of
    the paper's Figs. 3-5: (a) f exact and approximated, (b) ζ, (c) ε_f, (d) ε_ξ, (e) MAC of
    right and (f) of left eigenvectors."""
    # deferred: matplotlib
    import matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    t = result.trajectory.t
    files = []
    for j in range(len(result.mode_numbers)) if modes is None else modes:
        number = result.mode_numbers[j]
        fig, ax = plt.subplots(3, 2, figsize=(11, 9), sharex=True)
        panels = [(ax[0, 0], [(result.f_exact[:, j], "exact"), (result.f_poly[:, j], "polynomial")], "f [Hz]"),
                  (ax[0, 1], [(100 * result.zeta_exact[:, j], "exact"), (100 * result.zeta_poly[:, j], "polynomial")],
                   "damping ratio [%]"),
                  (ax[1, 0], [(result.eps_f[:, j], None)], "ε_f [%]"),
                  (ax[1, 1], [(result.eps_zeta[:, j], None)], "ε_ξ [%]"),
                  (ax[2, 0], [(result.mac_right[:, j], None)], "MAC right"),
                  (ax[2, 1], [(result.mac_left[:, j], None)], "MAC left")]
        for a, curves, label in panels:
            for values, name in curves:
                a.plot(t, values, marker=".", label=name)
            a.set_ylabel(label)
            a.grid(True, alpha=0.3)
            a.ticklabel_format(axis="y", useOffset=False)
            if curves[0][1]:
                a.legend(fontsize="small")
        for a in ax[2]:
            a.set_xlabel("t [s]")
        fig.suptitle(f"elastic mode {j + 1} (mode {number} at T/2): exact vs degree-{result.polynomial.order} polynomial")
        fig.tight_layout()
        path = directory / f"erls_elastic_mode_{j + 1}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)
    return files

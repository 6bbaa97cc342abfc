"""Modal maps over many configurations (thesis §2.4.2, Figs. 2.3-2.5; App. II grids).

Configuration sets (list, grid, straight line), batch modal analysis, mode tracking between
neighbouring configurations by the modal assurance criterion (MAC) with crossings reported,
gain sweeps (K_D = 0.425 √K_P, Fig. 2.5), and CSV / JSON / PNG writers.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from flexmodal_ros.errors import InputError
from flexmodal_ros.modal import ModalResult, check_configurations, modal_analysis, \
    modal_analysis_batch
from flexmodal_ros.model import create_data, with_overrides
from flexmodal_ros.validation import finite_vector, positive

KD_RATIO = 0.425  # K_D = 0.425 √K_P, thesis Fig. 2.5


def config_line(model, q_start, q_end, num: int) -> np.ndarray:
    """``num`` ≥ 2 configurations evenly spaced from ``q_start`` to ``q_end`` (both included), (num, n).

    The thesis' 50 Scompi configurations are ``config_line(m, q1, q50, 50)``.
    """
    a = finite_vector(q_start, model.n, "q_start")
    b = finite_vector(q_end, model.n, "q_end")
    if int(num) < 2:
        raise InputError(f"num: a line needs at least 2 configurations, got {num}")
    return np.linspace(a, b, int(num))


def config_grid(model, base_q, axes: Mapping[str, Sequence[float]]) -> np.ndarray:
    """Cartesian grid: joints named in ``axes`` take each listed value, the others stay at
    ``base_q``. Returns (Π len, n) in serpentine order: the first named joint varies slowest and
    the faster axes reverse direction on alternate passes, so consecutive configurations are
    always grid neighbours (needed by the mode tracking of :func:`modal_map`)."""
    base = finite_vector(base_q, model.n, "base_q")
    if not axes:
        raise InputError("axes: at least one joint to vary is required")
    idx = [model.joint_index(name) for name in axes]
    values = [finite_vector(v, None, f"axes.{name}") for name, v in axes.items()]
    if any(v.size == 0 for v in values):
        raise InputError("axes: every varied joint needs at least one value")
    grid = np.tile(base, (int(np.prod([v.size for v in values])), 1))
    grid[:, idx] = _serpentine(values)
    return grid


def _serpentine(values):
    """Boustrophedon enumeration of the Cartesian product of ``values`` (list of 1-D arrays)."""
    if len(values) == 1:
        return values[0][:, None]
    rest = _serpentine(values[1:])
    rows = [np.column_stack([np.full(len(rest), v), rest if i % 2 == 0 else rest[::-1]])
            for i, v in enumerate(values[0])]
    return np.vstack(rows)


def mac(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Modal assurance criterion |aᴴb|² / ((aᴴa)(bᴴb)) between the columns of a (r, p) and b (r, s)."""
    num = np.abs(a.conj().T @ b) ** 2
    return num / np.outer(np.sum(np.abs(a) ** 2, 0), np.sum(np.abs(b) ** 2, 0))


@dataclass(frozen=True)
class Crossing:
    """Tracked modes ``modes`` (0-based) swap frequency order between configurations
    ``between`` = (i, i + 1) (0-based); ``description`` is 1-based for humans."""

    modes: tuple
    between: tuple
    description: str


def track_modes(results: Sequence[ModalResult]):
    """Follow modes along a sequence of neighbouring configurations.

    Tracked mode j is the j-th mode (by frequency) of the first configuration; in each next
    configuration it is the mode whose shape best matches (maximum total MAC, Hungarian
    assignment) its shape in the previous one. Returns ``(order, crossings)``: ``order[i, j]`` is
    the index in ``results[i]``'s sorted modes of tracked mode j; ``crossings`` lists frequency
    order swaps between tracked modes.
    """
    counts = {r.num_modes for r in results}
    if len(counts) != 1:
        raise InputError(f"track_modes: the number of oscillatory modes changes along the sweep "
                         f"({sorted(counts)}); modes cannot be tracked")
    order = np.empty((len(results), counts.pop()), dtype=int)
    order[0] = np.arange(order.shape[1])
    for i in range(1, len(results)):
        prev = results[i - 1].mode_shapes[:, order[i - 1]]
        rows, cols = linear_sum_assignment(-mac(prev, results[i].mode_shapes))
        order[i, rows] = cols
    return order, _crossings(results, order)


def _crossings(results, order) -> list[Crossing]:
    f = np.array([r.frequencies_hz[o] for r, o in zip(results, order)])
    out = []
    for i in range(1, len(f)):
        sign_prev = np.sign(f[i - 1][:, None] - f[i - 1][None, :])
        sign_now = np.sign(f[i][:, None] - f[i][None, :])
        for a, b in zip(*np.nonzero(np.triu(sign_prev * sign_now < 0))):
            desc = (f"modes {a + 1} and {b + 1} cross between configurations {i} and {i + 1} "
                    f"(near {0.5 * (f[i, a] + f[i, b]):.4g} Hz)")
            out.append(Crossing((int(a), int(b)), (i - 1, i), desc))
    return out


@dataclass(frozen=True)
class ModalMap:
    """Modal parameters over configurations ``configurations`` (m, n); ``mode_order`` (m, modes)
    from :func:`track_modes` or None; ``crossings`` (empty when not tracked)."""

    joint_names: tuple
    configurations: np.ndarray
    results: list
    mode_order: np.ndarray | None
    crossings: list

    def tracked(self, field: str) -> np.ndarray:
        """(m, modes) array of ``field`` ('frequencies_hz', 'damping_ratios') per tracked mode
        (sorted order when untracked; NaN-padded if mode counts differ)."""
        width = max(r.num_modes for r in self.results)
        out = np.full((len(self.results), width), np.nan)
        for i, r in enumerate(self.results):
            vals = getattr(r, field)
            out[i, : vals.size] = vals if self.mode_order is None else vals[self.mode_order[i]]
        return out

    def to_dict(self) -> dict:
        return {
            "joint_names": list(self.joint_names),
            "configurations": self.configurations.tolist(),
            "results": [r.to_dict() for r in self.results],
            "mode_order": None if self.mode_order is None else self.mode_order.tolist(),
            "crossings": [c.description for c in self.crossings],
        }


def modal_map(model, configurations, track: bool = True, workers: int | None = None,
              progress: bool = False) -> ModalMap:
    """Batch modal analysis over ``configurations`` (m, n), optionally mode-tracked.

    ``progress`` shows a tqdm bar on stderr.
    """
    qs = check_configurations(model, configurations, "configurations")
    if progress:
        from tqdm import tqdm
        with tqdm(total=len(qs), unit="config", desc="modal map") as bar:
            results = modal_analysis_batch(model, qs, workers=workers, progress=bar.update)
    else:
        results = modal_analysis_batch(model, qs, workers=workers)
    order, crossings = track_modes(results) if track and len(results) > 1 else (None, [])
    if track and len(results) == 1:
        order = np.arange(results[0].num_modes)[None, :]
    return ModalMap(model.joint_names, qs, results, order, crossings)


def gain_sweep(model, q, kp_values, kd_ratio: float = KD_RATIO) -> list[ModalResult]:
    """Modal parameters at configuration ``q`` for each K_P in ``kp_values`` (same on all joints)
    with K_D = kd_ratio·√K_P (thesis Fig. 2.5) [kp N·m/rad, kd N·m·s/rad]."""
    kps = positive(finite_vector(kp_values, None, "kp_values"), "kp_values")
    ratio = float(positive(kd_ratio, "kd_ratio"))
    data = create_data(model)
    return [modal_analysis(with_overrides(model, kp=kp, kd=ratio * np.sqrt(kp)), q, data)
            for kp in kps]


def write_csv(mmap: ModalMap, path) -> Path:
    """One row per configuration: index (1-based), joint values, then f [Hz] and ζ [-] per
    (tracked) mode, stable flag."""
    path = Path(path)
    f, z = mmap.tracked("frequencies_hz"), mmap.tracked("damping_ratios")
    modes = range(1, f.shape[1] + 1)
    header = (["configuration"] + [f"q_{j}" for j in mmap.joint_names]
              + [f"f{k}_hz" for k in modes] + [f"zeta{k}" for k in modes] + ["stable"])
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i, r in enumerate(mmap.results):
            w.writerow([i + 1] + [repr(float(v)) for v in mmap.configurations[i]]
                       + ["" if np.isnan(v) else repr(float(v)) for v in (*f[i], *z[i])]
                       + [int(r.stable)])
    return path


def write_json(mmap: ModalMap, path) -> Path:
    """The :meth:`ModalMap.to_dict` document."""
    path = Path(path)
    path.write_text(json.dumps(mmap.to_dict()))
    return path


def plot_map(mmap: ModalMap, path, title: str = "") -> Path:
    """PNG with frequency [Hz, log scale] and damping ratio [%] of each (tracked) mode vs
    configuration number (like thesis Figs. 2.3-2.4)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    x = np.arange(1, len(mmap.results) + 1)
    f, z = mmap.tracked("frequencies_hz"), mmap.tracked("damping_ratios")
    fig, (ax_f, ax_z) = plt.subplots(2, 1, sharex=True, figsize=(10, 7))
    for k in range(f.shape[1]):
        style = {"marker": ".", "color": plt.cm.tab20(k % 20)}
        ax_f.plot(x, f[:, k], label=f"mode {k + 1}", **style)
        ax_z.plot(x, 100 * z[:, k], **style)
    ax_f.set_yscale("log")
    ax_f.set_ylabel("natural frequency [Hz]")
    ax_z.set_ylabel("damping ratio [%]")
    ax_z.set_xlabel("configuration")
    ax_f.legend(fontsize="small", ncol=4, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax_f.set_title(title or ("tracked modes" if mmap.mode_order is not None else "modes by frequency"))
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path

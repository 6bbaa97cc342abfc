"""Modes over many configurations: :class:`ModalMap`, CSV/JSON output, plots, progress bars."""
from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .modeset import ModeSet
from .tracking import track_modes


@dataclass(frozen=True)
class ModalMap:
    """Mode sets over configurations ``configurations`` (m, n) of the coordinates ``joint_names``;
    ``mode_order`` (m, modes) from :func:`track_modes` or None; ``crossings`` (empty when not
    tracked). Any :class:`ModeSet` producer can be mapped (:func:`map_modes`)."""

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


def map_modes(joint_names, configurations: np.ndarray, results: Sequence[ModeSet],
              track: bool = True) -> ModalMap:
    """:class:`ModalMap` of already computed ``results`` (one per configuration), MAC-tracked."""
    results = list(results)
    if track and len(results) > 1:
        order, crossings = track_modes(results)
    else:
        order = np.arange(results[0].num_modes)[None, :] if track and results else None
        crossings = []
    return ModalMap(tuple(joint_names), np.asarray(configurations), results, order, crossings)


def progress_bar(total: int, desc: str, unit: str = "config", enabled: bool = True):
    """A tqdm bar on stderr (a context manager with ``update(k)``), or a silent stand-in."""
    if not enabled:
        return _NoProgress()
    from tqdm import tqdm  # deferred: tqdm (progress bars only)
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass


def write_csv(mmap: ModalMap, path) -> Path:
    """One row per configuration: index (1-based), coordinate values, then f [Hz] and ζ [-] per
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


def plot_tracked(x, frequencies_hz: np.ndarray, damping_ratios: np.ndarray, path, title: str = "",
                 xlabel: str = "configuration", log_frequency: bool = True) -> Path:
    """PNG with frequency [Hz] and damping ratio [%] of each mode (columns of the (m, modes)
    arrays) against ``x`` (like thesis Figs. 2.3-2.4)."""
    import matplotlib  # deferred: matplotlib (heavy import, plots only)
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax_f, ax_z) = plt.subplots(2, 1, sharex=True, figsize=(10, 7))
    for k in range(frequencies_hz.shape[1]):
        style = {"marker": ".", "color": plt.cm.tab20(k % 20)}
        ax_f.plot(x, frequencies_hz[:, k], label=f"mode {k + 1}", **style)
        ax_z.plot(x, 100 * damping_ratios[:, k], **style)
    if log_frequency:
        ax_f.set_yscale("log")
    ax_f.set_ylabel("natural frequency [Hz]")
    ax_z.set_ylabel("damping ratio [%]")
    ax_z.set_xlabel(xlabel)
    ax_f.legend(fontsize="small", ncol=4, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax_f.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_map(mmap: ModalMap, path, title: str = "") -> Path:
    """:func:`plot_tracked` of a :class:`ModalMap` against the configuration number."""
    default = "tracked modes" if mmap.mode_order is not None else "modes by frequency"
    return plot_tracked(np.arange(1, len(mmap.results) + 1), mmap.tracked("frequencies_hz"),
                        mmap.tracked("damping_ratios"), path, title or default)

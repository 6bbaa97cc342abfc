"""Stabilization diagram and automatic selection of physical modes by clustering.

Stabilization (single-mode validation criteria of Reynders et al. 2012, as in the thesis
§2.4.3): a pole of order n is *stable* when the previous order analysed has a pole within
|Δf|/f ≤ ``frequency_rtol``, |Δζ| ≤ max(``damping_rtol``·ζ, ``damping_atol``) and with
MAC ≥ ``mac_min``. Poles outside the physical range (ζ ≤ 0 or ≥ ``damping_max``, damped frequency
above ``nyquist_fraction``·fs/2, f below the record's resolution) never are.

Selection (in place of the thesis' NAFID grid tool and of hand picking): the stable poles are
grouped by hierarchical clustering (average linkage) with the distance
d = max(|Δf|/f̄ / δ_f, |Δζ| / δ_ζ, (1 − MAC) / δ_MAC) cut at 1, so two poles belong together
when they agree in frequency, damping and shape to within the tolerances δ. A cluster is a mode
when it holds poles from at least ``min_fraction`` of the largest cluster's orders (and at least
``min_poles``); one pole per order is kept (the one nearest the cluster median). The mode is the
cluster median (f, ζ) and the shape of its most central pole.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..modes import TWO_PI, damped_frequencies, frequencies_and_damping, is_oscillatory, is_real, mac, normalize_shapes
from .estimators import OrderPoles
from dataclasses import replace
from pathlib import Path


@dataclass(frozen=True)
class SelectionCriteria:
    """Stabilization and clustering tolerances (fractions; see the module docstring)."""

    frequency_rtol: float = 0.01
    damping_rtol: float = 0.05
    damping_atol: float = 0.002
    mac_min: float = 0.98
    damping_max: float = 0.95
    nyquist_fraction: float = 0.9
    cluster_frequency: float = 0.005
    cluster_damping: float = 0.01
    cluster_mac: float = 0.05
    min_fraction: float = 0.3
    min_poles: int = 3

    def __post_init__(self):
        for name in ("frequency_rtol", "damping_rtol", "damping_atol", "cluster_frequency",
                     "cluster_damping", "cluster_mac"):
            if not np.isfinite(getattr(self, name)) or getattr(self, name) <= 0:
                raise InputError(f"{name}: must be > 0, got {getattr(self, name)}")
        for name in ("mac_min", "damping_max", "nyquist_fraction", "min_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise InputError(f"{name}: must be in (0, 1], got {getattr(self, name)}")
        if self.min_poles < 1:
            raise InputError(f"min_poles: must be >= 1, got {self.min_poles}")


# Measurement noise scatters a mode's poles over the orders: stabilization and clustering
# tolerances four (f) and two to three (ζ) times wider; the output-error fit that follows
# (flexmodal_ros.oma.mode_estimation) settles the estimate.
NOISY_CRITERIA = SelectionCriteria(frequency_rtol=0.02, damping_rtol=0.1, cluster_frequency=0.02,
                                   cluster_damping=0.03)


@dataclass(frozen=True)
class StabilizationDiagram:
    """Every physical-range pole of every order: ``order``, ``frequency_hz``, ``damping``,
    ``eigenvalue`` (P,), ``shapes`` (c, P) unit-norm, ``amplitude`` (P,) (NaN if the method gives
    none), ``stable`` (P,) bool, ``cluster`` (P,) index of the selected mode the pole supports
    (−1: none); ``orders`` analysed; ``sample_rate_hz``; ``method``."""

    order: np.ndarray
    frequency_hz: np.ndarray
    damping: np.ndarray
    eigenvalue: np.ndarray
    shapes: np.ndarray
    amplitude: np.ndarray
    stable: np.ndarray
    cluster: np.ndarray
    orders: np.ndarray
    sample_rate_hz: float
    method: str

    def to_dict(self) -> dict:
        return {"method": self.method, "orders": self.orders.tolist(),
                "order": self.order.tolist(), "frequency_hz": self.frequency_hz.tolist(),
                "damping_ratio": self.damping.tolist(), "stable": self.stable.tolist(),
                "cluster": self.cluster.tolist()}


@dataclass(frozen=True)
class SelectedMode:
    """One cluster: median ``frequency_hz``/``damping``, ``eigenvalue``, unit ``shape`` (c,),
    ``amplitude`` (median over the cluster; NaN if none), ``poles`` (cluster size),
    ``frequency_spread``/``damping_spread`` (interquartile ranges) [Hz], [-]."""

    frequency_hz: float
    damping: float
    eigenvalue: complex
    shape: np.ndarray
    amplitude: float
    poles: int
    frequency_spread: float
    damping_spread: float


def build_diagram(order_poles: list[OrderPoles], fs: float, duration: float, method: str,
                  criteria: SelectionCriteria) -> StabilizationDiagram:
    """Physical-range poles of every order with their stability flag (module docstring)."""
    f_min = 2.0 / duration                       # two periods in the record at least
    rows = []
    prev = None
    for op in order_poles:
        lam = op.eigenvalues
        f, z = frequencies_and_damping(lam)
        keep = (is_oscillatory(lam) & (z > 0) & (z < criteria.damping_max) & (f > f_min)
                & (damped_frequencies(lam) < criteria.nyquist_fraction * 0.5 * fs))
        shapes = normalize_shapes(op.shapes[:, keep]) if keep.any() else op.shapes[:, :0]
        cur = (f[keep], z[keep], shapes)
        stable = _stable_against(cur, prev, criteria) if prev is not None else np.zeros(keep.sum(), bool)
        rows.append((np.full(keep.sum(), op.order), f[keep], z[keep], lam[keep], shapes,
                     op.amplitudes[keep], stable))
        prev = cur
    cat = lambda i: np.concatenate([r[i] for r in rows]) if rows else np.empty(0)
    shapes = np.concatenate([r[4] for r in rows], axis=1)
    P = shapes.shape[1]
    return StabilizationDiagram(cat(0).astype(int), cat(1), cat(2), cat(3).astype(complex), shapes,
                                cat(5), cat(6).astype(bool), np.full(P, -1),
                                np.array([op.order for op in order_poles]), float(fs), method)


def _stable_against(cur, prev, criteria):
    f, z, phi = cur
    fp, zp, phip = prev
    if f.size == 0 or fp.size == 0:
        return np.zeros(f.size, bool)
    df = np.abs(f[:, None] - fp[None, :]) / f[:, None]
    dz = np.abs(z[:, None] - zp[None, :])
    ok = ((df <= criteria.frequency_rtol)
          & (dz <= np.maximum(criteria.damping_rtol * z[:, None], criteria.damping_atol))
          & (mac(phi, phip) >= criteria.mac_min))
    return ok.any(axis=1)


def select_modes(diagram: StabilizationDiagram, criteria: SelectionCriteria):
    """Cluster the stable poles (module docstring) → (modes sorted by frequency, diagram with
    ``cluster`` filled)."""
    # deferred: scipy.cluster
    from scipy.cluster.hierarchy import fcluster, linkage

    idx = np.flatnonzero(diagram.stable)
    cluster = np.full(diagram.order.size, -1)
    if idx.size < criteria.min_poles:
        return [], _with_clusters(diagram, cluster)
    f, z, phi = diagram.frequency_hz[idx], diagram.damping[idx], diagram.shapes[:, idx]
    labels = np.zeros(idx.size, int)
    if idx.size > 1:
        dist = np.maximum.reduce([
            np.abs(f[:, None] - f[None, :]) / np.maximum(f[:, None], f[None, :]) / criteria.cluster_frequency,
            np.abs(z[:, None] - z[None, :]) / criteria.cluster_damping,
            (1.0 - mac(phi, phi)) / criteria.cluster_mac])
        condensed = np.maximum(dist, dist.T)[np.triu_indices(idx.size, 1)]
        labels = fcluster(linkage(condensed, method="average"), t=1.0, criterion="distance") - 1
    members = [_one_per_order(idx[labels == k], diagram) for k in range(labels.max() + 1)]
    sizes = np.array([m.size for m in members])
    needed = max(criteria.min_poles, criteria.min_fraction * sizes.max())
    modes = []
    for m in sorted((m for m in members if m.size >= needed), key=lambda m: np.median(diagram.frequency_hz[m])):
        cluster[m] = len(modes)
        modes.append(_summarize(m, diagram))
    return modes, _with_clusters(diagram, cluster)


def merge_selected(modes, others, rtol=0.03):
    """``modes`` and those of ``others`` (lists of :class:`SelectedMode`) not within ``rtol`` ·|λ|
    of one already in, sorted by frequency. The default 3 %: the OMA adds each reference's own
    poles to the joint realization's (noisy records), and a pole nearer than that to a joint one
    is the same mode, whose duplicate would make the joint output-error fit ill-posed."""
    out = list(modes)
    for m in others:
        if all(abs(m.eigenvalue - k.eigenvalue) > rtol * abs(m.eigenvalue) for k in out):
            out.append(m)
    return sorted(out, key=lambda m: m.frequency_hz)


def stable_real_poles(order_poles: list[OrderPoles], criteria: SelectionCriteria, fs: float) -> np.ndarray:
    """Real (overdamped) poles λ < 0 found at ≥ ``min_fraction`` of the orders (and ≥
    ``min_poles``) within ``frequency_rtol`` of each other: the cluster medians [1/s]. They are
    no modes but part of the response (e.g. the LWR4's overdamped motor motions), so the amplitude
    fit includes them. Poles faster than fs/2·2π (gone within a sample) are left out."""
    values, orders = [], []
    for op in order_poles:
        lam = op.eigenvalues
        real = lam[is_real(lam) & (lam.real < 0) & (-lam.real < np.pi * fs)].real
        values.extend(real.tolist())
        orders.extend([op.order] * real.size)
    if not values:
        return np.empty(0)
    values, orders = np.array(values), np.array(orders)
    idx = np.argsort(values)
    out, start = [], 0
    for k in range(1, idx.size + 1):
        if k == idx.size or values[idx[k]] > values[idx[k - 1]] * (1 - criteria.frequency_rtol):
            group = idx[start:k]
            if np.unique(orders[group]).size >= max(criteria.min_poles, criteria.min_fraction * len(order_poles)):
                out.append(float(np.median(values[group])))
            start = k
    return np.array(out)


def _one_per_order(members, diagram):
    """The cluster's poles, at most one per model order (the one nearest the cluster median)."""
    f_med = np.median(diagram.frequency_hz[members])
    z_med = np.median(diagram.damping[members])
    score = np.abs(diagram.frequency_hz[members] / f_med - 1) + np.abs(diagram.damping[members] - z_med)
    keep = []
    for order in np.unique(diagram.order[members]):
        at = members[diagram.order[members] == order]
        keep.append(at[np.argmin(score[diagram.order[members] == order])])
    return np.array(keep, int)


def _summarize(members, diagram) -> SelectedMode:
    f = diagram.frequency_hz[members]
    z = diagram.damping[members]
    f_med, z_med = float(np.median(f)), float(np.median(z))
    central = members[np.argmin(np.abs(f / f_med - 1) + np.abs(z - z_med))]
    omega = TWO_PI * f_med
    lam = complex(-z_med * omega, omega * np.sqrt(max(0.0, 1.0 - z_med ** 2)))
    amp = diagram.amplitude[members]
    iqr = lambda v: float(np.subtract(*np.percentile(v, [75, 25])))
    return SelectedMode(f_med, z_med, lam, diagram.shapes[:, central].copy(),
                        float(np.median(amp)) if np.isfinite(amp).any() else float("nan"),
                        int(members.size), iqr(f), iqr(z))


def _with_clusters(diagram, cluster):
    return replace(diagram, cluster=cluster)


def plot_stabilization(diagram: StabilizationDiagram, path, title: str = "", reference_hz=None, reported_hz=None):
    """PNG: pole frequency vs model order (light grey: unstable, dark grey: stable, coloured: the
    clusters — modes, combination terms and poles below the noise floor), damping vs frequency
    below; dashed lines at ``reference_hz`` (e.g. AMA frequencies), solid green lines at the
    ``reported_hz`` modes (the clusters that passed the amplitude check)."""
    # deferred: matplotlib
    import matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax_o, ax_z) = plt.subplots(2, 1, figsize=(10, 8), gridspec_kw={"height_ratios": [3, 2]})
    nyq = 0.5 * diagram.sample_rate_hz
    for f_ref in (reference_hz if reference_hz is not None else []):
        for ax in (ax_o, ax_z):
            ax.axvline(f_ref, color="0.75", ls="--", lw=0.8, zorder=0)
    for k, f_rep in enumerate(reported_hz if reported_hz is not None else []):
        ax_o.axvline(f_rep, color="tab:green", lw=2, alpha=0.35, zorder=0, label="reported modes" if k == 0 else None)
    unstable = ~diagram.stable
    ax_o.scatter(diagram.frequency_hz[unstable], diagram.order[unstable], s=6, c="0.7", label="new / unstable")
    stable_free = diagram.stable & (diagram.cluster < 0)
    ax_o.scatter(diagram.frequency_hz[stable_free], diagram.order[stable_free], s=8, c="0.35",
                 label="stable (f, ζ, MAC), not in a cluster")
    for k in range(diagram.cluster.max() + 1):
        sel = diagram.cluster == k
        color = plt.cm.tab10((k + 1) % 10)
        ax_o.scatter(diagram.frequency_hz[sel], diagram.order[sel], s=14, color=color,
                     label="clusters (candidates: modes, combination terms, noise)" if k == 0 else None)
        ax_z.scatter(diagram.frequency_hz[sel], 100 * diagram.damping[sel], s=14, color=color)
    ax_z.scatter(diagram.frequency_hz[unstable], 100 * diagram.damping[unstable], s=4, c="0.8", zorder=0)
    for ax in (ax_o, ax_z):
        ax.set_xscale("log")
        ax.set_xlim(max(0.5, 0.5 * diagram.frequency_hz.min(initial=nyq)), nyq)
    ax_o.set_ylabel("model order")
    ax_o.set_title(title or f"stabilization diagram ({diagram.method})")
    ax_o.legend(fontsize="small", loc="upper left")
    ax_z.set_xlabel("natural frequency [Hz]")
    ax_z.set_ylabel("damping ratio [%]")
    ax_z.set_ylim(0, min(100, 100 * max(0.3, 1.2 * diagram.damping[diagram.cluster >= 0].max(initial=0.0))))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

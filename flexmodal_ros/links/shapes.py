"""Deformed-arm pictures of link modes, in the base frame by (41)-(44)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import InputError
from .solve import mode_stations

PLOT_POINTS = 101
DEFAULT_AMPLITUDE = 0.10  # largest displacement drawn as this fraction of the arm reach


def deformed_arm(arm, modes, index: int, amplitude: float | None = None, points: int = PLOT_POINTS):
    """(undeformed (n, P, 2), deformed (n, P, 2)) positions [m] of mode ``index`` (0-based) of
    ``modes`` (a :class:`~flexmodal_ros.links.solve.LinkModes` of ``arm``), the mass-normalized
    shape scaled so that its largest displacement is ``amplitude`` [m] (default 10 % of the
    arm's reach)."""
    if not 0 <= int(index) < modes.num_modes:
        raise InputError(f"mode: expected 1..{modes.num_modes}, got {int(index) + 1}")
    pts, disp = mode_stations(arm, modes.q, modes, np.linspace(0.0, 1.0, points))
    d = disp[..., int(index)]
    reach = sum(b.length for b in arm.beams)
    amp = DEFAULT_AMPLITUDE * reach if amplitude is None else float(amplitude)
    return pts, pts + d * (amp / np.abs(d).max())


def plot_mode(arm, modes, index: int, path, amplitude: float | None = None) -> Path:
    """PNG of the undeformed arm (grey) and mode ``index`` (0-based) deformed (:func:`deformed_arm`)."""
    # deferred: matplotlib
    import matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt

    path = Path(path)
    pts, deformed = deformed_arm(arm, modes, index, amplitude)
    fig, ax = plt.subplots(figsize=(7, 6))
    for i in range(arm.n):
        ax.plot(pts[i, :, 0], pts[i, :, 1], color="0.6", lw=2, label="undeformed" if i == 0 else None)
        ax.plot(deformed[i, :, 0], deformed[i, :, 1], lw=2, label=arm.link_names[i])
        ax.plot(*deformed[i, -1], "ko", ms=5)
    ax.plot(0.0, 0.0, "ks", ms=8)
    f = modes.frequencies_hz[index]
    ax.set_title(f"{arm.name}: mode {index + 1}, {f:.6g} Hz ({modes.model}, {modes.joint_model} joints)\n"
                 f"q = {np.round(np.degrees(modes.q), 3).tolist()} deg, axial energy "
                 f"{100 * modes.axial_fractions[index]:.1f} %")
    ax.set_xlabel("X_0 [m]")
    ax.set_ylabel("Y_0 [m]")
    ax.set_aspect("equal")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

"""Mode shapes of a beam-link arm (paper (41)-(44)): the result type :class:`LinkModes`, the
link fields of a mode, its generalized mass, the displacements in the base frame, and
deformed-arm pictures. The roots (40) and null vectors come from :mod:`.solve`.

Mode-shape normalization (the paper gives none): coefficient vectors are scaled to unit generalized
mass, Σ_i ∫ ρS(U² + V²) + ρIΨ² dx + Σ_i (M_i|d_i|² + J_iΨ_i(L)²) + Σ B q_m² = 1 [kg, with
rotations in rad], sign such that the largest global displacement component is positive. The
:class:`LinkModes` ``mode_shapes`` (the shared :class:`~flexmodal_ros.modes.modeset.ModeSet` field used for
MAC tracking) are the global displacements (ΔX, ΔY) at ``POINTS`` stations per link, rows ordered
(link, station, X/Y), scaled to unit Euclidean norm as in every ModeSet.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..modes import TWO_PI, ModeSet, modes_from_classified
from .characteristic import MOMENT, PSI, U, V, arm_basis, section_constants

POINTS = 21            # stations per link of ModeSet.mode_shapes and of plots
QUADRATURE = 32        # Gauss-Legendre points per link for the generalized mass
_GAUSS = np.polynomial.legendre.leggauss(QUADRATURE)
PLOT_POINTS = 101
DEFAULT_AMPLITUDE = 0.10  # largest displacement drawn as this fraction of the arm reach


@dataclass(frozen=True, kw_only=True)
class LinkModes(ModeSet):
    """Natural modes of a beam-link arm in one configuration: the undamped
    :class:`~flexmodal_ros.modes.modeset.ModeSet` fields (ζ = 0, eigenvalues jω, stability "marginally
    stable", shapes as in the module docstring) plus

    ``q`` joint angles [rad]; ``model`` beam model; ``joint_model``; ``thickness_factor``;
    ``coefficients`` (6n, m) mass-normalized null vectors c_(j) of M(ω_j) (38);
    ``axial_fractions`` (m,) share of the kinetic energy in axial motion (U, and tip bodies along
    their link); ``above_cutoff`` (m,) True where ω_j > ω_lim of some link (T model);
    ``singular_ratios`` (m,) σ_min/σ_max of the equilibrated M(ω_j) (root confirmation);
    ``station_x`` (POINTS,) station positions as fractions of each link length.
    """

    q: np.ndarray
    model: str
    joint_model: str
    thickness_factor: float
    coefficients: np.ndarray
    axial_fractions: np.ndarray
    above_cutoff: np.ndarray
    singular_ratios: np.ndarray
    station_x: np.ndarray

    @property
    def omegas(self) -> np.ndarray:
        """Natural circular frequencies ω_j [rad/s]."""
        return TWO_PI * self.frequencies_hz

    def to_dict(self, joint_names=None) -> dict:
        out = {} if joint_names is None else {"joint_names": list(joint_names)}
        out.update({"positions": self.q.tolist(), "model": self.model, "joint_model": self.joint_model,
                    "thickness_factor": self.thickness_factor,
                    "axial_fractions": self.axial_fractions.tolist(),
                    "above_cutoff": self.above_cutoff.tolist(),
                    "singular_ratios": self.singular_ratios.tolist(),
                    "coefficients": self.coefficients.tolist(), "station_x": self.station_x.tolist()})
        out.update(super().to_dict())
        return out


def link_fields(arm, model, omegas, coeffs, x_fraction):
    """Per link: (x [m] (P,), state (6, P, m) — V, Ψ, T, M, U, N — of mode columns ``coeffs``
    (6n, m) at their frequencies ``omegas`` (m,)) at stations x = fraction·L."""
    Z = arm_basis(arm, model, omegas, x_fraction)  # (m, n, P, 6, 6)
    states = np.einsum("mnpij,njm->nipm", Z, coeffs.reshape(arm.n, 6, -1))
    return [(np.asarray(x_fraction, float) * beam.length, states[i]) for i, beam in enumerate(arm.beams)]


def generalized_mass(arm, model, fields) -> tuple:
    """(total (m,), axial (m,)) generalized mass (module docstring) from the link ``fields`` of
    :func:`link_fields` at stations ``[0, 1, Gauss points...]``."""
    _, wg = _GAUSS
    total, axial = 0.0, 0.0
    for (_, s), beam in zip(fields, arm.beams):
        _, _, rhoS, rhoI, _ = section_constants(beam, model)
        w = 0.5 * beam.length * wg
        inner, tip = s[:, 2:], s[:, 1]
        ax = rhoS * (w @ inner[U] ** 2) + beam.tip_mass * tip[U] ** 2
        total = total + ax + rhoS * (w @ inner[V] ** 2) + rhoI * (w @ inner[PSI] ** 2) \
            + beam.tip_mass * tip[V] ** 2 + beam.tip_inertia * tip[PSI] ** 2
        axial = axial + ax
    for i in range(arm.n):
        if np.isfinite(arm.motor_stiffness[i]):
            total = total + arm.rotor_inertia[i] * motor_angles(arm, i, fields) ** 2
    return total, axial


def motor_angles(arm, i, fields):
    """q_m (m,) of servo joint i: root rotation − tip rotation of link i−1 − spring stretch
    (``fields`` with stations 0 and 1 first)."""
    root = fields[i][1][:, 0]
    before = fields[i - 1][1][PSI, 1] if i > 0 else 0.0
    stretch = 0.0 if np.isinf(arm.joint_stiffness[i]) else root[MOMENT] / arm.joint_stiffness[i]
    return root[PSI] - before - stretch


def global_displacements(arm, q, fields) -> tuple:
    """(points (n, P, 2), displacements (n, P, 2, m)) in frame 0 by (41)-(44) from the link
    ``fields`` of :func:`link_fields`: undeformed station positions and R_0i [U; V] per mode
    (θ_1 = q[0] included)."""
    alpha = np.cumsum(q)
    origin = np.zeros(2)
    pts, disp = [], []
    for i, (x, s) in enumerate(fields):
        c, sn = np.cos(alpha[i]), np.sin(alpha[i])
        R = np.array([[c, -sn], [sn, c]])
        pts.append(origin + np.outer(x, R[:, 0]))
        disp.append(np.einsum("ab,bpm->pam", R, np.stack([s[U], s[V]])))
        origin = origin + arm.beams[i].length * R[:, 0]
    return np.array(pts), np.array(disp)


def mode_stations(arm, q, modes: "LinkModes", x_fraction) -> tuple:
    """(points (n, P, 2), displacements (n, P, 2, m)) of the mass-normalized modes of ``modes``
    at stations x = fraction·L, frame 0 [m]."""
    fields = link_fields(arm, modes.model, modes.omegas, modes.coefficients, x_fraction)
    return global_displacements(arm, q, fields)


def assemble_modes(arm, q, model, omegas, coeffs, ratios, above_cutoff) -> LinkModes:
    """:class:`LinkModes` from the confirmed roots ``omegas`` [rad/s], their null vectors ``coeffs``
    (6n, m) and σ_min/σ_max ``ratios``: mass-normalized, signed as in the module docstring."""
    m = omegas.size
    stations = np.linspace(0.0, 1.0, POINTS)
    gauss = 0.5 * (_GAUSS[0] + 1.0)
    fields = link_fields(arm, model, omegas, coeffs, np.concatenate([[0.0, 1.0], gauss, stations]))
    total, axial = generalized_mass(arm, model, [(x, s[:, :2 + QUADRATURE]) for x, s in fields])
    scale = 1.0 / np.sqrt(total)
    _, d = global_displacements(arm, q, [(x[-POINTS:], s[:, -POINTS:]) for x, s in fields])
    flat = d.reshape(-1, m) * scale
    sign = np.sign(flat[np.argmax(np.abs(flat), axis=0), np.arange(m)])
    sign[sign == 0] = 1.0
    return modes_from_classified(1j * omegas, (flat * sign).astype(complex), result_type=LinkModes,
                                 per_mode={"coefficients": coeffs * scale * sign, "axial_fractions": axial / total,
                                           "above_cutoff": np.asarray(above_cutoff), "singular_ratios": ratios},
                                 q=np.array(q, float), model=model, joint_model=arm.joint_model,
                                 thickness_factor=arm.thickness_factor, station_x=stations)


def deformed_arm(arm, modes, index: int, amplitude: float | None = None, points: int = PLOT_POINTS):
    """(undeformed (n, P, 2), deformed (n, P, 2)) positions [m] of mode ``index`` (0-based) of
    ``modes`` (a :class:`LinkModes` of ``arm``), the mass-normalized
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

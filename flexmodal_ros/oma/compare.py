"""Identified modes against the model's (AMA) at the same configuration (thesis Table 2.5).

Matching: the model's mode shapes are taken at the measured channels (``<joint>_motor`` → motor
row, ``<joint>`` → link row of the [q; q_m] shapes), and identified and model modes are paired by a
one-to-one assignment (Hungarian) minimizing |Δf|/f + (1 − MAC) among pairs with
|Δf|/f ≤ ``frequency_gate`` and MAC ≥ ``mac_gate`` (MAC left out when a channel has no model row).
The MAC weighs the channels equally, each divided by its peak response in the record (at least
10× its noise floor), as the identification does.

Every model mode gets a status: ``identified``; ``above Nyquist`` (its damped frequency is above
``nyquist_fraction``·fs/2: not identifiable at this sampling rate); otherwise its amplitude in the
record is estimated by the least-squares fit of the free decay with the identified poles plus this
mode's model pole (:func:`~flexmodal_ros.oma.analysis.fit_amplitudes`): ``below noise floor``
(not excited enough to be seen) when its SNR < ``snr_min``, else ``missed`` (visible in the record
but not found). Identified modes without a model partner are listed as ``unmatched``.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..modes import ModeSet, mac
from .analysis import SNR_MIN, IdentifiedModes, analysis_segment, fit_amplitudes
from .impact import MOTOR_SUFFIX
from .record import Record

IDENTIFIED, ABOVE_NYQUIST, BELOW_NOISE, MISSED = "identified", "above Nyquist", "below noise floor", "missed"


@dataclass(frozen=True)
class ModeMatch:
    """One row of the comparison: model mode ``mode`` (1-based) with its f [Hz], ζ [-], status,
    and for identified modes the OMA index (1-based), f, ζ, Δf [Hz], Δf/f, Δζ [-], MAC; amplitude
    and SNR of the model mode in the record (fitted for unidentified modes)."""

    mode: int
    ama_frequency_hz: float
    ama_damping_ratio: float
    status: str
    oma_mode: int | None = None
    oma_frequency_hz: float = float("nan")
    oma_damping_ratio: float = float("nan")
    mac: float = float("nan")
    amplitude: float = float("nan")
    snr: float = float("nan")

    @property
    def delta_frequency_hz(self) -> float:
        return self.oma_frequency_hz - self.ama_frequency_hz

    @property
    def delta_frequency_rel(self) -> float:
        return self.delta_frequency_hz / self.ama_frequency_hz

    @property
    def delta_damping(self) -> float:
        return self.oma_damping_ratio - self.ama_damping_ratio

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("mode", "ama_frequency_hz", "ama_damping_ratio", "status",
                                              "oma_mode", "oma_frequency_hz", "oma_damping_ratio", "mac",
                                              "amplitude", "snr")}
        out.update({"delta_frequency_hz": self.delta_frequency_hz, "delta_frequency_rel": self.delta_frequency_rel,
                    "delta_damping": self.delta_damping})
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


@dataclass(frozen=True)
class Comparison:
    """``rows`` one :class:`ModeMatch` per model mode (ascending f); ``unmatched`` 0-based indices
    of identified modes without a model partner; ``model`` a label (e.g. "continuous AMA")."""

    rows: list
    unmatched: list
    model: str

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def within(self, frequency_hz_abs: float, frequency_rel: float, damping_abs: float) -> list:
        """Identified rows with |Δf| ≤ max(abs, rel·f) and |Δζ| ≤ damping_abs."""
        return [r for r in self.rows if r.status == IDENTIFIED
                and abs(r.delta_frequency_hz) <= max(frequency_hz_abs, frequency_rel * r.ama_frequency_hz)
                and abs(r.delta_damping) <= damping_abs]

    def to_dict(self) -> dict:
        return {"model": self.model, "rows": [r.to_dict() for r in self.rows], "unmatched": list(self.unmatched)}

    def table(self) -> str:
        """Human-readable table (f Hz / ζ %, like thesis Table 2.5)."""
        lines = [f"{'mode':>4} {'AMA f [Hz]':>11} {'ζ [%]':>8}  {'OMA f [Hz]':>11} {'ζ [%]':>8} "
                 f"{'Δf [Hz]':>9} {'Δζ [pp]':>8} {'MAC':>6}  status ({self.model})"]
        for r in self.rows:
            if r.status == IDENTIFIED:
                lines.append(f"{r.mode:>4} {r.ama_frequency_hz:>11.4f} {100 * r.ama_damping_ratio:>8.4f}  "
                             f"{r.oma_frequency_hz:>11.4f} {100 * r.oma_damping_ratio:>8.4f} "
                             f"{r.delta_frequency_hz:>+9.4f} {100 * r.delta_damping:>+8.4f} "
                             f"{r.mac:>6.3f}  {r.status}")
            else:
                extra = f" (amplitude {r.amplitude:.2g}, SNR {r.snr:.2g})" if np.isfinite(r.snr) else ""
                lines.append(f"{r.mode:>4} {r.ama_frequency_hz:>11.4f} {100 * r.ama_damping_ratio:>8.4f}  "
                             f"{'–':>11} {'–':>8} {'':>9} {'':>8} {'':>6}  {r.status}{extra}")
        return "\n".join(lines)


def channel_rows(model, channels) -> list:
    """Row of the model's [q; q_m] mode shapes for each channel name (None if not a joint)."""
    rows = []
    for name in channels:
        if name.endswith(MOTOR_SUFFIX) and name[:-len(MOTOR_SUFFIX)] in model.joint_names:
            rows.append(model.n + model.joint_names.index(name[:-len(MOTOR_SUFFIX)]))
        elif name in model.joint_names:
            rows.append(model.joint_names.index(name))
        else:
            rows.append(None)
    return rows


def compare_with_model(identified: IdentifiedModes, model_modes: ModeSet, rows, record: Record | None = None,
                       label: str = "continuous AMA", frequency_gate: float = 0.05, mac_gate: float = 0.5,
                       nyquist_fraction: float = 0.9, snr_min: float = SNR_MIN, free_decay: bool = True) -> Comparison:
    """Match ``identified`` to ``model_modes`` (module docstring). ``rows``: model shape row per
    channel (:func:`channel_rows`); ``record``: the analysed record, for the amplitude of
    unidentified modes (None: their status is ``missed`` without amplitude)."""
    from scipy.optimize import linear_sum_assignment

    fa, za = model_modes.frequencies_hz, model_modes.damping_ratios
    fo = identified.frequencies_hz
    usable = [i for i, r in enumerate(rows) if r is not None]
    if usable:
        # Channels weighted equally, as in the identification: each divided by its peak response
        # (at least 10× its noise floor), so that a mode living on a motor that moves 1e-7 rad is
        # not judged by the 1e-4 rad ones.
        weight = 1.0 / _channel_scale(record, free_decay, identified)[usable]
        shapes_a = model_modes.mode_shapes[[rows[i] for i in usable]] * weight[:, None]
        shapes_o = identified.mode_shapes[usable] * weight[:, None]
        macs = mac(shapes_o, shapes_a) if fo.size else np.empty((0, fa.size))
    else:
        macs = np.ones((fo.size, fa.size))
    rel = np.abs(fo[:, None] - fa[None, :]) / fa[None, :]
    feasible = (rel <= frequency_gate) & (macs >= mac_gate)
    cost = np.where(feasible, rel + (1 - macs), 1e6)
    pairs = {}
    if fo.size and fa.size:
        r_idx, c_idx = linear_sum_assignment(cost)
        pairs = {c: r for r, c in zip(r_idx, c_idx) if feasible[r, c]}
    nyq = 0.5 * identified.sample_rate_hz
    damped = fa * np.sqrt(np.clip(1 - za ** 2, 0, 1))
    out = []
    for j in range(fa.size):
        base = dict(mode=j + 1, ama_frequency_hz=float(fa[j]), ama_damping_ratio=float(za[j]))
        if j in pairs:
            i = pairs[j]
            out.append(ModeMatch(**base, status=IDENTIFIED, oma_mode=i + 1, oma_frequency_hz=float(fo[i]),
                                 oma_damping_ratio=float(identified.damping_ratios[i]), mac=float(macs[i, j]),
                                 amplitude=float(identified.amplitudes[i]), snr=float(identified.snr[i])))
        elif damped[j] >= nyquist_fraction * nyq:
            out.append(ModeMatch(**base, status=ABOVE_NYQUIST))
        elif record is None:
            out.append(ModeMatch(**base, status=MISSED))
        else:
            amp, snr = _model_mode_amplitude(record, identified, model_modes.eigenvalues[j], free_decay)
            out.append(ModeMatch(**base, status=BELOW_NOISE if snr < snr_min else MISSED, amplitude=amp, snr=snr))
    matched = set(pairs.values())
    return Comparison(out, [i for i in range(fo.size) if i not in matched], label)


def _channel_scale(record, free_decay, identified):
    """Peak |deviation| per channel of the analysed segment, at least 10× the channel's noise
    floor (a channel that holds only noise is not weighted up); ones without a record."""
    if record is None:
        return np.ones(len(identified.channels))
    _, y = analysis_segment(record, free_decay)
    return np.maximum(np.maximum(np.abs(y).max(axis=0), 10.0 * identified.noise_floor), 1e-300)


def _model_mode_amplitude(record, identified, eigenvalue, free_decay):
    """(amplitude, SNR) of a model pole fitted to the record together with the identified poles."""
    _, y = analysis_segment(record, free_decay)
    lam = np.concatenate([identified.eigenvalues, [eigenvalue]])
    amps, stderr, _ = fit_amplitudes(y, record.sample_rate_hz, lam, real=identified.real_eigenvalues)
    norm = float(np.linalg.norm(amps[-1]))
    return norm, norm / max(float(stderr[-1]), 1e-300)


def write_comparison_csv(comparison: Comparison, identified: IdentifiedModes, path) -> Path:
    """One row per model mode (status, f, ζ, Δ, MAC) then one per unmatched identified mode."""
    path = Path(path)
    keys = ["mode", "status", "ama_frequency_hz", "ama_damping_ratio", "oma_mode", "oma_frequency_hz",
            "oma_damping_ratio", "delta_frequency_hz", "delta_frequency_rel", "delta_damping", "mac",
            "amplitude", "snr"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(keys)
        for r in comparison.rows:
            d = r.to_dict()
            w.writerow(["" if d[k] is None else d[k] for k in keys])
        for i in comparison.unmatched:
            w.writerow(["", "unmatched", "", "", i + 1, identified.frequencies_hz[i], identified.damping_ratios[i],
                        "", "", "", "", identified.amplitudes[i], identified.snr[i]])
    return path


def check_model_channels(model, channels):
    """InputError when no channel of the record belongs to the robot (nothing to compare)."""
    rows = channel_rows(model, channels)
    if all(r is None for r in rows):
        raise InputError(f"joints: none of the channels {list(channels)} is a joint of {model.name} "
                         f"({', '.join(model.joint_names)} or <joint>{MOTOR_SUFFIX})")
    return rows

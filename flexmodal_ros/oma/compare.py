"""Identified modes against the model's (AMA) at the same configuration (thesis Table 2.5).

Matching: the model's mode shapes are taken at the measured channels (``<joint>_motor`` → motor
row, ``<joint>`` → link row of the [q; q_m] shapes), and identified and model modes are paired by a
one-to-one assignment (Hungarian) minimizing |Δf|/f + (1 − MAC) among pairs with
|Δf|/f ≤ ``frequency_gate`` and MAC ≥ ``mac_gate`` (MAC left out when a channel has no model row).
The MAC weighs the channels equally, each divided by its peak response in the record (at least
10× its noise floor), as the identification does.

Every model mode gets a status: ``identified``; ``above Nyquist`` (its damped frequency is above
``nyquist_fraction``·fs/2: not identifiable at this sampling rate); otherwise ``below noise floor``
or ``missed`` by the rule of :mod:`.visibility`: from the mode's amplitude at the channels —
predicted from the AMA and the excitation when the record says what the excitation was (simulated
impact tests, :func:`~flexmodal_ros.oma.impact.free_decay_contributions`), else fitted to the
record with the model's poles — and the record's noise floor (residual once every model mode and
identified pole is fitted), a mode is below the noise floor when it could not pass the
identification's own reporting tests (SNR, uncertainty of f and ζ), missed when it could and was
not found. Identified modes without a model partner are listed as ``unmatched``.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..modes import ModeSet, mac, pair_modes
from .mode_estimation import (SNR_MIN, UNCERTAINTY_F, UNCERTAINTY_Z, IdentifiedModes, amplitude_norms, analysis_segments,
                       as_records, fit_amplitudes)
from .impact import MOTOR_SUFFIX, Impulse, free_decay_contributions
from .visibility import visible_modes

PREDICTED, FITTED = "predicted (AMA + excitation)", "fitted to the record"

IDENTIFIED, ABOVE_NYQUIST, BELOW_NOISE, MISSED = "identified", "above Nyquist", "below noise floor", "missed"


@dataclass(frozen=True)
class ModeMatch:
    """One row of the comparison: model mode ``mode`` (1-based) with its f [Hz], ζ [-], status,
    and for identified modes the OMA index (1-based), f, ζ, Δf [Hz], Δf/f, Δζ [-], MAC; amplitude
    and SNR of the mode in the record (identified: as fitted; otherwise those of the noise-floor
    rule, with its Cramér–Rao ``std_frequency_hz`` [Hz] and ``std_damping_ratio``)."""

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
    std_frequency_hz: float = float("nan")
    std_damping_ratio: float = float("nan")

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
                                              "amplitude", "snr", "std_frequency_hz", "std_damping_ratio")}
        out.update({"delta_frequency_hz": self.delta_frequency_hz, "delta_frequency_rel": self.delta_frequency_rel,
                    "delta_damping": self.delta_damping})
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


@dataclass(frozen=True)
class Comparison:
    """``rows`` one :class:`ModeMatch` per model mode (ascending f); ``unmatched`` 0-based indices
    of identified modes without a model partner; ``model`` a label (e.g. "continuous AMA");
    ``amplitude_source`` of the unidentified modes' amplitudes (:data:`PREDICTED`, :data:`FITTED`
    or "" without a record)."""

    rows: list
    unmatched: list
    model: str
    amplitude_source: str = ""

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def within(self, frequency_hz_abs: float, frequency_rel: float, damping_abs: float) -> list:
        """Identified rows with |Δf| ≤ max(abs, rel·f) and |Δζ| ≤ damping_abs."""
        return [r for r in self.rows if r.status == IDENTIFIED
                and abs(r.delta_frequency_hz) <= max(frequency_hz_abs, frequency_rel * r.ama_frequency_hz)
                and abs(r.delta_damping) <= damping_abs]

    def to_dict(self) -> dict:
        return {"model": self.model, "rows": [r.to_dict() for r in self.rows], "unmatched": list(self.unmatched),
                "amplitude_source": self.amplitude_source}

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
                extra = ""
                if np.isfinite(r.snr):
                    extra = (f" (amplitude {r.amplitude:.2g}, SNR {r.snr:.2g}, σf {100 * r.std_frequency_hz / r.ama_frequency_hz:.2g} %,"
                             f" σζ {100 * r.std_damping_ratio:.2g} pp)")
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


def compare_with_model(identified: IdentifiedModes, model_modes: ModeSet, rows, record=None,
                       label: str = "continuous AMA", frequency_gate: float = 0.05, mac_gate: float = 0.5,
                       nyquist_fraction: float = 0.9, snr_min: float = SNR_MIN, free_decay: bool = True,
                       response=None) -> Comparison:
    """Match ``identified`` to ``model_modes`` (module docstring). ``rows``: model shape row per
    channel (:func:`channel_rows`); ``record``: the analysed record (or references), for the
    status of unidentified modes (None: ``missed`` without amplitude); ``response``: per reference
    the (λ, amplitudes (m, c)) of :func:`~flexmodal_ros.oma.impact.free_decay_contributions` at the
    first analysed sample (None: amplitudes fitted to the record)."""
    records = None if record is None else as_records(record)
    fa, za = model_modes.frequencies_hz, model_modes.damping_ratios
    fo = identified.frequencies_hz
    usable = [i for i, r in enumerate(rows) if r is not None]
    if usable:
        # Channels weighted equally, as in the identification: each divided by its peak response
        # (at least 10× its noise floor), so that a mode living on a motor that moves 1e-7 rad is
        # not judged by the 1e-4 rad ones.
        weight = 1.0 / _channel_scale(records, free_decay, identified)[usable]
        shapes_a = model_modes.mode_shapes[[rows[i] for i in usable]] * weight[:, None]
        shapes_o = identified.mode_shapes[usable] * weight[:, None]
        macs = mac(shapes_o, shapes_a) if fo.size else np.empty((0, fa.size))
    else:
        macs = np.ones((fo.size, fa.size))
    pairs = pair_modes(fo, fa, macs, frequency_gate, mac_gate)
    nyq = 0.5 * identified.sample_rate_hz
    damped = fa * np.sqrt(np.clip(1 - za ** 2, 0, 1))
    seen = np.flatnonzero(damped < nyquist_fraction * nyq)
    rule, source = None, ""
    if records is not None and any(j not in pairs for j in seen):
        rule, source = _noise_floor_rule(records, identified, model_modes, seen, pairs, free_decay, snr_min,
                                         response)
    out = []
    for j in range(fa.size):
        base = dict(mode=j + 1, ama_frequency_hz=float(fa[j]), ama_damping_ratio=float(za[j]))
        if j in pairs:
            i = pairs[j]
            out.append(ModeMatch(**base, status=IDENTIFIED, oma_mode=i + 1, oma_frequency_hz=float(fo[i]),
                                 oma_damping_ratio=float(identified.damping_ratios[i]), mac=float(macs[i, j]),
                                 amplitude=float(identified.amplitudes[i]), snr=float(identified.snr[i])))
        elif j not in seen:
            out.append(ModeMatch(**base, status=ABOVE_NYQUIST))
        elif rule is None:
            out.append(ModeMatch(**base, status=MISSED))
        else:
            amp, vis = rule
            k = int(np.flatnonzero(seen == j)[0])
            out.append(ModeMatch(**base, status=MISSED if vis.visible[k] else BELOW_NOISE, amplitude=float(amp[k]),
                                 snr=float(vis.snr[k]), std_frequency_hz=float(vis.std_frequency_hz[k]),
                                 std_damping_ratio=float(vis.std_damping_ratio[k])))
    matched = set(pairs.values())
    return Comparison(out, [i for i in range(fo.size) if i not in matched], label, source)


def _channel_scale(records, free_decay, identified):
    """Peak |deviation| per channel of the analysed segments, at least 10× the channel's noise
    floor (a channel that holds only noise is not weighted up); ones without a record."""
    if records is None:
        return np.ones(len(identified.channels))
    _, ys = analysis_segments(records, free_decay)
    peak = np.max([np.abs(y).max(axis=0) for y in ys], axis=0)
    return np.maximum(np.maximum(peak, 10.0 * identified.noise_floor), 1e-300)


def _noise_floor_rule(records, identified, model_modes, seen, pairs, free_decay, snr_min, response):
    """(amplitude norms (len(seen),), :class:`~.visibility.Visibility`) of the model modes
    ``seen`` (below Nyquist) by the rule of :mod:`.visibility`, and the amplitude source."""
    _, ys = analysis_segments(records, free_decay)
    fs = identified.sample_rate_hz
    lam_model = model_modes.eigenvalues[seen]
    # Noise floor: what is left once the identified poles (the matched ones and any others) and
    # every unidentified model mode are fitted.
    matched = {pairs[j]: j for j in seen if j in pairs}
    own = [identified.eigenvalues[pairs[j]] if j in pairs else model_modes.eigenvalues[j] for j in seen]
    extra = [identified.eigenvalues[i] for i in range(identified.num_modes) if i not in matched]
    basis = np.concatenate([np.asarray(own, complex), np.asarray(extra, complex)])
    fitted, _, sigma = fit_amplitudes(ys, fs, basis, real=identified.real_eigenvalues)
    peak = max(float(np.abs(y).max()) for y in ys)
    sigma = np.maximum(sigma, 1e-15 * peak)                # at least the float resolution of the samples
    if response is None:
        amps, source = np.asarray(fitted)[:, :len(seen)], FITTED
    else:
        amps, source = np.array([_nearest_modes(lam_model, lam, a) for lam, a in response]), PREDICTED
    vis = visible_modes(lam_model, amps, sigma, [y.shape[0] for y in ys], fs, identified.real_eigenvalues,
                        snr_min, UNCERTAINTY_F, UNCERTAINTY_Z)
    return (amplitude_norms(amps), vis), source


def _nearest_modes(targets, eigenvalues, amplitudes):
    """Rows of ``amplitudes`` (m, c) of the ``eigenvalues`` nearest (relative) to each target."""
    rel = np.abs(targets[:, None] - eigenvalues[None, :]) / np.abs(targets)[:, None]
    return amplitudes[np.argmin(rel, axis=1)]


def predicted_response(model, q, records, free_decay: bool = True):
    """Per record, the modes' predicted free-decay amplitudes at its channels
    (:func:`~flexmodal_ros.oma.impact.free_decay_contributions` at the first analysed sample) when
    every record comes from a simulated impact (its metadata give the impulse) and every channel is
    a joint of ``model``; else None (the amplitudes are then fitted)."""
    records = as_records(records)
    rows = channel_rows(model, records[0].channels)
    if any(r is None for r in rows) or not all("impulse" in rec.metadata for rec in records):
        return None
    starts, _ = analysis_segments(records, free_decay)
    out = []
    for rec, k0 in zip(records, starts):
        lam, amps, _, _ = free_decay_contributions(model, q, Impulse(**rec.metadata["impulse"]), rows, rec.t[k0])
        out.append((lam, amps))
    return out


def write_comparison_csv(comparison: Comparison, identified: IdentifiedModes, path) -> Path:
    """One row per model mode (status, f, ζ, Δ, MAC) then one per unmatched identified mode."""
    path = Path(path)
    keys = ["mode", "status", "ama_frequency_hz", "ama_damping_ratio", "oma_mode", "oma_frequency_hz",
            "oma_damping_ratio", "delta_frequency_hz", "delta_frequency_rel", "delta_damping", "mac",
            "amplitude", "snr", "std_frequency_hz", "std_damping_ratio"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(keys)
        for r in comparison.rows:
            d = r.to_dict()
            w.writerow(["" if d[k] is None else d[k] for k in keys])
        for i in comparison.unmatched:
            w.writerow(["", "unmatched", "", "", i + 1, identified.frequencies_hz[i], identified.damping_ratios[i],
                        "", "", "", "", identified.amplitudes[i], identified.snr[i], "", ""])
    return path


def check_model_channels(model, channels):
    """InputError when no channel of the record belongs to the robot (nothing to compare)."""
    rows = channel_rows(model, channels)
    if all(r is None for r in rows):
        raise InputError(f"joints: none of the channels {list(channels)} is a joint of {model.name} "
                         f"({', '.join(model.joint_names)} or <joint>{MOTOR_SUFFIX})")
    return rows

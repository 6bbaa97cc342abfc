"""One configuration of a calibration: move there through the controller, settle, excite and
record (each excitation ``pulse_repeats`` times, the synchronized records averaged), OMA of the
records as references of one analysis, and the match of the identified modes with a model's.

A noisy record never ends a campaign: an OMA that fails on it (too short, nothing above the
noise) leaves the configuration without measured modes, with the reason in its ``warnings``.
"""
from __future__ import annotations

import time

import numpy as np

from ..control.excitation import MotorExcitation
from ..core.errors import FlexmodalError
from ..oma.compare import IDENTIFIED, channel_rows, compare_with_model
from ..oma.impact import AXES, Impulse
from ..oma.mode_estimation import identify_modes
from ..oma.record import average_records
from .campaign_results import ConfigurationData
from .campaign_settings import SETTLE_CHECK_S, SETTLE_MAX_S
from .eigen_sensitivity import CONTINUOUS, loop_modes
from .experiment_design import measurement_floors


def measure(run, index, q_target, options, validation=False) -> ConfigurationData:
    """Move to ``q_target``, settle, record the excitations ``options`` (indices into the run's
    plan) and identify the modes (module docstring)."""
    s, plant = run.s, run.plant
    run.stop.check()
    run.report("moving", positions=list(map(float, q_target)), validation=validation)
    t0 = time.perf_counter()
    run.experiment_gains(False)
    plant.move_to(q_target)
    run.timed("move", t0)
    after = record_durations(run, q_target)[1]
    t0 = time.perf_counter()
    if s.settle_s:
        plant.settle(s.settle_s)
    else:
        run.settle(SETTLE_MAX_S)
    run.experiment_gains(True)
    plant.settle(SETTLE_CHECK_S)
    run.timed("settle", t0)
    q = np.asarray(plant.measured()[0], float)
    records, labels = [], []
    for o in options:
        run.stop.check()
        exc = run.plan.options()[o]
        run.report("exciting", excitation=exc.label(run.model), validation=validation)
        t0 = time.perf_counter()
        if exc.kind == "motor":
            torque = np.zeros(run.model.n)
            torque[exc.index] = run.plan.pulse_torque[exc.index]
            excitation = MotorExcitation(torque, 0.0, run.pulse_duration)
        else:
            excitation = Impulse(run.plan.wrench_force, AXES[exc.index], 0.0, run.plan.wrench_duration)
        repeats = [plant.excite_and_record(excitation, s.before_s, s.record_s or after)
                   for _ in range(s.pulse_repeats)]
        records.append(repeats[0] if len(repeats) == 1 else average_records(repeats))
        labels.append(exc.label(run.model))
        run.timed("record", t0)
    run.report("identifying modes", validation=validation)
    t0 = time.perf_counter()
    warnings = []
    try:
        identified = identify_modes(records, "era")
    except Exception as exc:     # noqa: BLE001 — any OMA failure on a (noisy) record: no modes here, the run goes on
        identified = None
        kind = "" if isinstance(exc, FlexmodalError) else f"{type(exc).__name__}: "
        warnings.append(f"OMA failed, no mode measured at this configuration: {kind}{exc}")
        run.report("warning", message=warnings[-1], validation=validation)
    run.timed("oma", t0)
    data = ConfigurationData(index, q, np.asarray(q_target, float), labels, records, identified,
                             validation=validation, warnings=warnings)
    run.save_partial(data)
    return data


def record_durations(run, q):
    """(settle, free decay) [s] from the slowest decay rate ζω of the modes below Nyquist."""
    modes = loop_modes(run.current_model(), q, CONTINUOUS)
    damped = modes.frequencies_hz * np.sqrt(np.clip(1 - modes.damping_ratios ** 2, 0, 1))
    rate = 2 * np.pi * modes.frequencies_hz * modes.damping_ratios
    rate = rate[damped < 0.45 * run.rate]
    slowest = float(rate.min()) if rate.size else 10.0
    return float(np.clip(3.0 / slowest, 0.3, 1.0)), float(np.clip(4.0 / slowest, 0.5, 2.0))


def _finite_or_none(value):
    return float(value) if np.isfinite(value) else None


def match_modes(run, data: ConfigurationData, model, gate):
    """Compare the OMA of ``data`` with ``model``'s loop modes (shapes and frequencies; the
    records' noise-floor status of unmatched modes is not needed here); the identified rows
    become the configuration's measured modes, their σ the OMA's combined with the measurement
    floors (:func:`~.experiment_design.measurement_floors`; the OMA's own as ``oma_std_*``, None
    where not finite). Returns True if the matching changed."""
    t0 = time.perf_counter()
    modes = loop_modes(model, data.q, run.loop)
    ident = data.identified
    measured, comparison = [], None
    if ident is not None:
        rows = channel_rows(run.model, ident.channels)
        try:
            comparison = compare_with_model(ident, modes, rows, None, run.loop.label, frequency_gate=gate,
                                            mac_gate=0.5)
        except Exception as exc:     # noqa: BLE001 — a match that fails leaves the configuration without modes
            note = f"match with the model failed, no mode used from this configuration: {type(exc).__name__}: {exc}"
            if note not in data.warnings:
                data.warnings.append(note)
        for r in (comparison.rows if comparison is not None else []):
            if r.status != IDENTIFIED:
                continue
            i = r.oma_mode - 1
            floor_f, floor_z = measurement_floors(r.oma_frequency_hz, r.oma_damping_ratio, run.s.frequency_floor,
                                                  run.s.damping_floor)
            sf = float(np.hypot(ident.std_frequency_hz[i], floor_f))
            sz = float(np.hypot(ident.std_damping_ratio[i], floor_z))
            measured.append({"mode_index": r.mode - 1, "frequency_hz": r.oma_frequency_hz,
                             "damping_ratio": r.oma_damping_ratio, "std_frequency_hz": sf, "std_damping_ratio": sz,
                             "oma_std_frequency_hz": _finite_or_none(ident.std_frequency_hz[i]),
                             "oma_std_damping_ratio": _finite_or_none(ident.std_damping_ratio[i]),
                             "mac": r.mac, "snr": r.snr})
    old = [m["mode_index"] for m in data.modes]
    changed = old != [m["mode_index"] for m in measured]
    data.comparison, data.references, data.modes = comparison, modes, measured
    run.timed("match", t0)
    return changed


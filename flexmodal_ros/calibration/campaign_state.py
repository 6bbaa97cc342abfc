"""The state of one calibration run (:func:`~.campaign.calibrate`): the unknowns with their
scales, bounds and targets, the excitation plan and measurement model, the current estimate, the
configurations measured, the experiment's gains on the plant, timing and progress, and the partial
data on disk."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..control.excitation import MotorExcitation, check_excitation, default_excitation_limit
from ..core.errors import InputError
from ..identification.inverse_eigen import parse_unknowns
from ..oma.compare import channel_rows
from ..oma.record import write_csv
from ..robot.model import with_overrides
from .campaign_results import ConfigurationData, config_dict, json_default
from .campaign_settings import GATE, SETTLE_CHECK_S, SETTLE_SPEED, pulse_joint_indices, unknown_ranges
from .configuration_measurement import match_modes, measure
from .eigen_sensitivity import CONTINUOUS, Unknowns
from .experiment_design import (DEFAULT_SENSOR_STD, DOMINANCE_MIN, ExcitationPlan, MeasurementModel, evaluate_pool,
                                parameter_scale)
from .offline_plants import channel_names
from .pulse_response import pulse_amplitudes, pulse_plan
from .weighted_fit import MeasuredModes, fit_parameters


class CampaignState:
    """State of one :func:`calibrate` run (see there)."""

    def __init__(self, model, plant, settings, out_dir, progress, stop, truth):
        self.model, self.plant, self.s, self.stop = model, plant, settings, stop
        self.user_model, self.kd_scale, self._experiment_on = model, 1.0, False
        self.progress = progress or (lambda info: None)
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.truth = truth
        self.unknowns = Unknowns.build(model, parse_unknowns(settings.unknowns), settings.joints)
        self.nominal = self.unknowns.values(model)
        self.bounds = unknown_ranges(self.unknowns, self.nominal, settings)
        self.scale = parameter_scale(model, self.unknowns, self.bounds)
        self.targets = settings.targets(self.unknowns)
        self.estimate = self.nominal.copy()
        self.std = np.full(self.unknowns.size, np.inf)
        self.identifiable = np.zeros(self.unknowns.size, bool)
        self.loop = plant.loop
        self.rate = plant.sample_rate_hz
        self.limit = (default_excitation_limit(model) if settings.excitation_limit is None
                      else np.broadcast_to(np.asarray(settings.excitation_limit, float), (model.n,)).copy())
        torque = self.limit if settings.pulse_torque is None else np.broadcast_to(
            np.asarray(settings.pulse_torque, float), (model.n,)).copy()
        self.pulse_duration = settings.pulse_duration or 2.0 / self.rate
        check_excitation(model, MotorExcitation(torque, 0.0, self.pulse_duration), self.limit)
        pulse_joints = pulse_joint_indices(model, settings)
        self.plan = ExcitationPlan(torque, self.pulse_duration, pulse_joints,
                                   settings.impact_force if settings.impacts else None,
                                   0.006, settings.pulses_per_configuration)
        self.channels = plant.channels_mode
        sensor = np.asarray(DEFAULT_SENSOR_STD if settings.sensor_std is None else settings.sensor_std, float)
        self.measurement = MeasurementModel(self.rate, settings.record_s or 1.5, self.channels,
                                            sensor / np.sqrt(settings.pulse_repeats),
                                            settings.frequency_floor, settings.damping_floor,
                                            dominance_min=DOMINANCE_MIN if settings.design == "worst-first" else 0.0)
        self.configs, self.validation, self.history = [], [], []
        self.timing = {k: 0.0 for k in ("design", "move", "settle", "record", "oma", "match", "fit",
                                        "validation", "tracking", "report")}
        self.fit = None
        self.started = time.monotonic()

    # -- helpers
    def current_model(self):
        """The estimate with the experiment's gains (what the records show)."""
        return self.unknowns.apply(self.model, self.estimate)

    def calibrated_model(self):
        """The estimate with the user's gains (what the params YAML holds)."""
        return self.unknowns.apply(self.user_model, self.estimate)

    def use_gains(self, factor):
        """Run the experiments with K_D × ``factor`` (the plant's controller and the model)."""
        self.kd_scale = float(factor)
        self.model = with_overrides(self.user_model, kd=np.asarray(self.user_model.kd, float) * factor)
        if self.s.pulse_torque is None:             # sized for this loop: linear response, above the noise
            lo, hi = np.maximum(self.model.position_lower, -np.pi), np.minimum(self.model.position_upper, np.pi)
            rows = channel_rows(self.model, channel_names(self.model, self.channels))
            noise = self.measurement.noise(self.model)
            if self.s.pulse_duration is None and self.s.sensor_std is not None:    # sized to beat the stated noise
                self.pulse_duration, torque = pulse_plan(self.model, 0.5 * (lo + hi), 2.0 / self.rate, 1.0 / self.rate,
                                                         self.limit, rows, noise)
            else:
                torque = pulse_amplitudes(self.model, 0.5 * (lo + hi), self.pulse_duration, self.limit, rows, noise)
            self.plan = replace(self.plan, pulse_torque=torque, pulse_duration=self.pulse_duration)

    def experiment_gains(self, on: bool):
        """The plant's controller with the experiment's K_D (``on``) or the user's. Moves and settling
        run with the user's gains (the closed loop they were designed for); only the records use
        the experiment's."""
        if self.kd_scale != 1.0 and on != self._experiment_on:
            gains = self.model if on else self.user_model
            self.plant.set_gains(gains.kp, gains.kd)
            self._experiment_on = on

    def restore_gains(self):
        self.experiment_gains(False)

    def settle(self, longest):
        """Hold until the robot is quiet — the largest link or motor speed below SETTLE_SPEED at
        three checks in a row, every SETTLE_CHECK_S — or ``longest`` [s] passed (records then
        start with some of the move's vibration, a free decay of the same modes)."""
        quiet, waited = 0, 0.0
        while waited < longest - 1e-9 and quiet < 3:
            self.stop.check()
            self.plant.settle(SETTLE_CHECK_S)
            waited += SETTLE_CHECK_S
            _, qd, _, qd_m = self.plant.measured()
            quiet = quiet + 1 if max(np.abs(qd).max(), np.abs(qd_m).max()) < SETTLE_SPEED else 0
        return waited

    def timed(self, key, t0):
        self.timing[key] += time.perf_counter() - t0

    def report(self, stage, **info):
        self.progress({"stage": stage, "configuration": len(self.configs), "budget": self.s.budget,
                       "elapsed_s": time.monotonic() - self.started, **info})

    def evaluate_pool(self, qs):
        t0 = time.perf_counter()
        out = evaluate_pool(self.current_model(), qs, self.unknowns, CONTINUOUS, self.plan, self.measurement,
                            self.scale, stability_loop=self.loop)
        self.timed("design", t0)
        return out

    def measure(self, index, q_target, options, validation=False) -> ConfigurationData:
        return measure(self, index, q_target, options, validation)

    def match(self, data: ConfigurationData, model, gate):
        return match_modes(self, data, model, gate)

    def measurements(self, configs) -> MeasuredModes:
        rows = [(i, m) for i, c in enumerate(configs) for m in c.modes]
        if not rows:
            raise InputError("measurements: no mode of the model was identified in the records")
        pick = lambda key: np.array([m[key] for _, m in rows], float)
        return MeasuredModes(np.array([c.q for c in configs]), np.array([i for i, _ in rows]), pick("frequency_hz"),
                             pick("damping_ratio"), pick("std_frequency_hz"), pick("std_damping_ratio"),
                             np.array([m["mode_index"] for _, m in rows], int), tuple(c.references for c in configs))

    def refit(self, starts=1, final=False):
        """Fit everything measured so far, every unknown free (an unknown the data of the first
        configurations did not determine may be determined now); re-match with the new estimate
        and refit while the matching changes (at most 3 times), those refits starting from the
        unknowns the previous one identified."""
        for round_ in range(4):
            if round_ and not any(c.modes for c in self.configs):
                break                              # the re-matching lost every mode (noisy OMA): keep the fit
            t0 = time.perf_counter()
            meas = self.measurements(self.configs)
            fit = fit_parameters(self.model, self.unknowns, meas, self.loop, self.scale, self.bounds,
                                 x0=self.estimate, starts=starts, seed=self.s.seed, stop=self.stop,
                                 free=None if final or round_ == 0 or self.fit is None else self.fit.identifiable)
            self.timed("fit", t0)
            self.fit, self.estimate, self.std, self.identifiable = fit, fit.values, fit.std, fit.identifiable
            if round_ == 3:
                break                              # the matching of the last fit is kept
            model = self.current_model()
            changed = [self.match(c, model, GATE) for c in self.configs]
            if not any(changed):
                break
        rows = [m for c in self.configs for m in c.modes]
        for i, m in enumerate(rows):
            m["excluded"] = i in self.fit.excluded
            m["predicted_frequency_hz"], m["predicted_damping_ratio"] = (float(v) for v in self.fit.predicted[i])
        return self.fit

    def information(self):
        """Fisher information (scaled) of the measurements used in the last fit (for the design)."""
        return None if self.fit is None else self.fit.information

    def save_partial(self, data: ConfigurationData):
        if self.out_dir is None:
            return
        name = f"validation_{data.index}" if data.validation else f"configuration_{data.index}"
        folder = self.out_dir / "partial" / name
        folder.mkdir(parents=True, exist_ok=True)
        for k, rec in enumerate(data.records):
            write_csv(rec, folder / f"record_{k}.csv")
        (folder / "configuration.json").write_text(json.dumps(
            {"q": data.q.tolist(), "q_target": data.q_target.tolist(), "excitations": data.excitations,
             "identified": data.identified.to_dict() if data.identified is not None else None,
             "records": [rec.metadata for rec in data.records]}, default=json_default))

    def save_state(self):
        if self.out_dir is None:
            return
        state = {"unknown_names": list(self.unknowns.names), "estimate": self.estimate.tolist(),
                 "std": [None if not np.isfinite(v) else float(v) for v in self.std],
                 "configurations": [config_dict(c) for c in self.configs], "history": self.history}
        (self.out_dir / "partial" / "state.json").write_text(json.dumps(state, default=json_default))

"""The calibration loop: design → move → settle → excite → record → OMA → identify → repeat,
then validate and write a loadable params YAML.

:func:`calibrate` drives any *plant* — an offline one (:mod:`.offline_plants`: the suite's RK4
plant or MuJoCo, each with the controller) or a robot behind the suite's ROS topics
(flexmodal_ros/nodes/topic_plant.py) — that offers ``move_to(q)``, ``settle(s)``,
``excite_and_record(excitation, before, after)`` → Record, ``measured()``, ``loop``
(:class:`~.eigen_sensitivity.LoopModel`) and ``sample_rate_hz``.

Per configuration (at most ``budget``):

1. the next configuration and its excitations (:func:`~.experiment_design.greedy_design`: D-optimal
   on the information of the modes expected to be visible, from the current estimate; Ds-optimal on
   the unknowns still above their target once others reach it);
2. move there through the controller (a C⁴ trajectory within the URDF limits), settle, and record
   each excitation (a motor pulse of at most the excitation limit, or a tool impulse);
3. OMA of the records as references of one analysis
   (:func:`~flexmodal_ros.oma.mode_estimation.identify_modes`), matched to the current model's modes
   (:func:`~flexmodal_ros.oma.compare.compare_with_model`, wider gate before the first fit);
4. weighted identification of everything measured so far (:func:`~.weighted_fit.fit_parameters`),
   every configuration re-matched with the new estimate, refitted if a match changed;
5. stop when every unknown that the candidate pool can identify has a standard deviation below its
   target (relative to its scale), from MIN_CONFIGURATIONS configurations on, or at the budget.
   Unknowns that no candidate configuration can identify with these sensors are reported as not
   identifiable (nominal value kept).

Then a final multistart fit, validation at ``validation`` configurations not used in the fit
(measured against predicted modes, calibrated and nominal model) and — for simulated plants, whose
truth is known — tracking of a reference by the feedforward built from the calibrated, the true and
the nominal model (:func:`tracking_validation`). Outputs (:mod:`.calibration_report`): the params
YAML, a JSON sidecar, report.md with PNG plots; the data of every configuration is saved as soon as
it is measured (``partial/``), so a fault or a cancel mid-run leaves it on disk.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..control import FailSafeController, SafetyLimits
from ..control.excitation import MotorExcitation, check_excitation, default_excitation_limit
from ..core.blas import single_blas_thread
from ..core.errors import FlexmodalError, InputError
from ..core.workers import Interrupted
from ..identification.inverse_eigen import KINDS, parse_unknowns
from ..oma.compare import IDENTIFIED, channel_rows, compare_with_model
from ..oma.impact import AXES, Impulse
from ..oma.mode_estimation import identify_modes
from ..oma.record import write_csv
from ..robot.model import with_overrides
from ..robot.trajectory import THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T
from ..simulation import run_closed_loop
from .eigen_sensitivity import CONTINUOUS, Unknowns, loop_modes
from .offline_plants import channel_names
from .pulse_response import pulse_amplitudes
from .experiment_design import (DAMPING_FLOOR, DEFAULT_SENSOR_STD, FREQUENCY_FLOOR, ExcitationPlan, MeasurementModel,
                                candidate_configurations, choose_experiment_gains, compare_with_random, evaluate_pool,
                                greedy_design, identifiable_mask, measurement_floors, parameter_scale, predicted_std,
                                prior_information, random_design)
from .weighted_fit import MeasuredModes, fit_parameters, follow_modes

MAX_BUDGET = 100
MAX_VALIDATION = 20
MAX_CANDIDATES = 2000
MAX_RECORD_S = 10.0
DEFAULT_RANGES = {"k": (0.5, 2.0), "d_f": (0.2, 5.0), "d_fm": (0.2, 5.0)}
ZERO_NOMINAL_SPAN = 10.0     # range [0, this] of an unknown whose nominal value is 0 [N m s/rad]
FIRST_GATE, GATE = 0.3, 0.1  # |Δf|/f of a match before / after the first fit
REEVALUATE_SHIFT = 0.1       # re-evaluate the candidate pool when an estimate moved this much (relative)
GAIN_POOL = 30               # candidates that decide the experiment gains
DESIGNS = ("optimal", "random")  # how the loop chooses the next configuration (random: for comparisons)
COMPARISON_BUDGET = 4        # designed configurations compared with random ones (at least)
MIN_CONFIGURATIONS = 2       # the targets end the loop only from this many configurations on
SETTLE_CHECK_S = 0.05        # settling: speeds checked this often [s] ...
SETTLE_SPEED = 1e-3          # ... until below this [rad/s] (a 5 Hz vibration of 3e-5 rad) ...
SETTLE_MAX_S = 3.0           # ... or this long [s]


class CampaignStop:
    """Cancel flag and deadline of one calibration (``check`` raises
    :class:`~flexmodal_ros.core.workers.Interrupted`, as the workers' StopToken does)."""

    def __init__(self, deadline=None):
        self._event = threading.Event()
        self.deadline = deadline

    def cancel(self):
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self):
        if self._event.is_set():
            raise Interrupted("cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Interrupted("time limit")


@dataclass(frozen=True)
class CalibrationSettings:
    """Options of :func:`calibrate` (docs/calibration.md). Relative targets are σ/scale."""

    unknowns: tuple = KINDS
    joints: tuple | None = None
    budget: int = 8
    validation: int = 2
    pulses_per_configuration: int = 2
    excitation_limit: object = None          # [N m] per joint (None: 10 % of the effort limit)
    pulse_torque: object = None              # [N m] (None: the excitation limit)
    pulse_duration: float | None = None      # [s] (None: two control periods)
    impacts: bool = False                    # tool-point impulses allowed (plant must offer them)
    impact_force: float = 50.0               # [N]
    candidates: int = 120
    target_k: float = 0.005
    target_d: float = 0.03
    ranges: dict = field(default_factory=lambda: dict(DEFAULT_RANGES))
    zero_span: float = ZERO_NOMINAL_SPAN
    record_s: float | None = None            # free decay recorded after each excitation [s]
    settle_s: float | None = None
    before_s: float = 0.1
    starts: int = 3
    seed: int = 0
    sensor_std: object = None                # the design's sensor noise [rad] (None: DEFAULT_SENSOR_STD)
    frequency_floor: float = FREQUENCY_FLOOR
    damping_floor: float = DAMPING_FLOOR
    random_seeds: int = 5
    max_duration_s: float = 3600.0           # bound on the robot time the request may take
    tracking: bool = True                    # tracking validation (plants with a known truth)
    experiment_kd_scale: float | None = None  # K_D factor during the experiments (None: chosen, KD_SCALES)
    design: str = "optimal"                  # "random": configurations and pulses drawn from the pool (comparisons)

    def targets(self, unknowns: Unknowns) -> np.ndarray:
        return np.array([self.target_k if k == "k" else self.target_d for k in unknowns.kinds])


def check_settings(model, s: CalibrationSettings, sample_rate_hz: float) -> CalibrationSettings:
    """InputError naming the field for a request outside its bounds (before anything moves)."""
    def count(value, name, low, high):
        if isinstance(value, bool) or not float(value).is_integer() or not low <= value <= high:
            raise InputError(f"{name}: must be an integer in {low}..{high}, got {value}")
    count(s.budget, "budget", 1, MAX_BUDGET)
    count(s.validation, "validation", 0, MAX_VALIDATION)
    count(s.pulses_per_configuration, "pulses_per_configuration", 1, max(model.n, 1) + (3 if s.impacts else 0))
    count(s.candidates, "candidates", max(4, s.budget + s.validation), MAX_CANDIDATES)
    count(s.starts, "starts", 1, 100)
    count(s.random_seeds, "random_seeds", 0, 100)
    parse_unknowns(s.unknowns)
    for name in ("target_k", "target_d", "frequency_floor", "damping_floor", "max_duration_s", "zero_span",
                 "impact_force"):
        v = getattr(s, name)
        if not (np.isfinite(v) and v > 0):
            raise InputError(f"{name}: must be > 0, got {v}")
    if s.design not in DESIGNS:
        raise InputError(f"design: must be one of {', '.join(DESIGNS)}, got {s.design!r}")
    factor = s.experiment_kd_scale
    if factor is not None and not (np.isfinite(factor) and 0 < factor <= 1):
        raise InputError(f"experiment_kd_scale: must be in (0, 1], got {s.experiment_kd_scale}")
    for name in ("record_s", "settle_s", "pulse_duration"):
        v = getattr(s, name)
        if v is not None and not (np.isfinite(v) and 0 < v <= MAX_RECORD_S):
            raise InputError(f"{name}: must be in (0, {MAX_RECORD_S:g}] s, got {v}")
    if not (np.isfinite(s.before_s) and 10.0 / sample_rate_hz <= s.before_s <= MAX_RECORD_S):
        raise InputError(f"before_s: must be in [{10.0 / sample_rate_hz:g}, {MAX_RECORD_S:g}] s (>= 10 samples), "
                         f"got {s.before_s}")
    for kind, pair in s.ranges.items():
        if kind not in KINDS or len(pair) != 2 or not (0 <= pair[0] < 1 < pair[1] < np.inf):
            raise InputError(f"ranges.{kind}: expected factors (lower < 1 < upper) of the nominal value, got {pair}")
    return s


@dataclass
class ConfigurationData:
    """What one configuration gave: ``q`` measured link position, ``excitations`` labels,
    ``records``, the OMA's ``identified`` modes, the latest ``comparison`` with the model and the
    measured modes used (lists of dicts)."""

    index: int
    q: np.ndarray
    q_target: np.ndarray
    excitations: list
    records: list
    identified: object
    comparison: object = None
    references: object = None
    modes: list = field(default_factory=list)
    validation: bool = False
    seconds: dict = field(default_factory=dict)


@dataclass
class CalibrationResult:
    """Outcome of :func:`calibrate` (to_dict keys are the CLI's ``--json`` and the action's)."""

    success: bool
    message: str
    robot: str
    unknown_names: tuple
    nominal: np.ndarray
    values: np.ndarray
    std: np.ndarray
    identifiable: np.ndarray
    predicted_std_pool: np.ndarray
    model: object
    nominal_model: object
    loop: object
    configurations: list
    validation: list
    history: list
    design: object = None
    tracking: dict | None = None
    fit: object = None
    truth: np.ndarray | None = None
    timing: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    settings: CalibrationSettings | None = None
    experiment_kd_scale: float = 1.0
    gain_table: dict = field(default_factory=dict)

    @property
    def not_identifiable(self) -> tuple:
        return tuple(n for n, ok in zip(self.unknown_names, self.identifiable) if not ok)

    def validation_errors(self) -> dict:
        """Max |Δf|/f and |Δζ| over the validation configurations' measured modes, calibrated and
        nominal model."""
        out = {}
        for label in ("calibrated", "nominal"):
            rel = [abs(m[f"{label}_frequency_hz"] / m["frequency_hz"] - 1) for c in self.validation for m in c.modes]
            dz = [abs(m[f"{label}_damping_ratio"] - m["damping_ratio"]) for c in self.validation for m in c.modes]
            out[label] = {"max_frequency_error_rel": max(rel, default=float("nan")),
                          "max_damping_error": max(dz, default=float("nan")), "modes": len(rel)}
        return out

    def to_dict(self) -> dict:
        std = [None if not np.isfinite(s) else float(s) for s in self.std]
        out = {"success": self.success, "message": self.message, "robot": self.robot,
               "joint_names": list(self.model.joint_names),
               "stiffness": np.asarray(self.model.k).tolist(), "link_damping": np.asarray(self.model.d_f).tolist(),
               "motor_damping": np.asarray(self.model.d_fm).tolist(),
               "unknown_names": list(self.unknown_names), "nominal": self.nominal.tolist(),
               "values": self.values.tolist(), "standard_deviations": std,
               "identifiable": self.identifiable.tolist(), "not_identifiable": list(self.not_identifiable),
               "predicted_std_all_candidates": [None if not np.isfinite(s) else float(s)
                                                for s in self.predicted_std_pool],
               "loop": self.loop.to_dict(), "configurations_measured": len(self.configurations),
               "configurations": [_config_dict(c) for c in self.configurations],
               "validation": [_config_dict(c) for c in self.validation],
               "validation_errors": self.validation_errors(), "history": self.history,
               "design_vs_random": None if self.design is None else self.design.to_dict(),
               "tracking": self.tracking, "fit": None if self.fit is None else self.fit.to_dict(),
               "timing_s": self.timing, "files": {k: str(v) for k, v in self.files.items()},
               "experiment_kd_scale": self.experiment_kd_scale,
               "experiment_gains_predicted_std": {str(k): [None if not np.isfinite(x) else x for x in v]
                                                  for k, v in self.gain_table.items()}}
        if self.truth is not None:
            out["truth"] = self.truth.tolist()
        return out


def _config_dict(c: ConfigurationData) -> dict:
    return {"index": c.index, "q": c.q.tolist(), "q_target": c.q_target.tolist(), "excitations": c.excitations,
            "modes": c.modes, "identified_modes": int(c.identified.num_modes) if c.identified is not None else 0,
            "seconds": c.seconds}


def unknown_ranges(unknowns: Unknowns, nominal, settings: CalibrationSettings):
    """(lower, upper) physical bounds: the kind's factors times the nominal value, [0, zero_span]
    where the nominal value is 0."""
    lo = np.array([settings.ranges.get(k, DEFAULT_RANGES[k])[0] for k in unknowns.kinds]) * nominal
    hi = np.array([settings.ranges.get(k, DEFAULT_RANGES[k])[1] for k in unknowns.kinds]) * nominal
    zero = nominal <= 0
    return np.where(zero, 0.0, lo), np.where(zero, settings.zero_span, hi)


class _Campaign:
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
        pulse_joints = tuple(sorted(set(self.unknowns.joints))) if settings.joints else tuple(range(model.n))
        self.plan = ExcitationPlan(torque, self.pulse_duration, pulse_joints,
                                   settings.impact_force if settings.impacts else None,
                                   0.006, settings.pulses_per_configuration)
        self.channels = plant.channels_mode
        self.measurement = MeasurementModel(self.rate, settings.record_s or 1.5, self.channels,
                                            DEFAULT_SENSOR_STD if settings.sensor_std is None else settings.sensor_std,
                                            settings.frequency_floor, settings.damping_floor)
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
            torque = pulse_amplitudes(self.model, 0.5 * (lo + hi), self.pulse_duration, self.limit, rows,
                                      self.measurement.noise(self.model))
            self.plan = replace(self.plan, pulse_torque=torque)

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

    # -- one configuration
    def measure(self, index, q_target, options, validation=False) -> ConfigurationData:
        s, plant = self.s, self.plant
        self.stop.check()
        self.report("moving", positions=list(map(float, q_target)), validation=validation)
        t0 = time.perf_counter()
        self.experiment_gains(False)
        plant.move_to(q_target)
        self.timed("move", t0)
        after = self.durations(q_target)[1]
        t0 = time.perf_counter()
        if s.settle_s:
            plant.settle(s.settle_s)
        else:
            self.settle(SETTLE_MAX_S)
        self.experiment_gains(True)
        plant.settle(SETTLE_CHECK_S)
        self.timed("settle", t0)
        q = np.asarray(plant.measured()[0], float)
        records, labels = [], []
        for o in options:
            self.stop.check()
            exc = self.plan.options()[o]
            self.report("exciting", excitation=exc.label(self.model), validation=validation)
            t0 = time.perf_counter()
            if exc.kind == "motor":
                torque = np.zeros(self.model.n)
                torque[exc.index] = self.plan.pulse_torque[exc.index]
                excitation = MotorExcitation(torque, 0.0, self.pulse_duration)
            else:
                excitation = Impulse(self.plan.wrench_force, AXES[exc.index], 0.0, self.plan.wrench_duration)
            records.append(plant.excite_and_record(excitation, s.before_s, s.record_s or after))
            labels.append(exc.label(self.model))
            self.timed("record", t0)
        self.report("identifying modes", validation=validation)
        t0 = time.perf_counter()
        identified = identify_modes(records, "era")
        self.timed("oma", t0)
        data = ConfigurationData(index, q, np.asarray(q_target, float), labels, records, identified,
                                 validation=validation)
        self.save_partial(data)
        return data

    def durations(self, q):
        """(settle, free decay) [s] from the slowest decay rate ζω of the modes below Nyquist."""
        modes = loop_modes(self.current_model(), q, CONTINUOUS)
        damped = modes.frequencies_hz * np.sqrt(np.clip(1 - modes.damping_ratios ** 2, 0, 1))
        rate = 2 * np.pi * modes.frequencies_hz * modes.damping_ratios
        rate = rate[damped < 0.45 * self.rate]
        slowest = float(rate.min()) if rate.size else 10.0
        return float(np.clip(3.0 / slowest, 0.3, 1.0)), float(np.clip(4.0 / slowest, 0.5, 2.0))

    def match(self, data: ConfigurationData, model, gate):
        """Compare the OMA of ``data`` with ``model``'s loop modes (shapes and frequencies; the
        records' noise-floor status of unmatched modes is not needed here); the identified rows
        become the configuration's measured modes. Returns True if the matching changed."""
        t0 = time.perf_counter()
        modes = loop_modes(model, data.q, self.loop)
        rows = channel_rows(self.model, data.records[0].channels)
        comparison = compare_with_model(data.identified, modes, rows, None, self.loop.label,
                                        frequency_gate=gate, mac_gate=0.5)
        ident = data.identified
        measured = []
        for r in comparison.rows:
            if r.status != IDENTIFIED:
                continue
            i = r.oma_mode - 1
            floor_f, floor_z = measurement_floors(r.oma_frequency_hz, r.oma_damping_ratio, self.s.frequency_floor,
                                                  self.s.damping_floor)
            sf = float(np.hypot(ident.std_frequency_hz[i], floor_f))
            sz = float(np.hypot(ident.std_damping_ratio[i], floor_z))
            measured.append({"mode_index": r.mode - 1, "frequency_hz": r.oma_frequency_hz,
                             "damping_ratio": r.oma_damping_ratio, "std_frequency_hz": sf, "std_damping_ratio": sz,
                             "mac": r.mac, "snr": r.snr})
        old = [m["mode_index"] for m in data.modes]
        changed = old != [m["mode_index"] for m in measured]
        data.comparison, data.references, data.modes = comparison, modes, measured
        self.timed("match", t0)
        return changed

    def measurements(self, configs) -> MeasuredModes:
        rows = [(i, m) for i, c in enumerate(configs) for m in c.modes]
        if not rows:
            raise InputError("measurements: no mode of the model was identified in the records")
        pick = lambda key: np.array([m[key] for _, m in rows], float)
        return MeasuredModes(np.array([c.q for c in configs]), np.array([i for i, _ in rows]), pick("frequency_hz"),
                             pick("damping_ratio"), pick("std_frequency_hz"), pick("std_damping_ratio"),
                             np.array([m["mode_index"] for _, m in rows], int), tuple(c.references for c in configs))

    def refit(self, starts=1, final=False):
        """Fit everything measured so far; re-match with the new estimate and refit while the
        matching changes (at most 3 times)."""
        for round_ in range(4):
            t0 = time.perf_counter()
            meas = self.measurements(self.configs)
            fit = fit_parameters(self.model, self.unknowns, meas, self.loop, self.scale, self.bounds,
                                 x0=self.estimate, starts=starts, seed=self.s.seed, stop=self.stop,
                                 free=None if final or self.fit is None else self.fit.identifiable)
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
             "records": [rec.metadata for rec in data.records]}, default=_builtin))

    def save_state(self):
        if self.out_dir is None:
            return
        state = {"unknown_names": list(self.unknowns.names), "estimate": self.estimate.tolist(),
                 "std": [None if not np.isfinite(v) else float(v) for v in self.std],
                 "configurations": [_config_dict(c) for c in self.configs], "history": self.history}
        (self.out_dir / "partial" / "state.json").write_text(json.dumps(state, default=_builtin))


def _builtin(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def calibrate(model, plant, settings: CalibrationSettings = CalibrationSettings(), out_dir=None, progress=None,
              stop=None, truth_model=None) -> CalibrationResult:
    """Calibrate the unknowns of ``model`` on ``plant`` (module docstring). ``progress(dict)`` is
    called at every stage (feedback); ``stop`` a :class:`CampaignStop`; ``truth_model`` the hidden
    truth of a simulated plant (only for the tracking validation and the report, never for the
    fit). A fault or a cancel ends the loop with the data measured so far (saved under ``out_dir``)
    and ``success`` False; the plant is left holding."""
    stop = stop or CampaignStop()
    check_settings(model, settings, plant.sample_rate_hz)
    run = _Campaign(model, plant, settings, out_dir, progress, stop, truth_model)
    s = settings
    if run.out_dir is not None:
        (run.out_dir / "partial").mkdir(parents=True, exist_ok=True)
    qs = candidate_configurations(model, s.candidates, s.seed)
    gain_table = {}
    try:
        gain_table = _choose_gains(run, qs)
        result = _run(run, qs, gain_table)
    finally:
        try:
            run.restore_gains()
            restore_error = ""
        except FlexmodalError as exc:           # reported, the result (and its data) is kept
            restore_error = str(exc)
    if restore_error:
        result.success = False
        result.message += f"; the controller's gains could not be restored ({restore_error})"
    return result


def _choose_gains(run, qs):
    """The experiment's K_D factor (the setting, or :func:`choose_experiment_gains` on the first
    GAIN_POOL candidates), applied to ``run``; returns the table of predicted std per factor."""
    factor, gain_table = run.s.experiment_kd_scale, {}
    if factor is None:
        t0 = time.perf_counter()
        run.report("choosing the experiment gains")
        factor, gain_table = choose_experiment_gains(run.model, qs[:GAIN_POOL], run.unknowns, run.plan,
                                                     run.measurement, run.bounds, run.loop)
        run.timed("design", t0)
    run.use_gains(factor)
    return gain_table


def _design_pool(run, qs):
    """(validation indices, evaluated pool, prior information, the pool's predicted std, the
    unknowns the whole pool can identify)."""
    s = run.s
    rng = np.random.default_rng(s.seed)
    validation_idx = set(rng.choice(len(qs), size=s.validation, replace=False).tolist()) if s.validation else set()
    pool = run.evaluate_pool(qs)
    prior = prior_information(run.scale, run.bounds)
    all_info = sum(c.information(list(range(len(c.options)))) for i, c in enumerate(pool)
                   if i not in validation_idx and c.stable)
    pool_std = predicted_std(all_info, run.scale)
    return validation_idx, pool, prior, pool_std, identifiable_mask(pool_std, run.scale)


def _compare_designs(run, pool, prior, validation_idx, reachable, budgets, criteria=("worst",)):
    """Designed against random configurations of the same pool, from scratch
    (:func:`~.experiment_design.compare_with_random`), one :class:`DesignComparison` per budget of
    ``budgets`` and criterion of ``criteria`` (:data:`~.experiment_design.CRITERIA`): a list of
    (K, criterion, comparison)."""
    s = run.s
    with single_blas_thread():
        steps = greedy_design(pool, max(budgets), run.scale, prior, exclude=validation_idx,
                              pulses_per_configuration=s.pulses_per_configuration, target=run.targets)
    return [(K, c, compare_with_random(pool, steps[:K], run.scale, seeds=s.random_seeds,
                                       pulses_per_configuration=s.pulses_per_configuration,
                                       identifiable=reachable, seed=s.seed, exclude=validation_idx, criterion=c))
            for K in sorted({min(K, len(steps)) for K in budgets}) if K > 0 for c in criteria]


def design_against_random(model, plant, settings: CalibrationSettings = CalibrationSettings(),
                          budgets=(2, 3, 4, 5, 6), criteria=("worst", "mean")) -> dict:
    """The fast path of the design comparison: no record, only the Fisher information of the
    experiment design on the nominal ``model`` (what :func:`calibrate` sees before its first
    configuration; ``plant`` gives the loop, the sample rate and the channels, nothing runs on
    it). For each K of ``budgets``: the worst predicted relative std (over the unknowns the pool
    can identify) after K designed configurations, and how many random configurations
    (``settings.random_seeds`` draws, at most 4·K) reach it; with the criterion "mean" the same
    for the geometric mean of the relative std. Returns {"comparisons": [(K, criterion,
    DesignComparison), ...], "experiment_kd_scale", "unknown_names", "identifiable", "seconds"}."""
    check_settings(model, settings, plant.sample_rate_hz)
    if settings.random_seeds < 1:
        raise InputError(f"random_seeds: must be at least 1 for a comparison, got {settings.random_seeds}")
    t0 = time.perf_counter()
    run = _Campaign(model, plant, settings, None, None, CampaignStop(), None)
    qs = candidate_configurations(model, settings.candidates, settings.seed)
    _choose_gains(run, qs)
    validation_idx, pool, prior, _, reachable = _design_pool(run, qs)
    comparisons = _compare_designs(run, pool, prior, validation_idx, reachable, tuple(budgets), tuple(criteria))
    return {"comparisons": comparisons, "experiment_kd_scale": run.kd_scale,
            "unknown_names": list(run.unknowns.names), "identifiable": reachable,
            "seconds": time.perf_counter() - t0}


def _run(run, qs, gain_table):
    s, stop, model, truth_model = run.s, run.stop, run.user_model, run.truth
    message, success = "", False
    validation_idx, pool, prior, pool_std, reachable = _design_pool(run, qs)
    random_rng = np.random.default_rng(s.seed + 1)
    design_steps, used, pool_at = [], set(), run.estimate.copy()
    try:
        for k in range(s.budget):
            stop.check()
            t0 = time.perf_counter()
            info = run.information()
            if np.any(np.abs(run.estimate / np.maximum(pool_at, 1e-300) - 1)[run.nominal > 0] > REEVALUATE_SHIFT):
                pool, pool_at = run.evaluate_pool(qs), run.estimate.copy()
            with single_blas_thread():
                if s.design == "random":
                    step = random_design(pool, 1, run.scale, random_rng, info, exclude=used | validation_idx,
                                         pulses_per_configuration=s.pulses_per_configuration)
                else:
                    step = greedy_design(pool, 1, run.scale, prior, info, exclude=used | validation_idx,
                                         pulses_per_configuration=s.pulses_per_configuration, target=run.targets)
            run.timed("design", t0)
            if not step:
                message = "no candidate configuration left"
                break
            step = step[0]
            used.add(step.candidate)
            design_steps.append(step)
            data = run.measure(k, qs[step.candidate], step.excitations)
            run.configs.append(data)
            run.match(data, run.current_model(), FIRST_GATE if run.fit is None else GATE)
            run.report("fitting", modes_measured=len(data.modes))
            if sum(len(c.modes) for c in run.configs) * 2 > run.unknowns.size:
                run.refit()
            entry = {"configuration": k, "q": data.q.tolist(), "excitations": data.excitations,
                     "modes_measured": len(data.modes), "values": run.estimate.tolist(),
                     "std": [None if not np.isfinite(v) else float(v) for v in run.std],
                     "predicted_std": [None if not np.isfinite(v) else float(v) for v in step.predicted_std]}
            run.history.append(entry)
            run.save_state()
            run.report("configuration done", positions=data.q.tolist(), modes_measured=len(data.modes),
                       names=list(run.unknowns.names), values=run.estimate.tolist(),
                       std=run.std.tolist(), predicted_std=step.predicted_std.tolist())
            done = (run.std <= run.targets * run.scale) | ~reachable
            if run.fit is not None and done.all() and len(run.configs) >= MIN_CONFIGURATIONS:
                message = f"targets reached after {k + 1} configuration(s)"
                break
        else:
            message = f"budget of {s.budget} configuration(s) used"
        stop.check()
        run.report("final fit")
        run.refit(starts=s.starts, final=True)
        for i in sorted(validation_idx):
            stop.check()
            t0 = time.perf_counter()
            cand = pool[i]
            opts = list(np.argsort(-np.nansum(np.where(np.isfinite(cand.var_f), 1.0, 0.0), axis=1))
                        [: s.pulses_per_configuration])
            data = run.measure(len(run.validation), qs[i], opts, validation=True)
            _validate(run, data)
            run.validation.append(data)
            run.timed("validation", t0)
        success = True
    except Interrupted as exc:
        message = "cancelled" if exc.reason == "cancelled" else f"time limit reached ({exc.reason})"
    except (FlexmodalError, np.linalg.LinAlgError) as exc:
        message = f"fault: {exc}"
    except Exception as exc:        # a plant or numerical failure must not lose the data measured so far
        message = f"fault: {type(exc).__name__}: {exc}"
    run.save_state()
    comparison = None
    if success and s.random_seeds:          # designed against random sets of the same pool, from scratch
        t0 = time.perf_counter()
        run.report("design against random configurations")
        comparison = (_compare_designs(run, pool, prior, validation_idx, reachable,
                                       (max(s.budget, COMPARISON_BUDGET),)) or [(0, "", None)])[0][2]
        run.timed("design", t0)
    result = CalibrationResult(
        success=success and bool(run.configs), message=message, robot=model.name, unknown_names=run.unknowns.names,
        nominal=run.nominal, values=run.estimate, std=run.std, identifiable=run.identifiable,
        predicted_std_pool=pool_std, model=run.calibrated_model(), nominal_model=model, loop=run.loop,
        configurations=run.configs, validation=run.validation, history=run.history, design=comparison,
        fit=run.fit, timing=run.timing, settings=s, experiment_kd_scale=run.kd_scale,
        gain_table={k: v.tolist() for k, v in gain_table.items()},
        truth=None if truth_model is None else run.unknowns.values(truth_model))
    if success and truth_model is not None and s.tracking:
        t0 = time.perf_counter()
        run.report("tracking validation")
        try:
            result.tracking = tracking_validation(truth_model, model, result.model, run.plant)
        except FlexmodalError as exc:
            result.tracking = {"error": str(exc)}
        run.timed("tracking", t0)
    return result


def _validate(run, data):
    """Match a validation configuration's OMA with the calibrated model and add the nominal model's
    predictions of the same modes."""
    run.match(data, run.current_model(), GATE)
    nominal = loop_modes(run.model, data.q, run.loop)
    idx = follow_modes(data.references, nominal, np.array([m["mode_index"] for m in data.modes], int))
    for m, j in zip(data.modes, idx):
        m["calibrated_frequency_hz"] = float(data.references.frequencies_hz[m["mode_index"]])
        m["calibrated_damping_ratio"] = float(data.references.damping_ratios[m["mode_index"]])
        m["nominal_frequency_hz"] = float(nominal.frequencies_hz[j])
        m["nominal_damping_ratio"] = float(nominal.damping_ratios[j])


def tracking_trajectory(model):
    """The reference of the tracking validation: the thesis' LWR4 motion (§4.4.5) for a 7-joint
    robot, else a C⁴ move between two configurations at 0.3 and 0.7 of the joint ranges in 3 s.
    Returns (times, positions)."""
    if model.n == THESIS_LWR4_Q0.size and model.name.startswith("kuka"):
        return np.array([0.0, THESIS_LWR4_T]), np.array([THESIS_LWR4_Q0, THESIS_LWR4_QF])
    lo, hi = np.maximum(model.position_lower, -np.pi), np.minimum(model.position_upper, np.pi)
    return np.array([0.0, 3.0]), np.array([lo + 0.3 * (hi - lo), lo + 0.7 * (hi - lo)])


def tracking_validation(truth_model, nominal_model, calibrated_model, plant=None, duration_extra=0.5) -> dict:
    """Max and RMS link tracking error [rad] of :func:`tracking_trajectory` on the true plant (the
    RK4 closed loop, :func:`~flexmodal_ros.simulation.closed_loop.run_closed_loop`, viscous friction as the
    calibration plant) with the feedforward+PD built from the calibrated, the true and the nominal
    model (same gains, 1 kHz, the plant's command delay)."""
    times, positions = tracking_trajectory(nominal_model)
    plant_model = with_overrides(truth_model, d_c=0.0, d_cm=0.0)
    delay = getattr(getattr(plant, "options", None), "command_delay_cycles", 0)
    rate = getattr(plant, "sample_rate_hz", 1000.0)
    out = {"trajectory": "thesis LWR4 (4.29)-(4.30)" if times[-1] == 3.0 and nominal_model.n == 7 else "C4 move",
           "duration_s": float(times[-1])}
    for label, ctrl_model in (("calibrated", calibrated_model), ("true", truth_model), ("nominal", nominal_model)):
        ctrl_model = with_overrides(ctrl_model, d_c=0.0, d_cm=0.0)
        ctrl = FailSafeController(ctrl_model, True, compiled=False, limits=SafetyLimits(velocity_scale=np.inf))
        res = run_closed_loop(plant_model, times, positions, float(times[-1]) + duration_extra, True, rate,
                              command_delay_cycles=delay, controller=ctrl)
        summary = res.summary()
        out[label] = {"max_tracking_error_rad": summary["max_tracking_error_rad"],
                      "rms_tracking_error_rad": summary["rms_tracking_error_rad"],
                      "saturated_cycles": summary["saturated_cycles"]}
    cal, true, nom = (out[k]["max_tracking_error_rad"] for k in ("calibrated", "true", "nominal"))
    out["calibrated_over_true"] = cal / true if true > 0 else float("inf")
    out["nominal_over_calibrated"] = nom / cal if cal > 0 else float("inf")
    return out

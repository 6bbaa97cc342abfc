"""Options of a calibration (:func:`~.campaign.calibrate`): the settings with their bounds, the
ranges of the unknowns and the cancel flag/deadline of a run."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import InputError
from ..core.workers import Interrupted
from ..identification.inverse_eigen import KINDS, parse_unknowns
from .eigen_sensitivity import Unknowns
from .experiment_design import DAMPING_FLOOR, FREQUENCY_FLOOR
from ..core.validation import shown

MAX_BUDGET = 100
MAX_VALIDATION = 20
MAX_CANDIDATES = 2000
MAX_RECORD_S = 10.0
MAX_REPEATS = 16
DEFAULT_RANGES = {"k": (0.5, 2.0), "d_f": (0.2, 5.0), "d_fm": (0.2, 5.0)}
ZERO_NOMINAL_SPAN = 10.0     # range [0, this] of an unknown whose nominal value is 0 [N m s/rad]
FIRST_GATE, GATE = 0.3, 0.1  # |Δf|/f of a match before / after the first fit
DESIGNS = ("optimal", "worst-first", "random")  # how the loop chooses the next configuration (random: for comparisons)
USER_DESIGNS = DESIGNS[:2]   # those the CLI, the action's goal, the calibration node's parameter and the bench offer
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
    pulse_joints: tuple | None = None        # joints that may be pulsed, names or indices (None: the calibrated
                                             # joints when ``joints`` is given, else all)
    budget: int = 8
    validation: int = 2
    pulses_per_configuration: int = 2
    pulse_repeats: int = 1                   # records per excitation, averaged (noise std / √repeats)
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
    design: str = "optimal"                  # "worst-first": Ds on the worst unknowns, overlap-aware visibility
                                             # (design_selection.worst_focus); "random": drawn (comparisons)

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
    pulse_joint_indices(model, s)
    count(s.pulse_repeats, "pulse_repeats", 1, MAX_REPEATS)
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
        raise InputError(f"design: must be one of {', '.join(DESIGNS)}, got {shown(s.design)}")
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


def pulse_joint_indices(model, s: CalibrationSettings) -> tuple:
    """The 0-based joints the experiment may pulse: ``pulse_joints`` (InputError naming the field
    for an unknown name, an index outside the robot or none at all), else those of ``joints``,
    else every joint."""
    if s.pulse_joints is None:
        return tuple(sorted(set(Unknowns.build(model, ("k",), s.joints).joints))) if s.joints else tuple(range(model.n))
    out = []
    for j in s.pulse_joints:
        if isinstance(j, str):
            if j not in model.joint_names:
                raise InputError(f"pulse_joints: unknown joint {shown(j)}; robot has {', '.join(model.joint_names)}")
            j = model.joint_names.index(j)
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)):
            raise InputError(f"pulse_joints: expected joint names or 0-based indices, got {shown(j)}")
        if not 0 <= j < model.n:
            raise InputError(f"pulse_joints: index {j} outside 0..{model.n - 1}")
        out.append(int(j))
    if not out:
        raise InputError("pulse_joints: no joint given (leave it unset for the default)")
    return tuple(sorted(set(out)))


def unknown_ranges(unknowns: Unknowns, nominal, settings: CalibrationSettings):
    """(lower, upper) physical bounds: the kind's factors times the nominal value, [0, zero_span]
    where the nominal value is 0."""
    lo = np.array([settings.ranges.get(k, DEFAULT_RANGES[k])[0] for k in unknowns.kinds]) * nominal
    hi = np.array([settings.ranges.get(k, DEFAULT_RANGES[k])[1] for k in unknowns.kinds]) * nominal
    zero = nominal <= 0
    return np.where(zero, 0.0, lo), np.where(zero, settings.zero_span, hi)


"""What a calibration returns: the data of every configuration measured and the result (its
``to_dict`` is the CLI's ``--json`` and the ROS action's)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .campaign_settings import CalibrationSettings

@dataclass
class ConfigurationData:
    """What one configuration gave: ``q`` measured link position, ``excitations`` labels,
    ``records``, the OMA's ``identified`` modes, the latest ``comparison`` with the model and the
    measured modes used (lists of dicts), ``warnings`` (e.g. an OMA that failed on a noisy record)."""

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
    warnings: list = field(default_factory=list)


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
               "configurations": [config_dict(c) for c in self.configurations],
               "validation": [config_dict(c) for c in self.validation],
               "validation_errors": self.validation_errors(), "history": self.history,
               "design_vs_random": None if self.design is None else self.design.to_dict(),
               "tracking": self.tracking, "fit": None if self.fit is None else self.fit.to_dict(),
               "timing_s": self.timing, "files": {k: str(v) for k, v in self.files.items()},
               "settings": None if self.settings is None else asdict(self.settings),
               "experiment_kd_scale": self.experiment_kd_scale,
               "experiment_gains_predicted_std": {str(k): [None if not np.isfinite(x) else x for x in v]
                                                  for k, v in self.gain_table.items()}}
        if self.truth is not None:
            out["truth"] = self.truth.tolist()
        return out


def config_dict(c: ConfigurationData) -> dict:
    return {"index": c.index, "q": c.q.tolist(), "q_target": c.q_target.tolist(), "excitations": c.excitations,
            "modes": c.modes, "identified_modes": int(c.identified.num_modes) if c.identified is not None else 0,
            "seconds": c.seconds, "warnings": c.warnings}



def json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


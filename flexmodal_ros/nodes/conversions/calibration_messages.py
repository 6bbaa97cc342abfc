"""Calibrate ↔ the calibration core (flexmodal_ros/calibration/): the calibration node's only place
where the action's fields are read or filled. Not imported by the package ``__init__`` (it loads
the calibration core, which the other nodes do not need): import it from here."""
from dataclasses import replace

import numpy as np

from ...calibration.campaign import CalibrationSettings
from ...calibration.campaign_settings import USER_DESIGNS
from ...core.errors import InputError
from ...core.validation import shown, shown_names
from ...identification.inverse_eigen import parse_unknowns


def calibration_goal_to_core(model, goal, defaults):
    """Calibrate.Goal → CalibrationSettings (zero/empty fields: ``defaults``, a dict of the node's
    settings) and the output name (str, '' = default)."""
    settings = replace(CalibrationSettings(), **defaults)
    changes = {}
    if list(goal.unknowns):
        changes["unknowns"] = parse_unknowns(list(goal.unknowns))
    for field in ("joints", "pulse_joints"):
        names = list(getattr(goal, field))
        if names:
            unknown = [j for j in names if j not in model.joint_names]
            if unknown:
                raise InputError(f"{field}: unknown joint(s) {shown_names(unknown)}; robot has "
                                 f"{', '.join(model.joint_names)}")
            changes[field] = tuple(names)
    if goal.design:
        if goal.design not in USER_DESIGNS:
            raise InputError(f"design: unknown value {shown(goal.design)}; one of {', '.join(USER_DESIGNS)}")
        changes["design"] = str(goal.design)
    for field, name in (("budget", "budget"), ("validation", "validation"),
                        ("pulses_per_configuration", "pulses_per_configuration"), ("candidates", "candidates")):
        value = int(getattr(goal, field))
        if value or field == "validation":
            changes[name] = value
    for field in ("target_k", "target_d", "experiment_kd_scale", "pulse_torque"):
        value = float(getattr(goal, field))
        if not np.isfinite(value) or value < 0:
            raise InputError(f"{field}: must be a finite number >= 0 (0 = default), got {value}")
        if value:
            changes[field] = value
    changes["seed"] = int(goal.seed)
    if changes["seed"] < 0:
        raise InputError(f"seed: must be >= 0, got {changes['seed']}")
    return replace(settings, **changes), str(goal.output_name)


def calibration_result_to_response(result, response, params_file="", report_dir=""):
    """CalibrationResult → Calibrate.Result."""
    response.success, response.message = bool(result.success), str(result.message)
    model = result.model
    response.joint_names = list(model.joint_names)
    response.stiffness = [float(v) for v in model.k]
    response.link_damping = [float(v) for v in model.d_f]
    response.motor_damping = [float(v) for v in model.d_fm]
    response.unknown_names = list(result.unknown_names)
    response.values = [float(v) for v in result.values]
    response.standard_deviations = [float(v) for v in result.std]
    response.not_identifiable = list(result.not_identifiable)
    response.configurations_measured = len(result.configurations)
    errors = result.validation_errors()
    response.validation_max_frequency_error_rel = float(errors["calibrated"]["max_frequency_error_rel"])
    response.validation_max_damping_error = float(errors["calibrated"]["max_damping_error"])
    response.nominal_max_frequency_error_rel = float(errors["nominal"]["max_frequency_error_rel"])
    response.nominal_max_damping_error = float(errors["nominal"]["max_damping_error"])
    response.params_file, response.report_dir = str(params_file), str(report_dir)
    return response


def calibration_feedback(info, feedback):
    """A progress dict of :func:`flexmodal_ros.calibration.campaign.calibrate` → Calibrate.Feedback."""
    feedback.stage = str(info.get("stage", ""))
    feedback.configuration = int(info.get("configuration", 0))
    feedback.budget = int(info.get("budget", 0))
    feedback.positions = [float(v) for v in info.get("positions", [])]
    feedback.modes_measured = int(info.get("modes_measured", 0))
    feedback.unknown_names = list(info.get("names", []))
    feedback.values = [float(v) for v in info.get("values", [])]
    feedback.standard_deviations = [float(v) for v in info.get("std", [])]
    feedback.elapsed_s = float(info.get("elapsed_s", 0.0))
    return feedback

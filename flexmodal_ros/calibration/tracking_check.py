"""Tracking validation of a calibrated model: the feedforward+PD built from the calibrated, the
true and the nominal model tracking the same reference on the true plant."""
from __future__ import annotations

import numpy as np

from ..control import FailSafeController, SafetyLimits
from ..robot.model import with_overrides
from ..robot.trajectory import THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T
from ..simulation import run_closed_loop

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

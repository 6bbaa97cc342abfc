"""Excite ↔ the core's motor excitation (:class:`~flexmodal_ros.control.excitation.MotorExcitation`):
the controller's and the simulators' ``~/excite`` and the ROS calibration plant."""
import numpy as np

from flexmodal_interfaces.srv import Excite

from ...control.excitation import MotorExcitation
from ...core.errors import InputError
from ...flexible_joint.ama import configuration_from_names


# --- motor excitation (Excite) -------------------------------------------------------------------

def excite_request_to_core(model, request):
    """Excite.Request → (MotorExcitation (start = start_time, or 0), start_now: start_time == 0)."""
    torque = configuration_from_names(model, list(request.joint_names), list(request.torque), "torque")
    start = float(request.start_time)
    if not np.isfinite(start) or start < 0:
        raise InputError(f"start_time: must be >= 0 s (0 = next cycle), got {start}")
    return (MotorExcitation(torque, start, float(request.duration), request.kind or "pulse",
                            float(request.f0_hz or 1.0), float(request.f1_hz or 100.0)), start == 0.0)


def excite_request(joint_names, excitation, start_time=0.0):
    """Excite.Request of a core MotorExcitation (``start_time`` on the joint-state clock, 0 = next cycle)."""
    return Excite.Request(joint_names=list(joint_names), torque=[float(v) for v in excitation.torque],
                          duration=float(excitation.duration), kind=excitation.kind, f0_hz=float(excitation.f0),
                          f1_hz=float(excitation.f1), start_time=float(start_time))

"""Gain changes of a running controller, checked before they act (ROS-free)."""
import numpy as np

from ..core.errors import InputError
from ..flexible_joint.ama import modal_analysis
from ..robot.model import with_overrides


def checked_gains(model, data, kp, kd, q):
    """``model`` with motor-side gains ``kp`` [N·m/rad], ``kd`` [N·m·s/rad] (scalar or n values;
    None keeps the current ones), or ``model`` itself when they do not change. InputError naming
    the field for non-finite values, kp <= 0, kd < 0, or a closed loop linearized at ``q`` (the
    measured position) that would not be asymptotically stable with them (modal analysis (2.14))."""
    if kp is None and kd is None:
        return model
    new = with_overrides(model, kp=kp, kd=kd)
    if np.array_equal(new.kp, model.kp) and np.array_equal(new.kd, model.kd):
        return model                                              # unchanged gains: nothing to check
    result = modal_analysis(new, q, data)
    if not result.stable:
        raise InputError(f"kp/kd: the closed loop at the measured position would be {result.stability} "
                         f"with kp {new.kp.tolist()}, kd {new.kd.tolist()}")
    return new

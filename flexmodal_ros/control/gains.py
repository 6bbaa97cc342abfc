"""Gain and limit changes of a running controller, checked before they act (ROS-free).

:func:`checked_gains` checks new motor-side gains for closed-loop stability; :func:`configured`
checks a whole reconfiguration (gains, :class:`~.limits.SafetyLimits`, state timeout, start
tolerance) and returns it as one :class:`ControllerSettings`, so that nothing changes unless
everything is valid.
"""
from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.ama import modal_analysis
from ..flexible_joint.sampled import sampled_modal_analysis
from ..robot.model import with_overrides
from .admission import TrajectoryAdmission
from .limits import SafetyLimits


def checked_gains(model, data, kp, kd, q, controller_rate_hz=None):
    """``model`` with motor-side gains ``kp`` [N·m/rad], ``kd`` [N·m·s/rad] (scalar or n values;
    None keeps the current ones), or ``model`` itself when they do not change. InputError naming
    the field for non-finite values, kp <= 0, kd < 0, or a closed loop linearized at ``q`` (the
    measured position) that would not be asymptotically stable with them: the continuous law's
    modal analysis (2.14), and with ``controller_rate_hz`` the loop the controller runs, the law
    sampled at that rate with its command one period late
    (:func:`~flexmodal_ros.flexible_joint.sampled.sampled_modal_analysis`, ``zoh-delay``) — a
    derivative gain the continuous loop damps can make that one unstable."""
    if kp is None and kd is None:
        return model
    new = with_overrides(model, kp=kp, kd=kd)
    if np.array_equal(new.kp, model.kp) and np.array_equal(new.kd, model.kd):
        return model                                              # unchanged gains: nothing to check
    result = modal_analysis(new, q, data)
    loop = ""
    if result.stable and controller_rate_hz is not None:
        result = sampled_modal_analysis(new, q, controller_rate_hz, "zoh-delay", data)
        loop = f" sampled at {controller_rate_hz:g} Hz with its command one period late"
    if not result.stable:
        raise InputError(f"kp/kd: the closed loop{loop} at the measured position would be {result.stability} "
                         f"with kp {new.kp.tolist()}, kd {new.kd.tolist()}")
    return new


@dataclass(frozen=True)
class ControllerSettings:
    """A checked configuration: ``model`` with the gains in use, the :class:`SafetyLimits`
    ``limits`` and their resolution (``velocity_limit``, ``acceleration_limit`` (n,),
    ``state_bounds`` (lo, hi) (4n,)), the reference checks ``admission``, ``state_timeout`` [s]
    and ``start_tolerance`` [rad or m]."""
    model: object
    limits: SafetyLimits
    velocity_limit: np.ndarray
    acceleration_limit: np.ndarray
    state_bounds: tuple
    admission: TrajectoryAdmission
    state_timeout: float
    start_tolerance: float


def configured(current, model, data, q, kp=None, kd=None, limits=None, state_timeout=None, start_tolerance=None,
               controller_rate_hz=None):
    """The :class:`ControllerSettings` after a change of ``current`` (None: the first
    configuration of ``model``; then ``limits``, ``state_timeout`` and ``start_tolerance`` are
    required); None keeps a value. Everything is checked before anything is returned (InputError
    naming the field): state_timeout and start_tolerance > 0, the limits
    (:meth:`SafetyLimits.resolved`), the gains (:func:`checked_gains` at the measured position ``q``,
    sampled at ``controller_rate_hz`` when given)."""
    if current is not None:
        model = current.model
        limits = current.limits if limits is None else limits
        state_timeout = current.state_timeout if state_timeout is None else state_timeout
        start_tolerance = current.start_tolerance if start_tolerance is None else start_tolerance
    if not state_timeout > 0:
        raise InputError(f"state_timeout: must be > 0 s, got {state_timeout}")
    if not start_tolerance > 0:
        raise InputError(f"start_tolerance: must be > 0, got {start_tolerance}")
    velocity, acceleration, bounds = limits.resolved(model)
    model = checked_gains(model, data, kp, kd, q, controller_rate_hz)
    admission = TrajectoryAdmission(model, limits, velocity, acceleration, float(start_tolerance))
    return ControllerSettings(model, limits, velocity, acceleration, bounds, admission, float(state_timeout),
                              float(start_tolerance))

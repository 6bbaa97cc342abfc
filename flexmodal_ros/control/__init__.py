"""The controller (ROS-free): laws, fail-safe policy, reference admission, gain changes, limits.

- :mod:`.law` — tracking law (feedforward + PD) and hold law (2.2)-(2.3) as one generated cycle
  (:class:`ControlLaw`), the cycle's types (:class:`Mode`, :class:`JointSample`, :class:`Command`);
- :mod:`.failsafe` — :class:`FailSafeController`, the fail-safe policy the controller node runs,
  composed of:
- :mod:`.state_machine` — the modes and their transitions (:class:`ModeMachine`);
- :mod:`.measured` — which joint-state samples are taken, out of the limits, stale (:class:`MeasuredState`);
- :mod:`.admission` — checks of a reference before it is tracked, the tracked reference;
- :mod:`.gains` — gain and limit changes checked before they act (closed-loop stability);
- :mod:`.fast_path` — the contract of the steady cycles run outside Python (:class:`SteadyCycle`);
- :mod:`.limits` — :class:`SafetyLimits` and the plausibility of measured states.
"""
from .admission import AdmittedTrajectory, TrackedReference, TrajectoryAdmission
from .failsafe import Counters, FailSafeController, failsafe_controller
from .fast_path import SteadyCycle, steady_cycle
from .gains import ControllerSettings, checked_gains, configured
from .law import (LAW_INPUTS, LAW_OUTPUTS, Command, ControlLaw, JointSample, Mode, control_law_function, law_layout,
                  saturate, static_hold_torque)
from .limits import (DEFAULT_MAX_START_DELAY, RECOVERY_INSET, STATE_BOUND, SafetyLimits, implausible_state,
                     plausible_bounds)
from .measured import MeasuredState
from .state_machine import ModeMachine

__all__ = ["AdmittedTrajectory", "TrajectoryAdmission", "Counters", "FailSafeController", "SteadyCycle",
           "failsafe_controller",
           "checked_gains", "LAW_INPUTS", "LAW_OUTPUTS", "Command", "ControlLaw", "JointSample", "Mode",
           "control_law_function", "law_layout", "saturate", "STATE_BOUND", "SafetyLimits", "implausible_state",
           "DEFAULT_MAX_START_DELAY", "RECOVERY_INSET", "plausible_bounds", "TrackedReference", "steady_cycle",
           "ControllerSettings", "configured", "MeasuredState", "ModeMachine", "static_hold_torque"]

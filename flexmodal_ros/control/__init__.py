"""The controller (ROS-free): laws, fail-safe policy, reference admission, gain changes, limits.

- :mod:`.law` — tracking law (feedforward + PD) and hold law (2.2)-(2.3) as one generated cycle
  (:class:`ControlLaw`), the cycle's types (:class:`Mode`, :class:`JointSample`, :class:`Command`);
- :mod:`.failsafe` — :class:`FailSafeController`, the state machine the controller node runs;
- :mod:`.admission` — checks of a reference before it is tracked;
- :mod:`.gains` — gain changes checked for closed-loop stability;
- :mod:`.limits` — :class:`SafetyLimits` and the plausibility of measured states.
"""
from .admission import AdmittedTrajectory, TrajectoryAdmission
from .failsafe import Counters, FailSafeController, SteadyCycle
from .gains import checked_gains
from .law import (LAW_INPUTS, LAW_OUTPUTS, Command, ControlLaw, JointSample, Mode, control_law_function, law_layout,
                  saturate)
from .limits import STATE_BOUND, SafetyLimits, implausible_state

__all__ = ["AdmittedTrajectory", "TrajectoryAdmission", "Counters", "FailSafeController", "SteadyCycle",
           "checked_gains", "LAW_INPUTS", "LAW_OUTPUTS", "Command", "ControlLaw", "JointSample", "Mode",
           "control_law_function", "law_layout", "saturate", "STATE_BOUND", "SafetyLimits", "implausible_state"]

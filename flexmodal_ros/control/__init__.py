"""The controller (ROS-free): laws, fail-safe policy, reference admission, gain changes, limits.

- :mod:`.law` — tracking law (feedforward + PD) and hold law (2.2)-(2.3) as one generated cycle
  (:class:`ControlLaw`), the cycle's types (:class:`Mode`, :class:`JointSample`, :class:`Command`);
- :mod:`.failsafe` — :class:`FailSafeController`, the state machine the controller node runs;
- :mod:`.admission` — checks of a reference before it is tracked;
- :mod:`.gains` — gain changes checked for closed-loop stability;
- :mod:`.limits` — :class:`SafetyLimits` and the plausibility of measured states.
"""
from ..core.lazy import lazy_exports

# Names imported on first use: a process that needs the cycle's types or the plausibility check
# only (the modal server's joint-state conversion) does not load the law and CasADi.
__getattr__, __all__ = lazy_exports(__name__, {
    "admission": ("AdmittedTrajectory", "TrajectoryAdmission"),
    "failsafe": ("Counters", "FailSafeController", "SteadyCycle"),
    "gains": ("checked_gains",),
    "law": ("LAW_INPUTS", "LAW_OUTPUTS", "Command", "ControlLaw", "JointSample", "Mode", "control_law_function",
            "law_layout", "saturate"),
    "limits": ("DEFAULT_MAX_START_DELAY", "RECOVERY_INSET", "STATE_BOUND", "SafetyLimits", "implausible_state",
               "plausible_bounds"),
})

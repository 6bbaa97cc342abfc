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
from ..core.lazy import lazy_exports

# Names imported on first use: a process that needs the cycle's types or the plausibility check
# only (the modal server's joint-state conversion) does not load the law and CasADi.
__getattr__, __all__ = lazy_exports(__name__, {
    "admission": ("AdmittedTrajectory", "TrackedReference", "TrajectoryAdmission"),
    "failsafe": ("Counters", "FailSafeController", "failsafe_controller"),
    "fast_path": ("SteadyCycle", "steady_cycle"),
    "gains": ("ControllerSettings", "checked_gains", "configured"),
    "law": ("LAW_INPUTS", "LAW_OUTPUTS", "Command", "ControlLaw", "JointSample", "Mode", "control_law_function",
            "law_layout", "saturate", "static_hold_torque"),
    "limits": ("DEFAULT_MAX_START_DELAY", "RECOVERY_INSET", "STATE_BOUND", "SafetyLimits", "implausible_state",
               "plausible_bounds"),
    "measured": ("MeasuredState",),
    "state_machine": ("ModeMachine",),
})

"""Simulation without ROS: the flexible-joint plant (2.1), a simulator with a clock, closed loops.

- :mod:`.plant` — :class:`FlexibleJointPlant` (RK4 of (2.1) with friction (4.3)-(4.4)), rest states,
  the set-point law as a state function, impulse limits;
- :mod:`.simulator` — :class:`Simulator`: clock, held commands, scheduled impulses;
- :mod:`.closed_loop` — one controller + plant driver (:func:`run_closed_loop`) over any
  :class:`LoopPlant`, the thesis' set-point run and trajectory, plots.
"""
from .closed_loop import (THESIS_VELOCITY_SCALE, ClosedLoopResult, LoopPlant, SimulatedPlant, run_closed_loop,
                          save_closed_loop_plot, simulate_setpoint, thesis_trajectory)
from .plant import (DEFAULT_DT, FlexibleJointPlant, ImpulseLimits, ScheduledWrench, SetpointLaw, check_impulse,
                    rest_state)
from .simulator import Simulator

__all__ = ["THESIS_VELOCITY_SCALE", "ClosedLoopResult", "LoopPlant", "SimulatedPlant", "run_closed_loop",
           "save_closed_loop_plot", "simulate_setpoint", "thesis_trajectory", "DEFAULT_DT", "FlexibleJointPlant",
           "ImpulseLimits", "ScheduledWrench", "SetpointLaw", "check_impulse", "rest_state", "Simulator"]

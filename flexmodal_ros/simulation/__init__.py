"""Simulation without ROS: the flexible-joint plant (2.1), a simulator with a clock, closed loops.

- :mod:`.plant` — :class:`FlexibleJointPlant` (RK4 of (2.1) with friction (4.3)-(4.4)), rest states,
  the set-point law as a state function, impulse limits;
- :mod:`.simulator` — :class:`Simulator`: clock, held commands, scheduled impulses, the valid
  range of the integration (:class:`SimulationFault`);
- :mod:`.drive` — :class:`CommandInput` (zero-order hold of received commands, motor excitation)
  and :class:`DrivenPlant` (one sampling period of the plant with it), the ROS simulators' drive;
- :mod:`.pacing` — :class:`RealTimePacing`: wall-clock pacing of a simulation loop;
- :mod:`.closed_loop` — one controller + plant driver (:func:`run_closed_loop`) over any
  :class:`LoopPlant`, the thesis' set-point run and trajectory, plots.
"""
from .closed_loop import (THESIS_VELOCITY_SCALE, ClosedLoopResult, LoopPlant, SimulatedPlant, run_closed_loop,
                          save_closed_loop_plot, simulate_setpoint, thesis_trajectory)
from .drive import CommandInput, DrivenPlant
from .pacing import RealTimePacing, check_rates
from .plant import (DEFAULT_DT, FlexibleJointPlant, ImpulseLimits, ScheduledWrench, SetpointLaw, check_impulse,
                    rest_state)
from .simulator import MAX_MOTION_PER_STEP, SimulationFault, Simulator, speed_fault, valid_speed

__all__ = ["THESIS_VELOCITY_SCALE", "ClosedLoopResult", "LoopPlant", "SimulatedPlant", "run_closed_loop",
           "save_closed_loop_plot", "simulate_setpoint", "thesis_trajectory", "DEFAULT_DT", "FlexibleJointPlant",
           "ImpulseLimits", "ScheduledWrench", "SetpointLaw", "check_impulse", "rest_state", "Simulator",
           "MAX_MOTION_PER_STEP", "SimulationFault", "speed_fault", "valid_speed", "CommandInput", "DrivenPlant",
           "RealTimePacing", "check_rates"]

"""A simulated drive (ROS-free): the command input of the simulators' plant and its stepping.

A drive reads its command register at each sampling instant: :class:`CommandInput` keeps the
latest valid received command and applies it at :meth:`CommandInput.sample` (zero-order hold);
once commands flow, a sampling instant without a new command is a late step. A motor excitation
(:class:`~flexmodal_ros.control.excitation.MotorExcitation`: pulse or chirp, bounded in amplitude
and duration) is added to the held command, sampled at every period like the command; with
``motor_joint_efforts`` the plant takes the motor-joint efforts W τ_m, so the excitation is scaled
by W. The counts go to a ``stats`` dict shared with the caller (``commands_received``,
``commands_rejected``, ``late_steps``). :class:`DrivenPlant` steps the plant one sampling period
with that input, or with its own set-point law (2.2) evaluated inside every integration step.
"""
import numpy as np

from ..control.excitation import check_excitation
from ..core.errors import FlexmodalError


class CommandInput:
    """Held command and excitation of ``sim`` (a :class:`~.simulator.Simulator`-like plant with
    ``t``, ``set_command``, ``efforts``) of ``model``; excitations bounded by ``excitation_limit``
    (n,) [N m] and ``excitation_duration`` [s]."""

    def __init__(self, sim, model, stats, excitation_limit, excitation_duration, motor_joint_efforts=False):
        self.sim, self.model, self.stats = sim, model, stats
        self.excitation_limit, self.excitation_duration = excitation_limit, excitation_duration
        self.scale = np.asarray(model.W, float) if motor_joint_efforts else 1.0
        self.reset()

    def reset(self):
        """Nothing received, no excitation (the plant is back at its initial state)."""
        self.pending = None          # latest received command, not yet sampled
        self.commanded = False       # a command arrived since start / reset
        self.excitation = None       # running MotorExcitation (absolute start on the simulation clock)
        self.base = None             # the command the excitation is added to

    def take(self, messages, to_torque, refusal=None, warn=None):
        """Receive ``messages``: each converted by ``to_torque`` (FlexmodalError: rejected) and the
        last valid one pending; ``refusal``: None, or why every message is rejected ("" = silently).
        ``warn(text)`` is told each logged rejection."""
        for msg in messages:
            reason = refusal
            if refusal is None:
                try:
                    tau = to_torque(msg)
                except FlexmodalError as exc:
                    reason = f"command rejected: {exc}"
                else:
                    self.pending, self.commanded = tau, True
                    self.stats["commands_received"] += 1
                    continue
            self.stats["commands_rejected"] += 1
            if reason and warn is not None:
                warn(reason)

    def sample(self):
        """Zero-order hold: the pending command to the plant; a step without a new command since
        the previous sampling is late once commands flow. Then the excitation at the current time."""
        if self.pending is not None:
            self.sim.set_command(self.pending)
            self.base, self.pending = self.pending, None
        elif self.commanded:
            self.stats["late_steps"] += 1
        self._excite()

    def check(self, excitation):
        """FlexmodalError when ``excitation`` is beyond the bounds (before taking any lock)."""
        check_excitation(self.model, excitation, self.excitation_limit, self.excitation_duration)

    def schedule(self, excitation, start_now):
        """Start ``excitation`` now (``start_now``) or at its start on the simulation clock; the start
        time [s], or FlexmodalError when another one runs or the start is in the past."""
        if self.excitation is not None:
            raise FlexmodalError(f"excitation: another one runs until t={self.excitation.end:.4f} s")
        start = self.sim.t if start_now else excitation.start
        if start < self.sim.t - 1e-9:
            raise FlexmodalError(f"start_time: {start:.4f} s is in the past (simulation time {self.sim.t:.4f} s)")
        self.excitation = excitation.shifted(start)
        if self.base is None:
            self.base = self.sim.efforts()[1]
        return start

    def _excite(self):
        """The held command plus the excitation at the current time."""
        exc = self.excitation
        if exc is None:
            return
        t = self.sim.t
        if t >= exc.end - 1e-12:
            self.sim.set_command(self.base)
            self.excitation = None
            return
        self.sim.set_command(self.base + self.scale * exc.at(t))


class DrivenPlant:
    """``sim`` (a :class:`~.simulator.Simulator`-like plant) driven through ``command_input``
    (:class:`CommandInput`), or held by its own ``law`` (e.g. :class:`~.plant.SetpointLaw`, None:
    none) evaluated inside every integration step; FlexmodalError when the plant (``engine``) cannot
    run a law."""

    def __init__(self, sim, command_input, law=None, engine=""):
        if law is not None and not hasattr(sim, "set_law"):
            raise FlexmodalError(f"setpoint_law: not available with the {engine} engine")
        self.sim, self.input, self.law = sim, command_input, law
        if law is not None:
            sim.set_law(law)

    def step(self, period):
        """Sample the command input, then integrate ``period`` [s] (SimulationFault out of the valid range)."""
        self.input.sample()
        self.sim.advance(period)

    def reset(self):
        """Back to the initial state at t = 0, nothing received, the law (if any) holding again."""
        self.input.reset()
        self.sim.reset()
        if self.law is not None:
            self.sim.set_law(self.law)

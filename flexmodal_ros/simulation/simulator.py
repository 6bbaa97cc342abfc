"""A plant with a clock: zero-order-held motor commands (or a continuous law) and scheduled impulses.

Validity of the integration: a fixed step dt resolves the configuration-dependent terms of (2.1)
(inertia, Coriolis, gravity, the wrench's Jacobian) only while no joint turns by more than a small
angle per step; :data:`MAX_MOTION_PER_STEP` = 0.05 rad (or m) gives the largest valid speed
:func:`valid_speed` = 0.05 / dt (100 rad/s at the simulators' 2 kHz, 200 at 4 kHz: far above
any robot's velocity limits, far below where the state runs away). A step that leaves it, or any
non-finite value, ends the simulation with :class:`SimulationFault`; the state stays the last
valid one and the simulator refuses to go on until :meth:`Simulator.reset`.
"""
import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_vector
from .plant import ImpulseLimits, ScheduledWrench, check_impulse

MAX_MOTION_PER_STEP = 0.05      # [rad or m] per integration step: the valid-speed bound (module docstring)


def valid_speed(dt):
    """Largest joint speed [rad/s or m/s] a fixed step ``dt`` [s] integrates validly."""
    return MAX_MOTION_PER_STEP / dt


class SimulationFault(InputError):
    """The simulation left its valid range (non-finite state, or a speed above :func:`valid_speed`):
    it stopped at the last valid state; :meth:`Simulator.reset` starts it again."""


class Simulator:
    """A plant with a clock, a zero-order-held motor torque command and scheduled impulses.

    ``advance(duration)`` integrates whole steps; the command and impulses are set between calls.
    ``impulse_limits`` (:class:`ImpulseLimits`) bounds the impulses. ``fault``: None, or why the
    simulation stopped (:class:`SimulationFault`, module docstring).
    """

    def __init__(self, plant, x0, tau0=None, impulse_limits=ImpulseLimits()):
        self.plant = plant
        self.impulse_limits = impulse_limits
        self.x0 = finite_vector(x0, 4 * plant.n, "x0")
        self.tau0 = np.zeros(plant.n) if tau0 is None else finite_vector(tau0, plant.n, "tau0")
        self._base_wrench = bool(np.any(plant.model.wrench))
        self.max_speed = valid_speed(plant.dt)
        self.reset()

    def reset(self):
        """Back to x0 at t = 0 with the initial command and no impulses (clears a fault)."""
        self.fault = None
        self.t = 0.0
        self.steps = 0
        self.x = self.x0.copy()
        self.tau = self.tau0.copy()
        self.impulses = []

    def set_command(self, tau):
        """New motor torque command (n,) [N·m], held until the next call (InputError if bad)."""
        self.tau = finite_vector(tau, self.plant.n, "command")

    def set_law(self, law):
        """Replace the held command by a control law τ_m(x) (e.g. :class:`SetpointLaw`) evaluated
        continuously inside every integration step, until the next :meth:`set_command`."""
        if not callable(law):
            raise InputError("law: expected a callable τ_m(x)")
        self.tau = law

    def apply_impulse(self, wrench, duration):
        """Wrench [f; μ] (frame 0, at E) [N, N·m] for ``duration`` [s] from now (InputError naming
        the field beyond :attr:`impulse_limits`)."""
        self.impulses = [i for i in self.impulses if i.end > self.t + 1e-12]
        wrench, duration = check_impulse(wrench, duration, self.impulse_limits, len(self.impulses))
        self.impulses.append(ScheduledWrench(wrench, self.t, self.t + duration))

    def wrench(self):
        """Total external wrench at the current time (None if zero)."""
        if not self.impulses and not self._base_wrench:
            return None
        self.impulses = [i for i in self.impulses if i.end > self.t + 1e-12]
        total = np.array(self.plant.model.wrench, dtype=float)
        for imp in self.impulses:
            if imp.start <= self.t + 1e-12:
                total = total + imp.wrench
        return total if total.any() else None

    def advance(self, duration):
        """Integrate round(duration / dt) steps (at least one); :class:`SimulationFault` at the
        first step that leaves the valid range (the state stays the last valid one)."""
        if self.fault is not None:
            raise SimulationFault(self.fault)
        n2 = 2 * self.plant.n
        for _ in range(max(1, int(round(duration / self.plant.dt)))):
            x = self.plant.step(self.x, self.tau, self.wrench())
            if not np.abs(x[n2:]).max() <= self.max_speed:     # NaN fails too
                self.fault = speed_fault(self.plant.model, x[n2:], self.max_speed, self.t + self.plant.dt,
                                         self.plant.dt)
                raise SimulationFault(self.fault)
            self.x = x
            self.steps += 1
            self.t = self.steps * self.plant.dt

    def sample(self):
        """(q, q̇, q_m, q̇_m) at the current time, copies."""
        n = self.plant.n
        x = self.x
        return x[:n].copy(), x[2 * n:3 * n].copy(), x[n:2 * n].copy(), x[3 * n:].copy()

    def efforts(self):
        """(link joint torque K W (q_m − W q) transmitted by the spring, motor command τ_m) [N·m]."""
        n = self.plant.n
        q, q_m = self.x[:n], self.x[n:2 * n]
        m = self.plant.model
        tau = self.tau(self.x) if callable(self.tau) else self.tau.copy()
        return m.k * m.W * (q_m - m.W * q), tau


def speed_fault(model, velocities, max_speed, t, dt):
    """Message for the first of ``velocities`` ([q̇; q̇_m] (2n,)) beyond ``max_speed`` or not finite."""
    n, bad = model.n, ~(np.abs(velocities) <= max_speed)
    if bad.any():
        k = int(np.argmax(bad))
        value = velocities[k]
        what = (f"|velocity| of {model.joint_names[k % n]}{'_motor' if k >= n else ''} "
                + ("is not finite" if not np.isfinite(value) else f"= {abs(value):.4g} is above {max_speed:.4g}"))
    else:
        what = f"a velocity is not finite or above {max_speed:.4g}"
    return (f"state: the simulation left its valid range at t={t:.4f} s: {what} "
            f"(the valid speed of the {dt * 1e3:g} ms step, {MAX_MOTION_PER_STEP:g} rad or m per step)")

"""A plant with a clock: zero-order-held motor commands (or a continuous law) and scheduled impulses."""
import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_vector
from .plant import ImpulseLimits, ScheduledWrench, check_impulse


class Simulator:
    """A plant with a clock, a zero-order-held motor torque command and scheduled impulses.

    ``advance(duration)`` integrates whole steps; the command and impulses are set between calls.
    ``impulse_limits`` (:class:`ImpulseLimits`) bounds the impulses.
    """

    def __init__(self, plant, x0, tau0=None, impulse_limits=ImpulseLimits()):
        self.plant = plant
        self.impulse_limits = impulse_limits
        self.x0 = finite_vector(x0, 4 * plant.n, "x0")
        self.tau0 = np.zeros(plant.n) if tau0 is None else finite_vector(tau0, plant.n, "tau0")
        self._base_wrench = bool(np.any(plant.model.wrench))
        self.reset()

    def reset(self):
        """Back to x0 at t = 0 with the initial command and no impulses."""
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
        """Integrate round(duration / dt) steps (at least one)."""
        for _ in range(max(1, int(round(duration / self.plant.dt)))):
            self.x = self.plant.step(self.x, self.tau, self.wrench())
            self.steps += 1
            self.t = self.steps * self.plant.dt
        if not np.all(np.isfinite(self.x)):
            raise InputError(f"state: simulation diverged at t={self.t:.4f} s (step too large or unstable gains)")

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

"""Flexible-joint plant (2.1) with friction (4.3)-(4.4): fixed-step integration.

Thesis: T.T. Do (2021). State x = [q; q_m; q̇; q̇_m] (4n,), link q [rad or m], motor q_m after the
gear [rad]. Dynamics (2.1) with the viscous + Coulomb friction of (4.3)-(4.4):

    M(q) q̈ + C q̇ + g(q) = τ_s − D q̇ − D_c sign(q̇) + Jᵀ(q) τ_ext,     τ_s = −K W (W q − q_m)
    B q̈_m = τ_m − D_m q̇_m − D_c,m sign(q̇_m) + K (W q − q_m)

The link row is solved by Pinocchio's ABA with the spring torque τ_s, the friction and the wrench
torque as applied joint force (gravity and the tool are in ``model.pin``).

Integrator: classical 4th-order Runge-Kutta with a fixed step ``dt`` (default 1/4000 s, 4 kHz).
Inputs are held constant over each step (zero-order hold): the motor torque command (changed by
the caller between steps, e.g. every 1/1000 s) and the external wrench (model.wrench plus an
active impulse, evaluated at the start of the step). A command may instead be a control law
τ_m(x) (e.g. :class:`SetpointLaw`), evaluated at every Runge-Kutta stage: the law then acts
continuously, as in the thesis' ODE set-up of the validation simulation (ch. 2.4.3), instead of
being held over the step.

Coulomb friction: on the motor side (diagonal, one rotor per joint) stiction is resolved exactly
per step: a motor whose velocity changes sign within a step is stopped at zero velocity, and at
zero velocity the Coulomb torque takes the value in [−D_c,m, D_c,m] that keeps it at rest, or
±D_c,m when the net torque exceeds it (break-away). A plain sign() would make the velocity chatter
around zero at every reversal. On the link side, D_c sign(q̇) with sign(0) = 0 (the coupled stick
problem is not solved; the bundled robots have no link Coulomb friction).

Energy (for drift checks, friction and inputs off): E = ½ q̇ᵀ M q̇ + ½ q̇_mᵀ B q̇_m
+ ½ (W q − q_m)ᵀ K (W q − q_m) + P_g(q) (A I-11), (A I-13) [J].
"""
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..core.errors import InputError
from ..core.validation import finite_array, finite_vector
from ..flexible_joint.linear_model import motor_equilibrium, setpoint_reference, static_compensation
from ..robot.model import create_data, ee_jacobian

DEFAULT_DT = 1.0 / 4000.0


@dataclass(frozen=True)
class ScheduledWrench:
    """External wrench [f; μ] (frame 0, at the tool point E) [N, N·m] active for start ≤ t < end [s]."""
    wrench: np.ndarray
    start: float
    end: float


class FlexibleJointPlant:
    """Fixed-step RK4 integrator of (2.1) + (4.3)-(4.4) for a :class:`FlexibleJointModel`.

    ``friction=False`` removes viscous and Coulomb friction on both sides (energy checks).
    Holds its own Pinocchio data: one plant per thread.
    """

    def __init__(self, model, dt=DEFAULT_DT, friction=True):
        if not (np.isfinite(dt) and 0 < dt <= 0.5e-3):
            raise InputError(f"dt: integration step must be in (0, 0.0005] s (>= 2 kHz), got {dt}")
        self.model = model
        self.dt = float(dt)
        self.friction = bool(friction)
        self.data = create_data(model)
        n = model.n
        self._W, self._k = np.array(model.W), np.array(model.k)
        self._B = np.array(model.B)
        self._inv_B = 1.0 / self._B
        zero = np.zeros(n)
        self._d_f, self._d_c, self._d_fm, self._d_cm = (
            (np.array(model.d_f), np.array(model.d_c), np.array(model.d_fm), np.array(model.d_cm))
            if friction else (zero, zero, zero, zero))
        # Terms that are zero for every joint are skipped in derivative() (it runs 4x per step).
        self._link_friction = bool(self._d_f.any() or self._d_c.any())
        self._motor_coulomb = bool(self._d_cm.any())

    @property
    def n(self):
        return self.model.n

    def derivative(self, x, tau_m, wrench=None):
        """ẋ of (2.1) + (4.3)-(4.4) at state x for motor torque τ_m (n,) [N·m] — or a law τ_m(x)
        evaluated here — and wrench (6,) or None."""
        n = self.n
        if callable(tau_m):
            tau_m = tau_m(x)
        q, q_m, qd, qd_m = x[:n], x[n:2 * n], x[2 * n:3 * n], x[3 * n:]
        spring = self._k * (self._W * q - q_m)
        tau_link = -self._W * spring
        if self._link_friction:
            tau_link -= self._d_f * qd + self._d_c * np.sign(qd)
        if wrench is not None:
            tau_link += ee_jacobian(self.model, self.data, q).T @ wrench
        out = np.empty(4 * n)
        out[:n], out[n:2 * n] = qd, qd_m
        out[2 * n:3 * n] = pin.aba(self.model.pin, self.data, q, qd, tau_link)
        net = tau_m - self._d_fm * qd_m + spring
        if self._motor_coulomb:
            coulomb = self._d_cm * np.sign(qd_m)
            stuck = qd_m == 0.0
            if stuck.any():   # at rest: the static friction that keeps it there, up to ±D_c,m
                coulomb[stuck] = np.minimum(np.maximum(net[stuck], -self._d_cm[stuck]), self._d_cm[stuck])
            net -= coulomb
        out[3 * n:] = net * self._inv_B
        return out

    def step(self, x, tau_m, wrench=None):
        """One RK4 step of length dt with τ_m and the wrench held constant (+ motor stiction rule)."""
        h = self.dt
        k1 = self.derivative(x, tau_m, wrench)
        k2 = self.derivative(x + 0.5 * h * k1, tau_m, wrench)
        k3 = self.derivative(x + 0.5 * h * k2, tau_m, wrench)
        k4 = self.derivative(x + h * k3, tau_m, wrench)
        new = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        n = self.n
        reversed_ = (x[3 * n:] * new[3 * n:] < 0.0) & (self._d_cm > 0.0)
        new[3 * n:][reversed_] = 0.0
        return new

    def energy(self, x):
        """Total mechanical energy [J]: link + rotor kinetic, spring and gravity potential."""
        n = self.n
        q, q_m, qd, qd_m = x[:n], x[n:2 * n], x[2 * n:3 * n], x[3 * n:]
        defl = self._W * q - q_m
        return (pin.computeKineticEnergy(self.model.pin, self.data, q, qd) + 0.5 * qd_m @ (self._B * qd_m)
                + 0.5 * defl @ (self._k * defl) + pin.computePotentialEnergy(self.model.pin, self.data, q))


@dataclass(frozen=True)
class ImpulseLimits:
    """Bounds on :meth:`Simulator.apply_impulse`: force magnitude |f| [N], moment magnitude |μ|
    [N·m], duration [s], impulses active at once. The defaults are far above a hand or hammer
    impact on an arm (hundreds of N for milliseconds) and far below what breaks the integration."""
    force: float = 1.0e4
    moment: float = 1.0e3
    duration: float = 60.0
    active: int = 32


def check_impulse(wrench, duration, limits, active):
    """(wrench (6,), duration [s]) of an impulse request checked against :class:`ImpulseLimits`
    with ``active`` impulses already running: InputError naming the field (every simulator)."""
    wrench = finite_vector(wrench, 6, "wrench")
    duration = float(finite_array(duration, "duration", ()))
    if duration <= 0:
        raise InputError(f"duration: must be > 0 s, got {duration:g}")
    if duration > limits.duration:
        raise InputError(f"duration: {duration:g} s is longer than the limit of {limits.duration:g} s")
    for part, size, limit, unit in (("force", np.linalg.norm(wrench[:3]), limits.force, "N"),
                                    ("moment", np.linalg.norm(wrench[3:]), limits.moment, "N m")):
        if size > limit:
            raise InputError(f"wrench: {part} magnitude {size:g} {unit} is above the limit of {limit:g} {unit}")
    if active >= limits.active:
        raise InputError(f"wrench: {limits.active} impulses are already active (limit); wait until one ends")
    return wrench, duration


class SetpointLaw:
    """The set-point PD law (2.2)-(2.3) about ``q_d`` as a function of the state:
    τ_m(x) = r − K_P q_m − K_D q̇_m with the constant r of
    :func:`~flexmodal_ros.flexible_joint.linear_model.setpoint_reference` [N·m]; pass it as the command of a
    :class:`Simulator` (:meth:`Simulator.set_law`) or to :meth:`FlexibleJointPlant.derivative`."""

    def __init__(self, model, q_d, data=None):
        data = create_data(model) if data is None else data
        self.q_d = finite_vector(q_d, model.n, "q_d")
        self._n = model.n
        self._r = setpoint_reference(model, data, self.q_d)
        self._kp, self._kd = np.array(model.kp), np.array(model.kd)

    def __call__(self, x):
        n = self._n
        return self._r - self._kp * x[n:2 * n] - self._kd * x[3 * n:]


def rest_state(model, q, data=None, field="q"):
    """Static equilibrium at link position q: state [q; q_m^d (2.3); 0; 0] and the holding motor
    torque W⁻¹(g(q) − Jᵀ(q) τ_ext) of (2.2)."""
    data = create_data(model) if data is None else data
    q = finite_vector(q, model.n, field)
    x = np.concatenate([q, motor_equilibrium(model, data, q), np.zeros(2 * model.n)])
    return x, static_compensation(model, data, q) / model.W

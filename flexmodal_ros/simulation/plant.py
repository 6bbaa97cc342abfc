"""Flexible-joint plant (2.1) with friction (4.3)-(4.4): fixed-step integration and closed loops.

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
from ..flexible_joint.linear_model import motor_equilibrium, static_compensation
from ..robot.model import create_data, ee_jacobian
from ..core.validation import finite_array, finite_vector

DEFAULT_DT = 1.0 / 4000.0


@dataclass(frozen=True)
class Impulse:
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
        self.impulses.append(Impulse(wrench, self.t, self.t + duration))

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


class SetpointLaw:
    """The set-point PD law (2.2)-(2.3) about ``q_d`` as a function of the state:
    τ_m(x) = r − K_P q_m − K_D q̇_m with the constant r of
    :func:`~flexmodal_ros.flexible_joint.linear_model.setpoint_reference` [N·m]; pass it as the command of a
    :class:`Simulator` (:meth:`Simulator.set_law`) or to :meth:`FlexibleJointPlant.derivative`."""

    def __init__(self, model, q_d, data=None):
        from ..flexible_joint.linear_model import setpoint_reference
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


@dataclass
class ClosedLoopResult:
    """Logged closed loop at the control rate: t (N,) [s]; link q, reference q_ref, motor q_m and
    commanded τ_m (N, n); saturated (N, n) bool."""
    t: np.ndarray
    q: np.ndarray
    q_ref: np.ndarray
    q_m: np.ndarray
    tau: np.ndarray
    saturated: np.ndarray

    @property
    def tracking_error(self):
        """q_ref − q (N, n) [rad or m]."""
        return self.q_ref - self.q

    def summary(self):
        """max / rms link tracking error [rad] over all joints and samples, peak |τ_m| per joint [N·m],
        number of saturated cycles."""
        e = self.tracking_error
        return {"max_tracking_error_rad": float(np.abs(e).max()),
                "rms_tracking_error_rad": float(np.sqrt(np.mean(e ** 2))),
                "peak_motor_torque": np.abs(self.tau).max(axis=0).tolist(),
                "saturated_cycles": int(self.saturated.any(axis=1).sum())}


def run_closed_loop(model, times, positions, duration, use_feedforward=True, control_rate_hz=1000.0,
                    dt=DEFAULT_DT, command_delay_cycles=0, controller=None, initial_state=None):
    """Controller (:class:`~flexmodal_ros.control.law.FailSafeController`) + plant in one loop, no ROS.

    The robot starts at rest in the equilibrium (2.3) of the first waypoint, held by (2.2). At each
    control instant t_k = k / control_rate_hz the controller sees the exact state and its command
    is applied (zero-order hold) from t_{k + command_delay_cycles} on (0 = no transport delay; the
    ROS loop has about 1). The waypoint reference (``times`` [s], ``positions`` (m, n)) starts at
    t = 0; the run lasts ``duration`` [s]. Returns a :class:`ClosedLoopResult`. The default
    controller checks no speed or acceleration limits (``SafetyLimits(velocity_scale=inf)``): an
    offline run may ask more of the model than the robot allows (the thesis LWR4 motion needs
    1.53x the URDF speed limit of joint 6); pass ``controller`` for the node's checks.
    ``initial_state``: (state [q; q_m; q̇; q̇_m] (4n,), motor torque held before the first command)
    instead of the equilibrium of the first waypoint (e.g. the plant at rest under a controller
    whose model differs from it).
    """
    from ..control.law import FailSafeController, JointSample, SafetyLimits
    positions = finite_array(positions, "positions", (None, model.n))
    period = 1.0 / control_rate_hz
    ratio = period / dt
    if abs(ratio - round(ratio)) > 1e-9:
        raise InputError(f"control_rate_hz: 1/control_rate_hz must be a multiple of dt={dt:g} s")
    ctrl = controller or FailSafeController(model, use_feedforward, limits=SafetyLimits(velocity_scale=np.inf))
    x0, hold = rest_state(model, positions[0]) if initial_state is None else initial_state
    sim = Simulator(FlexibleJointPlant(model, dt), np.asarray(x0, float), np.asarray(hold, float))
    pending = [hold] * command_delay_cycles
    log = {k: [] for k in ("t", "q", "q_ref", "q_m", "tau", "saturated")}
    for k in range(int(round(duration / period)) + 1):
        q, qd, q_m, qd_m = sim.sample()
        ctrl.update_state(JointSample(sim.t, q, qd, q_m, qd_m), sim.t)
        if k == 0:
            ctrl.set_trajectory(times, positions)
        cmd = ctrl.compute()
        for key, value in (("t", sim.t), ("q", q), ("q_ref", cmd.q_ref), ("q_m", q_m), ("tau", cmd.tau),
                           ("saturated", cmd.saturated)):
            log[key].append(value)
        pending.append(cmd.tau)
        sim.set_command(pending.pop(0))
        sim.advance(period)
    return ClosedLoopResult(**{k: np.array(v) for k, v in log.items()})


def simulate_setpoint(model, q_d, duration, impulses=(), dt=DEFAULT_DT):
    """Plant (2.1) under the set-point law (2.2)-(2.3) about q_d, evaluated at every step (the
    thesis' validation simulation, ch. 2.4.3 / App. I.2). Starts at rest in the equilibrium (2.3).

    ``impulses``: (wrench (6,) [N, N·m] at E in frame 0, start [s], duration [s]) triples.
    Returns (t (N+1,) [s], states (N+1, 4n)) with x = [q; q_m; q̇; q̇_m].
    """
    from ..flexible_joint.linear_model import setpoint_motor_torque
    plant = FlexibleJointPlant(model, dt)
    x0, hold = rest_state(model, q_d, plant.data)
    sim = Simulator(plant, x0, hold)
    pending = sorted(impulses, key=lambda imp: imp[1])
    n = model.n
    ts, xs = [0.0], [sim.x.copy()]
    for _ in range(int(round(duration / dt))):
        while pending and pending[0][1] <= sim.t + 1e-12:
            wrench, _, length = pending.pop(0)
            sim.apply_impulse(wrench, length)
        x = sim.x
        sim.set_command(setpoint_motor_torque(model, plant.data, q_d, x[n:2 * n], x[3 * n:]))
        sim.advance(dt)
        ts.append(sim.t)
        xs.append(sim.x.copy())
    return np.array(ts), np.array(xs)


# The thesis LWR4 motion (T = 3 s) needs up to 1.53x the URDF speed limits (joint 6: 3.01 vs
# 1.96 rad/s): controllers that check rates (the ROS node) run it with velocity_scale = 1.6.
THESIS_VELOCITY_SCALE = 1.6


def thesis_trajectory(model):
    """LWR4 point-to-point reference of thesis §4.4.5 (notes_003 §5): waypoints q0 → qf in T = 3 s.

    q0 = [−π/4, −π/4, π/4, π/4, −π/4, −2π/3, π/4], qf = [5π/6, 2π/3, −5π/6, −2π/3, 3π/4, π/2, −3π/4]
    [rad]; joined by the 9th-order profile (4.29)-(4.30). Returns (times (2,), positions (2, 7)).
    """
    if model.n != 7:
        raise InputError(f"robot: the thesis trajectory is for the 7-joint KUKA LWR4, {model.name} has {model.n}")
    pi = np.pi
    q0 = [-pi / 4, -pi / 4, pi / 4, pi / 4, -pi / 4, -2 * pi / 3, pi / 4]
    qf = [5 * pi / 6, 2 * pi / 3, -5 * pi / 6, -2 * pi / 3, 3 * pi / 4, pi / 2, -3 * pi / 4]
    return np.array([0.0, 3.0]), np.array([q0, qf])


def save_closed_loop_plot(results, path):
    """PNG of link tracking errors [rad] and motor torques [N·m] vs time for labelled
    :class:`ClosedLoopResult` s (``results``: {label: result}); one column per result."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(results), figsize=(6 * len(results), 7), squeeze=False, sharex=True)
    for col, (label, res) in enumerate(results.items()):
        axes[0, col].plot(res.t, res.tracking_error)
        axes[0, col].set_title(f"{label}: link tracking error q^d − q")
        axes[0, col].set_ylabel("rad")
        axes[1, col].plot(res.t, res.tau)
        axes[1, col].set_title(f"{label}: motor torque τ_m")
        axes[1, col].set_ylabel("N·m")
        axes[1, col].set_xlabel("t [s]")
        axes[1, col].legend([f"joint {j + 1}" for j in range(res.tau.shape[1])], fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

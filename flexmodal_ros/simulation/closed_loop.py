"""Controller + plant in one loop without ROS: one driver (:func:`run_closed_loop`) over any plant
that offers the :class:`LoopPlant` interface (the RK4 plant (2.1) here, MuJoCo in
:mod:`flexmodal_ros.export.mujoco_plant`), the thesis' set-point validation run and its trajectory.
"""
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..control import FailSafeController, JointSample, SafetyLimits
from ..core.errors import InputError
from ..core.validation import finite_array
from ..flexible_joint.linear_model import setpoint_motor_torque
from .plant import DEFAULT_DT, FlexibleJointPlant, rest_state
from .simulator import Simulator


class LoopPlant(Protocol):
    """What :func:`run_closed_loop` drives: time ``t`` [s], ``state()`` → (q, q̇, q_m, q̇_m) in the
    model's coordinates, ``command(tau_m)`` motor torques [N·m] held until the next call,
    ``advance(period)``, ``hold`` the torques that hold the initial state, ``step`` [s] the
    integration step the control period must be a multiple of (``step_name`` names it)."""
    t: float
    hold: np.ndarray
    step: float
    step_name: str

    def state(self): ...

    def command(self, tau_m): ...

    def advance(self, period): ...


class SimulatedPlant:
    """The RK4 plant (2.1) as a :class:`LoopPlant`: at rest in the equilibrium (2.3) of ``q0``, held
    by (2.2); ``initial_state``: (state [q; q_m; q̇; q̇_m] (4n,), motor torque held before the first
    command) instead (e.g. the plant at rest under a controller whose model differs from it)."""
    step_name = "dt"

    def __init__(self, model, q0, dt=DEFAULT_DT, initial_state=None):
        x0, hold = rest_state(model, q0) if initial_state is None else initial_state
        self.hold = np.asarray(hold, float)
        self.simulator = Simulator(FlexibleJointPlant(model, dt), np.asarray(x0, float), self.hold)
        self.step = dt

    @property
    def t(self):
        return self.simulator.t

    def state(self):
        return self.simulator.sample()

    def command(self, tau_m):
        self.simulator.set_command(tau_m)

    def advance(self, period):
        self.simulator.advance(period)


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
                    dt=DEFAULT_DT, command_delay_cycles=0, controller=None, plant=None):
    """Controller (:class:`~flexmodal_ros.control.FailSafeController`) + plant in one loop, no ROS.

    The robot starts at rest in the equilibrium (2.3) of the first waypoint, held by (2.2). At each
    control instant t_k = k / control_rate_hz the controller sees the exact state and its command
    is applied (zero-order hold) from t_{k + command_delay_cycles} on (0 = no transport delay; the
    ROS loop has about 1). The waypoint reference (``times`` [s], ``positions`` (m, n)) starts at
    t = 0; the run lasts ``duration`` [s]. Returns a :class:`ClosedLoopResult`. The default
    controller checks no speed or acceleration limits (``SafetyLimits(velocity_scale=inf)``): an
    offline run may ask more of the model than the robot allows (the thesis LWR4 motion needs
    1.53x the URDF speed limit of joint 6); pass ``controller`` for the node's checks. ``plant``:
    any :class:`LoopPlant` (default: the RK4 plant (2.1) with step ``dt``, :class:`SimulatedPlant`;
    MuJoCo: :class:`flexmodal_ros.export.mujoco_plant.MujocoLoopPlant`).
    """
    positions = finite_array(positions, "positions", (None, model.n))
    plant = plant if plant is not None else SimulatedPlant(model, positions[0], dt)
    period = 1.0 / control_rate_hz
    ratio = period / plant.step
    if abs(ratio - round(ratio)) > 1e-9:
        raise InputError(f"control_rate_hz: 1/control_rate_hz must be a multiple of {plant.step_name}={plant.step:g} s")
    ctrl = controller or FailSafeController(model, use_feedforward, limits=SafetyLimits(velocity_scale=np.inf))
    pending = [plant.hold] * command_delay_cycles
    log = {k: [] for k in ("t", "q", "q_ref", "q_m", "tau", "saturated")}
    for k in range(int(round(duration / period)) + 1):
        t = plant.t
        q, qd, q_m, qd_m = plant.state()
        ctrl.update_state(JointSample(t, q, qd, q_m, qd_m), t)
        if k == 0:
            ctrl.set_trajectory(times, positions)
        cmd = ctrl.compute()
        for key, value in (("t", t), ("q", q), ("q_ref", cmd.q_ref), ("q_m", q_m), ("tau", cmd.tau),
                           ("saturated", cmd.saturated)):
            log[key].append(value)
        pending.append(cmd.tau)
        plant.command(pending.pop(0))
        plant.advance(period)
    return ClosedLoopResult(**{k: np.array(v) for k, v in log.items()})


def simulate_setpoint(model, q_d, duration, impulses=(), dt=DEFAULT_DT):
    """Plant (2.1) under the set-point law (2.2)-(2.3) about q_d, evaluated at every step (the
    thesis' validation simulation, ch. 2.4.3 / App. I.2). Starts at rest in the equilibrium (2.3).

    ``impulses``: (wrench (6,) [N, N·m] at E in frame 0, start [s], duration [s]) triples.
    Returns (t (N+1,) [s], states (N+1, 4n)) with x = [q; q_m; q̇; q̇_m].
    """
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
    import matplotlib  # deferred: matplotlib (plots only)
    matplotlib.use("Agg")
    # deferred: matplotlib
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

"""Calibration plants without ROS: the suite's RK4 plant or the exported MuJoCo robot, each driven
by the suite's controller (:class:`~flexmodal_ros.control.failsafe.FailSafeController`, the law and
fail-safe policy of the ``feedforward_pd_controller`` node) at the control rate.

A plant answers what the calibration loop (:mod:`.campaign`) asks of any robot:
:meth:`ClosedLoopPlant.move_to` (a C⁴ joint trajectory (4.29)-(4.30) within the URDF limits,
timed for the controller's speed and acceleration limits, then HOLD), :meth:`~ClosedLoopPlant.settle`,
:meth:`~ClosedLoopPlant.excite_and_record` (a motor excitation through the controller's
:meth:`~flexmodal_ros.control.failsafe.FailSafeController.excite`, the joint positions recorded at every
control cycle as /joint_states would give them, optionally with encoder quantization and noise:
:class:`~flexmodal_ros.oma.impact.EncoderNoise`) and :meth:`~ClosedLoopPlant.hold_position`.

Timing: at each control instant t_k = k/rate the controller sees the plant's exact state and its
command acts from t_k (``command_delay_cycles`` = 0, a lockstep loop: the sampled-data model
``zoh``) or one period later (1, a ROS loop: ``zoh-delay``) — :attr:`ClosedLoopPlant.loop`.
The hidden-truth plant has its own parameters (``true_model``); the controller only knows the
nominal ones (``controller_model``). Coulomb friction is removed from the plant unless ``coulomb``
(the AMA (2.8) is viscous; see docs/calibration.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..control import FailSafeController, JointSample, Mode, SafetyLimits
from ..control.excitation import MotorExcitation
from ..core.errors import InputError
from ..flexible_joint.linear_model import linearize, state_matrix
from ..oma.impact import MOTOR_SUFFIX, EncoderNoise, gear_ratios
from ..oma.record import Record, make_record
from ..robot.model import create_data, with_overrides
from ..robot.trajectory import ETA_PEAKS
from ..simulation import FlexibleJointPlant, Simulator, rest_state
from .eigen_sensitivity import LoopModel
from ..core.validation import shown

CHANNELS = ("both", "motor", "link")
ENGINES = ("sim", "mujoco")
MIN_MOVE_S = 0.5              # shortest joint move [s]
MOVE_MARGIN = 1.25            # moves are timed for 1/MOVE_MARGIN of the speed/acceleration limits
STEP_LIMIT = 1.5             # RK4 steps h |λ|max at most this (inside RK4's stability region)


@dataclass(frozen=True)
class PlantOptions:
    """``control_rate_hz`` controller and record rate [Hz]; ``command_delay_cycles`` 0 or 1 (default 1,
    as the ROS loop); ``dt`` integration step [s] (None: :func:`rk4_step`); ``noise`` an EncoderNoise or
    None; ``coulomb`` keep the YAML's Coulomb friction in the plant; ``channels`` both | motor |
    link positions recorded."""

    control_rate_hz: float = 1000.0
    command_delay_cycles: int = 1
    dt: float | None = None
    noise: EncoderNoise | None = None
    coulomb: bool = False
    channels: str = "both"

    def __post_init__(self):
        if self.command_delay_cycles not in (0, 1):
            raise InputError(f"command_delay_cycles: must be 0 or 1, got {self.command_delay_cycles}")
        if self.channels not in CHANNELS:
            raise InputError(f"channels: must be one of {', '.join(CHANNELS)}, got {shown(self.channels)}")
        if not (np.isfinite(self.control_rate_hz) and self.control_rate_hz > 0):
            raise InputError(f"control_rate_hz: must be > 0 Hz, got {self.control_rate_hz}")


def rk4_step(model, q, period) -> float:
    """Integration step [s]: ``period`` divided into the fewest (at least 2, i.e. >= 2 kHz at
    1 kHz) equal steps with h |λ|max <= STEP_LIMIT, λ the continuous closed loop's eigenvalues at q."""
    lin = linearize(model, create_data(model), q)
    radius = float(np.abs(np.linalg.eigvals(state_matrix(lin.M, lin.D, lin.K))).max())
    return period / max(2, int(np.ceil(period * radius / STEP_LIMIT)))


def move_duration(model, q_from, q_to, velocity_limit, acceleration_limit) -> float:
    """Duration [s] of a C⁴ rest-to-rest segment q_from → q_to that keeps every joint below
    1/MOVE_MARGIN of its speed and acceleration limits (peaks ETA_PEAKS·|Δq|/T, ·|Δq|/T²)."""
    dq = np.abs(np.asarray(q_to, float) - np.asarray(q_from, float))
    by_speed = ETA_PEAKS[0] * dq / velocity_limit
    by_acceleration = np.sqrt(ETA_PEAKS[1] * dq / acceleration_limit)
    return max(MIN_MOVE_S, MOVE_MARGIN * float(max(by_speed.max(), by_acceleration.max())))


def channel_names(model, channels: str) -> list:
    """Recorded channels: link joints, then ``<joint>_motor`` (``both``), or one of the two sets."""
    link = list(model.joint_names)
    motor = [j + MOTOR_SUFFIX for j in model.joint_names]
    return {"both": link + motor, "link": link, "motor": motor}[channels]


class ClosedLoopPlant:
    """Base of the offline plants (module docstring). Subclasses provide ``_make_simulator``,
    ``_read`` (→ model coordinates q, q̇, q_m, q̇_m) and ``_command`` (τ_m → the simulator)."""

    engine = ""

    def __init__(self, true_model, controller_model, q0, options: PlantOptions = PlantOptions(),
                 limits: SafetyLimits = SafetyLimits()):
        if true_model.joint_names != controller_model.joint_names:
            raise InputError("true-params: the true model's joints differ from the calibrated robot's")
        self.options = options
        self.true_model = true_model if options.coulomb else with_overrides(true_model, d_c=0.0, d_cm=0.0)
        self.model = controller_model
        self.period = 1.0 / options.control_rate_hz
        # gain changes checked on the loop sampled with the command one period late; a lockstep
        # plant (no delay) only continuous (its experiment gains: choose_experiment_gains, on its zoh loop)
        self.ctrl = FailSafeController(controller_model, use_feedforward=True, limits=limits,
                                       controller_rate_hz=options.control_rate_hz
                                       if options.command_delay_cycles == 1 else None)
        self.channels = channel_names(controller_model, options.channels)
        self._gear = self._channel_gears()
        self._records = 0
        self._make_simulator(np.asarray(q0, float))
        self._pending = []
        self.cycles = 0
        self.run(self.period)                      # first sample: WAITING → HOLD at the start position

    # -- what subclasses provide
    def _make_simulator(self, q0):
        raise NotImplementedError

    def _read(self):
        raise NotImplementedError

    def _command(self, tau):
        raise NotImplementedError

    # -- the control loop
    @property
    def t(self) -> float:
        return self.sim.t

    @property
    def loop(self) -> LoopModel:
        """The sampled-data loop this plant runs (module docstring)."""
        return LoopModel(self.options.control_rate_hz, "zoh" if self.options.command_delay_cycles == 0 else "zoh-delay")

    @property
    def sample_rate_hz(self) -> float:
        return self.options.control_rate_hz

    @property
    def channels_mode(self) -> str:
        return self.options.channels

    def run(self, duration, log=None):
        """Control cycles for ``duration`` [s]; ``log`` (list) receives (t, q, q_m) of each cycle."""
        for _ in range(max(1, int(round(duration / self.period)))):
            q, qd, q_m, qd_m = self._read()
            t = self.sim.t
            self.ctrl.update_state(JointSample(t, q, qd, q_m, qd_m), t)
            command = self.ctrl.compute()
            if log is not None:
                log.append((t, q.copy(), q_m.copy()))
            tau = command.tau if command is not None else None
            if self.options.command_delay_cycles:
                self._pending.append(tau)
                tau = self._pending.pop(0) if len(self._pending) > 1 else None
            if tau is not None:
                self._command(tau)
            self.sim.advance(self.period)
            self.cycles += 1
        self.ctrl.events.clear()

    def measured(self):
        """(q, q̇, q_m, q̇_m) in model coordinates, copies."""
        return tuple(np.array(v) for v in self._read())

    def move_to(self, q_target, margin_s: float = 0.05) -> float:
        """Move along a C⁴ segment to ``q_target`` (URDF limits checked by the controller), timed by
        :func:`move_duration`; returns once the trajectory is finished (controller HOLD). Returns
        the move's duration [s]."""
        q_now = self.measured()[0]
        T = move_duration(self.model, q_now, q_target, self.ctrl.velocity_limit, self.ctrl.acceleration_limit)
        self.ctrl.set_trajectory([0.0, T], [q_now, np.asarray(q_target, float)])
        self.run(T + margin_s)
        if self.ctrl.mode != Mode.HOLD:
            raise InputError(f"move: the controller is {self.ctrl.mode.value} after the move")
        return T

    def settle(self, duration):
        self.run(duration)

    def set_gains(self, kp, kd):
        """The controller's gains from now on (checked: stable closed loop at the measured position)."""
        self.ctrl.configure(kp=kp, kd=kd)

    def hold_position(self):
        """The set-point the controller holds (HOLD) [rad or m]."""
        return None if self.ctrl._hold_q is None else np.array(self.ctrl._hold_q)

    def excite_and_record(self, excitation, before: float, after: float) -> Record:
        """Record ``before`` [s] of rest, the ``excitation`` (a MotorExcitation through the
        controller, or a tool-point :class:`~flexmodal_ros.oma.impact.Impulse` on the plant; its
        ``start`` is ignored: it starts at the first cycle after ``before``) and ``after`` [s] of
        free decay (from its end); returns the :class:`~flexmodal_ros.oma.record.Record` of the
        chosen channels (noise applied) with ``excitation_end`` = the end of the input actually
        applied."""
        log = []
        self.run(before, log)
        start = self.sim.t
        if isinstance(excitation, MotorExcitation):
            self.ctrl.excite(excitation.shifted(start), start_now=False)
            end = start + excitation.duration + self.options.command_delay_cycles * self.period
            described = excitation.shifted(start).to_dict()
        else:
            self.sim.apply_impulse(excitation.wrench, excitation.duration)
            end = start + excitation.duration
            described = {"kind": "impulse", "force": excitation.force, "axis": excitation.axis, "start": start,
                         "duration": excitation.duration}
        self.run(excitation.duration + after, log)
        t = np.array([row[0] for row in log])
        q = np.array([row[1] for row in log])
        q_m = np.array([row[2] for row in log])
        values = {"both": np.hstack([q, q_m]), "link": q, "motor": q_m}[self.options.channels]
        meta = {"source": f"calibration plant ({self.engine})", "excitation": described}
        if self.options.noise is not None:
            noise = self.options.noise
            values = EncoderNoise(noise.counts_per_rev, noise.std, noise.seed + self._records).apply(values, self._gear)
            meta["noise"] = {"counts_per_rev": noise.counts_per_rev, "std": noise.std}
        self._records += 1
        return make_record(t, values, self.channels, excitation_end=end, metadata=meta)

    def _channel_gears(self):
        """Gear ratio per recorded channel for the encoder quantization (motor encoders sit before
        the gear: N where the YAML gives it, else 1; link channels 1)."""
        ratios = gear_ratios(self.model)
        motor = np.ones(self.model.n) if ratios is None else ratios
        link = np.ones(self.model.n)
        return {"both": np.concatenate([link, motor]), "link": link, "motor": motor}[self.options.channels]


class SimPlant(ClosedLoopPlant):
    """The suite's RK4 plant (:class:`~flexmodal_ros.simulation.simulator.Simulator`)."""

    engine = "sim"

    def _make_simulator(self, q0):
        dt = self.options.dt or rk4_step(self.true_model, q0, self.period)
        ratio = self.period / dt
        if abs(ratio - round(ratio)) > 1e-9:
            raise InputError(f"dt: 1/control_rate_hz must be a multiple of the integration step {dt:g} s")
        x0, hold = rest_state(self.true_model, q0)
        self.sim = Simulator(FlexibleJointPlant(self.true_model, dt), x0, hold)

    def _read(self):
        return self.sim.sample()

    def _command(self, tau):
        self.sim.set_command(tau)


class MujocoPlant(ClosedLoopPlant):
    """The exported robot on MuJoCo (:class:`~flexmodal_ros.export.mujoco_plant.MujocoSimulator`),
    read through the ``deflection`` convention, commanded with W τ_m. Stepped by MuJoCo's RK4
    integrator at the step of :func:`rk4_step` (``options.dt`` to override): the export's
    first-order ``implicitfast`` adds numerical damping (+0.01 to +0.02 pp on kuka_lwr4's lowest
    modes at 1e-4 s, which biased d_fm by up to 12 %); RK4 at 2.5e-4 s matches the suite's plant
    to 1e-5 in ζ."""

    engine = "mujoco"

    def _make_simulator(self, q0):
        import mujoco                                                     # deferred: mujoco
        from ..export.convention import StateConvention                  # deferred: with mujoco
        from ..export.mujoco_plant import MujocoRobot, MujocoSimulator    # deferred: mujoco
        dt = self.options.dt or rk4_step(self.true_model, q0, self.period)
        ratio = self.period / dt
        if abs(ratio - round(ratio)) > 1e-9:
            raise InputError(f"dt: 1/control_rate_hz must be a multiple of the MuJoCo timestep {dt:g} s")
        robot = MujocoRobot.from_model(self.true_model, timestep=dt)
        robot.mj.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
        self.sim = MujocoSimulator(robot, q0)
        self._convention = StateConvention(self.true_model, "deflection")
        self._W = np.asarray(self.true_model.W, float)
        self._n = self.true_model.n

    def _read(self):
        x = self._convention.to_model_inplace(np.concatenate(self.sim.sample()))
        n = self._n
        return x[:n], x[n:2 * n], x[2 * n:3 * n], x[3 * n:]

    def _command(self, tau):
        self.sim.set_command(self._W * tau)


def make_plant(engine, true_model, controller_model, q0, options=PlantOptions(), limits=SafetyLimits()):
    """A :class:`SimPlant` (``engine`` "sim") or :class:`MujocoPlant` ("mujoco")."""
    if engine not in ENGINES:
        raise InputError(f"plant: must be one of {', '.join(ENGINES)} offline, got {shown(engine)}")
    cls = SimPlant if engine == "sim" else MujocoPlant
    return cls(true_model, controller_model, q0, options, limits)

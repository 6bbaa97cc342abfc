"""The exported robot on MuJoCo: state in exported coordinates, stepping, impulses, and the
continuous-time linearization of the closed loop (the independent-engine check of the AMA).

Coordinates are those of :mod:`flexmodal_ros.export.tree`: per flexible joint the motor joint
s_m = r q_m and the elastic joint s_e = q − s_m; the actuator of ``<joint>_motor`` takes the effort
on that joint, W τ_m [N m or N].

Linearization (:func:`closed_loop_state_matrix`): the suite's set-point law (2.2)-(2.3) closes the
loop on MuJoCo's forward dynamics; A = [[0, I], [∂q̈/∂x]] by central differences of ``qacc`` from
``mj_forward`` about the equilibrium (2.3), with Coulomb friction (frictionloss) and joint limits
disabled (the AMA is viscous, (2.8)-(2.14)). Its eigenvalues do not depend on the coordinates, so
they compare directly with the AMA's (2.13). ``mjd_transitionFD`` would linearize the *discrete*
step instead (an O(dt) difference, ~0.3 % here), which is why ``qacc`` is differentiated.
"""

import numpy as np

from ..core.errors import ConfigError
from ..flexible_joint.linear_model import motor_equilibrium, setpoint_reference, static_compensation
from ..robot.model import create_data
from ..simulation import ImpulseLimits, SimulationFault, check_impulse, run_closed_loop, speed_fault, valid_speed
from ..core.validation import finite_array, finite_vector
from .convention import StateConvention
from .mjcf import load_mujoco_model, write_mjcf
from .tree import MOTOR_SUFFIX, build_export


class MujocoRobot:
    """A compiled exported MJCF with the index maps of the flexible joints (URDF joint order).

    ``model``: the suite's :class:`FlexibleJointModel` (for W, gains, gravity compensation);
    ``mj``: mujoco.MjModel; ``motor_qpos``/``elastic_qpos``/``motor_dof``/``elastic_dof`` (n,);
    ``actuators`` (n,); ``ee_body`` body of the tool point E and ``ee_offset`` [m] in its frame.
    """

    def __init__(self, model, mj_model):
        # deferred: MuJoCo
        import mujoco

        self.model, self.mj = model, mj_model
        self.W = np.array(model.W, dtype=float)

        def joint_id(name):
            jid = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise ConfigError(f"mjcf: joint '{name}' missing (not an export of robot {model.name})")
            return jid

        motors = [joint_id(j + MOTOR_SUFFIX) for j in model.joint_names]
        elastic = [joint_id(j) for j in model.joint_names]
        self.motor_qpos = mj_model.jnt_qposadr[motors].copy()
        self.elastic_qpos = mj_model.jnt_qposadr[elastic].copy()
        self.motor_dof = mj_model.jnt_dofadr[motors].copy()
        self.elastic_dof = mj_model.jnt_dofadr[elastic].copy()
        self.actuators = np.array([mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_ACTUATOR, j + MOTOR_SUFFIX)
                                   for j in model.joint_names])
        if (self.actuators < 0).any() or mj_model.nq != mj_model.nv:
            raise ConfigError("mjcf: expected one motor actuator per <joint>_motor and hinge/slide joints only")
        frame = model.ee_frame
        self.ee_body = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_BODY, frame)
        if self.ee_body < 0:
            raise ConfigError(f"mjcf: body '{frame}' (end_effector_frame) missing")
        self.ee_offset = np.array(model.tool.com, dtype=float)

    @classmethod
    def from_model(cls, model, path=None, timestep=0.001):
        """Compile ``path`` (an exported MJCF) or, if None, export ``model`` on the fly."""
        mj_model = (load_mujoco_model(path) if path else
                    load_mujoco_model(xml=write_mjcf(build_export(model), timestep)))
        mj_model.opt.timestep = timestep
        return cls(model, mj_model)

    def exported_state(self, q, qd, q_m, qd_m):
        """(qpos, qvel) of link/motor coordinates (model units)."""
        qpos, qvel = np.zeros(self.mj.nq), np.zeros(self.mj.nv)
        s_m, v_m = np.asarray(q_m) / self.W, np.asarray(qd_m) / self.W
        qpos[self.motor_qpos], qpos[self.elastic_qpos] = s_m, np.asarray(q) - s_m
        qvel[self.motor_dof], qvel[self.elastic_dof] = v_m, np.asarray(qd) - v_m
        return qpos, qvel

    def model_state(self, qpos, qvel):
        """(q, q̇, q_m, q̇_m) of exported (qpos, qvel)."""
        s_m, v_m = qpos[self.motor_qpos], qvel[self.motor_dof]
        return s_m + qpos[self.elastic_qpos], v_m + qvel[self.elastic_dof], self.W * s_m, self.W * v_m


def closed_loop_state_matrix(robot, q_d, step=1e-6):
    """Continuous-time A (2nv x 2nv) of MuJoCo + set-point law (2.2) about q^d (central differences
    of ``qacc``, relative ``step``), and the equilibrium residual max |q̈| [rad/s² or m/s²]."""
    # deferred: MuJoCo
    import mujoco

    model, mj = robot.model, robot.mj
    data = mujoco.MjData(mj)
    saved = mj.opt.disableflags
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS | mujoco.mjtDisableBit.mjDSBL_LIMIT
    try:
        pdata = create_data(model)
        q_d = finite_vector(q_d, model.n, "q")
        r = setpoint_reference(model, pdata, q_d)
        qpos0, qvel0 = robot.exported_state(q_d, np.zeros(model.n), motor_equilibrium(model, pdata, q_d),
                                            np.zeros(model.n))

        def qacc(x):
            data.qpos[:], data.qvel[:] = x[:mj.nq], x[mj.nq:]
            q_m, qd_m = robot.W * data.qpos[robot.motor_qpos], robot.W * data.qvel[robot.motor_dof]
            data.ctrl[robot.actuators] = robot.W * (r - model.kp * q_m - model.kd * qd_m)
            mujoco.mj_forward(mj, data)
            return data.qacc.copy()

        x0 = np.concatenate([qpos0, qvel0])
        residual = float(np.abs(qacc(x0)).max())
        m = x0.size
        J = np.empty((mj.nv, m))
        for j in range(m):
            h = step * max(1.0, abs(x0[j]))
            e = np.zeros(m)
            e[j] = h
            J[:, j] = (qacc(x0 + e) - qacc(x0 - e)) / (2 * h)
    finally:
        mj.opt.disableflags = saved
    A = np.zeros((m, m))
    A[:mj.nv, mj.nv:] = np.eye(mj.nv)
    A[mj.nv:] = J
    return A, residual


class MujocoSimulator:
    """MuJoCo plant with a clock, a zero-order-held effort command and impulses; the interface of
    :class:`flexmodal_ros.simulation.Simulator`, in exported coordinates: ``sample()`` returns
    (s_e, ṡ_e, s_m, ṡ_m), ``set_command`` takes the motor-joint efforts W τ_m, ``efforts()`` the
    elastic-joint spring effort −k W² s_e and the applied efforts. Starts at rest in the
    equilibrium (2.3) of ``q0``, held by the static effort of (2.2)."""

    def __init__(self, robot, q0, impulse_limits=ImpulseLimits()):
        # deferred: MuJoCo
        import mujoco

        self.robot, self.mujoco, self.impulse_limits = robot, mujoco, impulse_limits
        model = robot.model
        self.data = mujoco.MjData(robot.mj)
        pdata = create_data(model)
        q0 = finite_vector(q0, model.n, "initial_positions")
        self.qpos0, self.qvel0 = robot.exported_state(q0, np.zeros(model.n), motor_equilibrium(model, pdata, q0),
                                                      np.zeros(model.n))
        # holding effort W τ_m with τ_m = W⁻¹(g − Jᵀτ_ext) (2.2): the static compensation itself
        self.hold = static_compensation(model, pdata, q0)
        self._stiffness = robot.mj.jnt_stiffness[[robot.mj.dof_jntid[d] for d in robot.elastic_dof]].copy()
        self._base_wrench = np.array(model.wrench, dtype=float)
        self._qfrc = np.zeros(robot.mj.nv)
        self._valid = np.zeros(1 + robot.mj.nq + robot.mj.nv + robot.mj.na)   # state before the last step
        self.max_speed = valid_speed(robot.mj.opt.timestep)
        self.reset()

    @property
    def t(self):
        return float(self.data.time)

    def reset(self):
        """Back to the initial rest state at t = 0 with the holding effort and no impulses (clears a fault)."""
        self.fault = None
        self.mujoco.mj_resetData(self.robot.mj, self.data)
        self.data.qpos[:], self.data.qvel[:] = self.qpos0, self.qvel0
        self.data.ctrl[self.robot.actuators] = self.hold
        self.impulses = []
        self.mujoco.mj_forward(self.robot.mj, self.data)

    def set_command(self, effort):
        """Motor-joint efforts (n,) [N m or N], held until the next call (InputError if bad)."""
        self.data.ctrl[self.robot.actuators] = finite_vector(effort, self.robot.model.n, "command")

    def apply_impulse(self, wrench, duration):
        """Wrench [f; μ] (frame 0, at the tool point E) [N, N m] for ``duration`` [s] from now
        (InputError naming the field beyond :attr:`impulse_limits`)."""
        self.impulses = [i for i in self.impulses if i[2] > self.t + 1e-12]
        wrench, duration = check_impulse(wrench, duration, self.impulse_limits, len(self.impulses))
        self.impulses.append((wrench, self.t, self.t + duration))

    def _external_force(self):
        """Generalized force of the base wrench + active impulses at E (qfrc_applied)."""
        self.impulses = [i for i in self.impulses if i[2] > self.t + 1e-12]
        total = self._base_wrench.copy()
        for wrench, start, _ in self.impulses:
            if start <= self.t + 1e-12:
                total += wrench
        self._qfrc[:] = 0.0
        if total.any():
            mj, d, r = self.robot.mj, self.data, self.robot
            self.mujoco.mj_kinematics(mj, d)
            point = d.xpos[r.ee_body] + d.xmat[r.ee_body].reshape(3, 3) @ r.ee_offset
            self.mujoco.mj_applyFT(mj, d, total[:3], total[3:], point, r.ee_body, self._qfrc)
        self.data.qfrc_applied[:] = self._qfrc

    def advance(self, duration):
        """round(duration / timestep) MuJoCo steps (at least one); :class:`SimulationFault` at the
        first step that leaves the valid range (non-finite state, MuJoCo's bad-acceleration
        warning, a speed above :func:`~flexmodal_ros.simulation.valid_speed` of the step): the
        state is put back to the last valid one and stays there until :meth:`reset`."""
        if self.fault is not None:
            raise SimulationFault(self.fault)
        mj, d, bad_qacc = self.robot.mj, self.data, self.mujoco.mjtWarning.mjWARN_BADQACC
        for _ in range(max(1, int(round(duration / mj.opt.timestep)))):
            if self.impulses or self._base_wrench.any():
                self._external_force()
            self._valid[:] = d.time, *d.qpos, *d.qvel, *d.act
            self.mujoco.mj_step(mj, d)
            if not (np.abs(d.qvel).max() <= self.max_speed and np.isfinite(d.qpos).all()) or d.warning[bad_qacc].number:
                what = (speed_fault(self.robot.model, np.concatenate(self.sample()[1::2]), self.max_speed, d.time,
                                    mj.opt.timestep) if not d.warning[bad_qacc].number else
                        f"state: MuJoCo reported a bad acceleration at t={d.time:.4f} s (the simulation left its "
                        "valid range)")
                d.warning[bad_qacc].number = 0
                self._restore_valid()
                self.fault = what
                raise SimulationFault(what)

    def _restore_valid(self):
        """Put the state saved before the last step back (time, positions, velocities, activations)."""
        mj, d = self.robot.mj, self.data
        d.time = self._valid[0]
        d.qpos[:] = self._valid[1:1 + mj.nq]
        d.qvel[:] = self._valid[1 + mj.nq:1 + mj.nq + mj.nv]
        d.act[:] = self._valid[1 + mj.nq + mj.nv:]
        self.mujoco.mj_forward(mj, d)

    def sample(self):
        """(s_e, ṡ_e, s_m, ṡ_m): elastic then motor joint positions/velocities, copies."""
        r, d = self.robot, self.data
        return (d.qpos[r.elastic_qpos].copy(), d.qvel[r.elastic_dof].copy(),
                d.qpos[r.motor_qpos].copy(), d.qvel[r.motor_dof].copy())

    def efforts(self):
        """(spring effort on the elastic joints −k W² s_e, applied motor-joint efforts)."""
        r, d = self.robot, self.data
        return -self._stiffness * d.qpos[r.elastic_qpos], d.ctrl[r.actuators].copy()


class MujocoLoopPlant:
    """The exported robot on MuJoCo as a :class:`~flexmodal_ros.simulation.LoopPlant`: states read
    through the ``deflection`` convention (:mod:`.convention`), motor torques τ_m commanded as the
    motor-joint efforts W τ_m. Starts at rest in the equilibrium of ``q0``."""
    step_name = "timestep"

    def __init__(self, model, q0, timestep=1e-3, path=None):
        self.simulator = MujocoSimulator(MujocoRobot.from_model(model, path, timestep), q0)
        self.convention, self.n, self.step = StateConvention(model, "deflection"), model.n, timestep
        self.W = self.simulator.robot.W
        self.hold = self.simulator.hold / self.W

    @property
    def t(self):
        return self.simulator.t

    def state(self):
        x, n = self.convention.to_model_inplace(np.concatenate(self.simulator.sample())), self.n
        return x[:n].copy(), x[n:2 * n].copy(), x[2 * n:3 * n].copy(), x[3 * n:].copy()

    def command(self, tau_m):
        self.simulator.set_command(tau_m * self.W)

    def advance(self, period):
        self.simulator.advance(period)


def run_closed_loop_mujoco(model, times, positions, duration, use_feedforward=True, control_rate_hz=1000.0,
                           timestep=1e-3, command_delay_cycles=0, path=None):
    """:func:`flexmodal_ros.simulation.run_closed_loop` with MuJoCo as the plant
    (:class:`MujocoLoopPlant`; like it, no speed or acceleration limits are checked: offline studies
    may exceed the URDF's): the controller reads the exported joint states through the
    ``deflection`` convention and commands W τ_m. ``path``: an exported MJCF (None = export
    ``model`` now). Returns a ClosedLoopResult."""
    positions = finite_array(positions, "positions", (None, model.n))
    return run_closed_loop(model, times, positions, duration, use_feedforward, control_rate_hz,
                           command_delay_cycles=command_delay_cycles,
                           plant=MujocoLoopPlant(model, positions[0], timestep, path))

"""ROS 2 node ``mujoco_simulator``: the exported flexible-joint robot on MuJoCo, headless.

The ``flexible_joint_simulator`` node (same topics, services, parameters, pacing, lockstep and
statistics; its docstring) with the plant replaced by
:class:`flexmodal_ros.export.mujoco_plant.MujocoSimulator`: the exported MJCF (rotor armature,
elastic joints, link-friction tendons) stepped by MuJoCo at ``integration_rate_hz``.

/joint_states are in the exported convention (``link_state: deflection``,
flexmodal_ros/export/convention.py): ``<joint>`` = elastic joint s_e = q − r q_m, ``<joint>_motor``
= motor joint s_m = r q_m; efforts: spring effort of the elastic joint, applied motor-joint
effort. ``effort_controller/commands`` are the motor-joint efforts W τ_m [N m or N] (run the
controller with ``link_state: deflection``). ``~/apply_wrench`` applies the impulse at the tool
point E as in the built-in simulator.

Extra parameter: ``model_path`` (an MJCF written by ``flexmodal export --format mjcf``; empty =
export the robot model now). ``integration_rate_hz``: MuJoCo steps per second, >= 1000, default
as the RK4 node's, the larger of 2000 and the rate resolving the fastest closed-loop mode (MuJoCo's first-order implicitfast step: the thesis trajectory on kuka_lwr4 in lockstep is
tracked to 3.5e-5 rad at 2 kHz, 7.1e-5 at 1 kHz, the built-in RK4 simulator's 2.9e-5); stiff
robots need more (scompi's 851 Hz mode: >= 5000).
"""
from .base import declare_typed, run_node
from .flexible_joint_simulator import FlexibleJointSimulator
from ..export.mujoco_plant import MujocoRobot, MujocoSimulator


class MujocoSimulatorNode(FlexibleJointSimulator):
    """:class:`FlexibleJointSimulator` on MuJoCo."""

    NODE_NAME = "mujoco_simulator"
    ENGINE = "MuJoCo"
    EFFORT_IS_MOTOR_TORQUE = False
    MIN_INTEGRATION_RATE_HZ = 1000.0
    DEFAULT_INTEGRATION_RATE_HZ = 2000.0

    def _make_simulator(self, q0, dt, limits):

        path = declare_typed(self, "model_path", "")
        return MujocoSimulator(MujocoRobot.from_model(self.model, path or None, dt), q0, limits)


def main(args=None):
    return run_node(MujocoSimulatorNode, "mujoco_simulator", args)


if __name__ == "__main__":
    raise SystemExit(main())

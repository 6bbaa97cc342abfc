"""The calibration action end to end on the suite's simulator (issue 31): real nodes as processes
(flexible_joint_simulator, feedforward_pd_controller, calibration_server), a real action client.

The simulated robot is kuka_lwr4 without its Coulomb friction (the AMA (2.8) and the calibration
are viscous; with 11.6 N m of motor stiction a 5 N m pulse does not move the motors), in lockstep
(the loop is then the sampled one without delay, hold:=zoh on the calibration node)."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from flexmodal_ros.robot.registry import robot_paths, resolve_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def viscous_params(tmp_path_factory):
    urdf, params = robot_paths("kuka_lwr4")
    raw = yaml.safe_load(Path(params).read_text())
    raw["urdf"] = str(Path(urdf).resolve())
    for joint in raw["joints"].values():
        joint.pop("d_cm", None)
    path = tmp_path_factory.mktemp("robot") / "kuka_viscous.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _start_robot(ros_process, params, out_dir):
    from std_srvs.srv import Trigger

    model = ["-p", f"params_path:={params}"]
    ros_process(["flexible_joint_simulator", "--ros-args", *model, "-p", "lockstep:=true"],
                wait_for_service=("/flexible_joint_simulator/reset", Trigger))
    # state_timeout_s: a loaded 2-core test machine can hold the lockstep simulator up for > 50 ms
    ros_process(["feedforward_pd_controller", "--ros-args", *model, "-p", "state_timeout_s:=1.0"],
                wait_for_service=("/feedforward_pd_controller/statistics", Trigger))
    return ros_process(["calibration_server", "--ros-args", *model, "-p", f"output_dir:={out_dir}",
                        "-p", "hold:=zoh", "-p", "max_budget:=3"])


def _goal(**fields):
    from flexmodal_interfaces.action import Calibrate

    goal = Calibrate.Goal(validation=0, pulses_per_configuration=1, candidates=16, seed=1)
    for key, value in fields.items():
        setattr(goal, key, value)
    return goal


def _send(ros, client, goal, on_feedback=None):
    feedback = []

    def keep(msg):
        feedback.append(msg.feedback)
        if on_feedback is not None:
            on_feedback(msg.feedback)

    handle = ros.send_goal(client, goal, keep)
    assert handle.accepted
    result = handle.get_result_async()
    return handle, result, feedback


def test_calibration_action_cancel_success_and_bad_goals(ros, ros_process, viscous_params, tmp_path):
    """Cancel mid-run → CANCELED, the robot holding, the data so far on disk; a bad goal is
    aborted with the field named; a goal runs to a loadable params YAML; the node keeps serving."""
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from std_srvs.srv import Trigger

    from flexmodal_interfaces.action import Calibrate

    out = tmp_path / "out"
    server = _start_robot(ros_process, viscous_params, out)
    node = ros.node("calibration_test_client")
    client = ActionClient(node, Calibrate, "/calibration/calibrate")
    ros.spin_until(lambda: client.wait_for_server(timeout_sec=0.1), 60.0, "calibration action server")

    # 0. the simulator's plant-side excitation: bounded, one at a time
    from flexmodal_interfaces.srv import Excite
    excite = node.create_client(Excite, "/flexible_joint_simulator/excite")
    too_big = ros.call(excite, Excite.Request(torque=[0.0] * 6 + [50.0], duration=0.002))
    assert not too_big.success and "max_excitation_torque" in too_big.message
    ok = ros.call(excite, Excite.Request(torque=[0.0] * 6 + [1.0], duration=0.002, kind="pulse"))
    assert ok.success, ok.message
    chirp = ros.call(excite, Excite.Request(torque=[1.0] + [0.0] * 6, duration=0.5, kind="sweep"))
    assert not chirp.success and "kind" in chirp.message
    controller = node.create_client(Excite, "/feedforward_pd_controller/excite")
    refused = ros.call(controller, Excite.Request(torque=[100.0] + [0.0] * 6, duration=0.002))
    assert not refused.success and "max_excitation_torque" in refused.message

    # 1. bad goals: refused with the field named, nothing moves
    for goal, field in ((_goal(budget=5), "max_budget"), (_goal(budget=1, output_name="../elsewhere"), "output_name"),
                        (_goal(budget=1, unknowns=["stiffness"]), "unknowns"),
                        (_goal(budget=1, pulse_torque=500.0), "max_excitation_torque"),
                        (_goal(budget=1, pulse_joints=["joint_9"]), "pulse_joints"),
                        (_goal(budget=1, design="best"), "design")):
        _, result, _ = _send(ros, client, goal)
        ros.spin_until(result.done, 30.0, "bad goal's result")
        assert result.result().status == GoalStatus.STATUS_ABORTED
        assert field in result.result().result.message and not result.result().result.success
    assert not any(out.glob("*/partial")) if out.exists() else True

    # 2. cancel after the first configuration
    state = {}

    def on_feedback(fb):
        if fb.stage == "configuration done" and "cancel" not in state:
            state["cancel"] = handle.cancel_goal_async()

    handle, result, feedback = None, None, None
    handle, result, feedback = _send(ros, client, _goal(budget=3, output_name="cancelled"),
                                     on_feedback=lambda fb: on_feedback(fb))
    ros.spin_until(result.done, 240.0, "cancelled goal's result")
    answer = result.result()
    assert answer.status == GoalStatus.STATUS_CANCELED, answer.result.message
    assert not answer.result.success and "cancelled" in answer.result.message
    assert answer.result.configurations_measured == 1
    stages = [fb.stage for fb in feedback]
    assert "moving" in stages and "exciting" in stages and "configuration done" in stages
    partial = out / "cancelled" / "partial"
    assert (partial / "configuration_0" / "record_0.csv").is_file()
    state_file = json.loads((partial / "state.json").read_text())
    assert len(state_file["configurations"]) == 1 and len(state_file["history"]) == 1
    assert not (out / "cancelled" / "calibrated.yaml").exists()          # no params from a cancelled run
    stats_client = node.create_client(Trigger, "/feedforward_pd_controller/statistics")
    stats = json.loads(ros.call(stats_client, Trigger.Request()).message)
    assert stats["mode"] == "hold"                                       # the robot holds
    kd = _parameter(ros, node, "/feedforward_pd_controller", "kd")
    assert kd in ([], None) or np.allclose(kd, resolve_model(params=str(viscous_params)).kd)   # gains restored

    # 3. a complete goal: k only, one configuration → a loadable YAML
    handle, result, feedback = _send(ros, client, _goal(budget=1, unknowns=["k"], output_name="done"))
    ros.spin_until(result.done, 240.0, "complete goal's result")
    answer = result.result()
    assert answer.status == GoalStatus.STATUS_SUCCEEDED, answer.result.message
    calibrated = resolve_model(params=answer.result.params_file)
    truth = resolve_model(params=str(viscous_params))
    identified = [n.split("/")[1] for n, s in zip(answer.result.unknown_names, answer.result.standard_deviations)
                  if np.isfinite(s)]
    assert identified
    for name in identified:
        j = truth.joint_names.index(name)
        assert abs(calibrated.k[j] / truth.k[j] - 1) < 0.02
    assert (Path(answer.result.report_dir) / "report.md").is_file()
    assert server.running()


def _parameter(ros, node, target, name):
    from rcl_interfaces.srv import GetParameters

    client = node.create_client(GetParameters, f"{target}/get_parameters")
    values = ros.call(client, GetParameters.Request(names=[name])).values
    return list(values[0].double_array_value) if values else None


def test_topic_plant_without_joint_states_says_none_arrived(ros):
    """No joint state ever arrives: the fault names that, not a wait 'until t=-inf s'."""
    from flexmodal_ros.core.errors import FlexmodalError
    from flexmodal_ros.nodes.topic_plant import TopicPlant

    model = resolve_model(robot="kuka_lwr4")
    plant = TopicPlant(ros.node("no_robot_here"), model, controller="/nobody", margin_s=0.2)
    with pytest.raises(FlexmodalError, match=r"joint_states: none arrived within 0.2 s of wall time") as err:
        plant.measured()
    assert "inf" not in str(err.value)


def test_a_goal_chooses_the_design_or_takes_the_nodes():
    """Calibrate.Goal.design → CalibrationSettings.design: "worst-first" taken, empty = the node's
    default, anything else refused naming the field."""
    from flexmodal_ros.core.errors import InputError
    from flexmodal_ros.nodes.conversions.calibration_messages import calibration_goal_to_core

    model = resolve_model(robot="kuka_lwr4")
    assert calibration_goal_to_core(model, _goal(design="worst-first"), {})[0].design == "worst-first"
    assert calibration_goal_to_core(model, _goal(), {"design": "worst-first"})[0].design == "worst-first"
    assert calibration_goal_to_core(model, _goal(), {})[0].design == "optimal"
    with pytest.raises(InputError, match=r"^design: unknown value 'random'; one of optimal, worst-first$"):
        calibration_goal_to_core(model, _goal(design="random"), {})


def test_a_bad_design_parameter_ends_the_node_with_one_line(ros_process):
    """The node's parameter design (the goals' default) other than optimal or worst-first: the node
    ends at start with one line naming it, not a traceback."""
    proc = ros_process(["calibration_server", "--ros-args", "-p", "robot:=planar_2r", "-p", "design:=best"])
    assert proc.popen.wait(30) == 2
    log = proc.log()
    assert "parameter design: unknown value 'best'; one of optimal, worst-first" in log and "Traceback" not in log

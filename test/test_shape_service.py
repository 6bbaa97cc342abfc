"""``~/shape_trajectory`` of the modal analysis server (issue 32): real rclpy clients and nodes.

In-process: the README's kuka_lwr4 move shaped for a trajectory controller (samples at the
requested rate with velocities and accelerations, the request's joint order, the design and the
predicted residual per mode, equal to the core's shape_samples), bad and oversized requests
answered with success=false (the node keeps serving). Processes: the service's answer sent to the
suite's controller with ``shaping:=none`` leaves the residual of ``shaping:=zvd`` in the controller
to 1 % (simulator in lockstep, feedforward from a model with 0.8 × the joint stiffness, as
test_shaping_node.py; the modal server runs the controller's params so that both shape with the
same modes; samples at 1 kHz: the controller rebuilds jerk and snap by finite differences, which
at 200 Hz leaves the residual 7 % off, robot/trajectory.py SampledC4Trajectory).
"""
import math
from pathlib import Path

import numpy as np
import pytest
from rclpy.parameter import Parameter

from flexmodal_interfaces.srv import ShapeTrajectory
from flexmodal_ros.nodes.conversions import core_to_trajectory
from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer
from flexmodal_ros.nodes.conversions.shaping_messages import MAX_SHAPE_WAYPOINTS
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.shaping.shaped_samples import shape_samples
from flexmodal_ros.shaping.trajectory_file import read_waypoints
from flexmodal_ros.shaping.vibration import residual_vibration, rest_position, tool_positions
from test_shaping_node import _params_file

MOVE = Path(__file__).resolve().parent.parent / "docs" / "shaping" / "kuka_lwr4_move.yaml"
SRV = "/modal_analysis/shape_trajectory"
WINDOW = 0.5
SETTLE_S = 6.0


@pytest.fixture
def server(ros):
    node = ModalAnalysisServer(context=ros.context, parameter_overrides=[Parameter("robot", value="kuka_lwr4")])
    return ros.add_node(node)


def _request(model, times, positions, names=None, **fields):
    names = list(model.joint_names) if names is None else names
    order = [list(model.joint_names).index(j) for j in names]
    req = ShapeTrajectory.Request()
    req.trajectory = core_to_trajectory(names, times, np.asarray(positions)[:, order])
    for key, value in fields.items():
        setattr(req, key, value)
    return req


def test_service_shapes_the_readme_move_for_a_trajectory_controller(ros, server):
    robot = load_robot("kuka_lwr4")
    path = read_waypoints(robot, MOVE)
    names = list(reversed(robot.joint_names))
    client = ros.node("shape_client").create_client(ShapeTrajectory, SRV)
    req = _request(robot, path.times, path.positions, names, shaper="zvd", sample_rate_hz=250.0)
    req.trajectory.header.stamp.sec = 7
    resp = ros.call(client, req, timeout=60.0)
    assert resp.success, resp.message
    offline = shape_samples(robot, path, "zvd", "auto", 250.0)
    traj = resp.trajectory
    assert list(traj.joint_names) == names and traj.header.stamp.sec == 7
    assert len(traj.points) == offline.times.size and resp.added_delay == pytest.approx(offline.added_delay)
    t = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in traj.points])
    np.testing.assert_allclose(t, offline.times, atol=1e-9)
    order = [list(robot.joint_names).index(j) for j in names]
    for field, want in (("positions", offline.positions), ("velocities", offline.velocities),
                        ("accelerations", offline.accelerations)):
        got = np.array([getattr(p, field) for p in traj.points])
        np.testing.assert_allclose(got, want[:, order], atol=1e-12)
    assert resp.shaper_design == offline.design.chosen and "predicted" in resp.design_reason
    assert list(resp.shaped_modes) == [1, 2, 7]
    assert resp.frequencies_start_hz[1] == pytest.approx(4.85, abs=0.01) and resp.frequency_min_hz[1] < 3.6
    unshaped, shaped = np.array(resp.predicted_residual_unshaped), np.array(resp.predicted_residual_shaped)
    assert unshaped.size == shaped.size == 3 and np.all(shaped < unshaped / 10)
    assert 0.0 <= resp.untreated_share <= 1.0 and resp.message.startswith("shaped zvd on mode(s) 1, 2, 7")


@pytest.mark.parametrize("fields, points, message", [
    (dict(shaper="fast"), None, "shaping: unknown value 'fast'"),
    (dict(shaper="none"), None, "shaper: 'none' shapes nothing"),
    (dict(shaper_design="best"), None, "shaper_design: unknown value 'best'"),
    (dict(sample_rate_hz=5000.0), None, "sample_rate_hz: must be in (0, 1000]"),
    (dict(sample_rate_hz=-1.0), None, "sample_rate_hz"),
    (dict(sample_rate_hz=math.nan), None, "sample_rate_hz"),
    (dict(kp=[0.0]), None, "kp"),
    ({}, "late_start", "time_from_start: must be 0"),
    ({}, "one", "at least 2 waypoints"),
    ({}, "too_many", f"more than this service's maximum ({MAX_SHAPE_WAYPOINTS})"),
    ({}, "too_long", "more than this service's maximum (60 s)"),
    ({}, "too_fast", "needs a peak speed"),
    ({}, "outside", "outside its limits"),
    ({}, "nan", "NaN"),
    ({}, "bad_name", "joint_names"),
    (dict(sample_rate_hz=1000.0), "many_samples", "samples"),
])
def test_bad_requests_answered_and_node_keeps_serving(ros, server, fields, points, message):
    robot = load_robot("kuka_lwr4")
    path = read_waypoints(robot, MOVE)
    times, positions, names = np.array(path.times), np.array(path.positions), None
    if points == "late_start":
        times = times + 0.1
    elif points == "one":
        times, positions = times[:1], positions[:1]
    elif points in ("too_many", "too_long", "many_samples"):
        count = MAX_SHAPE_WAYPOINTS + 1 if points == "too_many" else 2
        end = {"too_many": 100.0, "too_long": 61.0, "many_samples": 25.0}[points]
        times = np.linspace(0.0, end, count)
        positions = np.linspace(positions[0], positions[1], count)
    elif points == "too_fast":
        times = times * 0.3
    elif points == "outside":
        positions = positions.copy()
        positions[1, 1] = 2.5
    elif points == "nan":
        positions = positions.copy()
        positions[1, 3] = math.nan
    elif points == "bad_name":
        names = ["elbow"] + list(robot.joint_names[1:])
    client = ros.node("bad_shape_client").create_client(ShapeTrajectory, SRV)
    if names is None:
        req = _request(robot, times, positions, **fields)
    else:
        req = ShapeTrajectory.Request(trajectory=core_to_trajectory(names, times, positions))
    resp = ros.call(client, req, timeout=60.0)
    assert not resp.success and message in resp.message, resp.message
    ok = ros.call(client, _request(robot, path.times, path.positions, shaper_design="fixed"), timeout=60.0)
    assert ok.success and ok.shaper_design == "fixed", ok.message


def _run(ros_process, tmp_path, positions, shaping, send):
    """Simulator + controller (``shaping``) as processes; ``send(client)`` tracks the move and returns
    (result, reference end [s]); both processes are stopped afterwards."""
    from flexmodal_ros.nodes.bringup import _ros_value
    from flexmodal_ros.nodes.demo import SuiteClient

    sim = ros_process(["flexible_joint_simulator", "--ros-args", "-p",
                       f"params_path:={_params_file(tmp_path, 'plant', 1.0)}",
                       "-p", f"initial_positions:={_ros_value(positions[0])}", "-p", "lockstep:=true",
                       "-p", "lockstep_timeout_s:=1.0", "-p", "real_time_factor:=1.0"])
    ctrl = ros_process(["feedforward_pd_controller", "--ros-args",
                        "-p", f"params_path:={_params_file(tmp_path, 'controller', 0.8)}",
                        "-p", f"shaping:={shaping}", "-p", "state_timeout_s:=2.0", "-p", "max_trajectory_points:=2000"])
    client = SuiteClient(load_robot("kuka_lwr4"), name=f"flexmodal_test_shape_service_{shaping}")
    try:
        client.wait_for_status("hold", timeout=60.0)
        # the plant starts at initial_positions, off the hold equilibrium, and rings (ζ 0.08 at
        # 3 Hz: e^-9 after 6 s): the move starts once that has died out, in both runs alike
        client.spin_until(lambda: client.latest is not None and client.latest.t >= SETTLE_S, 120.0,
                          f"simulation time {SETTLE_S} s")
        return send(client)
    finally:
        client.close()
        ctrl.stop()
        sim.stop()


def test_service_output_tracked_as_given_leaves_the_in_controller_residual(ros_process, tmp_path):
    robot = load_robot("kuka_lwr4")
    plant = with_overrides(robot, d_cm=0.0)
    controller_model = with_overrides(plant, k=0.8 * plant.k)
    path = read_waypoints(robot, MOVE)
    times, positions = np.array(path.times), np.array(path.positions)
    _, p_rest = rest_position(plant, controller_model, positions[-1])

    def in_controller(client):
        result = client.track(times, positions, settle=2.2, timeout=120.0)   # covers a design delay up to 1.7 s + the window
        accepted = next(s for s in client.statuses if s.startswith("trajectory accepted"))
        delay = float(accepted.split("added delay ")[1].split(" s")[0])
        return result, times[-1] + delay

    inside, end = _run(ros_process, tmp_path, positions, "zvd", in_controller)

    ros_process(["modal_analysis_server", "--ros-args", "-p",
                 f"params_path:={_params_file(tmp_path, 'controller', 0.8)}"],
                wait_for_service=(SRV, ShapeTrajectory), timeout=60.0)

    def from_service(client):
        answer = client.call(client.node.create_client(ShapeTrajectory, SRV),
                             _request(robot, times, positions, shaper="zvd", sample_rate_hz=1000.0), timeout=60.0)
        assert answer.success, answer.message
        t = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in answer.trajectory.points])
        q = np.array([p.positions for p in answer.trajectory.points])
        result = client.track(t, q, settle=0.6, timeout=120.0, message=answer.trajectory)
        assert any("tracked as given, not shaped" in s or "trajectory accepted" in s for s in client.statuses)
        return result, t[-1]

    given, end_given = _run(ros_process, tmp_path, positions, "none", from_service)
    assert end_given == pytest.approx(end, abs=1e-3)
    r_in = residual_vibration(inside.t, tool_positions(plant, inside.q), p_rest, end, WINDOW)
    r_given = residual_vibration(given.t, tool_positions(plant, given.q), p_rest, end, WINDOW)
    assert r_given.peak_m == pytest.approx(r_in.peak_m, rel=0.01), (r_given, r_in)
    assert r_given.rms_m == pytest.approx(r_in.rms_m, rel=0.01), (r_given, r_in)


def test_trajectory_rates_are_all_or_nothing():
    """A JointTrajectory is waypoints (no velocities/accelerations on any point) or samples (both on
    every point); anything in between is refused naming the point."""
    from trajectory_msgs.msg import JointTrajectoryPoint
    from flexmodal_ros.core.errors import InputError
    from flexmodal_ros.nodes.conversions.shaping_messages import trajectory_rates_to_core

    robot = load_robot("planar_2r")
    msg = core_to_trajectory(robot.joint_names, [0.0, 0.5], [[0.0, 0.1], [0.2, 0.3]])
    assert trajectory_rates_to_core(robot, msg) == (None, None)
    msg.joint_names = list(reversed(msg.joint_names))
    msg.points = [JointTrajectoryPoint(positions=[0.1, 0.0], velocities=[2.0, 1.0], accelerations=[4.0, 3.0]),
                  JointTrajectoryPoint(positions=[0.3, 0.2], velocities=[0.0, 0.0], accelerations=[0.0, 0.0])]
    v, a = trajectory_rates_to_core(robot, msg)
    np.testing.assert_array_equal(v, [[1.0, 2.0], [0.0, 0.0]])
    np.testing.assert_array_equal(a, [[3.0, 4.0], [0.0, 0.0]])
    msg.points[1].accelerations = []
    with pytest.raises(InputError, match=r"points\[1\]\.accelerations: expected 2 values"):
        trajectory_rates_to_core(robot, msg)


def test_service_answers_a_repeated_request_from_its_cache_and_a_changed_one_anew():
    """The ShapingService keeps its last CACHE_SIZE answers: the same waypoints, gains, shaper,
    design and rate give the very same samples (no second analysis); another rate, other gains or
    a goal moved by 1e-7 rad are shaped anew; the cache never holds more than CACHE_SIZE."""
    from flexmodal_ros.nodes.modal_services.shaping_service import ShapingService

    robot = load_robot("kuka_lwr4")
    path = read_waypoints(robot, MOVE)
    service = ShapingService(robot)

    def answer(req):
        resp = ShapeTrajectory.Response()
        service.shape_trajectory(req, resp)
        assert resp.success, resp.message
        return resp

    first = answer(_request(robot, path.times, path.positions, shaper="zvd"))
    assert len(service._cache) == 1
    held = next(iter(service._cache.values()))
    again = answer(_request(robot, path.times, path.positions, shaper="zvd"))
    assert len(service._cache) == 1 and next(iter(service._cache.values())) is held
    assert [p.positions.tolist() for p in again.trajectory.points] == [p.positions.tolist() for p in first.trajectory.points]
    answer(_request(robot, path.times, path.positions, shaper="zvd", sample_rate_hz=100.0))
    answer(_request(robot, path.times, path.positions, shaper="zvd", kp=list(1.1 * robot.kp)))
    assert len(service._cache) == 3
    for i in range(service.CACHE_SIZE + 2):
        moved = np.array(path.positions, float)
        moved[-1, 1] += (i + 1) * 1e-7
        answer(_request(robot, path.times, moved, shaper="zvd"))
    assert len(service._cache) == service.CACHE_SIZE
    assert all(v is not held for v in service._cache.values())

"""ROS 2 node `identification_server`: real process, real rclpy client, real service calls.

Oracle: thesis Table 3.2 case 1 (notes_003 §4): unrounded model data at the Table 3.1
configurations, modes 1 and 4 → k = (2000, 1600), d_f = (3.91, 2.21), d_fm = (2.04, 1.68), F* ≈ 0.
"""
import numpy as np

from flexmodal_interfaces.srv import IdentifyJointParameters
from flexmodal_ros.robots import load_robot
from test_identification import TABLE_3_1_Q, model_modes

SRV = "/joint_identification/identify_joint_parameters"


def _request(data, **fields):
    req = IdentifyJointParameters.Request()
    req.num_configurations = len(data.q)
    req.positions = data.q.ravel().tolist()
    req.modes_per_configuration = np.bincount(data.config).tolist()
    req.frequencies_hz = data.frequency_hz.tolist()
    req.damping_ratios = data.damping_ratio.tolist()
    for key, value in fields.items():
        setattr(req, key, value)
    return req


def _start(ros_process):
    return ros_process(["identification_server", "--ros-args", "-p", "robot:=planar_2r",
                        "-p", "starts:=30"], wait_for_service=(SRV, IdentifyJointParameters))


def test_case_1_bad_request_and_keeps_serving(ros, ros_process):
    _start(ros_process)
    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q, (0, 3))
    client = ros.node("identification_client").create_client(IdentifyJointParameters, SRV)

    bad = ros.call(client, _request(data, damping_ratios=[1.2, *data.damping_ratio[1:].tolist()]))
    assert not bad.success and "damping_ratio" in bad.message
    short = ros.call(client, _request(data, positions=data.q.ravel().tolist()[:-1]))
    assert not short.success and "positions" in short.message

    res = ros.call(client, _request(data, seed=0, objective="determinant"), timeout=60.0)
    assert res.success, res.message
    assert list(res.joint_names) == ["joint_1", "joint_2"]
    np.testing.assert_allclose(res.stiffness, [2000.0, 1600.0], atol=0.1)
    np.testing.assert_allclose(res.link_damping, [3.91, 2.21], atol=0.01)
    np.testing.assert_allclose(res.motor_damping, [2.04, 1.68], atol=0.01)
    assert res.objective <= 1e-8
    assert len(res.residuals) == 60 and len(res.unknown_names) == 6
    assert len(res.standard_deviations) == 6 and res.jacobian_rank == 6

    only_k = ros.call(client, _request(data, unknowns=["k"], starts=3))   # node default objective
    assert only_k.success and list(only_k.unknown_names) == ["k/joint_1", "k/joint_2"]
    np.testing.assert_allclose(only_k.stiffness, [2000.0, 1600.0], rtol=1e-6)


def test_long_run_does_not_block_other_requests(ros, ros_process):
    _start(ros_process)
    data = model_modes(load_robot("planar_2r"), TABLE_3_1_Q, (0, 3))
    client = ros.node("identification_client").create_client(IdentifyJointParameters, SRV)
    ros.spin_until(client.service_is_ready, 10.0, "service")
    long = client.call_async(_request(data.with_damping(data.damping_ratio + 0.01),
                                      objective="eigenvalue", starts=150))
    quick = client.call_async(_request(data, unknowns=["x"]))
    ros.spin_until(quick.done, 20.0, "quick answer")
    assert not long.done()                           # the long run is still going ...
    assert not quick.result().success and "unknowns" in quick.result().message
    ros.spin_until(long.done, 120.0, "long answer")  # ... and completes afterwards
    assert long.result().success

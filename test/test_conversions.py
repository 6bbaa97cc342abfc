"""Message conversions of the 1 kHz paths (nodes/conversions.py): serialized writers and the
joint-state reader, against rclpy's own (de)serialization of the equivalent message objects."""
import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.nodes.conversions import (JointStateReader, JointStateWriter, TorqueCommandWriter,
                                             plant_joint_state)
from flexmodal_ros.robot.registry import load_robot


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


def test_joint_state_writer_bytes_equal_the_message(lwr):
    writer = JointStateWriter(lwr)
    rng = np.random.default_rng(3)
    for t in (0.0, 12.3456789, 4000.000999):
        values = rng.normal(size=(6, lwr.n))
        state, clock = writer(t, *values)
        expected = plant_joint_state(lwr, t, *values)
        assert deserialize_message(state, JointState) == expected
        assert deserialize_message(clock, Clock).clock == expected.header.stamp


def test_torque_command_writer_round_trip():
    writer = TorqueCommandWriter(3)
    tau = np.array([1.5, -2e-7, 3e4])
    msg = deserialize_message(writer(tau), Float64MultiArray)
    assert msg.data.tolist() == tau.tolist() and not msg.layout.dim
    assert deserialize_message(writer(-tau), Float64MultiArray).data.tolist() == (-tau).tolist()


def test_reader_maps_names_in_any_order_and_ignores_extra_joints(lwr):
    rng = np.random.default_rng(4)
    q, qd, q_m, qd_m = rng.normal(size=(4, lwr.n))
    msg = plant_joint_state(lwr, 2.5, q, qd, q_m, qd_m, q, q)
    order = rng.permutation(2 * lwr.n)
    shuffled = JointState(header=msg.header, name=[msg.name[i] for i in order] + ["gripper"],
                          position=[msg.position[i] for i in order] + [9.0],
                          velocity=[msg.velocity[i] for i in order] + [9.0])
    read = JointStateReader(lwr)
    for m in (msg, shuffled, msg):                    # the cached mapping follows name changes
        sample = read(m)
        assert sample.t == 2.5
        for got, want in zip(sample[1:], (q, qd, q_m, qd_m)):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mutate, message", [
    (lambda m: m.name.__setitem__(9, "elbow"), "missing the position and velocity state interfaces of joint_3_motor;"),
    (lambda m: m.velocity.pop(), "velocity: 13 values for 14 names"),
    (lambda m: m.position.__setitem__(9, float("nan")), "position: NaN or inf for joint_3_motor"),
    (lambda m: m.velocity.__setitem__(1, float("inf")), r"velocity: NaN or inf for joint_2 \(joint_state_broadcaster"),
])
def test_reader_errors_name_the_field_and_joint(lwr, mutate, message):
    zeros = np.zeros(lwr.n)
    msg = plant_joint_state(lwr, 0.0, *[zeros] * 6)
    msg.name, msg.position, msg.velocity = list(msg.name), list(msg.position), list(msg.velocity)
    mutate(msg)
    msg = deserialize_message(serialize_message(msg), JointState)   # as a subscriber receives it
    with pytest.raises(InputError, match=message):
        JointStateReader(lwr)(msg)


def test_reader_from_bytes_equals_the_message_path_across_senders(lwr):
    """Serialized input: in-place reads while the layout holds, deserialization when the sender,
    names or sizes change; same samples and errors as for message objects."""
    writer, read = JointStateWriter(lwr), JointStateReader(lwr)
    rng = np.random.default_rng(5)
    values = rng.normal(size=(6, lwr.n))
    other = plant_joint_state(lwr, 7.0, *values)
    other.name, other.position, other.velocity = list(other.name) + ["gripper"], list(other.position) + [1.0], \
        list(other.velocity) + [2.0]
    other.effort = list(other.effort) + [0.0]
    for t, buf in [(1.0, writer(1.0, *values)[0]), (1.001, writer(1.001, *values[::-1])[0]),
                   (7.0, serialize_message(other)), (1.002, writer(1.002, *values)[0])]:
        expected = JointStateReader(lwr)(deserialize_message(buf, JointState))
        sample = read.from_bytes(buf)
        assert sample.t == pytest.approx(t, abs=1e-12) and sample.t == expected.t
        for got, want in zip(sample[1:], expected[1:]):
            np.testing.assert_array_equal(got, want)
    assert read._layout is not None                     # the last sender's layout was learned
    bad = values.copy()
    bad[3, 2] = np.nan                                  # velocity of joint_3_motor, same layout
    with pytest.raises(InputError, match="velocity: NaN or inf for joint_3_motor"):
        read.from_bytes(writer(1.003, *bad)[0])


def test_reader_rejects_bytes_that_are_no_joint_state(lwr):
    with pytest.raises(InputError, match="joint_states: cannot deserialize 8 bytes"):
        JointStateReader(lwr).from_bytes(b"\x00\x01\x00\x00\xff\xff\xff\x7f")

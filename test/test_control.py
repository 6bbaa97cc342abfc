"""Tracking law, saturation and the fail-safe policy of flexmodal_ros.control (no ROS)."""
import numpy as np
import pytest

from flexmodal_ros.control import ControlLaw, FailSafeController, JointSample, Mode, saturate
from flexmodal_ros.errors import InputError
from flexmodal_ros.inverse_dynamics import feedforward_numeric
from flexmodal_ros.linearize import motor_equilibrium, setpoint_motor_torque, setpoint_reference, static_compensation
from flexmodal_ros.model import create_data
from flexmodal_ros.robots import load_robot
from flexmodal_ros.simulation import rest_state, thesis_trajectory
from flexmodal_ros.trajectory import PiecewiseC4Trajectory, point_to_point


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


@pytest.fixture(scope="module")
def ctrl_factory(lwr):
    def make(**kwargs):
        return FailSafeController(lwr, **kwargs)
    return make


@pytest.fixture(scope="module")
def law(lwr):
    return ControlLaw(lwr)


def at_rest(model, q, t=0.0):
    x, _ = rest_state(model, q)
    n = model.n
    return JointSample(t, x[:n], x[2 * n:3 * n], x[n:2 * n], x[3 * n:])


def load_segment(law, q_a, q_b, T, s, q_m, qd_m, tracking=1.0, use_feedforward=1.0, r_hold=0.0):
    law.tracking[0], law.use_feedforward[0], law.T[0], law.s[0] = tracking, use_feedforward, T, s
    law.q_a[:], law.q_b[:], law.q_m[:], law.qd_m[:], law.r_hold[:] = q_a, q_b, q_m, qd_m, r_hold
    law.run()


def test_compiled_tracking_law_is_feedforward_plus_motor_pd(lwr, law):
    """One generated call = segment (4.29)-(4.30) + feedforward (4.6)-(4.10) (Pinocchio oracle) + PD."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        q_a, q_b = rng.uniform(-1, 1, size=(2, lwr.n))
        T, s = rng.uniform(0.3, 2.0), rng.uniform(0, 1)
        link = [d[0] for d in point_to_point(q_a, q_b, T, [s * T])]
        exact = feedforward_numeric(lwr, *link)
        q_m, qd_m = exact.motor_position + rng.normal(0, 1e-3, lwr.n), exact.motor_velocity + rng.normal(0, 1e-2, lwr.n)
        load_segment(law, q_a, q_b, T, s, q_m, qd_m)
        tau = exact.motor_torque + lwr.kp * (exact.motor_position - q_m) + lwr.kd * (exact.motor_velocity - qd_m)
        expected, mask = saturate(tau, lwr.effort_limit)
        np.testing.assert_allclose(law.tau, expected, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(law.q_ref, link[0], rtol=1e-13, atol=1e-14)
        np.testing.assert_array_equal(law.saturated > 0.5, mask)
        assert law.n_saturated[0] == mask.sum()


def test_compiled_law_pd_only_hold_and_saturation(lwr, law):
    q_a, q_b = np.full(lwr.n, 0.3), np.full(lwr.n, -0.2)
    q, qd = (d[0] for d in point_to_point(q_a, q_b, 1.5, [0.6])[:2])
    q_m, qd_m = lwr.W * q + 1e-3, lwr.W * qd - 2e-2
    load_segment(law, q_a, q_b, 1.5, 0.4, q_m, qd_m, use_feedforward=0.0)   # no feedforward: W q^d, W q̇^d
    pd = lwr.kp * (lwr.W * q - q_m) + lwr.kd * (lwr.W * qd - qd_m)
    assert law.n_saturated[0] == 0
    np.testing.assert_allclose(law.tau, pd, rtol=1e-12)
    data = create_data(lwr)
    r_hold = setpoint_reference(lwr, data, q_a)
    q_m = motor_equilibrium(lwr, data, q_a) + 1e-3
    qd_m = np.full(lwr.n, 0.02)
    load_segment(law, q_a, q_b, 1.5, 0.4, q_m, qd_m, tracking=0.0, r_hold=r_hold)
    assert law.n_saturated[0] == 0
    np.testing.assert_allclose(law.tau, setpoint_motor_torque(lwr, data, q_a, q_m, qd_m), rtol=1e-12)
    load_segment(law, q_a, q_b, 1.5, 0.4, q_m + 1.0, qd_m, tracking=0.0, r_hold=r_hold)   # 4000 N m off
    np.testing.assert_array_equal(law.tau, -lwr.effort_limit)
    assert law.n_saturated[0] == lwr.n and (law.saturated == 1.0).all()


def test_virtual_machine_law_equals_the_compiled_one(lwr, law):
    vm = ControlLaw(lwr, compiled=False)
    rng = np.random.default_rng(2)
    for target in (law, vm):
        load_segment(target, *rng.uniform(-1, 1, size=(2, lwr.n)), 0.8, 0.3, *rng.normal(0, 0.1, (2, lwr.n)))
        rng = np.random.default_rng(2)
    np.testing.assert_allclose(vm.y, law.y, rtol=1e-12, atol=1e-12)


def test_saturation_clips_and_reports(lwr):
    tau = np.array([250.0, -10.0, -150.0, 0.0, 99.0, 31.0, -30.0])
    out, mask = saturate(tau, lwr.effort_limit)   # limits 200/200/100/100/100/30/30 N m
    np.testing.assert_array_equal(out, [200.0, -10.0, -100.0, 0.0, 99.0, 30.0, -30.0])
    np.testing.assert_array_equal(mask, [True, False, True, False, False, True, False])


def test_waiting_then_hold_uses_the_setpoint_law(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    assert ctrl.compute() is None and ctrl.mode == Mode.WAITING
    q = np.linspace(-0.5, 0.5, lwr.n)
    s = at_rest(lwr, q)
    ctrl.update_state(JointSample(0.0, s.q, s.qd, s.q_m + 1e-3, s.qd_m + 0.01), 0.0)
    cmd = ctrl.compute()
    assert cmd.mode == Mode.HOLD
    data = create_data(lwr)
    np.testing.assert_allclose(cmd.tau, setpoint_motor_torque(lwr, data, q, s.q_m + 1e-3, s.qd_m + 0.01))
    # at the equilibrium (2.3) the hold torque is exactly the static compensation (2.2)
    ctrl.update_state(s, 0.001)
    np.testing.assert_allclose(ctrl.compute().tau, static_compensation(lwr, data, q), atol=1e-9)
    np.testing.assert_allclose(s.q_m, motor_equilibrium(lwr, data, q))


def test_nan_sample_is_rejected_and_counted(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    good = at_rest(lwr, np.zeros(lwr.n))
    ctrl.update_state(good, 0.0)
    bad = JointSample(0.001, good.q, good.qd, np.full(lwr.n, np.nan), good.qd_m)
    with pytest.raises(InputError, match="q_m"):
        ctrl.update_state(bad, 0.001)
    assert ctrl.counters.rejected_samples == 1
    assert ctrl.last_sample.t == 0.0 and ctrl.mode == Mode.HOLD


def test_stale_states_give_static_hold_then_recover(lwr, ctrl_factory):
    ctrl = ctrl_factory(state_timeout=0.05)
    q = np.full(lwr.n, 0.2)
    ctrl.update_state(at_rest(lwr, q), 10.0)
    times, pos = np.array([0.0, 1.0]), np.array([q, q + 0.1])
    ctrl.set_trajectory(times, pos)
    assert ctrl.watchdog(10.04) is None
    cmd = ctrl.watchdog(10.06)
    assert cmd.mode == Mode.STALE and ctrl.mode == Mode.STALE
    np.testing.assert_allclose(cmd.tau, static_compensation(lwr, create_data(lwr), q) / lwr.W)
    assert ctrl.compute() is None
    ctrl.update_state(at_rest(lwr, q + 0.01, t=0.5), 10.2)
    assert ctrl.mode == Mode.HOLD
    np.testing.assert_allclose(ctrl.compute().q_ref, q + 0.01)   # hold where it is, trajectory aborted
    assert any("stale" in e for e in ctrl.events)


def test_time_going_backwards_aborts_the_trajectory(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=5.0), 0.0)
    ctrl.set_trajectory([0.0, 1.0], [q, q + 0.2])
    ctrl.update_state(at_rest(lwr, q, t=5.5), 0.5)
    assert ctrl.compute().mode == Mode.TRACKING
    ctrl.update_state(at_rest(lwr, q + 0.05, t=0.0), 0.6)
    cmd = ctrl.compute()
    assert cmd.mode == Mode.HOLD
    np.testing.assert_allclose(cmd.q_ref, q + 0.05)


def test_trajectory_finishes_in_hold_at_the_last_waypoint(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=1.0), 0.0)
    ctrl.set_trajectory([0.5], [q + 0.1])            # first point later than 0: starts from q
    ctrl.update_state(at_rest(lwr, q, t=1.25), 0.25)
    mid = ctrl.compute()
    assert mid.mode == Mode.TRACKING
    np.testing.assert_allclose(mid.q_ref, q + 0.05)  # η(1/2) = 1/2
    ctrl.update_state(at_rest(lwr, q, t=1.6), 0.6)
    end = ctrl.compute()
    assert end.mode == Mode.HOLD
    np.testing.assert_allclose(end.q_ref, q + 0.1)


@pytest.mark.parametrize("times, positions, field", [
    ([0.0, 1.0, 1.0], "steps", "times"),
    ([0.0, np.nan], "steps", "time_from_start"),
    ([0.0, 1.0], "nan", "positions"),
    ([0.0, 1.0], "short", "positions"),
    ([0.0, 1.0], "far", "positions: point 0"),
    ([0.0, 1.0], "limit", "outside its limits"),
    ([], "empty", "points"),
])
def test_bad_trajectories_are_rejected_naming_the_field(lwr, ctrl_factory, times, positions, field):
    ctrl = ctrl_factory()
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=2.0), 0.0)
    pos = {"steps": np.array([q, q + 0.1, q + 0.2])[:len(times)], "nan": np.array([q, q * np.nan]),
           "short": np.zeros((2, lwr.n - 1)), "far": np.array([q + 0.2, q]),
           "limit": np.array([q, q + np.r_[0, 2.5, 0, 0, 0, 0, 0]]), "empty": np.zeros((0, lwr.n))}[positions]
    with pytest.raises(InputError, match=field):
        ctrl.set_trajectory(times, pos)
    assert ctrl.counters.rejected_trajectories == 1 and ctrl.mode == Mode.HOLD


def test_trajectory_before_any_state_or_in_the_past_is_rejected(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    q0 = thesis_trajectory(lwr)[1][0]
    with pytest.raises(InputError, match="no valid joint state"):
        ctrl.set_trajectory([0.0, 3.0], thesis_trajectory(lwr)[1])
    ctrl.update_state(at_rest(lwr, q0, t=2.0), 0.0)
    with pytest.raises(InputError, match="in the past"):
        ctrl.set_trajectory([0.0, 3.0], thesis_trajectory(lwr)[1], start_time=1.5)
    assert "trajectory accepted" in ctrl.set_trajectory([0.0, 3.0], thesis_trajectory(lwr)[1], start_time=2.5)


def test_tracking_follows_the_waypoint_segments(lwr, ctrl_factory):
    """Segment switching in the controller: q_ref equals the reference sampler across waypoints."""
    ctrl = ctrl_factory()
    times, positions = [0.0, 0.7, 2.0], np.array([np.zeros(lwr.n), np.full(lwr.n, 0.3), np.full(lwr.n, -0.2)])
    ctrl.update_state(at_rest(lwr, positions[0], t=1.0), 0.0)
    ctrl.set_trajectory(times, positions)
    reference = PiecewiseC4Trajectory(times, positions)
    for t in (0.0, 0.2, 0.7, 1.3, 1.99):
        ctrl.update_state(at_rest(lwr, positions[0], t=1.0 + t), t)
        cmd = ctrl.compute()
        assert cmd.mode == Mode.TRACKING
        np.testing.assert_allclose(cmd.q_ref, reference.sample(t)[0], rtol=1e-12, atol=1e-12)


def test_trajectory_accepted_while_tracking_replaces_it_with_a_hold_until_its_start(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=1.0), 0.0)
    ctrl.set_trajectory([0.0, 1.0], [q, q + 0.2])
    ctrl.update_state(at_rest(lwr, q + 0.01, t=1.3), 0.3)
    assert ctrl.compute().mode == Mode.TRACKING
    ctrl.set_trajectory([0.0, 1.0], [q + 0.01, q - 0.1], start_time=1.5)
    held = ctrl.compute()
    assert held.mode == Mode.HOLD
    np.testing.assert_array_equal(held.q_ref, q + 0.01)            # the measured position
    np.testing.assert_allclose(held.tau, setpoint_motor_torque(lwr, create_data(lwr), q + 0.01,
                                                               *at_rest(lwr, q + 0.01)[3:]), rtol=1e-12)
    ctrl.update_state(at_rest(lwr, q + 0.01, t=2.0), 1.0)
    new = ctrl.compute()
    assert new.mode == Mode.TRACKING
    np.testing.assert_allclose(new.q_ref, q + 0.01 - 0.11 / 2, rtol=1e-12)   # η(1/2) = 1/2 on the new one


def test_law_library_is_keyed_by_gains_and_limits(lwr, law):
    from flexmodal_ros.model import with_overrides
    stiffer = ControlLaw(with_overrides(lwr, kp=lwr.kp * 2))
    assert stiffer.library.hash != law.library.hash
    for target in (law, stiffer):
        load_segment(target, np.zeros(lwr.n), np.zeros(lwr.n), 1.0, 0.0, np.full(lwr.n, -1e-3), np.zeros(lwr.n),
                     tracking=0.0, r_hold=np.zeros(lwr.n))
    np.testing.assert_allclose(stiffer.tau, 2 * law.tau, rtol=1e-12)      # −K_P q_m with twice the gain


def test_validated_samples_are_taken_as_is_and_others_are_copied(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    sample = at_rest(lwr, np.zeros(lwr.n))
    ctrl.update_state(sample, 0.0)
    assert ctrl.last_sample is not sample and ctrl.last_sample.q is not sample.q   # checked copy
    later = at_rest(lwr, np.zeros(lwr.n), t=0.001)
    ctrl.update_state(later, 0.001, validated=True)
    assert ctrl.last_sample is later

"""Tracking law, saturation and the fail-safe policy of flexmodal_ros.control (no ROS)."""
import numpy as np
import pytest

from flexmodal_ros.control import ControlLaw, FailSafeController, JointSample, Mode, SafetyLimits, saturate
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.robot.inverse_dynamics import feedforward_numeric
from flexmodal_ros.flexible_joint.linear_model import motor_equilibrium, setpoint_motor_torque, setpoint_reference, static_compensation
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.simulation import THESIS_VELOCITY_SCALE, rest_state, thesis_trajectory
from flexmodal_ros.robot.trajectory import ETA_ASCENDING, PiecewiseC4Trajectory, point_to_point


THESIS_LIMITS = SafetyLimits(velocity_scale=THESIS_VELOCITY_SCALE)


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
    # q^d, q̇^d come from the law's generated C here and from NumPy in point_to_point: the profile
    # (4.30) evaluated by each differs from the exact value by up to ε Σ_k |c_k| s^k |Δq| (and
    # ε Σ_k k |c_k| s^(k-1) |Δq|/T for q̇^d), so the two by twice that, which the gains carry into τ,
    # whose PD terms cancel (−4 + 3 = −1 N m): measured 1.3e-12 N m with NumPy 1.26, below 1e-12 with
    # NumPy 2 — the bound (5e-12) comes from the profile, not from one build's rounding
    s, powers = 0.4, np.arange(10)
    rounding = np.finfo(float).eps * 2 * 0.5 * (lwr.kp * (np.abs(ETA_ASCENDING[0]) * s ** powers).sum()
                                            + lwr.kd * (np.abs(ETA_ASCENDING[1]) * s ** powers).sum() / 1.5)
    np.testing.assert_allclose(law.tau, pd, rtol=1e-12, atol=rounding.max())
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
    assert ctrl.compute().mode == Mode.TRACKING        # started by this cycle, at t = 1.0
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
    ctrl = ctrl_factory(limits=THESIS_LIMITS)
    q0 = thesis_trajectory(lwr)[1][0]
    with pytest.raises(InputError, match="no valid joint state"):
        ctrl.set_trajectory([0.0, 3.0], thesis_trajectory(lwr)[1])
    ctrl.update_state(at_rest(lwr, q0, t=2.0), 0.0)
    with pytest.raises(InputError, match="in the past"):
        ctrl.set_trajectory([0.0, 3.0], thesis_trajectory(lwr)[1], start_time=1.5)
    assert "trajectory accepted" in ctrl.set_trajectory([0.0, 3.0], thesis_trajectory(lwr)[1], start_time=2.5)


def _stream(ctrl, model, q, stamps, receipts):
    """Feed samples at rest (stamps [s], steady receipt times [s]); the command of the last one."""
    command = None
    for t, r in zip(stamps, receipts):
        ctrl.update_state(at_rest(model, q, t=float(t)), float(r))
        command = ctrl.compute()
    return command


PERIOD = 0.002          # the joint-state stream of the start-now tests: 500 Hz, pace 1


def _running(ctrl_factory, model):
    """A controller that took 0.2 s of samples at rest at pace 1 (stamps 0 … 0.2 s received at
    steady 10.0 … 10.2 s); (controller, q0, waypoint times, positions of a 0.05 rad move)."""
    ctrl, q0 = ctrl_factory(), np.zeros(model.n)
    before = np.arange(0, 101) * PERIOD
    _stream(ctrl, model, q0, before, 10.0 + before)
    return ctrl, q0, [0.0, 0.6], np.array([q0, np.full(model.n, 0.05)])


def test_start_now_waits_for_the_states_queued_during_a_stall(lwr, ctrl_factory):
    """A 1 s stall of the controller: the states published meanwhile arrive in a burst (stamps
    2 ms apart, receipts 10 µs apart), and a "start now" trajectory accepted in the burst starts at
    the first sample after it — from its beginning — not at an old stamp of the burst (which
    would put the robot 0.05 rad behind the reference at once; Jazzy CI, issue 28)."""
    ctrl, q0, times, positions = _running(ctrl_factory, lwr)
    burst = 0.2 + np.arange(1, 501) * PERIOD                   # published during the stall
    burst_receipts = 11.2 + np.arange(500) * 1e-5
    _stream(ctrl, lwr, q0, burst[:3], burst_receipts[:3])      # the first queued states are taken
    assert "trajectory accepted" in ctrl.set_trajectory(times, positions, now=burst_receipts[2])
    ctrl.events.clear()
    modes = [_stream(ctrl, lwr, q0, [t], [r]).mode for t, r in zip(burst[3::10], burst_receipts[3::10])]
    first = modes.index(Mode.TRACKING) if Mode.TRACKING in modes else None
    if first is not None:       # only on a state published less than the tolerance before its receipt
        age = burst_receipts[3 + 10 * first] - 10.0 - burst[3 + 10 * first]
        assert 0.0 < age <= 0.1
    assert modes[:40] == [Mode.HOLD] * 40                      # not started on a queued state
    fresh = burst[-1] + np.arange(1, 4) * PERIOD
    command = _stream(ctrl, lwr, q0, fresh[:1], burst_receipts[-1] + np.arange(1, 2) * PERIOD)
    assert command.mode == Mode.TRACKING
    if first is None:           # the first fresh sample starts it, from the beginning
        np.testing.assert_allclose(command.q_ref, positions[0], atol=1e-12)
        assert any(e == f"tracking: tracking started at t={fresh[0]:.4f} s" for e in ctrl.events)


def test_start_now_waits_for_queued_states_taken_at_ordinary_gaps(lwr, ctrl_factory):
    """After a 1 s stall the controller works off the queued states one per cycle, 1.5 ms of steady
    time apart against the stream's 2 ms (a slow cycle on a loaded machine): every pair looks
    ordinary, but each state is still behind; the start waits for the lag to close (Jazzy CI: the
    start was taken 12 ms after an old stamp, and the move began ~1 s into its reference)."""
    ctrl, q0, times, positions = _running(ctrl_factory, lwr)
    k = np.arange(1, 4000)
    stamps, receipts = 0.2 + k * PERIOD, 11.2 + k * 0.0015    # queued since 10.2 s, worked off
    fresh = np.flatnonzero(stamps >= receipts - 10.0 - 1e-9)[0]
    ctrl.set_trajectory(times, positions, now=receipts[0])
    modes = [_stream(ctrl, lwr, q0, [t], [r]).mode for t, r in zip(stamps[:fresh + 30], receipts[:fresh + 30])]
    first = modes.index(Mode.TRACKING)
    lag = receipts[first] - 10.0 - stamps[first]
    assert 0.0 < lag <= 0.1 + 1e-9
    assert first >= 1790                                       # ~2.7 s of queued states worked off


def test_start_now_waits_for_queued_states_taken_slower_than_the_stream(lwr, ctrl_factory):
    """After a 1 s stall the first queued states are taken slower than the stream, 17 ms of steady
    time apart against its 2 ms (the cycle's thread starved while the node's other thread works
    off its own queue): the lag grows, which is not a paused stream's constant lag — the start
    waits for the fresh states (Jazzy CI: 15 queued states in 0.25 s were trusted as a paused
    stream, and the move began on a state 1 s old)."""
    ctrl, q0, times, positions = _running(ctrl_factory, lwr)
    k = np.arange(1, 51)
    stamps, receipts = 0.2 + k * PERIOD, 11.2 + k * 0.017      # 1 s of queued states, 50 taken slowly
    _stream(ctrl, lwr, q0, stamps[:1], receipts[:1])           # the first one is taken,
    ctrl.set_trajectory(times, positions, now=receipts[0])     # then the trajectory that waited meanwhile
    modes = [_stream(ctrl, lwr, q0, [t], [r]).mode for t, r in zip(stamps[1:], receipts[1:])]
    assert modes == [Mode.HOLD] * len(modes)                   # 0.83 s of steady time, none started
    fresh = receipts[-1] + 1e-4 - 10.0                         # then the newest state, published now
    command = _stream(ctrl, lwr, q0, [fresh], [receipts[-1] + 1e-4])
    assert command.mode == Mode.TRACKING
    np.testing.assert_allclose(command.q_ref, positions[0], atol=1e-12)


def test_start_now_after_a_paused_stream_and_at_another_pace(lwr, ctrl_factory):
    """A paused simulator (stamps resume where they stopped, the lag stays) is trusted once its lag
    has stayed for CATCH_UP_BOUND, one resumed at half its former pace (the lag grows) once its lag
    has not shrunk for NOT_CATCHING_UP_BOUND; a simulation at half or 3× real time, once its pace is
    learned, starts at the first cycle, and one 50× faster than ever learned at once (its stamps
    are ahead, never behind)."""
    from flexmodal_ros.control.measured import CATCH_UP_BOUND, NOT_CATCHING_UP_BOUND
    ctrl, q0, times, positions = _running(ctrl_factory, lwr)
    resumed = 0.202 + np.arange(200) * PERIOD                  # after a 1 s pause
    receipts = 11.2 + np.arange(200) * PERIOD
    _stream(ctrl, lwr, q0, resumed[:1], receipts[:1])
    ctrl.set_trajectory(times, positions, now=receipts[0])
    modes = [_stream(ctrl, lwr, q0, [t], [r]).mode for t, r in zip(resumed[1:], receipts[1:])]
    first = 1 + modes.index(Mode.TRACKING)
    assert receipts[first] - receipts[0] == pytest.approx(CATCH_UP_BOUND, abs=1.5 * PERIOD)
    ctrl = _running(ctrl_factory, lwr)[0]                      # resumed at half the pace learned before
    receipts = 11.2 + np.arange(800) * 2 * PERIOD
    _stream(ctrl, lwr, q0, resumed[:1], receipts[:1])
    ctrl.set_trajectory(times, positions, now=receipts[0])
    modes = [_stream(ctrl, lwr, q0, [t], [r]).mode for t, r in zip(0.202 + np.arange(1, 800) * PERIOD, receipts[1:])]
    first = 1 + modes.index(Mode.TRACKING)
    assert receipts[first] - receipts[0] == pytest.approx(NOT_CATCHING_UP_BOUND, abs=2.5 * PERIOD)
    for pace in (0.5, 3.0):
        ctrl = ctrl_factory()
        stamps = np.arange(0, 301) * PERIOD
        _stream(ctrl, lwr, q0, stamps, 10.0 + stamps / pace)
        ctrl.set_trajectory(times, positions, now=10.0 + stamps[-1] / pace)
        assert _stream(ctrl, lwr, q0, [stamps[-1] + PERIOD], [10.0 + (stamps[-1] + PERIOD) / pace]).mode == Mode.TRACKING
    ctrl = ctrl_factory()                                      # 50× real time from the first sample
    stamps = np.arange(0, 800) * 0.02                          # 0.4 ms of steady time apart
    receipts = 10.0 + stamps / 50.0
    _stream(ctrl, lwr, q0, stamps[:2], receipts[:2])
    ctrl.set_trajectory(times, positions, now=receipts[1])
    assert _stream(ctrl, lwr, q0, stamps[2:3], receipts[2:3]).mode == Mode.TRACKING


def test_start_now_excitation_waits_for_the_states_queued_during_a_stall(lwr):
    """The same for a motor excitation started "now" (the calibration's pulse after a move)."""
    from flexmodal_ros.control.excitation import pulse_on
    ctrl = FailSafeController(lwr, compiled=False)
    q0 = np.zeros(lwr.n)
    period = 0.002
    before = np.arange(0, 101) * period
    hold = _stream(ctrl, lwr, q0, before, 10.0 + before).tau
    ctrl.excite(pulse_on(lwr, [1], 1.0, 0.004), start_now=True)
    burst = 0.2 + np.arange(1, 501) * period
    tau = _stream(ctrl, lwr, q0, burst[:400:10], 11.2 + np.arange(40) * 1e-5).tau
    np.testing.assert_allclose(tau, hold, atol=1e-9)           # not started on a queued state
    ctrl.events.clear()
    fresh = burst[-1] + np.arange(1, 3) * period
    tau = _stream(ctrl, lwr, q0, fresh, 11.2 + 49e-5 + np.arange(1, 3) * period).tau
    np.testing.assert_allclose(tau[1] - hold[1], 1.0, atol=1e-9)
    assert ctrl.events == [f"hold: excitation started at t={fresh[0]:.4f} s"]


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


def test_law_library_serves_any_gains(lwr, law):
    """Gains are inputs of the generated law (issue 11 item 10: set at run time, no new library)."""
    from flexmodal_ros.robot.model import with_overrides
    stiffer = ControlLaw(with_overrides(lwr, kp=lwr.kp * 2))
    assert stiffer.library.hash == law.library.hash
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


# ----------------------------------------------------------------------------- issue 11 items 7-10

def test_huge_finite_state_is_rejected_like_nan(lwr, ctrl_factory):
    """Item 7: ±1e308 is finite but implausible: rejected (checked path and the node's reader)."""
    from flexmodal_ros.nodes.conversions import JointStateReader, plant_joint_state
    ctrl = ctrl_factory()
    sample = at_rest(lwr, np.zeros(lwr.n))
    bad = sample._replace(q_m=np.full(lwr.n, 1e308), qd_m=np.full(lwr.n, -1e308))
    with pytest.raises(InputError, match=r"joint_states\.position: joint_1_motor = 1e\+308 is implausible"):
        ctrl.update_state(bad, 0.0)
    assert ctrl.counters.rejected_samples == 1 and ctrl.mode == Mode.WAITING
    moving = sample._replace(qd=np.full(lwr.n, 10.0))          # 5x the LWR4's 1.96 rad/s
    with pytest.raises(InputError, match=r"joint_states\.velocity: joint_1 = 10 is implausible"):
        ctrl.update_state(moving, 0.0)
    outside = sample._replace(q=np.full(lwr.n, 3.2))           # URDF limit 2.97 + margin 0.1
    with pytest.raises(InputError, match=r"joint_states\.position: joint_1 = 3\.2 is outside the limits"):
        ctrl.update_state(outside, 0.0)
    reader = JointStateReader(lwr, bounds=ctrl.state_bounds)
    msg = plant_joint_state(lwr, 0.0, *(np.zeros(lwr.n),) * 2, np.full(lwr.n, 1e308), *(np.zeros(lwr.n),) * 3)
    with pytest.raises(InputError, match="joint_1_motor = 1e\\+308 is implausible"):
        reader(msg)


def test_nonfinite_law_result_fails_safe_and_saturation_is_truthful(lwr, law, ctrl_factory):
    """Item 7: inf - inf = NaN used to be clamped to -limit on every joint with no saturation
    flag. The law counts non-finite results; the controller holds (tracking) or commands zero
    torque (hold law); saturation flags stay truthful."""
    load_segment(law, np.zeros(lwr.n), np.zeros(lwr.n), 1.0, 0.0, np.full(lwr.n, 1e308),
                 np.full(lwr.n, -1e308), tracking=0.0, r_hold=np.zeros(lwr.n))
    assert law.n_nonfinite[0] == lwr.n
    ctrl = ctrl_factory(limits=SafetyLimits(velocity_scale=np.inf))     # no rate check: a 1e-80 s segment
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=1.0), 0.0)
    ctrl.set_trajectory([0.0, 1e-80], [q, q])                # T⁻⁴ overflows: the feedforward is NaN
    cmd = ctrl.compute()
    assert cmd.mode == Mode.HOLD and np.isfinite(cmd.tau).all() and not cmd.saturated.any()
    np.testing.assert_allclose(cmd.tau, static_compensation(lwr, create_data(lwr), q) / lwr.W, atol=1e-8)
    assert any("non-finite torque from the tracking law" in e for e in ctrl.events)
    huge = at_rest(lwr, q, t=1.001)._replace(q_m=np.full(lwr.n, 1e308), qd_m=np.full(lwr.n, -1e308))
    with pytest.raises(InputError, match="outside the limits"):
        ctrl.update_state(huge, 0.001, validated=True)      # outside the limits: not a state until it persists
    ctrl.update_state(huge._replace(t=1.1), 0.1, validated=True)   # a caller that skipped the checks
    zero = ctrl.compute()
    np.testing.assert_array_equal(zero.tau, 0.0)
    assert not zero.saturated.any() and ctrl.events[-1].startswith("fault: non-finite torque")
    ctrl.update_state(at_rest(lwr, q, t=1.102)._replace(q_m=q + 1.0), 0.102)   # 4000 N m off: clipped
    sat = ctrl.compute()
    assert sat.saturated.all() and np.array_equal(np.abs(sat.tau), lwr.effort_limit)


@pytest.mark.parametrize("times, positions, limits, message", [
    ([0.0, 0.002], lambda q: [q, q + 0.5], SafetyLimits(), r"segment 0 -> 1 needs a peak speed of 615\.2/s on joint_1"),
    ([0.0, 1.0], lambda q: [q, q + 0.5], SafetyLimits(acceleration_limits=2.0),
     r"peak acceleration of 4\.686/s\^2 on joint_1, above its limit 2/s\^2"),
    ([0.0, 1e9], lambda q: [q, q + 0.5], SafetyLimits(), r"lasts 1e\+09 s, longer than max_trajectory_duration"),
    (np.linspace(0, 100, 1001), lambda q: np.tile(q, (1001, 1)), SafetyLimits(),
     r"points: 1001 waypoints, more than max_trajectory_points \(1000\)"),
])
def test_trajectory_rates_duration_and_size_are_bounded(lwr, ctrl_factory, times, positions, limits, message):
    """Item 8: a 0.5 rad step in 2 ms, a 1e9 s trajectory, too many points: rejected."""
    ctrl = ctrl_factory(limits=limits)
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q), 0.0)
    with pytest.raises(InputError, match=message):
        ctrl.set_trajectory(times, positions(q))
    assert ctrl.mode == Mode.HOLD and ctrl.counters.rejected_trajectories == 1


def test_frozen_stamp_goes_stale_and_only_a_new_stamp_recovers(lwr, ctrl_factory):
    """Item 9: states keep arriving with one stamp: stale after state_timeout (by arrival they
    look fresh); the same stamp again does not leave STALE, an advancing one does."""
    ctrl = ctrl_factory(state_timeout=0.05)
    q = np.full(lwr.n, 0.2)
    for k in range(8):                                      # 8 arrivals, 10 ms apart, one stamp
        ctrl.update_state(at_rest(lwr, q, t=3.0), 10.0 + 0.01 * k)
        command = ctrl.watchdog(10.0 + 0.01 * k)
    assert command is not None and command.mode == Mode.STALE
    assert "joint-state stamp frozen at t=3.0000 s" in ctrl.events[-1]
    ctrl.update_state(at_rest(lwr, q, t=3.0), 10.09)
    assert ctrl.mode == Mode.STALE and ctrl.compute() is None
    ctrl.update_state(at_rest(lwr, q, t=3.001), 10.1)
    assert ctrl.mode == Mode.HOLD and ctrl.compute() is not None


def test_gains_change_between_cycles_and_are_validated(lwr, ctrl_factory):
    """Item 10: new kp/kd act from the next cycle (law and hold reference); bad or destabilizing
    gains are refused and nothing changes."""
    from flexmodal_ros.flexible_joint.linear_model import setpoint_motor_torque
    from flexmodal_ros.robot.model import with_overrides
    ctrl = ctrl_factory()
    q = np.full(lwr.n, 0.3)
    sample = at_rest(lwr, q)._replace(q_m=at_rest(lwr, q).q_m + 1e-3, qd_m=np.full(lwr.n, 0.01))
    ctrl.update_state(sample, 0.0)
    ctrl.compute()
    ctrl.configure(kp=2500.0, kd=np.linspace(80, 140, lwr.n))
    softer = with_overrides(lwr, kp=2500.0, kd=np.linspace(80, 140, lwr.n))
    np.testing.assert_allclose(ctrl.compute().tau, setpoint_motor_torque(softer, create_data(lwr), q, sample.q_m,
                                                                         sample.qd_m), rtol=1e-10)
    for kwargs, message in ((dict(kp=-1.0), "kp: must be > 0"), (dict(kd=[1.0, 2.0]), "kd: expected 1 or 7"),
                            (dict(kp=float("nan")), "kp: contains NaN"), (dict(kp=1.0), "would be unstable")):
        with pytest.raises(InputError, match=message):
            ctrl.configure(**kwargs)
    np.testing.assert_array_equal(ctrl.model.kp, softer.kp)
    np.testing.assert_array_equal(ctrl.law.kp, softer.kp)


def test_gain_changes_are_checked_on_the_loop_the_controller_samples(lwr):
    """With its rate, the controller checks new gains on the law sampled at that rate with the
    command one period late (flexible_joint.sampled, zoh-delay): on the LWR4 at 1 kHz, 3x the
    YAML's kd damps the continuous loop (its modal analysis stable) and destabilizes the sampled
    one, so it is refused there and nothing changes; 1.5x is stable in both and taken."""
    from flexmodal_ros.flexible_joint.ama import modal_analysis
    from flexmodal_ros.flexible_joint.sampled import sampled_modal_analysis
    from flexmodal_ros.robot.model import with_overrides
    q = np.full(lwr.n, 0.3)
    stiff = with_overrides(lwr, kd=3 * lwr.kd)
    assert modal_analysis(stiff, q).stable and not sampled_modal_analysis(stiff, q, 1000.0, "zoh-delay").stable
    ctrl = FailSafeController(lwr, compiled=False, controller_rate_hz=1000.0)
    ctrl.update_state(at_rest(lwr, q), 0.0)
    ctrl.compute()
    with pytest.raises(InputError, match="sampled at 1000 Hz with its command one period late .* would be unstable"):
        ctrl.configure(kd=3 * lwr.kd)
    np.testing.assert_array_equal(ctrl.model.kd, lwr.kd)
    np.testing.assert_array_equal(ctrl.law.kd, lwr.kd)
    ctrl.configure(kd=1.5 * lwr.kd)
    np.testing.assert_array_equal(ctrl.law.kd, 1.5 * lwr.kd)
    # without a rate (a caller that runs the law continuously) only the continuous loop is checked
    unsampled = FailSafeController(lwr, compiled=False)
    unsampled.configure(kd=3 * lwr.kd)
    np.testing.assert_array_equal(unsampled.model.kd, 3 * lwr.kd)
    # a rate the loop cannot have is refused when the controller is built, not at its first gain change
    for bad in (0.0, -1000.0, float("nan"), float("inf")):
        with pytest.raises(InputError, match="controller_rate_hz"):
            FailSafeController(lwr, compiled=False, controller_rate_hz=bad)


def test_steady_cycle_predicts_the_cycles_that_change_only_the_sample(lwr, ctrl_factory):
    """steady_cycle() (the contract of the controller node's C cycles, nodes/native_cycle.py): a
    sample meeting its conditions whose command is not saturated (the C cycle's last check)
    changes the mode, the events and the loaded segment not at all, and the cycle count by one; across hold, start, two segments, finish and time going
    backwards the others do change them. adopt_steady_cycles takes such cycles over."""
    ctrl = ctrl_factory()
    assert ctrl.steady_cycle() is None                       # WAITING
    q0 = np.full(lwr.n, 0.1)
    ctrl.update_state(at_rest(lwr, q0, t=1.0), 0.0)
    ctrl.compute()
    ctrl.set_trajectory([0.3, 0.6], np.array([q0 + 0.005, q0 + 0.01]), start_time=1.2)
    predicted_runs, other_runs, measured = 0, 0, q0      # the robot follows the reference
    stamps = [*np.arange(1.01, 2.0, 0.01), 1.5, *np.arange(1.51, 1.6, 0.01)]      # then backwards
    for t in stamps:
        steady = ctrl.steady_cycle()
        predicted = steady is not None and t > steady.previous_t and (
            steady.segment_begin <= t - steady.t0 < steady.segment_end if steady.tracking else t < steady.hold_until)
        traj = ctrl._trajectory
        before = (ctrl.mode, len(ctrl.events), traj and (traj.segment_begin, traj.segment_end), ctrl.counters.cycles)
        ctrl.update_state(at_rest(lwr, measured, t=t), t)
        command = ctrl.compute()
        measured = command.q_ref
        after = (ctrl.mode, len(ctrl.events), traj and (traj.segment_begin, traj.segment_end), ctrl.counters.cycles)
        if predicted:
            if not command.saturated.any():
                predicted_runs += 1
                assert after[:3] == before[:3] and after[3] == before[3] + 1, t
        else:
            other_runs += 1
            assert after[:3] != before[:3], t
    assert predicted_runs > 100 and other_runs == 4      # start, second segment, finish, time backwards
    sample = at_rest(lwr, q0, t=3.0)
    ctrl.adopt_steady_cycles(*sample, received=7.5, count=3)
    assert ctrl.last_sample == sample and ctrl.advanced == 7.5 and ctrl.counters.cycles == after[3] + 3


# ----------------------------------------------------------------------------- issue 29 items 10-11

def test_a_robot_outside_its_limits_is_held_and_recovered(lwr, ctrl_factory):
    """Item 10: samples outside the limits + margin are rejected until they have come for
    state_timeout (a glitch is not a state); then OUT_OF_LIMITS: hold law at the measured
    position, trajectories refused; recover() tracks one bounded segment back inside; samples
    inside again → HOLD. Before: every such sample was rejected and the controller stayed STALE."""
    ctrl = ctrl_factory()
    q = np.zeros(lwr.n)
    q[1] = lwr.position_upper[1] + 0.3                      # 0.2 beyond the margin
    with pytest.raises(InputError, match="joint_2 = .* is outside the limits"):
        ctrl.update_state(at_rest(lwr, q, t=0.0), 0.0)
    assert ctrl.mode == Mode.WAITING and ctrl.compute() is None
    for k in range(1, 60):                                  # 59 ms of consistent samples
        try:
            ctrl.update_state(at_rest(lwr, q, t=1e-3 * k), 1e-3 * k)
        except InputError:
            assert 1e-3 * k < ctrl.state_timeout
    assert ctrl.mode == Mode.OUT_OF_LIMITS
    assert any("holding at the measured position" in e for e in ctrl.events)
    hold = ctrl.compute()
    assert hold is not None and hold.mode == Mode.OUT_OF_LIMITS and np.isfinite(hold.tau).all()
    np.testing.assert_allclose(hold.q_ref, q)                # held where it is: the hold law (2.2)-(2.3)
    np.testing.assert_allclose(hold.tau, setpoint_motor_torque(lwr, create_data(lwr), q, at_rest(lwr, q).q_m,
                                                               np.zeros(lwr.n)), atol=1e-6)
    with pytest.raises(InputError, match="outside the limits"):
        ctrl.set_trajectory([0.0, 2.0], [q, np.zeros(lwr.n)])
    description = ctrl.recover()
    assert description.startswith("recovery accepted")
    t, samples = 0.06, 0
    while ctrl.mode != Mode.HOLD or samples == 0:
        command = ctrl.compute()
        assert command is not None and np.isfinite(command.tau).all()
        t += 1e-3
        samples += 1
        ctrl.update_state(at_rest(lwr, command.q_ref, t=t), t)     # a plant that follows its reference
        assert samples < 5000
    target = ctrl.last_sample.q
    assert target[1] <= lwr.position_upper[1] and abs(target[1] - (lwr.position_upper[1] - 0.01)) < 1e-9
    with pytest.raises(InputError, match="nothing to recover"):
        ctrl.recover()


def test_a_single_sample_outside_the_limits_is_a_glitch(lwr, ctrl_factory):
    ctrl = ctrl_factory()
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=0.0), 0.0)
    assert ctrl.mode == Mode.HOLD
    glitch = q.copy()
    glitch[0] = 5.0
    with pytest.raises(InputError, match="outside the limits"):
        ctrl.update_state(at_rest(lwr, glitch, t=0.001), 0.001)
    ctrl.update_state(at_rest(lwr, q, t=0.002), 0.002)
    assert ctrl.mode == Mode.HOLD and ctrl.counters.rejected_samples == 1


def test_a_start_far_ahead_is_refused(lwr, ctrl_factory):
    """Item 11: a start stamp 68 years in the future was accepted."""
    ctrl = ctrl_factory(limits=SafetyLimits(max_start_delay=60.0))
    q = np.zeros(lwr.n)
    ctrl.update_state(at_rest(lwr, q, t=10.0), 0.0)
    with pytest.raises(InputError, match=r"header.stamp: start time .* more than max_start_delay \(60 s\)"):
        ctrl.set_trajectory([0.0, 1.0], [q, q + 0.01], start_time=10.0 + 68 * 365.25 * 86400)
    assert ctrl.set_trajectory([0.0, 1.0], [q, q + 0.01], start_time=69.0).startswith("trajectory accepted")

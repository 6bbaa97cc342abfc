"""C⁴ 9th-order trajectories (thesis (4.29)-(4.32)); oracle O9 of notes_003."""
import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.robot.trajectory import (THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, PiecewiseC4Trajectory,
                                      eta, point_to_point)


def test_eta_exact_at_both_ends():
    # O9: η(0) = 0, η(1) = 1, derivatives 1..4 zero at both ends, exactly (no tolerance).
    assert eta(0.0).tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    assert eta(1.0).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_eta_derivative_closed_form():
    # dη/ds = 630 s⁴ (1 - s)⁴ (notes_003 §5 [D]) and η is monotonic.
    s = np.linspace(0, 1, 101)
    np.testing.assert_allclose(eta(s)[1], 630 * s**4 * (1 - s)**4, rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(eta(s)[0]) > 0)


def test_point_to_point_derivatives_match_finite_differences():
    T, t, h = THESIS_LWR4_T, np.linspace(0.1, 2.9, 15), 1e-5
    derivs = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, T, t)
    ahead = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, T, t + h)
    behind = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, T, t - h)
    for k in range(4):
        fd = (ahead[k] - behind[k]) / (2 * h)
        scale = np.abs(derivs[k + 1]).max()
        assert np.abs(fd - derivs[k + 1]).max() < 1e-6 * scale, f"derivative {k + 1}"


def test_point_to_point_endpoints_and_shapes():
    q, qd, qdd, q3, q4 = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, THESIS_LWR4_T)
    assert q.tolist() == THESIS_LWR4_QF.tolist()
    assert not np.any(np.concatenate([qd, qdd, q3, q4]))
    q0 = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, 0.0)[0]
    assert q0.tolist() == THESIS_LWR4_Q0.tolist()
    many = point_to_point([0.0, 1.0], [1.0, -1.0], 2.0, np.array([0.0, 1.0, 2.0]))
    assert many[0].shape == (3, 2)
    np.testing.assert_allclose(many[0][1], [0.5, 0.0], atol=1e-15)      # η(1/2) = 1/2 by symmetry


@pytest.mark.parametrize("kwargs, field", [
    (dict(q0=[0, 1], qf=[1], T=1, t=0.5), "qf"),
    (dict(q0=[0, np.nan], qf=[1, 1], T=1, t=0.5), "q0"),
    (dict(q0=[0, 1], qf=[1, 1], T=0, t=0.5), "T"),
    (dict(q0=[0, 1], qf=[1, 1], T=1, t=np.inf), "t"),
])
def test_point_to_point_rejects_bad_input(kwargs, field):
    with pytest.raises(InputError, match=f"^{field}:"):
        point_to_point(**kwargs)


def test_piecewise_is_c4_and_hits_waypoints():
    times = [0.5, 1.5, 2.0, 4.0]
    positions = [[0.0, 1.0], [1.0, 0.5], [0.2, 0.2], [0.0, -1.0]]
    traj = PiecewiseC4Trajectory(times, positions)
    for t, p in zip(times, positions):
        q, *d = traj.sample(t)
        assert q.tolist() == p
        assert not np.any(np.concatenate(d))                    # rest at every waypoint: C⁴ joins
    # inside a segment it is the point-to-point profile of that segment
    got = traj.sample(1.7)
    want = point_to_point(positions[1], positions[2], 0.5, 0.2)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    assert traj.sample(0.0)[0].tolist() == positions[0]          # before the first waypoint: hold
    assert traj.sample(9.0)[0].tolist() == positions[-1]         # after the last: hold
    # continuity of the 4th derivative across a join from both sides
    left, right = traj.sample(1.5 - 1e-6)[4], traj.sample(1.5 + 1e-6)[4]
    scale = max(np.abs(traj.sample(t)[4]).max() for t in np.linspace(0.5, 2.0, 31))
    assert np.abs(left - right).max() < 1e-3 * scale


@pytest.mark.parametrize("times, positions, field", [
    ([0.0, 1.0, 1.0], [[0], [1], [2]], "times"),
    ([0.0, 2.0, 1.0], [[0], [1], [2]], "times"),
    ([0.0, np.nan], [[0], [1]], "times"),
    ([0.0, 1.0], [[0], [np.inf]], "positions"),
    ([0.0, 1.0], [[0, 1], [1, 2], [3, 4]], "positions"),
    ([], [], "times"),
])
def test_piecewise_rejects_bad_waypoints(times, positions, field):
    with pytest.raises(InputError, match=f"^{field}:"):
        PiecewiseC4Trajectory(times, positions)

"""Flexible-joint plant (2.1): equilibrium, energy conservation, stiction, impulse response vs modal
analysis (thesis ch. 2.4.3), and the offline closed-loop acceptance on the LWR4 trajectory (§4.4.5)."""
import json

import numpy as np
import pytest

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.simulation import (FlexibleJointPlant, Simulator, rest_state, run_closed_loop,
                                      simulate_setpoint, thesis_trajectory)


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


def scompi_config8():
    """Configuration 8 of the 50 linearly spaced Scompi configurations (2.21)."""
    pi = np.pi
    return np.linspace([0, -pi / 6, 2 * pi / 3, -pi / 18, -2 * pi / 3, 0],
                       [0, pi / 6, pi / 3, pi / 3, -pi / 3, 0], 50)[7]


def test_rest_state_is_an_equilibrium(lwr):
    q = np.linspace(-1.0, 1.0, lwr.n)
    x, hold = rest_state(lwr, q)
    plant = FlexibleJointPlant(lwr)
    assert np.abs(plant.derivative(x, hold)).max() < 1e-9
    assert np.abs(plant.derivative(x, hold + 2 * lwr.d_cm)).max() > 1.0   # beyond stiction it moves


def test_energy_drift_without_friction_or_input(lwr):
    """Acceptance: |E(t) − E(0)| / |E(0)| ≤ 1e-6 over 10 s at the default 4 kHz RK4 step."""
    plant = FlexibleJointPlant(lwr, friction=False)
    rng = np.random.default_rng(0)
    q = 0.5 * rng.uniform(-1, 1, lwr.n)
    x = np.concatenate([q, q, rng.uniform(-0.5, 0.5, lwr.n), rng.uniform(-0.5, 0.5, lwr.n)])
    zero = np.zeros(lwr.n)
    e0 = plant.energy(x)
    energies = []
    for k in range(int(round(10.0 / plant.dt))):
        x = plant.step(x, zero)
        if k % 20 == 0:
            energies.append(plant.energy(x))
    drift = np.abs(np.array(energies) - e0).max() / abs(e0)
    assert drift <= 1e-6
    assert np.ptp(energies) > 0 and abs(plant.energy(x) - e0) < 1e-6 * abs(e0)
    # the test is not vacuous: the springs (uncompensated gravity) and the links really move
    assert np.abs(x[:lwr.n] - q).max() > 0.05


def test_energy_is_dissipated_with_friction(lwr):
    plant = FlexibleJointPlant(lwr, friction=True)
    q = np.full(lwr.n, 0.3)
    x = np.concatenate([q, q, np.full(2 * lwr.n, 0.5)])
    e0 = plant.energy(x)
    for _ in range(400):
        x = plant.step(x, np.zeros(lwr.n))
    assert plant.energy(x) < e0 - 1.0


def test_motor_stiction_holds_below_and_breaks_away_above_coulomb(lwr):
    plant = FlexibleJointPlant(lwr)
    x, hold = rest_state(lwr, np.zeros(lwr.n))
    below = hold + 0.9 * lwr.d_cm
    sim = Simulator(plant, x, below)
    sim.advance(0.05)
    assert np.abs(sim.x[3 * lwr.n:]).max() == 0.0          # stuck: motor velocities exactly zero
    sim = Simulator(plant, x, hold + 1.2 * lwr.d_cm)
    sim.advance(0.05)
    assert (sim.x[3 * lwr.n:] > 0).all()                   # every motor broke away forwards


def test_impulse_response_frequencies_match_modal_analysis():
    """Thesis ch. 2.4.3 idea: Scompi at configuration 8 under the set-point law (2.2)-(2.3), 50 N
    along y0 for 6 ms (Table 2.5 set-up). The free response's modes, identified from the simulated
    states by least squares (x_{k+1} = Φ x_k, λ = log(eig Φ)/dt), match the modal analysis: every
    dominant mode's natural frequency |λ|/2π within 1 % of the nearest modal frequency."""
    model = load_robot("scompi")
    q8 = scompi_config8()
    dt = 1.0 / 4000.0
    t, X = simulate_setpoint(model, q8, 1.2, [(np.array([0, 50.0, 0, 0, 0, 0]), 0.2, 0.006)], dt)
    x_eq, _ = rest_state(model, q8)
    free = (X - x_eq)[t > 0.21]
    assert np.abs(free[0]).max() > 1e-3                   # the impulse did excite the robot
    U, S, Vt = np.linalg.svd(free[:-1].T, full_matrices=False)
    r = int(np.sum(S > 1e-9 * S[0]))
    phi = free[1:].T @ Vt[:r].T @ np.diag(1.0 / S[:r]) @ U[:, :r].T
    mu, V = np.linalg.eig(phi)
    lam = np.log(mu.astype(complex)) / dt
    n = model.n
    amplitude = np.abs(np.linalg.lstsq(V, free[0], rcond=None)[0]) * np.linalg.norm(V[n:2 * n], axis=0)
    keep = (lam.imag > 0) & (amplitude >= 0.01 * amplitude[lam.imag > 0].max())
    identified = np.sort(np.abs(lam[keep]) / (2 * np.pi))
    modal = modal_analysis(model, q8).frequencies_hz
    assert identified.size >= 6
    for f in identified:
        nearest = modal[np.argmin(np.abs(modal - f))]
        assert abs(f - nearest) <= 0.01 * nearest, (f, nearest)
    assert abs(identified[0] - modal[0]) <= 0.01 * modal[0]   # the first mode (6.37 Hz) is among them


def test_offline_tracking_acceptance(lwr):
    """Acceptance: thesis LWR4 trajectory, 1 kHz, feedforward max error ≤ 1e-4 rad; PD only with the
    same gains ≥ 10x worse."""
    times, positions = thesis_trajectory(lwr)
    ff = run_closed_loop(lwr, times, positions, 3.5).summary()
    pd = run_closed_loop(lwr, times, positions, 3.5, use_feedforward=False).summary()
    assert ff["max_tracking_error_rad"] <= 1e-4
    assert pd["max_tracking_error_rad"] >= 10 * ff["max_tracking_error_rad"]
    assert ff["saturated_cycles"] == 0
    assert all(p <= lim for p, lim in zip(ff["peak_motor_torque"], lwr.effort_limit))


def test_saturation_is_applied_in_the_loop(lwr):
    """The thesis motion in 1 s instead of 3 s needs more than the URDF effort limits: clipped."""
    _, positions = thesis_trajectory(lwr)
    res = run_closed_loop(lwr, [0.0, 1.0], positions, 0.6)
    assert res.summary()["saturated_cycles"] > 0
    assert (np.abs(res.tau) <= lwr.effort_limit + 1e-12).all()


def test_simulator_rejects_bad_inputs(lwr):
    x, hold = rest_state(lwr, np.zeros(lwr.n))
    sim = Simulator(FlexibleJointPlant(lwr), x, hold)
    with pytest.raises(InputError, match="command"):
        sim.set_command([1.0, 2.0])
    with pytest.raises(InputError, match="command"):
        sim.set_command(np.full(lwr.n, np.nan))
    with pytest.raises(InputError, match="duration"):
        sim.apply_impulse(np.zeros(6), 0.0)
    with pytest.raises(InputError, match="dt"):
        FlexibleJointPlant(lwr, dt=1e-3)
    np.testing.assert_array_equal(sim.tau, hold)         # the previous command is kept


def test_cli_simulate_json(tmp_path, capsys):
    assert cli_main(["simulate", "--robot", "kuka_lwr4", "--json", "--plot-dir", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_tracking_error_rad"] <= 1e-4 and len(out["peak_motor_torque"]) == 7
    assert (tmp_path / "closed_loop.png").stat().st_size > 10_000
    assert cli_main(["simulate", "--robot", "scompi"]) == 2   # no thesis trajectory for 6 joints
    assert "7-joint" in capsys.readouterr().err

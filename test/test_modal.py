"""Modal analysis core (thesis ch. 2): linearize.py + modal.py + the `flexmodal modal` CLI.

Oracles: shared/reference/notes_003.md §3 (Table 2.5, (2.21)-(2.22), §2.4.2 text), §4 (Table 3.1),
and an independent finite-difference linearization of the nonlinear closed loop.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.robot.params import Tool
from flexmodal_ros.core.errors import ConfigError, InputError
from flexmodal_ros.flexible_joint.linear_model import (assemble, closed_loop_acceleration, linearize,
                                     motor_equilibrium, setpoint_motor_torque, state_matrix)
from flexmodal_ros.flexible_joint.ama import (configuration_from_names, modal_analysis,
                                 modal_analysis_batch)
from flexmodal_ros.robot.model import create_data, with_overrides
from flexmodal_ros.robot.registry import list_robots, load_robot
from flexmodal_ros.flexible_joint.sweep import config_line

# Thesis §2.4.1: the 50 Scompi configurations (linear in q2..q5, q1 = q6 = 0).
SCOMPI_Q1 = [0.0, -np.pi / 6, 2 * np.pi / 3, -np.pi / 18, -2 * np.pi / 3, 0.0]
SCOMPI_Q50 = [0.0, np.pi / 6, np.pi / 3, np.pi / 3, -np.pi / 3, 0.0]
# Table 2.5, AMA columns (f Hz, zeta %), configuration 8.
TABLE_2_5 = {
    "case1": [(6.3692, 7.6686), (6.9642, 11.2981), (9.8842, 12.7399), (12.7170, 16.1988),
              (13.1418, 16.7181), (25.5949, 26.5926), (37.0199, 1.3938), (58.3984, 2.9817),
              (58.8631, 3.4643), (94.3825, 2.2483), (183.2303, 17.0471), (850.8082, 80.5774)],
    "case2": [(5.9634, 7.1538), (6.6522, 10.8175), (9.2928, 11.9109), (12.6414, 16.1256),
              (13.1418, 16.7181), (25.3752, 25.6469), (33.1574, 2.3513), (46.3479, 2.1881),
              (49.3412, 3.3381), (92.0281, 2.2052), (138.7911, 12.5831), (850.5782, 80.5557)],
}
Q_M_2_22 = [0.0, -0.374, 1.9446, -0.0001, -1.9449, 0.0]  # (2.22)
# Table 3.1: q1, q2 [rad], f1 [Hz], zeta1 [%], f4 [Hz], zeta4 [%] (zeta printed +0.50 pp, notes §4).
TABLE_3_1 = [
    (1.474, 1.765, 2.83, 12.03, 9.38, 12.34), (0.133, 1.947, 3.01, 13.06, 9.15, 13.54),
    (2.193, 0.839, 2.29, 8.75, 12.1, 7.72), (0.667, 0.501, 2.18, 8.29, 13.68, 7.47),
    (0.946, 0.443, 2.16, 8.28, 13.93, 7.49), (2.24, 2.208, 3.26, 15.08, 8.97, 14.65),
    (-1.373, 1.717, 2.93, 11.5, 9.46, 11.98), (0.849, 0.179, 2.13, 8.1, 14.88, 7.62),
    (0.549, 2.582, 3.53, 17.7, 8.87, 15.46), (2.945, 2.577, 3.58, 17.65, 8.88, 15.33),
    (-2.307, 2.945, 3.78, 19.04, 8.92, 14.99), (1.627, 0.974, 2.32, 9.07, 11.51, 8.08),
    (-2.088, 1.638, 2.88, 11.08, 9.61, 11.39), (2.335, 1.686, 2.81, 11.54, 9.52, 11.75),
    (1.856, 2.96, 3.66, 19.03, 8.95, 14.57),
]


@pytest.fixture(scope="module")
def scompi():
    return load_robot("scompi")


@pytest.fixture(scope="module")
def scompi_tool(scompi):
    """Case 2: 4 kg point mass at O6, I_E = 0, s_E = 0."""
    return with_overrides(scompi, tool=Tool.point_mass(4.0))


@pytest.fixture(scope="module")
def q8(scompi):
    return config_line(scompi, SCOMPI_Q1, SCOMPI_Q50, 50)[7]


def test_configuration_8_is_2_21(q8):
    np.testing.assert_allclose(q8, [0, -0.374, 1.9448, 0, -1.9448, 0], atol=1e-4)


@pytest.mark.parametrize("case", ["case1", "case2"])
def test_table_2_5(scompi, scompi_tool, q8, case):
    res = modal_analysis(scompi if case == "case1" else scompi_tool, q8)
    table = np.array(TABLE_2_5[case])
    assert res.num_modes == 12 and res.stable and res.real_eigenvalues.size == 0
    rel = np.abs(res.frequencies_hz / table[:, 0] - 1)
    tol = np.full(12, 5e-4)
    if case == "case2":
        tol[10] = 3e-3  # mode 11: 139.09 vs 138.79 Hz (notes_003 §3 [H])
    assert np.all(rel <= tol), rel
    assert np.max(np.abs(100 * res.damping_ratios - table[:, 1])) <= 0.03


def test_motor_equilibrium_2_22(scompi, q8):
    d = create_data(scompi)
    q_m = motor_equilibrium(scompi, d, q8)
    # (2.22) prints q_m2 with 3 decimals ("-0.374", like q2 in (2.21)): its rounding interval
    # (half a unit of the last printed digit) is the tolerance there, 2e-4 rad elsewhere.
    tol = np.array([2e-4, 5e-4, 2e-4, 2e-4, 2e-4, 2e-4])
    assert np.all(np.abs(q_m - Q_M_2_22) <= tol), q_m - Q_M_2_22
    np.testing.assert_allclose(modal_analysis(scompi, q8, d).motor_equilibrium, q_m, rtol=1e-12, atol=1e-12)
    # At the equilibrium the spring torque balances gravity: K W (W q - q_m) = -g (2.1 at rest).
    tau_m = setpoint_motor_torque(scompi, d, q8, q_m, np.zeros(6))
    np.testing.assert_allclose(closed_loop_acceleration(scompi, d, q8, np.r_[q8, q_m], np.zeros(12)),
                               0.0, atol=1e-8)
    assert np.all(np.isfinite(tau_m))


def test_fifty_configuration_extremes(scompi, scompi_tool):
    """§2.4.2: over the 50 configurations (both cases) f 5.13..851.14 Hz, zeta 1.25 % (mode 7)
    .. 80.61 % (mode 12)."""
    qs = config_line(scompi, SCOMPI_Q1, SCOMPI_Q50, 50)
    f, z = [], []
    for model in (scompi, scompi_tool):
        res = modal_analysis_batch(model, qs, workers=2, chunk_size=16)
        f.append([r.frequencies_hz for r in res])
        z.append([r.damping_ratios for r in res])
    f, z = np.array(f), 100 * np.array(z)  # (case, config, mode)
    assert abs(f.min() - 5.13) <= 0.01 and abs(f.max() - 851.14) <= 0.05
    assert abs(z.min() - 1.25) <= 0.01 and np.unravel_index(z.argmin(), z.shape)[2] == 6
    assert abs(z.max() - 80.61) <= 0.01 and np.unravel_index(z.argmax(), z.shape)[2] == 11


def test_planar_2r_table_3_1():
    model = load_robot("planar_2r")
    d = create_data(model)
    for q1, q2, f1, z1, f4, z4 in TABLE_3_1:
        res = modal_analysis(model, [q1, q2], d)
        assert res.num_modes == 4
        np.testing.assert_array_equal(np.round(res.frequencies_hz[[0, 3]], 2), [f1, f4])
        # Table ζ = model + 0.50 pp, printed with 2 decimals (offset spread 0.495..0.506).
        np.testing.assert_allclose(100 * res.damping_ratios[[0, 3]], [z1 - 0.5, z4 - 0.5], atol=0.012)


def _fd_state_matrix(model, d, q, h=1e-6):
    """A by central differences of the nonlinear closed loop about (q, q_m^d, 0)."""
    n = model.n
    z0 = np.r_[q, motor_equilibrium(model, d, q)]
    A = np.zeros((4 * n, 4 * n))
    A[:2 * n, 2 * n:] = np.eye(2 * n)
    zero = np.zeros(2 * n)
    for j in range(2 * n):
        e = np.zeros(2 * n)
        e[j] = h
        A[2 * n:, j] = (closed_loop_acceleration(model, d, q, z0 + e, zero)
                        - closed_loop_acceleration(model, d, q, z0 - e, zero)) / (2 * h)
        A[2 * n:, 2 * n + j] = (closed_loop_acceleration(model, d, q, z0, e)
                                - closed_loop_acceleration(model, d, q, z0, -e)) / (2 * h)
    return A


@pytest.mark.parametrize("robot", list_robots())
def test_eigenvalues_match_finite_difference_linearization(robot):
    """Random configurations, with a tool and a constant wrench (K_G wrench term (2.12))."""
    rng = np.random.default_rng(3)
    base = load_robot(robot)
    model = with_overrides(base, tool=Tool(1.5, np.array([0.01, -0.02, 0.05]), np.diag([0.01, 0.02, 0.015])),
                           wrench=[12.0, -20.0, 15.0, 1.0, -2.0, 0.5])
    d = create_data(model)
    lo, hi = np.maximum(model.position_lower, -np.pi), np.minimum(model.position_upper, np.pi)
    for _ in range(3):
        q = rng.uniform(lo, hi)
        assert np.max(np.abs(closed_loop_acceleration(
            model, d, q, np.r_[q, motor_equilibrium(model, d, q)], np.zeros(2 * model.n)))) < 1e-6
        lam_fd = np.linalg.eigvals(_fd_state_matrix(model, d, q))
        res = modal_analysis(model, q, d)
        lam = np.concatenate([res.eigenvalues, res.eigenvalues.conj(), res.real_eigenvalues])
        assert lam.size == 4 * model.n
        cost = np.abs(lam[:, None] - lam_fd[None, :])
        rows, cols = linear_sum_assignment(cost)
        assert np.max(cost[rows, cols] / np.abs(lam[rows])) < 1e-5


def test_wrench_changes_equilibrium_and_stiffness(scompi, q8):
    """The wrench enters q_m^d (2.3) as -(KW)^-1 J^T tau_ext and K_G (2.12)."""
    d = create_data(scompi)
    w = np.array([0.0, 50.0, 0.0, 0.0, 0.0, 0.0])
    loaded = with_overrides(scompi, wrench=w)
    from flexmodal_ros.robot.model import wrench_torque
    dq_m = motor_equilibrium(loaded, d, q8) - motor_equilibrium(scompi, d, q8)
    np.testing.assert_allclose(dq_m, -wrench_torque(scompi, d, q8, w) / (scompi.k * scompi.W), atol=1e-12)
    assert not np.allclose(linearize(loaded, d, q8).K, linearize(scompi, d, q8).K)


def test_assemble_structure_and_batching(scompi, q8):
    d = create_data(scompi)
    lin = linearize(scompi, d, q8)
    n = 6
    np.testing.assert_allclose(lin.M[n:, n:], np.diag(scompi.B))
    np.testing.assert_allclose(lin.D[n:, n:], np.diag(scompi.d_fm + scompi.kd))
    np.testing.assert_allclose(lin.K[:n, n:], -np.diag(scompi.k * scompi.W))
    np.testing.assert_allclose(lin.K[n:, n:], np.diag(scompi.k + scompi.kp))
    M = np.stack([lin.M[:n, :n]] * 3)
    KG = np.stack([lin.K[:n, :n] - np.diag(scompi.k * scompi.W ** 2)] * 3)
    kp = np.array([[1.0e4] * n, [1.5e4] * n, [2.0e4] * n])  # batched gains
    Mb, Db, Kb = assemble(M, KG, scompi.k, scompi.W, scompi.d_f, scompi.d_fm, scompi.B, kp, scompi.kd)
    assert Mb.shape == (3, 12, 12)
    np.testing.assert_allclose(Kb[1], lin.K, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(np.diag(Kb[2])[n:], scompi.k + 2.0e4)
    A = state_matrix(Mb, Db, Kb)
    np.testing.assert_allclose(A[1], state_matrix(lin.M, lin.D, lin.K))


def test_mode_shapes_solve_quadratic_eigenproblem(scompi, q8):
    """(M̄ λ² + D̄ λ + K̄) u = 0 (3.14); normalization: unit norm, largest component real > 0."""
    d = create_data(scompi)
    lin = linearize(scompi, d, q8)
    res = modal_analysis(scompi, q8, d)
    assert res.mode_shapes.shape == (12, 12)
    for lam, u in zip(res.eigenvalues, res.mode_shapes.T):
        assert lam.imag > 0
        r = (lin.M * lam ** 2 + lin.D * lam + lin.K) @ u
        assert np.linalg.norm(r) <= 1e-9 * np.linalg.norm(lin.K) * np.linalg.norm(u)
        assert np.isclose(np.linalg.norm(u), 1.0)
        big = u[np.argmax(np.abs(u))]
        assert big.imag == pytest.approx(0.0, abs=1e-12) and big.real > 0
    assert np.all(np.diff(res.frequencies_hz) >= 0)
    np.testing.assert_allclose(res.frequencies_hz, np.abs(res.eigenvalues) / (2 * np.pi))
    np.testing.assert_allclose(res.damping_ratios, -res.eigenvalues.real / np.abs(res.eigenvalues))


def test_unstable_gains_reported_not_raised():
    """Upright planar 2R with a very soft motor loop: gravity wins, an eigenvalue has Re > 0."""
    model = with_overrides(load_robot("planar_2r"), kp=1.0, kd=0.0)
    res = modal_analysis(model, [np.pi / 2, 0.0])
    assert not res.stable
    assert res.unstable_eigenvalues.size >= 1 and np.all(res.unstable_eigenvalues.real >= 0)
    assert np.max(res.real_eigenvalues) > 0  # divergent (real) motion is reported, not dropped
    assert 2 * res.num_modes + res.real_eigenvalues.size == 8


def test_overdamped_modes_listed_separately():
    model = with_overrides(load_robot("planar_2r"), kd=2.0e4)
    res = modal_analysis(model, [0.3, 0.5])
    assert res.stable and res.real_eigenvalues.size > 0
    assert 2 * res.num_modes + res.real_eigenvalues.size == 8
    assert np.all(np.diff(res.real_eigenvalues) >= 0)


def test_batch_equals_single(scompi):
    rng = np.random.default_rng(1)
    qs = rng.uniform(-1.0, 1.0, (37, 6)) * [0.3, 1, 1, 1, 1, 1]
    batch = modal_analysis_batch(scompi, qs, workers=2, chunk_size=5)
    d = create_data(scompi)
    for q, r in zip(qs, batch):
        s = modal_analysis(scompi, q, d)
        np.testing.assert_array_equal(r.q, q)
        np.testing.assert_allclose(r.frequencies_hz, s.frequencies_hz, rtol=1e-10)
        np.testing.assert_allclose(r.mode_shapes, s.mode_shapes, atol=1e-8)


@pytest.mark.parametrize("q, field", [
    ([0.0] * 5, "q"), ([0.0] * 5 + [np.nan], "q"), ([0.0] * 5 + [np.inf], "q"), ([], "q"),
    ("abc", "q"),
])
def test_bad_configuration(scompi, q, field):
    with pytest.raises(InputError, match=field):
        modal_analysis(scompi, q)


def test_bad_overrides_and_names(scompi):
    with pytest.raises(InputError, match="kp"):
        with_overrides(scompi, kp=0.0)
    with pytest.raises(InputError, match="kp"):
        with_overrides(scompi, kp=[1.0, 2.0])
    with pytest.raises(InputError, match="joint_names"):
        configuration_from_names(scompi, ["joint_1", "nope"], [0.0, 0.0])
    with pytest.raises(InputError, match="joint_names"):
        configuration_from_names(scompi, ["joint_1"] * 6, [0.0] * 6)
    with pytest.raises(ConfigError, match="unknown robot"):
        load_robot("no_such_robot")
    names = list(reversed(scompi.joint_names))
    np.testing.assert_array_equal(configuration_from_names(scompi, names, np.arange(6.0)),
                                  np.arange(6.0)[::-1])


Q8_ARG = "0,-0.37399913,1.94479545,0,-1.94479545,0"


def test_cli_modal_json_case2(capsys):
    assert cli_main(["modal", "--robot", "scompi", "--q", Q8_ARG, "--tool-mass", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("frequencies_hz", "damping_ratios", "eigenvalues_real", "eigenvalues_imag", "stable",
                "motor_equilibrium"):
        assert key in out
    table = np.array(TABLE_2_5["case2"])
    np.testing.assert_allclose(out["frequencies_hz"][:10], table[:10, 0], rtol=5e-4)
    np.testing.assert_allclose(np.array(out["damping_ratios"]) * 100, table[:, 1], atol=0.03)
    assert out["stable"] is True


def test_cli_modal_text_and_unstable(capsys):
    assert cli_main(["modal", "--robot", "planar_2r", "--q", "1.5707963,0", "--kp", "1", "--kd", "0"]) == 0
    out = capsys.readouterr().out
    assert "UNSTABLE" in out and "real (overdamped) eigenvalues" in out


@pytest.mark.parametrize("argv, field", [
    (["--robot", "scompi", "--q", "0,0"], "q"),
    (["--robot", "scompi", "--q", "0,0,0,0,0,nan"], "q"),
    (["--robot", "scompi", "--q", Q8_ARG, "--kp", "0"], "kp"),
    (["--robot", "scompi", "--q", Q8_ARG, "--kd", "1,2"], "kd"),
    (["--robot", "nope", "--q", "0"], "unknown robot"),
    (["--robot", "scompi", "--q", "a,b"], "--q"),
])
def test_cli_modal_bad_input(capsys, argv, field):
    assert cli_main(["modal", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


def test_console_script_exit_codes(tmp_path):
    exe = [sys.executable, "-m", "flexmodal_ros.cli"]
    ok = subprocess.run(exe + ["modal", "--robot", "planar_2r", "--q", "0.1,0.2", "--json"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and len(json.loads(ok.stdout)["frequencies_hz"]) == 4
    bad = subprocess.run(exe + ["modal", "--robot", "planar_2r", "--q", "0.1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "q:" in bad.stderr and "Traceback" not in bad.stderr


def test_limit_warnings_single_configuration_path_matches_the_array_path():
    """limit_warnings: the one-configuration check on floats (the services' path) gives the same
    warnings as the array path (the same configuration as a 1 × n batch), on both sides of the
    1e-9 tolerance, at NaN and for a configuration of the wrong length."""
    from flexmodal_ros.flexible_joint.ama import limit_warnings

    model = load_robot("kuka_lwr4")
    low, high = model.position_lower, model.position_upper
    cases = [np.zeros(7), high + 0.5e-9, high + 2e-9, low - 2e-9, np.where(np.arange(7) == 3, low - 1.0, 0.0),
             np.full(7, np.nan), np.where(np.arange(7) == 5, high + 0.3, low - 0.2)]
    for q in cases:
        assert limit_warnings(model, q, "positions") == limit_warnings(model, q[None, :], "positions")
    assert limit_warnings(model, high + 0.5e-9) == [] and limit_warnings(model, np.zeros(7)) == []
    assert limit_warnings(model, high + 2e-9)[0].startswith("q: joint_1 = ")
    assert len(limit_warnings(model, low - 2e-9)) == 1
    with pytest.raises(ValueError):                   # as before: shapes that do not broadcast
        limit_warnings(model, np.zeros(6))

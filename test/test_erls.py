"""Planar ERLS flexible-link arm (flexmodal_ros.expansion.erls): model, linearization, paper's task.

Oracles: notes_000 §1 (closed forms (A2)-(A4) with the [D] corrections: rotational diagonals
4k8 / 2k8 and 4k16 / 2k16, M21 −3m6/2 and −13m16/540, C22 sign), §2 (exact-Jacobian signs of
(4)-(5) checked by central finite differences of Γ; first-order form (16), biorthonormality (18)),
§4 (the validation task: 23 DOF, 51 points, x = {q1, q2, q̇1, q̇2}, t = 4).
"""
import numpy as np
import pytest

from flexmodal_ros.expansion.erls import (ErlsSystem, linearize, load_erls, make_model, operating_point)
from flexmodal_ros.expansion.erls import erls_model as erls
from flexmodal_ros.expansion.erls.erls_linearization import linearization_terms
from flexmodal_ros.expansion.erls.erls_task import plot_validation, straight_path, validation_task
from flexmodal_ros.core.errors import ConfigError, InputError
from flexmodal_ros.expansion import eigenpairs, eigenpairs_batch, first_order_form
from flexmodal_ros.expansion.eigen import biorthogonality_error
from flexmodal_ros.robot.registry import share_dir

CONFIG = share_dir() / "config" / "erls_2link.yaml"
RNG = np.random.default_rng(2019)


@pytest.fixture(scope="module")
def arm():
    return load_erls(CONFIG)


def test_bundled_arm_is_the_papers_23_dof_mesh(arm):
    assert (arm.n, arm.n_f, arm.n_r) == (23, 21, 2)
    assert [link.elements for link in arm.links] == [4, 3]
    assert arm.payload_mass == 0.0 and all(link.hub_mass == 0.0 for link in arm.links)


# ------------------------------------------------------------------ closed forms (A2)-(A4)
def _closed_forms(arm, q1, q2):
    """k1…k16, m1…m20 of App. A.1 (notes_000 §1), transcribed."""
    l1, l2 = arm.links
    L1, L2 = l1.length, l2.length
    E, A, J, rho = l1.youngs_modulus, l1.area, l1.second_moment, l1.mass_per_length
    s1, c1, s2, c2 = np.sin(q1), np.cos(q1), np.sin(q2), np.cos(q2)
    k = {1: 4 * A * E * s1 ** 2 / L1 - 768 * E * J * (s1 ** 2 - 1) / L1 ** 3,
         2: 4 * A * E * c1 ** 2 / L1 - 768 * E * J * (c1 ** 2 - 1) / L1 ** 3,
         3: 4 * A * E * (s1 ** 2 - 1) / L1 - 768 * E * J * s1 ** 2 / L1 ** 3,
         4: 4 * A * E * (c1 ** 2 - 1) / L1 - 768 * E * J * c1 ** 2 / L1 ** 3,
         5: 2 * E * np.sin(2 * q1) * (-A * L1 ** 2 + 192 * J) / L1 ** 3,
         6: 96 * E * J * s1 / L1 ** 2, 7: 96 * E * J * c1 / L1 ** 2, 8: 8 * E * J / L1,
         9: 3 * A * E * s2 ** 2 / L2 - 324 * E * J * (s2 ** 2 - 1) / L2 ** 3,
         10: 3 * A * E * c2 ** 2 / L2 - 324 * E * J * (c2 ** 2 - 1) / L2 ** 3,
         11: 3 * A * E * (s2 ** 2 - 1) / L2 - 324 * E * J * s2 ** 2 / L2 ** 3,
         12: 3 * A * E * (c2 ** 2 - 1) / L2 - 324 * E * J * c2 ** 2 / L2 ** 3,
         13: 3 * E * np.sin(2 * q2) * (-A * L2 ** 2 + 108 * J) / (2 * L2 ** 3),
         14: 54 * E * J * s2 / L2 ** 2, 15: 54 * E * J * c2 / L2 ** 2, 16: 6 * E * J / L2}
    m = {1: rho * L1 * (4 * s1 ** 2 + 35) / 210, 2: rho * L1 * (4 * c1 ** 2 + 35) / 210,
         3: rho * L1 * (8 * s1 ** 2 - 35) / 840, 4: rho * L1 * (8 * c1 ** 2 - 35) / 840,
         5: rho * L1 * np.sin(2 * q1) / 105, 6: rho * L1 ** 2 * s1 / 8, 7: rho * L1 ** 2 * c1 / 8,
         8: rho * L1 ** 3 / 960,
         9: rho * 2 * L2 * (4 * s2 ** 2 + 35) / 315, 10: rho * 2 * L2 * (4 * c2 ** 2 + 35) / 315,
         11: rho * L2 * (8 * s2 ** 2 - 35) / 630, 12: rho * L2 * (8 * c2 ** 2 - 35) / 630,
         13: rho * 4 * L2 * np.sin(2 * q2) / 315, 14: rho * L2 ** 2 * s2 / 9, 15: rho * L2 ** 2 * c2 / 9,
         16: rho * L2 ** 3 / 3, 17: rho * L1 * L2 ** 2 * np.cos(q1 - q2) / 2,
         18: rho * L1 * L2 * s1 / 3, 19: rho * L1 * L2 * c1 / 3, 20: rho * L1 ** 2 * (L1 + 3 * L2) / 3}
    return k, m


def _assemble_printed(diag, couple, elbow_diag, elbow_couple, tip_diag):
    """21×21 symmetric matrix from the (A3)/(A4) block pattern: link-1 nodes 0-2 + elbow 3, link-2
    nodes 4-5 + tip 6; (x, y, θ) per node; elbow coupling to link 2 in its x, y rows only."""
    X = np.zeros((21, 21))
    blk = lambda i, j, B: X.__setitem__((slice(3 * i, 3 * i + B.shape[0]), slice(3 * j, 3 * j + 3)), B)
    for i in range(3):
        blk(i, i, diag[0])
        blk(i, i + 1, couple[0])
    blk(3, 3, elbow_diag)
    X[9:11, 12:15] = elbow_couple
    for i in (4, 5):
        blk(i, i, diag[1])
        blk(i, i + 1, couple[1])
    blk(6, 6, tip_diag)
    upper = np.triu(X)
    return upper + np.triu(upper, 1).T


def _printed_K11(k):
    """(A3) with the rotational diagonals corrected (printed 2k8/4k8, 2k16/4k16 are swapped)."""
    d1 = np.array([[2 * k[2], -2 * k[5], 0], [0, 2 * k[1], 0], [0, 0, 4 * k[8]]])
    c1 = np.array([[k[3], k[5], -k[6]], [k[5], k[4], k[7]], [k[6], -k[7], k[8]]])
    d2 = np.array([[2 * k[10], -2 * k[13], 0], [0, 2 * k[9], 0], [0, 0, 4 * k[16]]])
    c2 = np.array([[k[11], k[13], -k[14]], [k[13], k[12], k[15]], [k[14], -k[15], k[16]]])
    elbow = np.array([[k[2] + k[10], -k[5] - k[13], k[6]], [0, k[1] + k[9], -k[7]], [0, 0, 2 * k[8]]])
    tip = np.array([[k[10], -k[13], k[14]], [0, k[9], -k[15]], [0, 0, 2 * k[16]]])
    return _assemble_printed((d1, d2), (c1, c2), elbow, c2[:2], tip)


def _printed_M(m):
    d1 = np.array([[m[1], -m[5], 0], [0, m[2], 0], [0, 0, 2 * m[8] / 7]])
    c1 = np.array([[-m[3], m[5] / 2, 13 * m[6] / 840], [m[5] / 2, -m[4], -13 * m[7] / 840],
                   [-13 * m[6] / 840, 13 * m[7] / 840, -3 * m[8] / 28]])
    d2 = np.array([[m[9], -m[13], 0], [0, m[10], 0], [0, 0, 2 * m[16] / 945]])
    c2 = np.array([[-m[11], m[13] / 2, 13 * m[14] / 420], [m[13] / 2, -m[12], -13 * m[15] / 420],
                   [-13 * m[14] / 420, 13 * m[15] / 420, -m[16] / 1260]])
    elbow = np.array([[(m[1] + m[9]) / 2, -m[5] / 2 - m[13] / 2, 11 * m[6] / 420],
                      [0, (m[2] + m[10]) / 2, -11 * m[7] / 420], [0, 0, m[8] / 7]])
    tip = np.array([[m[9] / 2, -m[13] / 2, 11 * m[14] / 210], [0, m[10] / 2, -11 * m[15] / 210],
                    [0, 0, m[16] / 945]])
    M11 = _assemble_printed((d1, d2), (c1, c2), elbow, c2[:2], tip)
    M21 = np.array([
        [-m[6] / 2, m[7] / 2, m[8], -m[6], m[7], m[8], -3 * m[6] / 2, 3 * m[7] / 2, m[8],
         -(37 * m[6] + 20 * m[18]) / 40, (37 * m[7] + 20 * m[19]) / 40, -9 * m[8] / 2,
         -m[18], m[19], 0, -m[18], m[19], 0, -m[18] / 2, m[19] / 2, -m[17] / 54],
        [0] * 9 + [-3 * m[14] / 20, 3 * m[15] / 20, 0, -m[14], m[15], m[16] / 135, -2 * m[14], 2 * m[15],
                   m[16] / 135, -27 * m[14] / 20, 27 * m[15] / 20, -13 * m[16] / 540]])
    M22 = np.array([[m[20], m[17]], [m[17], m[16]]])
    return np.block([[M11, M21.T], [M21, M22]])


def _close(actual, expected, rtol=1e-12):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize("q", [RNG.uniform(-np.pi, np.pi, 2) for _ in range(3)])
def test_closed_forms_A2_A3_A4(arm, q):
    k, m = _closed_forms(arm, *q)
    K = erls.stiffness_matrix(arm, q)
    _close(K[:21, :21], _printed_K11(k))
    assert np.all(K[21:] == 0) and np.all(K[:, 21:] == 0)          # K = blkdiag(K11, 0)
    _close(erls.mass_matrix(arm, q), _printed_M(m))
    # the printed rotational diagonals (2k8 interior, 4k8 elbow) are a typo: the standard beam wins
    assert abs(K[2, 2] - 2 * k[8]) > 0.4 * k[8] and abs(K[11, 11] - 4 * k[8]) > 0.4 * k[8]
    l1, l2 = arm.links
    rho, g, (L1, L2) = l1.mass_per_length, 9.81, (l1.length, l2.length)
    u = RNG.normal(size=2)
    f = np.zeros(23)
    f[[1, 4, 7]] = -rho * L1 * g / 4
    f[10], f[11] = -rho * (3 * L1 + 4 * L2) * g / 24, -u[1] + rho * L1 ** 2 * g * np.cos(q[0]) / 192
    f[[13, 16]] = -rho * L2 * g / 3
    f[19], f[20] = -rho * L2 * g / 6, rho * L2 ** 2 * g * np.cos(q[1]) / 108
    f[21] = u[0] - u[1] - rho * L1 * (L1 + 2 * L2) * g * np.cos(q[0]) / 2
    f[22] = u[1] - rho * L2 ** 2 * g * np.cos(q[1]) / 2
    _close(erls.force_vector(arm, q, u), f)


def test_KS_zero_and_rigid_inertia(arm):
    for q in RNG.uniform(-np.pi, np.pi, (3, 2)):
        Mn, Kn, S = erls.nodal_matrices(arm, q)
        assert np.abs(Kn @ S).max() <= 1e-12 * np.abs(Kn).max() * np.abs(S).max()
        M = erls.mass_matrix(arm, q)
        np.testing.assert_allclose(M[21:, 21:], S.T @ Mn @ S, rtol=1e-12)
        assert np.allclose(M, M.T, rtol=0, atol=1e-15) and np.linalg.eigvalsh(M).min() > 0


def test_hub_and_payload_masses(arm):
    """Lumped masses: hub m_h (+ inertia J_h) at the elbow, payload m_p (+ J_p) at the tip: the rigid
    inertia and the rigid-row gravity gain the point-mass terms, K S = 0 still holds."""
    links = [vars(link) for link in arm.links]
    links[1] = {**links[1], "hub_mass": 0.3, "hub_inertia": 2e-3}
    heavy = make_model(links, arm.gravity, arm.alpha, arm.beta, payload_mass=0.2, payload_inertia=1e-3)
    q = np.array([-0.4, -1.1])
    L1, L2, mh, mp = arm.links[0].length, arm.links[1].length, 0.3, 0.2
    dM = erls.mass_matrix(heavy, q)[21:, 21:] - erls.mass_matrix(arm, q)[21:, 21:]
    c12 = np.cos(q[0] - q[1])
    np.testing.assert_allclose(dM, [[(mh + mp) * L1 ** 2, mp * L1 * L2 * c12],
                                    [mp * L1 * L2 * c12, mp * L2 ** 2 + 2e-3 + 1e-3]], rtol=1e-12)
    df = erls.force_vector(heavy, q, [0, 0])[21:] - erls.force_vector(arm, q, [0, 0])[21:]
    np.testing.assert_allclose(df, [-(mh + mp) * 9.81 * L1 * np.cos(q[0]), -mp * 9.81 * L2 * np.cos(q[1])],
                               rtol=1e-12)
    Mn, Kn, S = erls.nodal_matrices(heavy, q)
    assert np.abs(Kn @ S).max() <= 1e-12 * np.abs(Kn).max() * np.abs(S).max()


def test_velocity_matrix_elastic_rows_are_Mdot_and_C22_product(arm):
    q, qd = np.array([0.4, -0.9]), np.array([1.3, -0.7])
    C = erls.damping_matrix(arm, q, qd) - erls.damping_matrix(arm, q, [0.0, 0.0])   # drop Rayleigh
    h = 1e-6
    Mdot = (erls.mass_matrix(arm, q + h * qd) - erls.mass_matrix(arm, q - h * qd)) / (2 * h)
    np.testing.assert_allclose(C[:21], Mdot[:21], atol=1e-8 * np.abs(Mdot).max())
    l1, l2 = arm.links
    rho, L1, L2 = l1.mass_per_length, l1.length, l2.length
    c1 = rho * L1 * np.sin(2 * q[0]) / 105 * qd[0]
    c5 = rho * L1 ** 2 * np.cos(q[0]) / 8 * qd[0]
    c13 = rho * L1 * L2 ** 2 * np.sin(q[0] - q[1]) / 2
    assert C[0, 0] == pytest.approx(2 * c1, rel=1e-12) and C[0, 21] == pytest.approx(-c5 / 2, rel=1e-12)
    # (A5) C22 = [[0, c13 q̇2], [−c13 q̇1, 0]] (sign of the (2,1) entry corrected, notes_000 §1)
    np.testing.assert_allclose(C[21:, 21:] @ qd, [c13 * qd[1] ** 2, -c13 * qd[0] ** 2], rtol=1e-12)
    # Rayleigh part: α M[:, :nf] + β K
    D = erls.damping_matrix(arm, q, [0.0, 0.0])
    M, K = erls.mass_matrix(arm, q), erls.stiffness_matrix(arm, q)
    np.testing.assert_allclose(D[:, :21], arm.alpha * M[:, :21] + arm.beta * K[:, :21], rtol=1e-12)
    assert np.all(D[:, 21:] == 0)


# ------------------------------------------------------------------ linearization (4)-(11)
@pytest.fixture(scope="module")
def moving_point(arm):
    """A dynamic equilibrium with quasi-static deflection (every term of (4) non-zero)."""
    return operating_point(arm, [-0.7, -1.3], [1.1, -2.0], [3.0, -4.0], deflection="quasi-static")


def test_operating_points_solve_gamma(arm, moving_point):
    p = moving_point
    res = erls.residual(arm, p.q, p.qd, p.qdd, p.u)
    assert np.abs(res).max() <= 1e-9 * np.abs(erls.stiffness_matrix(arm, p.q[21:]) @ p.q).max()
    nominal = operating_point(arm, [-0.7, -1.3], [1.1, -2.0], [3.0, -4.0])
    assert np.all(nominal.q[:21] == 0)
    res = erls.residual(arm, nominal.q, nominal.qd, nominal.qdd, nominal.u)
    assert np.abs(res[21:]).max() <= 1e-12
    with pytest.raises(InputError, match="deflection"):
        operating_point(arm, [0, 0], deflection="bent")


def _fd_jacobian(fun, x, h=1e-6):
    cols = [(fun(x + h * e) - fun(x - h * e)) / (2 * h) for e in np.eye(x.size)]
    return np.column_stack(cols)


def _fd_linearization(arm, p):
    gamma = lambda q=p.q, qd=p.qd, qdd=p.qdd, u=p.u: erls.residual(arm, q, qd, qdd, u)
    return {"K": _fd_jacobian(lambda q: gamma(q=q), p.q), "C": _fd_jacobian(lambda qd: gamma(qd=qd), p.qd),
            "M": _fd_jacobian(lambda qdd: gamma(qdd=qdd), p.qdd), "F": -_fd_jacobian(lambda u: gamma(u=u), p.u)}


def _column_error(a, ref):
    return (np.abs(a - ref).max(axis=0) / np.maximum(np.abs(ref).max(axis=0), 1e-300)).max()


def test_linearization_signs_match_finite_differences(arm, moving_point):
    """(4)-(7) with the exact-Jacobian signs equal central differences of Γ (every column to 1e-6),
    at a deflected dynamic equilibrium (all terms of (4) non-zero) and at the nominal motion."""
    nominal = operating_point(arm, [-0.7, -1.3], [1.1, -2.0], [3.0, -4.0])
    for p in (moving_point, nominal):
        lin, fd = linearize(arm, p), _fd_linearization(arm, p)
        for name in "KCMF":
            assert _column_error(getattr(lin, name), fd[name]) <= 1e-6, name
    # the signs as extracted, −∂M/∂q⊗q̈ … + ∂f/∂q (4) and −∂C/∂q̇⊗q̇ (5), fail the same check by far
    t = linearization_terms(arm, nominal)
    assert _column_error(-t["dM_qdd"] + t["dC_qd"] + t["dK_q"] + t["K"] + t["df_q"], fd["K"]) > 0.1
    assert _column_error(-t["dCv_qd"] + t["C"], fd["C"]) > 0.1


def test_first_order_form_and_biorthonormality(arm, moving_point):
    lin = linearize(arm, moving_point)
    pairs = eigenpairs(lin.M, lin.C, lin.K)
    assert pairs.eigenvalues.size == 46
    A, B = first_order_form(lin.M, lin.C, lin.K)
    W = np.vstack([pairs.right, pairs.right * pairs.eigenvalues])           # (17) w = [φ; λφ]
    scale = (np.linalg.norm(A, 2) + np.abs(pairs.eigenvalues) * np.linalg.norm(B, 2)) * np.linalg.norm(W, axis=0)
    res = np.linalg.norm(A @ W - B @ W * pairs.eigenvalues, axis=0) / scale     # backward error
    assert res.max() <= 1e-10
    batch = eigenpairs_batch(lin.M[None], lin.C[None], lin.K[None])[0]
    for p in (pairs, batch):                                  # (18) over all 46 eigenpairs
        eB, eA = biorthogonality_error(lin.M, lin.C, lin.K, p)
        assert eB <= 1e-9 and eA <= 1e-9, (eB, eA)
    m1, m2 = pairs.modes(), batch.modes()
    np.testing.assert_allclose(m1.frequencies_hz[:10], m2.frequencies_hz[:10], rtol=1e-9)


# ------------------------------------------------------------------ paper's task (§4)
@pytest.fixture(scope="module")
def task(arm):
    return validation_task(arm)


def test_paper_task(task, tmp_path):
    """f of the first analysed mode varies ≥ 5 % along the path; MAC ≥ 0.99 (right, left) and
    ε_f ≤ 1 % on the middle 80 % for the three analysed modes; plots like Figs. 3-5."""
    s = task.summary()
    assert len(task.trajectory.t) == 51 and task.polynomial.num_terms == 70 and task.polynomial.order == 4
    assert task.polynomial.parameter_names == ("q_1", "q_2", "qd_1", "qd_2")
    p = task.trajectory.position
    assert np.allclose(p[:, 1], p[0, 1]) and abs(np.ptp(p[:, 0]) - 0.3) < 1e-12 and task.trajectory.t[-1] == 0.5
    assert s["frequency_variation_percent"][0] >= 5.0
    assert max(s["max_eps_f_middle_percent"]) <= 1.0
    assert min(s["min_mac_right_middle"]) >= 0.99 and min(s["min_mac_left_middle"]) >= 0.99
    mid = len(task.trajectory.t) // 2
    assert np.abs(task.eps_f[mid]).max() <= 1e-8 and task.mac_right[mid].min() >= 1 - 1e-10
    files = plot_validation(task, tmp_path, modes=[0])
    assert len(files) == 1 and files[0].stat().st_size > 10_000


def test_straight_path_kinematics(arm):
    traj = straight_path(arm)
    L1, L2 = (link.length for link in arm.links)
    e = lambda a: np.stack([np.cos(a), np.sin(a)], axis=-1)
    np.testing.assert_allclose(L1 * e(traj.q[:, 0]) + L2 * e(traj.q[:, 1]), traj.position, atol=1e-12)
    h = traj.t[1] - traj.t[0]
    np.testing.assert_allclose(np.gradient(traj.q, h, axis=0)[1:-1], traj.qd[1:-1], atol=2e-2)
    assert np.all(traj.qd[[0, -1]] == 0) and np.all(np.abs(traj.qdd[[0, -1]]) < 1e-12)
    with pytest.raises(InputError, match="reach"):
        straight_path(arm, (2.0, 0.0), (2.3, 0.0))


# ------------------------------------------------------------------ bad model files
@pytest.mark.parametrize("text, field", [
    ("model: erls\ngravity: [0, -9.81]\nlinks: []\n", "links"),
    ("model: erls\ngravity: [0, -9.81]\nbogus: 1\nlinks: []\n", "bogus"),
    ("model: erls\nlinks: [{length: 1, elements: 2, youngs_modulus: 1, area: 1, second_moment: 1, "
     "mass_per_length: 1}]\n", "gravity"),
    ("model: erls\ngravity: [0, -9.81]\nlinks: [{length: -1, elements: 2, youngs_modulus: 1, area: 1, "
     "second_moment: 1, mass_per_length: 1}]\n", "length"),
    ("model: erls\ngravity: [0, -9.81]\nlinks: [{length: 1, elements: 0, youngs_modulus: 1, area: 1, "
     "second_moment: 1, mass_per_length: 1}]\n", "elements"),
    ("model: erls\ngravity: [0, -9.81]\nlinks: [{length: 1, elements: 2, area: 1, second_moment: 1, "
     "mass_per_length: 1}]\n", "youngs_modulus"),
    ("model: erls\ngravity: [0, .nan]\nlinks: [{length: 1, elements: 2, youngs_modulus: 1, area: 1, "
     "second_moment: 1, mass_per_length: 1}]\n", "gravity"),
    ("model: joints\ngravity: [0, -9.81]\nlinks: []\n", "model"),
])
def test_bad_model_files(tmp_path, text, field):
    path = tmp_path / "arm.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_erls(path)


def test_bad_numeric_inputs(arm):
    with pytest.raises(InputError, match="q_r"):
        erls.mass_matrix(arm, [0.1])
    with pytest.raises(InputError, match="NaN"):
        erls.mass_matrix(arm, [0.1, np.nan])
    with pytest.raises(InputError, match="payload_mass"):
        operating_point(arm, [0.1, 0.2], payload_mass=-1.0)
    with pytest.raises(InputError, match="parameters"):
        ErlsSystem(arm, operating_point(arm, [0.1, 0.2]), ("positions", "accelerations"))
    with pytest.raises(InputError, match="positions"):
        ErlsSystem(arm, operating_point(arm, [0.1, 0.2]), ("velocities",))
    small = make_model([{"length": 1.0, "elements": 2, "youngs_modulus": 1e9, "area": 1e-4,
                         "second_moment": 1e-9, "mass_per_length": 0.3}])
    assert (small.n_f, small.n_r) == (6, 1)

"""Flexible double pendulum (floating-frame FE) against González et al. Tables 3 and 5.

Table 3 (n_p = 50, MCS): ±1.3357i, ±3.5244i, ±9.4175i, ±22.4054i — this model reproduces all four
to the printed digits (the issue asks s1 to the digits and s2–s4 within 0.5 %). Table 5: maximum
differences from MCS over the first four eigenvalues; the paper's RCS differences (up to 2.5e-6)
came from an unscaled QZ — here |RCS − MCS| ≤ 1e-8 for n_p = 10…100 on the dense (refined) and
the sparse path, and UCS − MCS is the penalty model's own error, ≈ 1.4e-4 (Re) and 3.6e-5 (Im)
as printed.
"""
import numpy as np
import pytest

from flexmodal_ros.constrained import Penalty, modal_analysis, static_equilibrium
from flexmodal_ros.constrained.pencils import INFINITE_TOL, qz
from flexmodal_ros.modes import lowest_modes as _lowest_oscillatory
from flexmodal_ros.constrained.checks import linearization_fd_errors
from flexmodal_ros.constrained.linearizations import rcs_linearization
from flexmodal_ros.constrained.paper_models import load_paper_model
from flexmodal_ros.constrained.pendulum import PendulumParameters

TABLE_3 = np.array([1.3357, 3.5244, 9.4175, 22.4054])
TABLE_5_UCS = {"re": 1.4e-4, "im": 3.6e-5}    # n_p = 10..50 (3.7e-5, 3.8e-5 at 75, 100)
RCS_MCS_TOL = 1e-8
PENALTY = Penalty(1e7, 1.0, 10.0)             # source §5.2
FRAME_DEPENDENT = ["x1", "y1", "u1_0", "v1_0", "psi1_0", "u2_0", "v2_0", "psi2_0", "x2", "y2"]


def _pendulum(elements):
    model = load_paper_model("pendulum", elements=elements)
    assert model.penalty == PENALTY
    eq = static_equilibrium(model.system, model.guess)
    assert model.system.n == 6 * elements + 12 and model.system.m == 10 and eq.constraint_rank == 10
    return model.system, eq


def _first_four(system, eq, method, **kw):
    r = modal_analysis(system, eq, method, penalty=PENALTY, **kw)
    assert r.num_modes >= 4 and r.real_eigenvalues.size == 0
    return r


def _check_table_3(system, eq, **kw):
    s = _first_four(system, eq, "mcs", **kw).eigenvalues[:4]
    np.testing.assert_array_equal(np.round(s.imag, 4), TABLE_3)
    assert np.abs(s.real).max() < 1e-9


def test_table_3_quick_sparse_path():
    """n_p = 50 by the sparse shift-invert path (first four modes only)."""
    system, eq = _pendulum(50)
    _check_table_3(system, eq, num_modes=4)
    # the hanging equilibrium is pre-stretched by gravity: link 1 carries 2mg at the top and mg at
    # the bottom, so its tip moves (2mg + mg)/2 · L/EA = 3.5316 mm along the link
    p = PendulumParameters(elements=50)
    weight = p.link_mass * 9.81
    stretch = 1.5 * weight * p.length / (p.youngs_modulus * p.area)
    assert abs(eq.q[system.index("u1_50")] - stretch) < 1e-9 and abs(stretch - 3.5316e-3) < 1e-7
    assert abs(eq.q[system.index("theta1")] + np.pi / 2) < 1e-12


@pytest.mark.slow
def test_table_3_dense():
    system, eq = _pendulum(50)
    _check_table_3(system, eq, refine=4)


def _table_5_row(elements, dense):
    system, eq = _pendulum(elements)
    kw = {"refine": 4} if dense else {"num_modes": 4}
    s = {m: _first_four(system, eq, m, **kw).eigenvalues[:4] for m in ("mcs", "rcs", "ucs")}
    d_rcs, d_ucs = s["rcs"] - s["mcs"], s["ucs"] - s["mcs"]
    assert np.abs(d_rcs).max() <= RCS_MCS_TOL, np.abs(d_rcs).max()
    assert 0.7 * TABLE_5_UCS["re"] <= np.abs(d_ucs.real).max() <= 1.5 * TABLE_5_UCS["re"]
    assert 0.7 * TABLE_5_UCS["im"] <= np.abs(d_ucs.imag).max() <= 1.5 * TABLE_5_UCS["im"]
    return system, eq


def test_table_5_quick_dense_n10_and_spurious_counts():
    system, eq = _table_5_row(10, dense=True)
    rcs = modal_analysis(system, eq, "rcs")
    assert rcs.spurious_eigenvalues.size == 3 * system.m and rcs.num_modes == system.n - system.m
    assert rcs.diagnostics["max_infinite_beta"] <= 1e-12 < rcs.diagnostics["min_finite_beta"]
    ucs = modal_analysis(system, eq, "ucs", penalty=PENALTY)
    assert ucs.spurious_eigenvalues.size == 2 * system.m and ucs.num_modes == system.n - system.m
    gap = ucs.diagnostics["min_spurious_violation"] / ucs.diagnostics["max_physical_violation"]
    assert gap > 100
    assert modal_analysis(system, eq, "mcs").num_modes == system.n - system.m


@pytest.mark.slow
def test_table_5_dense_n25_conditioning_is_the_work():
    """Unrefined QZ at n_p = 25 (the issue's trial): QZ on the bare, unscaled index-3 pencil misses
    5e-9 (≈7e-7, the paper's order); the product's pencil — scaled and with its position- and
    velocity-level infinite eigenvalues deflated exactly — meets it, and the deflation alone does."""
    system, eq = _table_5_row(25, dense=True)
    ref = _first_four(system, eq, "mcs", num_modes=4).eigenvalues[:4]
    bare = rcs_linearization(system, eq, scale=False)
    w, _, infinite, _ = qz(bare.A, bare.E, INFINITE_TOL)
    w = w[~infinite]
    bare_first = w[_lowest_oscillatory(w, 4)]
    product = _first_four(system, eq, "rcs")
    deflated_unscaled = _first_four(system, eq, "rcs", scale=False).eigenvalues[:4]
    assert np.abs(product.eigenvalues[:4] - ref).max() <= 5e-9 < np.abs(bare_first - ref).max()
    assert np.abs(deflated_unscaled - ref).max() <= 5e-9
    assert product.diagnostics["deflated_infinite"] == 2 * system.m
    assert product.diagnostics["qz_order"] == system.n        # undamped: the μ = s² form


@pytest.mark.slow
@pytest.mark.parametrize("elements", (75, 100))
def test_table_5_dense_large(elements):
    """The dense path (QZ / eigh / dgeev, then the four lowest modes refined) at n_p = 75, 100."""
    _table_5_row(elements, dense=True)


@pytest.mark.slow
@pytest.mark.parametrize("elements", (75, 100))
def test_table_5_sparse_large(elements):
    _table_5_row(elements, dense=False)


@pytest.mark.slow
def test_rcs_refinement_at_scaling_plot_sizes():
    """n_p = 300 (the scaling plot's range, beyond Table 5): the RCS refinement with the multiplier
    term of the Lagrangian functional stays within 1e-8 of MCS; the plain Rayleigh root of the
    shape projected onto Φ_q v = 0 drifted to ~1e-7 here (2.5e-6 at n_p = 400)."""
    system, eq = _pendulum(300)
    s = {m: _first_four(system, eq, m, num_modes=4).eigenvalues[:4] for m in ("mcs", "rcs")}
    assert np.abs(s["rcs"] - s["mcs"]).max() <= RCS_MCS_TOL


def test_finite_difference_linearization_pendulum():
    system, eq = _pendulum(2)
    independent = [c for c in system.coordinate_names if c not in FRAME_DEPENDENT]
    errors = linearization_fd_errors(system, eq, independent, PENALTY)
    assert max(max(e.values()) for e in errors.values()) < 1e-5, errors

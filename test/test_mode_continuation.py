"""Newton continuation of a few modes and the K̄ > 0 stability certificate
(flexmodal_ros.flexible_joint.continuation) against LAPACK's full eigen-decomposition."""
import numpy as np
import pytest

from flexmodal_ros.flexible_joint.linear_model import configuration_terms
from flexmodal_ros.flexible_joint.ama import modal_analysis, modal_analysis_batch
from flexmodal_ros.flexible_joint.continuation import (certificate_applies, certified_stable, continue_modes,
                                             link_matrices)
from flexmodal_ros.robot.model import create_data, with_overrides
from flexmodal_ros.robot.registry import load_robot

ROBOTS = ("kuka_lwr4", "scompi")


def _configurations(model, count, seed):
    rng = np.random.default_rng(seed)
    lo = np.maximum(model.position_lower, -np.pi)
    hi = np.minimum(model.position_upper, np.pi)
    return lo + (hi - lo) * rng.random((count, model.n))


def _terms(model, qs):
    M, KG, _ = configuration_terms(model, create_data(model), qs)
    return M, KG


@pytest.mark.parametrize("name", ROBOTS)
def test_link_matrix_is_singular_at_the_eigenvalues_and_its_derivative_is_numeric(name):
    """T(λ) u_q = 0 for every LAPACK eigenpair (u_q the link rows of the mode shape), and dT/dλ
    equals the central difference of T (the rational term included)."""
    model = load_robot(name)
    qs = _configurations(model, 4, 1)
    M, KG = _terms(model, qs)
    for q, Mi, Ki in zip(qs, M, KG):
        res = modal_analysis(model, q)
        k = res.num_modes
        T, dT = link_matrices(model, np.repeat(Mi[None], k, 0), np.repeat(Ki[None], k, 0), res.eigenvalues)
        u = res.mode_shapes[:model.n].T                                        # (k, n)
        residual = np.linalg.norm(np.einsum("bij,bj->bi", T, u), axis=1)
        scale = np.linalg.norm(T, axis=(1, 2)) * np.linalg.norm(u, axis=1)
        assert (residual / scale).max() < 1e-11
        h = 1e-6 * np.abs(res.eigenvalues)
        Tp, _ = link_matrices(model, np.repeat(Mi[None], k, 0), np.repeat(Ki[None], k, 0), res.eigenvalues + h)
        Tm, _ = link_matrices(model, np.repeat(Mi[None], k, 0), np.repeat(Ki[None], k, 0), res.eigenvalues - h)
        numeric = (Tp - Tm) / (2 * h[:, None, None])
        assert np.abs(numeric - dT).max() <= 1e-7 * np.abs(dT).max()


@pytest.mark.parametrize("name", ROBOTS)
def test_continued_modes_equal_lapack_from_a_neighbouring_configuration(name):
    """Started from the modes of a configuration 0.05 rad away (eigenvalue and link shape), Newton
    lands on LAPACK's eigenvalue of the target configuration to 1e-12 (relative)."""
    model = load_robot(name)
    qs = _configurations(model, 12, 2)
    near = qs + 0.05
    start = modal_analysis_batch(model, near)
    exact = modal_analysis_batch(model, qs)
    picks = [0, 1, start[0].num_modes - 1]
    M, KG = _terms(model, qs)
    guesses = np.array([r.eigenvalues[picks] for r in start])
    shapes = np.array([r.mode_shapes[:model.n, picks] for r in start])
    cont = continue_modes(model, M, KG, guesses, shapes)
    assert cont.converged.all()
    for lam, res in zip(cont.eigenvalues, exact):
        gap = np.abs(lam[:, None] - res.eigenvalues[None, :]).min(axis=1) / np.abs(lam)
        assert gap.max() < 1e-12


def test_continuation_reports_a_start_it_cannot_use():
    model = load_robot("kuka_lwr4")
    qs = _configurations(model, 2, 3)
    M, KG = _terms(model, qs)
    res = modal_analysis(model, qs[0])
    shapes = np.repeat(res.mode_shapes[None, :model.n, :1], 2, 0)
    cont = continue_modes(model, M, KG, np.array([[np.nan], [res.eigenvalues[0]]]), shapes)
    assert cont.converged.tolist() == [[False], [True]]


@pytest.mark.parametrize("scale", [1.0, 0.05, 0.012, 0.008, 0.004])
def test_certificate_equals_the_stability_of_the_eigenvalues(scale):
    """K̄ > 0 ⇔ asymptotically stable: across random configurations and weak position gains (kp
    scaled down until gravity wins in some configurations) the certificate agrees with the label
    of the full eigen-decomposition at every configuration."""
    model = with_overrides(load_robot("kuka_lwr4"), kp=load_robot("kuka_lwr4").kp * scale)
    qs = _configurations(model, 60, 4)
    _, KG = _terms(model, qs)
    labels = np.array([r.stability for r in modal_analysis_batch(model, qs, shapes=False)])
    np.testing.assert_array_equal(certified_stable(model, KG), labels == "stable")
    if scale < 0.01:
        assert (labels == "unstable").any()


def test_certificate_refuses_the_models_it_does_not_decide():
    lwr = load_robot("kuka_lwr4")
    assert certificate_applies(lwr)
    _, KG = _terms(lwr, _configurations(lwr, 1, 5))
    for model in (with_overrides(lwr, wrench=[0, 0, -10, 0, 0, 0]), with_overrides(lwr, kd=0.0, d_fm=0.0)):
        assert not certificate_applies(model)
        with pytest.raises(ValueError, match="stability certificate"):
            certified_stable(model, KG)

"""Shared modal helpers (modes.py): f/ζ from eigenvalues, stability with a relative tolerance,
sorting and shape normalization; the flexible-joint AMA uses them (issue 11 item 14)."""
import numpy as np

from flexmodal_ros.modal import modal_analysis
from flexmodal_ros.model import with_overrides
from flexmodal_ros.modes import (MARGINAL, STABLE, UNSTABLE, classify_stability,
                                 frequencies_and_damping, modes_from_eigenpairs)
from flexmodal_ros.robots import load_robot


def test_frequencies_and_damping():
    lam = np.array([-0.1 + 2j * np.pi, 0j, -3.0 + 4j])
    f, z = frequencies_and_damping(lam)
    np.testing.assert_allclose(f, [abs(lam[0]) / (2 * np.pi), 0.0, 5 / (2 * np.pi)])
    np.testing.assert_allclose(z, [0.1 / abs(lam[0]), 0.0, 0.6])


def test_stability_labels_use_a_relative_tolerance():
    w = np.array([-1e-15 + 100j, -1e-15 - 100j, -5 + 3e3j, -5 - 3e3j])
    assert classify_stability(w)[0] == MARGINAL
    assert classify_stability(w + 1e-3)[0] == UNSTABLE
    label, bad = classify_stability(w - 1e-3)
    assert label == STABLE and bad.size == 0
    label, bad = classify_stability(np.array([8e-16 + 1e4j, 8e-16 - 1e4j]))
    assert label == MARGINAL and bad.size == 2  # round-off is not instability


def test_modes_sorted_and_normalized():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(2, 6, 6))
    w, v = np.linalg.eig(A)
    for s, wb, Ab in zip(modes_from_eigenpairs(w, v), w, A):
        assert np.all(np.diff(s.frequencies_hz) >= 0) and np.all(s.eigenvalues.imag > 0)
        np.testing.assert_allclose(np.linalg.norm(s.mode_shapes, axis=0), 1.0)
        pivots = s.mode_shapes[np.argmax(np.abs(s.mode_shapes), axis=0), range(s.num_modes)]
        assert np.all(np.abs(pivots.imag) < 1e-14) and np.all(pivots.real > 0)
        for lam, u in zip(s.eigenvalues, s.mode_shapes.T):  # still eigenvectors
            assert np.linalg.norm(Ab @ u - lam * u) < 1e-10
        assert s.num_modes * 2 + s.real_eigenvalues.size == 6


def test_undamped_robot_is_marginally_stable_not_unstable():
    """No damping anywhere (d_f = d_fm = K_D = 0): Re λ is round-off only → 'marginally stable'."""
    m = with_overrides(load_robot("planar_2r"), kd=0.0, d_f=0.0, d_fm=0.0)
    r = modal_analysis(m, [0.3, 1.2])
    assert r.stability == MARGINAL and not r.stable
    assert np.all(np.abs(r.damping_ratios) < 1e-9)
    assert r.to_dict()["stability"] == MARGINAL

"""Shared modal helpers (modes.py): f/ζ from eigenvalues, stability with a relative tolerance,
sorting and shape normalization; the flexible-joint AMA uses them (issue 11 item 14)."""
import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.modes import (MARGINAL, STABLE, UNSTABLE, classify_stability,
                                 frequencies_and_damping, modes_from_eigenpairs)
from flexmodal_ros.robot.registry import load_robot


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


def test_eigenvalue_arrays_equal_the_eigenvalue_only_batch():
    """modal_analysis_arrays (no result objects, chunks joined) = modal_analysis_batch(shapes=False)
    bit for bit: f, ζ, eigenvalues, counts, stability (stable kuka_lwr4, marginal undamped
    planar_2r); NaN after each configuration's modes; bad configurations refused by name."""
    from flexmodal_ros.flexible_joint.ama import modal_analysis_arrays, modal_analysis_batch
    cases = [(load_robot("kuka_lwr4"), 2.0), (with_overrides(load_robot("planar_2r"), kd=0.0, d_f=0.0, d_fm=0.0), 1.5)]
    for m, spread in cases:
        qs = np.random.default_rng(3).uniform(-spread, spread, (11, m.n))
        arrays = modal_analysis_arrays(m, qs, chunk_size=4)
        ref = modal_analysis_batch(m, qs, workers=1, shapes=False)
        assert arrays.stability == [r.stability for r in ref]
        np.testing.assert_array_equal(arrays.num_modes, [r.num_modes for r in ref])
        for b, r in enumerate(ref):
            np.testing.assert_array_equal(arrays.eigenvalues[b, :r.num_modes], r.eigenvalues)
            np.testing.assert_array_equal(arrays.frequencies_hz[b, :r.num_modes], r.frequencies_hz)
            np.testing.assert_array_equal(arrays.damping_ratios[b, :r.num_modes], r.damping_ratios)
            assert np.isnan(arrays.frequencies_hz[b, r.num_modes:]).all()
    assert set(arrays.stability) == {MARGINAL}
    with pytest.raises(InputError, match="configurations: expected 2 values"):
        modal_analysis_arrays(m, np.zeros((3, 3)))
    with pytest.raises(InputError, match="configurations"):
        modal_analysis_arrays(m, [[0.1, float("nan")]])


def test_fast_single_path_equals_batched_path():
    """modal_analysis (LAPACK real format, structured A) = the batched numpy path, with and
    without shapes; closed_loop_state_matrix = state_matrix(assemble(...)) (2.9)-(2.14)."""
    from flexmodal_ros.flexible_joint.linear_model import (assemble, closed_loop_state_matrix, configuration_terms,
                                         state_matrix)
    from flexmodal_ros.flexible_joint.ama import modal_analysis_batch
    from flexmodal_ros.robot.model import create_data
    for robot in ("scompi", "kuka_lwr4"):
        m = load_robot(robot)
        qs = np.random.default_rng(1).uniform(-1, 1, (4, m.n))
        M, KG, _ = configuration_terms(m, create_data(m), qs)
        A = state_matrix(*assemble(M, KG, m.k, m.W, m.d_f, m.d_fm, m.B, m.kp, m.kd))
        np.testing.assert_allclose(closed_loop_state_matrix(m, M, KG), A, rtol=0, atol=1e-12 * abs(A).max())
        for q, rb, rv in zip(qs, modal_analysis_batch(m, qs, workers=1),
                             modal_analysis_batch(m, qs, workers=1, shapes=False)):
            for r in (modal_analysis(m, q), modal_analysis(m, q, shapes=False)):
                np.testing.assert_allclose(r.eigenvalues, rb.eigenvalues, rtol=1e-10)
                np.testing.assert_allclose(r.motor_equilibrium, rb.motor_equilibrium, rtol=1e-12)
                assert r.stability == rb.stability
            np.testing.assert_allclose(rv.frequencies_hz, rb.frequencies_hz, rtol=1e-10)
            assert rv.mode_shapes.shape == (0, rb.num_modes)
            full = modal_analysis(m, q)
            np.testing.assert_allclose(np.abs(full.mode_shapes.conj().T @ rb.mode_shapes).diagonal(), 1.0,
                                       atol=1e-8)  # same unit shapes (up to phase)


def test_single_configuration_terms_equal_the_separate_pinocchio_calls():
    """g(q) taken from data.g after the gravity-derivative pass equals computeGeneralizedGravity."""
    from flexmodal_ros.flexible_joint.linear_model import configuration_terms, single_configuration_terms
    from flexmodal_ros.robot.model import create_data, with_overrides
    for robot in ("scompi", "kuka_lwr4"):
        m = with_overrides(load_robot(robot), wrench=[1.0, -2.0, 3.0, 0.1, 0.2, -0.3])
        d = create_data(m)
        for q in np.random.default_rng(4).uniform(-1, 1, (3, m.n)):
            _, KG, comp = configuration_terms(m, d, q[None])
            KG1, comp1 = single_configuration_terms(m, d, q)
            np.testing.assert_allclose(KG1, KG[0], rtol=1e-13, atol=1e-12)
            np.testing.assert_allclose(comp1, comp[0], rtol=1e-13, atol=1e-12)


def _real_layout(w, v):
    """numpy eig output → LAPACK's real layout (wr, wi, vt) for the comparison below."""
    return w.real, w.imag, np.where(w.imag[:, None, :] < 0, -v.imag, v.real).transpose(0, 2, 1).copy()


def test_real_layout_modes_equal_complex_modes():
    """modes_from_real_eigenpairs / spectrum_modes (LAPACK layout) = modes_from_eigenpairs on
    numpy's complex output, for spectra with pairs and real eigenvalues."""
    from flexmodal_ros.modes import first_mode_set, modes_from_eigen, modes_from_real_eigenpairs, spectrum_modes
    A = np.random.default_rng(5).normal(size=(6, 8, 8))
    w, v = np.linalg.eig(A)
    wr, wi, vt = _real_layout(w, v)
    assert (wi == 0).any() and (wi > 0).any()
    rows = slice(0, 5)
    ref = modes_from_eigenpairs(w, v, rows=rows)
    for batch in (modes_from_real_eigenpairs(wr, wi, vt, rows=rows),
                  [first_mode_set(spectrum_modes(wr[b:b + 1], wi[b:b + 1], vt[b:b + 1], rows=rows)) for b in range(6)],
                  [modes_from_eigen(w[b], v[b], rows=rows) for b in range(6)]):
        for r, s in zip(ref, batch):
            np.testing.assert_array_equal(s.eigenvalues, r.eigenvalues)
            np.testing.assert_allclose(s.mode_shapes, r.mode_shapes, rtol=0, atol=1e-14)
            np.testing.assert_array_equal(s.real_eigenvalues, r.real_eigenvalues)
            assert s.stability == r.stability and s.unstable_eigenvalues.size == r.unstable_eigenvalues.size
    shapeless = modes_from_real_eigenpairs(wr, wi, None)
    assert all(s.mode_shapes.shape == (0, r.num_modes) for s, r in zip(shapeless, ref))


def test_repeated_eig_equals_numpy_with_and_without_the_extension():
    """RepeatedEig, compiled (the install-time extension over scipy.linalg.cython_lapack) and
    fallback (SciPy's dgeev wrapper / NumPy), gives numpy's eigenvalues and eigenvectors; bad
    batches are refused with a message."""
    from flexmodal_ros.linalg.lapack import RepeatedEig
    A = np.random.default_rng(6).normal(size=(5, 9, 9))
    w, v = np.linalg.eig(A)
    for compiled in (True, False):
        solver = RepeatedEig(9, compiled=compiled)
        wr, wi, vt = solver.solve_many(np.ascontiguousarray(A.transpose(0, 2, 1)))
        np.testing.assert_allclose(wr + 1j * wi, w, rtol=1e-12, atol=1e-12)
        ref = _real_layout(w, v)[2]
        for b in range(5):     # vectors agree up to sign (columns are unit vectors or pair parts)
            sign = np.sign((vt[b] * ref[b]).sum(axis=1))[:, None]
            np.testing.assert_allclose(vt[b] * sign, ref[b], atol=1e-10)
        np.copyto(solver.a, A[0])
        assert solver.solve() == 0
        np.testing.assert_allclose(solver.wr + 1j * solver.wi, w[0], rtol=1e-12, atol=1e-12)
        with pytest.raises(ValueError, match="C-contiguous float64"):
            solver.solve_many(A[:, :, :8].copy())
        eigenvalues_only = RepeatedEig(9, vectors=False, compiled=compiled)
        wr, wi, vt = eigenvalues_only.solve_many(np.ascontiguousarray(A.transpose(0, 2, 1)))
        assert vt is None
        np.testing.assert_allclose(wr + 1j * wi, w, rtol=1e-12, atol=1e-12)


def test_the_extension_is_built_by_the_install_and_a_failed_eigensolution_is_reported():
    """make setup / pip install build the LAPACK extension (no silent fallback in the suite's own
    environment); a matrix LAPACK cannot solve (NaN) raises LinAlgError naming the batch entry,
    on both paths."""
    from flexmodal_ros.linalg.lapack import RepeatedEig, extension_status
    module, why = extension_status()
    assert module is not None, why
    A = np.random.default_rng(7).normal(size=(3, 8, 8))
    A[1, 2, 3] = np.nan
    for compiled in (True, False):
        solver = RepeatedEig(8, compiled=compiled)
        with pytest.raises(np.linalg.LinAlgError):
            solver.modes_many(np.ascontiguousarray(A.transpose(0, 2, 1)), 4)


def _spectra_with_pairs_reals_and_the_axis(rng, count, n):
    """Random real matrices (shifted left for half of them), plus one with eigenvalues on the
    imaginary axis (marginal) and one with an unstable pair: every branch of the mode extraction runs."""
    A = rng.normal(size=(count, n, n))
    rot = np.array([[0.0, 3.0], [-3.0, 0.0]])
    A[0] = np.kron(np.eye(n // 2), rot) - np.diag(np.r_[np.zeros(2), np.full(n - 2, 0.5)])
    A[1] = np.kron(np.eye(n // 2), rot) + np.diag(np.r_[np.full(2, 0.2), np.full(n - 2, -0.5)])
    A[2:count // 2] -= 4.0 * np.eye(n)          # mostly stable
    return A


def test_compiled_modes_equal_the_numpy_reference():
    """RepeatedEig.modes_many / modes of the extension (dgeev + the mode extraction of
    lapack_batch.c) = its dgeev followed by spectrum_modes (NumPy) on the same matrices, exactly:
    eigenvalues, f, ζ, shapes, real eigenvalues, stability; with and without vectors. The
    fallback (NumPy's eig + spectrum_modes) gives the same modes to round-off."""
    from flexmodal_ros.linalg.lapack import RepeatedEig
    from flexmodal_ros.modes import first_mode_set, mode_sets, spectrum_modes
    rng = np.random.default_rng(11)
    A = _spectra_with_pairs_reals_and_the_axis(rng, 12, 10)
    rows = 6
    for vectors in (True, False):
        solver = RepeatedEig(10, vectors, compiled=True)
        at = np.ascontiguousarray(A.transpose(0, 2, 1))
        ref = mode_sets(spectrum_modes(*solver.solve_many(at.copy()), slice(0, rows)))   # same dgeev, NumPy extraction
        fallback = RepeatedEig(10, vectors, compiled=False)
        assert not fallback.assembles
        for r, x in zip(ref, mode_sets(fallback.modes_many(at.copy(), rows))):   # the fallback path: NumPy's eig
            assert x.num_modes == r.num_modes and x.stability == r.stability
            np.testing.assert_allclose(x.eigenvalues, r.eigenvalues, rtol=1e-12)
            np.testing.assert_allclose(np.abs(x.mode_shapes), np.abs(r.mode_shapes), atol=1e-10)
        fast = mode_sets(solver.modes_many(at.copy(), rows))
        single = []
        for b in range(A.shape[0]):
            np.copyto(solver.a, A[b])
            single.append(first_mode_set(solver.modes(rows)))
        assert {r.stability for r in ref} == {STABLE, MARGINAL, UNSTABLE}
        spectra = solver.modes_many(at.copy(), rows)
        assert spectra.labels() == [r.stability for r in ref]
        freq, zeta, lam = spectra.padded(rows)
        for b, r in enumerate(fast):                        # the same kernel output as objects
            np.testing.assert_array_equal(lam[b, :r.num_modes], r.eigenvalues)
            np.testing.assert_array_equal(freq[b, :r.num_modes], r.frequencies_hz)
            np.testing.assert_array_equal(zeta[b, :r.num_modes], r.damping_ratios)
            assert np.isnan(freq[b, r.num_modes:]).all() and np.isnan(lam[b, r.num_modes:]).all()
        for r, f, s in zip(ref, fast, single):
            for x in (f, s):
                assert x.num_modes == r.num_modes and x.stability == r.stability
                np.testing.assert_array_equal(x.eigenvalues, r.eigenvalues)
                np.testing.assert_allclose(x.frequencies_hz, r.frequencies_hz, rtol=1e-15)
                np.testing.assert_allclose(x.damping_ratios, r.damping_ratios, rtol=1e-14, atol=1e-16)
                np.testing.assert_array_equal(x.real_eigenvalues, r.real_eigenvalues)
                np.testing.assert_array_equal(x.unstable_eigenvalues, r.unstable_eigenvalues)
                assert x.mode_shapes.shape == r.mode_shapes.shape == ((rows if vectors else 0), r.num_modes)
                np.testing.assert_allclose(x.mode_shapes, r.mode_shapes, rtol=0, atol=1e-14)


def test_kernel_state_matrix_assembly_equals_linearize_and_bad_assemblies_are_refused():
    """The kernel's A (2.14) from (template, rhs, M⁻¹, K_G) gives the modes of
    linearize.single_state_matrix's A; wrong shapes or layouts raise ValueError naming the part."""
    import pinocchio as pin

    from flexmodal_ros.linalg.lapack import repeated_eig
    from flexmodal_ros.flexible_joint.linear_model import configuration_terms, single_state_matrix, state_template
    from flexmodal_ros.robot.model import create_data
    from flexmodal_ros.modes import mode_sets, spectrum_modes
    model = load_robot("kuka_lwr4")
    data = create_data(model)
    qs = np.random.default_rng(12).uniform(-1.0, 1.0, (5, model.n))
    Minv, KG, _ = configuration_terms(model, data, qs, inverse=True)
    np.testing.assert_allclose(Minv[0] @ pin.crba(model.pin, data, qs[0]), np.eye(model.n), atol=1e-12)
    template = state_template(model)
    eig = repeated_eig(4 * model.n)
    fast = mode_sets(eig.modes_many(np.empty((5, 28, 28)), 14, assembly=(template.A, template.rhs, Minv, KG)))
    A = np.stack([single_state_matrix(model, Minv[b], KG[b]) for b in range(5)])
    ref = mode_sets(spectrum_modes(*eig.solve_many(np.ascontiguousarray(A.transpose(0, 2, 1))), slice(0, 14)))
    for r, f in zip(ref, fast):
        np.testing.assert_allclose(f.frequencies_hz, r.frequencies_hz, rtol=1e-12)
        np.testing.assert_allclose(f.damping_ratios, r.damping_ratios, rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(np.abs(f.mode_shapes), np.abs(r.mode_shapes), atol=1e-9)
    with pytest.raises(ValueError, match="assembly minv must be a C-contiguous float64 \\(5, 7, 7\\)"):
        eig.modes_many(np.empty((5, 28, 28)), 14, assembly=(template.A, template.rhs, Minv[:4], KG))
    with pytest.raises(ValueError, match="assembly template must be a F-contiguous"):
        eig.modes_many(np.empty((5, 28, 28)), 14, assembly=(np.ascontiguousarray(template.A), template.rhs, Minv, KG))


def test_forced_fallback_warns_once_with_reason_and_cost_and_gives_the_same_results():
    """FLEXMODAL_NO_LAPACK_EXTENSION=1 (as an install without the extension): exactly one
    FallbackWarning names what is unavailable, why, what runs instead and its cost; the AMA (single,
    batch on two threads, eigenvalue-only arrays) and a shaped reference give the same results as
    with the extension, which warns nothing."""
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, warnings, numpy as np\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    from flexmodal_ros.robot.registry import load_robot\n"
        "    from flexmodal_ros.flexible_joint.ama import modal_analysis, modal_analysis_arrays, modal_analysis_batch\n"
        "    m = load_robot('kuka_lwr4'); qs = np.random.default_rng(4).uniform(-1, 1, (6, 7))\n"
        "    single = modal_analysis(m, qs[0])\n"
        "    out = [single.frequencies_hz.tolist()] + "
        "[r.frequencies_hz.tolist() for r in modal_analysis_batch(m, qs, workers=2, chunk_size=2)]\n"
        "    arrays = modal_analysis_arrays(m, qs).frequencies_hz.tolist()\n"
        "    from flexmodal_ros.shaping import ShapedTrajectory, shaper_schedule, path_modes\n"
        "    from flexmodal_ros.robot.trajectory import PiecewiseC4Trajectory\n"
        "    path = PiecewiseC4Trajectory([0.0, 0.4], [qs[1], qs[2]])\n"
        "    shaped = ShapedTrajectory(path, shaper_schedule(path_modes(m, path, modes=(0, 1)), 'zvd'))\n"
        "    y = shaped.evaluate(np.linspace(0.0, shaped.duration, 50)).tolist()\n"
        "print(json.dumps({'f': out, 'arrays': arrays, 'zeta': single.damping_ratios.tolist(), 'y': y,\n"
        "                  'warnings': [(type(w.message).__name__, str(w.message)) for w in caught\n"
        "                               if 'flexmodal' in str(w.message)]}))\n")
    runs = {}
    for name, switch in (("extension", "0"), ("fallback", "1")):
        env = dict(os.environ, FLEXMODAL_NO_LAPACK_EXTENSION=switch)
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        runs[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs["extension"]["warnings"] == []
    (kind, message), = runs["fallback"]["warnings"]
    assert kind == "FallbackWarning"
    assert message.startswith("flexmodal_ros.linalg.lapack: the compiled LAPACK extension is unavailable "
                              "(disabled by FLEXMODAL_NO_LAPACK_EXTENSION=1)")
    assert "SciPy's dgeev wrapper" in message and "cost:" in message
    for key in ("f", "arrays", "zeta"):
        np.testing.assert_allclose(runs["fallback"][key], runs["extension"][key], rtol=1e-11, atol=1e-14)
    y_fallback, y_extension = np.array(runs["fallback"]["y"]), np.array(runs["extension"]["y"])
    # end to end: the modes agree to ~1e-13, the shaper's delays follow them, and each derivative of
    # the reference amplifies the delays' differences (4th: ~2e-8 of its peak)
    error = np.abs(y_fallback - y_extension).max(axis=(0, 2)) / np.abs(y_extension).max(axis=(0, 2))
    assert np.all(error < [1e-12, 1e-11, 1e-9, 1e-8, 1e-6]), error

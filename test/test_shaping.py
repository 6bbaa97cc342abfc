"""Input shaping (issue 19), core: shaper algebra against the closed forms, a single damped
oscillator, insensitivity widths, the shaped C⁴ reference, configuration-dependent schedules, mode
selection, the polynomial modal path against the exact one, bad input, trajectory files and the
CLI. Robot closed loops: test_shaping_robots.py."""
import json
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.flexible_joint.ama import linearized_batch, modal_analysis, modal_analysis_arrays
from flexmodal_ros.robot.model import create_data, ee_jacobian, with_overrides
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.shaping import (KINDS, PassThrough, ReferenceShaper, ShapedTrajectory, check_shaping, convolve,
                                   design, ei, insensitivity, path_derivatives, path_modes, percentage_vibration,
                                   shape_trajectory, shape_with, shaper_schedule, zv, zvd)
from flexmodal_ros.shaping.schedule import end_effector_contributions
from flexmodal_ros.shaping.trajectory_file import read_samples, read_waypoints, write_waypoints
from flexmodal_ros.shaping.vibration import linearized_vibration
from flexmodal_ros.simulation import thesis_trajectory
from flexmodal_ros.robot.trajectory import PiecewiseC4Trajectory

# The kuka_lwr4 point-to-point move of the acceptance (test_shaping_robots.py, README): q2, q3, q4
# by 0.31 rad each in 0.4 s (at the URDF speed limit), mode 2 falls from 4.85 to 3.52 Hz.
LWR_Q0 = [-1.88, 1.18, 0.51, 1.60, -0.30, -1.07, -2.20]
LWR_QF = [-1.88, 1.50, 0.20, 1.28, -0.30, -1.07, -2.20]


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


@pytest.fixture(scope="module")
def lwr_move():
    return PiecewiseC4Trajectory([0.0, 0.4], [LWR_Q0, LWR_QF])


@pytest.fixture(scope="module")
def lwr_modes(lwr, lwr_move):
    return path_modes(lwr, lwr_move)


# ---------------------------------------------------------------- shaper algebra (closed forms)

@pytest.mark.parametrize("f, zeta", [(1.0, 0.0), (3.47, 0.083), (12.5, 0.3), (0.2, 0.9)])
def test_zv_and_zvd_equal_the_closed_forms(f, zeta):
    """Singer & Seering: K = exp(−ζπ/√(1−ζ²)), T_d = 1/(f√(1−ζ²))."""
    K = np.exp(-zeta * np.pi / np.sqrt(1 - zeta ** 2))
    Td = 1.0 / (f * np.sqrt(1 - zeta ** 2))
    s = zv(f, zeta)
    np.testing.assert_allclose(s.amplitudes, [1 / (1 + K), K / (1 + K)], rtol=1e-14)
    np.testing.assert_allclose(s.times, [0.0, Td / 2], rtol=1e-14, atol=0)
    s = zvd(f, zeta)
    np.testing.assert_allclose(s.amplitudes, np.array([1, 2 * K, K * K]) / (1 + K) ** 2, rtol=1e-14)
    np.testing.assert_allclose(s.times, [0.0, Td / 2, Td], rtol=1e-14, atol=0)
    for kind in ("zv", "zvd"):
        assert design(kind, f, zeta).amplitudes.sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("tol", [0.05, 0.02, 0.1])
def test_undamped_ei_equals_the_closed_form(tol):
    """Singhose, Seering & Singer 1994: A = [(1+V)/4, (1−V)/2, (1+V)/4], t = [0, T/2, T]."""
    s = ei(2.0, 0.0, tol)
    np.testing.assert_allclose(s.amplitudes, [(1 + tol) / 4, (1 - tol) / 2, (1 + tol) / 4], atol=1e-12)
    np.testing.assert_allclose(s.times, [0.0, 0.25, 0.5], atol=1e-12)


@pytest.mark.parametrize("zeta", [0.02, 0.083, 0.15, 0.3, 0.45])
def test_damped_ei_meets_its_defining_constraints(zeta):
    """Σ A = 1, positive; V = tolerance at the design frequency and flat there (top of the hump);
    zero vibration at one frequency below and one above (off the interpolation grid too)."""
    f, tol = 3.0, 0.05
    s = ei(f, zeta, tol)
    assert s.amplitudes.sum() == pytest.approx(1.0, abs=1e-12) and np.all(s.amplitudes > 0)
    assert percentage_vibration(s, f, zeta) == pytest.approx(tol, abs=2e-9)
    h = 1e-4
    slope = (percentage_vibration(s, f * (1 + h), zeta) - percentage_vibration(s, f * (1 - h), zeta)) / (2 * h)
    assert abs(slope) < 1e-5
    ratios = np.linspace(0.6, 1.5, 9001)
    v = percentage_vibration(s, f * ratios, zeta)
    below, above = v[ratios < 1].min(), v[ratios > 1].min()
    assert below < 1e-3 and above < 1e-3 and v[np.abs(ratios - 1) < 0.02].max() <= tol + 1e-9


def test_convolved_shapers_cancel_both_modes_and_sum_to_one():
    a, b = zvd(3.0, 0.08), zv(11.0, 0.03)
    s = convolve(a, b)
    assert s.num_impulses == 6 and s.amplitudes.sum() == pytest.approx(1.0, abs=1e-15)
    assert s.duration == pytest.approx(a.duration + b.duration, rel=1e-15)
    assert percentage_vibration(s, 3.0, 0.08) < 1e-14 and percentage_vibration(s, 11.0, 0.03) < 1e-14
    batched = convolve(zvd([3.0, 4.0], [0.08, 0.1]), zv([11.0, 12.0], [0.03, 0.03]))
    assert batched.amplitudes.shape == (2, 6)
    np.testing.assert_allclose(batched.amplitudes[0], s.amplitudes, rtol=1e-14)


# ---------------------------------------------------------------- single damped oscillator

def _step_response(t, zeta, w):
    """Unit-step response of x'' + 2ζω x' + ω² x = ω² u (closed form), 0 for t < 0."""
    wd = w * np.sqrt(1 - zeta ** 2)
    out = 1 - np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta * w / wd * np.sin(wd * t))
    return np.where(t >= 0, out, 0.0)


@pytest.mark.parametrize("kind", KINDS)
def test_shaped_step_leaves_no_vibration_at_the_design_frequency(kind):
    """Time-domain superposition of the shaped step's step responses (not the V formula): after
    the last impulse the peak |x − 1| is < 1e-6 of the unshaped step's over 5 periods (ZV, ZVD);
    EI leaves exactly its tolerance, 5 %."""
    f, zeta = 2.5, 0.07
    w = 2 * np.pi * f
    s = design(kind, f, zeta)
    period = 1 / f
    t = s.duration + np.linspace(0, 5 * period, 20001)
    x = sum(a * _step_response(t - ti, zeta, w) for a, ti in zip(s.amplitudes, s.times))
    # a unit step at the same time as the last impulse, over the same window
    ref = _step_response(t - s.duration, zeta, w)
    ratio = np.abs(x - 1).max() / np.abs(ref - 1).max()
    if kind == "ei":
        assert ratio == pytest.approx(0.05, abs=2e-3)       # sampled peak of the envelope
    else:
        assert ratio < 1e-6


def test_shaped_smooth_reference_through_an_integrated_oscillator():
    """The C⁴ reference pipeline: a 0.25 s move shaped by ZVD (fixed) drives the oscillator
    (scipy.signal.lsim, first-order hold on a 20 kHz grid of the exact reference); residual
    vibration < 1e-6 of the unshaped move's."""
    from scipy.signal import lsim

    f, zeta = 2.0, 0.05
    w = 2 * np.pi * f
    path = PiecewiseC4Trajectory([0.0, 0.25], [[0.0], [1.0]])
    shaped = shape_with(path, zvd(f, zeta))
    system = ([w * w], [1.0, 2 * zeta * w, w * w])

    def residual(u_of_t, end):
        t = np.linspace(0.0, end + 2.0, int((end + 2.0) * 20000) + 1)
        _, x, _ = lsim(system, u_of_t(t), t)
        return np.abs(x[t >= end] - 1.0).max()

    unshaped = residual(lambda t: path_derivatives(path, t)[0][:, 0, 0], path.duration)
    assert unshaped > 0.3
    assert residual(lambda t: shaped.evaluate(t)[:, 0, 0], shaped.duration) < 1e-6 * unshaped


def test_insensitivity_widths_match_the_published_values():
    """Width of the ω/ω_n band with V ≤ 5 % (undamped): ZV 0.06, ZVD 0.29, EI(5 %) 0.40 (Singhose
    et al. 1994); exactly (4/π)·asin(0.05), (4/π)·asin(√0.05), (2/π)·acos((1 − 2·0.05/1.05)...)."""
    widths = {k: insensitivity(design(k, 1.0, 0.0), 1.0, 0.0, 0.05)[0] for k in KINDS}
    assert widths["zv"] == pytest.approx(4 / np.pi * np.arcsin(0.05), abs=1e-8)
    assert widths["zvd"] == pytest.approx(4 / np.pi * np.arcsin(np.sqrt(0.05)), abs=1e-8)
    # EI: |2A₁cos θ + A₂| ≤ V ⇔ cos θ ≤ −(A₂ − V)/(2A₁) around θ = π
    assert widths["ei"] == pytest.approx(2 / np.pi * np.arccos((0.475 - 0.05) / 0.525), abs=1e-8)
    for kind, published in (("zv", 0.06), ("zvd", 0.29), ("ei", 0.40)):
        assert widths[kind] == pytest.approx(published, abs=0.005)
    damped = {k: insensitivity(design(k, 1.0, 0.1), 1.0, 0.1, 0.05)[0] for k in KINDS}
    assert damped["zv"] < damped["zvd"] < damped["ei"]


# ---------------------------------------------------------------- shaped C⁴ reference

def test_cumulative_simpson_is_exact_for_cubics_and_follows_a_smooth_integral():
    """vibration.cumulative_simpson_uniform (the SciPy ≥ 1.12 rule, written for SciPy 1.11 too):
    exact for cubics at the even nodes and for parabolas at every node; complex values; O(h⁴) on
    exp(λt); an even number of nodes is refused."""
    from flexmodal_ros.shaping.vibration import cumulative_simpson_uniform
    t = np.linspace(0.0, 2.0, 41)
    cubic = cumulative_simpson_uniform(3 * t**2 - 2 * t**3, t[1] - t[0])
    np.testing.assert_allclose(cubic[::2], (t**3 - t**4 / 2)[::2], rtol=0, atol=1e-13)
    parabola = cumulative_simpson_uniform(1 + t - 3 * t**2, t[1] - t[0])
    np.testing.assert_allclose(parabola, t + t**2 / 2 - t**3, rtol=0, atol=1e-13)
    lam = -0.3 + 7j
    errors = []
    for m in (101, 201):
        t = np.linspace(0.0, 1.0, m)
        phase = cumulative_simpson_uniform(np.exp(lam * t), t[1] - t[0])
        errors.append(np.abs(phase - (np.exp(lam * t) - 1) / lam).max())
    assert errors[1] < errors[0] / 7, errors          # third order at the odd nodes, fourth at the even
    with pytest.raises(ValueError, match="odd number"):
        cumulative_simpson_uniform(np.ones(4), 0.1)


def test_shaped_reference_has_exact_consistent_derivatives(lwr, lwr_move, lwr_modes):
    """Derivatives 1..4 of the configuration-dependent shaped reference (mode 2, 4.85 → 3.52 Hz)
    integrate to the one below (Simpson on a fine grid: robust to the kinks of the 5th derivative
    at waypoints and spline knots, where finite differences are not; the remaining O(h²) error is
    ~1e-7 of the derivative's size); rest at the start, at q_f from the end on; C⁴."""
    import dataclasses

    shaped = ShapedTrajectory(lwr_move, shaper_schedule(dataclasses.replace(lwr_modes, selected=(1,)), "zvd"))
    t = np.linspace(-0.05, shaped.duration + 0.05, 40001)
    Y = shaped.evaluate(t)
    h = t[1] - t[0]
    for k in range(4):        # composite Simpson at the even nodes: h/3 (y0 + 4 y1 + y2) per pair of steps
        y = Y[:, k + 1]
        integral = np.cumsum(h / 3.0 * (y[0:-2:2] + 4.0 * y[1:-1:2] + y[2::2]), axis=0)
        scale = np.abs(Y[:, k]).max() if k else 1.0
        assert np.abs(Y[2::2, k] - Y[0, k] - integral).max() < 1e-6 * scale, k
    np.testing.assert_allclose(Y[t <= 0, 0], np.broadcast_to(LWR_Q0, Y[t <= 0, 0].shape), atol=1e-14)
    np.testing.assert_allclose(Y[t >= shaped.duration, 0], np.broadcast_to(LWR_QF, Y[t >= shaped.duration, 0].shape),
                               atol=1e-14)
    assert np.abs(Y[(t <= 0) | (t >= shaped.duration), 1:]).max() < 1e-12
    scale = np.abs(Y).max(axis=(0, 2))
    for edge in (0.0, 0.4, shaped.duration):             # continuity across the waypoint and the shaper end
        left, right = shaped.evaluate([edge - 1e-9, edge + 1e-9])
        assert np.all(np.abs(left - right).max(axis=1) < 1e-6 * scale)


def test_shaped_reference_is_the_sum_of_delayed_copies_on_a_multi_segment_path(lwr):
    """ShapedTrajectory.evaluate on a 3-segment path with a time-varying 27-impulse shaper, before
    the start, across waypoints and after the end: y = Σ_i A_i(t) q(t − τ_i(t)) summed copy by copy
    from the path itself (no per-segment bookkeeping), and derivatives 1..4 that integrate
    (composite Simpson on a fine grid) to the order below."""
    from flexmodal_ros.shaping.reference import path_derivatives

    path = PiecewiseC4Trajectory([0.0, 0.5, 0.9, 1.6], [LWR_Q0, LWR_QF, LWR_Q0, LWR_QF])
    shaped = ShapedTrajectory(path, shaper_schedule(path_modes(lwr, path, modes=(0, 1, 6)), "zvd"))
    assert shaped.schedule.num_impulses == 27
    t = np.linspace(-0.1, shaped.duration + 0.1, 20001)
    Y = shaped.evaluate(t)
    A, tau = shaped.schedule.at_times(path, t)
    direct = sum(A[:, 0, i, None] * path_derivatives(path, t - tau[:, 0, i])[0][:, 0] for i in range(27))
    assert np.abs(Y[:, 0] - direct).max() < 1e-12 * np.abs(direct).max()
    h = t[1] - t[0]
    # the snap integrates to the jerk only to 2.7e-5 of its peak here (the same with the C kernel this
    # replaced, not shrinking with h): steep flanks at the interior waypoints of these short segments
    for k, tolerance in enumerate((1e-6, 1e-6, 1e-6, 1e-4)):
        y = Y[:, k + 1]
        integral = np.cumsum(h / 3.0 * (y[0:-2:2] + 4.0 * y[1:-1:2] + y[2::2]), axis=0)
        assert np.abs(Y[2::2, k] - Y[0, k] - integral).max() < tolerance * np.abs(Y[:, k]).max(), k


def test_piecewise_polynomial_sampling_matches_the_exact_reference(lwr_move, lwr_modes):
    """What a control cycle reads: exact at the knots; between them the degree-9 Hermite pieces
    agree with the exact reference (relative to each derivative's peak: position 1e-12, velocity
    1e-9, acceleration 1e-7, jerk 1e-4, snap 1e-2: round-off of positions amplified by h⁻⁴ on the
    sub-millisecond intervals between nearly coincident segment starts of two copies), and their
    derivatives are those of one polynomial per interval (C⁴ at the knots)."""
    shaped = ShapedTrajectory(lwr_move, shaper_schedule(lwr_modes, "zvd"), knot_rate_hz=200.0)
    scale = np.abs(shaped.evaluate(np.linspace(0, shaped.duration, 400))).max(axis=(0, 2))[:, None]
    starts = shaped.segment_starts()
    assert np.all(np.isin(np.round(starts[(starts > 0) & (starts < shaped.duration)], 9),
                          np.round(shaped._knots, 9)))
    t = np.linspace(0.0, shaped.duration, 2345)
    exact = shaped.evaluate(t)
    got = np.array([np.array(shaped.sample(ti)) for ti in t])
    err = np.abs(got - exact).max(axis=(0, 2))[:, None] / scale
    assert np.all(err.ravel() < [1e-12, 1e-9, 1e-7, 1e-4, 1e-2]), err.ravel()
    knots = shaped._knots[1:-1:7]
    np.testing.assert_allclose(np.array([shaped.sample(k) for k in knots]), shaped.evaluate(knots),
                               rtol=0, atol=1e-9 * scale.max())
    np.testing.assert_allclose(shaped.sample(-1.0)[0], LWR_Q0, atol=1e-12)
    np.testing.assert_allclose(shaped.sample(shaped.duration + 1)[0], LWR_QF, atol=1e-12)
    assert not np.any(shaped.sample(-1.0)[1:])


def test_path_derivatives_match_the_scalar_sampler(lwr_move):
    t = np.array([-0.1, 0.0, 0.1, 0.2, 0.4, 0.5])
    q, p = path_derivatives(lwr_move, t)
    for i, ti in enumerate(t):
        np.testing.assert_allclose(q[i], np.array(lwr_move.sample(ti)), atol=1e-12)
    assert p[0, 0] == 0 and p[-1, 0] == 1 and np.all(p[[0, 1, 4, 5], 1:] == 0)


# ---------------------------------------------------------------- configuration-dependent shaping

def test_schedule_follows_the_exact_ama_along_the_path(lwr, lwr_move, lwr_modes):
    """Impulse times/amplitudes at the start and the end equal the shaper designed from the exact
    AMA at q0 and q_f; in between they change (mode 2: 4.85 → 3.52 Hz)."""
    pm = lwr_modes
    assert pm.selected == (0, 1, 6)
    sched = shaper_schedule(pm, "zvd")
    for row, q in ((0, LWR_Q0), (-1, LWR_QF)):
        exact = modal_analysis(lwr, q)
        # tracked modes are matched to the exact ones by frequency (tracking keeps their identity)
        f = pm.frequencies_hz[row, list(pm.selected)]
        idx = [int(np.argmin(np.abs(exact.frequencies_hz - fi))) for fi in f]
        np.testing.assert_allclose(f, exact.frequencies_hz[idx], rtol=1e-10)
        want = convolve(*(zvd(exact.frequencies_hz[i], exact.damping_ratios[i]) for i in idx))
        np.testing.assert_allclose(sched.amplitudes[row], want.amplitudes, rtol=1e-9)
        np.testing.assert_allclose(sched.delays[row], want.times, rtol=1e-9, atol=1e-12)
    f2 = pm.frequencies_hz[:, 1]
    assert f2[0] == pytest.approx(4.85, abs=0.01) and f2[-1] == pytest.approx(3.52, abs=0.01)
    assert np.all(np.abs(np.diff(f2)) < 0.1)                     # smooth: no mode swapped by tracking
    fixed = shaper_schedule(pm, "zvd", fixed=True)
    assert np.all(fixed.delays == fixed.delays[0])


@pytest.mark.parametrize("wrench", [None, [0.0, 0.0, -20.0, 0.0, 0.0, 0.0]])
def test_exact_path_modes_are_the_eigenvalues_at_every_sample(lwr, benchmark_move, wrench):
    """modal="exact": at every one of the 501 samples the selected modes' f and ζ are those of the
    eigenvalue of the full eigen-decomposition there nearest the straight-line interpolation of
    the mode between its neighbouring anchors (1e-12 relative). Without a wrench they come from
    Newton continuation with the K̄ > 0 certificate; with one (the certificate does not apply)
    from the full decomposition."""
    model = lwr if wrench is None else with_overrides(lwr, wrench=wrench)
    pm = path_modes(model, benchmark_move)
    lam = 2 * np.pi * pm.frequencies_hz * (-pm.damping_ratios + 1j * np.sqrt(1 - pm.damping_ratios ** 2))
    rows = np.arange(lam.shape[0])
    guess = np.array([np.interp(rows, pm.anchors, lam[pm.anchors, k].real)
                      + 1j * np.interp(rows, pm.anchors, lam[pm.anchors, k].imag) for k in pm.selected]).T
    spectra = modal_analysis_arrays(model, pm.configurations).eigenvalues
    nearest = np.take_along_axis(spectra, np.nanargmin(np.abs(guess[:, :, None] - spectra[:, None, :]), axis=2), 1)
    assert lam.shape[0] == 501
    np.testing.assert_allclose(lam[:, list(pm.selected)], nearest, rtol=1e-12)


def test_samples_newton_leaves_get_the_full_ama(lwr, benchmark_move, monkeypatch):
    """Newton stopped after 2 steps with a 1e-5 acceptance: the samples with an unconverged
    shaped mode go to the full eigenvalue-only AMA, the others keep Newton's value; together they
    are still the eigenvalues of the full AMA at all 501 samples (to 1e-7: the last step of the
    accepted ones was up to 1e-5 relative, so their error is of its square; measured 1.04e-8)."""
    import flexmodal_ros.flexible_joint.continuation as continuation
    import flexmodal_ros.shaping.schedule as schedule

    full_ama = []
    monkeypatch.setattr(continuation, "MAX_ITERATIONS", 2)
    monkeypatch.setattr(continuation, "CONVERGED_STEP", 1e-5)
    monkeypatch.setattr(schedule, "modal_analysis_arrays",
                        lambda model, qs, chunk: full_ama.append(len(qs)) or modal_analysis_arrays(model, qs, chunk))
    pm = path_modes(lwr, benchmark_move)
    assert len(full_ama) == 1 and 0 < full_ama[0] < 450, full_ama    # some samples each way
    lam = 2 * np.pi * pm.frequencies_hz * (-pm.damping_ratios + 1j * np.sqrt(1 - pm.damping_ratios ** 2))
    sel = list(pm.selected)
    spectra = modal_analysis_arrays(lwr, pm.configurations).eigenvalues
    gap = np.nanmin(np.abs(lam[:, sel, None] - spectra[:, None, :]), axis=2) / np.abs(lam[:, sel])
    assert gap.max() < 1e-7


def test_instability_between_anchors_is_found(lwr):
    """Weak position gains (kp × 0.012): the arm near upright is unstable at path samples 34-37
    only, between the anchors 30 and 40 (full eigen-decomposition at every sample, measured);
    the certificate finds it and the error names the first unstable sample."""
    weak = with_overrides(lwr, kp=lwr.kp * 0.012)
    down = [0.0, 1.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    path = PiecewiseC4Trajectory([0.0, 0.35, 0.8], [down, [0.0, 0.15, 0.0, 0.0, 0.0, 0.0, 0.0], down])
    with pytest.raises(InputError, match="unstable at path sample 34 "):
        path_modes(weak, path)


def test_linearized_residual_vibration_shaped_versus_unshaped(lwr_move, lwr_modes):
    shaped = ShapedTrajectory(lwr_move, shaper_schedule(lwr_modes, "zvd"))
    fixed = ShapedTrajectory(lwr_move, shaper_schedule(lwr_modes, "zvd", fixed=True))
    none, cfg, start = (linearized_vibration(r, lwr_modes) for r in (lwr_move, shaped, fixed))
    assert none[0] > 0.25 and none[1] > 0.15                     # 0.4 s move: modes 1, 2 ring
    assert np.all(cfg[:2] < 2e-3) and cfg[:2].max() < none[:2].min() / 100
    assert start[0] > 2 * cfg[0]


def test_end_effector_contribution_equals_the_state_space_residue(lwr):
    """c_k from the mode shapes (second-order residue) equals |C v_k w_kᵀ B / λ_k| of the state
    space (2.14) with left eigenvectors, for the motor-reference step input."""
    q = np.array(LWR_Q0)
    move = np.array(LWR_QF) - q
    data = create_data(lwr)
    res = modal_analysis(lwr, q)
    c = end_effector_contributions(lwr, data, q, move, res)
    (M, D, K), _ = linearized_batch(lwr, data, q[None])
    n = lwr.n
    m2 = 2 * n
    A = np.block([[np.zeros((m2, m2)), np.eye(m2)], [-np.linalg.solve(M[0], K[0]), -np.linalg.solve(M[0], D[0])]])
    B = np.concatenate([np.zeros(m2), np.linalg.solve(M[0], np.concatenate([np.zeros(n), lwr.kp * lwr.W * move]))])
    C = np.hstack([ee_jacobian(lwr, data, q)[:3], np.zeros((3, 3 * n))])
    lam, V = np.linalg.eig(A)
    Wl = np.linalg.inv(V)
    for k, lk in enumerate(res.eigenvalues):
        j = int(np.argmin(np.abs(lam - lk)))
        oracle = np.linalg.norm(C @ V[:, j] * (Wl[j] @ B) / lam[j])
        assert c[k] == pytest.approx(oracle, rel=1e-8)


def test_mode_selection_threshold_damping_and_override(lwr, lwr_move, lwr_modes):
    c = lwr_modes.contributions
    assert np.argmax(c) == 0
    heavy = np.flatnonzero(lwr_modes.damping_ratios.max(axis=0) >= 0.5)
    assert not set(heavy) & set(lwr_modes.selected)              # ζ ≈ 0.64-0.83: never automatic
    strict = path_modes(lwr, lwr_move, threshold=0.5)
    assert strict.selected == (0,)
    manual = path_modes(lwr, lwr_move, modes=[1, 0])
    assert manual.selected == (0, 1)
    with pytest.raises(InputError, match="modes"):
        path_modes(lwr, lwr_move, modes=[99])
    traj, pm = shape_trajectory(lwr, lwr_move, "zv", modes=[0])
    assert traj.schedule.num_impulses == 2 and pm.selected == (0,)


# ---------------------------------------------------------------- polynomial modal path

@pytest.fixture(scope="module")
def benchmark_move(lwr):
    """benchmarks/bench_shaping.py's reference: the thesis q0 -> qf (3.7 rad on joint 6) in 5 s."""
    return PiecewiseC4Trajectory([0.0, 5.0], thesis_trajectory(lwr)[1])


# per derivative order 0..4: largest |y_polynomial − y_exact| / max |y_exact| allowed
REFERENCE_TOLERANCE = (1e-5, 5e-4, 3e-3, 1e-2, 3e-2)


@pytest.mark.parametrize("move, expansions", [("acceptance", 2), ("benchmark", 10)])
def test_polynomial_modal_path_agrees_with_the_exact_one(lwr, lwr_move, lwr_modes, benchmark_move, move, expansions):
    """modal="polynomial" (expansions of the shaped modes in the path parameter, two-point Taylor
    interpolation between them) against their exact eigenvalues at every sample. Tolerances: same
    selected modes; f of the shaped modes within 5e-4 (relative), ζ within 3e-4; the ZVD-shaped reference
    and its derivatives 1..4 within REFERENCE_TOLERANCE of their peaks (the feedforward uses all of
    them); percentage residual vibration on the linearized model within 1e-5. Measured (acceptance
    / benchmark move, 2 / 16 expansions): f 5.4e-5 / 4.4e-6, ζ 2.9e-5 / 1.3e-6, reference
    1e-6 3.6e-5 2.2e-4 1.1e-3 2.3e-3 / 1.2e-7 3.3e-6 1.6e-4 8.9e-4 4.8e-3, vibration 1e-6."""
    path = lwr_move if move == "acceptance" else benchmark_move
    exact = lwr_modes if move == "acceptance" else path_modes(lwr, path)
    poly = path_modes(lwr, path, modal="polynomial")
    sel = list(exact.selected)
    assert poly.selected == exact.selected and poly.modal == "polynomial"
    assert poly.expansion_samples.size >= expansions and poly.anchor_error < 1e-3
    assert np.abs(poly.frequencies_hz[:, sel] / exact.frequencies_hz[:, sel] - 1).max() < 5e-4
    assert np.abs(poly.damping_ratios[:, sel] - exact.damping_ratios[:, sel]).max() < 3e-4
    at = poly.expansion_samples                                  # exact there
    np.testing.assert_allclose(poly.frequencies_hz[at][:, sel], exact.frequencies_hz[at][:, sel], rtol=1e-9)
    shaped_exact = ShapedTrajectory(path, shaper_schedule(exact, "zvd"))
    shaped_poly = ShapedTrajectory(path, shaper_schedule(poly, "zvd"))
    t = np.arange(0.0, max(shaped_exact.duration, shaped_poly.duration), 1e-3)
    y_exact, y_poly = shaped_exact.evaluate(t), shaped_poly.evaluate(t)
    for k, tol in enumerate(REFERENCE_TOLERANCE):
        peak = np.abs(y_exact[:, k]).max()
        assert np.abs(y_poly[:, k] - y_exact[:, k]).max() <= tol * peak, k
    v_exact, v_poly = (linearized_vibration(r, exact) for r in (shaped_exact, shaped_poly))
    np.testing.assert_allclose(v_poly, v_exact, atol=1e-5)
    if move == "acceptance":
        assert linearized_vibration(path, exact)[:2].min() > 100 * v_poly[:2].max()


def test_polynomial_modal_path_options_and_errors(lwr, lwr_move):
    with pytest.raises(InputError, match="modal: unknown value 'fast'"):
        path_modes(lwr, lwr_move, modal="fast")
    with pytest.raises(InputError, match="expansion tolerance"):
        path_modes(lwr, lwr_move, modal="polynomial", expansion_tolerance=0.0)
    undamped = with_overrides(lwr, kd=0.0, d_fm=0.0, d_f=0.0)
    with pytest.raises(InputError, match="marginally stable"):
        shape_trajectory(undamped, lwr_move, "zvd", modal="polynomial")
    traj, pm = shape_trajectory(lwr, lwr_move, "zv", modes=[1], modal="polynomial", expansion_order=2)
    assert pm.selected == (1,) and traj.schedule.num_impulses == 2 and pm.to_dict()["expansions"] >= 1


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("f, zeta, match", [(0.0, 0.1, "frequency_hz: must be > 0"),
                                            (-2.0, 0.1, "must be > 0"),
                                            (2.0, -0.01, "unstable"),
                                            (2.0, 1.0, "overdamped"),
                                            (np.nan, 0.1, "NaN")])
def test_bad_modes_are_refused_with_a_clear_error(f, zeta, match):
    for kind in KINDS:
        with pytest.raises(InputError, match=match):
            design(kind, f, zeta)


def test_bad_options_and_short_or_unstable_trajectories(lwr, lwr_move):
    with pytest.raises(InputError, match="unknown kind"):
        design("zvdd", 1.0, 0.1)
    with pytest.raises(InputError, match="tolerance"):
        ei(1.0, 0.1, 0.7)
    with pytest.raises(InputError, match="tabulated"):
        ei(1.0, 0.7)
    with pytest.raises(InputError, match="shaping: unknown"):
        check_shaping("fast")
    single = PiecewiseC4Trajectory([0.0], [LWR_Q0])
    with pytest.raises(InputError, match="at least 2 waypoints"):
        shape_trajectory(lwr, single, "zvd")
    with pytest.raises(InputError, match="at least 2 waypoints"):
        shape_with(single, zvd(1.0, 0.1))
    # a move much shorter than the shaper is not an error: the shaped move lasts T + shaper duration
    blip = PiecewiseC4Trajectory([0.0, 0.005], [LWR_Q0, np.add(LWR_Q0, 1e-3)])
    traj, _ = shape_trajectory(lwr, blip, "zvd", modes=[0])
    assert traj.duration == pytest.approx(0.005 + traj.added_delay) and traj.added_delay > 0.25
    np.testing.assert_allclose(traj.evaluate([traj.duration])[0, 0], blip.positions[-1], atol=1e-14)
    # undamped closed loop (no damping anywhere): marginally stable, refused
    undamped = with_overrides(lwr, kd=0.0, d_fm=0.0, d_f=0.0)
    with pytest.raises(InputError, match="marginally stable"):
        shape_trajectory(undamped, lwr_move, "zvd")
    # no mode qualifies: explicit pass-through with a warning
    shaper = ReferenceShaper(lwr, "zvd", max_damping=0.01)
    out = shaper(lwr_move)
    assert isinstance(out, PassThrough) and out.summary.startswith("WARNING") and out.duration == 0.4
    assert ReferenceShaper(lwr, "none")(lwr_move) is lwr_move


# ---------------------------------------------------------------- files and CLI

def test_waypoint_file_round_trip_and_errors(lwr, tmp_path):
    good = write_waypoints(tmp_path / "move.yaml", lwr.joint_names[::-1], [0.0, 0.4],
                           [LWR_Q0[::-1], LWR_QF[::-1]])
    path = read_waypoints(lwr, good)
    np.testing.assert_allclose(path.positions, [LWR_Q0, LWR_QF])
    bad = {"names": "joint_names: [a, b]\npoints: [{time: 0, positions: [0, 0]}, {time: 1, positions: [1, 1]}]\n",
           "short": "points: [{time: 0, positions: [0, 0, 0, 0, 0, 0, 0]}]\n",
           "order": "points: [{time: 0, positions: [0,0,0,0,0,0,0]}, {time: 0, positions: [0,0,0,0,0,0,1]}]\n",
           "start": "points: [{time: 1, positions: [0,0,0,0,0,0,0]}, {time: 2, positions: [0,0,0,0,0,0,1]}]\n",
           "key": "points: [{t: 0, positions: [0,0,0,0,0,0,0]}, {time: 2, positions: [0,0,0,0,0,0,1]}]\n",
           "nan": "points: [{time: 0, positions: [.nan,0,0,0,0,0,0]}, {time: 2, positions: [0,0,0,0,0,0,1]}]\n"}
    for name, text in bad.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        with pytest.raises(InputError):
            read_waypoints(lwr, tmp_path / f"{name}.yaml")


def test_cli_shape_writes_the_shaped_reference(lwr, tmp_path, capsys):
    src = write_waypoints(tmp_path / "move.yaml", lwr.joint_names, [0.0, 0.4], [LWR_Q0, LWR_QF])
    out = tmp_path / "shaped.csv"
    assert cli_main(["shape", "--robot", "kuka_lwr4", "--trajectory", str(src), "--shaper", "zvd", "-o", str(out),
                     "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["selected_modes"] == [1, 2, 7] and report["shaped"]
    assert report["added_duration_s"] == pytest.approx(report["duration_s"] - 0.4)
    # auto with the LWR4's Coulomb band: fixed (a longer design buys nothing there), 2.3e-3 on mode 1
    assert max(report["percentage_vibration_shaped"]) < 5e-3 < min(report["percentage_vibration_unshaped"][:2])
    names, t, samples = read_samples(out)
    assert names == list(lwr.joint_names) and samples.shape == (t.size, 5, 7)
    np.testing.assert_allclose(samples[-1, 0], LWR_QF, atol=1e-12)
    vel = np.gradient(samples[:, 0], t, axis=0)
    assert np.abs(vel - samples[:, 1])[2:-2].max() < 1e-3 * np.abs(samples[:, 1]).max()
    assert cli_main(["shape", "--robot", "kuka_lwr4", "--trajectory", str(src), "--shaper", "zvd", "-o", str(out),
                     "--modal", "polynomial", "--json"]) == 0
    poly = json.loads(capsys.readouterr().out)
    assert poly["modal"] == "polynomial" and poly["expansions"] >= 1 and poly["selected_modes"] == [1, 2, 7]
    np.testing.assert_allclose(poly["percentage_vibration_shaped"], report["percentage_vibration_shaped"], atol=1e-5)
    assert cli_main(["shape", "--robot", "kuka_lwr4", "--trajectory", str(tmp_path / "none.yaml"),
                     "--shaper", "zvd", "-o", str(out)]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert cli_main(["shape", "--robot", "kuka_lwr4", "--trajectory", str(src), "--shaper", "zvd", "-o", str(out),
                     "--modes", "0"]) == 2
    assert "--modes" in capsys.readouterr().err


def test_cli_simulate_reports_residual_vibration_and_added_duration(tmp_path, capsys):
    move = str(Path(__file__).resolve().parent.parent / "docs" / "shaping" / "kuka_lwr4_move.yaml")
    args = ["simulate", "--robot", "kuka_lwr4", "--trajectory", move, "--law", "pd", "--no-coulomb",
            "--settle", "0.5", "--dt", "0.0005", "--json", "--plot-dir", str(tmp_path)]
    assert cli_main(args + ["--shaping", "zvd"]) == 0
    out = json.loads(capsys.readouterr().out)
    rv, base = out["residual_vibration"], out["unshaped"]["residual_vibration"]
    assert out["shaping"] == "zvd" and out["shaped_modes"]["selected_modes"] == [1, 2, 7]
    # auto on the viscous README move: robust-long, 1.08 s (the Coriolis floor dominates; docs/shaping)
    assert 0.6 < out["added_duration_s"] < 1.2 and rv["start_s"] == base["start_s"] == pytest.approx(0.4 + out["added_duration_s"], abs=1e-3)
    assert out["residual_vibration_reduction"] >= 10 and base["peak_m"] >= 10 * rv["peak_m"]
    assert (tmp_path / "residual_vibration.png").stat().st_size > 10_000
    assert cli_main(args + ["--shaping", "none", "--model-stiffness-scale", "0.8"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["added_duration_s"] == 0 and "unshaped" not in plain and plain["residual_vibration"]["peak_m"] > 0
    assert cli_main(args + ["--model-stiffness-scale", "0"]) == 2
    assert "stiffness_scale" in capsys.readouterr().err
    assert cli_main(args + ["--shaping", "zvd", "--modes", "1.5"]) == 2
    assert "--modes" in capsys.readouterr().err

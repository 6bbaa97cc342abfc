"""Calibration (issue 31): sensitivities against finite differences, the motor excitation in the
controller, the experiment design against random configurations, the weighted fit, bounds and CLI
errors. The end-to-end runs on hidden-truth plants are in test_calibration_acceptance.py, the ROS
action in test_calibration_ros.py."""
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from flexmodal_ros.calibration.campaign import CalibrationSettings, check_settings, design_against_random
from flexmodal_ros.calibration.campaign_settings import CampaignStop
from flexmodal_ros.calibration.eigen_sensitivity import CONTINUOUS, LoopModel, Unknowns, loop_modes, mode_sensitivity
from flexmodal_ros.calibration.design_comparison import compare_with_random
from flexmodal_ros.calibration.design_selection import (REL_STD_LIMIT, STALL_GAIN, greedy_design, logdet,
                                                        predicted_std, reachable_within, unserved_count, worst_focus)
from flexmodal_ros.calibration.experiment_design import (DEFAULT_SENSOR_STD, ExcitationPlan, MeasurementModel,
                                                         candidate_configurations, choose_experiment_gains,
                                                         evaluate_pool, loop_damping, parameter_scale,
                                                         prior_information)
from flexmodal_ros.calibration.offline_plants import PlantOptions, make_plant
from flexmodal_ros.calibration.pulse_response import pulse_amplitudes
from flexmodal_ros.calibration import weighted_fit
from flexmodal_ros.calibration.visibility_calibration import (SPREAD_SAMPLES, learned_spread, noise_factor, observe,
                                                              rescale_noise, spread_samples, visibility_rule)
from flexmodal_ros.calibration.weighted_fit import MeasuredModes, fit_parameters
from flexmodal_ros.control.excitation import MotorExcitation, default_excitation_limit, pulse_on
from flexmodal_ros.control import FailSafeController, JointSample, Mode
from flexmodal_ros.core.blas import single_blas_thread
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.core.workers import NO_STOP, Interrupted
from flexmodal_ros.modes import track_modes
from flexmodal_ros.modes.uncertainty import frequency_damping_jacobian
from flexmodal_ros.oma.visibility import cramer_rao, single_mode_bounds, spectral_dominance
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot

SCOMPI_Q8 = np.array([0.0, -0.374, 1.9448, 0.0, -1.9448, 0.0])     # thesis (2.21)


@pytest.fixture(scope="module")
def lwr():
    return load_robot("kuka_lwr4")


@pytest.fixture(scope="module")
def scompi():
    return load_robot("scompi")


def _finite_difference(model, q, unknowns, loop, rel=1e-6):
    """p ∂λ/∂p of every mode by central differences of the loop's eigenvalues (modes followed by MAC)."""
    p0 = unknowns.values(model)
    base = loop_modes(model, q, loop)
    out = np.empty((base.num_modes, unknowns.size), complex)
    for i in range(unknowns.size):
        h = rel * max(p0[i], 1e-3)
        sets = []
        for sign in (1, -1):
            p = p0.copy()
            p[i] += sign * h
            modes = loop_modes(unknowns.apply(model, p), q, loop)
            order, _ = track_modes([base, modes])
            sets.append(modes.eigenvalues[order[1]])
        out[:, i] = (sets[0] - sets[1]) / (2 * h) * max(p0[i], 1e-3)
    return base, out


@pytest.mark.parametrize("robot,loop", [("kuka_lwr4", CONTINUOUS), ("scompi", CONTINUOUS),
                                        ("kuka_lwr4", LoopModel(1000.0, "zoh-delay")),
                                        ("scompi", LoopModel(1000.0, "zoh"))])
def test_eigenvalue_sensitivity_matches_finite_differences(robot, loop, lwr, scompi):
    """dλ = ψ (∂A/∂p) φ (continuous A (2.14); sampled loops through the Fréchet derivative of
    exp) against central differences, for every kind of unknown, scaled by the parameter."""
    model = with_overrides(lwr, d_f=0.5) if robot == "kuka_lwr4" else scompi     # d_f > 0: central differences
    q = np.full(model.n, 0.3) if robot == "kuka_lwr4" else SCOMPI_Q8
    unknowns = Unknowns.build(model, ("k", "d_f", "d_fm"), joints=(0, 2, model.n - 1))
    with single_blas_thread():
        sens = mode_sensitivity(model, q, unknowns, loop)
        base, fd = _finite_difference(model, q, unknowns, loop)
    np.testing.assert_allclose(sens.modes.eigenvalues, base.eigenvalues, rtol=1e-7)   # expm_frechet vs expm
    scale = np.maximum(unknowns.values(model), 1e-3)
    analytic = sens.d_eigenvalues * scale
    keep = sens.frequencies_hz * np.sqrt(1 - sens.damping_ratios ** 2) < 400     # measurable ones
    # finite differences are good to ~1e-7 of |λ| (relative step 1e-6)
    tol = 1e-6 * np.abs(base.eigenvalues)[:, None] + 1e-5 * np.abs(analytic)
    assert np.all(np.abs(analytic - fd)[keep] <= tol[keep])
    assert np.abs(analytic[keep]).max() > 1e-3 * np.abs(base.eigenvalues).min()      # not trivially zero


def test_sampled_sensitivity_modes_are_the_sampled_data_ama(lwr):
    from flexmodal_ros.flexible_joint.sampled import sampled_modal_analysis
    q = np.full(lwr.n, -0.2)
    ours = loop_modes(lwr, q, LoopModel(1000.0, "zoh-delay"))
    theirs = sampled_modal_analysis(lwr, q, 1000.0, "zoh-delay")
    keep = ~theirs.above_nyquist
    np.testing.assert_allclose(ours.frequencies_hz[:keep.sum()], theirs.frequencies_hz[keep], rtol=1e-9)
    np.testing.assert_allclose(ours.damping_ratios[:keep.sum()], theirs.damping_ratios[keep], atol=1e-10)


def test_frequency_damping_gradients_match_finite_differences():
    lam = np.array([-1.0 + 30j, -40.0 + 50j, -0.01 + 900j])
    g = frequency_damping_jacobian(lam)
    h = 1e-6
    for k, d in enumerate((h, 1j * h)):
        f_p, z_p = np.abs(lam + d) / (2 * np.pi), -(lam + d).real / np.abs(lam + d)
        f_m, z_m = np.abs(lam - d) / (2 * np.pi), -(lam - d).real / np.abs(lam - d)
        np.testing.assert_allclose(g[:, 0, k], (f_p - f_m) / (2 * h), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g[:, 1, k], (z_p - z_m) / (2 * h), rtol=1e-6, atol=1e-7)


def test_single_mode_bounds_equal_cramer_rao_of_each_mode():
    rng = np.random.default_rng(0)
    lam = -rng.uniform(0.5, 20, 6) + 1j * rng.uniform(10, 300, 6)
    amps = rng.normal(size=(2, 6, 5)) + 1j * rng.normal(size=(2, 6, 5))
    noise = rng.uniform(1e-6, 3e-6, 5)
    batched = single_mode_bounds(lam, amps, noise, [900, 700], 1000.0)
    for j in range(6):
        alone = cramer_rao(lam[[j]], amps[:, [j]], noise, [900, 700], 1000.0)
        np.testing.assert_allclose([b[j] for b in batched], [a[0] for a in alone], rtol=1e-9)


# -- excitation through the controller -------------------------------------------------------

def _holding_controller(model, q):
    ctrl = FailSafeController(model, compiled=False)
    ctrl.update_state(JointSample(0.0, q, np.zeros(model.n), q, np.zeros(model.n)), 0.0)
    assert ctrl.mode == Mode.HOLD
    return ctrl


def _cycle(ctrl, t, q):
    ctrl.update_state(JointSample(t, q, np.zeros(len(q)), q, np.zeros(len(q))), t)
    return ctrl.compute()


def test_controller_adds_the_pulse_to_the_hold_law_and_saturates(lwr):
    q = np.zeros(lwr.n)
    ctrl = _holding_controller(lwr, q)
    hold = _cycle(ctrl, 0.001, q).tau
    limit = default_excitation_limit(lwr)
    pulse = pulse_on(lwr, [1], limit[1], 0.002)
    ctrl.excite(pulse.shifted(0.0035), start_now=False)
    assert ctrl.steady_cycle() is None                     # the C cycles stand aside meanwhile
    taus = {t: _cycle(ctrl, t, q).tau for t in (0.002, 0.003, 0.004, 0.005, 0.006)}
    np.testing.assert_allclose(taus[0.003], hold)          # before the start
    np.testing.assert_allclose(taus[0.004] - hold, pulse.torque, atol=1e-9)
    np.testing.assert_allclose(taus[0.005] - hold, pulse.torque, atol=1e-9)
    np.testing.assert_allclose(taus[0.006], hold)          # ended at 0.0055
    assert ctrl.excitation is None and ctrl.steady_cycle() is not None
    # saturation at the effort limit like any command: a tight effort limit on joint 2
    tight = dataclasses.replace(lwr, effort_limit=np.where(np.arange(lwr.n) == 1, abs(hold[1]) + 5.0, lwr.effort_limit))
    ctrl = _holding_controller(tight, q)
    ctrl.set_excitation_limits(torque=20.0)
    ctrl.excite(pulse_on(tight, [1], np.sign(hold[1] or 1.0) * 15.0, 0.002), start_now=True)
    command = _cycle(ctrl, 0.001, q)
    assert command.saturated[1] and abs(command.tau[1]) == pytest.approx(abs(hold[1]) + 5.0)


def test_controller_refuses_excitations_beyond_bounds_and_outside_hold(lwr):
    q = np.zeros(lwr.n)
    ctrl = _holding_controller(lwr, q)
    limit = default_excitation_limit(lwr)
    with pytest.raises(InputError, match="max_excitation_torque"):
        ctrl.excite(pulse_on(lwr, [0], 1.01 * limit[0], 0.002))
    with pytest.raises(InputError, match="duration"):
        ctrl.excite(pulse_on(lwr, [0], 1.0, 5.0))
    with pytest.raises(InputError, match="in the past"):
        ctrl.excite(pulse_on(lwr, [0], 1.0, 0.002, start=-1.0), start_now=False)
    ctrl.set_excitation_limits(torque=2.0)
    with pytest.raises(InputError, match="excitation limit of 2"):
        ctrl.excite(pulse_on(lwr, [0], 3.0, 0.002))
    waiting = FailSafeController(lwr, compiled=False)
    with pytest.raises(InputError, match="only while holding"):
        waiting.excite(pulse_on(lwr, [0], 1.0, 0.002))


def test_excitation_cancelled_when_the_controller_leaves_hold(lwr):
    q = np.zeros(lwr.n)
    ctrl = _holding_controller(lwr, q)
    ctrl.excite(MotorExcitation(np.full(lwr.n, 1.0), 0.0, 0.5), start_now=True)
    _cycle(ctrl, 0.001, q)
    assert ctrl.excitation is not None
    hold = ctrl.watchdog(10.0)                              # joint states lost: STALE, static hold
    assert ctrl.mode == Mode.STALE and ctrl.excitation is None
    assert not np.any(ctrl.law.excitation)
    assert any("excitation cancelled" in e for e in ctrl.events)
    assert hold is not None


# -- design, fit, bounds ----------------------------------------------------------------------

def _lwr_design_pool(lwr, count, seed):
    """The LWR4 at K_D × 0.5, its ranges (k × 0.5–2, dampings × 0.5–2 or 0–10), one pulse per motor
    sized to the excitation limit, ``count`` candidates of ``seed`` evaluated with a 20-bit encoder:
    (pool, scale, ranges, targets 0.5 % k, 3 % d)."""
    model = with_overrides(lwr, kd=lwr.kd * 0.5)
    unknowns = Unknowns.build(model)
    nominal = unknowns.values(model)
    ranges = (np.where(nominal > 0, 0.5 * nominal, 0.0), np.where(nominal > 0, 2 * nominal, 10.0))
    scale = parameter_scale(model, unknowns, ranges)
    rows = list(range(2 * model.n))
    torque = pulse_amplitudes(model, np.zeros(model.n), 0.002, default_excitation_limit(model), rows)
    plan = ExcitationPlan(torque, 0.002, tuple(range(model.n)), pulses_per_configuration=2)
    pool = evaluate_pool(model, candidate_configurations(model, count, seed=seed), unknowns, CONTINUOUS, plan,
                         MeasurementModel(), scale)
    return pool, scale, ranges, np.where(np.array(unknowns.kinds) == "k", 0.005, 0.03)


def test_designed_configurations_need_at_most_half_the_random_ones(lwr):
    """Acceptance: the designed set reaches the predicted worst relative std of 4 designed
    configurations with at most half as many as random ones (median over 5 seeds)."""
    pool, scale, ranges, targets = _lwr_design_pool(lwr, 40, seed=3)
    with single_blas_thread():
        steps = greedy_design(pool, 4, scale, prior_information(scale, ranges), target=targets)
    comparison = compare_with_random(pool, steps, scale, seeds=5, random_budget=40)
    assert comparison.ratio <= 0.5, comparison.to_dict()
    assert np.all(np.diff(comparison.designed[1:]) <= 1e-12)          # more data, less uncertainty


def test_worst_focus_picks_the_unknowns_near_the_worst_and_the_design_serves_them(lwr):
    """worst_focus: the unknowns above FOCUS_SHARE of the worst σ/target and those without a finite
    σ; None when that is every one. The worst-first design's step (``focus_share``) holds at least
    as much information about those unknowns (Ds criterion) as the D-optimal step (its gain on the
    actual loop: bench_calibration --part design --actual --design worst-first, docs/calibration.md);
    a focus no candidate narrows is passed over (STALL_GAIN, STALL_SHARE), and so is, along the
    loop, one that configurations chosen for it left in place (unserved_count)."""
    target = np.array([0.01, 0.01, 0.1, 0.1])
    np.testing.assert_array_equal(worst_focus(np.array([0.02, 0.1, 0.2, 0.75]), target, 0.7), [1, 3])
    np.testing.assert_array_equal(worst_focus(np.array([0.05, np.inf, 0.2, 0.3]), target, 0.7), [0, 1])
    assert worst_focus(np.array([0.1, 0.1, 1.0, 1.0]), target, 0.7) is None
    pool, scale, ranges, targets = _lwr_design_pool(lwr, 20, seed=5)
    prior = prior_information(scale, ranges)
    focus = worst_focus(predicted_std(prior, scale) / scale, targets)
    assert focus is not None and 0 < focus.size < targets.size
    with single_blas_thread():
        d_optimal = greedy_design(pool, 1, scale, prior)[0]
        focused = greedy_design(pool, 1, scale, prior, target=targets, focus_share=0.7)[0]
    assert logdet(prior + focused.information, focus) >= logdet(prior + d_optimal.information, focus) - 1e-9
    # an unknown no candidate can narrow (its information already 1e8 times the prior's) and far
    # from its target stalls the focus: the step is the one for the next in line, as if the loop
    # did not wait for that unknown
    worst = int(np.argmax(targets))
    held = np.zeros_like(prior)
    held[worst, worst] = 1e8 * prior[worst, worst]
    stalled = targets.copy()
    stalled[worst] = 1e-9
    passed = targets.copy()
    passed[worst] = np.inf
    with single_blas_thread():
        step = greedy_design(pool, 1, scale, prior, held, target=stalled, focus_share=0.7)[0]
        expected = greedy_design(pool, 1, scale, prior, held, target=passed, focus_share=0.7)[0]
        chasing = greedy_design(pool, 1, scale, prior, held, target=stalled, focus_share=0.7, stall_share=0.0)[0]
    assert (step.candidate, step.excitations) == (expected.candidate, expected.excitations)
    assert (chasing.candidate, chasing.excitations) != (step.candidate, step.excitations)
    gain = lambda s: logdet(prior + s.information, [worst]) - logdet(prior + held, [worst])
    assert 0 <= gain(step) <= gain(chasing) < STALL_GAIN
    # along the loop: configurations chosen for an unknown that leave its σ in place are counted
    # (two in a row: passed over); a 1 % fall resets the count, for any unknown
    count = np.zeros(4, int)
    count = unserved_count(count, (0, 1), np.ones(4), np.array([1.0, 0.9, 1.0, 1.0]))
    np.testing.assert_array_equal(count, [1, 0, 0, 0])
    count = unserved_count(count, (0,), np.ones(4), np.array([0.995, 1.0, 1.0, 1.0]))
    np.testing.assert_array_equal(count, [2, 0, 0, 0])
    np.testing.assert_array_equal(unserved_count(count, (1,), np.ones(4), np.array([0.98, 1.0, 1.0, 1.0])),
                                  [0, 1, 0, 0])


def test_worst_first_waits_only_for_what_its_budget_can_identify(lwr):
    """reachable_within: an unknown counts as reachable when the budget's configurations, each
    chosen for it alone, bring its σ (data only) to REL_STD_LIMIT of its scale — more budget, never
    fewer reachable; none with no budget; none outside the mask; one about which no candidate holds
    any information never (the prior alone would be within the limit for a stiffness: not counted);
    the best single configuration does reach those a budget of one reaches."""
    pool, scale, ranges, _ = _lwr_design_pool(lwr, 12, seed=5)
    prior = prior_information(scale, ranges)
    every = np.ones(scale.size, bool)
    with single_blas_thread():
        one = reachable_within(pool, prior, scale, 1, 2, every)
        three = reachable_within(pool, prior, scale, 3, 2, every)
        assert not reachable_within(pool, prior, scale, 0, 2, every).any()
        assert one.any() and np.all(three >= one)
        masked = every.copy()
        masked[np.flatnonzero(one)[0]] = False
        np.testing.assert_array_equal(reachable_within(pool, prior, scale, 1, 2, masked), one & masked)
        # an unknown no record informs (its sensitivity columns zeroed in every candidate)
        blind = [dataclasses.replace(c, jf=c.jf.copy(), jz=c.jz.copy()) for c in pool]
        j = int(np.flatnonzero(one)[0])
        assert predicted_std(prior, scale)[j] <= REL_STD_LIMIT * scale[j]
        for c in blind:
            c.jf[:, j] = 0.0
            c.jz[:, j] = 0.0
        assert not reachable_within(blind, prior, scale, 3, 2, every)[j]
        cancelled = CampaignStop()
        cancelled.cancel()
        with pytest.raises(Interrupted):                 # interruptible: a cancel stops it
            reachable_within(pool, prior, scale, 3, 2, every, stop=cancelled)
    for i in np.flatnonzero(one)[:2]:
        best = min(predicted_std(c.information([a, b]), scale)[i] for c in pool if c.stable
                   for a in range(len(c.options)) for b in range(len(c.options)) if a < b)
        assert best <= REL_STD_LIMIT * scale[i]


def test_design_against_random_fast_path_beats_random_draws_of_the_same_size(lwr):
    """The benchmark's fast path (no record): after K designed configurations the worst predicted
    relative std is below the median of random sets of K, and falls with K."""
    plant = make_plant("sim", lwr, lwr, np.zeros(lwr.n), PlantOptions())
    settings = CalibrationSettings(budget=3, validation=0, candidates=24, seed=2, random_seeds=3)
    out = design_against_random(lwr, plant, settings, budgets=(2, 3), criteria=("worst",))
    assert [(K, c) for K, c, _ in out["comparisons"]] == [(2, "worst"), (3, "worst")]
    assert out["identifiable"].all()
    for K, _, comparison in out["comparisons"]:
        assert comparison.designed[-1] < np.median(comparison.random[:, K - 1]), comparison.to_dict()
    assert out["comparisons"][1][2].designed[-1] < out["comparisons"][0][2].designed[-1]


def _design_setup(lwr):
    """(model, unknowns, scale, plan) of the visibility-calibration tests: the LWR4 at K_D × 0.2,
    every unknown, ranges ×0.5–2 (10 where nominal is 0), 2 ms pulses on every joint, two per
    configuration, recorded on both channels."""
    model = with_overrides(lwr, kd=lwr.kd * 0.2)
    unknowns = Unknowns.build(model)
    nominal = unknowns.values(model)
    scale = parameter_scale(model, unknowns, (0.5 * nominal, np.where(nominal > 0, 2 * nominal, 10.0)))
    rows = list(range(2 * model.n))
    torque = pulse_amplitudes(model, np.zeros(model.n), 0.002, default_excitation_limit(model), rows)
    return model, unknowns, scale, ExcitationPlan(torque, 0.002, tuple(range(model.n)), pulses_per_configuration=2)


def test_design_noise_is_calibrated_from_the_modes_the_oma_recovered(lwr):
    """A record that shows more modes than the assumed noise lets the design predict (the noise-free
    plant: every usable mode) lowers the design's noise until its rule predicts them visible; one
    that shows exactly the predicted ones keeps it; the pool re-screened at the new noise is the pool
    evaluated there."""
    model, unknowns, scale, plan = _design_setup(lwr)
    qs = candidate_configurations(model, 2, seed=2)
    pool = evaluate_pool(model, qs, unknowns, CONTINUOUS, plan, MeasurementModel(), scale)
    cand, options = pool[0], (4, 3)
    everything = observe(cand, options, cand.frequencies_hz[cand.usable])
    assert everything.visible(1.0).sum() < everything.measured.sum() == cand.usable.sum()
    c = noise_factor([everything])
    assert c < 1.0 and everything.visible(c).sum() > everything.visible(1.0).sum()
    as_predicted = observe(cand, options, cand.frequencies_hz[cand.usable][everything.visible(1.0)])
    assert noise_factor([as_predicted]) >= 1.0
    noise = DEFAULT_SENSOR_STD * c
    rescale_noise(pool, np.full(2 * model.n, noise))
    fresh = evaluate_pool(model, qs, unknowns, CONTINUOUS, plan, MeasurementModel(sensor_std=noise), scale)
    for a, b in zip(pool, fresh):
        assert np.array_equal(np.isinf(a.var_f), np.isinf(b.var_f))
        np.testing.assert_allclose(a.information([0, 1]), b.information([0, 1]), rtol=1e-9)


def test_spectral_dominance_is_the_peak_over_the_rest_of_the_numeric_spectrum():
    """spectral_dominance against the Fourier transform of the decay computed numerically (a long
    record, trapezoid rule, each pole's term taken in magnitude as the function does): two close
    heavily damped modes, the weaker one below 1, the stronger above; a lone light mode far above;
    an unexcited mode 0."""
    lam = np.array([-0.25 * 2 * np.pi * 6 + 2j * np.pi * 6, -0.2 * 2 * np.pi * 7 + 2j * np.pi * 7,
                    -0.01 * 2 * np.pi * 40 + 2j * np.pi * 40, -0.05 * 2 * np.pi * 20 + 2j * np.pi * 20])
    a = np.array([[1.0, 0.2], [0.4, 0.1], [0.05, 0.3], [0.0, 0.0]]) * np.exp(1j * np.array([[0.3], [1.1], [-0.4], [0]]))
    t = np.linspace(0.0, 40.0, 400001)
    expected = np.zeros(lam.size)
    for r in range(lam.size):
        w = lam[r].imag
        ft = lambda coef, pole: abs(np.trapezoid(coef * np.exp((pole - 1j * w) * t), t))
        per_channel = []
        for c in range(a.shape[1]):
            rest = sum(ft(a[s, c], lam[s]) for s in range(lam.size) if s != r)
            rest += sum(ft(np.conj(a[s, c]), np.conj(lam[s])) for s in range(lam.size))
            per_channel.append(ft(a[r, c], lam[r]) / rest if rest > 0 else np.inf)
        expected[r] = max(per_channel)
    got = spectral_dominance(lam, a)
    np.testing.assert_allclose(got[:3], expected[:3], rtol=1e-3)
    assert got[1] < 1.0 < got[0] and got[2] > 10.0 and got[3] == 0.0


def test_design_dominance_gate_is_learned_from_the_modes_the_oma_recovered(lwr):
    """Records that lose exactly the modes below dominance 1.5 (in each excitation, of those the
    noise rule shows there: the gate as the candidates apply it) teach the design that gate;
    records showing every mode the noise rule shows teach it one that removes none of them (the
    largest such, the most conservative); a pool screened at a gate has no visible mode below it,
    and the same modes as the rule without it above it."""
    model, unknowns, scale, plan = _design_setup(lwr)
    qs = candidate_configurations(model, 3, seed=2)
    pool = evaluate_pool(model, qs, unknowns, CONTINUOUS, plan, MeasurementModel(dominance_min=0.0), scale)
    options = (4, 3)
    probe = [observe(c, options, []) for c in pool]
    f_of = [c.frequencies_hz[c.usable] for c in pool]
    strong = [observe(c, options, f[o.visible(1.0, 1.5)]) for c, f, o in zip(pool, f_of, probe)]
    assert any((o.visible(1.0) & ~o.visible(1.0, 1.5)).any() for o in strong)        # the gate has modes to remove
    assert visibility_rule(strong, (1.0,)) == (1.0, 1.5)
    every = [observe(c, options, f[o.visible(1.0)]) for c, f, o in zip(pool, f_of, probe)]
    c, delta = visibility_rule(every, (1.0,))
    assert c == 1.0 and delta < 1.5 and all(np.array_equal(o.visible(1.0, delta), o.visible(1.0)) for o in every)
    gated = [dataclasses.replace(c, var_f=c.var_f.copy(), var_z=c.var_z.copy(), snr=c.snr.copy()) for c in pool]
    rescale_noise(gated, DEFAULT_SENSOR_STD * np.ones(2 * model.n), 1.5)
    for c, g in zip(pool, gated):
        idx = np.flatnonzero(c.usable)
        kept = np.isfinite(g.var_f[:, idx])
        assert not (kept & (g.dominance[:, idx] < 1.5)).any()
        assert np.array_equal(kept, np.isfinite(c.var_f[:, idx]) & (g.dominance[:, idx] >= 1.5))


def test_design_spread_is_learned_from_the_sigma_the_oma_reports(lwr):
    """Measured modes whose reported σ_f, σ_ζ are g × the design's (the recorded excitations analysed
    together) give log g per (mode, f or ζ) whatever spread the candidate was screened at; modes the
    design did not predict visible, or without a finite σ, give none. learned_spread is their median
    (1 below SPREAD_SAMPLES) over the noise factor applied since. A pool re-screened at a spread has
    its variances times its square and the same modes visible."""
    model, unknowns, scale, plan = _design_setup(lwr)
    pool = evaluate_pool(model, candidate_configurations(model, 1, seed=2), unknowns, CONTINUOUS, plan,
                         MeasurementModel(), scale)
    cand, options, g = pool[0], (4, 3), 7.5
    idx = np.flatnonzero(cand.usable)
    with np.errstate(divide="ignore"):                      # inf: not visible in these excitations
        sf = 1 / np.sqrt(np.sum(1 / cand.var_f[np.ix_(options, idx)], axis=0))
        sz = 1 / np.sqrt(np.sum(1 / cand.var_z[np.ix_(options, idx)], axis=0))
    seen = np.isfinite(sf)
    assert 2 <= seen.sum() < idx.size
    modes = [{"frequency_hz": f, "oma_std_frequency_hz": g * a, "oma_std_damping_ratio": g * b}
             for f, a, b in zip(cand.frequencies_hz[idx], sf, sz)]
    modes[int(np.flatnonzero(seen)[0])]["oma_std_damping_ratio"] = None       # not finite in the OMA
    before = cand.var_f.copy()
    for spread in (1.0, 3.0):
        rescale_noise(pool, cand.rule[0], None, spread)
        np.testing.assert_allclose(cand.var_f[np.isfinite(before)], spread ** 2 * before[np.isfinite(before)])
        assert np.array_equal(np.isfinite(cand.var_f), np.isfinite(before))
        logs = spread_samples(cand, options, modes)
        assert len(logs) == 2 * seen.sum() - 1
        np.testing.assert_allclose(logs, np.log(g), rtol=1e-9)
    assert learned_spread(logs[:SPREAD_SAMPLES - 1]) == 1.0
    assert learned_spread(logs) == pytest.approx(g) and learned_spread(logs, 0.5) == pytest.approx(2 * g)
    assert spread_samples(cand, options, []) == [] and spread_samples(cand, (), modes) == []


def _true_modes(true_model, qs, loop, relative_std, reference_model=None, leave_out=0) -> MeasuredModes:
    """The exact modes of ``true_model``'s ``loop`` at the configurations ``qs`` as measured modes
    (σ_f = relative_std · f, σ_ζ = relative_std), indexed by the modes of ``reference_model``'s loop
    (default: the truth's own), which they are tracked to (MAC); the last ``leave_out`` reference
    modes left out."""
    config, f, z, idx, refs = [], [], [], [], []
    for i, q in enumerate(qs):
        truth = loop_modes(true_model, q, loop)
        ref = truth if reference_model is None else loop_modes(reference_model, q, loop)
        order = track_modes([ref, truth])[0][1]
        refs.append(ref)
        for j in range(ref.num_modes - leave_out):
            config.append(i), idx.append(j)
            f.append(truth.frequencies_hz[order[j]]), z.append(truth.damping_ratios[order[j]])
    f, z = np.array(f), np.array(z)
    return MeasuredModes(qs, np.array(config), f, z, relative_std * f, np.full(f.size, relative_std), np.array(idx),
                         tuple(refs))


@pytest.mark.parametrize("max_rounds", [None, 1])
def test_weighted_fit_recovers_the_truth_and_flags_the_unidentifiable(scompi, max_rounds, monkeypatch):
    """Synthetic measured modes (the true sampled loop's, noise of their stated σ): k and d_f
    within 3 σ; scompi's d_fm (≈1e-3 beside K_D = 52) reported not identifiable, nominal kept.
    ``max_rounds=1``: the fix-the-unidentifiable refits run out with some unknowns still
    unidentifiable (a noisy record at 2^20 counts/rev + 1e-6 rad did that) — the last fit's
    unknowns keep their own verdicts (this ended the campaign with a broadcast error before)."""
    if max_rounds is not None:
        monkeypatch.setattr(weighted_fit, "MAX_ROUNDS", max_rounds)
    loop = LoopModel(1000.0, "zoh")
    unknowns = Unknowns.build(scompi)
    rng = np.random.default_rng(4)
    nominal = unknowns.values(scompi)
    truth = nominal * np.concatenate([rng.uniform(0.8, 1.2, 6), rng.uniform(0.6, 1.6, 12)])
    true_model = unknowns.apply(scompi, truth)
    qs = candidate_configurations(scompi, 4, seed=7)
    exact = _true_modes(true_model, qs, loop, 2e-4, reference_model=scompi, leave_out=1)   # 850 Hz: above Nyquist
    meas = dataclasses.replace(exact, frequency_hz=exact.frequency_hz + rng.normal(size=exact.size) * exact.std_frequency_hz,
                   damping_ratio=exact.damping_ratio + rng.normal(size=exact.size) * exact.std_damping_ratio)
    bounds = (0.5 * nominal, 2.0 * nominal)
    fit = fit_parameters(scompi, unknowns, meas, loop, nominal, bounds)
    kinds = np.array(unknowns.kinds)
    assert not fit.identifiable[kinds == "d_fm"].any()
    np.testing.assert_array_equal(fit.values[kinds == "d_fm"], nominal[kinds == "d_fm"])
    ok = fit.identifiable
    assert ok[kinds == "k"][:4].all()
    assert np.all(np.abs(fit.values[ok] - truth[ok]) <= 3 * fit.std[ok])


def test_held_gain_matches_refits_with_the_held_value_moved(lwr):
    """The gain by which an unknown held at a value moves the free ones (``held_gain``: the
    "consider" term of their σ, weighted_fit._held_std) against finite differences — kuka_lwr4
    (K_D × 0.2), k and d_fm unknown, noise-free modes of a truth at 2 configurations, d_fm/joint_2
    held at its true value and at 1 % more: the free unknowns' change is −G·Δ within 5 % of its
    largest entry."""
    model = with_overrides(lwr, kd=np.asarray(lwr.kd, float) * 0.2)
    unknowns = Unknowns.build(model, ("k", "d_fm"))
    nominal = unknowns.values(model)
    rng = np.random.default_rng(3)
    truth = nominal * np.concatenate([rng.uniform(0.8, 1.2, 7), rng.uniform(0.7, 1.4, 7)])
    truth_model = unknowns.apply(model, truth)
    meas = _true_modes(truth_model, candidate_configurations(model, 2, seed=5), CONTINUOUS, 1e-4)
    held = unknowns.names.index("d_fm/joint_2")
    free = np.ones(unknowns.size, bool)
    free[held] = False
    bounds = (0.5 * nominal, 2.0 * nominal)
    moved = truth.copy()
    moved[held] *= 1.01
    fits = [fit_parameters(model, unknowns, meas, CONTINUOUS, nominal, bounds, x0=truth, free=free, outliers=False,
                           fixed_values=v) for v in (truth, moved)]
    assert all(fit.identifiable[free].all() for fit in fits)
    change = (fits[1].values - fits[0].values)[free] / nominal[free]
    problem = weighted_fit._Problem(model, unknowns, np.flatnonzero(free), truth.copy(), meas, CONTINUOUS, nominal,
                                    NO_STOP)
    x = truth[free] / nominal[free]
    _, J, _ = problem.evaluate(x)
    held_idx, gain = weighted_fit.held_gain(problem, x, J)
    assert held_idx.tolist() == [held]
    predicted = -gain[:, 0] * 0.01 * truth[held] / nominal[held]
    assert np.max(np.abs(change - predicted)) <= 0.05 * np.max(np.abs(predicted)), (change, predicted)


def test_experiment_gains_keep_the_sampled_loop_stable(scompi):
    """K_D × 0.5 keeps scompi's continuous loop stable but not the 1 kHz loop with a period of
    delay at every configuration: the choice skips it."""
    delayed = LoopModel(1000.0, "zoh-delay")
    qs = candidate_configurations(scompi, 12, seed=0)
    meas = MeasurementModel()
    half = with_overrides(scompi, kd=scompi.kd * 0.5)
    assert min(loop_damping(half, q, CONTINUOUS, meas) for q in qs) > 0
    assert min(loop_damping(half, q, delayed, meas) for q in qs) < 0
    unknowns = Unknowns.build(scompi, ("k", "d_f"))
    nominal = unknowns.values(scompi)
    plan = ExcitationPlan(default_excitation_limit(scompi), 0.002, tuple(range(6)))
    factor, table = choose_experiment_gains(scompi, qs, unknowns, plan, meas, (0.5 * nominal, 2 * nominal), delayed)
    assert factor == 1.0 and 0.5 not in table and 0.2 not in table


def test_bad_settings_are_refused_naming_the_field(lwr):
    for change, field in (({"budget": 0}, "budget"), ({"budget": 101}, "budget"), ({"target_k": -1.0}, "target_k"),
                          ({"unknowns": ("k", "x")}, "unknowns"), ({"ranges": {"k": (2.0, 3.0)}}, "ranges.k"),
                          ({"experiment_kd_scale": 2.0}, "experiment_kd_scale"), ({"record_s": 100.0}, "record_s"),
                          ({"design": "clever"}, "design"), ({"pulse_joints": ("joint_9",)}, "pulse_joints"),
                          ({"pulse_joints": (7,)}, "pulse_joints"), ({"pulse_joints": ()}, "pulse_joints"),
                          ({"pulse_joints": (None,)}, "pulse_joints"), ({"pulse_joints": (1.5,)}, "pulse_joints")):
        with pytest.raises(InputError, match=field):
            check_settings(lwr, CalibrationSettings(**change), 1000.0)


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    out = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "calibrate", "--robot", "kuka_lwr4", "--budget",
                          "0", "-o", str(tmp_path / "c.yaml")], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "budget" in out.stderr
    from flexmodal_ros.cli import main
    assert main(["calibrate", "--robot", "kuka_lwr4", "--joints", "joint_9", "-o", str(tmp_path / "c.yaml")]) == 2
    assert main(["calibrate", "--robot", "kuka_lwr4", "--pulse-torque", "500", "-o", str(tmp_path / "c.yaml")]) == 2
    assert main(["calibrate", "--robot", "kuka_lwr4", "--pulse-joints", "joint_1,wrist", "-o",
                 str(tmp_path / "c.yaml")]) == 2
    assert not (tmp_path / "c.yaml").exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "joint_9" in err[0] and "excitation limit" in err[1]
    assert "--pulse-joints: unknown joint(s) wrist;" in err[2]


def test_calibration_node_is_wired_in_setup_and_launch():
    import ast
    import re
    from pathlib import Path

    from flexmodal_ros.nodes.bringup import OPTIONAL_ARGUMENTS, node_commands, optional_nodes

    root = Path(__file__).resolve().parents[1]
    scripts = dict(re.findall(r'"(\w+) = flexmodal_ros\.nodes\.entry_points:(\w+)"', (root / "setup.py").read_text()))
    assert scripts["calibration_server"] == "calibration_server"
    assert optional_nodes({"calibration": "true"}) == (("calibration_server", "calibration"),)
    assert optional_nodes({"calibration": "false"}) == ()
    assert Path(node_commands("kuka_lwr4", extra=["calibration"])[-1][0]).name == "calibration_server"
    launch = ast.parse((root / "launch" / "bringup.launch.py").read_text())
    imported = {a.name for n in ast.walk(launch) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {"OPTIONAL_ARGUMENTS", "optional_nodes"} <= imported and "calibration" in OPTIONAL_ARGUMENTS


def test_worst_first_loop_identifies_every_unknown_and_learns_its_visibility_rule():
    """The loop with design="worst-first" (CLI --design worst-first) on a noise-free planar_2r plant
    with a hidden truth: targets reached, every unknown identified within 0.1 % of the truth, and
    the dominance gate it designed with after each configuration in its history (learned from the
    modes the OMA recovered, one of visibility_calibration.DOMINANCES)."""
    from flexmodal_ros.calibration.visibility_calibration import DOMINANCES
    from flexmodal_ros.calibration.campaign import calibrate
    from flexmodal_ros.cli import build_parser
    from flexmodal_ros.cli.calibrate import settings_from_args
    nominal = load_robot("planar_2r")
    truth_model = with_overrides(nominal, k=nominal.k * np.array([1.2, 0.85]), d_fm=nominal.d_fm * np.array([1.5, 0.7]))
    plant = make_plant("sim", truth_model, nominal, np.zeros(nominal.n), PlantOptions())
    settings = CalibrationSettings(budget=3, validation=0, candidates=20, random_seeds=0, tracking=False,
                                   design="worst-first")
    result = calibrate(nominal, plant, settings, None, truth_model=truth_model)
    assert result.success and result.message.startswith("targets reached"), result.message
    truth = Unknowns.build(nominal).values(truth_model)
    assert result.identifiable.all()
    np.testing.assert_array_less(np.abs(result.values - truth), 1e-3 * np.where(truth > 0, truth, 1.0))
    assert all(h["design_dominance_min"] in DOMINANCES for h in result.history)
    assert all(0 < h["design_spread"] < np.inf for h in result.history)
    assert all(set(h["design_passed_over"]) <= set(result.unknown_names) for h in result.history)
    assert all(h["design_beyond_budget"] == [] for h in result.history)     # planar_2r: every one reachable in 3
    # what the design expected to see against what the OMA gave (bench_calibration prints both)
    assert all(0 < h["modes_expected"] <= 2 * nominal.n for h in result.history)
    assert all(0 < h["modes_measured"] <= 2 * nominal.n for h in result.history)
    args = build_parser().parse_args(["calibrate", "--robot", "planar_2r", "-o", "x.yaml", "--design", "worst-first"])
    assert settings_from_args(args, nominal, None).design == "worst-first"


def test_loop_pulses_only_the_joints_it_may_pulse(tmp_path):
    """pulse_joints (CLI --pulse-joints, action field pulse_joints): every record of the loop pulses
    one of those joints, and the loop still calibrates (planar_2r, noise-free, joint_2 only: each
    configuration one record, the default two pulses capped at the one option); the sidecar JSON
    records the settings the experiment ran with."""
    from flexmodal_ros.calibration.calibration_report import write_sidecar
    from flexmodal_ros.calibration.campaign import calibrate
    from flexmodal_ros.cli import build_parser
    from flexmodal_ros.cli.calibrate import settings_from_args
    nominal = load_robot("planar_2r")
    truth_model = with_overrides(nominal, k=nominal.k * np.array([1.2, 0.85]))
    plant = make_plant("sim", truth_model, nominal, np.zeros(nominal.n), PlantOptions())
    args = build_parser().parse_args(["calibrate", "--robot", "planar_2r", "-o", "x.yaml", "--budget", "2",
                                      "--validation", "0", "--candidates", "20", "--random-seeds", "0",
                                      "--no-tracking", "--unknowns", "k", "--pulse-joints", "joint_2"])
    settings = settings_from_args(args, nominal, None)
    assert settings.pulse_joints == ("joint_2",)
    result = calibrate(nominal, plant, settings, None, truth_model=truth_model)
    assert result.success, result.message
    assert [h["excitations"] for h in result.history] == [["pulse joint_2"]] * len(result.history)
    truth = Unknowns.build(nominal, ("k",)).values(truth_model)
    assert result.identifiable.all()
    np.testing.assert_array_less(np.abs(result.values - truth), 1e-3 * truth)
    recorded = json.loads(write_sidecar(result, tmp_path / "c.yaml").read_text())["settings"]
    assert recorded["pulse_joints"] == ["joint_2"] and recorded["unknowns"] == ["k"] and recorded["budget"] == 2

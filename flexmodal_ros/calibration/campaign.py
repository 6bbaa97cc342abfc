"""The calibration loop: design → move → settle → excite → record → OMA → identify → repeat,
then validate and write a loadable params YAML.

:func:`calibrate` drives any *plant* — an offline one (:mod:`.offline_plants`: the suite's RK4
plant or MuJoCo, each with the controller) or a robot behind the suite's ROS topics
(flexmodal_ros/nodes/topic_plant.py) — that offers ``move_to(q)``, ``settle(s)``,
``excite_and_record(excitation, before, after)`` → Record, ``measured()``, ``loop``
(:class:`~.eigen_sensitivity.LoopModel`) and ``sample_rate_hz``.

Per configuration (at most ``budget``):

1. the next configuration and its excitations (:func:`~.design_selection.greedy_design`: D-optimal
   on the information of the modes expected to be visible, from the current estimate; Ds-optimal on
   the unknowns still above their target once others reach it);
2. move there through the controller (a C⁴ trajectory within the URDF limits), settle, and record
   each excitation (a motor pulse of at most the excitation limit, or a tool impulse);
3. OMA of the records as references of one analysis
   (:func:`~flexmodal_ros.oma.mode_estimation.identify_modes`), matched to the current model's modes
   (:func:`~flexmodal_ros.oma.compare.compare_with_model`, wider gate before the first fit);
4. weighted identification of everything measured so far (:func:`~.weighted_fit.fit_parameters`),
   every configuration re-matched with the new estimate, refitted if a match changed;
5. stop when every unknown that the candidate pool can identify has a standard deviation below its
   target (relative to its scale), from MIN_CONFIGURATIONS configurations on, or at the budget
   (worst-first: every one its budget can identify, :func:`~.design_selection.reachable_within`;
   the others are recorded as ``design_beyond_budget`` in the history). Unknowns that no candidate
   configuration can identify with these sensors are reported as not identifiable (nominal value
   kept).

Then a final multistart fit, validation at ``validation`` configurations not used in the fit
(measured against predicted modes, calibrated and nominal model) and — for simulated plants, whose
truth is known — tracking of a reference by the feedforward built from the calibrated, the true and
the nominal model (:func:`tracking_validation`). Outputs (:mod:`.calibration_report`): the params
YAML, a JSON sidecar, report.md with PNG plots; the data of every configuration is saved as soon as
it is measured (``partial/``), so a fault or a cancel mid-run leaves it on disk.

Rooms: :mod:`.campaign_settings` (options, bounds, cancel), :mod:`.campaign_results` (what comes
back), :mod:`.campaign_state` (the run's state), :mod:`.configuration_measurement` (one
configuration: move, settle, excite, record, OMA, match), :mod:`.tracking_check` (tracking
validation); this module is the loop.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..core.blas import single_blas_thread
from ..core.errors import FlexmodalError, InputError
from ..core.workers import Interrupted
from .campaign_results import CalibrationResult, ConfigurationData, config_dict  # noqa: F401  (re-exported)
from .campaign_settings import (DEFAULT_RANGES, FIRST_GATE, GATE, MAX_RECORD_S, CalibrationSettings,  # noqa: F401
                                CampaignStop, check_settings, unknown_ranges)
from .campaign_state import CampaignState
from .eigen_sensitivity import loop_modes
from .design_comparison import compare_with_random, random_design
from .design_selection import (FOCUS_SHARE, STALL_STEPS, greedy_design, identifiable_mask, predicted_std,
                               reachable_within, unserved_count)
from .experiment_design import candidate_configurations, choose_experiment_gains, prior_information
from .tracking_check import tracking_trajectory, tracking_validation  # noqa: F401  (re-exported)
from .visibility_calibration import (CHANGE, DOMINANCES, FACTORS, learned_spread, observe, rescale_noise,
                                     spread_samples, visibility_rule)
from .weighted_fit import follow_modes

REEVALUATE_SHIFT = 0.1       # re-evaluate the candidate pool when an estimate moved this much (relative)
GAIN_POOL = 30               # candidates that decide the experiment gains
COMPARISON_BUDGET = 4        # designed configurations compared with random ones (at least)
MIN_CONFIGURATIONS = 2       # the targets end the loop only from this many configurations on

def calibrate(model, plant, settings: CalibrationSettings = CalibrationSettings(), out_dir=None, progress=None,
              stop=None, truth_model=None) -> CalibrationResult:
    """Calibrate the unknowns of ``model`` on ``plant`` (module docstring). ``progress(dict)`` is
    called at every stage (feedback); ``stop`` a :class:`CampaignStop`; ``truth_model`` the hidden
    truth of a simulated plant (only for the tracking validation and the report, never for the
    fit). A fault or a cancel ends the loop with the data measured so far (saved under ``out_dir``)
    and ``success`` False; the plant is left holding."""
    stop = stop or CampaignStop()
    check_settings(model, settings, plant.sample_rate_hz)
    run = CampaignState(model, plant, settings, out_dir, progress, stop, truth_model)
    s = settings
    if run.out_dir is not None:
        (run.out_dir / "partial").mkdir(parents=True, exist_ok=True)
    qs = candidate_configurations(model, s.candidates, s.seed)
    gain_table = {}
    try:
        gain_table = _choose_gains(run, qs)
        result = _run(run, qs, gain_table)
    finally:
        try:
            run.restore_gains()
            restore_error = ""
        except FlexmodalError as exc:           # reported, the result (and its data) is kept
            restore_error = str(exc)
    if restore_error:
        result.success = False
        result.message += f"; the controller's gains could not be restored ({restore_error})"
    return result


def _choose_gains(run, qs):
    """The experiment's K_D factor (the setting, or :func:`choose_experiment_gains` on the first
    GAIN_POOL candidates), applied to ``run``; returns the table of predicted std per factor."""
    factor, gain_table = run.s.experiment_kd_scale, {}
    if factor is None:
        t0 = time.perf_counter()
        run.report("choosing the experiment gains")
        factor, gain_table = choose_experiment_gains(run.model, qs[:GAIN_POOL], run.unknowns, run.plan,
                                                     run.measurement, run.bounds, run.loop)
        run.timed("design", t0)
    run.use_gains(factor)
    return gain_table


def _focus_share(s):
    return FOCUS_SHARE if s.design == "worst-first" else None


def _waited_for(run, reachable):
    """The design's targets: the loop's; for the worst-first design inf for the unknowns not in
    ``reachable`` — those the pool cannot identify (the loop does not wait for them, so the design
    does not chase them: design_selection.worst_focus) and those passed over
    (design_selection.unserved_count)."""
    return np.where(reachable, run.targets, np.inf) if run.s.design == "worst-first" else run.targets


def _design_pool(run, qs):
    """(validation indices, evaluated pool, prior information, the pool's predicted std, the
    unknowns the whole pool can identify)."""
    s = run.s
    rng = np.random.default_rng(s.seed)
    validation_idx = set(rng.choice(len(qs), size=s.validation, replace=False).tolist()) if s.validation else set()
    pool = run.evaluate_pool(qs)
    prior = prior_information(run.scale, run.bounds)
    all_info = sum(c.information(list(range(len(c.options)))) for i, c in enumerate(pool)
                   if i not in validation_idx and c.stable)
    pool_std = predicted_std(all_info, run.scale)
    return validation_idx, pool, prior, pool_std, identifiable_mask(pool_std, run.scale)


def _compare_designs(run, pool, prior, validation_idx, reachable, budgets, criteria=("worst",)):
    """Designed against random configurations of the same pool, from scratch
    (:func:`~.design_comparison.compare_with_random`), one :class:`DesignComparison` per budget of
    ``budgets`` and criterion of ``criteria`` (:data:`~.design_comparison.CRITERIA`): a list of
    (K, criterion, comparison)."""
    s = run.s
    with single_blas_thread():
        steps = greedy_design(pool, max(budgets), run.scale, prior, exclude=validation_idx,
                              pulses_per_configuration=s.pulses_per_configuration, target=_waited_for(run, reachable),
                              focus_share=_focus_share(s))
    return [(K, c, compare_with_random(pool, steps[:K], run.scale, seeds=s.random_seeds,
                                       pulses_per_configuration=s.pulses_per_configuration,
                                       identifiable=reachable, seed=s.seed, exclude=validation_idx, criterion=c))
            for K in sorted({min(K, len(steps)) for K in budgets}) if K > 0 for c in criteria]


def design_against_random(model, plant, settings: CalibrationSettings = CalibrationSettings(),
                          budgets=(2, 3, 4, 5, 6), criteria=("worst", "mean")) -> dict:
    """The fast path of the design comparison: no record, only the Fisher information of the
    experiment design on the nominal ``model`` (what :func:`calibrate` sees before its first
    configuration; ``plant`` gives the loop, the sample rate and the channels, nothing runs on
    it). For each K of ``budgets``: the worst predicted relative std (over the unknowns the pool
    can identify) after K designed configurations, and how many random configurations
    (``settings.random_seeds`` draws, at most 4·K) reach it; with the criterion "mean" the same
    for the geometric mean of the relative std. Returns {"comparisons": [(K, criterion,
    DesignComparison), ...], "experiment_kd_scale", "unknown_names", "identifiable", "seconds"}."""
    check_settings(model, settings, plant.sample_rate_hz)
    if settings.random_seeds < 1:
        raise InputError(f"random_seeds: must be at least 1 for a comparison, got {settings.random_seeds}")
    t0 = time.perf_counter()
    run = CampaignState(model, plant, settings, None, None, CampaignStop(), None)
    qs = candidate_configurations(model, settings.candidates, settings.seed)
    _choose_gains(run, qs)
    validation_idx, pool, prior, _, reachable = _design_pool(run, qs)
    comparisons = _compare_designs(run, pool, prior, validation_idx, reachable, tuple(budgets), tuple(criteria))
    return {"comparisons": comparisons, "experiment_kd_scale": run.kd_scale,
            "unknown_names": list(run.unknowns.names), "identifiable": reachable,
            "seconds": time.perf_counter() - t0}


def _run(run, qs, gain_table):
    s, stop, model, truth_model = run.s, run.stop, run.user_model, run.truth
    message, success = "", False
    validation_idx, pool, prior, pool_std, reachable = _design_pool(run, qs)
    beyond = np.zeros(run.unknowns.size, bool)     # worst-first: what the budget cannot identify, not waited for
    # the first fit waits for more residuals (f and ζ of each matched mode) than unknowns it could
    # determine; worst-first counts only those it waits for (on scompi the d_fm no record shows and
    # the d_f its budget cannot reach: a fit after the first configuration, and the second chosen
    # with what the first measured; docs/calibration.md, stop 48)
    first_fit = run.unknowns.size
    random_rng = np.random.default_rng(s.seed + 1)
    design_steps, used, pool_at = [], set(), run.estimate.copy()
    observations, noise_c, assumed = [], 1.0, run.measurement
    spreads, spread = [], 1.0           # worst-first: log(σ OMA / σ predicted at the assumed noise)
    unserved, last = np.zeros(run.unknowns.size, int), None     # worst-first: unknowns its steps left in place
    try:
        if s.design == "worst-first":
            t0 = time.perf_counter()
            with single_blas_thread():
                beyond = reachable & ~reachable_within(pool, prior, run.scale, s.budget, s.pulses_per_configuration,
                                                       reachable, validation_idx, stop)
            first_fit = int((reachable & ~beyond).sum())
            run.timed("design", t0)
        for k in range(s.budget):
            stop.check()
            t0 = time.perf_counter()
            info = run.information()
            if np.any(np.abs(run.estimate / np.maximum(pool_at, 1e-300) - 1)[run.nominal > 0] > REEVALUATE_SHIFT):
                pool, pool_at = run.evaluate_pool(qs), run.estimate.copy()
            with single_blas_thread():
                if s.design == "random":
                    step = random_design(pool, 1, run.scale, random_rng, info, exclude=used | validation_idx,
                                         pulses_per_configuration=s.pulses_per_configuration)
                else:
                    worst_first = s.design == "worst-first" and info is not None
                    now = predicted_std(prior + info, run.scale) if worst_first else None
                    if last is not None and now is not None:
                        unserved = unserved_count(unserved, *last, now)      # only between two fits
                    step = greedy_design(pool, 1, run.scale, prior, info, exclude=used | validation_idx,
                                         pulses_per_configuration=s.pulses_per_configuration,
                                         target=_waited_for(run, reachable & ~beyond & (unserved < STALL_STEPS)),
                                         focus_share=_focus_share(s))
                    last = (step[0].focus, now) if step and now is not None else None
            run.timed("design", t0)
            if not step:
                message = "no candidate configuration left"
                break
            step = step[0]
            used.add(step.candidate)
            design_steps.append(step)
            data = run.measure(k, qs[step.candidate], step.excitations)
            run.configs.append(data)
            run.match(data, run.current_model(), FIRST_GATE if run.fit is None else GATE)
            run.report("fitting", modes_measured=len(data.modes))
            if sum(len(c.modes) for c in run.configs) * 2 > first_fit:
                run.refit()
            entry = {"configuration": k, "q": data.q.tolist(), "excitations": data.excitations,
                     "modes_expected": int(pool[step.candidate].visible(step.excitations).sum()),
                     "modes_measured": len(data.modes), "values": run.estimate.tolist(),
                     "std": [None if not np.isfinite(v) else float(v) for v in run.std],
                     "predicted_std": [None if not np.isfinite(v) else float(v) for v in step.predicted_std]}
            # the design's visibility rule from what the OMA recovered: the noise (when not given), the dominance gate
            t0 = time.perf_counter()
            observations.append(observe(pool[step.candidate], step.excitations,
                                        [m["frequency_hz"] for m in data.modes], noise_c))
            c, delta = visibility_rule(observations, FACTORS if s.sensor_std is None else (1.0,),
                                       DOMINANCES if s.design == "worst-first" else (0.0,))
            if s.design == "worst-first":   # the σ the OMA reported against the design's (at the assumed noise)
                spreads += [x + np.log(noise_c) for x in spread_samples(pool[step.candidate], step.excitations,
                                                                         data.modes)]
            moved = abs(np.log(c / noise_c)) > np.log(CHANGE)
            noise_c = c if moved else noise_c
            g = learned_spread(spreads, noise_c)
            spread_moved = abs(np.log(g / spread)) > np.log(CHANGE)
            if moved or delta != run.measurement.dominance_min or spread_moved:
                spread = g if spread_moved else spread
                run.measurement = replace(assumed, sensor_std=assumed.noise(run.model) * noise_c, dominance_min=delta,
                                          spread=spread)
                rescale_noise(pool, run.measurement.noise(run.model), delta, spread)
            if s.sensor_std is None:
                entry["design_noise_factor"] = noise_c
            if s.design == "worst-first":
                entry["design_dominance_min"] = run.measurement.dominance_min
                entry["design_spread"] = spread
                entry["design_beyond_budget"] = [run.unknowns.names[i] for i in np.flatnonzero(beyond)]
                entry["design_passed_over"] = [run.unknowns.names[i] for i in np.flatnonzero(unserved >= STALL_STEPS)]
            run.timed("design", t0)
            run.history.append(entry)
            run.save_state()
            run.report("configuration done", positions=data.q.tolist(), modes_measured=len(data.modes),
                       modes_expected=entry["modes_expected"],
                       names=list(run.unknowns.names), values=run.estimate.tolist(),
                       std=run.std.tolist(), predicted_std=step.predicted_std.tolist())
            done = (run.std <= run.targets * run.scale) | ~reachable | beyond
            if run.fit is not None and done.all() and len(run.configs) >= MIN_CONFIGURATIONS:
                message = f"targets reached after {k + 1} configuration(s)"
                break
        else:
            message = f"budget of {s.budget} configuration(s) used"
        stop.check()
        run.report("final fit")
        if any(c.modes for c in run.configs):
            run.refit(starts=s.starts, final=True)
        else:       # records too noisy for the OMA: reported, never a fault (nominal kept, nothing identifiable)
            message += ("; no mode of the model was identified in any record (measurement noise?): "
                        "every unknown not identifiable, nominal values kept")
        for i in sorted(validation_idx):
            stop.check()
            t0 = time.perf_counter()
            cand = pool[i]
            opts = list(np.argsort(-np.nansum(np.where(np.isfinite(cand.var_f), 1.0, 0.0), axis=1))
                        [: s.pulses_per_configuration])
            data = run.measure(len(run.validation), qs[i], opts, validation=True)
            _validate(run, data)
            run.validation.append(data)
            run.timed("validation", t0)
        success = True
    except Interrupted as exc:
        message = "cancelled" if exc.reason == "cancelled" else f"time limit reached ({exc.reason})"
    except (FlexmodalError, np.linalg.LinAlgError) as exc:
        message = f"fault: {exc}"
    except Exception as exc:        # a plant or numerical failure must not lose the data measured so far
        message = f"fault: {type(exc).__name__}: {exc}"
    run.save_state()
    comparison = None
    if success and s.random_seeds:          # designed against random sets of the same pool, from scratch
        t0 = time.perf_counter()
        run.report("design against random configurations")
        comparison = (_compare_designs(run, pool, prior, validation_idx, reachable,
                                       (max(s.budget, COMPARISON_BUDGET),)) or [(0, "", None)])[0][2]
        run.timed("design", t0)
    result = CalibrationResult(
        success=success and bool(run.configs), message=message, robot=model.name, unknown_names=run.unknowns.names,
        nominal=run.nominal, values=run.estimate, std=run.std, identifiable=run.identifiable,
        predicted_std_pool=pool_std, model=run.calibrated_model(), nominal_model=model, loop=run.loop,
        configurations=run.configs, validation=run.validation, history=run.history, design=comparison,
        fit=run.fit, timing=run.timing, settings=s, experiment_kd_scale=run.kd_scale,
        gain_table={k: v.tolist() for k, v in gain_table.items()},
        truth=None if truth_model is None else run.unknowns.values(truth_model))
    if success and truth_model is not None and s.tracking:
        t0 = time.perf_counter()
        run.report("tracking validation")
        try:
            result.tracking = tracking_validation(truth_model, model, result.model, run.plant)
        except FlexmodalError as exc:
            result.tracking = {"error": str(exc)}
        run.timed("tracking", t0)
    return result


def _validate(run, data):
    """Match a validation configuration's OMA with the calibrated model and add the nominal model's
    predictions of the same modes."""
    run.match(data, run.current_model(), GATE)
    nominal = loop_modes(run.model, data.q, run.loop)
    idx = follow_modes(data.references, nominal, np.array([m["mode_index"] for m in data.modes], int))
    for m, j in zip(data.modes, idx):
        m["calibrated_frequency_hz"] = float(data.references.frequencies_hz[m["mode_index"]])
        m["calibrated_damping_ratio"] = float(data.references.damping_ratios[m["mode_index"]])
        m["nominal_frequency_hz"] = float(nominal.frequencies_hz[j])
        m["nominal_damping_ratio"] = float(nominal.damping_ratios[j])

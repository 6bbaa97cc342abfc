"""Hidden-truth calibrations (issue 31 acceptance), offline: a plant whose k, d_f, d_fm were drawn
away from the nominal YAML (k × U(0.7, 1.3), d × U(0.5, 2) per joint), driven through the suite's
controller at 1 kHz with one period of command delay, motor pulses only. The calibration sees only
the nominal model. Checked: k within 2 %, every damping reported identifiable within 10 %, each
within 3 reported standard deviations, the not identifiable ones reported (nominal kept); the
validation configurations' modes; on kuka_lwr4 the thesis trajectory tracked by the calibrated
feedforward within 1.2× the true model's error and ≥ 5× better than the nominal one's; the
params YAML loads. The other two robot/plant pairs and the noise study: benchmarks/bench_calibration.py
(numbers in docs/calibration.md)."""
import numpy as np
import pytest

from flexmodal_ros.calibration.calibration_report import write_params, write_report, write_sidecar
from flexmodal_ros.calibration.campaign import CalibrationSettings, calibrate
from flexmodal_ros.calibration.eigen_sensitivity import Unknowns
from flexmodal_ros.calibration.offline_plants import PlantOptions, make_plant
from flexmodal_ros.cli.calibrate import random_truth
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot, resolve_model

pytestmark = pytest.mark.slow


def _check_accuracy(result, truth):
    kinds = np.array([n.split("/")[0] for n in result.unknown_names])
    ok = result.identifiable
    err = result.values - truth
    k = kinds == "k"
    assert ok[k].all()
    np.testing.assert_array_less(np.abs(err[k] / truth[k]), 0.02)
    damping = ~k & ok & (truth > 0)
    np.testing.assert_array_less(np.abs(err[damping] / truth[damping]), 0.10)
    np.testing.assert_array_less(np.abs(err[ok]), 3 * result.std[ok] + 1e-12)
    # the not identifiable keep their nominal value and an infinite standard deviation
    np.testing.assert_array_equal(result.values[~ok], result.nominal[~ok])
    assert np.all(np.isinf(result.std[~ok]))
    return kinds


def test_kuka_lwr4_rk4_plant_hidden_truth_and_tracking(tmp_path):
    nominal = load_robot("kuka_lwr4")
    truth_model = random_truth(nominal, 11)
    truth_model = with_overrides(truth_model, k=nominal.k * 1.25)       # 25 % stiffer than nominal
    plant = make_plant("sim", truth_model, nominal, np.zeros(nominal.n), PlantOptions())
    settings = CalibrationSettings(budget=4, validation=1, candidates=40, random_seeds=5, seed=2)
    result = calibrate(nominal, plant, settings, tmp_path / "report", truth_model=truth_model)
    assert result.success, result.message
    truth = Unknowns.build(nominal).values(truth_model)
    _check_accuracy(result, truth)
    assert result.experiment_kd_scale < 1                                # d_fm made visible beside K_D
    # d_f = 0 on the LWR4: identified as 0 within its (small, absolute) standard deviation
    d_f = np.array([n.startswith("d_f/") for n in result.unknown_names])
    assert np.all(result.std[d_f] < 0.1)
    val = result.validation_errors()
    assert val["calibrated"]["max_frequency_error_rel"] < 2e-3 < val["nominal"]["max_frequency_error_rel"]
    t = result.tracking
    assert t["trajectory"].startswith("thesis")
    assert t["calibrated_over_true"] <= 1.2, t
    assert t["nominal_over_calibrated"] >= 5.0, t
    # The run's own designed-vs-random comparison is predicted at the noise the records showed (the
    # design learns it from the modes the OMA recovered): on these noise-free records every mode is
    # visible anywhere and the design gains ~1.4x, not 2x (docs/calibration.md, "Designed vs random");
    # the 2x with a 20-bit encoder's noise is test_calibration.py's
    # test_designed_configurations_need_at_most_half_the_random_ones.
    assert result.history[-1]["design_noise_factor"] < 0.5               # learned: cleaner than 20 bits
    assert result.design is not None and result.design.ratio < 1.0, result.design.to_dict()
    # outputs: a loadable params YAML with the identified values, sidecar and report
    params = write_params(result, tmp_path / "calibrated.yaml", "sim")
    write_sidecar(result, params)
    files = write_report(result, tmp_path / "report")
    loaded = resolve_model(params=str(params))
    np.testing.assert_allclose(loaded.k, result.model.k)
    assert "± " in params.read_text().split("joints:")[0]
    assert files["modes_png"].is_file() and files["convergence_png"].is_file()


def test_scompi_mujoco_plant_hidden_truth(tmp_path):
    nominal = load_robot("scompi")
    truth_model = random_truth(nominal, 4)
    plant = make_plant("mujoco", truth_model, nominal, np.zeros(nominal.n), PlantOptions())
    settings = CalibrationSettings(budget=5, validation=1, candidates=30, random_seeds=0, tracking=False, seed=4,
                                   experiment_kd_scale=1.0)     # lower K_D destabilizes the delayed loop (unit test)
    result = calibrate(nominal, plant, settings, tmp_path / "report", truth_model=truth_model)
    assert result.success, result.message
    kinds = _check_accuracy(result, Unknowns.build(nominal).values(truth_model))
    # scompi's d_fm (about 1e-3 N m s/rad beside K_D = 52) cannot be seen in the modes
    assert not result.identifiable[kinds == "d_fm"].any()
    assert set(result.not_identifiable) >= {n for n in result.unknown_names if n.startswith("d_fm/")}
    assert result.validation_errors()["calibrated"]["max_frequency_error_rel"] < 2e-3

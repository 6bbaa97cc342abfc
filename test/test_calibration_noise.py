"""Calibration from noisy records (issue 31: "measured noise option ... state how the accuracy
degrades"): the whole loop on the RK4 plant with encoder quantization only (a channel that stays
within one count in one record used to end the run: "references must share their channels") and
with Gaussian encoder noise completes (a record without an identifiable mode is reported, never a
fault), and every unknown reported identifiable lies within 3 of its reported standard deviations
of the hidden truth (4 with quantization only: below). The accuracy against the noise level:
benchmarks/bench_calibration.py --part noise (table in docs/calibration.md)."""
from dataclasses import replace

import numpy as np
import pytest

from flexmodal_ros.calibration.campaign import CalibrationSettings, calibrate
from flexmodal_ros.calibration.eigen_sensitivity import Unknowns
from flexmodal_ros.calibration.experiment_design import sensor_std
from flexmodal_ros.calibration.offline_plants import PlantOptions, make_plant
from flexmodal_ros.cli.calibrate import random_truth
from flexmodal_ros.oma.impact import EncoderNoise, gear_ratios
from flexmodal_ros.robot.registry import load_robot

pytestmark = pytest.mark.slow


# Quantization only: 4 σ. Since the OMA whitens quantized channels by quantum/√12 it finds 6–7
# modes per record instead of 0–3 and identifies 17 unknowns here (k within 0.5 %); two close,
# heavily damped modes merged under the staircase (10.17 Hz measured for 10.02 Hz, 8 σ in f, below
# the fit's outlier rule) leave d_fm/joint_5 48 % off at 3.6 σ. Before, the same truth at budget 4
# had an unknown at 5.4 σ (docs/calibration.md, "Quantized channels").
@pytest.mark.parametrize("counts, std, bound", [(2.0 ** 20, 0.0, 4.0), (None, 1e-7, 3.0)],
                         ids=["quantization-2^20", "gaussian-1e-7"])
def test_noisy_records_calibration_completes_within_its_sigma_bound(counts, std, bound):
    nominal = load_robot("kuka_lwr4")
    truth_model = random_truth(nominal, 11)
    noise = EncoderNoise(counts, std, 0)
    plant = make_plant("sim", truth_model, nominal, np.zeros(nominal.n), PlantOptions(noise=noise))
    settings = CalibrationSettings(budget=2, validation=0, candidates=30, seed=2, random_seeds=0, tracking=False)
    settings = replace(settings, sensor_std=sensor_std(nominal, "both", counts, std, gear_ratios(nominal)))
    result = calibrate(nominal, plant, settings, truth_model=truth_model)
    assert result.success, result.message
    assert len(result.configurations) == 2
    truth = Unknowns.build(nominal).values(truth_model)
    ok = result.identifiable
    if counts is None:                 # 1e-7 rad: the OMA finds the modes, the fit identifies unknowns
        assert ok.sum() >= 10, result.message
    err = np.abs(result.values - truth)
    np.testing.assert_array_less(err[ok], bound * result.std[ok] + 1e-12)
    np.testing.assert_array_equal(result.values[~ok], result.nominal[~ok])

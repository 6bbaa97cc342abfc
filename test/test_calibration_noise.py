"""Calibration from noisy records (issue 31: "measured noise option ... state how the accuracy
degrades"): the whole loop on the RK4 plant with encoder quantization only (a channel that stays
within one count in one record used to end the run: "references must share their channels") and
with Gaussian encoder noise completes (a record without an identifiable mode is reported, never a
fault), and every unknown reported identifiable lies within 3 of its reported standard deviations
of the hidden truth (below: why quantization needed 4 before). The accuracy against the noise level:
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


# Quantization only: 3 σ since the fit's σ carry the unknowns it holds at nominal
# (weighted_fit._held_std). Here d_fm of joints 1, 2, 3, 6 are held, their nominal 41 %, 41 %, 34 %,
# 24 % off the truth; the free unknowns absorbed that without a trace in χ², and this truth needed
# a 4 σ bound (d_fm/joint_5 at 3.61 σ). Now the worst is d_fm/joint_5 at 2.46 σ
# (docs/calibration.md, "Held unknowns").
@pytest.mark.parametrize("counts, std, bound", [(2.0 ** 20, 0.0, 3.0), (None, 1e-7, 3.0)],
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

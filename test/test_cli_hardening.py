"""Issue 29 item 7 (not bad files): the compared variants of `flexmodal simulate` share one
settling window that fits every run, and the identification says which measured values make its
residuals non-finite instead of forwarding SciPy's "Residuals are not finite in the initial point."."""
import json
import subprocess
import sys

import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.identification.inverse_eigen import IdentificationProblem
from flexmodal_ros.identification.measurements import load_data_file, modal_data_arrays
from flexmodal_ros.robot.registry import share_dir


def test_compare_fixed_window_fits_the_longest_variant():
    """Before: "settle: the simulation ends at 1.276 s, before the settling window [0.822, 1.322] s
    ends" (the fixed shaper adds more delay than the configuration-dependent one)."""
    argv = ["simulate", "--shaping", "zvd", "--compare-fixed", "--robot", "kuka_lwr4", "--law", "pd",
            "--q0", "0.5,0.3,0,-0.6,0,0.4,0", "--qf", "0.5,0.8,0,-1.2,0,0.4,0", "--T", "0.45",
            "--plot-dir", "", "--json"]
    proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", *argv], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    windows = {(v["start_s"], v["window_s"]) for v in (out["residual_vibration"],
                                                        out["unshaped"]["residual_vibration"],
                                                        out["fixed_start"]["residual_vibration"])}
    assert len(windows) == 1                              # one common window for the three variants
    start, width = windows.pop()
    longest = 0.45 + max(out["added_duration_s"], out["fixed_start"]["added_duration_s"])
    assert start == pytest.approx(longest, abs=1e-9) and width == 0.5


def test_identification_names_the_values_behind_non_finite_residuals():
    data_file = load_data_file(share_dir() / "config" / "planar_2r_modal_data.yaml")
    problem = IdentificationProblem(data_file.model, data_file.data, None, "determinant", 5000.0, 100.0)
    with pytest.raises(InputError, match=r"^measurements\[0\]\.modes\[0\]\.frequency_hz = 2\.83 Hz / "
                                         r"measurements\[0\]\.modes\[0\]\.damping_ratio = 0\.1203.*: the residuals "
                                         r"of these measured modes are not finite at the unknowns k/joint_1 = 1e\+300"):
        problem.check_finite(np.full(len(problem.names), 1e300))
    problem.check_finite(problem.upper / 2)              # finite: no error


@pytest.mark.parametrize("style, frequency, damping", [
    ("request", r"frequencies_hz\[1\]", r"damping_ratios\[1\]"),
    ("file", r"measurements\[0\]\.modes\[1\]\.frequency_hz", r"measurements\[0\]\.modes\[1\]\.damping_ratio")])
def test_measured_values_are_named_as_written(style, frequency, damping):
    """Before: frequency_hz in messages about IdentifyJointParameters requests (whose fields are
    frequencies_hz, damping_ratios), and 1e200 Hz was accepted (then overflowed in the residuals)."""
    with pytest.raises(InputError, match=rf"^{frequency}: must be <= 1e\+06 Hz, got 1e\+200"):
        modal_data_arrays(np.zeros((1, 2)), [0, 0], [2.0, 1e200], [0.1, 0.1], style=style)
    with pytest.raises(InputError, match=rf"^{damping}: must be in \(0, 1\)"):
        modal_data_arrays(np.zeros((1, 2)), [0, 0], [2.0, 3.0], [0.1, 1.5], style=style)


def test_cli_identify_refuses_an_overflowing_frequency(tmp_path):
    import yaml
    raw = yaml.safe_load((share_dir() / "config" / "planar_2r_modal_data.yaml").read_text())
    raw["measurements"][2]["modes"][1]["frequency_hz"] = 1e200
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "identify", "--data", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "measurements[2].modes[1].frequency_hz: must be <= 1e+06 Hz, got 1e+200" in proc.stderr

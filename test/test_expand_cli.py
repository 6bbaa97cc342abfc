"""``flexmodal expand`` (issue 15): Table 1, expansions with --at and -o, bad input."""
import json
import subprocess
import sys

import numpy as np
import pytest

from flexmodal_ros.cli import main
from flexmodal_ros.flexible_joint.ama import modal_analysis
from flexmodal_ros.expansion import ModalPolynomial
from flexmodal_ros.robot.registry import load_robot
from test_parametric import TABLE_1_DYNAMIC, TABLE_1_STATIC


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table1_console_script():
    out = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "expand", "--table1", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["static"] == TABLE_1_STATIC and data["dynamic"] == TABLE_1_DYNAMIC



def test_cli_default_tolerance_is_the_cores():
    from flexmodal_ros.cli import expand as cli_expand
    from flexmodal_ros.expansion import recursion as expansion

    assert cli_expand.DEFAULT_TOLERANCE == expansion.DEFAULT_TOLERANCE


def test_table1_text(capsys):
    code, out, _ = run(capsys, "expand", "--table1")
    assert code == 0 and "1287" in out and "6188" in out and len(out.strip().splitlines()) == 8


def test_expand_flexible_joint_robot_at_points(capsys, tmp_path):
    path = tmp_path / "p.npz"
    code, out, err = run(capsys, "expand", "--robot", "planar_2r", "--about", "0.3,0.5", "--order", "3",
                         "--modes", "1,2", "-o", str(path), "--at", "0.3,0.5", "--at", "0.32,0.49",
                         "--at", "2.0,-1.0", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["system"] == "flexible_joint" and data["num_terms"] == 10 and data["mode_numbers"] == [1, 2]
    model = load_robot("planar_2r")
    at0, near, far = data["at"]
    exact0 = modal_analysis(model, [0.3, 0.5])
    np.testing.assert_allclose(at0["polynomial"]["frequencies_hz"], exact0.frequencies_hz[:2], rtol=1e-13)
    np.testing.assert_allclose(near["polynomial"]["frequencies_hz"], near["exact"]["frequencies_hz"], rtol=1e-5)
    np.testing.assert_allclose(near["exact"]["frequencies_hz"], modal_analysis(model, [0.32, 0.49]).frequencies_hz[:2],
                               rtol=1e-12)
    assert near["inside_trust_region"] and not far["inside_trust_region"]
    assert "outside the trust radius" in err and any("outside" in w for w in data["warnings"])
    poly = ModalPolynomial.load(path)
    np.testing.assert_allclose(poly.evaluate([0.32, 0.49]).frequencies_hz[0], near["polynomial"]["frequencies_hz"])
    code, out, _ = run(capsys, "expand", "--robot", "planar_2r", "--about", "0.3,0.5", "--order", "1",
                       "--at", "0.31,0.5")
    assert code == 0 and "f poly" in out and "f exact" in out


def test_expand_erls_arm_with_velocities(capsys):
    code, out, err = run(capsys, "expand", "--robot", "erls_2link", "--about", "-0.3,-1.2,0.5,1.0",
                         "--velocities", "--order", "2", "--modes", "3", "--at", "-0.31,-1.19,0.5,1.02", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["system"] == "erls" and data["parameters"] == ["q_1", "q_2", "qd_1", "qd_2"]
    assert data["num_terms"] == 15 and data["mode_numbers"] == [3]
    row = data["at"][0]
    assert row["polynomial"]["frequencies_hz"][0] == pytest.approx(row["exact"]["frequencies_hz"][0], rel=1e-5)


@pytest.mark.parametrize("args, message", [
    (["--robot", "planar_2r", "--about", "0.3,0.5", "--order", "0"], "order"),
    (["--robot", "planar_2r", "--about", "0.3,0.5", "--modes", "7"], "modes"),
    (["--robot", "planar_2r", "--about", "0.3,0.5", "--modes", "1.5"], "--modes"),
    (["--robot", "planar_2r", "--about", "0.3"], "--about"),
    (["--robot", "planar_2r", "--about", "0.3,nan"], "NaN"),
    (["--robot", "planar_2r", "--about", "0.3,0.5", "--velocities"], "--velocities"),
    (["--robot", "planar_2r", "--about", "0.3,0.5", "--at", "1,2,3"], "--at"),
    (["--robot", "planar_2r"], "--about"),
    (["--robot", "no_such_robot", "--about", "0.3,0.5"], "unknown robot"),
    (["--robot", "erls_2link", "--about", "0.3,0.5,1,1"], "--about"),
    (["--robot", "planar_2r", "--about", "0.3,0.5", "-o", "/nonexistent_dir/c.npz"],
     "-o /nonexistent_dir/c.npz: directory /nonexistent_dir does not exist"),
])
def test_bad_input_one_line_exit_2(capsys, args, message):
    code, out, err = run(capsys, "expand", *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_paper_task_cli(capsys, tmp_path):
    code, out, err = run(capsys, "expand", "--paper", "--plot-dir", str(tmp_path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["frequency_variation_percent"][0] >= 5 and max(data["max_eps_f_middle_percent"]) <= 1
    assert len(data["plots"]) == 3

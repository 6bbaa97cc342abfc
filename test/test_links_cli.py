"""``flexmodal links`` as a real process: one configuration, sweeps, k_T curves, bad input."""
import csv
import json
import subprocess
import sys

import numpy as np

from links_tables import THREE_LINK, TWO_LINK, printed


def flexmodal(*args):
    return subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "links", *args], capture_output=True,
                          text=True, timeout=300)


def _close(values, column):
    return all(abs(f - v) <= u for (v, u), f in zip(printed(column), values))


def test_one_configuration_json_and_mode_plot(tmp_path):
    out = flexmodal("--robot", "three_link_arm", "--q", "0,90,-90", "--degrees", "--json", "--plot-mode", "3",
                    "--out-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["model"] == "timoshenko" and doc["joint_model"] == "rigid" and doc["num_modes"] == 10
    assert _close(doc["frequencies_hz"], THREE_LINK[10]["T"])
    assert doc["files"] == [str(tmp_path / "link_mode_3.png")]
    assert (tmp_path / "link_mode_3.png").read_bytes()[:4] == b"\x89PNG"
    text = flexmodal("--robot", "two_link_arm", "--q", "0,0.7853981633974483", "--thickness-factor", "100",
                     "--model", "euler-bernoulli")
    assert text.returncode == 0, text.stderr
    freqs = [float(line.split()[1]) for line in text.stdout.splitlines()[3:13]]
    assert _close(freqs, TWO_LINK[100][45]["EB†"]) and "thickness factor 100" in text.stdout


def test_sweep_over_joint_angles_tracks_and_plots(tmp_path):
    out = flexmodal("--robot", "three_link_arm", "--q", "0,-45,0", "--degrees", "--grid", "joint_3=-90:90:7",
                    "--modes", "6", "--out-dir", str(tmp_path), "--json", "--no-progress")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["num_configurations"] == 7 and summary["num_modes"] == 6
    rows = list(csv.reader((tmp_path / "link_modes.csv").open()))
    assert len(rows) == 8 and rows[0][:4] == ["configuration", "q_joint_1", "q_joint_2", "q_joint_3"]
    assert float(rows[-1][3]) == np.radians(90.0)
    doc = json.loads((tmp_path / "link_modes.json").read_text())
    assert doc["mode_order"] is not None and len(doc["results"]) == 7
    assert doc["results"][6]["frequencies_hz"][:3] == sorted(doc["results"][6]["frequencies_hz"][:3])
    assert (tmp_path / "link_modes.png").stat().st_size > 10_000


def test_frequencies_vs_joint_stiffness(tmp_path):
    out = flexmodal("--robot", "three_link_arm", "--q", "0,-45,90", "--degrees", "--kt-sweep", "9:13:5",
                    "--out-dir", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    k, drop = np.array(doc["joint_stiffness"]), np.array(doc["max_relative_drop"])
    np.testing.assert_allclose(k, 10.0 ** np.arange(9, 14))
    np.testing.assert_allclose(k[1:] * drop[1:], k[-1] * drop[-1], rtol=1e-3)  # Δ ∝ 1/k_T
    assert drop[-1] < 1e-6 and (tmp_path / "link_modes_vs_kt.png").exists()


def test_bad_input_one_line_exit_code_2(capsys):
    """One real process, then the dispatcher in-process (same code path) for the other cases."""
    from flexmodal_ros.cli import main

    out = flexmodal("--robot", "planar_2r", "--q", "0,0")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "flexmodal links: error: robot planar_2r: its YAML has no links: section (no beam-link data)"]
    cases = [(["--robot", "three_link_arm", "--q", "0,nan,0"], "q: contains NaN or inf"),
             (["--robot", "three_link_arm", "--q", "0,1"], "q: expected shape 3, got 2"),
             (["--robot", "three_link_arm", "--q", "0,1,1", "--modes", "0"], "modes: expected an integer from 1"),
             (["--robot", "three_link_arm", "--q", "0,1,1", "--thickness-factor", "-1"],
              "thickness_factor: must be > 0"),
             (["--robot", "three_link_arm", "--q", "0,1,1", "--joint-stiffness", "1e6"],
              "joint_model rigid: joint stiffness overrides need joint_model elastic or servo"),
             (["--robot", "three_link_arm", "--q", "0,1,1", "--modes", "50", "--regime", "below-cutoff"],
              "modes: only 42 natural frequencies lie below the Timoshenko cut-off"),
             (["--robot", "three_link_arm", "--q", "0,1,1", "--kt-sweep", "9:8:3"], "--kt-sweep: expected E0:E1:NUM"),
             (["--robot", "three_link_arm"], "--q: joint angles are required")]
    for args, message in cases:
        assert main(["links", *args]) == 2
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert captured.out == "" and len(lines) == 1, (args, captured)
        assert lines[0].startswith("flexmodal links: error: ") and message in lines[0], lines

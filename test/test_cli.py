"""The ``flexmodal`` dispatcher and the ``model`` / ``dh2urdf`` subcommands, run as real processes."""
import json
import subprocess
import sys

import pytest

from flexmodal_ros.cli import attach_negative_values
from flexmodal_ros.robot.registry import list_closed_chain_robots, list_robots, share_dir


def flexmodal(*args):
    return subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_model_json_lists_the_flexibility_parameters():
    out = flexmodal("model", "--robot", "scompi", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["joint_names"][0] == "joint_1" and data["prismatic"][0] is True
    assert data["B"][1] == pytest.approx(6.784) and data["gravity"] == [-9.81, 0.0, 0.0]


def test_dh2urdf_writes_the_bundled_urdf(tmp_path):
    out_path = tmp_path / "scompi.urdf"
    out = flexmodal("dh2urdf", str(share_dir() / "urdf" / "scompi.dh.yaml"), "-o", str(out_path))
    assert out.returncode == 0, out.stderr
    assert out_path.read_text() == (share_dir() / "urdf" / "scompi.urdf").read_text()


def test_bad_input_gives_one_line_and_exit_code_2(tmp_path):
    out = flexmodal("model", "--robot", "ur5")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"flexmodal model: error: unknown robot 'ur5' (bundled robots: {', '.join(list_robots())}; "
        f"closed-chain robots: {', '.join(list_closed_chain_robots())})"]
    bad = tmp_path / "bad.dh.yaml"
    bad.write_text("links: [{joint: j1}]\n")
    out = flexmodal("dh2urdf", str(bad))
    assert out.returncode == 2 and "links[0]: missing key(s)" in out.stderr


def test_negative_values_are_attached_to_their_option():
    assert attach_negative_values(["modal", "--q", "-0.3,1.2", "--kp", "-.5", "--json"]) == \
        ["modal", "--q=-0.3,1.2", "--kp=-.5", "--json"]
    assert attach_negative_values(["--q=-1,2", "--robot", "scompi"]) == ["--q=-1,2", "--robot", "scompi"]
    out = flexmodal("modal", "--robot", "planar_2r", "--q", "-0.3,1.2", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["positions"] == [-0.3, 1.2]


# ----------------------------------------------------------------------------- issue 11 items 11-14

DATA = share_dir() / "test" / "data"


def _one_line_error(out, text):
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert text in out.stderr, out.stderr


def test_bad_files_give_one_line(tmp_path):
    """Item 11: a YAML bomb through identify --data, /dev/zero as params: one line, exit code 2."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("robot: planar_2r\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n"
                    + "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]\n" for i in range(1, 8))
                    + "measurements: []\n")
    assert bomb.stat().st_size < 700                           # 10^8 nodes once expanded
    _one_line_error(flexmodal("identify", "--data", str(bomb)), "aliases are expanded")
    _one_line_error(flexmodal("modal", "--params", "/dev/zero", "--q", "0,0"), "not a regular file (a character device)")
    # non-UTF-8 files and FIFOs: the same error path, checked in test_model.py


def test_robot_name_cannot_move_output_files_out_of_the_folder(tmp_path):
    """Item 12: `robot: ../escaped` used to write codegen output outside --out-dir."""
    from flexmodal_ros.core.validation import output_path, safe_filename
    params = tmp_path / "params.yaml"
    params.write_text((share_dir() / "config" / "planar_2r.yaml").read_text()
                      .replace("robot: planar_2r", "robot: ../escaped").replace("../urdf/", f"{share_dir()}/urdf/"))
    out_dir = tmp_path / "out"
    out = flexmodal("codegen", "--params", str(params), "--out-dir", str(out_dir), "--json")
    assert out.returncode == 0, out.stderr
    assert [p.name for p in out_dir.iterdir()] == ["_escaped_feedforward.c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "params.yaml"]
    assert safe_filename("../../etc/passwd") == "_.._etc_passwd" and safe_filename("...") == "robot"
    assert output_path(tmp_path, "/abs/../x", ".png").parent == tmp_path


def test_sweep_size_is_bounded_with_a_clear_error():
    """Item 13: a 10^10-point grid used to end in MemoryError with a traceback."""
    out = flexmodal("sweep", "--robot", "planar_2r", "--grid", "joint_1=0:1:100000", "--grid",
                    "joint_2=0:1:100000", "--no-plot", "--no-progress")
    _one_line_error(out, "axes: 1e+10 configurations, more than the maximum of 100000")


def test_stability_label_and_limit_warning_on_the_cli():
    """Item 14: "marginally stable" for an undamped loop; a pose outside the URDF limits is
    computed with a warning on stderr (stdout stays JSON)."""
    out = flexmodal("modal", "--params", str(DATA / "planar_2r_undamped.yaml"), "--q", "4.0,0.1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["stability"] == "marginally stable"
    assert out.stderr.strip() == ("flexmodal: warning: --q: joint_1 = 4 outside [-3.14159, 3.14159] "
                                  "(URDF position limits)")

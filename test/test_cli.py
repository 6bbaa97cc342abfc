"""The ``flexmodal`` dispatcher and the ``model`` / ``dh2urdf`` subcommands, run as real processes."""
import json
import subprocess
import sys

import pytest

from flexmodal_ros.cli import attach_negative_values
from flexmodal_ros.robots import list_closed_chain_robots, list_robots, share_dir


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

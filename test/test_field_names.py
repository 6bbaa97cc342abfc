"""Issue 29 item 13 (messages): an error names the field as the user wrote it — the request field
of the .srv (num_modes, frequencies_hz, channels, order) or the CLI option (--modes, --joints,
--order, --loops, --t-impulse, --write-params) — never a name that exists on neither side."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.links import link_modes, load_link_arm
from flexmodal_ros.oma.bags import REQUEST_FIELDS, read_joint_states, write_joint_states
from flexmodal_ros.oma.impact import Impulse, simulate_impact
from flexmodal_ros.robot.registry import load_robot

SRV = Path(__file__).resolve().parents[1] / "flexmodal_interfaces" / "srv"


def srv_fields(name):
    """Request field names of flexmodal_interfaces/srv/<name>.srv."""
    text = (SRV / f"{name}.srv").read_text().split("---")[0]
    return {line.split()[1] for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}


def test_core_defaults_are_request_fields():
    assert "num_modes" in srv_fields("ComputeLinkModes")
    with pytest.raises(InputError, match=r"^num_modes: "):
        link_modes(load_link_arm("three_link_arm"), [0.0, 1.0, 1.0], 0)
    assert {"frequencies_hz", "damping_ratios", "mode_indices"} <= srv_fields("IdentifyJointParameters")
    assert "channels" in srv_fields("RunModalTest") and REQUEST_FIELDS["joints"] == "channels"
    assert {"order", "modes"} <= srv_fields("ExpandModalParameters")


def test_bag_joint_errors_name_the_option_or_the_request_field(tmp_path):
    model = load_robot("planar_2r")
    record = simulate_impact(model, np.array([0.3, 0.5]), Impulse(), 0.3, dynamics="linear")
    bag = write_joint_states(tmp_path / "bag", record)
    with pytest.raises(InputError, match=r"^--joints: unknown joint\(s\) elbow"):
        read_joint_states(bag, joints=["elbow"])
    with pytest.raises(InputError, match=r"^channels: unknown joint\(s\) elbow"):       # RunModalTest
        read_joint_states(bag, joints=["elbow"], fields=REQUEST_FIELDS)


@pytest.mark.parametrize("argv, message", [
    (["links", "--robot", "three_link_arm", "--q", "0,1,1", "--modes", "0"], r"--modes: expected an integer"),
    (["expand", "--robot", "planar_2r", "--about", "0.3,0.5", "--modes", "99"], r"--modes: mode number\(s\) \[99\]"),
    (["expand", "--robot", "planar_2r", "--about", "0.3,0.5", "--order", "9"], r"--order: 9 is too large"),
    (["constrained", "--model", "fourbar", "--loops", "-3"], r"--loops: must be an integer >= 1"),
    (["oma", "--robot", "planar_2r", "--q", "0.3,0.5", "--t-impulse", "-1", "--no-plot"], r"--t-impulse: must be >= 0"),
    (["oma", "--robot", "planar_2r", "--csv", "RECORD", "--joints", "elbow", "--no-plot"],
     r"--joints: unknown channel\(s\) elbow"),
])
def test_cli_messages_name_the_option(tmp_path, argv, message):
    if "RECORD" in argv:
        t = np.arange(200) / 1000.0
        (tmp_path / "r.csv").write_text("t,joint_1_motor\n" + "".join(f"{a},{np.sin(60 * a)}\n" for a in t))
        argv = [str(tmp_path / "r.csv") if a == "RECORD" else a for a in argv]
    extra = ["--out-dir", str(tmp_path / "o")] if argv[0] == "oma" else []
    proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", *argv, *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert re.search(rf"^flexmodal {argv[0]}: error: {message}", proc.stderr), proc.stderr

"""Issue 29 item 6: the robot loader refuses physically impossible or numerically unusable robots
at load, naming the field as the user wrote it (YAML key path, URDF link / inertial attribute),
and every YAML the package reads refuses duplicate keys."""
import re
import subprocess
import sys

import pytest
import yaml

from flexmodal_ros.core.errors import ConfigError
from flexmodal_ros.core.validation import load_yaml_text
from flexmodal_ros.robot.model import load_model
from flexmodal_ros.robot.registry import list_robots, load_robot, share_dir

URDF = (share_dir() / "urdf" / "planar_2r.urdf").read_text()
PARAMS = yaml.safe_load((share_dir() / "config" / "planar_2r.yaml").read_text())


def robot_files(tmp_path, joint_1=None, urdf=None, raw=None, text=None):
    """planar_2r with ``joint_1`` entries replaced, the URDF text edited by ``urdf`` (old, new),
    the params changed by ``raw`` (callable) or given verbatim as ``text``."""
    urdf_path = tmp_path / "robot.urdf"
    body = URDF if urdf is None else URDF.replace(*urdf)
    assert urdf is None or body != URDF
    urdf_path.write_text(body)
    params = yaml.safe_load(yaml.safe_dump(PARAMS))
    params["urdf"] = str(urdf_path)
    params["joints"]["joint_1"].update(joint_1 or {})
    if raw:
        raw(params)
    path = tmp_path / "robot.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(params))
    return path


LINK_2_INERTIA = 'ixx="0.0" ixy="0.0" ixz="0.0" iyy="0.2083" iyz="0.0" izz="0.2083"'


@pytest.mark.parametrize("joint_1, urdf, raw, message", [
    ({"k": 1e308}, None, None, r"joints\.joint_1\.k: 1e\+308 N m/rad outside the plausible range \[0\.001, 1e\+09\]"),
    ({"k": [1, 2]}, None, None, r"joints\.joint_1\.k: expected one number, got \[1, 2\]"),
    ({"k": True}, None, None, r"joints\.joint_1\.k: expected one number"),
    ({"B": 1e308}, None, None, r"joints\.joint_1\.B: 1e\+308 kg m\^2 outside the plausible range"),
    ({"kp": 1e300}, None, None, r"joints\.joint_1\.kp: .*outside the plausible range"),
    ({"d_f": -1.0}, None, None, r"joints\.joint_1\.d_f: must be >= 0, got -1"),
    (None, ('<mass value="20.0"/>', '<mass value="1e308"/>'), None,
     r"link 'link_1' <inertial> <mass value=\"1e308\">: must lie in \[0, 1e\+06\] kg"),
    (None, ('<mass value="10.0"/>', '<mass value="-3.0"/>'), None,
     r"link 'link_2' <inertial> <mass value=\"-3.0\">: must lie in \[0, 1e\+06\] kg"),
    (None, (LINK_2_INERTIA, LINK_2_INERTIA.replace('ixx="0.0"', 'ixx="-0.5"')), None,
     r"link 'link_2' <inertial> <inertia ixx\.\.izz>: inertia matrix is not positive semi-definite"),
    (None, (LINK_2_INERTIA, LINK_2_INERTIA.replace('izz="0.2083"', 'izz="0.9"')), None,
     r"link 'link_2' <inertial> <inertia ixx\.\.izz>: principal moments .* violate the triangle inequality"
     r".*accept_inertia: \{link_2: <reason>\}"),
    (None, ('<mass value="10.0"/>', '<mass value="0.0"/>'), None,
     r"link 'link_2' <inertial> <mass value=\"0.0\">: a link with inertia must have a mass > 0"),
    (None, None, lambda p: p.update(tool={"mass": 1.0, "inertia": [0.1, 0, 0, 0.1, 0, 0.5]}),
     r"tool\.inertia: principal moments .* violate the triangle inequality"),
    (None, None, lambda p: p.update(gravity=[0, -1e300, 0]), r"gravity: entry -1e\+300 m/s\^2 beyond the plausible"),
    (None, None, lambda p: p.update(tool={"mass": 1e9}), r"tool\.mass: 1e\+09 kg outside the plausible range"),
    (None, None, lambda p: p.update(accept_inertia={"link_9": "why"}), r"accept_inertia: unknown link\(s\) link_9"),
    # a link that carries no inertia about its joint: M(q) singular
    (None, ('<mass value="10.0"/>\n      <inertia ixx="0.0" ixy="0.0" ixz="0.0" iyy="0.2083" iyz="0.0" izz="0.2083"/>',
            '<mass value="0.0"/>\n      <inertia ixx="0.0" ixy="0.0" ixz="0.0" iyy="0.0" iyz="0.0" izz="0.0"/>'), None,
     r"the inertia matrix is singular or ill-conditioned .*joint 'joint_2' moves \(almost\) no link inertia"),
    ({"B": 1e-12}, None, None, r"the inertia matrix is singular or ill-conditioned .*joints\.joint_1\.B = 1e-12"),
])
def test_implausible_robots_are_refused_naming_the_field(tmp_path, joint_1, urdf, raw, message):
    path = robot_files(tmp_path, joint_1, urdf, raw)
    with pytest.raises(ConfigError, match=message):
        load_model(None, path)


def test_triangle_inequality_can_be_waived_for_published_data(tmp_path):
    """The thesis' Scompi link 6 (Table 2.3) violates it; the bundled YAML says so explicitly."""
    bad = (LINK_2_INERTIA, LINK_2_INERTIA.replace('izz="0.2083"', 'izz="0.9"'))
    model = load_model(None, robot_files(tmp_path, urdf=bad, raw=lambda p: p.update(
        accept_inertia={"link_2": "as published"})))
    assert model.n == 2
    assert "link_6" in load_robot("scompi").params_path.read_text()
    for name in list_robots():       # every bundled robot passes the checks
        load_robot(name)


def test_duplicate_yaml_keys_are_refused_naming_the_key(tmp_path):
    text = yaml.safe_dump({**PARAMS, "urdf": str(share_dir() / "urdf" / "planar_2r.urdf")}, sort_keys=False)
    dup = text.replace("    k: 2000.0\n", "    k: 2000.0\n    k: 3000.0\n")
    assert dup != text
    with pytest.raises(ConfigError, match=r"params file .*robot\.yaml: duplicate key 'joints\.joint_1\.k' "
                                          r"\(line \d+; first at line \d+\)"):
        load_model(None, robot_files(tmp_path, text=dup))
    # merge keys may override (YAML's own mechanism), aliases are not duplicates
    assert load_yaml_text("a: &x {k: 1}\nb:\n  <<: *x\n  k: 2\nc: *x\n", "f") == \
        {"a": {"k": 1}, "b": {"k": 2}, "c": {"k": 1}}
    with pytest.raises(Exception, match=r"duplicate key 'points\[1\]\.time'"):
        load_yaml_text("points:\n  - {time: 0}\n  - {time: 1, time: 2}\n", "trajectory file")


@pytest.mark.parametrize("change", [{"k": 1e308}, {"B": 1e308}])
def test_cli_refuses_implausible_params_with_one_line(tmp_path, change):
    """Before: `k: 1e308` printed 0 modes, 'stable', exit 0; `B: 1e308` a 0 Hz mode with ζ = −20 %."""
    path = robot_files(tmp_path, change)
    proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "modal", "--params", str(path),
                           "--q", "0.3,0.5"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert re.search(rf"joints\.joint_1\.{list(change)[0]}: 1e\+308", proc.stderr)

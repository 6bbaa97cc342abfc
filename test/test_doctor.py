"""``flexmodal doctor`` (issue 28, deliverable 5), run as a real process: versions, the ROS
distribution, the accelerated paths and why one is off; without ROS installed it still answers."""
import importlib.metadata
import json
import os
import subprocess
import sys

import numpy as np
import scipy

# sitecustomize of the no-ROS run: the interpreter's site-packages replaced by a copy (links) without
# rclpy, ament_index_python and the ros-* distributions, as on a machine without ROS 2.
WITHOUT_ROS = """
import os, site, sys
sys.path[:] = [p for p in sys.path if p != os.environ["FLEXMODAL_TEST_REAL_SITE"]]
site.addsitedir(os.environ["FLEXMODAL_TEST_SITE"])
"""


def site_without_ros(folder):
    import sysconfig
    real = sysconfig.get_paths()["purelib"]
    folder.mkdir()
    for name in os.listdir(real):
        if not name.startswith(("rclpy", "ament_index_python", "ros_")) and not name.endswith(".pth"):
            os.symlink(os.path.join(real, name), folder / name)
    return folder


def doctor(*args, env=None, drop=()):
    environment = {k: v for k, v in os.environ.items() if k not in drop}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "doctor", *args], capture_output=True,
                          text=True, timeout=120, env=environment)


def test_doctor_json_names_versions_distribution_and_active_paths(tmp_path):
    out = doctor("--json", env={"FLEXMODAL_CACHE": str(tmp_path / "cache")}, drop=("ROS_DISTRO",))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    versions = data["versions"]
    assert versions["NumPy"] == np.__version__ and versions["SciPy"] == scipy.__version__
    assert versions["rclpy"] == importlib.metadata.version("ros-rclpy")
    assert versions["Pinocchio"] == importlib.metadata.version("pin")
    assert versions["CasADi"] == importlib.metadata.version("casadi")
    assert versions["MuJoCo"] == importlib.metadata.version("mujoco")
    major = int(versions["rclpy"].split(".")[0])
    assert data["ros_distribution"]["name"] == {7: "jazzy", 9: "kilted"}[major]
    assert "inferred from rclpy" in data["ros_distribution"]["source"]
    paths = data["accelerated"]
    assert paths["lapack_extension"]["active"] is True
    assert "cython_lapack" in paths["lapack_extension"]["detail"]
    assert paths["c_compiler"]["active"] is True and os.access(paths["c_compiler"]["detail"], os.X_OK)
    assert paths["codegen_cache"]["active"] is True and "will be created" in paths["codegen_cache"]["detail"]
    assert not (tmp_path / "cache").exists()          # the check leaves nothing behind
    native = paths["native_control_cycle"]
    assert isinstance(native["active"], bool) and native["detail"]
    if not native["active"]:
        assert "flexmodal_native" in native["detail"] and native["instead"]


def test_doctor_text_says_a_forced_fallback_is_off_and_why(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    out = doctor(env={"FLEXMODAL_NO_LAPACK_EXTENSION": "1", "FLEXMODAL_CACHE": str(blocked / "cache"),
                      "ROS_DISTRO": "jazzy"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    lapack = next(i for i, line in enumerate(lines) if line.strip().startswith("LAPACK extension"))
    assert "OFF: disabled by FLEXMODAL_NO_LAPACK_EXTENSION=1" in lines[lapack]
    assert "instead: SciPy's dgeev wrapper" in lines[lapack + 1]
    cache = next(line for line in lines if line.strip().startswith("codegen cache directory"))
    assert "OFF" in cache and str(blocked) in cache
    assert lines[0].startswith("ROS 2 distribution  jazzy (ROS_DISTRO")
    for label in ("rclpy", "NumPy", "SciPy", "Pinocchio", "CasADi", "MuJoCo"):
        assert any(line.startswith(label) for line in lines), label


def test_doctor_answers_without_ros_installed(tmp_path):
    """rclpy and ament_index_python not importable, no ros-* distributions, no ROS_DISTRO: the
    distribution is unknown, rclpy "not installed", the native cycle off naming why; exit 0."""
    (tmp_path / "sitecustomize.py").write_text(WITHOUT_ROS)
    import sysconfig
    site = site_without_ros(tmp_path / "site")
    out = doctor("--json", env={"PYTHONPATH": str(tmp_path), "FLEXMODAL_TEST_SITE": str(site),
                                "FLEXMODAL_TEST_REAL_SITE": sysconfig.get_paths()["purelib"]},
                 drop=("ROS_DISTRO", "AMENT_PREFIX_PATH"))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ros_distribution"]["name"] is None
    assert "ROS 2 is not installed" in data["ros_distribution"]["source"]
    assert data["versions"]["rclpy"] == "not installed"
    native = data["accelerated"]["native_control_cycle"]
    assert native["active"] is False and "ament_index_python is not installed" in native["detail"]
    assert data["versions"]["NumPy"] == np.__version__

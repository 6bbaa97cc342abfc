"""Which environment variable the installed Fast DDS reads its XML profile file from.

Fast DDS 2.x (ROS 2 Humble and Jazzy: package ``fastrtps``, ``libfastrtps.so.2``) loads the file
named by ``FASTRTPS_DEFAULT_PROFILES_FILE`` and ignores ``FASTDDS_DEFAULT_PROFILES_FILE``; Fast DDS
3.x (Kilted and later: package ``fastdds``, which replaces ``fastrtps``; ``libfastdds.so.3``) loads
``FASTDDS_DEFAULT_PROFILES_FILE``. Measured with config/fastdds_discovery.xml on the Jazzy (Fast DDS
2.14.5) and Kilted (3.2.3) wheels: on Jazzy its loopback allowlist applies only when the file comes
through the old name (docs/ros_install.md). Kilted's rmw_fastrtps still honours the old name, but
prints a deprecation warning in every process (rmw_fastrtps 9.3.0 changelog, ros2/rmw_fastrtps#806).
So the project sets exactly the variable its Fast DDS reads (scripts/env.sh runs this file as a
script; test/conftest.py and flexmodal_ros.nodes.bringup call :func:`profile_variable`).

The version is read from the install prefixes (the virtualenv or the ROS 2 install and the
``AMENT_PREFIX_PATH`` overlays), never by loading the library: the shared library's name carries
the major version. No rclpy import; this file imports nothing from the package, so scripts/env.sh
can run it before the package is installed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

FASTDDS_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"    # Fast DDS 3.x
FASTRTPS_VARIABLE = "FASTRTPS_DEFAULT_PROFILES_FILE"  # Fast DDS 2.x
# (library file pattern, major version): Fast DDS 3 renamed the library (and package) fastrtps -> fastdds.
_LIBRARIES = (("libfastdds.so.*", 3), ("libfastrtps.so.*", 2))
# ROS 2 distributions whose Fast DDS is 2.x; used only when no library is found in any prefix.
_FASTDDS2_DISTRIBUTIONS = ("humble", "iron", "jazzy")


def install_prefixes(environ=None) -> list[Path]:
    """Prefixes to look in, in the order the ROS environment overlays them: ``AMENT_PREFIX_PATH``
    (first entry wins), then this interpreter's prefix (the virtualenv of the PyPI wheels)."""
    environ = os.environ if environ is None else environ
    entries = [e for e in environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if e]
    return [Path(p) for p in dict.fromkeys([*entries, sys.prefix])]


def fastdds_major_version(prefixes=None, environ=None) -> int | None:
    """Major version of the Fast DDS library in the first prefix that has one (``lib/libfastdds.so.3*``
    -> 3, ``lib/libfastrtps.so.2*`` -> 2); else inferred from ``ROS_DISTRO``; else None."""
    environ = os.environ if environ is None else environ
    for prefix in install_prefixes(environ) if prefixes is None else [Path(p) for p in prefixes]:
        for pattern, major in _LIBRARIES:
            if any((prefix / "lib").glob(pattern)):
                return major
    distro = environ.get("ROS_DISTRO", "")
    if distro:
        return 2 if distro in _FASTDDS2_DISTRIBUTIONS else 3
    return None


def profile_variable(prefixes=None, environ=None) -> str:
    """``FASTRTPS_DEFAULT_PROFILES_FILE`` for Fast DDS 2.x, else ``FASTDDS_DEFAULT_PROFILES_FILE``
    (also when no Fast DDS is found: then no profile is read anyway)."""
    return FASTRTPS_VARIABLE if fastdds_major_version(prefixes, environ) == 2 else FASTDDS_VARIABLE


if __name__ == "__main__":
    print(profile_variable())

"""``flexmodal doctor``: the environment the package runs in, and which accelerated paths are active.

Prints the ROS 2 distribution (``ROS_DISTRO``, else inferred from rclpy's version), the versions of
rclpy, NumPy, SciPy, Pinocchio, CasADi and MuJoCo ("not installed" when absent), and for each
accelerated path whether it is active and, if not, why: the LAPACK extension
(:mod:`flexmodal_ros.linalg.lapack`), the native control cycle library ``flexmodal_native`` (found
through the ament index), the C compiler for user code generation and the codegen cache directory.
``--json`` prints the same as one JSON object.

Nothing here starts ROS: rclpy is not imported (its version comes from the installed distribution's
metadata or from its package.xml in the ament index), so the command works without a ROS graph and
without ROS installed at all.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import tempfile
from pathlib import Path

from ..core.ccompile import cache_dir, find_compiler
from ..core.errors import BuildError
from ..linalg.lapack import extension_status
from .options import add_json_option, print_json

# rclpy's major version per ROS 2 distribution (the ros-rclpy wheels: Jazzy 7.1.6, Kilted 9.1.2)
RCLPY_MAJOR_TO_DISTRO = {7: "jazzy", 9: "kilted"}
NATIVE_PACKAGE = "flexmodal_native"
# The controller's C cycles (flexmodal_native/CMakeLists.txt; nodes/native_cycle.py LIBRARY, not
# imported here: that module imports rclpy).
NATIVE_LIBRARY = "libflexmodal_control_cycle.so"
NATIVE_INSTEAD = "the controller cannot run its steady cycles in C from this library (they run in Python)"
NOT_INSTALLED = "not installed"

# (label, distributions to ask importlib.metadata, module whose __version__ is asked otherwise)
PACKAGES = (("NumPy", ("numpy",), "numpy"), ("SciPy", ("scipy",), "scipy"),
            ("Pinocchio", ("pin", "pinocchio"), "pinocchio"), ("CasADi", ("casadi",), "casadi"),
            ("MuJoCo", ("mujoco",), "mujoco"))


def add_parser(sub):
    p = sub.add_parser("doctor", help="print the ROS distribution, library versions and which accelerated "
                                      "paths are active (and why not)")
    add_json_option(p)
    p.set_defaults(func=run)


def distribution_version(names) -> str | None:
    """Version of the first installed distribution among ``names`` (importlib.metadata), or None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def package_version(names, module) -> str:
    """Installed version: distribution metadata, else the module's ``__version__`` when it is
    importable (a distribution package without pip metadata), else "not installed"."""
    version = distribution_version(names)
    if version is not None:
        return version
    if importlib.util.find_spec(module) is None:
        return NOT_INSTALLED
    try:
        return str(getattr(importlib.import_module(module), "__version__", "installed, version unknown"))
    except ImportError as exc:
        return f"installed but not importable ({exc})"


def _ament_prefix(package: str) -> tuple[str | None, str]:
    """(install prefix of ``package`` in the ament index, or None; why not)."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix  # deferred: optional (ROS)
    except ImportError as exc:
        return None, f"ament_index_python is not installed ({exc})"
    try:
        return get_package_prefix(package), ""
    except PackageNotFoundError:
        where = os.environ.get("AMENT_PREFIX_PATH", "")
        return None, (f"package {package} is not in the ament index (AMENT_PREFIX_PATH="
                      f"{where or 'unset'}); build and source it (colcon build, or make setup)")
    except (LookupError, ValueError) as exc:
        return None, f"ament index lookup failed ({exc})"


def rclpy_info() -> dict:
    """rclpy's version and where it came from, without importing rclpy."""
    version = distribution_version(("ros-rclpy",))
    if version is not None:
        return {"version": version, "source": "ros-rclpy wheel"}
    prefix, why = _ament_prefix("rclpy")
    if prefix is not None:
        xml = Path(prefix) / "share" / "rclpy" / "package.xml"
        match = re.search(r"<version>\s*([^<\s]+)\s*</version>", xml.read_text()) if xml.is_file() else None
        if match:
            return {"version": match.group(1), "source": str(xml)}
        return {"version": None, "source": f"{xml} has no version"}
    if importlib.util.find_spec("rclpy") is not None:
        version = distribution_version(("rclpy",))
        return {"version": version, "source": "rclpy distribution metadata" if version else "rclpy found, no version"}
    return {"version": None, "source": f"rclpy {NOT_INSTALLED} ({why})"}


def ros_distribution(rclpy: dict) -> dict:
    """ROS 2 distribution: $ROS_DISTRO, else inferred from rclpy's major version (a mismatch of
    the two is named)."""
    version = rclpy.get("version")
    match = re.match(r"\d+", version or "")
    inferred = RCLPY_MAJOR_TO_DISTRO.get(int(match.group())) if match else None
    distro = os.environ.get("ROS_DISTRO")
    if distro:
        note = f"; but rclpy {version} is {inferred}'s" if inferred and inferred != distro else ""
        return {"name": distro, "source": f"ROS_DISTRO{note}"}
    if inferred:
        return {"name": inferred, "source": f"inferred from rclpy {version}; ROS_DISTRO unset"}
    if version:
        return {"name": None, "source": f"ROS_DISTRO unset; rclpy {version} is not a known distribution's"}
    return {"name": None, "source": "ROS_DISTRO unset and rclpy not found: ROS 2 is not installed here"}


def lapack_path() -> dict:
    module, why = extension_status()
    if module is None:
        return {"active": False, "detail": why,
                "instead": "SciPy's dgeev wrapper and the NumPy mode extraction (same results, slower)"}
    return {"active": True, "detail": f"{module.__name__} ({Path(module.__file__).name}) over "
                                      "scipy.linalg.cython_lapack", "path": module.__file__}


def native_cycle_path() -> dict:
    """The native control cycle library of the ament package flexmodal_native."""
    prefix, why = _ament_prefix(NATIVE_PACKAGE)
    if prefix is None:
        return {"active": False, "detail": why, "instead": NATIVE_INSTEAD}
    library = Path(prefix) / "lib" / NATIVE_LIBRARY
    if not library.is_file():
        return {"active": False, "detail": f"{NATIVE_PACKAGE} is in the ament index ({prefix}) but "
                                           f"{library} is missing; rebuild it (colcon build, or make setup)",
                "instead": NATIVE_INSTEAD}
    return {"active": True, "detail": str(library)}


def compiler_path() -> dict:
    try:
        return {"active": True, "detail": find_compiler()}
    except BuildError as exc:
        return {"active": False, "detail": str(exc),
                "instead": "flexmodal codegen and the controller's generated law cannot be compiled; "
                           "FlexibleJointFeedforward(compiled=False) runs CasADi's virtual machine"}


def cache_path() -> dict:
    """Whether the codegen cache directory is writable or can be created (tried with a temporary
    directory that is removed again; nothing is left behind)."""
    folder = cache_dir()
    source = "FLEXMODAL_CACHE" if os.environ.get("FLEXMODAL_CACHE") else "default; set FLEXMODAL_CACHE to move it"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is not a directory")
        with tempfile.TemporaryDirectory(dir=existing):
            pass
    except OSError as exc:
        return {"active": False, "detail": f"{folder} ({source}) cannot be written ({exc.strerror or exc})",
                "instead": "generated code cannot be cached: set FLEXMODAL_CACHE to a writable directory"}
    state = "writable" if existing == folder else f"will be created under {existing}"
    return {"active": True, "detail": f"{folder} ({source}), {state}"}


def report() -> dict:
    rclpy = rclpy_info()
    return {"ros_distribution": ros_distribution(rclpy),
            "python": sys.version.split()[0],
            "versions": {"rclpy": rclpy["version"] or NOT_INSTALLED,
                         **{label: package_version(names, module) for label, names, module in PACKAGES}},
            "rclpy_source": rclpy["source"],
            "accelerated": {"lapack_extension": lapack_path(), "native_control_cycle": native_cycle_path(),
                            "c_compiler": compiler_path(), "codegen_cache": cache_path()}}


LABELS = {"lapack_extension": "LAPACK extension (modal analysis)",
          "native_control_cycle": f"native control cycle ({NATIVE_PACKAGE})",
          "c_compiler": "C compiler (code generation)", "codegen_cache": "codegen cache directory"}


def text(out: dict) -> str:
    ros = out["ros_distribution"]
    lines = [f"ROS 2 distribution  {ros['name'] or 'unknown'} ({ros['source']})",
             f"Python              {out['python']}"]
    for label, version in out["versions"].items():
        lines.append(f"{label:<19} {version}" + (f" ({out['rclpy_source']})" if label == "rclpy" else ""))
    lines.append("accelerated paths:")
    for key, path in out["accelerated"].items():
        state = "active" if path["active"] else "OFF"
        lines.append(f"  {LABELS[key]:<40} {state}: {path['detail']}")
        if not path["active"] and path.get("instead"):
            lines.append(f"  {'':<40} instead: {path['instead']}")
    return "\n".join(lines)


def run(args):
    out = report()
    if args.json:
        print_json(out)
    else:
        print(text(out))
    return 0

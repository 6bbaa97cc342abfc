"""Bundled robots: ``urdf/<name>.urdf`` + ``config/<name>.yaml`` shipped with the package.

Files are found in the source tree (editable install) or, for a colcon install, in the package's
ament share directory (``share/flexmodal_ros/{urdf,config}``).
"""
from pathlib import Path

from ..core.errors import ConfigError
from .model import load_model
from .params import load_config

PACKAGE = "flexmodal_ros"


def share_dir():
    """Directory holding ``urdf/`` and ``config/`` of the bundled robots."""
    source = Path(__file__).resolve().parents[2]
    if (source / "config").is_dir() and (source / "urdf").is_dir():
        return source
    try:
        # deferred: ament_index_python (ROS)
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except (ImportError, LookupError, ValueError):
        raise ConfigError(f"cannot find the bundled robot files (no {source}/config and no "
                          f"installed {PACKAGE} share directory)") from None


def _bundled():
    """{name: closed_chain} of the bundled robots (those with both a URDF and a config YAML)."""
    root = share_dir()
    return {p.stem: load_config(p).closed_chain for p in sorted((root / "config").glob("*.yaml"))
            if (root / "urdf" / f"{p.stem}.urdf").is_file()}


def list_robots():
    """Names of the bundled flexible-joint (serial) robots — those :func:`load_robot` loads."""
    return [name for name, closed in _bundled().items() if not closed]


def list_closed_chain_robots():
    """Names of the bundled closed-chain robots (loop closures in their YAML), analysed by
    :mod:`flexmodal_ros.constrained` (:func:`flexmodal_ros.constrained.closed_chain.resolve_closed_chain`)."""
    return [name for name, closed in _bundled().items() if closed]


def robot_paths(name):
    """(urdf_path, params_path) of a bundled robot (serial or closed-chain); ConfigError naming
    the choices if unknown."""
    root = share_dir()
    urdf, params = root / "urdf" / f"{name}.urdf", root / "config" / f"{name}.yaml"
    # A bundled robot is a plain name with both files: found without reading every bundled YAML
    # (_bundled() parses them all, for the choices of the error message only).
    if isinstance(name, str) and name and Path(name).name == name and urdf.is_file() and params.is_file():
        return urdf, params
    bundled = _bundled()
    if name not in bundled:
        closed = [n for n, c in bundled.items() if c]
        raise ConfigError(f"unknown robot '{name}' (bundled robots: "
                          f"{', '.join(n for n, c in bundled.items() if not c)}"
                          + (f"; closed-chain robots: {', '.join(closed)})" if closed else ")"))
    return urdf, params


def load_robot(name):
    """The :class:`~flexmodal_ros.robot.model.FlexibleJointModel` of a bundled robot."""
    urdf, params = robot_paths(name)
    return load_model(urdf, params)


def resolve_model(robot=None, urdf=None, params=None):
    """Model from either a bundled robot name or a params YAML (optionally with an explicit URDF).

    The one entry point used by the CLI and the nodes, so both accept the same inputs.
    """
    if robot and (urdf or params):
        raise ConfigError("give either a robot name or urdf/params files, not both")
    if robot:
        return load_robot(robot)
    if params:
        return load_model(urdf or None, params)
    if urdf:
        raise ConfigError("params: a flexibility YAML is required with a URDF")
    raise ConfigError("no robot given (use a bundled robot name, or a params YAML)")


def is_closed_chain(robot=None, urdf=None, params=None) -> bool:
    """True if the selected robot's YAML declares passive joints or loop closures."""
    if robot and (urdf or params):
        raise ConfigError("give either a robot name or urdf/params files, not both")
    path = robot_paths(robot)[1] if robot else params
    if not path:
        return False
    return load_config(path).closed_chain

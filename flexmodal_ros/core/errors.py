"""Exceptions of flexmodal_ros.

Every error raised for bad user input is a :class:`FlexmodalError`; its message names the offending
field so that the CLI can print it on one line and the nodes can return it as ``message``.
"""


class FlexmodalError(ValueError):
    """Base class of every user-facing error of the package."""


class ConfigError(FlexmodalError):
    """Malformed or non-physical robot description (URDF or flexibility YAML)."""


class InputError(FlexmodalError):
    """Malformed request: wrong lengths, unknown joints, NaN/inf, non-physical values."""


class BuildError(FlexmodalError):
    """Generated code could not be compiled or loaded (e.g. no C compiler on the machine)."""

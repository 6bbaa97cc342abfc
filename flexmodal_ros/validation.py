"""Input checks shared by the core, the CLI and the nodes.

Each check returns a clean float array or raises the given :class:`~flexmodal_ros.errors.FlexmodalError`
subclass with a message that names the field.
"""
from pathlib import Path

import numpy as np
import yaml

from .errors import InputError


def finite_array(value, field, shape=None, error=InputError):
    """Return ``value`` as a float array, checking that it is numeric, finite and of ``shape``.

    ``shape`` entries may be ``None`` (any size along that axis).
    """
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{field}: expected numbers, got {value!r}") from None
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "x".join("*" if s is None else str(s) for s in shape) or "scalar"
            raise error(f"{field}: expected shape {want}, got {'x'.join(map(str, arr.shape)) or 'scalar'}")
    if not np.all(np.isfinite(arr)):
        raise error(f"{field}: contains NaN or inf")
    return arr


def finite_vector(value, n, field, error=InputError):
    """A finite float vector of length ``n`` (``n=None``: any length)."""
    return finite_array(value, field, (n,), error)


def positive(value, field, error=InputError):
    """A finite scalar or array whose entries are all > 0."""
    arr = finite_array(value, field, error=error)
    if np.any(arr <= 0):
        raise error(f"{field}: must be > 0, got {_show(arr)}")
    return arr


def nonnegative(value, field, error=InputError):
    """A finite scalar or array whose entries are all >= 0."""
    arr = finite_array(value, field, error=error)
    if np.any(arr < 0):
        raise error(f"{field}: must be >= 0, got {_show(arr)}")
    return arr


def per_joint(value, n, field, error=InputError):
    """Broadcast a scalar or a length-``n`` sequence to a finite vector of length ``n``."""
    arr = finite_array(value, field, error=error)
    if arr.ndim == 0 or arr.size == 1:
        return np.full(n, float(arr.reshape(-1)[0]))
    if arr.shape != (n,):
        raise error(f"{field}: expected 1 or {n} values, got {arr.size}")
    return arr


def finite_scalar(value, field, error=InputError):
    """One finite number as a float."""
    return float(finite_array(value, field, (), error))


def frozen(values):
    """Read-only array copy (fields of the immutable result and model objects)."""
    arr = np.array(values)
    arr.setflags(write=False)
    return arr


def reject_unknown_keys(mapping, allowed, field, error=InputError):
    """Error naming every key of ``mapping`` that is not in ``allowed`` (typos never pass silently)."""
    unknown = sorted(set(map(str, mapping)) - set(allowed))
    if unknown:
        raise error(f"{field}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")


def load_yaml_mapping(path, what, error=InputError):
    """Read a YAML file whose top level is a mapping; errors name the file and what is wrong."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise error(f"{what} {path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise error(f"{what} {path}: malformed YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(raw, dict):
        raise error(f"{what} {path}: expected a YAML mapping at top level")
    return raw


def _show(arr):
    return f"{float(arr):g}" if arr.ndim == 0 else np.array2string(arr, precision=6)

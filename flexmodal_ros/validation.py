"""Input checks shared by the core, the CLI and the nodes.

Each check returns a clean float array or raises the given :class:`~flexmodal_ros.errors.FlexmodalError`
subclass with a message that names the field.
"""
import numpy as np

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


def _show(arr):
    return f"{float(arr):g}" if arr.ndim == 0 else np.array2string(arr, precision=6)

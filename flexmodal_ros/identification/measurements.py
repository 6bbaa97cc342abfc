"""Measured modal data for the identification (thesis ch. 3): the validated :class:`ModalData`
(from nested measurements, flat request arrays or a YAML data file), how its entries are named
in error messages, and its size limits. The inverse eigenvalue problem that uses it is
:mod:`flexmodal_ros.identification.inverse_eigen`.

Units: f [Hz], ζ fraction (0.05 = 5 %), q [rad or m].
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..robot.registry import resolve_model
from ..core.validation import (finite_array, finite_scalar, finite_vector, frozen, load_yaml_mapping, positive,
                         reject_unknown_keys, require_keys, shown)

# Size limits of the data (a request beyond them is refused before allocating).
MAX_CONFIGURATIONS = 1_000
MAX_MEASURED_MODES = 5_000
MAX_BOUND = 1e12                         # k_max, d_max beyond this overflow the residuals
MAX_FREQUENCY_HZ = 1e6                   # measured frequencies beyond this overflow λ² (3.31)


@dataclass(frozen=True)
class ModalData:
    """Measured modal data: ``q`` (m, n) configurations [rad or m]; per measured mode (N entries):
    ``config`` index into q, ``frequency_hz`` 0 < f̂ <= MAX_FREQUENCY_HZ [Hz], ``damping_ratio``
    0 < ζ̂ < 1, ``mode_index`` 0-based model mode (ascending frequency) or −1 = match
    automatically; ``style`` how its entries are named in messages ("request": flat arrays
    frequencies_hz[i] as in IdentifyJointParameters, "file": measurements[c].modes[j] of a data
    file)."""
    q: np.ndarray
    config: np.ndarray
    frequency_hz: np.ndarray
    damping_ratio: np.ndarray
    mode_index: np.ndarray
    style: str = "request"

    @property
    def num_measurements(self) -> int:
        return int(self.frequency_hz.size)

    def with_damping(self, damping_ratio) -> "ModalData":
        """Copy with other damping ratios (e.g. shifted by an absolute amount, thesis Table 3.2)."""
        return modal_data_arrays(self.q, self.config, self.frequency_hz, damping_ratio, self.mode_index, self.style)

    def entry(self, i, field="frequency_hz") -> str:
        """Name of measured mode ``i``'s ``field`` (frequency_hz, damping_ratio, mode_index) as the
        user wrote it (:attr:`style`)."""
        return entry_name(self.config, i, field, self.style)


def modal_data(measurements, n: int, field_name: str = "measurements") -> ModalData:
    """Validate nested measurements ``[{q: [...], modes: [{frequency_hz, damping_ratio,
    mode_index?}, ...]}, ...]`` for a robot with ``n`` joints; InputError names the entry."""
    if not isinstance(measurements, (list, tuple)) or not measurements:
        raise InputError(f"{field_name}: empty (need at least one configuration with measured modes)")
    qs, config, freq, zeta, index = [], [], [], [], []
    check_sizes(len(measurements), 0)
    for i, meas in enumerate(measurements):
        where = f"{field_name}[{i}]"
        if not isinstance(meas, dict) or "q" not in meas or "modes" not in meas:
            raise InputError(f"{where}: expected a mapping with 'q' and 'modes'")
        reject_unknown_keys(meas, {"q", "modes"}, where)
        qs.append(finite_vector(meas["q"], None, f"{where}.q"))
        if qs[-1].size != n:
            raise InputError(f"{where}.q: expected {n} joint values, got {qs[-1].size}")
        modes = meas["modes"]
        if not isinstance(modes, (list, tuple)) or not modes:
            raise InputError(f"{where}.modes: empty (need at least one measured mode)")
        for j, mode in enumerate(modes):
            mw = f"{where}.modes[{j}]"
            if not isinstance(mode, dict):
                raise InputError(f"{mw}: expected a mapping with frequency_hz and damping_ratio")
            reject_unknown_keys(mode, {"frequency_hz", "damping_ratio", "mode_index"}, mw)
            require_keys(mode, ("frequency_hz", "damping_ratio"), mw)
            config.append(i)
            freq.append(finite_scalar(mode["frequency_hz"], f"{mw}.frequency_hz"))
            zeta.append(finite_scalar(mode["damping_ratio"], f"{mw}.damping_ratio"))
            index.append(_mode_index(mode.get("mode_index", -1), f"{mw}.mode_index"))
    return modal_data_arrays(np.array(qs), config, freq, zeta, index, style="file")


REQUEST_FIELDS = {"frequency_hz": "frequencies_hz", "damping_ratio": "damping_ratios", "mode_index": "mode_indices"}


def entry_name(config, i, field, style="request") -> str:
    """Measured mode ``i``'s ``field`` as the user wrote it: ``frequencies_hz[i]`` (request arrays)
    or ``measurements[c].modes[j].frequency_hz`` (data file)."""
    if style == "file":
        return f"{_entry(config, i)}.{field}"
    return f"{REQUEST_FIELDS.get(field, field)}[{i}]"


def modal_data_arrays(q, config, frequency_hz, damping_ratio, mode_index=None, style="request") -> ModalData:
    """Validated :class:`ModalData` from flat arrays (see its docstring); errors name the entry as
    the user wrote it (``style``: "request" flat arrays, "file" a data file's measurements)."""
    q = finite_array(q, "q" if style == "file" else "positions", (None, None))
    names = ("frequency_hz", "damping_ratio") if style == "file" else ("frequencies_hz", "damping_ratios")
    f = finite_vector(frequency_hz, None, names[0])
    z = finite_vector(damping_ratio, f.size, names[1])
    c = np.asarray(config, dtype=int).reshape(-1)
    idx = np.full(f.size, -1) if mode_index is None else np.asarray(mode_index, dtype=int).reshape(-1)
    if f.size == 0 or q.shape[0] == 0:
        raise InputError("measurements: empty (need at least one measured mode)")
    check_sizes(q.shape[0], f.size)
    if c.size != f.size or idx.size != f.size:
        raise InputError(f"config/mode_index: expected {f.size} entries (one per measured mode)")
    if c.min() < 0 or c.max() >= q.shape[0]:
        raise InputError(f"config: indices must lie in 0..{q.shape[0] - 1}")
    for name, bad, what in (("frequency_hz", f <= 0, "> 0"),
                            ("frequency_hz", f > MAX_FREQUENCY_HZ, f"<= {MAX_FREQUENCY_HZ:g} Hz"),
                            ("damping_ratio", (z <= 0) | (z >= 1), "in (0, 1) (fraction, not %)")):
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{entry_name(c, i, name, style)}: must be {what}, got "
                             f"{(f if name[0] == 'f' else z)[i]:g}")
    if (idx < -1).any():
        raise InputError(f"{entry_name(c, int(np.argmax(idx < -1)), 'mode_index', style)}: must be >= 0 "
                         "(or -1 = auto)")
    return ModalData(*(frozen(a) for a in (q, c, f, z, idx)), style=style)


def check_sizes(configurations, measured_modes):
    """InputError if the data exceed MAX_CONFIGURATIONS / MAX_MEASURED_MODES."""
    if configurations > MAX_CONFIGURATIONS:
        raise InputError(f"num_configurations: {configurations} is more than the maximum of {MAX_CONFIGURATIONS}")
    if measured_modes > MAX_MEASURED_MODES:
        raise InputError(f"measured modes: {measured_modes} is more than the maximum of {MAX_MEASURED_MODES}")


def _entry(config, i):
    """Name of flat entry ``i`` as measurements[c].modes[j] (modes are stored config by config)."""
    return f"measurements[{config[i]}].modes[{i - int(np.flatnonzero(config == config[i])[0])}]"


def _mode_index(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{where}: expected an integer (0-based mode number), got {shown(value)}")
    return int(value)


@dataclass(frozen=True)
class DataFile:
    """A parsed identification data file: the robot model, the measurements, optional bounds."""
    model: object
    data: ModalData
    k_max: float | None
    d_max: float | None
    path: Path


DATA_KEYS = {"robot", "urdf", "params", "measurements", "bounds"}


def load_data_file(path) -> DataFile:
    """Read a YAML data file (format in README "Identification" and config/planar_2r_modal_data.yaml):
    ``robot: NAME`` or ``params: F`` (+ optional ``urdf: F``; paths relative to the file),
    ``measurements: [...]`` (see :func:`modal_data`), optional ``bounds: {k_max, d_max}``."""
    path = Path(path)
    raw = load_yaml_mapping(path, "data file")
    reject_unknown_keys(raw, DATA_KEYS, "data file")
    model = _data_file_model(raw, path.parent)
    bounds = raw.get("bounds") or {}
    if not isinstance(bounds, dict):
        raise InputError("bounds: expected a mapping with k_max and/or d_max")
    reject_unknown_keys(bounds, {"k_max", "d_max"}, "bounds")
    k_max, d_max = (None if bounds.get(key) is None else positive_value(bounds[key], f"bounds.{key}")
                    for key in ("k_max", "d_max"))
    return DataFile(model, modal_data(raw.get("measurements"), model.n), k_max, d_max, path)


def _data_file_model(raw, base):
    """Robot model of a data file: bundled ``robot`` or ``params`` (+ ``urdf``), paths relative to it."""
    resolve = lambda key: None if not raw.get(key) else str(
        Path(str(raw[key])) if Path(str(raw[key])).is_absolute() else base / str(raw[key]))
    return resolve_model(raw.get("robot"), resolve("urdf"), resolve("params"))


def positive_value(value, field):
    """A finite value > 0 as float (InputError naming ``field``)."""
    return float(positive(finite_scalar(value, field), field))


def bound(value, field):
    """A search-box bound (k_max, d_max): finite, > 0 and <= MAX_BOUND (InputError naming ``field``)."""
    value = positive_value(value, field)
    if value > MAX_BOUND:
        raise InputError(f"{field}: must be <= {MAX_BOUND:g}, got {value:g}")
    return value

"""Multichannel time records for operational modal analysis: validation, resampling, free decay.

A :class:`Record` holds uniformly sampled channels (motor positions [rad], link positions [rad or
m], tool accelerations [m/s²], ...) with their names and sample rate. :func:`make_record` turns
raw samples (timestamps from a bag, a CSV file or a simulation) into one, rejecting what cannot be
analysed (too short, NaN/inf, non-monotonic stamps, constant signals) with an
:class:`~flexmodal_ros.core.errors.InputError` naming the problem; uneven stamps are resampled onto a
uniform grid (cubic spline) with a warning kept in :attr:`Record.warnings`.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.validation import frozen, read_text_file, shown

MIN_SAMPLES = 64                 # below this no model of any useful order can be fitted
EXCITATION_KEY = "excitation_end_s"   # CSV header comment "# excitation_end_s: <t>" (record time base)
METADATA_KEY = "metadata"             # CSV header comment "# metadata: <JSON>" (e.g. the simulated impulse)
IMPULSE_KEYS = ("force", "axis", "start", "duration")
STAMP_JITTER_RTOL = 0.01         # |Δt − median Δt| above 1 % of the median → resampled


@dataclass(frozen=True)
class Record:
    """Uniformly sampled record: ``t`` (N,) [s] (t[k] = t[0] + k/fs), ``values`` (N, c) in the
    channels' units, ``channels`` c names, ``sample_rate_hz`` fs, ``warnings`` (resampling,
    dropped channels), ``excitation_end`` [s] or None: time after which the record is a free
    decay (known for simulated impact tests; detected otherwise, :func:`free_decay_start`)."""

    t: np.ndarray
    values: np.ndarray
    channels: tuple
    sample_rate_hz: float
    warnings: tuple = ()
    excitation_end: float | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return int(self.t.size)

    @property
    def num_channels(self) -> int:
        return len(self.channels)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    def window(self, start: float | None = None, end: float | None = None) -> "Record":
        """The samples with start ≤ t ≤ end [s] (absolute record times); InputError if too few."""
        lo = -np.inf if start is None else float(start)
        hi = np.inf if end is None else float(end)
        if np.isnan(lo) or np.isnan(hi) or lo >= hi:
            raise InputError(f"start/end: need start < end, got {start} and {end}")
        keep = (self.t >= lo - 1e-9) & (self.t <= hi + 1e-9)
        if keep.sum() < MIN_SAMPLES:
            raise InputError(f"start/end: the window [{start}, {end}] s holds {int(keep.sum())} samples "
                             f"of the record ({self.t[0]:.4f}..{self.t[-1]:.4f} s); at least {MIN_SAMPLES} needed")
        return replace(self, t=frozen(self.t[keep]), values=frozen(self.values[keep]))

    def select(self, channels, field="joints") -> "Record":
        """The named channels, in the given order; InputError naming unknown ones (``field``: how
        the caller's user wrote the channel list, e.g. "--joints" or "channels")."""
        channels = list(channels)
        unknown = [c for c in channels if c not in self.channels]
        if unknown:
            raise InputError(f"{field}: unknown channel(s) {', '.join(unknown)} (the record has "
                             f"{', '.join(self.channels)})")
        idx = [self.channels.index(c) for c in channels]
        return replace(self, values=frozen(self.values[:, idx]), channels=tuple(channels))


def make_record(t, values, channels, excitation_end=None, metadata=None,
                min_samples: int = MIN_SAMPLES) -> Record:
    """Validated :class:`Record` from timestamps ``t`` (N,) [s] and ``values`` (N, c).

    Errors (InputError): shapes, fewer than ``min_samples`` samples, NaN/inf (names the channel
    and sample), stamps not strictly increasing (names the sample), every channel constant.
    Constant channels among moving ones are dropped with a warning. Uneven stamps (jitter above
    1 % of the median step) are resampled onto the uniform grid of the median step (cubic spline)
    with a warning.
    """
    channels = tuple(str(c) for c in channels)
    try:
        t = np.asarray(t, dtype=float).reshape(-1)
        values = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError("record: timestamps and values must be numbers") from None
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != t.size or values.shape[1] != len(channels):
        raise InputError(f"record: expected {t.size} x {len(channels)} values (samples x channels), "
                         f"got shape {values.shape}")
    if len(channels) == 0:
        raise InputError("record: no channels")
    if t.size < min_samples:
        raise InputError(f"record: too short, {t.size} samples (at least {min_samples} needed)")
    bad = ~np.isfinite(values)
    if bad.any():
        k, c = np.argwhere(bad)[0]
        raise InputError(f"record: NaN or inf in channel {channels[c]} at sample {k} "
                         f"({int(bad.sum())} bad values in total)")
    if not np.isfinite(t).all():
        raise InputError(f"record: NaN or inf timestamp at sample {int(np.argmax(~np.isfinite(t)))}")
    step = np.diff(t)
    if (step <= 0).any():
        k = int(np.argmax(step <= 0)) + 1
        raise InputError(f"record: timestamps not strictly increasing at sample {k} "
                         f"(t[{k - 1}] = {t[k - 1]:.9f} s, t[{k}] = {t[k]:.9f} s)")
    warnings = []
    spread = np.ptp(values, axis=0)
    scale = np.maximum(np.abs(values).max(axis=0), 1e-300)
    constant = spread <= 1e-14 * scale
    if constant.all():
        raise InputError(f"record: every channel is constant ({', '.join(channels)}): nothing moved")
    if constant.any():
        dropped = [c for c, k in zip(channels, constant) if k]
        warnings.append(f"constant channel(s) dropped: {', '.join(dropped)}")
        values = values[:, ~constant]
        channels = tuple(c for c, k in zip(channels, constant) if not k)
    dt = float(np.median(step))
    if np.abs(step - dt).max() > STAMP_JITTER_RTOL * dt:
        # deferred: scipy.interpolate
        from scipy.interpolate import make_interp_spline

        grid = t[0] + dt * np.arange(int(np.floor((t[-1] - t[0]) / dt + 1e-9)) + 1)
        values = make_interp_spline(t, values, k=3, axis=0)(grid)
        warnings.append(f"uneven timestamps (steps {step.min() * 1e3:.4g}..{step.max() * 1e3:.4g} ms): "
                        f"resampled at {1.0 / dt:.6g} Hz (cubic spline)")
        t = grid
    else:
        t = t[0] + dt * np.arange(t.size)      # exact uniform grid (stamps are rounded to ns)
    return Record(frozen(t), frozen(values), channels, 1.0 / dt, tuple(warnings),
                  None if excitation_end is None else float(excitation_end), dict(metadata or {}))


def average_records(records) -> Record:
    """The sample-by-sample mean of synchronized repeats of one experiment (same excitation at the
    same sample of each record): independent measurement noise of std σ falls to σ/√n, the
    response stays. Channels are those common to all (a channel constant in one repeat was
    dropped from it by :func:`make_record`); times, excitation end and metadata of the first, with
    ``repeats`` = n in the metadata. InputError for records of different lengths or rates."""
    records = list(records)
    first = records[0]
    if any(r.num_samples != first.num_samples or abs(r.sample_rate_hz / first.sample_rate_hz - 1) > 1e-9
           for r in records):
        raise InputError("records: repeats to average need the same number of samples and sample rate")
    channels = [c for c in first.channels if all(c in r.channels for r in records)]
    if not channels:
        raise InputError("records: the repeats to average share no channel")
    values = np.mean([r.select(channels, "channels").values for r in records], axis=0)
    warnings = tuple(dict.fromkeys(w for r in records for w in r.warnings))
    return replace(first, values=frozen(values), channels=tuple(channels), warnings=warnings,
                   metadata={**first.metadata, "repeats": len(records)})


def free_decay_start(record: Record) -> int:
    """Index of the first sample of the free decay.

    ``record.excitation_end`` when known (simulated impact), else the sample after the peak of the
    response norm ‖y_k − ȳ‖ (ȳ: median of the first 5 % of samples, the pre-impact rest; scaled per
    channel by its spread) — after the peak of a short impact the record is a free decay.
    """
    if record.excitation_end is not None:
        k = int(np.searchsorted(record.t, record.excitation_end - 1e-9))
        return min(k, record.num_samples - 1)
    y = np.asarray(record.values)
    head = max(1, record.num_samples // 20)
    dev = (y - np.median(y[:head], axis=0)) / np.maximum(np.ptp(y, axis=0), 1e-300)
    return int(np.argmax(np.linalg.norm(dev, axis=1))) + 1


def read_csv(path, columns=None) -> Record:
    """CSV with a header row: a time column (``t``, ``time`` or ``stamp``, seconds) then one
    column per channel; ``columns`` selects channels (default: all). Leading comment lines
    ``# key: value`` carry metadata; ``# excitation_end_s: <t>`` (written by :func:`write_csv` for
    a record that knows it) is the end of the excitation in the time column's base, used instead of
    guessing where the free decay starts. The file is read as text through
    :func:`~flexmodal_ros.core.validation.read_text_file` (regular file, size limit, UTF-8)."""
    path = Path(path)
    text = read_text_file(path, "--csv")
    lines = text.splitlines()
    meta, k = {}, 0
    while k < len(lines) and lines[k].lstrip().startswith("#"):
        key, sep, value = lines[k].lstrip()[1:].partition(":")
        if sep:
            meta[key.strip()] = value.strip()
        k += 1
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines[k:]))))
    except csv.Error as exc:
        raise InputError(f"--csv {path}: not a CSV record ({exc})") from None
    if len(rows) < 2:
        raise InputError(f"--csv {path}: needs a header row and samples")
    header = [h.strip() for h in rows[0]]
    time_cols = [i for i, h in enumerate(header) if h.lower() in ("t", "time", "stamp", "time_s", "t_s")]
    if not time_cols:
        raise InputError(f"--csv {path}: no time column (name it t, time or stamp) in header {shown(header)}")
    try:
        data = np.array([[float(v) for v in r] for r in rows[1:] if r], dtype=float)
    except ValueError as exc:
        raise InputError(f"--csv {path}: not numeric ({shown(str(exc))})") from None
    if data.ndim != 2 or data.shape[1] != len(header):
        raise InputError(f"--csv {path}: every row needs {len(header)} values")
    metadata = {}
    if METADATA_KEY in meta:
        try:
            metadata = json.loads(meta[METADATA_KEY])
        except ValueError as exc:
            raise InputError(f"--csv {path}: '# {METADATA_KEY}:' is not JSON ({exc})") from None
        metadata = checked_metadata(metadata, f"--csv {path}: '# {METADATA_KEY}:'")
    excitation_end = None
    if EXCITATION_KEY in meta:
        try:
            excitation_end = float(meta[EXCITATION_KEY])
        except ValueError:
            excitation_end = float("nan")
        if not np.isfinite(excitation_end):
            raise InputError(f"--csv {path}: '# {EXCITATION_KEY}:' is not a number: {shown(meta[EXCITATION_KEY])}")
    names = [h for i, h in enumerate(header) if i != time_cols[0]]
    values = np.delete(data, time_cols[0], axis=1)
    rec = make_record(data[:, time_cols[0]], values, names, excitation_end=excitation_end,
                      metadata={**metadata, "file": str(path)})
    return rec.select(columns, "--joints") if columns else rec


def checked_metadata(metadata, where) -> dict:
    """Record metadata read from a file: a JSON object whose ``impulse`` (if any) has exactly
    the fields force [N], axis, start [s], duration [s] with finite numbers (what the model
    comparison of a simulated impact uses); InputError naming ``where`` otherwise."""
    if not isinstance(metadata, dict):
        raise InputError(f"{where} expected a JSON object")
    impulse = metadata.get("impulse")
    if impulse is not None:
        ok = isinstance(impulse, dict) and set(impulse) == set(IMPULSE_KEYS) and isinstance(impulse["axis"], str) \
            and all(isinstance(impulse[k], (int, float)) and not isinstance(impulse[k], bool)
                    and np.isfinite(impulse[k]) for k in ("force", "start", "duration"))
        if not ok:
            raise InputError(f"{where} impulse must have {', '.join(IMPULSE_KEYS)} (finite numbers, axis a name), "
                             f"got {shown(impulse)}")
    return metadata


def write_csv(record: Record, path) -> Path:
    """Header ``t`` + channel names, one row per sample (full precision); a record that knows its
    excitation end starts with the comment ``# excitation_end_s: <t>``, its metadata (e.g. the
    simulated impulse) follow as ``# metadata: <JSON>`` (both read back by :func:`read_csv`)."""
    path = Path(path)
    with path.open("w", newline="") as fh:
        if record.excitation_end is not None:
            fh.write(f"# {EXCITATION_KEY}: {float(record.excitation_end)!r}\n")
        if record.metadata:
            fh.write(f"# {METADATA_KEY}: {json.dumps(record.metadata, default=str)}\n")
        w = csv.writer(fh)
        w.writerow(["t", *record.channels])
        for tk, row in zip(record.t, record.values):
            w.writerow([repr(float(tk)), *map(lambda v: repr(float(v)), row)])
    return path

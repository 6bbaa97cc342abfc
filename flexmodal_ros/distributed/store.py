"""The Zarr store of an out-of-core modal map: layout, identity checks, chunk writes, the closing
pass (mode tracking across chunks, crossings, summary) and readers (tracked rows, PNG plot).

Layout (one Zarr v3 group; dimension names let ``xarray.open_zarr(path, consolidated=False)``
label everything; every array is chunked along configurations exactly like the work, so each
finished work chunk is one independent write of one Zarr chunk per array):

====================== ========================= ==========================================
array                  shape, dtype              content
====================== ========================= ==========================================
configurations         (m, n) float64            link configuration [rad or m]
frequencies_hz         (m, 2n) float64           f per mode, ascending per row, NaN padded
damping_ratios         (m, 2n) float64           ζ (fraction), same order
num_modes              (m,) int16                oscillatory modes of the row
stability              (m,) int8                 0 stable, 1 marginally stable, 2 unstable
mode_shapes            (m, 2n, 2n) complex128    optional (``store_shapes``), rows [q; q_m]
chunk_mode_order       (m, 2n) int16             tracked order inside the work chunk
mode_order             (m, 2n) int16             tracked order over the whole map (as
                                                 ``ModalMap.mode_order``), written at the end
chunk_first_shapes,    (chunks, 2n, 2n) complex  shapes at both ends of each chunk: what
chunk_last_shapes                                joins the tracking of neighbouring chunks
crossing_configurations (K, 2) int64             0-based configuration pairs of each crossing
crossing_modes         (K, 2) int16              0-based tracked modes that swap order
chunk_done             (chunks,) bool            set after a chunk's other writes (resume)
====================== ========================= ==========================================

The group attributes hold ``identity`` (robot, joints, a hash of the model parameters, the
configuration set, chunk size, options): a re-run with the same identity resumes, anything else
is refused before a byte is written. ``summary`` and ``complete`` appear after the closing pass.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..modes import crossings_from_tracked, mac_assignment, plot_tracked
from .chunks import STABILITY_CODES

FORMAT = "flexmodal-modal-map"
VERSION = 1
MAX_CROSSINGS_LISTED = 10
PLOT_MAX_POINTS = 20000


# ----------------------------------------------------------------------------- identity

def model_fingerprint(model) -> str:
    """SHA-256 of everything in ``model`` that changes modal results: flexibility, gains, gravity,
    wrench, tool, and the rigid-body data (joint placements and inertias) from the URDF."""
    h = hashlib.sha256()
    h.update(repr((model.name, tuple(model.joint_names))).encode())
    for name in ("prismatic", "k", "r", "d_f", "d_fm", "d_c", "d_cm", "B", "kp", "kd", "gravity",
                 "wrench"):
        h.update(np.ascontiguousarray(getattr(model, name), float).tobytes())
    tool = model.tool
    h.update(np.r_[tool.mass, np.ravel(tool.com), np.ravel(tool.inertia)].astype(float).tobytes())
    for i in range(1, model.pin.njoints):
        h.update(np.asarray(model.pin.jointPlacements[i].homogeneous, float).tobytes())
        h.update(np.asarray(model.pin.inertias[i].toDynamicParameters(), float).tobytes())
    return h.hexdigest()


def source_fingerprint(source) -> dict:
    """JSON description of the configuration set: a grid by its axes, an explicit list by hash."""
    if isinstance(source, np.ndarray):
        return {"kind": "list", "num_configurations": int(source.shape[0]),
                "sha256": hashlib.sha256(np.ascontiguousarray(source, float).tobytes()).hexdigest()}
    return {"kind": "grid", "base": source.base.tolist(),
            "axes": {name: v.tolist() for name, v in zip(source.joints, source.values)}}


def map_identity(model, source, chunk_size: int, track: bool, store_shapes: bool) -> dict:
    """The attributes that make a store "the same map" (JSON-normalized)."""
    size = source.shape[0] if isinstance(source, np.ndarray) else source.size
    ident = {"robot": model.name, "joint_names": list(model.joint_names),
             "model_sha256": model_fingerprint(model), "configurations": source_fingerprint(source),
             "num_configurations": int(size), "chunk_size": int(chunk_size), "tracked": bool(track),
             "mode_shapes_stored": bool(store_shapes)}
    return json.loads(json.dumps(ident))


# ----------------------------------------------------------------------------- open / create

class MapStore:
    """An open store for writing: the Zarr group, its arrays (cached) and the done mask."""

    def __init__(self, path: Path, group):
        self.path = path
        self.group = group
        self.arrays = {name: arr for name, arr in group.arrays()}
        ident = group.attrs["identity"]
        self.m, self.chunk = ident["num_configurations"], ident["chunk_size"]
        self.num_chunks = -(-self.m // self.chunk)
        self.tracked = ident["tracked"]

    def bounds(self, k: int) -> tuple[int, int]:
        return k * self.chunk, min((k + 1) * self.chunk, self.m)

    def done(self) -> np.ndarray:
        return np.asarray(self.arrays["chunk_done"][:], bool)

    def write(self, res) -> None:
        """Write one :class:`~flexmodal_ros.distributed.chunks.ChunkResult`, ``chunk_done`` last."""
        sl = slice(res.start, res.start + res.num_modes.size)
        a = self.arrays
        try:
            for name in ("configurations", "frequencies_hz", "damping_ratios", "num_modes", "stability"):
                a[name][sl] = getattr(res, name)
            if "mode_shapes" in a:
                a["mode_shapes"][sl] = res.mode_shapes
            if self.tracked:
                a["chunk_mode_order"][sl] = res.chunk_order
                a["chunk_first_shapes"][res.index] = res.first_shapes
                a["chunk_last_shapes"][res.index] = res.last_shapes
            a["chunk_done"][res.index] = True
        except OSError as exc:
            raise InputError(f"store {self.path}: write failed ({exc})") from None


def open_for_writing(path, identity: dict, n: int, width: int, shape_rows: int) -> MapStore:
    """Create the store at ``path``, or reopen it to resume if it holds the same map.

    InputError, with nothing written, if ``path`` is not writable, is something else than a
    flexmodal store, or holds another map (robot, model, configurations, chunk size or options).
    """
    # deferred: Zarr
    import zarr

    path = Path(path)
    if path.exists():
        old = _read_identity(path)
        _check_same(path, old, identity)
        _check_writable(path)
        return MapStore(path, zarr.open_group(str(path), mode="r+", use_consolidated=False))
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        group = zarr.open_group(str(staging), mode="w-")
        _create_arrays(group, identity, n, width, shape_rows)
        group.attrs.update({"format": FORMAT, "version": VERSION, "identity": identity,
                            "complete": False})
        os.rename(staging, path)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise InputError(f"store {path}: cannot create it ({exc.strerror or exc})") from None
    return MapStore(path, zarr.open_group(str(path), mode="r+", use_consolidated=False))


def _create_arrays(group, ident, n, width, shape_rows):
    m, chunk = ident["num_configurations"], ident["chunk_size"]
    num_chunks = -(-m // chunk)

    def add(name, shape, dims, dtype, fill, chunks=None, **attrs):
        arr = group.create_array(name, shape=shape, chunks=chunks or (chunk,) + shape[1:],
                                 dtype=dtype, fill_value=fill, dimension_names=dims)
        if attrs:
            arr.attrs.update(attrs)

    add("configurations", (m, n), ("configuration", "joint"), "float64", np.nan,
        units="rad (revolute) or m (prismatic)", joint_names=ident["joint_names"])
    add("frequencies_hz", (m, width), ("configuration", "mode"), "float64", np.nan, units="Hz")
    add("damping_ratios", (m, width), ("configuration", "mode"), "float64", np.nan, units="1")
    add("num_modes", (m,), ("configuration",), "int16", -1)
    add("stability", (m,), ("configuration",), "int8", -1, flag_values=[0, 1, 2],
        flag_meanings=" ".join(s.replace(" ", "_") for s in STABILITY_CODES))
    if ident["mode_shapes_stored"]:
        add("mode_shapes", (m, shape_rows, width), ("configuration", "shape_row", "mode"),
            "complex128", np.nan)
    if ident["tracked"]:
        add("chunk_mode_order", (m, width), ("configuration", "mode"), "int16", -1)
        add("mode_order", (m, width), ("configuration", "mode"), "int16", -1)
        for end in ("first", "last"):
            add(f"chunk_{end}_shapes", (num_chunks, shape_rows, width), ("chunk", "shape_row", "mode"),
                "complex128", np.nan, chunks=(1, shape_rows, width))
    add("chunk_done", (num_chunks,), ("chunk",), "bool", False, chunks=(1,))


def _read_identity(path: Path) -> dict:
    # deferred: Zarr
    import zarr

    try:
        group = zarr.open_group(str(path), mode="r", use_consolidated=False)
        attrs = dict(group.attrs)
    except Exception:  # noqa: BLE001 - any unreadable content means "not our store"
        attrs = {}
    if attrs.get("format") != FORMAT or "identity" not in attrs:
        raise InputError(f"store {path}: exists and is not a flexmodal modal-map store; nothing was "
                         f"written (choose a new --store path)")
    return attrs["identity"]


def _check_same(path, old: dict, new: dict) -> None:
    diffs = []
    for key in new:
        if old.get(key) != new[key]:
            if key == "model_sha256":
                diffs.append("model parameters (stiffness, damping, gains, tool, gravity or URDF) differ")
            elif key == "configurations":
                diffs.append(f"configurations: this run's {new[key]['kind']} differs from the "
                             f"store's {old.get(key, {}).get('kind', '?')}")
            else:
                diffs.append(f"{key}: store {old.get(key)!r}, this run {new[key]!r}")
    if diffs:
        raise InputError(f"store {path}: holds a different modal map ({'; '.join(diffs)}); nothing was "
                         f"overwritten (choose a new --store path, or delete the old store)")


def _check_writable(path: Path) -> None:
    probe = path / f".write-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"store {path}: not writable ({exc.strerror or exc})") from None


# ----------------------------------------------------------------------------- closing pass

def finalize(store: MapStore) -> dict:
    """Join the chunks' tracking into ``mode_order``, list crossings, summarize; streaming one chunk
    at a time (memory independent of the map size). Idempotent: a resumed run redoes it."""
    a, g = store.arrays, store.group
    for name in ("crossing_configurations", "crossing_modes"):
        if name in a:
            del g[name]
    pairs = g.create_array("crossing_configurations", shape=(0, 2), chunks=(65536, 2), dtype="int64",
                           dimension_names=("crossing", "pair"))
    modes = g.create_array("crossing_modes", shape=(0, 2), chunks=(65536, 2), dtype="int16",
                           dimension_names=("crossing", "pair"))
    stats = _Stats()
    listed, num_crossings = [], 0
    prev = None  # (permutation, last shapes in chunk order, last tracked frequencies row)
    for k in range(store.num_chunks):
        start, stop = store.bounds(k)
        f, z = a["frequencies_hz"][start:stop], a["damping_ratios"][start:stop]
        count, stability = a["num_modes"][start:stop], a["stability"][start:stop]
        stats.add(f, z, count, stability)
        if not store.tracked:
            continue
        m = int(count[0])
        if prev is None:
            perm = np.arange(m)
        else:
            if prev[1].shape[1] != m:
                raise InputError(f"tracking: the number of oscillatory modes changes between "
                                 f"configurations {start} and {start + 1} ({prev[1].shape[1]} → {m}); "
                                 f"modes cannot be tracked (use --no-track)")
            first = a["chunk_first_shapes"][k][:, :m]
            perm = mac_assignment(prev[1][:, prev[0]], first)
        order = np.full((stop - start, f.shape[1]), -1, np.int16)
        order[:, :m] = a["chunk_mode_order"][start:stop][:, :m][:, perm]
        a["mode_order"][start:stop] = order
        ft = np.take_along_axis(f[:, :m], order[:, :m].astype(int), axis=1)
        found = (crossings_from_tracked(ft) if prev is None
                 else crossings_from_tracked(np.vstack([prev[2], ft]), offset=start - 1))
        if found:
            pairs.append(np.array([c.between for c in found], np.int64))
            modes.append(np.array([c.modes for c in found], np.int16))
        num_crossings += len(found)
        listed += [c.description for c in found[:MAX_CROSSINGS_LISTED - len(listed)]]
        prev = (perm, a["chunk_last_shapes"][k][:, :m], ft[-1:])
    summary = stats.summary()
    summary.update({"num_crossings": num_crossings, "crossings": listed})
    g.attrs.update({"summary": summary, "complete": True})
    return summary


class _Stats:
    """Running ranges and stability counts over chunks."""

    def __init__(self):
        self.f = [np.inf, -np.inf]
        self.z = [np.inf, -np.inf]
        self.modes = [np.iinfo(np.int64).max, -1]
        self.stability = np.zeros(len(STABILITY_CODES), np.int64)

    def add(self, f, z, count, stability):
        for rng, vals in ((self.f, f), (self.z, z)):
            if np.isfinite(vals).any():
                rng[0], rng[1] = min(rng[0], np.nanmin(vals)), max(rng[1], np.nanmax(vals))
        self.modes = [min(self.modes[0], int(count.min())), max(self.modes[1], int(count.max()))]
        self.stability += np.bincount(stability, minlength=len(STABILITY_CODES))

    def summary(self) -> dict:
        return {"frequency_range_hz": [float(v) for v in self.f],
                "damping_range": [float(v) for v in self.z],
                "num_modes_range": self.modes,
                "num_configurations": int(self.stability.sum()),
                "stability_counts": dict(zip(STABILITY_CODES, self.stability.tolist())),
                "all_stable": bool(self.stability[1:].sum() == 0)}


# ----------------------------------------------------------------------------- readers

def open_store(path):
    """A complete store opened read-only (``zarr.Group``); InputError if it is none or unfinished."""
    # deferred: Zarr
    import zarr

    path = Path(path)
    if not path.exists():
        raise InputError(f"store {path}: not found")
    _read_identity(path)
    group = zarr.open_group(str(path), mode="r", use_consolidated=False)
    if not group.attrs.get("complete"):
        raise InputError(f"store {path}: unfinished (re-run the same sweep to resume it)")
    return group


def tracked_rows(group, field: str, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start``..``stop``−1 of ``field`` ('frequencies_hz', 'damping_ratios') per tracked mode
    (frequency order if the map is untracked), NaN-padded like :meth:`ModalMap.tracked`."""
    values = group[field][start:stop]
    if "mode_order" not in group:
        return values
    order = group["mode_order"][start:stop].astype(int)
    out = np.take_along_axis(values, np.maximum(order, 0), axis=1)
    return np.where(order >= 0, out, np.nan)


def plot_store(path, out_png, title: str = "", max_points: int = PLOT_MAX_POINTS) -> Path:
    """:func:`~flexmodal_ros.modes.modal_map.plot_tracked` of a store, read chunk by chunk: every s-th
    configuration (s chosen so that at most ``max_points`` are drawn)."""
    group = open_store(path)
    m = group["num_modes"].shape[0]
    chunk = group.attrs["identity"]["chunk_size"]
    stride = max(1, -(-m // int(max_points)))
    picks, f, z = [], [], []
    for start in range(0, m, chunk):
        stop = min(start + chunk, m)
        first = -(-start // stride) * stride
        idx = np.arange(first, stop, stride)
        if idx.size:
            picks.append(idx)
            f.append(tracked_rows(group, "frequencies_hz", start, stop)[idx - start])
            z.append(tracked_rows(group, "damping_ratios", start, stop)[idx - start])
    ident = group.attrs["identity"]
    width = group.attrs["summary"]["num_modes_range"][1]
    label = "tracked modes" if ident["tracked"] else "modes by frequency"
    every = f", every {stride}th configuration" if stride > 1 else ""
    return plot_tracked(np.concatenate(picks) + 1, np.vstack(f)[:, :width], np.vstack(z)[:, :width], out_png,
                        title or f"{ident['robot']}: modal map ({label}{every})")

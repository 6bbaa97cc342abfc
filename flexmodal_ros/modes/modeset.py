"""What every modal capability shares: eigenvalues → modes, stability, MAC, tracking, output.

Used by the flexible-joint AMA (:mod:`flexmodal_ros.flexible_joint.modal`) and by every other family that produces
modes (flexible links, constrained mechanisms, measured modes, polynomial eigenpairs). A new
capability returns a :class:`ModeSet` (or a subclass adding its own fields) and gets sorting,
stability, MAC tracking across configurations, CSV/JSON/PNG output and progress bars from here.

Conventions (the documented contract of :class:`ModeSet`):
- natural frequency f = |λ|/2π [Hz] and damping ratio ζ = −Re λ/|λ| [fraction] (thesis (2.16)-(2.17));
- a *mode* is a complex-conjugate eigenvalue pair, represented by its member with Im λ > 0; modes are
  sorted by ascending natural frequency; real eigenvalues (overdamped motion) are listed separately;
- mode shapes are columns scaled to unit Euclidean norm with the component of largest modulus real
  and positive;
- stability uses a tolerance relative to the spectral radius, tol = ``STABILITY_RTOL``·max|λ|, so that
  round-off (Re λ ≈ 1e-15 for an undamped mode) is not reported as instability: ``"stable"`` when
  every Re λ < −tol, ``"unstable"`` when some Re λ > tol, ``"marginally stable"`` otherwise.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from flexmodal_ros.core.errors import InputError

TWO_PI = 2.0 * np.pi
STABILITY_RTOL = 1e-9  # |Re λ| ≤ 1e-9·max|λ| counts as zero (eig round-off is ~1e-16·‖A‖)
STABLE, MARGINAL, UNSTABLE = "stable", "marginally stable", "unstable"


@dataclass(frozen=True)
class ModeSet:
    """Modes of one linear(ized) system (units: Hz, fractions, 1/s).

    ``frequencies_hz`` (m,) ascending; ``damping_ratios`` (m,) fractions (0.05 = 5 %);
    ``eigenvalues`` (m,) complex, Im > 0; ``mode_shapes`` (r, m) complex, one column per mode (rows
    defined by the producer); ``real_eigenvalues`` ascending; ``stability`` one of ``"stable"``,
    ``"marginally stable"``, ``"unstable"``; ``unstable_eigenvalues`` every eigenvalue (both members
    of a pair) with Re λ ≥ −tol, i.e. those that keep the system from being asymptotically stable.
    """

    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    eigenvalues: np.ndarray
    mode_shapes: np.ndarray
    real_eigenvalues: np.ndarray
    stability: str
    unstable_eigenvalues: np.ndarray

    @property
    def stable(self) -> bool:
        """True only for asymptotic stability (every Re λ < −tol)."""
        return self.stability == STABLE

    @property
    def num_modes(self) -> int:
        return int(self.frequencies_hz.size)

    def mode_fields(self) -> dict:
        """The :class:`ModeSet` fields as a dict (to build a subclass from a plain mode set)."""
        return {name: getattr(self, name) for name in _MODE_FIELDS}

    def to_dict(self) -> dict:
        """JSON-ready dict of the mode fields (keys shared by every ``--json`` output)."""
        return {
            "num_modes": self.num_modes,
            "frequencies_hz": self.frequencies_hz.tolist(),
            "damping_ratios": self.damping_ratios.tolist(),
            "eigenvalues_real": self.eigenvalues.real.tolist(),
            "eigenvalues_imag": self.eigenvalues.imag.tolist(),
            "mode_shapes_real": self.mode_shapes.real.tolist(),
            "mode_shapes_imag": self.mode_shapes.imag.tolist(),
            "real_eigenvalues": self.real_eigenvalues.tolist(),
            "stable": bool(self.stable),
            "stability": self.stability,
            "unstable_eigenvalues_real": self.unstable_eigenvalues.real.tolist(),
            "unstable_eigenvalues_imag": self.unstable_eigenvalues.imag.tolist(),
        }


_NO_EIGENVALUES, _NO_REAL_EIGENVALUES = np.zeros(0, complex), np.zeros(0)
_NO_EIGENVALUES.setflags(write=False)
_NO_REAL_EIGENVALUES.setflags(write=False)
_MODE_FIELDS = tuple(f.name for f in dataclasses.fields(ModeSet))


def frequencies_and_damping(eigenvalues) -> tuple[np.ndarray, np.ndarray]:
    """f = |λ|/2π [Hz] and ζ = −Re λ/|λ| [-] (thesis (2.16)-(2.17)); ζ = 0 where λ = 0."""
    lam = np.asarray(eigenvalues, complex)
    omega = np.abs(lam)
    return omega / TWO_PI, -lam.real / np.where(omega > 0, omega, 1.0)


def classify_stability(eigenvalues, rtol: float = STABILITY_RTOL) -> tuple[str, np.ndarray]:
    """(label, eigenvalues with Re λ ≥ −tol sorted by real then imaginary part) for one spectrum.

    tol = ``rtol``·max|λ|; labels as in the module docstring.
    """
    w = np.asarray(eigenvalues, complex).ravel()
    tol = rtol * (np.abs(w).max() if w.size else 0.0)
    bad = w[w.real >= -tol]
    bad = bad[np.lexsort((bad.imag, bad.real))]
    if bad.size == 0:
        return STABLE, bad
    return (UNSTABLE if bad.real.max() > tol else MARGINAL), bad


def normalize_shapes(shapes: np.ndarray) -> np.ndarray:
    """Columns of ``shapes`` (..., r, m) to unit norm, component of largest modulus real positive."""
    shapes = np.asarray(shapes, complex)
    pivot = np.take_along_axis(shapes, np.argmax(np.abs(shapes), axis=-2)[..., None, :], axis=-2)
    norm = np.linalg.norm(shapes, axis=-2, keepdims=True)
    scale = norm * np.where(pivot == 0, 1.0, pivot / np.where(pivot == 0, 1.0, np.abs(pivot)))
    return shapes / np.where(scale == 0, 1.0, scale)


class SpectrumModes(NamedTuple):
    """The modes of a batch of B spectra as padded arrays, before they become :class:`ModeSet`
    objects (:func:`mode_sets`); h is the width of the per-entry mode arrays (>= every count).

    ``wr``, ``wi`` (B, N) all eigenvalues; ``counts`` (B,) modes per entry; ``frequencies_hz``,
    ``damping_ratios`` (B, h) and ``eigenvalues`` (B, h) complex: entry b's modes in its first
    ``counts[b]`` columns, sorted; ``mode_shapes`` (B, r, h) complex, normalized (r = 0 without
    vectors); ``real`` (B, N): entry b's ``nreal[b]`` real eigenvalues first, ascending (0 unless
    some eigenvalue is real); ``near_axis`` (B,) bool: False only where every Re λ is certainly
    below −tol (stable without a closer look). Made by :func:`spectrum_modes` (NumPy) or by the C
    kernel of :meth:`flexmodal_ros.linalg.lapack.RepeatedEig.modes_many` (the same, faster).
    """

    wr: np.ndarray
    wi: np.ndarray
    counts: np.ndarray
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    eigenvalues: np.ndarray
    mode_shapes: np.ndarray
    real: np.ndarray
    nreal: np.ndarray
    near_axis: np.ndarray

    def stability(self, b: int, rtol: float = STABILITY_RTOL):
        """(label, eigenvalues with Re λ ≥ −tol) of entry b (:func:`classify_stability`), the
        exact check only where ``near_axis``."""
        if not self.near_axis[b]:
            return STABLE, _NO_EIGENVALUES
        return classify_stability(self.wr[b] + 1j * self.wi[b], rtol)

    def labels(self, rtol: float = STABILITY_RTOL) -> list:
        """The stability label of every entry (:meth:`stability`)."""
        return [self.stability(b, rtol)[0] if near else STABLE for b, near in enumerate(self.near_axis.tolist())]

    def padded(self, width: int | None = None) -> tuple:
        """(frequencies_hz, damping_ratios, eigenvalues) (B, width) with NaN after each entry's
        ``counts[b]`` modes (``width`` default: the largest count)."""
        width = int(self.counts.max(initial=0)) if width is None else width
        if width < self.counts.max(initial=0):
            raise ValueError(f"width {width} is less than the {self.counts.max()} modes of an entry")
        empty = np.arange(width)[None, :] >= self.counts[:, None]
        out = []
        for values in (self.frequencies_hz, self.damping_ratios, self.eigenvalues):
            padded = np.full((values.shape[0], width), np.nan, values.dtype)
            common = min(width, values.shape[1])
            padded[:, :common] = values[:, :common]
            padded[empty] = np.nan
            out.append(padded)
        return tuple(out)


def modes_from_eigenpairs(w: np.ndarray, v: np.ndarray, rows: slice | None = None,
                          rtol: float = STABILITY_RTOL, result_type: type = None,
                          **fields) -> list[ModeSet]:
    """Batched eigen-solutions → sorted :class:`ModeSet` per batch entry.

    ``w`` (..., N) eigenvalues and ``v`` (..., N, N) right eigenvectors (columns), as from
    ``numpy.linalg.eig``, or None (eigenvalues only: shapes with 0 rows); ``rows`` selects the
    eigenvector rows kept as mode shapes (e.g. the position half of a first-order state). Leading
    batch dimensions are flattened. ``result_type`` (a ModeSet subclass) is built per entry with
    entry b of each sequence in ``fields`` (e.g. ``q=qs``).
    """
    w = np.asarray(w).astype(complex, copy=False)
    size = w.shape[-1]
    w = w.reshape((-1, size))
    order, counts = _mode_order(w)
    kept = order[:, : counts.max(initial=0)]
    if v is None:
        shapes = np.zeros((w.shape[0], 0, kept.shape[1]), complex)
    else:
        v = np.asarray(v).astype(complex, copy=False).reshape((-1, v.shape[-2], size))
        v = v if rows is None else v[:, rows, :]
        shapes = np.take_along_axis(v, kept[:, None, :], axis=2)
    return mode_sets(_padded(w.real, w.imag, np.take_along_axis(w, kept, axis=1), shapes, counts, rtol), rtol,
                     result_type, fields)


def modes_from_eigen(w: np.ndarray, v: np.ndarray | None, rows: slice | None = None,
                     rtol: float = STABILITY_RTOL, result_type: type = None, **fields) -> ModeSet:
    """:class:`ModeSet` of one eigen-solution (``numpy.linalg.eig``/``eigvals`` output, ``v`` None
    for eigenvalues only): :func:`modes_from_eigenpairs` of a batch of one, ``fields`` given as
    the values of this entry."""
    return modes_from_eigenpairs(np.asarray(w)[None], None if v is None else np.asarray(v)[None], rows, rtol,
                                 result_type, **{key: (value,) for key, value in fields.items()})[0]


def spectrum_modes(wr: np.ndarray, wi: np.ndarray, vt: np.ndarray | None, rows: slice | None = None,
                   rtol: float = STABILITY_RTOL) -> SpectrumModes:
    """:class:`SpectrumModes` of real matrices' eigen-solutions in LAPACK's real layout, batched
    (:meth:`flexmodal_ros.linalg.lapack.RepeatedEig.solve_many`): eigenvalues ``wr`` + i ``wi`` (B, N)
    and ``vt`` (B, N, N) with ``vt[b, j]`` the j-th real vector column, a pair j, j + 1 (``wi`` > 0
    first) being ``vt[b, j]`` ± i ``vt[b, j + 1]``; or None (eigenvalues only). ``rows`` selects
    the vector rows kept as shapes. Only the kept vectors are made complex. The NumPy reference
    of the C kernel in :mod:`flexmodal_ros.linalg.lapack` (and its fallback)."""
    w = wr + 1j * wi
    order, counts = _mode_order(w)
    kept = order[:, : w.shape[1] // 2]
    if vt is None:
        shapes = np.zeros((w.shape[0], 0, kept.shape[1]), complex)
    else:
        part = vt if rows is None else vt[:, :, rows]
        pair = np.minimum(kept + 1, w.shape[1] - 1)[:, :, None]      # beyond counts[b]: unused
        shapes = np.take_along_axis(part, kept[:, :, None], axis=1) \
            + 1j * np.take_along_axis(part, pair, axis=1)
        shapes = shapes.transpose(0, 2, 1)
    return _padded(wr, wi, np.take_along_axis(w, kept, axis=1), shapes, counts, rtol)


def modes_from_real_eigenpairs(wr: np.ndarray, wi: np.ndarray, vt: np.ndarray | None,
                               rows: slice | None = None, rtol: float = STABILITY_RTOL,
                               result_type: type = None, **fields) -> list[ModeSet]:
    """:class:`ModeSet` per entry of a batch in LAPACK's real layout (arguments as
    :func:`spectrum_modes`; ``result_type`` and ``fields`` as :func:`modes_from_eigenpairs`)."""
    return mode_sets(spectrum_modes(wr, wi, vt, rows, rtol), rtol, result_type, fields)


def _mode_order(w):
    """Per row of ``w`` (B, N): indices sorting the Im λ > 0 members by |λ| (stable; the others
    after them) and the number of such members."""
    pos = w.imag > 0.0
    return np.argsort(np.where(pos, np.abs(w), np.inf), axis=1, kind="stable"), pos.sum(axis=1)


def _padded(wr, wi, lam, shapes, counts, rtol) -> SpectrumModes:
    """:class:`SpectrumModes` from all eigenvalues ``wr`` + i ``wi`` (B, N), the sorted modes
    ``lam`` (B, h) and their unnormalized shapes (B, r, h), entry b's modes in its first
    ``counts[b]`` columns."""
    shapes = normalize_shapes(shapes) if shapes.shape[1] else shapes
    freq, zeta = frequencies_and_damping(lam)
    radius = np.hypot(wr, wi).max(axis=1, initial=0.0)
    near = wr.max(axis=1, initial=-np.inf) >= -rtol * radius
    real_members = wi == 0.0
    nreal = np.where(2 * counts < wr.shape[1], real_members.sum(axis=1), 0)
    real = np.sort(np.where(real_members, wr, np.inf), axis=1)
    return SpectrumModes(wr, wi, counts, freq, zeta, lam, shapes, real, nreal, near)


def mode_sets(modes: SpectrumModes, rtol: float = STABILITY_RTOL, result_type: type = None,
              fields=None) -> list[ModeSet]:
    """One ``result_type`` (a :class:`ModeSet` subclass, default ModeSet) per entry of ``modes``,
    built with entry b of each sequence in ``fields``; the arrays are views into ``modes``."""
    make = result_type or ModeSet
    keys = tuple(fields or ())
    counts, nreal = modes.counts.tolist(), modes.nreal.tolist()
    if counts and len(set(counts)) == 1 and len(set(nreal)) == 1:     # the usual case: rows split at C speed
        m, r = counts[0], nreal[0]
        parts = [list(modes.frequencies_hz[:, :m]), list(modes.damping_ratios[:, :m]),
                 list(modes.eigenvalues[:, :m]), list(modes.mode_shapes[:, :, :m]),
                 list(modes.real[:, :r]) if r else itertools.repeat(_NO_REAL_EIGENVALUES)]
    else:
        parts = [[a[b, :m] for b, m in enumerate(counts)] for a in
                 (modes.frequencies_hz, modes.damping_ratios, modes.eigenvalues)]
        parts += [[modes.mode_shapes[b, :, :m] for b, m in enumerate(counts)],
                  [modes.real[b, :r] if r else _NO_REAL_EIGENVALUES for b, r in enumerate(nreal)]]
    out = []
    for b, (f, z, lam, u, real, *extra) in enumerate(zip(*parts, *(list(v) for v in (fields or {}).values()))):
        out.append(make(f, z, lam, u, real, *modes.stability(b, rtol), **dict(zip(keys, extra))))
    return out


def first_mode_set(modes: SpectrumModes, rtol: float = STABILITY_RTOL, result_type: type = None,
                   **fields) -> ModeSet:
    """Entry 0 of ``modes`` as a ``result_type`` (default ModeSet) with ``fields``, its arrays
    copied (for kernel buffers that the next call reuses): :func:`mode_sets` for one spectrum."""
    m, r = int(modes.counts[0]), int(modes.nreal[0])
    return (result_type or ModeSet)(modes.frequencies_hz[0, :m].copy(), modes.damping_ratios[0, :m].copy(),
                                    modes.eigenvalues[0, :m].copy(), modes.mode_shapes[0, :, :m].copy(),
                                    modes.real[0, :r].copy() if r else _NO_REAL_EIGENVALUES,
                                    *modes.stability(0, rtol), **fields)


def mac(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Modal assurance criterion |aᴴb|² / ((aᴴa)(bᴴb)) between the columns of a (r, p) and b (r, s)."""
    num = np.abs(a.conj().T @ b) ** 2
    return num / np.outer(np.sum(np.abs(a) ** 2, 0), np.sum(np.abs(b) ** 2, 0))


@dataclass(frozen=True)
class Crossing:
    """Tracked modes ``modes`` (0-based) swap frequency order between configurations
    ``between`` = (i, i + 1) (0-based); ``description`` is 1-based for humans."""

    modes: tuple
    between: tuple
    description: str


def track_modes(mode_sets: Sequence[ModeSet]):
    """Follow modes along a sequence of neighbouring configurations.

    Tracked mode j is the j-th mode (by frequency) of the first configuration; in each next
    configuration it is the mode whose shape best matches (maximum total MAC, Hungarian
    assignment) its shape in the previous one. Returns ``(order, crossings)``: ``order[i, j]`` is
    the index in ``mode_sets[i]``'s sorted modes of tracked mode j; ``crossings`` lists frequency
    order swaps between tracked modes.
    """
    from scipy.optimize import linear_sum_assignment  # scipy.optimize is heavy: import on use

    if any(r.mode_shapes.shape[0] == 0 for r in mode_sets):
        raise InputError("track_modes: mode shapes were not computed (eigenvalues-only analysis); "
                         "tracking needs them")
    counts = {r.num_modes for r in mode_sets}
    if len(counts) != 1:
        raise InputError(f"track_modes: the number of oscillatory modes changes along the sweep "
                         f"({sorted(counts)}); modes cannot be tracked")
    order = np.empty((len(mode_sets), counts.pop()), dtype=int)
    order[0] = np.arange(order.shape[1])
    for i in range(1, len(mode_sets)):
        prev = mode_sets[i - 1].mode_shapes[:, order[i - 1]]
        rows, cols = linear_sum_assignment(-mac(prev, mode_sets[i].mode_shapes))
        order[i, rows] = cols
    return order, _crossings(mode_sets, order)


def _crossings(mode_sets, order) -> list[Crossing]:
    return crossings_from_tracked(np.array([r.frequencies_hz[o] for r, o in zip(mode_sets, order)]))


def crossings_from_tracked(f: np.ndarray, offset: int = 0) -> list[Crossing]:
    """Frequency order swaps between consecutive rows of tracked frequencies ``f`` (m, modes) [Hz];
    row i is configuration ``offset`` + i (0-based), so a long map can be scanned in slices."""
    f = np.asarray(f, float)
    sign = np.sign(f[:, :, None] - f[:, None, :])
    rows, a_idx, b_idx = np.nonzero(np.triu(sign[:-1] * sign[1:] < 0))
    out = []
    for r, a, b in zip(rows, a_idx, b_idx):
        i = offset + r + 1
        desc = (f"modes {a + 1} and {b + 1} cross between configurations {i} and {i + 1} "
                f"(near {0.5 * (f[r + 1, a] + f[r + 1, b]):.4g} Hz)")
        out.append(Crossing((int(a), int(b)), (i - 1, i), desc))
    return out


@dataclass(frozen=True)
class ModalMap:
    """Mode sets over configurations ``configurations`` (m, n) of the coordinates ``joint_names``;
    ``mode_order`` (m, modes) from :func:`track_modes` or None; ``crossings`` (empty when not
    tracked). Any :class:`ModeSet` producer can be mapped (:func:`map_modes`)."""

    joint_names: tuple
    configurations: np.ndarray
    results: list
    mode_order: np.ndarray | None
    crossings: list

    def tracked(self, field: str) -> np.ndarray:
        """(m, modes) array of ``field`` ('frequencies_hz', 'damping_ratios') per tracked mode
        (sorted order when untracked; NaN-padded if mode counts differ)."""
        width = max(r.num_modes for r in self.results)
        out = np.full((len(self.results), width), np.nan)
        for i, r in enumerate(self.results):
            vals = getattr(r, field)
            out[i, : vals.size] = vals if self.mode_order is None else vals[self.mode_order[i]]
        return out

    def to_dict(self) -> dict:
        return {
            "joint_names": list(self.joint_names),
            "configurations": self.configurations.tolist(),
            "results": [r.to_dict() for r in self.results],
            "mode_order": None if self.mode_order is None else self.mode_order.tolist(),
            "crossings": [c.description for c in self.crossings],
        }


def map_modes(joint_names, configurations: np.ndarray, results: Sequence[ModeSet],
              track: bool = True) -> ModalMap:
    """:class:`ModalMap` of already computed ``results`` (one per configuration), MAC-tracked."""
    results = list(results)
    if track and len(results) > 1:
        order, crossings = track_modes(results)
    else:
        order = np.arange(results[0].num_modes)[None, :] if track and results else None
        crossings = []
    return ModalMap(tuple(joint_names), np.asarray(configurations), results, order, crossings)


def progress_bar(total: int, desc: str, unit: str = "config", enabled: bool = True):
    """A tqdm bar on stderr (a context manager with ``update(k)``), or a silent stand-in."""
    if not enabled:
        return _NoProgress()
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass


def write_csv(mmap: ModalMap, path) -> Path:
    """One row per configuration: index (1-based), coordinate values, then f [Hz] and ζ [-] per
    (tracked) mode, stable flag."""
    path = Path(path)
    f, z = mmap.tracked("frequencies_hz"), mmap.tracked("damping_ratios")
    modes = range(1, f.shape[1] + 1)
    header = (["configuration"] + [f"q_{j}" for j in mmap.joint_names]
              + [f"f{k}_hz" for k in modes] + [f"zeta{k}" for k in modes] + ["stable"])
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i, r in enumerate(mmap.results):
            w.writerow([i + 1] + [repr(float(v)) for v in mmap.configurations[i]]
                       + ["" if np.isnan(v) else repr(float(v)) for v in (*f[i], *z[i])]
                       + [int(r.stable)])
    return path


def write_json(mmap: ModalMap, path) -> Path:
    """The :meth:`ModalMap.to_dict` document."""
    path = Path(path)
    path.write_text(json.dumps(mmap.to_dict()))
    return path


def plot_tracked(x, frequencies_hz: np.ndarray, damping_ratios: np.ndarray, path, title: str = "",
                 xlabel: str = "configuration", log_frequency: bool = True) -> Path:
    """PNG with frequency [Hz] and damping ratio [%] of each mode (columns of the (m, modes)
    arrays) against ``x`` (like thesis Figs. 2.3-2.4)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax_f, ax_z) = plt.subplots(2, 1, sharex=True, figsize=(10, 7))
    for k in range(frequencies_hz.shape[1]):
        style = {"marker": ".", "color": plt.cm.tab20(k % 20)}
        ax_f.plot(x, frequencies_hz[:, k], label=f"mode {k + 1}", **style)
        ax_z.plot(x, 100 * damping_ratios[:, k], **style)
    if log_frequency:
        ax_f.set_yscale("log")
    ax_f.set_ylabel("natural frequency [Hz]")
    ax_z.set_ylabel("damping ratio [%]")
    ax_z.set_xlabel(xlabel)
    ax_f.legend(fontsize="small", ncol=4, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax_f.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_map(mmap: ModalMap, path, title: str = "") -> Path:
    """:func:`plot_tracked` of a :class:`ModalMap` against the configuration number."""
    default = "tracked modes" if mmap.mode_order is not None else "modes by frequency"
    return plot_tracked(np.arange(1, len(mmap.results) + 1), mmap.tracked("frequencies_hz"),
                        mmap.tracked("damping_ratios"), path, title or default)


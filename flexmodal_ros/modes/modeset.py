"""Eigenvalues → modes: the :class:`ModeSet` contract, f and ζ, the real/oscillatory rule,
ordering, stability, and the batched builders (:class:`SpectrumModes`).

Every capability that produces modes (the flexible-joint AMA, flexible links, constrained
mechanisms, measured modes, polynomial eigenpairs) returns a :class:`ModeSet` (or a subclass adding
its own fields) built here; tracking and matching live in :mod:`.tracking`, maps and output in
:mod:`.modal_map`, uncertainties in :mod:`.uncertainty`.

Conventions (the documented contract of :class:`ModeSet`):
- natural frequency f = |λ|/2π [Hz] and damping ratio ζ = −Re λ/|λ| [fraction] (thesis (2.16)-(2.17));
- a *mode* is a complex-conjugate eigenvalue pair, represented by its member with Im λ > 0; modes are
  sorted by ascending natural frequency; real eigenvalues (overdamped motion) are listed separately;
- the real/oscillatory rule (one tolerance for every source of eigenvalues: LAPACK, QZ, ARPACK,
  polynomial roots of OMA, polynomial eigenpairs): λ is *real* when |Im λ| ≤ ``REAL_RTOL``·|λ|
  (round-off of a real root), *oscillatory* when Im λ > ``REAL_RTOL``·|λ|;
- mode shapes are columns scaled to unit Euclidean norm with the component of largest modulus real
  and positive;
- stability uses a tolerance relative to the spectral radius, tol = ``STABILITY_RTOL``·max|λ|, so that
  round-off (Re λ ≈ 1e-15 for an undamped mode) is not reported as instability: ``"stable"`` when
  every Re λ < −tol, ``"unstable"`` when some Re λ > tol, ``"marginally stable"`` otherwise.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

TWO_PI = 2.0 * np.pi
STABILITY_RTOL = 1e-9  # |Re λ| ≤ 1e-9·max|λ| counts as zero (eig round-off is ~1e-16·‖A‖)
REAL_RTOL = 1e-9       # |Im λ| ≤ 1e-9·|λ|: a real eigenvalue (the one real/oscillatory rule)
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


def damped_frequencies(eigenvalues) -> np.ndarray:
    """Damped natural frequency f_d = |Im λ|/2π = f √(1 − ζ²) [Hz]."""
    return np.abs(np.asarray(eigenvalues).imag) / TWO_PI


def eigenvalues_from(frequencies_hz, damping_ratios) -> np.ndarray:
    """λ = −ωζ + iω√(1 − ζ²), ω = 2πf: the Im ≥ 0 eigenvalue of each mode (f [Hz], ζ ≤ 1),
    the inverse of :func:`frequencies_and_damping` (thesis (2.16)-(2.17), (3.20))."""
    omega = TWO_PI * np.asarray(frequencies_hz, float)
    z = np.asarray(damping_ratios, float)
    return omega * (-z + 1j * np.sqrt(1 - z ** 2))


def is_oscillatory(eigenvalues, rtol: float = REAL_RTOL) -> np.ndarray:
    """True where λ is the Im > 0 member of an oscillatory pair: Im λ > ``rtol``·|λ|."""
    lam = np.asarray(eigenvalues)
    return lam.imag > rtol * np.abs(lam)


def is_real(eigenvalues, rtol: float = REAL_RTOL) -> np.ndarray:
    """True where λ is real up to round-off: |Im λ| ≤ ``rtol``·|λ|."""
    lam = np.asarray(eigenvalues)
    return np.abs(lam.imag) <= rtol * np.abs(lam)


def lowest_modes(eigenvalues, count: int | None = None, rtol: float = REAL_RTOL) -> np.ndarray:
    """Indices of the ``count`` (default all) oscillatory members of ``eigenvalues`` (1-D) of
    smallest |λ|, in the :class:`ModeSet` order (ascending frequency, ties in input order)."""
    lam = np.asarray(eigenvalues)
    osc = np.flatnonzero(is_oscillatory(lam, rtol))
    return osc[np.argsort(np.abs(lam[osc]), kind="stable")[:count]]


def snap_to_axis(eigenvalues, rtol: float = STABILITY_RTOL) -> np.ndarray:
    """``eigenvalues`` with Re λ set to 0 where |Re λ| ≤ ``rtol``·max|λ| (the tolerance under which
    :func:`classify_stability` calls a root marginal): undamped modes printed without round-off."""
    lam = np.asarray(eigenvalues, complex)
    tol = rtol * (np.abs(lam).max() if lam.size else 0.0)
    return np.where(np.abs(lam.real) <= tol, 1j * lam.imag, lam)


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
    order, counts = mode_order(w)
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
    order, counts = mode_order(w)
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


def mode_order(w):
    """Per row of ``w`` (B, N): indices sorting the oscillatory members (:func:`is_oscillatory`)
    by |λ| (stable; the others after them) and the number of such members."""
    pos = is_oscillatory(w)
    return np.argsort(np.where(pos, np.abs(w), np.inf), axis=1, kind="stable"), pos.sum(axis=1)


def _padded(wr, wi, lam, shapes, counts, rtol) -> SpectrumModes:
    """:class:`SpectrumModes` from all eigenvalues ``wr`` + i ``wi`` (B, N), the sorted modes
    ``lam`` (B, h) and their unnormalized shapes (B, r, h), entry b's modes in its first
    ``counts[b]`` columns."""
    shapes = normalize_shapes(shapes) if shapes.shape[1] else shapes
    freq, zeta = frequencies_and_damping(lam)
    radius = np.hypot(wr, wi).max(axis=1, initial=0.0)
    near = wr.max(axis=1, initial=-np.inf) >= -rtol * radius
    real_members = is_real(wr + 1j * wi)
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


def modes_from_classified(eigenvalues, shapes=None, real_eigenvalues=(), rtol: float = STABILITY_RTOL,
                          result_type: type = None, per_mode: dict | None = None, **fields) -> ModeSet:
    """A ``result_type`` (default :class:`ModeSet`) from modes a producer has already classified:
    ``eigenvalues`` (m,) the Im ≥ 0 member of each mode, ``shapes`` (r, m) their vectors (None: no
    shapes), ``real_eigenvalues`` its real eigenvalues. Modes sorted by frequency (stable), shapes
    normalized, stability from the modes, their conjugates and the real eigenvalues; each array in
    ``per_mode`` (…, m) is put in the same order along its last axis and passed as a field."""
    lam = np.asarray(eigenvalues, complex).ravel()
    order = np.argsort(np.abs(lam), kind="stable")
    lam = lam[order]
    f, z = frequencies_and_damping(lam)
    reals = np.sort(np.asarray(real_eigenvalues, float).ravel())
    label, bad = classify_stability(np.concatenate([lam, lam.conj(), reals]), rtol)
    u = np.zeros((0, lam.size), complex) if shapes is None else normalize_shapes(np.asarray(shapes)[:, order])
    extra = {key: None if value is None else np.asarray(value)[..., order] for key, value in (per_mode or {}).items()}
    return (result_type or ModeSet)(f, z, lam, u, reals, label, bad, **extra, **fields)


def first_mode_set(modes: SpectrumModes, rtol: float = STABILITY_RTOL, result_type: type = None,
                   **fields) -> ModeSet:
    """Entry 0 of ``modes`` as a ``result_type`` (default ModeSet) with ``fields``, its arrays
    copied (for kernel buffers that the next call reuses): :func:`mode_sets` for one spectrum."""
    m, r = int(modes.counts[0]), int(modes.nreal[0])
    return (result_type or ModeSet)(modes.frequencies_hz[0, :m].copy(), modes.damping_ratios[0, :m].copy(),
                                    modes.eigenvalues[0, :m].copy(), modes.mode_shapes[0, :, :m].copy(),
                                    modes.real[0, :r].copy() if r else _NO_REAL_EIGENVALUES,
                                    *modes.stability(0, rtol), **fields)

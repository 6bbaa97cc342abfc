"""The result of an expansion (paper eqs. (21), (18)): :class:`ModalPolynomial`, the Taylor
polynomials of k eigenpairs in p parameters, evaluated (vectorized over points) into eigenvalues,
right and left vectors, f, ζ and an error estimate, as :class:`PolynomialModes` per point; its
trust radius; saving and loading as ``.npz``. The coefficients come from
:mod:`flexmodal_ros.expansion.recursion`.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_array
from ..modes import frequencies_and_damping, is_real, modes_from_classified, normalize_shapes
from .eigen import BiorthogonalModes
from .multiindex import MultiIndexSet, multi_index_set

FORMAT_VERSION = 1


class TrustRegionWarning(UserWarning):
    """A polynomial was evaluated outside its trust radius."""


@dataclass(frozen=True, kw_only=True)
class PolynomialModes(BiorthogonalModes):
    """Modes of one point evaluated from a :class:`ModalPolynomial` (a
    :class:`~flexmodal_ros.modes.modeset.ModeSet`: sorted by frequency, unit-norm shapes): ``x`` the
    parameter values, ``error_estimate`` (m,) relative eigenvalue error estimate per mode (size of
    the degree-t terms over |λ|), ``inside_trust`` whether x is within the trust radius."""

    x: np.ndarray
    error_estimate: np.ndarray
    inside_trust: bool


@dataclass(frozen=True)
class PolynomialEigenpairs:
    """Evaluation at m points: ``x`` (m, p); ``eigenvalues`` (m, k); ``right``/``left`` (m, n, k)
    (None when not asked); ``frequencies_hz``, ``damping_ratios`` (m, k); ``error_estimate`` (m, k);
    ``inside_trust`` (m,) bool. Column j is expanded eigenpair j of the polynomial."""

    x: np.ndarray
    eigenvalues: np.ndarray
    right: np.ndarray | None
    left: np.ndarray | None
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    error_estimate: np.ndarray
    inside_trust: np.ndarray


@dataclass(frozen=True, eq=False)
class ModalPolynomial:
    """Taylor polynomials of k eigenpairs in p parameters up to total degree ``order``.

    ``parameter_names`` (p,), ``x0`` (p,); ``eigenvalues`` (N, k) coefficients λ^(σ) (row order of
    :class:`~.multiindex.MultiIndexSet`); ``right`` (N, k, n) φ^(σ); ``left`` (N, k, n) ψ^(σ) or None;
    ``mode_numbers`` (k,) 1-based numbers of the expanded modes at x0 (ModeSet order; real
    eigenvalues are numbered after the oscillatory modes); ``trust_radius`` [units of x, max-norm];
    ``tolerance`` the relative error that defined it; ``spectrum0`` all eigenvalues at x0 (for the
    stability label); ``metadata`` (system description); ``expansion_time_s``.
    """

    parameter_names: tuple
    x0: np.ndarray
    order: int
    eigenvalues: np.ndarray
    right: np.ndarray
    left: np.ndarray | None
    mode_numbers: np.ndarray
    trust_radius: float
    tolerance: float
    spectrum0: np.ndarray
    metadata: dict = field(default_factory=dict)
    expansion_time_s: float = float("nan")

    @property
    def multi_indices(self) -> MultiIndexSet:
        return multi_index_set(len(self.parameter_names), self.order)

    @property
    def num_terms(self) -> int:
        return self.eigenvalues.shape[0]

    @property
    def num_pairs(self) -> int:
        return self.eigenvalues.shape[1]

    @cached_property
    def real_pairs(self) -> np.ndarray:
        """(k,) True for expanded real eigenvalues (real at x0: :func:`flexmodal_ros.modes.is_real`)."""
        return is_real(self.eigenvalues[0])

    def _points(self, x) -> np.ndarray:
        arr = finite_array(x, "x")
        arr = arr[None, :] if arr.ndim == 1 else arr
        p = len(self.parameter_names)
        if arr.ndim != 2 or arr.shape[1] != p:
            raise InputError(f"x: expected {p} values ({', '.join(self.parameter_names)}) per point, "
                             f"got shape {arr.shape}")
        return arr

    def distance(self, x) -> np.ndarray:
        """max_i |x_i − x0_i| for points x (m, p) [units of x]."""
        return np.abs(self._points(x) - self.x0).max(axis=1)

    @cached_property
    def _tables(self):
        """Evaluation tables: last-degree rows and the coefficients [λ | φ] and ψ as real
        (N, 2·columns) views of contiguous complex arrays (a real matrix product evaluates them,
        cheaper than a complex one with a real left operand)."""
        mset = self.multi_indices
        N = self.eigenvalues.shape[0]
        real = lambda a: np.ascontiguousarray(a, complex).view(float)
        lam_phi = real(np.hstack([self.eigenvalues, self.right.reshape(N, -1)]))
        psi = None if self.left is None else real(self.left.reshape(N, -1))
        return mset.degree_slices[self.order], lam_phi, psi

    def evaluate(self, x, vectors: bool = True, left: bool = True, warn: bool = True) -> PolynomialEigenpairs:
        """λ, φ, ψ, f, ζ of the expanded eigenpairs at points ``x`` (m, p) or (p,), vectorized.

        Points farther than ``trust_radius`` (max-norm) from x0 are flagged in ``inside_trust``
        and, with ``warn``, reported by a :class:`TrustRegionWarning`.
        """
        x = self._points(x)
        last, lam_phi, psi = self._tables
        dx = x - self.x0
        V = self.multi_indices.monomials(dx)                                # (m, N) monomials δxᵠ
        k, n = self.eigenvalues.shape[1], self.right.shape[2]
        values = (V @ (lam_phi if vectors else lam_phi[:, :2 * k])).view(complex)
        lam = values[:, :k]
        tail = (V[:, last] @ lam_phi[last, :2 * k]).view(complex)
        err = np.abs(tail) / np.where(np.abs(lam) > 0, np.abs(lam), 1.0)
        right = values[:, k:].reshape(-1, k, n).transpose(0, 2, 1) if vectors else None
        lft = None
        if vectors and left and psi is not None:
            lft = (V @ psi).view(complex).reshape(-1, k, n).transpose(0, 2, 1)
        f, z = frequencies_and_damping(lam)
        inside = np.abs(dx).max(axis=1) <= self.trust_radius
        if warn and not inside.all():
            warnings.warn(f"{int((~inside).sum())} of {len(x)} point(s) lie outside the trust radius "
                          f"{self.trust_radius:.4g} (max-norm of x − x0) of this expansion: the polynomial "
                          f"may be inaccurate there (re-expand closer)", TrustRegionWarning, stacklevel=2)
        return PolynomialEigenpairs(x, lam, right, lft, f, z, err, inside)

    def mode_sets(self, x, left: bool = True, warn: bool = True) -> list[PolynomialModes]:
        """One :class:`PolynomialModes` per point (modes sorted by frequency as in every ModeSet;
        real expanded eigenvalues go to ``real_eigenvalues``; stability from the expanded ones
        and their conjugates); ``left=False`` skips the left vectors (``left_shapes`` None)."""
        ev = self.evaluate(x, left=left, warn=warn)
        real = self.real_pairs
        osc = np.flatnonzero(~real)
        return [modes_from_classified(
            ev.eigenvalues[i, osc], ev.right[i][:, osc], ev.eigenvalues[i, real].real, result_type=PolynomialModes,
            per_mode={"left_shapes": None if ev.left is None else normalize_shapes(ev.left[i][:, osc]),
                      "error_estimate": ev.error_estimate[i][osc]},
            x=ev.x[i], inside_trust=bool(ev.inside_trust[i])) for i in range(len(ev.x))]

    def truncated(self, order: int) -> "ModalPolynomial":
        """The same expansion cut at a lower total degree (trust radius recomputed)."""
        if not 1 <= order <= self.order:
            raise InputError(f"order: must be within 1..{self.order}, got {order}")
        rows = len(multi_index_set(len(self.parameter_names), order))
        lam = self.eigenvalues[:rows]
        return ModalPolynomial(self.parameter_names, self.x0, order, lam, self.right[:rows],
                               None if self.left is None else self.left[:rows], self.mode_numbers,
                               trust_radius(lam, len(self.parameter_names), order, self.tolerance),
                               self.tolerance, self.spectrum0, dict(self.metadata), self.expansion_time_s)

    def save(self, path) -> Path:
        """Write ``.npz`` (coefficients) with a JSON ``metadata`` entry (names, x0, order, …)."""
        path = Path(path)
        meta = {"format_version": FORMAT_VERSION, "parameter_names": list(self.parameter_names),
                "order": self.order, "trust_radius": self.trust_radius, "tolerance": self.tolerance,
                "expansion_time_s": self.expansion_time_s, "system": self.metadata}
        arrays = dict(x0=self.x0, eigenvalues=self.eigenvalues, right=self.right,
                      mode_numbers=self.mode_numbers, spectrum0=self.spectrum0,
                      exponents=self.multi_indices.exponents, metadata=np.array(json.dumps(meta)))
        if self.left is not None:
            arrays["left"] = self.left
        with path.open("wb") as fh:
            np.savez(fh, **arrays)
        return path

    @classmethod
    def load(cls, path) -> "ModalPolynomial":
        """Read :meth:`save` output; InputError naming what is missing or inconsistent."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except OSError as exc:
            raise InputError(f"coefficients {path}: cannot read ({exc})") from None
        except ValueError as exc:
            raise InputError(f"coefficients {path}: not a .npz file ({exc})") from None
        missing = sorted({"x0", "eigenvalues", "right", "mode_numbers", "spectrum0", "exponents",
                          "metadata"} - set(arrays))
        if missing:
            raise InputError(f"coefficients {path}: missing array(s) {', '.join(missing)}")
        try:
            meta = json.loads(str(arrays["metadata"]))
            names, order = tuple(meta["parameter_names"]), int(meta["order"])
            version = meta["format_version"]
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"coefficients {path}: malformed metadata ({exc})") from None
        if version != FORMAT_VERSION:
            raise InputError(f"coefficients {path}: format_version {version} not supported (expected {FORMAT_VERSION})")
        mset = multi_index_set(len(names), order)
        if arrays["exponents"].shape != mset.exponents.shape or np.any(arrays["exponents"] != mset.exponents):
            raise InputError(f"coefficients {path}: exponents do not match {len(names)} parameters at order {order}")
        lam, right, left = arrays["eigenvalues"], arrays["right"], arrays.get("left")
        k = lam.shape[1] if lam.ndim == 2 else -1
        if lam.shape[0] != len(mset) or right.shape[:2] != lam.shape or (left is not None and left.shape != right.shape):
            raise InputError(f"coefficients {path}: coefficient arrays have inconsistent shapes")
        if arrays["x0"].shape != (len(names),) or arrays["mode_numbers"].shape != (k,):
            raise InputError(f"coefficients {path}: x0 or mode_numbers has the wrong length")
        for name in ("x0", "eigenvalues", "right"):
            if not np.all(np.isfinite(arrays[name])):
                raise InputError(f"coefficients {path}: {name} contains NaN or inf")
        return cls(names, arrays["x0"], order, lam, right, left, arrays["mode_numbers"],
                   float(meta["trust_radius"]), float(meta["tolerance"]), arrays["spectrum0"],
                   meta.get("system", {}), float(meta.get("expansion_time_s", float("nan"))))


def trust_radius(eigenvalue_coefficients: np.ndarray, p: int, order: int, tolerance: float) -> float:
    """Radius r (max-norm of δx) within which the degree-t terms h_t(δx) = Σ_{|σ|=t} λ^(σ)δxᵠ,
    the error estimate, stay below ``tolerance``·|λ0| for every expanded eigenvalue.

    h_t is homogeneous, |h_t(r u)| = rᵗ|h_t(u)|; max |h_t(u)| over the unit cube is taken at its
    vertices (all of them for p ≤ 10, else 1024 random ones plus the coordinate directions).
    """
    mset = multi_index_set(p, order)
    last = mset.degree_slices[order]
    if p <= 10:
        corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * p, indexing="ij")).reshape(p, -1).T
    else:
        rng = np.random.default_rng(0)
        corners = np.vstack([rng.choice([-1.0, 1.0], (1024, p)), np.eye(p), -np.eye(p)])
    peak = np.abs(mset.monomials(corners)[:, last] @ eigenvalue_coefficients[last]).max(axis=0)
    scale = tolerance * np.abs(eigenvalue_coefficients[0])
    with np.errstate(divide="ignore"):
        radius = np.where(peak > 0, (scale / np.where(peak > 0, peak, 1.0)) ** (1.0 / order), np.inf)
    return float(radius.min()) if radius.size else float("inf")

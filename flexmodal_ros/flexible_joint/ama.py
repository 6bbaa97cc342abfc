"""Analytical modal analysis (AMA) of the closed-loop flexible-joint robot (thesis ch. 2).

Eigen-solution of the state matrix (2.13)-(2.14) → natural frequencies f = |λ|/2π (2.16),
damping ratios ζ = −Re λ/|λ| (2.17), complex mode shapes u = [I 0] y (2.18), for one
configuration (:func:`modal_analysis`) or many (:func:`modal_analysis_batch`, vectorized assembly
and batched ``eig``, split over worker threads: numpy's LAPACK calls release the GIL).

Results are :class:`~flexmodal_ros.modes.modeset.ModeSet` objects (conventions there: modes as conjugate
pairs sorted by frequency, unit-norm shapes, stable / marginally stable / unstable) with the
link configuration and the motor equilibrium added; mode shapes have 2n rows [q; q_m].
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import numpy as np
import pinocchio as pin

from flexmodal_ros.core.blas import single_thread_blas
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.linalg.lapack import repeated_eig
from flexmodal_ros.flexible_joint.linear_model import (assemble, closed_loop_state_matrix, configuration_terms,
                                     equilibrium_from_compensation, single_configuration_terms,
                                     single_state_matrix, state_template)
from flexmodal_ros.robot.model import create_data
from flexmodal_ros.modes import ModeSet, SpectrumModes, first_mode_set, mode_sets
from flexmodal_ros.core.validation import finite_array, finite_vector, shown_names

@dataclass(frozen=True, kw_only=True)
class ModalResult(ModeSet):
    """Modal parameters of one configuration: the :class:`~flexmodal_ros.modes.modeset.ModeSet` fields
    (mode shapes (2n, m), rows [q; q_m]) plus ``q`` the link configuration and
    ``motor_equilibrium`` q_m^d (2.3) [rad or m]."""

    q: np.ndarray
    motor_equilibrium: np.ndarray

    def to_dict(self, joint_names: Sequence[str] | None = None) -> dict:
        """JSON-ready dict (keys of the CLI ``--json`` output and of ModalParameters.msg)."""
        out = {} if joint_names is None else {"joint_names": list(joint_names)}
        out.update({"positions": self.q.tolist(), "motor_equilibrium": self.motor_equilibrium.tolist()})
        out.update(super().to_dict())
        return out


def check_configurations(model, qs, field="q") -> np.ndarray:
    """Configurations as a finite (m, n) array; a single (n,) vector gives m = 1."""
    arr = finite_array(qs, field)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != model.n:
        got = arr.shape[-1] if arr.ndim == 2 else f"shape {arr.shape}"
        raise InputError(f"{field}: expected {model.n} values per configuration "
                         f"({', '.join(model.joint_names)}), got {got}")
    if arr.shape[0] == 0:
        raise InputError(f"{field}: no configurations given")
    return arr


LIMIT_TOLERANCE = 1e-9   # URDF limits are printed rounded [rad or m]


def limit_warnings(model, qs, field="q", max_listed=5) -> list[str]:
    """Warnings for configurations ``qs`` (n,) or (m, n) outside the URDF position limits (the model
    is still evaluated there: the warning says the result is for a pose the robot cannot take).
    One line per offending configuration, at most ``max_listed`` lines plus a count."""
    if isinstance(qs, np.ndarray) and qs.shape == (model.n,) and _inside_limits(model, qs.tolist()):
        return []                              # the usual single configuration, without NumPy calls
    q = np.atleast_2d(np.asarray(qs, float))
    low = q < model.position_lower - LIMIT_TOLERANCE
    high = q > model.position_upper + LIMIT_TOLERANCE
    outside = low | high
    if not outside.any():
        return []
    rows = np.flatnonzero(outside.any(axis=1))
    out = []
    for i in rows[:max_listed]:
        where = field if q.shape[0] == 1 else f"{field}[{i}]"
        joints = ", ".join(f"{model.joint_names[j]} = {q[i, j]:.6g} outside [{model.position_lower[j]:.6g}, "
                           f"{model.position_upper[j]:.6g}]" for j in np.flatnonzero(low[i] | high[i]))
        out.append(f"{where}: {joints} (URDF position limits)")
    if rows.size > max_listed:
        out.append(f"{field}: {rows.size - max_listed} more configurations outside the URDF position limits")
    return out


def _inside_limits(model, q: list) -> bool:
    """True if every value of ``q`` (n floats) is within the URDF position limits (LIMIT_TOLERANCE)."""
    lower, upper = model.position_limits
    return all(lo - LIMIT_TOLERANCE <= v <= hi + LIMIT_TOLERANCE for v, lo, hi in zip(q, lower, upper))


def configuration_from_names(model, joint_names: Sequence[str], values, field="positions"):
    """Reorder per-joint ``values`` given for ``joint_names`` into URDF order (n,).

    Empty ``joint_names`` means the values are already in URDF order (all joints).
    """
    values = finite_vector(values, None, field)
    if not joint_names:
        return finite_vector(values, model.n, field)
    names = list(joint_names)
    unknown = sorted(set(names) - set(model.joint_names))
    if unknown:
        raise InputError(f"joint_names: unknown joint(s) {shown_names(unknown)}; robot has "
                         f"{', '.join(model.joint_names)}")
    if len(set(names)) != len(names) or len(names) != model.n:
        raise InputError(f"joint_names: need each of the {model.n} joints exactly once, got {names}")
    if values.size != model.n:
        raise InputError(f"{field}: expected {model.n} values (one per joint name), got {values.size}")
    return values[[names.index(j) for j in model.joint_names]]


def linearized_batch(model, data, qs: np.ndarray):
    """Stacks (M̄, D̄, K̄) (m, 2n, 2n) (2.9)-(2.11) and q_m^d (m, n) (2.3) for ``qs`` (m, n)."""
    M, KG, comp = configuration_terms(model, data, qs)
    mats = assemble(M, KG, model.k, model.W, model.d_f, model.d_fm, model.B, model.kp, model.kd)
    return mats, equilibrium_from_compensation(model, qs, comp)


def modal_spectra(model, data, qs: np.ndarray, shapes: bool = True) -> tuple[SpectrumModes, np.ndarray]:
    """The AMA of configurations ``qs`` (m, n) as padded arrays, without result objects: the
    :class:`~flexmodal_ros.modes.modeset.SpectrumModes` (mode shapes with 2n rows [q; q_m], or none) and
    g − Jᵀτ_ext (m, n) for the motor equilibrium. One thread, one kernel call (GIL released)."""
    eig = repeated_eig(4 * model.n, shapes)
    if eig.assembles:         # the C kernel builds A from M⁻¹ and K_G
        Minv, KG, comp = configuration_terms(model, data, qs, inverse=True)
        template = state_template(model)
        spectra = eig.modes_many(np.empty((len(qs), 4 * model.n, 4 * model.n)), 2 * model.n,
                                 assembly=(template.A, template.rhs, Minv, KG))
    else:
        M, KG, comp = configuration_terms(model, data, qs)
        A = closed_loop_state_matrix(model, M, KG)
        spectra = eig.modes_many(np.ascontiguousarray(A.transpose(0, 2, 1)), 2 * model.n)
    return spectra, comp


class ModalArrays(NamedTuple):
    """Eigenvalue-only AMA of m configurations as arrays (no per-configuration objects):
    ``num_modes`` (m,); ``frequencies_hz`` [Hz], ``damping_ratios`` (fractions) and
    ``eigenvalues`` [rad/s] (m, h): configuration i's modes in its first num_modes[i] columns,
    sorted by frequency as in :class:`ModalResult`, NaN after them (h = the largest count);
    ``stability`` (m,) labels as ``ModalResult.stability``."""
    num_modes: np.ndarray
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    eigenvalues: np.ndarray
    stability: list

    @classmethod
    def joined(cls, parts, width: int) -> "ModalArrays":
        """``parts`` (ModalArrays of consecutive configurations) as one, ``width`` columns (at
        least every part's)."""
        def stacked(name, dtype):
            out = np.full((sum(len(p.num_modes) for p in parts), width), np.nan, dtype)
            row = 0
            for p in parts:
                values = getattr(p, name)
                out[row:row + len(values), :values.shape[1]] = values
                row += len(values)
            return out
        return cls(np.concatenate([np.zeros(0, int)] + [p.num_modes for p in parts]),
                   stacked("frequencies_hz", float), stacked("damping_ratios", float), stacked("eigenvalues", complex),
                   [label for p in parts for label in p.stability])


@single_thread_blas
def modal_analysis_arrays(model, qs, chunk_size: int = 256) -> ModalArrays:
    """The eigenvalue-only :func:`modal_analysis_batch` of configurations ``qs`` (m, n) on one
    thread, returned as :class:`ModalArrays` (what a map or a sweep stores): the same f, ζ,
    eigenvalues and stability, without building m result objects. Chunks of ``chunk_size``
    configurations, one kernel call each."""
    qs = check_configurations(model, qs, "configurations")
    if chunk_size < 1:
        raise InputError(f"chunk_size: must be >= 1, got {chunk_size}")
    data = create_data(model)
    parts = [modal_spectra(model, data, qs[i:i + chunk_size], shapes=False)[0]
             for i in range(0, len(qs), chunk_size)]
    counts = np.concatenate([p.counts for p in parts])
    width = int(counts.max(initial=0))
    freq, zeta, lam = (np.concatenate(arrays) for arrays in zip(*(p.padded(width) for p in parts)))
    return ModalArrays(counts, freq, zeta, lam, [label for p in parts for label in p.labels()])


def _analyse_chunk(model, data, qs: np.ndarray, shapes: bool = True) -> list[ModalResult]:
    spectra, comp = modal_spectra(model, data, qs, shapes)
    return mode_sets(spectra, result_type=ModalResult,
                     fields={"q": qs.copy(), "motor_equilibrium": equilibrium_from_compensation(model, qs, comp)})


def modal_analysis(model, q, data=None, shapes: bool = True) -> ModalResult:
    """Modal parameters of the closed loop linearized about configuration ``q`` (n,), steps 1-5
    of thesis §2.3: M, K_G → M̄, D̄, K̄ (2.9)-(2.12) → A (2.14) → eig → f, ζ, u (2.16)-(2.18).

    Gains, tool and wrench are those of ``model`` (per call: :func:`flexmodal_ros.robot.model.with_overrides`).
    ``shapes=False`` skips the eigenvectors (frequencies, damping and stability only; the mode
    shapes then have 0 rows), about twice as fast.
    """
    q = _one_configuration(model, q)
    data = data if data is not None else create_data(model)
    KG, comp = single_configuration_terms(model, data, q)
    eig = repeated_eig(4 * model.n, shapes)
    Minv = pin.computeMinverse(model.pin, data, q)
    if eig.assembles:
        template = state_template(model)
        spectra = eig.modes(2 * model.n, assembly=(template.A, template.rhs, Minv, KG))
    else:
        single_state_matrix(model, Minv, KG, out=eig.a)
        spectra = eig.modes(2 * model.n)
    return first_mode_set(spectra, result_type=ModalResult, q=q,
                          motor_equilibrium=equilibrium_from_compensation(model, q, comp))


def plain_configuration(model, values) -> np.ndarray | None:
    """``values`` as a float vector (a private copy) if it already is a finite one of length n,
    else None: the cheap check of the usual input, the caller's validating path naming the problem
    otherwise (a sum of squares that overflows also lands there)."""
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError):
        return None
    return arr if arr.shape == (model.n,) and math.isfinite(arr @ arr) else None


def _one_configuration(model, q) -> np.ndarray:
    """``q`` as a finite float vector of length n (a private copy); errors as
    :func:`check_configurations`."""
    arr = plain_configuration(model, q)
    return arr if arr is not None else check_configurations(model, finite_vector(q, None, "q"))[0]


def default_workers() -> int:
    """Worker threads for batches: the CPUs available to this process (at most 2 by default)."""
    return max(1, min(2, len(os.sched_getaffinity(0))))


@single_thread_blas     # worker threads each run LAPACK; OpenBLAS's own threads would serialize them
def modal_analysis_batch(model, qs, workers: int | None = None, chunk_size: int = 256,
                         progress: Callable[[int], None] | None = None,
                         shapes: bool = True) -> list[ModalResult]:
    """:func:`modal_analysis` for configurations ``qs`` (m, n), results in input order.

    Configurations are processed in chunks of at most ``chunk_size``, as many per worker
    (vectorized assembly, one batched ``eig`` per chunk) by ``workers`` threads (default
    :func:`default_workers`), each with its own model data. ``progress(k)`` is called after each chunk with the number of configurations done.
    """
    qs = check_configurations(model, qs, "configurations")
    if chunk_size < 1:
        raise InputError(f"chunk_size: must be >= 1, got {chunk_size}")
    workers = min(workers or default_workers(), len(qs))
    count = -(-len(qs) // chunk_size)
    chunks = np.array_split(qs, -(-count // workers) * workers)     # at most chunk_size each, balanced
    if workers == 1:
        data = create_data(model)
        results = []
        for c in chunks:
            results.extend(_analyse_chunk(model, data, c, shapes))
            if progress:
                progress(len(c))
        return results
    datas = [create_data(model) for _ in range(workers)]
    slots = [chunks[w::workers] for w in range(workers)]

    def run(w):
        out = []
        for c in slots[w]:
            out.append(_analyse_chunk(model, datas[w], c, shapes))
            if progress:
                progress(len(c))
        return out

    with ThreadPoolExecutor(workers) as pool:
        per_worker = list(pool.map(run, range(workers)))
    ordered = [per_worker[i % workers][i // workers] for i in range(len(chunks))]
    return [r for chunk in ordered for r in chunk]

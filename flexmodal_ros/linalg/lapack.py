"""Dense eigensolvers called through LAPACK directly: optimal workspace, only the vectors asked for.

Only documented interfaces: SciPy's ``scipy.linalg.lapack`` (f2py wrappers) and, for the many
small problems of the modal analysis, the extension :mod:`flexmodal_ros.linalg.lapack_kernel`
compiled at install time against ``scipy.linalg.cython_lapack`` (``lapack_kernel.pyx``,
``lapack_batch.c``). Whatever LAPACK SciPy was built with (pip wheel, distribution package,
conda) is the one used; nothing is looked up in another package's files, nothing is compiled at
run time.

* :func:`generalized_eig` — QZ of a real pencil (A, E) with homogeneous eigenvalues (α, β):
  ``dggev`` (unblocked Hessenberg-triangular reduction ``dgghrd`` + ``dhgeqz``) with a queried
  optimal workspace (SciPy's default is the minimal one). LAPACK's blocked ``dggev3``
  (``dgghd3`` + multishift QZ) would be faster on large pencils but is in neither of SciPy's
  interfaces (``scipy.linalg.lapack``, ``scipy.linalg.cython_lapack``; SciPy 1.11 to 1.17); its
  cost on the constrained pendulum is measured in ``docs/linalg.md``.
* :func:`standard_eig` — ``dgeev`` (Hessenberg QR) with an optimal workspace (SciPy's low-level
  default is the minimal one, i.e. the unblocked Hessenberg reduction). ``scipy.linalg.eig`` does
  the same call but converts every vector to complex and copies the input; the callers here keep
  the real layout and make complex only the rows and columns they return.
* :class:`RepeatedEig` — ``dgeev`` for many small problems of one size (the single-configuration
  AMA): buffers, workspace and call arguments made once. Why by hand: ``numpy.linalg.eig`` checks
  its input and converts every vector to complex on each call, a noticeable part of the cost of a
  28 × 28 matrix. :meth:`RepeatedEig.modes` and :meth:`RepeatedEig.modes_many` run ``dgeev`` and
  the mode extraction (:func:`flexmodal_ros.modes.modeset.spectrum_modes`, written in C in
  ``lapack_batch.c``) of one matrix or a whole batch in one call of the compiled loop, which
  releases the GIL for the whole batch (worker threads do not wait for each other;
  ``benchmarks/bench_modal.py`` prints the batch figures). Without the extension (not built, or
  ``FLEXMODAL_NO_LAPACK_EXTENSION=1``): SciPy's ``dgeev`` wrapper and NumPy, the same results,
  slower, with one :class:`~flexmodal_ros.core.fallbacks.FallbackWarning` saying so
  (``docs/linalg.md``: measured costs).

Both return LAPACK's real layout (complex pairs as two real columns); :func:`complex_vectors`
builds complex vectors for the columns the caller keeps.
"""
from __future__ import annotations

import functools
import os
import threading

import numpy as np

from ..core.fallbacks import warn_fallback
from ..modes import STABILITY_RTOL, SpectrumModes, spectrum_modes

DISABLE_VARIABLE = "FLEXMODAL_NO_LAPACK_EXTENSION"   # set (not "0"): the fallback, as without the extension
FALLBACK_COST = ("about 2-2.5x the time of the extension per configuration (kuka_lwr4 single AMA, "
                 "benchmarks/bench_modal.py), the batch without GIL release")


@functools.cache
def extension_status():
    """(the compiled module :mod:`flexmodal_ros.linalg.lapack_kernel` or None, why it is not used
    ("" when it is)). No warning (``flexmodal doctor`` reports it)."""
    switch = os.environ.get(DISABLE_VARIABLE, "")
    if switch not in ("", "0"):
        return None, f"disabled by {DISABLE_VARIABLE}={switch}"
    try:
        from . import lapack_kernel  # deferred: the compiled extension (imports scipy.linalg, ~20 MiB)
    except ImportError as exc:
        return None, (f"flexmodal_ros.linalg.lapack_kernel is not built ({exc}); it is compiled at install "
                      f"time (make setup, pip install --no-build-isolation, colcon build) with Cython and "
                      f"SciPy present")
    return lapack_kernel, ""


def lapack_extension():
    """The compiled module, or None after one warning that says why and what runs instead."""
    module, why = extension_status()
    if module is None:
        warn_fallback("flexmodal_ros.linalg.lapack", "the compiled LAPACK extension", why,
                      "the modal analysis runs SciPy's dgeev wrapper and the NumPy mode extraction (same "
                      "results)", FALLBACK_COST, stacklevel=3)
    return module


def generalized_eig(A, E, vectors=True):
    """QZ of the real pencil A x = s E x (n × n each, not modified) by LAPACK ``dggev``.

    Returns (alphar, alphai, beta, vr, info): s = (alphar + i alphai)/beta (β = 0: infinite);
    ``vr`` (n, n) the right eigenvectors in LAPACK's real layout, or None when ``vectors`` is
    False; ``info`` the LAPACK code (0 = success).
    """
    from scipy.linalg import lapack  # deferred: scipy.linalg (~20 MiB), not needed by every importer

    lwork = int(lapack.dggev(A, E, compute_vl=0, compute_vr=int(vectors), lwork=-1)[5][0])
    alphar, alphai, beta, _, vr, _, info = lapack.dggev(
        A, E, compute_vl=0, compute_vr=int(vectors), lwork=max(lwork, 1))
    return alphar, alphai, beta, (vr if vectors else None), int(info)


def standard_eig(S, vectors=True, overwrite=False):
    """Eigenvalues wr + i wi and right vectors (real layout, or None) of a real square S by
    ``dgeev`` with optimal workspace; returns (wr, wi, vr, info)."""
    from scipy.linalg import lapack  # deferred: scipy.linalg (~20 MiB), not needed by every importer

    lwork = _dgeev_lwork(S.shape[0], vectors)
    wr, wi, _, vr, info = lapack.dgeev(S, compute_vl=0, compute_vr=int(vectors), lwork=lwork,
                                       overwrite_a=int(overwrite))
    return wr, wi, (vr if vectors else None), int(info)


@functools.lru_cache(maxsize=64)
def _dgeev_lwork(n, vectors):
    from scipy.linalg import lapack  # deferred: scipy.linalg (~20 MiB), not needed by every importer

    work, info = lapack.dgeev_lwork(n, compute_vl=0, compute_vr=int(vectors))
    return max(int(work), 1, 4 * n)


def complex_vectors(vr, alphai, columns):
    """Complex eigenvectors of the given ``columns`` from LAPACK's real layout: a pair j, j + 1
    (alphai[j] > 0) is vr[:, j] ± i vr[:, j + 1]; real eigenvalues have real vectors."""
    columns = np.asarray(columns, int)
    out = vr[:, columns].astype(complex)
    first = alphai[columns] > 0
    second = alphai[columns] < 0
    out[:, first] += 1j * vr[:, columns[first] + 1]
    out[:, second] = vr[:, columns[second] - 1] - 1j * vr[:, columns[second]]
    return out


def _kernel_outputs(count, n, rows):
    """Fresh kernel outputs for ``count`` n × n matrices keeping ``rows`` shape rows, as the
    :class:`~flexmodal_ros.modes.modeset.SpectrumModes` the kernel fills."""
    h = n // 2
    return SpectrumModes(np.empty((count, n)), np.empty((count, n)), np.empty(count, np.int64),
                         np.empty((count, h)), np.empty((count, h)), np.empty((count, h), complex),
                         np.empty((count, rows, h), complex), np.empty((count, n)), np.empty(count, np.int64),
                         np.empty(count, bool))


def _checked_assembly(assembly, count, n):
    q = n // 4
    expected = (((n, n), "F_CONTIGUOUS"), ((q, 3 * q), "C_CONTIGUOUS"), ((count, q, q), "C_CONTIGUOUS"),
                ((count, q, q), "C_CONTIGUOUS"))
    for name, x, (shape, layout) in zip(("template", "rhs", "minv", "kg"), assembly, expected):
        if x.shape != shape or x.dtype != np.float64 or not x.flags[layout]:
            raise ValueError(f"modes_many: assembly {name} must be a {layout.split('_')[0]}-contiguous float64 "
                             f"{shape} array, got {x.shape}")
    return assembly


class RepeatedEig:
    """``dgeev`` of n × n real matrices written into :attr:`a` (column-major) one after another.

    :meth:`solve` overwrites :attr:`a` and leaves the eigenvalues in :attr:`wr` + i :attr:`wi` and,
    with ``vectors``, the right vectors in :attr:`vr` (LAPACK's real layout, see
    :func:`complex_vectors`); the buffers are reused by the next call (copy what you keep). Not
    thread-safe: one instance per thread. ``compiled``: None (default) the compiled extension when
    it is available, else the fallback (one warning); False the fallback (SciPy's ``dgeev`` wrapper
    and NumPy); True the extension or RuntimeError saying why it is unavailable.
    """

    def __init__(self, n: int, vectors: bool = True, compiled: bool | None = None):
        self.a = np.zeros((n, n), order="F")
        self.wr, self.wi = np.empty(n), np.empty(n)
        self.vr = np.empty((n, n), order="F") if vectors else None
        if compiled and extension_status()[0] is None:
            raise RuntimeError(f"the compiled LAPACK extension is unavailable: {extension_status()[1]}")
        self._ext = None if compiled is False else lapack_extension()
        if self._ext is None:
            return
        self._work = np.empty(self._ext.dgeev_lwork(n, vectors))
        self._solve = self._ext.EigCall(self.a, self.wr, self.wi, self.vr, self._work, vectors)
        self._single = {}           # (rows, rtol, template, rhs) -> outputs and prepared call of modes()

    @property
    def assembles(self) -> bool:
        """True when :meth:`modes` / :meth:`modes_many` run in the compiled loop and so accept ``assembly``."""
        return self._ext is not None and self.a.shape[0] <= self._ext.MAX_ORDER

    def modes(self, rows: int, rtol: float = STABILITY_RTOL, assembly=None) -> SpectrumModes:
        """Eigen-decomposition of :attr:`a` and its modes (:func:`flexmodal_ros.modes.modeset.spectrum_modes`
        with shapes from the first ``rows`` vector rows), a batch of one. ``assembly`` (only when
        :attr:`assembles`): (template, rhs, M⁻¹, K_G), the matrix is then the flexible-joint state
        matrix (2.14) built from them in the kernel (:meth:`modes_many`), not :attr:`a`. The arrays
        are this instance's buffers, reused by the next call (:func:`flexmodal_ros.modes.modeset.first_mode_set`
        copies them). Raises numpy.linalg.LinAlgError if LAPACK fails."""
        if not self.assembles:
            info = self.solve()
            if info:
                raise np.linalg.LinAlgError(f"eigenvalues did not converge (LAPACK dgeev info {info})")
            vt = None if self.vr is None else self.vr.T[None]
            return spectrum_modes(self.wr[None], self.wi[None], vt, slice(0, rows), rtol)
        template, rhs, minv, kg = assembly if assembly is not None else (None, None, None, None)
        key = (rows, rtol, id(template), id(rhs))     # the cache entry keeps both alive: ids stay unique
        cached = self._single.get(key)
        if cached is None:
            q = self.a.shape[0] // 4
            inputs = None if template is None else (template, rhs, np.empty((1, q, q)), np.empty((1, q, q)))
            out, call = self._kernel_call(self.a, rows, rtol, inputs)
            cached = self._single[key] = (out, call, inputs)
        out, call, inputs = cached
        if inputs is not None:
            inputs[2][0], inputs[3][0] = minv, kg
        if call() != -1:
            raise np.linalg.LinAlgError(f"eigenvalues did not converge (LAPACK dgeev info {call.info})")
        return out

    def modes_many(self, at: np.ndarray, rows: int, rtol: float = STABILITY_RTOL, assembly=None) -> SpectrumModes:
        """Eigen-decompositions and modes of a batch (``at`` as :meth:`solve_many`, overwritten),
        shapes from the first ``rows`` vector rows: :func:`flexmodal_ros.modes.modeset.spectrum_modes` in
        one kernel call (fresh arrays). ``assembly`` (only when :attr:`assembles`): (template
        (n, n) column-major, rhs (q, 3q), M⁻¹ (B, q, q), K_G (B, q, q), C-contiguous float64;
        q = n/4): entry b is first assembled in ``at`` as the flexible-joint state matrix (2.14),
        i.e. the template with the link rows −M⁻¹[b] (rhs + [K_G[b] 0 0])
        (:func:`flexmodal_ros.flexible_joint.linear_model.single_state_matrix`). Raises numpy.linalg.LinAlgError if
        LAPACK fails on an entry."""
        if not self.assembles:
            return spectrum_modes(*self.solve_many(at), slice(0, rows), rtol)
        count, n = self._checked_batch(at)
        out, call = self._kernel_call(at, rows, rtol,
                                      None if assembly is None else _checked_assembly(assembly, count, n))
        failed = call()
        if failed != -1:
            raise np.linalg.LinAlgError(f"eigenvalues of batch entry {failed} did not converge "
                                        f"(LAPACK dgeev info {call.info})")
        return out

    def _kernel_call(self, at, rows, rtol, assembly):
        """(fresh outputs, the prepared :class:`~flexmodal_ros.linalg.lapack_kernel.EigCall`) for
        the matrices in ``at`` (one n × n, or a (count, n, n) batch)."""
        n = self.a.shape[0]
        vectors = self.vr is not None
        count = at.shape[0] if at.ndim == 3 else 1
        out = _kernel_outputs(count, n, rows if vectors else 0)
        return out, self._ext.EigCall(at, out.wr, out.wi, self.vr, self._work, vectors, rows, rtol, out, assembly)

    def _checked_batch(self, at):
        count, n = at.shape[0], self.a.shape[0]
        if at.shape[1:] != (n, n) or not at.flags.c_contiguous or at.dtype != np.float64:
            raise ValueError(f"solve_many: expected a C-contiguous float64 ({count}, {n}, {n}) array")
        return count, n

    def solve_many(self, at: np.ndarray):
        """Eigen-decompositions of a batch: ``at`` (B, n, n) C-contiguous holding each matrix
        transposed (i.e. column-major; overwritten). Returns (wr, wi, vt) with wr, wi (B, n) and
        ``vt`` (B, n, n), ``vt[b, j]`` the j-th real vector column of matrix b (None without
        vectors). Raises numpy.linalg.LinAlgError if LAPACK fails on an entry."""
        count, n = self._checked_batch(at)
        wr, wi = np.empty((count, n)), np.empty((count, n))
        vt = np.empty((count, n, n)) if self.vr is not None else None
        if self._ext is None:
            w, v = np.linalg.eig(at.transpose(0, 2, 1)) if vt is not None else (
                np.linalg.eigvals(at.transpose(0, 2, 1)), None)
            wr[:], wi[:] = w.real, w.imag
            if vt is not None:
                vt[:] = np.where(wi[:, None, :] < 0, -v.imag, v.real).transpose(0, 2, 1)
            return wr, wi, vt
        call = self._ext.EigCall(at, wr, wi, vt, self._work, vt is not None)
        failed = call()
        if failed != -1:
            raise np.linalg.LinAlgError(f"eigenvalues of batch entry {failed} did not converge "
                                        f"(LAPACK dgeev info {call.info})")
        return wr, wi, vt

    def solve(self) -> int:
        """Eigen-decomposition of :attr:`a`; returns LAPACK's info (0 = success)."""
        if self._ext is None:
            wr, wi, vr, info = standard_eig(self.a, self.vr is not None)
            self.wr[:], self.wi[:] = wr, wi
            if vr is not None:
                self.vr[:] = vr
            return info
        self._solve()
        return int(self._solve.info)


_PER_THREAD = threading.local()


def repeated_eig(n: int, vectors: bool = True) -> RepeatedEig:
    """This thread's :class:`RepeatedEig` for n × n problems (made on first use)."""
    cache = _PER_THREAD.__dict__
    solver = cache.get((n, vectors))
    if solver is None:
        solver = cache[(n, vectors)] = RepeatedEig(n, vectors)
    return solver

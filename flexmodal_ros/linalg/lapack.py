"""Dense eigensolvers called through LAPACK directly: optimal workspace, only the vectors asked for.

* :func:`generalized_eig` — QZ of a real pencil (A, E) with homogeneous eigenvalues (α, β). From
  order ``GGEV3_MIN_ORDER`` on: LAPACK ``dggev3`` (blocked Hessenberg-triangular reduction
  ``dgghd3`` and, since LAPACK 3.10, the multishift QZ with aggressive early deflation
  ``dlaqz0``) from the OpenBLAS that SciPy ships. SciPy wraps only ``dggev`` (unblocked
  ``dgghrd`` + ``dhgeqz``), hence the ctypes binding here; measured on the 1234-order RCS pencil
  of the flexible pendulum (n_p = 100), one thread: ``dggev3`` 4.2 s, ``dggev`` 16.2 s,
  ``scipy.linalg.eig`` 13.9 s. Smaller pencils, or when that library is not found: SciPy's
  ``dggev`` wrapper with a queried optimal workspace (its default is the minimal one).
* :func:`standard_eig` — ``dgeev`` (Hessenberg QR) with an optimal workspace (SciPy's low-level
  default is the minimal one, i.e. the unblocked Hessenberg reduction). ``scipy.linalg.eig`` does
  the same call but converts every vector to complex and copies the input; the callers here keep
  the real layout and make complex only the rows and columns they return.
* :class:`RepeatedEig` — ``dgeev`` for many small problems of one size (the single-configuration
  AMA): buffers, workspace and call arguments made once, ``LAPACKE_dgeev_work`` of the OpenBLAS
  that NumPy ships called through ctypes. Why by hand: ``numpy.linalg.eig`` spends 10-15 µs per
  call outside LAPACK (checks, complex conversion of every vector) on a 28 × 28 matrix whose
  ``dgeev`` takes ~80-120 µs, and SciPy's wrappers would add 28 MiB to the modal server (whose
  budget is 130 MiB). Where that library is not found it falls back to SciPy's ``dgeev``.
  :meth:`RepeatedEig.modes` and :meth:`RepeatedEig.modes_many` go one step further: ``dgeev`` and
  the mode extraction (:func:`flexmodal_ros.modes.modeset.spectrum_modes`) of one matrix or a whole batch
  in one call of the C loop ``lapack_batch.c`` (compiled once per machine,
  :func:`flexmodal_ros.core.ccompile.kernel_library`; without a C compiler: ``dgeev`` then NumPy). It
  releases the GIL for the whole batch, so worker threads do not wait for each other (with one
  ctypes call per matrix they did; ``benchmarks/bench_modal.py`` prints the batch figures), and
  extracts the modes of a spectrum in ~1 µs instead of 15-35 µs of small NumPy operations.

Both return LAPACK's real layout (complex pairs as two real columns); :func:`complex_vectors`
builds complex vectors for the columns the caller keeps.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading
from pathlib import Path

import numpy as np

from ..core.ccompile import load_kernel
from ..modes import STABILITY_RTOL, SpectrumModes, spectrum_modes

_COL_MAJOR = 102
KERNEL_MAX_ORDER = 4096     # MAX_ORDER of lapack_batch.c (its per-spectrum scratch arrays)
GGEV3_MIN_ORDER = 128   # below this order dggev is faster (measured: 44: 1.0 vs 1.2 ms, 86: 5.7 vs 6.9 ms;
                        # 250: 0.107 vs 0.050 s; 400: 0.28 vs 0.16 s, random pencils, one thread)


@functools.cache
def _dggev3():
    """LAPACKE_dggev3 of SciPy's bundled OpenBLAS (LP64), or None if unavailable."""
    try:
        from threadpoolctl import threadpool_info

        import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS so threadpoolctl lists it)
        paths = [i["filepath"] for i in threadpool_info()
                 if i.get("internal_api") == "openblas" and "scipy_openblas64" not in i["filepath"]
                 and "scipy" in i["filepath"]]
        for path in paths:
            lib = ctypes.CDLL(path)
            fn = getattr(lib, "scipy_LAPACKE_dggev3", None)
            if fn is None:
                continue
            ptr = np.ctypeslib.ndpointer(dtype=np.float64, flags="F_CONTIGUOUS")
            i, c = ctypes.c_int, ctypes.c_char
            fn.argtypes = [i, c, c, i, ptr, i, ptr, i, ptr, ptr, ptr, ptr, i, ptr, i]
            fn.restype = i
            return fn
    except (ImportError, OSError, AttributeError):
        pass
    return None


def generalized_eig(A, E, vectors=True):
    """QZ of the real pencil A x = s E x (n × n each, not modified).

    Returns (alphar, alphai, beta, vr, info): s = (alphar + i alphai)/beta (β = 0: infinite);
    ``vr`` (n, n) the right eigenvectors in LAPACK's real layout, or None when ``vectors`` is
    False; ``info`` the LAPACK code (0 = success).
    """
    from scipy.linalg import lapack

    n = A.shape[0]
    fn = _dggev3() if n >= GGEV3_MIN_ORDER else None
    if fn is not None:
        a, b = np.array(A, dtype=float, order="F"), np.array(E, dtype=float, order="F")
        alphar, alphai, beta = np.empty(n), np.empty(n), np.empty(n)
        dummy = np.empty((1, 1), order="F")
        vr = np.empty((n, n), order="F") if vectors else dummy
        info = fn(_COL_MAJOR, b"N", b"V" if vectors else b"N", n, a, n, b, n,
                  alphar, alphai, beta, dummy, 1, vr, n if vectors else 1)
        return alphar, alphai, beta, (vr if vectors else None), int(info)
    lwork = int(lapack.dggev(A, E, compute_vl=0, compute_vr=int(vectors), lwork=-1)[5][0])
    alphar, alphai, beta, _, vr, _, info = lapack.dggev(
        A, E, compute_vl=0, compute_vr=int(vectors), lwork=max(lwork, 1))
    return alphar, alphai, beta, (vr if vectors else None), int(info)


def standard_eig(S, vectors=True, overwrite=False):
    """Eigenvalues wr + i wi and right vectors (real layout, or None) of a real square S by
    ``dgeev`` with optimal workspace; returns (wr, wi, vr, info)."""
    from scipy.linalg import lapack

    lwork = _dgeev_lwork(S.shape[0], vectors)
    wr, wi, _, vr, info = lapack.dgeev(S, compute_vl=0, compute_vr=int(vectors), lwork=lwork,
                                       overwrite_a=int(overwrite))
    return wr, wi, (vr if vectors else None), int(info)


@functools.lru_cache(maxsize=64)
def _dgeev_lwork(n, vectors):
    from scipy.linalg import lapack

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


@functools.cache
def _numpy_dgeev_work():
    """``LAPACKE_dgeev_work`` (ILP64) of the OpenBLAS bundled with NumPy's wheel, or None."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))):
        try:
            fn = ctypes.CDLL(path).scipy_LAPACKE_dgeev_work64_
        except (OSError, AttributeError):
            continue
        i64, ptr, char = ctypes.c_int64, ctypes.c_void_p, ctypes.c_char
        fn.argtypes = [ctypes.c_int, char, char, i64, ptr, i64, ptr, ptr, ptr, i64, ptr, i64, ptr, i64]
        fn.restype = i64
        return fn
    return None


@functools.cache
def eig_modes_kernel():
    """``flexmodal_eig_modes`` of ``lapack_batch.c`` (compiled on first use), or None when
    NumPy's OpenBLAS is not found or the kernel cannot be built (no C compiler, cache not writable)."""
    if _numpy_dgeev_work() is None:
        return None
    return load_kernel(Path(__file__).with_name("lapack_batch.c"), "flexmodal_eig_modes", [ctypes.c_void_p],
                       ctypes.c_int64, "flexmodal_ros.linalg.lapack",
                       "the modal analysis uses dgeev + NumPy instead (same results, slower)")


class _KernelCall(ctypes.Structure):
    """``struct eig_modes_call`` of ``lapack_batch.c`` (field for field)."""
    _fields_ = [(name, kind) for names, kind in (
        ("dgeev_work", ctypes.c_void_p), ("vectors count n", ctypes.c_int64),
        ("a wr wi vr work", ctypes.c_void_p), ("lwork rows", ctypes.c_int64), ("rtol", ctypes.c_double),
        ("modes freq zeta lam shapes real nreal near tpl rhs minv kg", ctypes.c_void_p),
        ("info", ctypes.c_int64)) for name in names.split()]


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
    thread-safe: one instance per thread.
    """

    def __init__(self, n: int, vectors: bool = True):
        self.a = np.zeros((n, n), order="F")
        self.wr, self.wi = np.empty(n), np.empty(n)
        self.vr = np.empty((n, n), order="F") if vectors else None
        self._fn = _numpy_dgeev_work()
        if self._fn is None:
            return
        vr = self.vr if vectors else np.empty((1, 1))
        args = [_COL_MAJOR, b"N", b"V" if vectors else b"N", n, self.a.ctypes.data, n,
                self.wr.ctypes.data, self.wi.ctypes.data, vr.ctypes.data, 1, vr.ctypes.data,
                n if vectors else 1]
        query = np.empty(1)
        self._fn(*args, query.ctypes.data, -1)
        self._work = np.empty(max(int(query[0]), 4 * n, 1))
        self._args = (*args, self._work.ctypes.data, self._work.size)
        self._vr_buffer = vr        # the array behind the pointer in the arguments (dummy without vectors)
        self._address = ctypes.cast(self._fn, ctypes.c_void_p).value
        self._single = {}           # (rows, rtol, template) -> kernel outputs and arguments of modes()

    @property
    def assembles(self) -> bool:
        """True when :meth:`modes` / :meth:`modes_many` run in the C kernel and so accept ``assembly``."""
        return self._fn is not None and self.a.shape[0] <= KERNEL_MAX_ORDER and eig_modes_kernel() is not None

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
            out, call = self._kernel_call(1, self.a, rows, rtol, inputs)
            cached = self._single[key] = (out, call, ctypes.addressof(call), inputs)
        out, call, address, inputs = cached
        if inputs is not None:
            inputs[2][0], inputs[3][0] = minv, kg
        if eig_modes_kernel()(address) != -1:
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
        out, call = self._kernel_call(count, at, rows, rtol,
                                      None if assembly is None else _checked_assembly(assembly, count, n))
        failed = eig_modes_kernel()(ctypes.addressof(call))
        if failed != -1:
            raise np.linalg.LinAlgError(f"eigenvalues of batch entry {failed} did not converge "
                                        f"(LAPACK dgeev info {call.info})")
        return out

    def _kernel_call(self, count, at, rows, rtol, assembly):
        """(fresh outputs, the filled :class:`_KernelCall`) for ``count`` matrices in ``at``."""
        n = self.a.shape[0]
        vectors = self.vr is not None
        out = _kernel_outputs(count, n, rows if vectors else 0)
        pointers = [x.ctypes.data for x in (at, out.wr, out.wi, self._vr_buffer, self._work)]
        results = [x.ctypes.data for x in out[2:]]
        inputs = [0] * 4 if assembly is None else [x.ctypes.data for x in assembly]
        call = _KernelCall(self._address, int(vectors), count, n, *pointers, self._work.size, rows, rtol,
                           *results, *inputs, 0)
        return out, call

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
        if self._fn is None:
            w, v = np.linalg.eig(at.transpose(0, 2, 1)) if vt is not None else (
                np.linalg.eigvals(at.transpose(0, 2, 1)), None)
            wr[:], wi[:] = w.real, w.imag
            if vt is not None:
                vt[:] = np.where(wi[:, None, :] < 0, -v.imag, v.real).transpose(0, 2, 1)
            return wr, wi, vt
        head, tail = self._args[:4], self._args[12:]
        job, step = self._args[8:12], n * n * 8
        a0, r0, i0 = at.ctypes.data, wr.ctypes.data, wi.ctypes.data
        v0 = vt.ctypes.data if vt is not None else None
        for b in range(count):
            if vt is not None:
                job = (self._args[8], 1, v0 + b * step, n)
            info = self._fn(*head, a0 + b * step, n, r0 + b * n * 8, i0 + b * n * 8, *job, *tail)
            if info:
                raise np.linalg.LinAlgError(f"eigenvalues of batch entry {b} did not converge "
                                            f"(LAPACK dgeev info {info})")
        return wr, wi, vt

    def solve(self) -> int:
        """Eigen-decomposition of :attr:`a`; returns LAPACK's info (0 = success)."""
        if self._fn is None:
            wr, wi, vr, info = standard_eig(self.a, self.vr is not None)
            self.wr[:], self.wi[:] = wr, wi
            if vr is not None:
                self.vr[:] = vr
            return info
        return int(self._fn(*self._args))


_PER_THREAD = threading.local()


def repeated_eig(n: int, vectors: bool = True) -> RepeatedEig:
    """This thread's :class:`RepeatedEig` for n × n problems (made on first use)."""
    cache = _PER_THREAD.__dict__
    solver = cache.get((n, vectors))
    if solver is None:
        solver = cache[(n, vectors)] = RepeatedEig(n, vectors)
    return solver

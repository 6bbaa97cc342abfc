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

Both return LAPACK's real layout (complex pairs as two real columns); :func:`complex_vectors`
builds complex vectors for the columns the caller keeps.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import scipy.linalg.lapack as lapack

_COL_MAJOR = 102
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
    lwork = _dgeev_lwork(S.shape[0], vectors)
    wr, wi, _, vr, info = lapack.dgeev(S, compute_vl=0, compute_vr=int(vectors), lwork=lwork,
                                       overwrite_a=int(overwrite))
    return wr, wi, (vr if vectors else None), int(info)


@functools.lru_cache(maxsize=64)
def _dgeev_lwork(n, vectors):
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

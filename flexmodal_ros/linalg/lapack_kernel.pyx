# cython: language_level=3
"""Compiled half of :mod:`flexmodal_ros.linalg.lapack`: LAPACK ``dgeev`` and the mode extraction
of ``lapack_batch.c`` for a batch of real matrices in one call without the GIL.

Built at install time (setup.py ``ext_modules``: ``make setup``, ``pip install``, ``colcon build``)
against SciPy's documented Cython LAPACK interface ``scipy.linalg.cython_lapack`` (the LAPACK that
SciPy itself uses, whatever its build: pip wheel, distribution package, conda). Nothing is compiled
at run time. :mod:`flexmodal_ros.linalg.lapack` falls back to SciPy's ``scipy.linalg.lapack``
wrappers and NumPy when this module cannot be imported (and says so once).
"""
from libc.stdint cimport int64_t, uintptr_t
from scipy.linalg.cython_lapack cimport dgeev

import numpy as np


cdef extern from "lapack_batch.h" nogil:
    ctypedef void (*flexmodal_dgeev)(char *jobvl, char *jobvr, int *n, double *a, int *lda,
                                     double *wr, double *wi, double *vl, int *ldvl, double *vr,
                                     int *ldvr, double *work, int *lwork, int *info) noexcept nogil
    struct eig_modes_call:
        int64_t vectors, count, n
        double *a
        double *wr
        double *wi
        double *vr
        double *work
        int64_t lwork, rows
        double rtol
        int64_t *modes
        double *freq
        double *zeta
        double *lam
        double *shapes
        double *real
        int64_t *nreal
        unsigned char *near
        const double *tpl
        const double *rhs
        const double *minv
        const double *kg
        int64_t info
    int64_t flexmodal_eig_modes(eig_modes_call *c, flexmodal_dgeev solve)
    int64_t flexmodal_eig_only(eig_modes_call *c, flexmodal_dgeev solve)
    int FLEXMODAL_EIG_MAX_ORDER


MAX_ORDER = FLEXMODAL_EIG_MAX_ORDER     # largest order of eig_modes (its per-spectrum scratch arrays)


def dgeev_lwork(int n, bint vectors):
    """Optimal workspace length of ``dgeev`` (workspace query, lwork = -1) for order n."""
    cdef char jobvl = b"N"
    cdef char jobvr = b"V" if vectors else b"N"
    cdef int one = 1, query = -1, info = 0, lda = max(n, 1)
    cdef double unused = 0.0, size = 0.0
    dgeev(&jobvl, &jobvr, &n, &unused, &lda, &unused, &unused, &unused, &one, &unused,
          &lda if vectors else &one, &size, &query, &info)
    return max(int(size), 4 * n, 1)


cdef uintptr_t _address(object x, object dtype, Py_ssize_t size, str name, bint output=True) except? 0:
    """Address of the contiguous array ``x`` of ``dtype`` holding at least ``size`` elements
    (writeable when it is an ``output``)."""
    if not isinstance(x, np.ndarray) or x.dtype != dtype or x.size < size or not (
            x.flags.c_contiguous or x.flags.f_contiguous) or (output and not x.flags.writeable):
        raise ValueError(f"lapack_kernel: {name} must be a {'writeable ' if output else ''}contiguous "
                         f"{np.dtype(dtype).name} array of at least {size} elements")
    return <uintptr_t>x.__array_interface__["data"][0]


cdef class EigCall:
    """One prepared call: ``dgeev`` of ``count`` n × n matrices stored column-major in ``a``
    (overwritten), eigenvalues into ``wr``, ``wi`` (count, n), and either

    * ``out`` given (a :class:`~flexmodal_ros.modes.modeset.SpectrumModes` of fresh arrays): the
      modes of each spectrum (``lapack_batch.c``: ``spectrum_modes``), shapes from the first
      ``rows`` rows of the vectors (``vr`` an n × n scratch); with ``assembly`` (template, rhs,
      M⁻¹, K_G) matrix b is first built in ``a`` as the flexible-joint state matrix (2.14);
    * ``out`` None: the right vectors of entry b into ``vr`` (count, n, n) (or none).

    The arrays are referenced, not copied: the caller refills them between calls. Calling runs the
    whole batch without the GIL and returns -1, or the index of the entry LAPACK failed on
    (:attr:`info`), or -2 when n exceeds :data:`MAX_ORDER`."""
    cdef eig_modes_call c
    cdef bint with_modes
    cdef object keep

    def __cinit__(self, a, wr, wi, vr, work, bint vectors, int64_t rows=0, double rtol=0.0,
                  out=None, assembly=None):
        f64 = np.float64
        count, n = a.shape[0] if a.ndim == 3 else 1, a.shape[-1]
        self.keep = (a, wr, wi, vr, work, out, assembly)
        self.with_modes = out is not None
        self.c.vectors, self.c.count, self.c.n = vectors, count, n
        self.c.a = <double *>_address(a, f64, count * n * n, "a")
        self.c.wr = <double *>_address(wr, f64, count * n, "wr")
        self.c.wi = <double *>_address(wi, f64, count * n, "wi")
        self.c.vr = NULL
        if vectors:
            self.c.vr = <double *>_address(vr, f64, (1 if self.with_modes else count) * n * n, "vr")
        self.c.work = <double *>_address(work, f64, 1, "work")
        self.c.lwork = work.size
        self.c.rows, self.c.rtol, self.c.info = rows, rtol, 0
        self.c.tpl = self.c.rhs = self.c.minv = self.c.kg = NULL
        if not self.with_modes:
            return
        h, q = n // 2, n // 4
        self.c.modes = <int64_t *>_address(out.counts, np.int64, count, "modes")
        self.c.freq = <double *>_address(out.frequencies_hz, f64, count * h, "freq")
        self.c.zeta = <double *>_address(out.damping_ratios, f64, count * h, "zeta")
        self.c.lam = <double *>_address(out.eigenvalues, np.complex128, count * h, "lam")
        self.c.shapes = <double *>_address(out.mode_shapes, np.complex128, count * rows * h if vectors else 0,
                                           "shapes")
        self.c.real = <double *>_address(out.real, f64, count * n, "real")
        self.c.nreal = <int64_t *>_address(out.nreal, np.int64, count, "nreal")
        self.c.near = <unsigned char *>_address(out.near_axis, np.bool_, count, "near")
        if assembly is not None:
            tpl, rhs, minv, kg = assembly
            self.c.tpl = <const double *>_address(tpl, f64, n * n, "template", False)
            self.c.rhs = <const double *>_address(rhs, f64, q * 3 * q, "rhs", False)
            self.c.minv = <const double *>_address(minv, f64, count * q * q, "minv", False)
            self.c.kg = <const double *>_address(kg, f64, count * q * q, "kg", False)

    @property
    def info(self):
        """LAPACK's info of the entry the last call failed on (0 after a successful call)."""
        return self.c.info

    def __call__(self):
        cdef int64_t result
        with nogil:
            if self.with_modes:
                result = flexmodal_eig_modes(&self.c, <flexmodal_dgeev>dgeev)
            else:
                result = flexmodal_eig_only(&self.c, <flexmodal_dgeev>dgeev)
        return result

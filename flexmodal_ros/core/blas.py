"""One BLAS thread for work made of many small matrix operations.

OpenBLAS hands any call above a tiny size to its thread pool. On the small matrices of this package
(tens to a few hundred rows) the hand-off costs more than the arithmetic: on a loaded 2-core
machine small solves and factorizations were measured 10-80x slower with the default threads
(flexible-link roots, OMA least squares, polynomial eigenpairs). Work that is already parallel
(threads over configurations, processes over starts) gains nothing from BLAS threads either.
Limits are applied with threadpoolctl (the maintained way to control native thread pools at run
time) and restored on return, so callers of the library keep their own settings elsewhere.
"""
import functools

import scipy.linalg  # noqa: F401  SciPy's BLAS/LAPACK loaded before threadpoolctl inspects the libraries


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController  # deferred: threadpoolctl
    return ThreadpoolController()        # inspects the loaded libraries once (~ms), then reused


def single_blas_thread():
    """Context manager: BLAS limited to one thread inside the ``with`` block."""
    return _controller().limit(limits=1, user_api="blas")


def single_thread_blas(fn):
    """Decorator: ``fn`` runs inside :func:`single_blas_thread`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_blas_thread():
            return fn(*args, **kwargs)
    return wrapper

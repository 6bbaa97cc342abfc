"""Taylor coefficients E^(σ) = ∂^σE(x0)/σ! of analytically known functions, up to total degree t
(paper eqs. (19)-(20)).

The coefficients are exact (no finite differences): CasADi differentiates the symbolic expression
degree by degree. Degree d is obtained from degree d−1 with one Jacobian of all degree-(d−1)
coefficients, using E^(σ+e_j) = ∂_j E^(σ) / (σ_j + 1) with j the last non-zero position of
σ + e_j (:mod:`.multiindex`), so every coefficient is differentiated once. The result is one CasADi
function x0, frozen inputs → all coefficients, evaluated on CasADi's virtual machine.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from .multiindex import multi_index_set


class TaylorMap:
    """Callable ``(x0, *frozen) → (N, m)`` array of the Taylor coefficients of ``outputs`` (SX column,
    m entries) in ``x`` (SX column, p symbols) up to total degree ``order``; ``frozen`` are further SX
    symbols held fixed (operating-point values that are not expansion parameters). Row i belongs
    to multi-index ``multi_indices.exponents[i]``. ``stop`` (a
    :class:`~flexmodal_ros.core.workers.StopToken`) is checked before each degree is differentiated."""

    def __init__(self, outputs, x, order: int, frozen=(), name: str = "taylor", stop=None):
        outputs = ca.SX(outputs)
        if outputs.size2() != 1:
            outputs = ca.vec(outputs)
        self.multi_indices = multi_index_set(int(x.numel()), int(order))
        self.size = int(outputs.size1())
        mset, m = self.multi_indices, self.size
        levels = [outputs]
        for d in range(1, order + 1):
            if stop is not None:            # a StopToken: the symbolic work is checked per degree
                stop.check()
            jac = ca.jacobian(levels[-1], x)
            prev = mset.degree_slices[d - 1].start
            cols = []
            for row in range(mset.degree_slices[d].start, mset.degree_slices[d].stop):
                k = mset.parent[row] - prev
                j = mset.variable[row]
                cols.append(jac[k * m:(k + 1) * m, j] / float(mset.exponents[row, j]))
            levels.append(ca.vertcat(*cols))
        self.function = ca.Function(name, [x, *frozen], [ca.vertcat(*levels)])

    def __call__(self, x0, *frozen) -> np.ndarray:
        out = self.function(np.asarray(x0, float), *(np.asarray(f, float) for f in frozen))
        return np.asarray(out).reshape(len(self.multi_indices), self.size)

"""Multi-indices of a p-variate Taylor polynomial truncated at total degree t (paper §3.1, eq. (19)).

A multi-index σ = (σ_1, …, σ_p) ∈ ℕ₀ᵖ has norm |σ| = Σ σ_i, factorial σ! = Π σ_i! and power
δxᵠ = Π δx_iᵠⁱ. Total-degree truncation keeps every σ with |σ| ≤ t: there are C(p+|σ|−1, |σ|)
multi-indices of norm |σ| and C(p+t, t) in all, the addend counts of the paper's Table 1.

Order of the terms (the row order of every coefficient array of :mod:`flexmodal_ros.expansion`):
by total degree; within a degree d, multi-index τ = σ + e_j comes from its *parent* σ (degree d−1,
in parent order) and the variable j ≥ the last non-zero position of σ, with j ascending. Each τ has
exactly one such (parent, j) pair — j is the last non-zero position of τ — which is what lets
:mod:`.taylor` obtain degree d from one derivative of degree d−1 per term.
"""
from __future__ import annotations

from functools import lru_cache
from math import comb, factorial

import numpy as np

from ..core.errors import InputError


def addend_count(p: int, t: int) -> int:
    """Number of terms C(p+t, t) of a p-variate polynomial of total degree ≤ t (Table 1)."""
    return comb(p + t, t)


def degree_count(p: int, d: int) -> int:
    """Number of multi-indices of norm d in p variables, C(p+d−1, d) (§3.1, n_{p,|σ|})."""
    return comb(p + d - 1, d)


def table1(max_rigid: int = 6, max_order: int = 5) -> dict:
    """The paper's Table 1: {"static": rows, "dynamic": rows}, row n_r−1 = counts for t = 1…max_order
    with x = q_r (p = n_r) and x = {q_r; q̇_r} (p = 2 n_r)."""
    rows = range(1, max_rigid + 1)
    return {"static": [[addend_count(n, t) for t in range(1, max_order + 1)] for n in rows],
            "dynamic": [[addend_count(2 * n, t) for t in range(1, max_order + 1)] for n in rows]}


class MultiIndexSet:
    """All multi-indices of ``p`` variables with total degree ≤ ``order``, in the order above.

    Attributes (read-only arrays): ``exponents`` (N, p) int; ``degrees`` (N,); ``parent`` (N,) row
    of τ − e_j (−1 for the constant term); ``variable`` (N,) that j (−1 for the constant term);
    ``factorials`` (N,) σ!; ``degree_slices[d]`` rows of degree d.
    """

    def __init__(self, p: int, order: int):
        if int(p) != p or p < 1:
            raise InputError(f"parameters: need at least one expansion parameter, got p = {p}")
        if int(order) != order or order < 1:
            raise InputError(f"order: the Taylor order t must be an integer >= 1, got {order}")
        self.p, self.order = int(p), int(order)
        exps, parent, var = [np.zeros(self.p, int)], [-1], [-1]
        level = [0]
        self.degree_slices = [slice(0, 1)]
        for _ in range(self.order):
            start, new = len(exps), []
            for row in level:
                nz = np.flatnonzero(exps[row])
                for j in range(nz[-1] if nz.size else 0, self.p):
                    e = exps[row].copy()
                    e[j] += 1
                    exps.append(e)
                    parent.append(row)
                    var.append(j)
                    new.append(len(exps) - 1)
            level = new
            self.degree_slices.append(slice(start, len(exps)))
        self.exponents = _frozen(np.array(exps))
        self.degrees = _frozen(self.exponents.sum(axis=1))
        self.parent = _frozen(np.array(parent))
        self.variable = _frozen(np.array(var))
        fact = np.array([float(np.prod([factorial(int(k)) for k in e])) for e in exps])
        self.factorials = _frozen(fact)
        self._rows = {tuple(int(v) for v in e): i for i, e in enumerate(exps)}

    def __len__(self) -> int:
        return self.exponents.shape[0]

    def __repr__(self) -> str:
        return f"MultiIndexSet(p={self.p}, order={self.order}, terms={len(self)})"

    def row(self, sigma) -> int:
        """Row of multi-index ``sigma`` (KeyError if |σ| > order)."""
        return self._rows[tuple(int(v) for v in sigma)]

    def truncated(self, order: int) -> "MultiIndexSet":
        """The set of degree ≤ ``order`` (its rows are the first rows of this one)."""
        return multi_index_set(self.p, order)

    def monomials(self, dx) -> np.ndarray:
        """δxᵠ for every row, for points ``dx`` (m, p) → (m, N): one vectorized product per degree,
        row = its ``parent`` row × δx of its ``variable`` (t multiplications per monomial at most)."""
        dx = np.asarray(dx, dtype=float)
        V = np.empty((dx.shape[0], len(self)))
        V[:, 0] = 1.0
        for rows in self.degree_slices[1:]:
            V[:, rows] = V[:, self.parent[rows]] * dx[:, self.variable[rows]]
        return V

    @property
    def shifts(self) -> np.ndarray:
        """(N_{t−1}, p): row of σ + e_j for every σ of degree ≤ order − 1 (used to differentiate
        a polynomial: ∂/∂x_j of Σ c_σ δxᵠ has coefficient (σ_j + 1) c_{σ+e_j} at σ)."""
        return _shift_table(self.p, self.order)



@lru_cache(maxsize=64)
def multi_index_set(p: int, order: int) -> MultiIndexSet:
    """Cached :class:`MultiIndexSet` (immutable, shared)."""
    return MultiIndexSet(p, order)


@lru_cache(maxsize=64)
def _shift_table(p, order):
    s = multi_index_set(p, order)
    low = s.degree_slices[order - 1].stop
    out = np.empty((low, p), int)
    for i in range(low):
        for j in range(p):
            e = s.exponents[i].copy()
            e[j] += 1
            out[i, j] = s.row(e)
    return _frozen(out)


def _frozen(a):
    a.setflags(write=False)
    return a

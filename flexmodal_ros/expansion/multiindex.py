"""Multi-indices of a p-variate Taylor polynomial truncated at total degree t (paper §3.1, eq. (19)).

A multi-index σ = (σ_1, …, σ_p) ∈ ℕ₀ᵖ has norm |σ| = Σ σ_i, factorial σ! = Π σ_i! and power
δxᵠ = Π δx_iᵠⁱ. Total-degree truncation keeps every σ with |σ| ≤ t: there are C(p+|σ|−1, |σ|)
multi-indices of norm |σ| and C(p+t, t) in all, the addend counts of the paper's Table 1.

Order of the terms (the row order of every coefficient array of :mod:`flexmodal_ros.expansion`):
by total degree; within a degree d, multi-index τ = σ + e_j comes from its *parent* σ (degree d−1,
in parent order) and the variable j ≥ the last non-zero position of σ, with j ascending. Each τ has
exactly one such (parent, j) pair — j is the last non-zero position of τ — which is what lets
:mod:`.taylor` obtain degree d from one derivative of degree d−1 per term.

Size limits of one expansion (:func:`check_expansion_size`, checked before any work by
:func:`~.recursion.expand`, the CLI and the modal server): the Taylor coefficients are built by
symbolic differentiation, whose expression graphs grow with the total degree and with the number
of coefficients, so

- the order is at most ``MAX_ORDER`` = 6 (one degree more roughly doubles to triples the symbolic
  work; measurements in docs/benchmarks.md);
- the number of addends C(p+t, t) is at most ``MAX_TERMS`` = 1000 (Table 1's counts; kuka_lwr4,
  p = 7: t ≤ 5, 792 terms; scompi, p = 6: t ≤ 6, 924 terms);
- the memory of the recursion's coefficient arrays (:func:`expansion_bytes`) is at most
  ``MAX_EXPANSION_BYTES``;
- a system may bound its own symbolic work (``symbolic_entries(order)``, the number of coefficient
  expressions it differentiates) by ``MAX_SYMBOLIC_ENTRIES``: for the flexible-joint closed loop
  (:class:`~.flexible_joint.FlexibleJointSystem`) the work grows about linearly in entries, and
  40,000 bounds the first (uncached) expansion of a robot (benchmarks/bench_expansion.py).

Requests beyond them are refused with the largest order that the system allows.
"""
from __future__ import annotations

from functools import lru_cache
from math import comb, factorial

import numpy as np

from ..core.errors import InputError
from ..core.validation import shown

MAX_ORDER = 6                        # total degree t of one expansion (module docstring)
MAX_TERMS = 1000                     # addends C(p + t, t)
MAX_SYMBOLIC_ENTRIES = 40_000        # symbolic coefficient expressions of a system (its own count)
MAX_EXPANSION_BYTES = 512 * 2 ** 20  # coefficient arrays of the recursion and the matrix series


def addend_count(p: int, t: int) -> int:
    """Number of terms C(p+t, t) of a p-variate polynomial of total degree ≤ t (Table 1)."""
    return comb(p + t, t)


def expansion_bytes(p: int, t: int, num_dof: int, pairs=None) -> int:
    """Bytes of the arrays of one expansion of ``pairs`` eigenpairs (default: all 2·num_dof) of a
    system with ``num_dof`` coordinates: the three matrix series (N, n, n) real, and per pair λ,
    φ, ψ and the three products of the recursion (N, n) complex, N = C(p+t, t)."""
    n = int(num_dof)
    k = 2 * n if pairs is None else int(pairs)
    N = addend_count(p, t)
    return N * (3 * n * n * 8 + 6 * k * n * 16)


def check_expansion_size(system, order, field: str = "order", pairs=None, error=InputError) -> int:
    """``order`` as an int after checking the limits of the module docstring for ``system`` (an
    object with ``parameter_names``, ``num_dof`` and optionally ``symbolic_entries(order)``);
    the error names ``field`` (the request field or CLI option as the user wrote it) and the
    largest order allowed for this system."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
        raise error(f"{field}: the Taylor order t must be an integer >= 1, got {shown(order)}")
    p = len(system.parameter_names)
    reason = _size_problem(system, p, int(order), pairs)
    if reason is None:
        return int(order)
    allowed = max((t for t in range(1, MAX_ORDER + 1) if _size_problem(system, p, t, pairs) is None), default=0)
    limit = f"the largest order this system allows is {allowed}" if allowed else "no order fits this system"
    raise error(f"{field}: {order} is too large, {limit} ({reason}; limits in "
                f"flexmodal_ros/expansion/multiindex.py)")


def _size_problem(system, p, t, pairs):
    """Why an expansion of order t of ``system`` in p parameters is too large, or None."""
    if t > MAX_ORDER:
        return f"the maximum order is {MAX_ORDER}"
    terms = addend_count(p, t)
    if terms > MAX_TERMS:
        return f"{p} parameters at order {t} give C({p + t}, {t}) = {terms} terms, more than {MAX_TERMS}"
    num_dof = getattr(system, "num_dof", None)
    size = 0 if num_dof is None else expansion_bytes(p, t, num_dof, pairs)
    if size > MAX_EXPANSION_BYTES:
        return f"{size / 2 ** 20:.0f} MiB of coefficients, more than {MAX_EXPANSION_BYTES / 2 ** 20:.0f} MiB"
    entries = getattr(system, "symbolic_entries", None)
    if entries is not None and entries(t) > MAX_SYMBOLIC_ENTRIES:
        return (f"{entries(t)} symbolic coefficient expressions to differentiate, more than "
                f"{MAX_SYMBOLIC_ENTRIES}")
    return None


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

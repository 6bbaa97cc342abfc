"""Constrained multibody systems M(q) q̈ = f(q, q̇, u) − Φ_qᵀ λ, Φ(q, t) = 0 (González et al. (1)).

A :class:`ConstrainedSystem` is an immutable description (Pinocchio style: the system is the
model, work buffers live in the object returned by :meth:`ConstrainedSystem.create_data`). It
answers two kinds of questions:

* :meth:`~ConstrainedSystem.terms` — everything the static equilibrium and the three
  linearizations need at one rest point (q̇ = 0), in one call: M, f and its exact Jacobians f_q, f_q̇, f_u,
  Φ, Φ_q, Φ_t and the Hessian of λᵀΦ, Σ_k λ_k ∂²Φ_k/∂q² (the ∂Φ_qᵀλ/∂q term of (10), (17));
* the nonlinear pieces (:meth:`~ConstrainedSystem.mass`, :meth:`~ConstrainedSystem.force`,
  :meth:`~ConstrainedSystem.constraints`, :meth:`~ConstrainedSystem.constraint_jacobian`,
  :meth:`~ConstrainedSystem.constraint_bias` = Φ̇_q q̇) used by the finite-difference checks of
  :mod:`flexmodal_ros.constrained.checks` and by anyone integrating the dynamics.

:class:`SymbolicSystem` builds these from CasADi SX expressions of a Lagrangian system
(kinetic energy ½ q̇ᵀM(q)q̇, potential V(q), non-conservative forces Q(q, q̇, u)); every derivative
is CasADi's automatic differentiation, exact to round-off. Matrices are returned dense (NumPy) or,
with ``sparse=True``, as ``scipy.sparse.csc_matrix`` (large finite-element models). The
closed-chain robot backend (Pinocchio, analytic derivatives) is
:class:`flexmodal_ros.constrained.closed_chain_analysis.RobotSystem`.

Units are those of the model (SI); q may mix lengths [m] and angles [rad].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import casadi as ca
import numpy as np
import scipy.sparse

from ..core.errors import InputError
from ..core.validation import finite_scalar, finite_vector


class Terms(NamedTuple):
    """Linearization ingredients at a rest point (q, q̇ = 0, u, λ, t): ``M`` (n, n); ``f`` (n,);
    ``f_q``, ``f_qd`` (n, n); ``f_u`` (n, p); ``phi`` (m,); ``phi_q`` (m, n); ``phi_t`` (m,); ``hessian``
    Σ_k λ_k ∂²Φ_k/∂q² (n, n). Matrices are ndarrays or scipy.sparse (``sparse=True``)."""

    M: object
    f: np.ndarray
    f_q: object
    f_qd: object
    f_u: object
    phi: np.ndarray
    phi_q: object
    phi_t: np.ndarray
    hessian: object


@dataclass(frozen=True, eq=False)
class ConstrainedSystem:
    """Interface of a constrained system (n coordinates, m constraints, p inputs); the backends
    are frozen dataclasses that add their own fields after these.

    Fields: ``name``; ``coordinate_names`` (n); ``constraint_names`` (m); ``input_names`` (p);
    ``independent`` names of the coordinates preferred as independent by the MCS coordinate
    partitioning (empty = chosen automatically); ``sparse_native`` True when matrices are sparse
    by nature (then the sparse paths avoid dense conversions).
    """

    name: str
    coordinate_names: tuple
    constraint_names: tuple
    input_names: tuple
    independent: tuple
    sparse_native: bool

    @property
    def n(self) -> int:
        return len(self.coordinate_names)

    @property
    def m(self) -> int:
        return len(self.constraint_names)

    @property
    def p(self) -> int:
        return len(self.input_names)

    def create_data(self):
        """Work buffers for the evaluation functions (one per thread); None if not needed."""
        return None

    # --- evaluation (implemented by the backends) ---------------------------------------------
    def terms(self, q, u, lam, t=0.0, sparse=False, data=None) -> Terms:
        """:class:`Terms` at the rest point (q, q̇ = 0, u, λ, t)."""
        raise NotImplementedError

    def mass(self, q, data=None) -> np.ndarray:
        raise NotImplementedError

    def force(self, q, qd, u, t=0.0, data=None) -> np.ndarray:
        raise NotImplementedError

    def constraints(self, q, t=0.0, data=None) -> np.ndarray:
        raise NotImplementedError

    def constraint_jacobian(self, q, t=0.0, data=None) -> np.ndarray:
        raise NotImplementedError

    def constraint_bias(self, q, qd, t=0.0, data=None) -> np.ndarray:
        """Φ̇_q q̇ = (∂(Φ_q q̇)/∂q) q̇ (m,), the velocity-quadratic part of Φ̈ (source (11))."""
        raise NotImplementedError

    # --- input checks shared by every caller ---------------------------------------------------
    def check_point(self, q=None, qd=None, u=None, t=None):
        """Validated (q, q̇, u, t) as float arrays (None → zeros / 0); errors name the field."""
        q = np.zeros(self.n) if q is None else finite_vector(q, self.n, "q")
        qd = np.zeros(self.n) if qd is None else finite_vector(qd, self.n, "qd")
        u = np.zeros(self.p) if u is None else finite_vector(u, self.p, "u")
        t = 0.0 if t is None else finite_scalar(t, "t")
        return q, qd, u, t

    def index(self, name: str) -> int:
        """Index of a coordinate name; InputError listing the names if unknown."""
        try:
            return self.coordinate_names.index(name)
        except ValueError:
            raise InputError(f"unknown coordinate '{name}' (system {self.name} has: "
                             f"{', '.join(self.coordinate_names)})") from None


def _vec(value):
    return value.full().ravel()


class _TermsBuffers:
    """Zero-copy evaluation of a CasADi function (``Function.buffer``): inputs are copied into
    preallocated arrays, outputs come back as their nonzeros and are scattered into dense arrays
    (precomputed flat indices) or wrapped as CSC matrices — no per-entry Python conversion."""

    def __init__(self, function, vectors=()):
        self.buffer, self.run = function.buffer()
        self.args = [np.zeros(function.nnz_in(i)) for i in range(function.n_in())]
        for i, arg in enumerate(self.args):
            self.buffer.set_arg(i, memoryview(arg))
        self.res, self.layout = [], []
        for i in range(function.n_out()):
            sparsity = function.sparsity_out(i)
            nz = np.zeros(sparsity.nnz())
            self.buffer.set_res(i, memoryview(nz))
            rows, colind = np.array(sparsity.row(), int), np.array(sparsity.colind(), int)
            cols = np.repeat(np.arange(sparsity.size2()), np.diff(colind))
            self.res.append(nz)
            self.layout.append((sparsity.shape, rows, colind, rows * sparsity.size2() + cols,
                                i in vectors))

    def evaluate(self, args, sparse):
        for buf, value in zip(self.args, args):
            buf[:] = np.ravel(value)
        self.run()
        out = []
        for nz, (shape, rows, colind, flat, vector) in zip(self.res, self.layout):
            if vector or not sparse:
                dense = np.zeros(shape[0] * shape[1])
                dense[flat] = nz
                out.append(dense if vector else dense.reshape(shape))
            else:
                out.append(scipy.sparse.csc_matrix((nz.copy(), rows, colind), shape=shape))
        return out


class _SymbolicData:
    """Work buffers of a :class:`SymbolicSystem`: ``terms`` and ``phi`` (Φ(q, t)) evaluators."""

    def __init__(self, terms, phi):
        self.terms = _TermsBuffers(terms, vectors=(1, 5, 7))  # f, Φ, Φ_t of :class:`Terms`
        self.phi = _TermsBuffers(phi, vectors=(0,))


@dataclass(frozen=True, eq=False)
class SymbolicSystem(ConstrainedSystem):
    """A Lagrangian constrained system compiled from CasADi SX expressions.

    Build it with :func:`lagrangian_system`. Fields: ``name``, ``coordinate_names``,
    ``constraint_names``, ``input_names``, ``independent`` (see :class:`ConstrainedSystem`),
    ``sparse_native`` and the compiled CasADi functions ``_terms`` (q, u, λ, t → :class:`Terms`),
    ``_mass``, ``_force``, ``_phi``, ``_phi_q``, ``_bias``.
    """

    _terms: ca.Function
    _mass: ca.Function
    _force: ca.Function
    _phi: ca.Function
    _phi_q: ca.Function
    _bias: ca.Function

    def create_data(self):
        """Evaluation buffers of :meth:`terms` and :meth:`constraints` (one per thread)."""
        return _SymbolicData(self._terms, self._phi)

    def terms(self, q, u, lam, t=0.0, sparse=False, data=None) -> Terms:
        data = data if isinstance(data, _SymbolicData) else self.create_data()
        return Terms(*data.terms.evaluate((q, u, lam, t), sparse))

    def mass(self, q, data=None):
        return self._mass(q).full()

    def force(self, q, qd, u, t=0.0, data=None):
        return _vec(self._force(q, qd, u, t))

    def constraints(self, q, t=0.0, data=None):
        if isinstance(data, _SymbolicData):
            return data.phi.evaluate((q, t), False)[0]
        return _vec(self._phi(q, t))

    def constraint_jacobian(self, q, t=0.0, data=None):
        return self._phi_q(q, t).full()

    def constraint_bias(self, q, qd, t=0.0, data=None):
        return _vec(self._bias(q, qd, t))


def lagrangian_system(name, q, qd, u, t, mass, potential, forces, constraints, *,
                      coordinate_names, constraint_names, input_names, independent=(),
                      sparse_native=False) -> SymbolicSystem:
    """Compile a constrained Lagrangian system from CasADi SX expressions.

    ``q``, ``qd`` (n×1), ``u`` (p×1) and ``t`` (1×1) are SX symbols; ``mass`` the SX matrix M(q)
    (n, n); ``potential`` V(q) (scalar); ``forces`` the non-conservative generalized forces
    Q(q, q̇, u, t) (n×1); ``constraints`` Φ(q, t) (m×1). The applied force of (1) is

        f = ∂T/∂q − Ṁ q̇ − ∂V/∂q + Q,   T = ½ q̇ᵀ M q̇   (Lagrange's equations),

    so the velocity-quadratic (Coriolis/centrifugal) terms are part of f (:meth:`force`). At rest
    they vanish together with their q̇-derivatives, so the static :meth:`terms` are built from
    f₀ = −∂V/∂q + Q(q, 0, u, t) and its Jacobians — which keeps the AD graphs of large models
    linear in n. Every derivative is CasADi AD. Names must match the sizes; ``independent`` lists
    coordinate names preferred as independent by the MCS coordinate partitioning.
    """
    n, m, p = q.numel(), constraints.numel(), u.numel()
    for label, names, size in (("coordinate_names", coordinate_names, n),
                               ("constraint_names", constraint_names, m),
                               ("input_names", input_names, p)):
        if len(names) != size:
            raise InputError(f"{label}: {len(names)} names for {size} entries")
    unknown = sorted(set(independent) - set(coordinate_names))
    if unknown:
        raise InputError(f"independent: unknown coordinate(s) {unknown}")
    lam = ca.SX.sym("lam", m)
    kinetic = 0.5 * ca.dot(qd, ca.mtimes(mass, qd))
    f = (ca.gradient(kinetic, q) - ca.jtimes(ca.mtimes(mass, qd), q, qd)
         - ca.gradient(potential, q) + forces)
    f0 = ca.substitute(-ca.gradient(potential, q) + forces, qd, ca.SX.zeros(n))
    f0_qd = ca.substitute(ca.jacobian(forces, qd), qd, ca.SX.zeros(n))
    phi_q = ca.jacobian(constraints, q)
    hess = ca.hessian(ca.dot(lam, constraints), q)[0]
    terms = ca.Function(f"{name}_terms", [q, u, lam, t],
                        [mass, f0, ca.jacobian(f0, q), f0_qd, ca.jacobian(f0, u), constraints,
                         phi_q, ca.jacobian(constraints, t), hess])
    return SymbolicSystem(
        name=name, coordinate_names=tuple(coordinate_names), constraint_names=tuple(constraint_names),
        input_names=tuple(input_names), independent=tuple(independent), sparse_native=sparse_native,
        _terms=terms,
        _mass=ca.Function(f"{name}_M", [q], [mass]),
        _force=ca.Function(f"{name}_f", [q, qd, u, t], [f]),
        _phi=ca.Function(f"{name}_phi", [q, t], [constraints]),
        _phi_q=ca.Function(f"{name}_phi_q", [q, t], [phi_q]),
        _bias=ca.Function(f"{name}_bias", [q, qd, t], [ca.jtimes(ca.mtimes(phi_q, qd), q, qd)]))

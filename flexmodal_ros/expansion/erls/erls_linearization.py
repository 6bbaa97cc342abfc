"""Linearization of the ERLS arm about static and dynamic equilibria (paper eqs. (2)-(11)).

Γ(q, q̇, q̈, u) = M q̈ + C q̇ + K q − f (2). Its exact Jacobians (notes_000 §2: the leading minus
signs and the +∂f/∂q printed in (4), (5), (9) are extraction artefacts or typos; the signs below are
checked against finite differences of Γ in test/test_erls.py) are

    K̄ = ∂M/∂q ⊗ q̈ + ∂C/∂q ⊗ q̇ + ∂K/∂q ⊗ q + K − ∂f/∂q     (4)
    C̄ = C + ∂C/∂q̇ ⊗ q̇                                       (5)
    M̄ = M,   F̄ = ∂f/∂u                                        (6), (7)

with (∂A/∂s ⊗ b)_{:, j} = (∂A/∂s_j) b (8); at a static equilibrium (q̇ = q̈ = 0) they reduce to
(9)-(10). Linearized model M̄ δq̈ + C̄ δq̇ + K̄ δq = F̄ δu (11).

Operating points (:class:`OperatingPoint`). The rigid motion q_r(t), q̇_r(t), q̈_r(t) is prescribed
(the paper's P0 lists q, q̇, q̈, u of the joint trajectory); q̇_f = q̈_f = 0 and by default q_f = 0
(the nominal, undeformed motion), with u from the rigid rows of Γ = 0 (inverse dynamics). The
paper does not say how q_f and u were chosen (notes_000 §6); :func:`operating_point` documents
this choice and the quasi-static alternative.

:class:`ErlsSystem` is the parametric view used by :mod:`flexmodal_ros.expansion`: the linearized
matrices as functions of x = {q_r[, q̇_r][, payload mass]} with q_f, q̇_f, q̈ and the remaining
quantities frozen at their operating-point values (notes_000 §5 "not discussed": quantities not in x
keep their P0 values in the polynomial).
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ...core.errors import InputError
from ...core.validation import finite_vector, shown
from . import erls_model as erls
from ..taylor import TaylorMap
from ..eigen import eigenpairs_batch

TERMS = ("dM_qdd", "dC_qd", "dK_q", "K", "df_q", "dCv_qd", "C", "M", "F_u")


@dataclass(frozen=True)
class OperatingPoint:
    """P0 = (q, q̇, q̈, u): full coordinates q, q̇, q̈ (n,) in the (A1) order and torques u (n_r,) [N m];
    ``payload_mass`` [kg] used by the model at this point."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    u: np.ndarray
    payload_mass: float


@dataclass(frozen=True)
class LinearizedErls:
    """M̄, C̄, K̄ (n × n) and F̄ (n × n_r) of (11) at one operating point."""

    M: np.ndarray
    C: np.ndarray
    K: np.ndarray
    F: np.ndarray


def _terms_function(model):
    """CasADi function (q, q̇, q̈, u, payload) → the ⊗ terms of (4)-(5) (see :data:`TERMS`)."""
    fn = model._functions.get("linearization_terms")
    if fn is not None:
        return fn
    sym = erls.symbolic(model)
    n, nf = model.n, model.n_f
    q, qd, qdd = ca.SX.sym("q", n), ca.SX.sym("qd", n), ca.SX.sym("qdd", n)
    sub = lambda e: ca.substitute(e, ca.vertcat(sym.q_r, sym.qd_r), ca.vertcat(q[nf:], qd[nf:]))
    M, C, K, f = sub(sym.M), sub(sym.C), sub(sym.K), sub(sym.f)
    qc = ca.SX.sym("q_const", n)                       # the q multiplied by K, held fixed
    terms = [ca.jacobian(ca.mtimes(M, qdd), q),        # ∂M/∂q ⊗ q̈
             ca.jacobian(ca.mtimes(C, qd), q),         # ∂C/∂q ⊗ q̇ (q̇ fixed)
             ca.substitute(ca.jacobian(ca.mtimes(K, qc), q), qc, q),   # ∂K/∂q ⊗ q
             K, ca.jacobian(f, q),                     # K, ∂f/∂q
             ca.jacobian(ca.mtimes(C, qd), qd) - C,    # ∂C/∂q̇ ⊗ q̇
             C, M, ca.SX(sym.F_u)]
    fn = ca.Function("erls_linearization_terms", [q, qd, qdd, sym.u, sym.payload], terms,
                     ["q", "qd", "qdd", "u", "payload_mass"], list(TERMS))
    model._functions["linearization_terms"] = fn
    return fn


def linearization_terms(model, point: OperatingPoint) -> dict:
    """The separate terms of (4)-(7) at ``point`` as a dict keyed by :data:`TERMS` (for checks)."""
    out = _terms_function(model)(point.q, point.qd, point.qdd, point.u, point.payload_mass)
    return {name: np.array(v) for name, v in zip(TERMS, out)}


def linearize(model, point: OperatingPoint) -> LinearizedErls:
    """M̄, C̄, K̄, F̄ of (4)-(7) with the exact-Jacobian signs (module docstring)."""
    t = linearization_terms(model, point)
    K = t["dM_qdd"] + t["dC_qd"] + t["dK_q"] + t["K"] - t["df_q"]
    return LinearizedErls(t["M"], t["C"] + t["dCv_qd"], K, t["F_u"])


def linearize_batch(model, points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacks (m, n, n) of M̄, C̄, K̄ for a sequence of operating points (one CasADi map call)."""
    fn = _terms_function(model)
    cols = lambda name: np.column_stack([getattr(p, name) for p in points])
    out = fn.map(len(points))(cols("q"), cols("qd"), cols("qdd"), np.column_stack([p.u for p in points]),
                               np.array([[p.payload_mass for p in points]]))
    n = model.n
    t = {name: np.array(v).reshape(n, len(points), -1).transpose(1, 0, 2) for name, v in zip(TERMS, out)}
    K = t["dM_qdd"] + t["dC_qd"] + t["dK_q"] + t["K"] - t["df_q"]
    return t["M"], t["C"] + t["dCv_qd"], K


DEFLECTIONS = ("none", "quasi-static")


def operating_point(model, q_r, qd_r=None, qdd_r=None, payload_mass=None, deflection="none") -> OperatingPoint:
    """Operating point with prescribed rigid motion q_r, q̇_r, q̈_r (default zero: static) and
    q̇_f = q̈_f = 0; u solves the rigid rows of Γ = 0.

    ``deflection``: "none" (default) linearizes about the nominal, undeformed motion q_f = 0;
    "quasi-static" also solves the elastic rows for q_f (K q_f − F̄ u = f_g − M q̈ − C q̇), a dynamic
    equilibrium Γ = 0 in every row. With global-frame elastic coordinates the term ∂K/∂q ⊗ q of (4)
    then couples the rigid rotations to the axial stiffness, ≈ (EA/l)·|q_f| per radian, which makes
    the eigenvalues of the rigid-body modes vary by thousands of 1/s per radian (a small-deformation
    artefact of the ERLS coordinates); hence "none" is the default.
    """
    if deflection not in DEFLECTIONS:
        raise InputError(f"deflection: expected one of {', '.join(DEFLECTIONS)}, got {shown(deflection)}")
    nr, nf = model.n_r, model.n_f
    q_r = finite_vector(q_r, nr, "q_r")
    qd_r = np.zeros(nr) if qd_r is None else finite_vector(qd_r, nr, "qd_r")
    qdd_r = np.zeros(nr) if qdd_r is None else finite_vector(qdd_r, nr, "qdd_r")
    mp = model.payload_mass if payload_mass is None else float(payload_mass)
    if not np.isfinite(mp) or mp < 0:
        raise InputError(f"payload_mass: must be a finite number >= 0, got {mp:g}")
    qd = np.concatenate([np.zeros(nf), qd_r])
    qdd = np.concatenate([np.zeros(nf), qdd_r])
    rhs = (erls.force_vector(model, q_r, np.zeros(nr), mp) - erls.mass_matrix(model, q_r, mp) @ qdd
           - erls.damping_matrix(model, q_r, qd_r, mp) @ qd)
    F_u = erls.torque_matrix(model)
    if deflection == "none":
        q_f, u = np.zeros(nf), np.linalg.solve(-F_u[nf:], rhs[nf:])
    else:
        K = erls.stiffness_matrix(model, q_r)
        sol = np.linalg.solve(np.hstack([K[:, :nf], -F_u]), rhs)   # unknowns [q_f; u]
        q_f, u = sol[:nf], sol[nf:]
    return OperatingPoint(np.concatenate([q_f, q_r]), qd, qdd, u, mp)


# --------------------------------------------------------------------------- parametric view
PARAMETER_KINDS = ("positions", "velocities", "payload_mass")


class ErlsSystem:
    """Linearized ERLS matrices as functions of x for :func:`flexmodal_ros.expansion.expand`.

    ``parameters``: a subset of :data:`PARAMETER_KINDS` that must contain "positions"
    (x = {q_r}; + q̇_r with "velocities", + the tip payload mass with "payload_mass").
    ``point``: the operating point P0 (x0 and the frozen q_f, q̇_f, q̈, u).
    """

    kind = "erls"

    def __init__(self, model, point: OperatingPoint, parameters=("positions",)):
        parameters = tuple(parameters)
        unknown = [p for p in parameters if p not in PARAMETER_KINDS]
        if unknown:
            raise InputError(f"parameters: unknown expansion parameter(s) {unknown} "
                             f"(allowed: {', '.join(PARAMETER_KINDS)})")
        if "positions" not in parameters:
            raise InputError("parameters: the rigid positions q_r are always expansion parameters")
        self.model, self.point = model, point
        self.kinds = tuple(k for k in PARAMETER_KINDS if k in parameters)
        nr = model.n_r
        names = list(model.rigid_names)
        x0 = [point.q[model.n_f:]]
        if "velocities" in self.kinds:
            names += [f"qd_{i + 1}" for i in range(nr)]
            x0.append(point.qd[model.n_f:])
        if "payload_mass" in self.kinds:
            names.append("payload_mass")
            x0.append([point.payload_mass])
        self.parameter_names = tuple(names)
        self.x0 = np.concatenate(x0)
        self.num_dof = model.n
        self.row_names = model.coordinate_names
        self._taylor = {}

    def describe(self) -> dict:
        """Metadata saved with an expansion (what x is and which values are frozen)."""
        p = self.point
        return {"system": "erls", "model": self.model.name, "parameters": list(self.kinds),
                "frozen": {"q": p.q.tolist(), "qd": p.qd.tolist(), "qdd": p.qdd.tolist(), "u": p.u.tolist(),
                           "payload_mass": p.payload_mass},
                "rows": list(self.row_names)}

    def _split(self, x):
        """(q, q̇, payload) of the full model at parameter values x (others frozen)."""
        nr, nf = self.model.n_r, self.model.n_f
        q = np.concatenate([self.point.q[:nf], x[:nr]])
        qd = self.point.qd.copy()
        k = nr
        if "velocities" in self.kinds:
            qd[nf:] = x[k:k + nr]
            k += nr
        mp = x[k] if "payload_mass" in self.kinds else self.point.payload_mass
        return q, qd, mp

    def matrices(self, xs):
        """Exact M̄, C̄, K̄ stacks (m, n, n) at parameter values ``xs`` (m, p), frozen rest."""
        xs = np.atleast_2d(np.asarray(xs, float))
        points = []
        for x in xs:
            q, qd, mp = self._split(x)
            points.append(OperatingPoint(q, qd, self.point.qdd, self.point.u, float(mp)))
        return linearize_batch(self.model, points)

    def taylor(self, x0, order: int, stop=None):
        """(MultiIndexSet, M̄^(σ), C̄^(σ), K̄^(σ)) with coefficient stacks (N, n, n) at x0."""
        tm = self._taylor_map(order, stop)
        nf, n = self.model.n_f, self.model.n
        frozen = [self.point.q[:nf], self.point.qd, self.point.qdd, [self.point.payload_mass]]
        coeffs = tm(np.asarray(x0, float), *frozen)[: len(tm.multi_indices.truncated(order))]
        N = coeffs.shape[0]
        mats = coeffs.reshape(N, 3, n, n).transpose(1, 0, 3, 2)     # column-major vec → (N, n, n)
        return tm.multi_indices.truncated(order), mats[0], mats[1], mats[2]

    def _taylor_map(self, order, stop=None):

        best = max((o for o in self._taylor if o >= order), default=None)
        if best is not None:
            return self._taylor[best]
        fn = _terms_function(self.model)
        n, nf, nr = self.model.n, self.model.n_f, self.model.n_r
        x = ca.SX.sym("x", len(self.parameter_names))
        qf, qd, qdd, mp = ca.SX.sym("q_f", nf), ca.SX.sym("qd", n), ca.SX.sym("qdd", n), ca.SX.sym("mp")
        k = nr
        qd_full = qd
        if "velocities" in self.kinds:
            qd_full = ca.vertcat(qd[:nf], x[nr:2 * nr])
            k += nr
        payload = x[k] if "payload_mass" in self.kinds else mp
        out = dict(zip(TERMS, fn(ca.vertcat(qf, x[:nr]), qd_full, qdd, ca.SX.zeros(nr), payload)))
        Kbar = out["dM_qdd"] + out["dC_qd"] + out["dK_q"] + out["K"] - out["df_q"]
        stacked = ca.vertcat(ca.vec(out["M"]), ca.vec(out["C"] + out["dCv_qd"]), ca.vec(Kbar))
        tm = TaylorMap(stacked, x, order, [qf, qd, qdd, mp], name="erls_taylor", stop=stop)
        self._taylor[order] = tm
        return tm

    def exact_modes(self, xs):
        """Modes (:class:`~flexmodal_ros.expansion.eigen.BiorthogonalModes`) at parameter values xs."""

        return [e.modes() for e in eigenpairs_batch(*self.matrices(xs))]

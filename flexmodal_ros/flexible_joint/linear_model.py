"""Set-point PD law and linearized closed loop of a flexible-joint robot (thesis ch. 2).

Thesis: T.T. Do (2021), eqs. (2.1)-(2.14). Notation: ``q`` link coordinates [rad or m],
``q_m`` motor coordinates after the gear [rad], ``z = [q; q_m]`` (2.5), ``W = diag(1/r)``,
``K = diag(k)``, ``D = diag(d_f)``, ``D_m = diag(d_fm)``, ``B = diag(N² I_r)``, gains
``K_P = diag(kp)``, ``K_D = diag(kd)`` acting on the motor side, constant wrench
``tau_ext = model.wrench`` = [f; μ] in frame 0 at the tool point E.

Only viscous friction enters (the ch. 2 model); Coulomb terms are not part of the linearization.
"""

from __future__ import annotations

import functools
import weakref
from typing import NamedTuple

import numpy as np
import pinocchio as pin

from flexmodal_ros.robot.model import (
    gravity_stiffness,
    gravity_torque,
    mass_matrix,
    wrench_stiffness,
    wrench_torque,
)


class LinearizedSystem(NamedTuple):
    """Linearized closed loop M̄ Δz̈ + D̄ Δż + K̄ Δz = 0 (2.8) about z^d = [q; q_m] (2.7).

    ``M``, ``D``, ``K`` are the 2n×2n matrices (2.9)-(2.11); ``q`` the link set-point [rad or m];
    ``q_m`` the motor equilibrium q_m^d (2.3) [rad].
    """

    M: np.ndarray
    D: np.ndarray
    K: np.ndarray
    q: np.ndarray
    q_m: np.ndarray


def _wrench(model):
    """The constant wrench τ_ext, or None when it is zero (its terms are then skipped)."""
    return model.wrench if model.wrench.any() else None


def static_compensation(model, data, q_d) -> np.ndarray:
    """g(q^d) − Jᵀ(q^d) τ_ext [N·m or N], the constant term of (2.2)-(2.3)."""
    comp = gravity_torque(model, data, q_d)
    w = _wrench(model)
    return comp if w is None else comp - wrench_torque(model, data, q_d, w)


def equilibrium_from_compensation(model, q, comp) -> np.ndarray:
    """q_m^d = W q^d + (K W)⁻¹ comp (2.3) from comp = g − Jᵀτ_ext; broadcasts over rows [rad]."""
    return model.W * q + comp / (model.k * model.W)


def motor_equilibrium(model, data, q) -> np.ndarray:
    """Motor equilibrium q_m^d = W q^d + (K W)⁻¹ (g(q^d) − Jᵀ(q^d) τ_ext)  (2.3) [rad]."""
    q = np.asarray(q, dtype=float)
    return equilibrium_from_compensation(model, q, static_compensation(model, data, q))


def configuration_terms(model, data, qs, inverse: bool = False):
    """For configurations ``qs`` (m, n): M(q) (m, n, n), or M(q)⁻¹ with ``inverse`` (Pinocchio's
    computeMinverse), K_G (2.12) (m, n, n) and g − Jᵀτ_ext (m, n), in one pass (the
    configuration-dependent inputs of (2.3), (2.9)-(2.11))."""
    qs = np.asarray(qs, dtype=float)
    m, n = qs.shape
    M, KG, comp = np.empty((m, n, n)), np.empty((m, n, n)), np.empty((m, n))
    w = _wrench(model)
    inertia = pin.computeMinverse if inverse else pin.crba
    for i, q in enumerate(qs):
        M[i] = inertia(model.pin, data, q)                        # crba: upper triangle valid
        KG[i], comp[i] = _gravity_and_wrench_terms(model, data, q, w)
    if not inverse:
        lower = _lower_indices(n)
        M[:, lower[0], lower[1]] = M[:, lower[1], lower[0]]       # CRBA fills the upper triangle
    return M, KG, comp


@functools.cache
def _lower_indices(n):
    return np.tril_indices(n, -1)


def single_configuration_terms(model, data, q):
    """K_G (2.12) and g − Jᵀτ_ext at one configuration ``q`` (a float vector). Pinocchio's
    gravity-derivative pass leaves g(q) in ``data.g`` on the way, so one call gives both."""
    return _gravity_and_wrench_terms(model, data, q, _wrench(model))


def _gravity_and_wrench_terms(model, data, q, w):
    """:func:`single_configuration_terms` with the wrench ``w`` (or None) already looked up."""
    KG = pin.computeGeneralizedGravityDerivatives(model.pin, data, q)
    comp = data.g.copy()
    if w is not None:
        KG -= wrench_stiffness(model, data, q, w)
        comp -= wrench_torque(model, data, q, w)
    return KG, comp


def setpoint_reference(model, data, q_d) -> np.ndarray:
    """Constant term r = W⁻¹ (g(q^d) − Jᵀ(q^d) τ_ext) + K_P q_m^d of the set-point law (2.2) [N·m],
    with q_m^d from (2.3): τ_m = r − K_P q_m − K_D q̇_m."""
    q_d = np.asarray(q_d, dtype=float)
    comp = static_compensation(model, data, q_d)
    return comp / model.W + model.kp * equilibrium_from_compensation(model, q_d, comp)


def setpoint_motor_torque(model, data, q_d, q_m, qd_m) -> np.ndarray:
    """Set-point PD law with constant compensation (2.2), motor torque τ_m [N·m after the gear].

    τ_m = W⁻¹ (g(q^d) − Jᵀ(q^d) τ_ext) + K_P (q_m^d − q_m) − K_D q̇_m.
    """
    return setpoint_reference(model, data, q_d) - model.kp * np.asarray(q_m) - model.kd * np.asarray(qd_m)


def _diag(v: np.ndarray) -> np.ndarray:
    """Batched diagonal matrix from (..., n) to (..., n, n)."""
    return v[..., :, None] * np.eye(v.shape[-1])


def assemble(M, KG, k, W, d_f, d_fm, B, kp, kd):
    """Linearized matrices M̄ (2.9), D̄ (2.10), K̄ (2.11), each (..., 2n, 2n).

    ``M`` and ``KG`` (2.12) are (..., n, n); the joint parameters ``k, W, d_f, d_fm, B, kp, kd``
    are (..., n) (or (n,)); all leading batch axes broadcast. Pure array function.
    """
    M, KG = np.asarray(M, float), np.asarray(KG, float)
    k, W, d_f, d_fm, B, kp, kd = (np.asarray(x, float) for x in (k, W, d_f, d_fm, B, kp, kd))
    n = M.shape[-1]
    batch = np.broadcast_shapes(M.shape[:-2], KG.shape[:-2], *(x.shape[:-1] for x in
                                                                (k, W, d_f, d_fm, B, kp, kd)))
    Mbar = np.zeros(batch + (2 * n, 2 * n))
    Dbar = np.zeros_like(Mbar)
    Kbar = np.zeros_like(Mbar)
    Mbar[..., :n, :n] = M
    Mbar[..., n:, n:] = _diag(B)
    Dbar[..., :n, :n] = _diag(d_f)
    Dbar[..., n:, n:] = _diag(d_fm + kd)
    kw = _diag(k * W)
    Kbar[..., :n, :n] = KG + kw * W[..., None, :]
    Kbar[..., :n, n:] = -kw
    Kbar[..., n:, :n] = -kw
    Kbar[..., n:, n:] = _diag(k + kp)
    return Mbar, Dbar, Kbar


def load_stiffness(model, data, q) -> np.ndarray:
    """K_G = ∂g/∂q − ∂(Jᵀ τ_ext)/∂q at q (2.12), (n, n)."""
    KG = gravity_stiffness(model, data, q)
    w = _wrench(model)
    return KG if w is None else KG - wrench_stiffness(model, data, q, w)


def linearize(model, data, q) -> LinearizedSystem:
    """Linearize the closed loop (2.6) about the set-point q (2.7)-(2.12)."""
    q = np.array(q, dtype=float)
    M, KG, comp = configuration_terms(model, data, q[None, :])
    Mbar, Dbar, Kbar = assemble(M[0], KG[0], model.k, model.W, model.d_f, model.d_fm, model.B,
                                model.kp, model.kd)
    return LinearizedSystem(Mbar, Dbar, Kbar, q, equilibrium_from_compensation(model, q, comp[0]))


def state_matrix(Mbar, Dbar, Kbar) -> np.ndarray:
    """State matrix A = [[0, I], [−M̄⁻¹K̄, −M̄⁻¹D̄]] (2.14), (..., 4n, 4n); batched."""
    Mbar = np.asarray(Mbar, float)
    m = Mbar.shape[-1]
    batch = np.broadcast_shapes(Mbar.shape[:-2], np.shape(Dbar)[:-2], np.shape(Kbar)[:-2])
    rhs = np.concatenate(np.broadcast_arrays(Kbar, Dbar), axis=-1)
    A = np.zeros(batch + (2 * m, 2 * m))
    A[..., :m, m:] = np.eye(m)
    A[..., m:, :] = -np.linalg.solve(np.broadcast_to(Mbar, batch + (m, m)),
                                     np.broadcast_to(rhs, batch + (m, 2 * m)))
    return A


class _StateTemplate(NamedTuple):
    """Configuration-independent parts of A (2.14) for one model: ``A`` with the identity block and
    the motor rows −B⁻¹[−K W, K + K_P, 0, D_m + K_D] filled, and ``rhs`` = [K W², −K W, D] (n, 3n),
    to which K_G is added before the link rows −M⁻¹ rhs are solved."""

    A: np.ndarray
    rhs: np.ndarray


_TEMPLATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def state_template(model) -> _StateTemplate:
    """The cached :class:`_StateTemplate` of ``model`` (models are immutable: computed once)."""
    tpl = _TEMPLATES.get(model)
    if tpl is None:
        n, kw = model.n, model.k * model.W
        A = np.zeros((4 * n, 4 * n), order="F")    # column-major: LAPACK takes it without a copy
        A[: 2 * n, 2 * n:] = np.eye(2 * n)
        motor = A[3 * n:]
        motor[:, :n] = np.diag(kw / model.B)
        motor[:, n: 2 * n] = -np.diag((model.k + model.kp) / model.B)
        motor[:, 3 * n:] = -np.diag((model.d_fm + model.kd) / model.B)
        rhs = np.hstack([np.diag(kw * model.W), -np.diag(kw), np.diag(model.d_f)])
        tpl = _TEMPLATES[model] = _StateTemplate(A, rhs)
    return tpl


def closed_loop_state_matrix(model, M, KG) -> np.ndarray:
    """State matrix A (2.14) of the closed loop from M(q) and K_G (2.12), (..., n, n) each.

    Equal to ``state_matrix(*assemble(M, KG, ...))`` but exploits the structure of M̄ = diag(M, B)
    (2.9): only the link rows −M⁻¹[K_G + K W², −K W, D, 0] depend on q (one n×n solve with 3n
    right-hand sides); the rest comes from a per-model template. Batched over leading axes (one
    configuration with M⁻¹ already known: :func:`single_state_matrix`).
    """
    tpl = state_template(model)
    M, KG = np.asarray(M, float), np.asarray(KG, float)
    n = model.n
    batch = M.shape[:-2]
    A = np.repeat(tpl.A[None], int(np.prod(batch, dtype=int)), axis=0).reshape(batch + tpl.A.shape)
    rhs = np.broadcast_to(tpl.rhs, batch + tpl.rhs.shape).copy()
    rhs[..., :n] += KG
    A[..., 2 * n: 3 * n, : 3 * n] = -np.linalg.solve(M, rhs)
    return A


def single_state_matrix(model, M_inv, KG, out: np.ndarray | None = None) -> np.ndarray:
    """A (2.14) of one configuration from M(q)⁻¹ (e.g. Pinocchio's computeMinverse) and K_G, in
    column-major order (for LAPACK), written into ``out`` (4n, 4n) if given: link rows
    −M⁻¹[K_G + K W², −K W, D] by one n × 3n product."""
    tpl = state_template(model)
    n = model.n
    if out is None:
        A = tpl.A.copy(order="F")
    else:
        A = out
        np.copyto(A, tpl.A)
    rhs = tpl.rhs.copy()
    rhs[:, :n] += KG
    np.matmul(-M_inv, rhs, out=A[2 * n: 3 * n, : 3 * n])
    return A


def _bias_torque(model, data, q, qd) -> np.ndarray:
    """C(q, q̇) q̇ + g(q) [N·m or N] by Pinocchio's RNEA with zero acceleration."""
    return pin.rnea(model.pin, data, q, qd, np.zeros(model.n)).copy()


def closed_loop_acceleration(model, data, q_d, z, zdot) -> np.ndarray:
    """Nonlinear closed loop Γ = 0 (2.4)/(2.6) solved for z̈ = [q̈; q̈_m] (2n,).

    Plant (2.1) with viscous friction, controller (2.2) with set-point ``q_d``; for
    finite-difference cross-checks of the linearization (2.8).
    """
    n = model.n
    z, zdot = np.asarray(z, float), np.asarray(zdot, float)
    q, q_m, qd, qd_m = z[:n], z[n:], zdot[:n], zdot[n:]
    spring = model.k * (model.W * q - q_m)
    link_rhs = -_bias_torque(model, data, q, qd) - model.d_f * qd - model.W * spring
    w = _wrench(model)
    if w is not None:
        link_rhs = link_rhs + wrench_torque(model, data, q, w)
    tau_m = setpoint_motor_torque(model, data, q_d, q_m, qd_m)
    motor_rhs = tau_m - model.d_fm * qd_m + spring
    qdd = np.linalg.solve(mass_matrix(model, data, q), link_rhs)
    return np.concatenate([qdd, motor_rhs / model.B])

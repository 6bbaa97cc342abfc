"""What an input shaper along a path does not treat, and its share of the predicted residual (no rclpy).

**What the shaper does not treat** (:class:`Untreated`, reported with every design): (1) tracked
modes that are not shaped (damping ratio ≥ the selection limit, e.g. overdamped servo modes, or
below the contribution threshold), predicted as above; (2) the velocity-dependent (Coriolis and
centrifugal) torques C(y, ẏ)ẏ of the reference, second order in the move and absent from the
linearized model: their modal amplitudes ‖J_p u_q‖ |∫ u_qᵀ (−C ẏ) / (uᵀ(2λM̄ + D̄)u) e^{∫λ} dt|
with the mode shapes of ``SHAPE_POINTS`` configurations along the path, an estimate of the floor
that large fast moves reach (within a factor ~3 either way of what the simulation shows on
kuka_lwr4; computed for each candidate design, whose ranking it enters,
:mod:`flexmodal_ros.shaping.design_choice`); (3) with a PD law
without static compensation while tracking (``law="pd_only"``) the step of the motor reference
when the hold law takes over at the end, r_hold(q_f) − K_P W q_f, which excites the modes
whatever the shaping (amplitudes from the residue formula with b = that step, decayed to t_c);
(4) Coulomb friction of the model (D_c,m, D_c): an estimate of the band within which the motors
stick, ‖J_p (D_c,m/(K_P W) + D_c/K)‖ [m] at the goal (non-modal; with no link damping the links
ring at about that amplitude whatever the command). Their *share* = untreated / (untreated +
shaped modes' predicted residual); above 1/2, and above 1 % of the unshaped residual (so that they
cap the reduction below 100×), the residual is said to be dominated by them
(:attr:`DesignChoice.dominated`), and callers print that, with the share, instead of a reduction
figure.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..flexible_joint.linear_model import setpoint_reference
from ..flexible_joint.ama import linearized_batch, modal_analysis
from ..robot.model import create_data, ee_jacobian, velocity_torques
from .design_choice import Untreated
from .prediction import path_eigenvalues, progress, trapezoid_weights, wkb_weights
from .reference import ShapedTrajectory, path_derivatives
from .schedule import end_effector_contributions

SHAPE_POINTS = 5               # mode shapes along the path for the second-order estimate
SECOND_ORDER_SAMPLES_PER_PERIOD = 8


@dataclass(frozen=True)
class ModalForcing:
    """Mode shapes of the tracked modes at ``points`` (sample indices) along a path, for modal
    forcing: ``shapes`` (P, n, K) link rows u_q / (uᵀ(2λM̄ + D̄)u), ``gain`` (K,) ‖J_p u_q‖ at the
    last point (m per unit modal amplitude)."""
    points: np.ndarray
    shapes: np.ndarray
    gain: np.ndarray

    def amplitudes(self, model, pm, Y, t, sigma, modes=None, data=None) -> np.ndarray:
        """Complex modal amplitudes (K,) at t[-1] of the Coriolis and centrifugal torques along the
        reference samples ``Y`` (count, ≥2, n) (q, q̇) at the grid ``t`` with progress ``sigma``
        (only tracked ``modes``, default all; the others 0). ``data``: work buffers (created if None)."""
        K = pm.frequencies_hz.shape[1]
        modes = list(range(K)) if modes is None else list(modes)
        out = np.zeros(K, complex)
        if not modes:
            return out
        data = create_data(model) if data is None else data
        torque = -velocity_torques(model, data, Y[:, 0], Y[:, 1])         # link forcing −C(q, q̇)q̇
        sample_p = pm.segment + pm.eta
        near = np.abs(sigma[:, None] - sample_p[self.points][None, :]).argmin(axis=1)
        force = np.einsum("cn,cnk->ck", torque, self.shapes[near][:, :, modes])
        weight = wkb_weights(pm, modes, sigma, t)[0]
        out[modes] = (trapezoid_weights(t)[:, None] * force * weight).sum(axis=0)
        return out


def modal_forcing(model, pm, data=None) -> ModalForcing:
    """:class:`ModalForcing` at ``SHAPE_POINTS`` samples of ``pm`` (evenly spaced, both ends; the
    nearest anchors of the path analysis when ``pm`` carries their results, whose mode shapes are
    then reused). ``data``: work buffers (created if None)."""
    K, n = pm.frequencies_hz.shape[1], model.n
    points = np.unique(np.linspace(0, pm.eta.size - 1, SHAPE_POINTS).round().astype(int))
    anchors = np.asarray(pm.anchors, int)
    if len(pm.anchor_results) == anchors.size and anchors.size:
        at = np.unique(np.abs(points[:, None] - anchors[None, :]).argmin(axis=1))
        points, results = anchors[at], [pm.anchor_results[a] for a in at]
    else:
        results = [None] * points.size
    lam = path_eigenvalues(pm)
    data = create_data(model) if data is None else data
    (M, D, _), _ = linearized_batch(model, data, pm.configurations[points])
    shapes = np.zeros((points.size, n, K), complex)
    for i, (s, result) in enumerate(zip(points, results)):
        q = pm.configurations[s]
        result = result if result is not None else modal_analysis(model, q, data)
        u = result.mode_shapes[:, np.abs(result.eigenvalues[None, :] - lam[s][:, None]).argmin(axis=1)]
        norm = 2.0 * lam[s] * np.einsum("ik,ij,jk->k", u, M[i], u) + np.einsum("ik,ij,jk->k", u, D[i], u)
        shapes[i] = u[:n] / norm
    gain = np.linalg.norm(ee_jacobian(model, data, q)[:3] @ u[:n], axis=0)
    return ModalForcing(points, shapes, gain)


def second_order(model, pm, reference, end, forcing, data=None) -> np.ndarray:
    """Estimate (K,) [m] of the residual each tracked mode gets from the Coriolis and centrifugal
    torques of ``reference`` (module docstring), at time ``end``: on a grid of
    ``SECOND_ORDER_SAMPLES_PER_PERIOD`` samples per period of the fastest selected mode (an
    estimate: (ωh)²/12 ≈ 5 %), 0 for the modes faster than that. ``data``: work buffers."""
    modes = list(range(pm.frequencies_hz.shape[1]))
    fastest = pm.frequencies_hz.max(axis=0)
    rate = max(100.0, SECOND_ORDER_SAMPLES_PER_PERIOD * float(fastest[list(pm.selected)].max()))
    duration = float(reference.duration)
    t = np.linspace(0.0, duration, max(3, int(np.ceil(duration * rate)) + 1))
    Y = reference.evaluate(t, 2) if isinstance(reference, ShapedTrajectory) else path_derivatives(reference, t)[0]
    slow = np.flatnonzero(fastest <= rate / SECOND_ORDER_SAMPLES_PER_PERIOD)          # the others: 0
    amplitude = np.abs(forcing.amplitudes(model, pm, Y, t, progress(reference, t)[:, 0], slow, data))
    if end > duration:
        amplitude = amplitude * np.exp(path_eigenvalues(pm, modes)[-1].real * (end - duration))
    return forcing.gain * amplitude



def untreated_parts(model, pm, prediction, common_time, end_time, law="pd", data=None, coulomb=None) -> Untreated:
    """:class:`Untreated` (module docstring) for the ``prediction`` of the chosen design; ``data``:
    work buffers (created if None), ``coulomb``: :func:`coulomb_band` at the goal if known."""
    sel = set(pm.selected)
    per = prediction.per_mode_m
    modes = {k + 1: float(per[k]) for k in range(per.size) if k not in sel and np.isfinite(per[k]) and per[k] > 0}
    treated = float(np.nansum(per[list(sel)])) if sel else 0.0
    q_goal = pm.configurations[-1]
    data = create_data(model) if data is None else data
    switch = 0.0
    if law == "pd_only":
        goal = modal_analysis(model, q_goal, data)
        step = setpoint_reference(model, data, q_goal) - model.kp * model.W * q_goal
        amp = end_effector_contributions(model, data, q_goal, step / (model.kp * model.W), goal)
        switch = float(np.sum(amp * np.exp(goal.eigenvalues.real * max(common_time - end_time, 0.0))))
    coulomb = coulomb_band(model, q_goal, data) if coulomb is None else coulomb
    return Untreated(modes, prediction.second_order_m, switch, coulomb, treated)


def coulomb_band(model, q_goal, data=None) -> float:
    """Estimate [m] of the band within which Coulomb friction leaves the end effector at the goal
    (module docstring, part 4); 0 without Coulomb friction."""
    if not (np.any(model.d_cm > 0) or np.any(model.d_c > 0)):
        return 0.0
    band = model.d_cm / (model.kp * model.W) + model.d_c / model.k      # stick band in link units [rad or m]
    data = create_data(model) if data is None else data
    return float(np.linalg.norm(ee_jacobian(model, data, q_goal)[:3] @ band))



"""Residual of a one-segment move with the configuration-dependent and velocity-dependent forcing (no rclpy).

The linearized prediction (:mod:`flexmodal_ros.shaping.prediction`) drives each mode by the
progress rate σ' with a constant input (the mode's step contribution c_k) and the Coriolis
estimate (:mod:`flexmodal_ros.shaping.untreated`) adds the quadratic torques with the nearest of
five mode shapes. On large fast moves neither is accurate enough to design against (kuka_lwr4,
seed-1 random move 1 of benchmarks/bench_shaper_floor.py: the robust design's linear residual is
2 % of its simulated one, and that residual stays 1.6× fixed's with the Coriolis torques removed
from the plant: the configuration dependence of the modes' input matters as much). Here both
come from one model along the path.

**Model.** One segment, y(σ) = q_0 + Δq σ; x_s(σ) = [y; q_m^d(y)] the quasi-static state of the
set-point law (2.3) at y. For the deviation e = x − x_s(σ(t)) the closed loop (2.9)-(2.11) at
the current configuration gives, to first order in e,

    M̄ ë + D̄ ė + K̄ e = f(t) = −M̄ (x_s' σ'' + x_s'' σ'²) − D̄ x_s' σ' − [C(y, Δq)Δq; 0] σ'²,

(x_s' = dx_s/dσ by central differences; C(y, ẏ)ẏ = σ'² C(y, Δq)Δq on a straight line). Mode k
(eigenvalue λ_k, shape u_k with its phase kept continuous along the path; state-space right
vector V_k = [u_k; λ_k u_k], left W_k = [(λ_k M̄ + D̄)u_k; M̄u_k] / n_k, n_k = u_kᵀ(2λ_k M̄ + D̄)u_k,
W_kᵀV_j = δ_kj) has the modal coordinate η_k = W_kᵀ[e; ė] with

    η' = Λ η + (u_kᵀ f / n_k)_k + σ' G η,     G_kj = (dW_k/dσ)ᵀ V_j

(the shaped modes only, the conjugate terms left out: they rotate at the sum of the
frequencies). G couples modes whose shapes turn into each other; its diagonal is the slow change
of a mode's amplitude. With the propagator P(T_e, t) of η' = (Λ + σ'G)η and one integration by
parts of the σ'' term (σ' = 0 at both ends of a rest-to-rest reference):

    η(T_e) = ∫ P(T_e, t) [L(σ) σ' + (Q(σ) + G m(σ)) σ'²] dt,
    m_k = u_kᵀ(−M̄ x_s')/n_k,  L_k = u_kᵀ(−D̄ x_s')/n_k + λ_k m_k,
    Q_k = u_kᵀ(−M̄ x_s'' − [CΔq; 0])/n_k − dm_k/dσ.

With constant matrices L_k = u_kᵀ b/(λ_k n_k) (b the motor-reference step): the residue of the
linearized prediction; Q and G are what it leaves out. The end-effector residual of mode k is
‖J_p u_k,q(goal)‖ |η_k| [m] (the convention of c_k). L, Q, m, G come from the anchors of the
path analysis (their mode shapes), interpolated linearly in σ (G per anchor interval); P is
exact on the diagonal and applies the coupling every ``_COARSE`` grid steps.

**Validity.** First order in G: the model holds while σ'|G_kj| stays below the rate at which the
two modes' phases separate, |λ_k − λ_j|. The ratio max σ'|G_kj| / |λ_k − λ_j| along the path
(:attr:`PathForcing.adiabatic`, peak σ' of the unshaped path) above ``MAX_ADIABATIC`` (two shaped
modes close or crossing: 17-64 on the seed-1 kuka_lwr4 moves with crossings, where the model's
prediction of the unshaped residual is off by up to 9×) and the design is not built.

**Design** (:func:`forcing_design`, the ``robust-coriolis`` candidate of ``auto``): the robust
design's least squares (:mod:`flexmodal_ros.shaping.robust_design`: impulses on a time grid, as
long as the robust design, Σ A = 1, A ≥ 0, the linear rows at ±10 % eigenvalues) with the nominal
rows from this model. η is quadratic in A through σ'²: Newton-linearized about the previous
solution σ_0 (σ'² ≈ 2σ_0'σ' − σ_0'²), coefficients, eigenvalues and P taken along σ_0,
``FORCING_ITERATIONS`` rounds from the robust design.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.ama import linearized_batch, modal_analysis
from ..flexible_joint.linear_model import motor_equilibrium
from ..robot.model import create_data, ee_jacobian, velocity_torques
from .prediction import _path_parameter, path_eigenvalues, progress, trapezoid_weights, wkb_weights
from .robust_design import ROBUST_DELTA, ROBUST_WEIGHT, constant_schedule
from .shapers import DEFAULT_TOLERANCE, convolve, design

FORCING_DESIGN = "robust-coriolis"     # auto's fifth candidate (flexmodal_ros.shaping.design_choice)
FORCING_ITERATIONS = 3
FORCING_GAIN = 0.25           # auto takes robust-coriolis when predicted <= this x the rule's choice ...
FORCING_RESOLUTION = 0.01      # ... and that choice's residual is >= this x the unshaped one (both by this model)
MAX_ADIABATIC = 1.0            # above: two shaped modes too close for the first-order coupling (not built)
_COARSE = 8                    # grid steps per step of the coupling (within one: the diagonal part only)
_STEP = 1e-4                   # finite-difference step in σ for x_s' and x_s''


@dataclass(frozen=True)
class PathForcing:
    """L_k, Q_k (P, K) complex at progress ``sigma`` (P,) (module docstring) and ``gain`` (K,)
    ‖J_p u_k,q‖ at the goal [m per unit modal coordinate]."""
    sigma: np.ndarray
    L: np.ndarray
    Q: np.ndarray
    gain: np.ndarray
    M: np.ndarray
    G: np.ndarray
    adiabatic: float = 0.0

    def at(self, s, modes):
        """(L, Q, M) (m, k) of tracked ``modes`` interpolated at progress s (m,) and their
        coupling G (m, k, k) on the anchor interval of each."""
        i = np.clip(np.searchsorted(self.sigma, s, side="right") - 1, 0, self.sigma.size - 2)
        w = np.clip((s - self.sigma[i]) / (self.sigma[i + 1] - self.sigma[i]), 0.0, 1.0)[:, None]
        L, Q, M = self.L[:, modes], self.Q[:, modes], self.M[:, modes]
        return ((1 - w) * L[i] + w * L[i + 1], (1 - w) * Q[i] + w * Q[i + 1], (1 - w) * M[i] + w * M[i + 1],
                self.G[:, modes][:, :, modes][i])

    def propagate(self, pm, modes, sigma, rate, t):
        """(P (count, k, k), coefficients (count, k) of σ' and of σ'²) for tracked ``modes`` along
        the progress ``sigma``, ``rate`` on the uniform grid ``t``: η(T_e) = Σ_i h_i P_i (a_i σ'_i
        + b_i σ'_i²) (module docstring, with the coupling)."""
        L, Q, M, G = self.at(sigma, list(modes))
        lam = _interpolated_eigenvalues(pm, modes, sigma)
        h = t[1] - t[0]
        phase = np.zeros_like(lam)                                              # ∫_0^t λ (trapezoidal)
        np.cumsum(0.5 * h * (lam[1:] + lam[:-1]), axis=0, out=phase[1:])
        k = len(modes)
        coupling = (h * rate)[:, None, None] * G                                # σ' G dt per grid step
        nodes = np.unique(np.r_[np.arange(0, t.size, _COARSE), t.size - 1])
        P = np.empty((t.size, k, k), complex)
        here = np.eye(k, dtype=complex)
        P[-1] = here
        for a, b in zip(nodes[-2::-1], nodes[:0:-1]):                           # coupling per coarse step
            inner = here * np.exp(phase[b] - phase[a:b])[:, None, :]            # diagonal inside [a, b)
            here = inner[0] @ (np.eye(k) + coupling[a:b].sum(axis=0))
            P[a + 1:b] = inner[1:]
            P[a] = here
        return P, L, Q + np.einsum("ckm,cm->ck", G, M)


def path_forcing(model, pm, path) -> PathForcing:
    """:class:`PathForcing` of the tracked modes of ``pm`` along the one-segment ``path`` at the
    anchors of the path analysis, with the coupling G and its adiabatic ratio (module docstring).
    InputError for a path of more than one segment."""
    if path.positions.shape[0] != 2:
        raise InputError("trajectory: the forcing model needs a one-segment move (2 waypoints)")
    n, K = model.n, pm.frequencies_hz.shape[1]
    data = create_data(model)
    q0, dq = path.positions[0], path.positions[1] - path.positions[0]
    points = np.asarray(pm.anchors, int)
    if points.size < 2 or len(pm.anchor_results) != points.size:
        points = np.unique(np.linspace(0, pm.eta.size - 1, 9).round().astype(int))
        results = [None] * points.size
    else:
        results = list(pm.anchor_results)
    sigma = (pm.segment + pm.eta)[points]
    lam = path_eigenvalues(pm)[points]                                    # (P, K)
    (M, D, _), _ = linearized_batch(model, data, q0 + np.outer(sigma, dq))
    steps = np.array([-_STEP, 0.0, _STEP])
    L, Qp, mx = (np.zeros((points.size, K), complex) for _ in range(3))
    prev, gain, left, right = None, None, [], []
    for i, (s, result) in enumerate(zip(sigma, results)):
        y = q0 + dq * s
        result = result if result is not None else modal_analysis(model, y, data)
        u = result.mode_shapes[:, np.abs(result.eigenvalues[None, :] - lam[i][:, None]).argmin(axis=1)].copy()
        if prev is not None:                                                  # continuous phase along the path
            turn = np.einsum("ik,ik->k", prev.conj(), u)
            u *= np.where(np.abs(turn) > 0, turn.conj() / np.maximum(np.abs(turn), 1e-300), 1.0)
        prev = u
        norm = 2.0 * lam[i] * np.einsum("ik,ij,jk->k", u, M[i], u) + np.einsum("ik,ij,jk->k", u, D[i], u)
        pi = u / norm                                                         # (2n, K)
        qm = np.array([motor_equilibrium(model, data, y + dq * h) for h in steps])
        d1 = np.concatenate([dq, (qm[2] - qm[0]) / (2 * _STEP)])
        d2 = np.concatenate([np.zeros(n), (qm[2] - 2 * qm[1] + qm[0]) / _STEP ** 2])
        cor = np.concatenate([velocity_torques(model, data, y[None], dq[None])[0], np.zeros(n)])
        mx[i] = pi.T @ (-M[i] @ d1)
        L[i] = pi.T @ (-D[i] @ d1) + lam[i] * mx[i]
        Qp[i] = pi.T @ (-M[i] @ d2 - cor)
        gain = np.linalg.norm(ee_jacobian(model, data, y)[:3] @ u[:n], axis=0)
        W = np.concatenate([(lam[i] * (M[i] @ u)) + D[i] @ u, M[i] @ u]) / norm     # left, W_kᵀ V_k = 1
        V = np.concatenate([u, lam[i] * u])
        left.append(W)
        right.append(V)
    Q = Qp - np.gradient(mx, sigma, axis=0)
    G = np.stack([((left[i + 1] - left[i]) / (sigma[i + 1] - sigma[i])).T @ (0.5 * (right[i] + right[i + 1]))
                  for i in range(sigma.size - 1)])                                # (P − 1, K, K)
    sel = list(pm.selected)
    mid = 0.5 * (lam[1:, sel] + lam[:-1, sel])                                   # (P − 1, k)
    gap = np.abs(mid[:, :, None] - mid[:, None, :]) + np.where(np.eye(len(sel), dtype=bool), np.inf, 0.0)
    peak_rate = float(_path_parameter(path, np.linspace(0.0, path.duration, 201))[1].max())
    adiabatic = float((np.abs(G[:, sel][:, :, sel]) * peak_rate / gap).max())
    return PathForcing(sigma, L, Q, gain, mx, G, adiabatic)


def _interpolated_eigenvalues(pm, modes, sigma):
    lam = path_eigenvalues(pm, modes)
    sample_p = pm.segment + pm.eta
    i = np.clip(np.searchsorted(sample_p, sigma, side="right") - 1, 0, sample_p.size - 2)
    gap = sample_p[i + 1] - sample_p[i]
    w = np.clip((sigma - sample_p[i]) / np.where(gap > 0, gap, 1.0), 0.0, 1.0)[:, None]
    return (1.0 - w) * lam[i] + w * lam[i + 1]


def _grid(pm, duration, modes):
    fastest = float(pm.frequencies_hz[:, modes].max())
    return np.linspace(0.0, duration, max(3, int(np.ceil(duration * max(200.0, 20.0 * fastest))) + 1))


def forcing_residual(forcing: PathForcing, pm, reference, end=None, modes=None) -> np.ndarray:
    """End-effector residual (K,) [m] of tracked ``modes`` (default the selected ones; others 0)
    left by ``reference`` (the path or a shaped reference of it) at time ``end`` (default its
    end), on the model of the module docstring."""
    modes = list(pm.selected if modes is None else modes)
    out = np.zeros(pm.frequencies_hz.shape[1])
    duration = float(reference.duration)
    t = _grid(pm, duration, modes)
    sig = progress(reference, t)
    rate = sig[:, 1]
    P, a, b = forcing.propagate(pm, modes, sig[:, 0], rate, t)
    source = trapezoid_weights(t)[:, None] * (a * rate[:, None] + b * (rate ** 2)[:, None])
    eta = np.einsum("ckm,cm->k", P, source)
    if end is not None and end > duration:
        eta = eta * np.exp(path_eigenvalues(pm, modes)[-1] * (end - duration))
    out[modes] = forcing.gain[modes] * np.abs(eta)
    return out


def forcing_schedule(forcing: PathForcing, pm, path, start, duration, delta, robust_weight,
                     iterations=FORCING_ITERATIONS):
    """(amplitudes, delays) of the design of the module docstring: impulses on a grid over
    [0, ``duration``], from the constant sequence ``start`` (amplitudes, delays), eigenvalues
    scaled by 1 ± ``delta`` in the robustness rows (weight ``robust_weight``)."""
    from scipy.optimize import nnls   # deferred: scipy.optimize

    sel = list(pm.selected)
    fastest = float(pm.frequencies_hz[:, sel].max()) * (1.0 + delta)
    steps = int(np.clip(np.ceil(duration * fastest * 8), 16, 160))
    delays = np.linspace(0.0, duration, steps + 1)
    end = path.duration + duration
    t = np.linspace(0.0, end, int(np.ceil(end * max(200.0, 20.0 * fastest))) + 1)
    h = trapezoid_weights(t)
    c = pm.contributions[sel]
    copies = _path_parameter(path, t[:, None] - delays[None, :])[1] * h[:, None]      # (count, J), fixed
    A, tau = start
    for _ in range(iterations):
        p, dp = _path_parameter(path, t[:, None] - tau[None, :])
        sigma, rate0 = p @ A, dp @ A
        P, a, b = forcing.propagate(pm, sel, sigma, rate0, t)
        eff = np.einsum("ckm,cm->ck", P, a + 2.0 * b * rate0[:, None]) * forcing.gain[sel]       # (count, K)
        nominal = eff.T.real @ copies + 1j * (eff.T.imag @ copies)            # (K, J) [m]; BLAS (complex @ real is not)
        offset = -np.einsum("ckm,cm->k", P, b * (rate0 ** 2 * h)[:, None]) * forcing.gain[sel]
        w = wkb_weights(pm, sel, sigma, t, (1.0, 1.0 - delta, 1.0 + delta))
        ws = (robust_weight * c)[None, None, :] * w[1:]                          # linear rows at 1 ± delta
        scaled = np.concatenate([x.T.real @ copies + 1j * (x.T.imag @ copies) for x in ws])
        rows = np.vstack([nominal, scaled])
        target = np.concatenate([-offset, np.zeros(scaled.shape[0])])
        scale = 30.0 * np.abs(rows).max()
        matrix = np.vstack([rows.real, rows.imag, np.full((1, delays.size), scale)])
        rhs = np.concatenate([target.real, target.imag, [scale]])
        try:
            x, _ = nnls(matrix, rhs, maxiter=50 * delays.size)
        except RuntimeError as exc:
            raise InputError(f"forcing design: no solution ({exc})") from None
        x = np.where(x > 1e-9 * x.sum(), x, 0.0)
        keep = x > 0
        keep[0] = True
        if not x.sum() > 0:
            raise InputError("forcing design: no solution")
        A, tau = x[keep] / x[keep].sum(), delays[keep]
    return A, tau


def forcing_design(forcing: PathForcing, pm, path, kind, start, tolerance=DEFAULT_TOLERANCE):
    """Constant schedule of the ``robust-coriolis`` design (module docstring): as long as the
    robust design (the family's shaper at each selected mode's lowest frequency), ±``ROBUST_DELTA``
    rows, from the constant schedule ``start`` (the robust design's)."""
    sel = list(pm.selected)
    f, z = pm.frequencies_hz[:, sel], pm.damping_ratios[:, sel]
    duration = float(convolve(*(design(kind, f[i, j], z[i, j], tolerance)
                                for j, i in enumerate(f.argmin(axis=0)))).duration)
    A, tau = forcing_schedule(forcing, pm, path, (start.amplitudes[0], start.delays[0]), duration, ROBUST_DELTA,
                              ROBUST_WEIGHT)
    return constant_schedule(pm.segment, pm.eta, A, tau, f"{FORCING_DESIGN} {kind}")

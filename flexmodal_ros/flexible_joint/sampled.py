"""Modal analysis of the sampled-data closed loop: the set-point law (2.2) run by a digital
controller at a finite rate with zero-order hold (beyond the thesis, whose AMA (2.13)-(2.17)
assumes a continuous law).

The plant (2.1) linearized about (q^d, q_m^d) without its controller, x = [δq; δq_m; δq̇; δq̇_m],

    ẋ = A_p x + B_u u,   A_p = [[0, I], [−M̄⁻¹K̄_p, −M̄⁻¹D̄_p]],   B_u = [0; M̄⁻¹[0; I]],

with K̄_p, D̄_p = (2.10)-(2.11) minus the gains K_P, K_D, is sampled exactly over the period
T = 1/rate: Φ = e^{A_p T}, Γ = ∫₀ᵀ e^{A_p s} ds B_u. The law's deviation u = −F x,
F = [0 K_P 0 K_D], is evaluated at the sampling instants and held:

- ``hold="zoh"``: u_k = −F x_k applied at once → x_{k+1} = (Φ − Γ F) x_k;
- ``hold="zoh-delay"``: u_k = −F x_{k−1} (computed at t_k, applied one period later, as in a ROS
  loop) → [x_{k+1}; u_{k+1}] = [[Φ, Γ], [−F, 0]] [x_k; u_k].

The discrete poles μ map back to continuous-time equivalents λ = ln(μ)/T — damped frequencies up to
the Nyquist frequency rate/2; a pole whose continuous counterpart lies above Nyquist is unwrapped
onto the branch ln μ + 2πjm nearest the continuous AMA's eigenvalues (its frequency is then
reported with ``above_nyquist`` set) — and f = |λ|/2π, ζ = −Re λ/|λ| as in (2.16)-(2.17). Mode
shapes are the [δq; δq_m] rows of the eigenvectors, like the continuous :class:`ModalResult`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from .linear_model import linearize, state_matrix
from .ama import ModalResult, check_configurations
from ..robot.model import create_data
from ..modes import TWO_PI, is_oscillatory, is_real, modes_from_eigenpairs
from ..core.validation import finite_scalar, finite_vector, shown
from scipy.linalg import expm

HOLDS = ("zoh", "zoh-delay")


@dataclass(frozen=True, kw_only=True)
class SampledModalResult(ModalResult):
    """:class:`~flexmodal_ros.flexible_joint.ama.ModalResult` of the sampled-data loop plus
    ``controller_rate_hz``, ``hold`` and ``above_nyquist`` (m,) bool: modes whose continuous
    counterpart lies above the Nyquist frequency (unwrapped, see the module docstring)."""

    controller_rate_hz: float
    hold: str
    above_nyquist: np.ndarray

    def to_dict(self, joint_names=None) -> dict:
        out = super().to_dict(joint_names)
        out.update({"controller_rate_hz": self.controller_rate_hz, "hold": self.hold,
                    "above_nyquist": self.above_nyquist.tolist()})
        return out


def check_hold(hold: str) -> str:
    if hold not in HOLDS:
        raise InputError(f"hold: must be one of {', '.join(HOLDS)}, got {shown(hold)}")
    return hold


def sampled_modal_analysis(model, q, controller_rate_hz: float, hold: str = "zoh", data=None) -> SampledModalResult:
    """Modes of the closed loop with the set-point law sampled at ``controller_rate_hz`` [Hz] and
    held (``hold``), linearized about configuration ``q`` (module docstring)."""
    rate = finite_scalar(controller_rate_hz, "controller_rate_hz")
    if rate <= 0:
        raise InputError(f"controller_rate_hz: must be > 0 Hz, got {controller_rate_hz}")
    check_hold(hold)
    q = check_configurations(model, finite_vector(q, None, "q"))[0]
    data = data if data is not None else create_data(model)
    lin, A_p, B_u, F = open_loop(model, data, q)
    n = model.n
    T = 1.0 / rate
    aug = np.zeros((5 * n, 5 * n))
    aug[:4 * n, :4 * n], aug[:4 * n, 4 * n:] = A_p, B_u

    E = expm(aug * T)
    Phi, Gamma = E[:4 * n, :4 * n], E[:4 * n, 4 * n:]
    if hold == "zoh":
        A_d = Phi - Gamma @ F
    else:
        A_d = np.block([[Phi, Gamma], [-F, np.zeros((n, n))]])
    mu, vec = np.linalg.eig(A_d)
    continuous = np.linalg.eigvals(state_matrix(lin.M, lin.D, lin.K))
    lam = _unwrap(mu, rate, continuous)
    # One member per conjugate pair: poles mapped onto the Nyquist line (real μ < 0) or unwrapped
    # to Im λ < 0 are flipped to Im λ > 0 together with their eigenvectors.
    flip = lam.imag < 0
    lam = np.where(flip, lam.conj(), lam)
    vec = np.where(flip[None, :], vec.conj(), vec)
    keep = _one_per_pair(lam)
    mode = modes_from_eigenpairs(lam[keep], vec[:, keep], rows=slice(0, 2 * n))[0]
    above = mode.frequencies_hz * np.sqrt(np.clip(1 - mode.damping_ratios ** 2, 0, 1)) > 0.5 * rate * (1 - 1e-9)
    return SampledModalResult(**mode.mode_fields(), q=q.copy(), motor_equilibrium=lin.q_m,
                              controller_rate_hz=rate, hold=hold, above_nyquist=above)


def open_loop(model, data, q):
    """The plant linearized about q without its controller (module docstring):
    (LinearizedSystem (2.8)-(2.11), A_p (4n, 4n), B_u (4n, n), F (n, 4n)) with the closed loop
    A = A_p − B_u F of (2.14)."""
    lin = linearize(model, data, q)
    n = model.n
    D_p, K_p = lin.D.copy(), lin.K.copy()
    D_p[n:, n:] -= np.diag(model.kd)
    K_p[n:, n:] -= np.diag(model.kp)
    A_p = state_matrix(lin.M, D_p, K_p)
    B_u = np.vstack([np.zeros((2 * n, n)), np.linalg.inv(lin.M)[:, n:]])
    F = np.zeros((n, 4 * n))
    F[:, n:2 * n] = np.diag(model.kp)
    F[:, 3 * n:] = np.diag(model.kd)
    return lin, A_p, B_u, F


def _unwrap(mu, rate, continuous):
    """λ = rate·(ln μ + 2πjm), m ∈ {−1, 0, 1} nearest (in the complex plane) to a continuous pole."""
    mu = np.asarray(mu, complex)
    base = rate * np.log(np.where(np.abs(mu) < 1e-300, 1e-300, mu))
    base = np.where(is_real(mu) & (mu.real < 0), base.real + 1j * np.pi * rate, base)
    branches = base[:, None] + 1j * TWO_PI * rate * np.array([-1, 0, 1])[None, :]
    dist = np.abs(branches[:, :, None] - continuous[None, None, :]).min(axis=2)
    pick = np.argmin(dist + 1e-9 * np.abs(np.array([-1, 0, 1]))[None, :], axis=1)
    return branches[np.arange(mu.size), pick]


def _one_per_pair(lam):
    """Indices keeping one member of each conjugate pair (after flipping, pairs coincide)."""
    keep, used = [], np.zeros(lam.size, bool)
    for i in np.argsort(-lam.imag):
        if used[i]:
            continue
        used[i] = True
        keep.append(i)
        if is_oscillatory(lam[i]):
            twin = np.flatnonzero(~used & (np.abs(lam - lam[i]) <= 1e-9 * max(1.0, abs(lam[i]))))
            if twin.size:
                used[twin[0]] = True
    return np.array(sorted(keep), int)

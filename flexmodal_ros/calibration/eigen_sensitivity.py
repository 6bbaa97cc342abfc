"""Sensitivity of the closed loop's modes to the joint stiffness and damping (k, d_f, d_fm).

The closed loop linearized about a configuration (thesis (2.8)-(2.14)) has the state matrix
A = [[0, I], [−M̄⁻¹K̄, −M̄⁻¹D̄]]. K̄ (2.11) and D̄ (2.10) are affine in the joint parameters and
M̄ (2.9) does not depend on them, so for joint j

    ∂K̄/∂k_j = [[W_j², −W_j], [−W_j, 1]] on the entries (j, j), (j, n+j), (n+j, j), (n+j, n+j),
    ∂D̄/∂d_f,j = e_j e_jᵀ,   ∂D̄/∂d_fm,j = e_{n+j} e_{n+j}ᵀ,
    ∂A/∂p = [[0, 0], [−M̄⁻¹ ∂K̄/∂p, −M̄⁻¹ ∂D̄/∂p]].

A simple eigenvalue λ_i with right eigenvector φ_i (A φ = λ φ) and left eigenvector ψ_i (the row
i of V⁻¹, so that ψ_i φ_i = 1) moves by dλ_i/dp = ψ_i (∂A/∂p) φ_i (first-order perturbation; for
non-normalized vectors ψᵀ(∂A/∂p)φ / ψᵀφ).

The loop may instead be closed by a digital controller at rate 1/T with zero-order hold
(:mod:`flexmodal_ros.flexible_joint.sampled`): the plant without its gains, A_p, B_u, F = [0 K_P 0 K_D]
(:func:`~flexmodal_ros.flexible_joint.sampled.open_loop`), is sampled exactly,
[Φ Γ] = the top rows of exp([[A_p, B_u], [0, 0]] T), and the loop matrix is A_d = Φ − Γ F
(``zoh``) or [[Φ, Γ], [−F, 0]] (``zoh-delay``: the command applied one period late). ∂A_p/∂p = ∂A/∂p
(the gains are not unknowns, B_u does not depend on p), ∂[Φ Γ]/∂p is the Fréchet derivative of the
matrix exponential in the direction [[∂A_p/∂p, 0], [0, 0]] T (SciPy ``expm_frechet``), the discrete
pole μ moves by dμ = ψ (∂A_d/∂p) φ and its continuous-time equivalent λ = ln(μ)/T by
dλ = dμ/(μ T). Only poles whose damped frequency is below the Nyquist frequency are modes of the
sampled loop here (principal logarithm); the others cannot be measured at that rate.

Modes are those of :class:`~flexmodal_ros.modes.modeset.ModeSet` (Im λ > 0, ascending frequency,
mode shapes = the [δq; δq_m] rows of φ); f and ζ derivatives follow from
:func:`~flexmodal_ros.modes.uncertainty.mode_derivatives`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.linear_model import linearize, state_matrix
from ..flexible_joint.sampled import HOLDS, open_loop
from ..identification.inverse_eigen import KINDS
from ..modes.modeset import ModeSet, modes_from_eigen
from ..modes.uncertainty import mode_derivatives
from ..robot.model import create_data, with_overrides
from ..core.validation import shown


@dataclass(frozen=True)
class LoopModel:
    """How the hold law closes the loop: ``rate_hz`` None = evaluated continuously (the AMA's
    (2.14)); else sampled at ``rate_hz`` [Hz] and held (``hold`` zoh | zoh-delay)."""

    rate_hz: float | None = None
    hold: str = "zoh"

    def __post_init__(self):
        if self.hold not in HOLDS:
            raise InputError(f"hold: must be one of {', '.join(HOLDS)}, got {shown(self.hold)}")
        if self.rate_hz is not None and not (np.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise InputError(f"controller_rate_hz: must be > 0 Hz, got {self.rate_hz}")

    @property
    def label(self) -> str:
        return "continuous law" if self.rate_hz is None else f"law sampled at {self.rate_hz:g} Hz ({self.hold})"

    def to_dict(self) -> dict:
        return {"controller_rate_hz": self.rate_hz, "hold": self.hold}


CONTINUOUS = LoopModel()


@dataclass(frozen=True)
class Unknowns:
    """The parameters to calibrate: ``kinds`` ("k", "d_f", "d_fm" per entry) and ``joints``
    (0-based joint index per entry); :attr:`names` "k/joint_1", ... (the identification's)."""

    kinds: tuple
    joints: tuple
    joint_names: tuple

    @classmethod
    def build(cls, model, kinds=KINDS, joints=None) -> "Unknowns":
        """Every kind of ``kinds`` for every joint of ``joints`` (names or 0-based indices; None =
        all), in the order kind-major (as the identification)."""
        kinds = tuple(k for k in KINDS if k in tuple(kinds))
        if not kinds:
            raise InputError("unknowns: choose at least one of k, d_f, d_fm")
        if joints is None:
            idx = list(range(model.n))
        else:
            idx = []
            for j in joints:
                if isinstance(j, str):
                    if j not in model.joint_names:
                        raise InputError(f"joints: unknown joint {shown(j)}; robot has {', '.join(model.joint_names)}")
                    j = model.joint_names.index(j)
                if not 0 <= int(j) < model.n:
                    raise InputError(f"joints: index {j} outside 0..{model.n - 1}")
                idx.append(int(j))
            idx = sorted(set(idx))
            if not idx:
                raise InputError("joints: no joint given")
        pairs = [(k, j) for k in kinds for j in idx]
        return cls(tuple(k for k, _ in pairs), tuple(j for _, j in pairs), tuple(model.joint_names))

    @property
    def size(self) -> int:
        return len(self.kinds)

    @property
    def names(self) -> tuple:
        return tuple(f"{k}/{self.joint_names[j]}" for k, j in zip(self.kinds, self.joints))

    def values(self, model) -> np.ndarray:
        """The model's values of the unknowns (P,)."""
        return np.array([getattr(model, k)[j] for k, j in zip(self.kinds, self.joints)], float)

    def apply(self, model, p):
        """``model`` with the unknowns set to ``p`` (P,) (a new immutable model)."""
        p = np.asarray(p, float)
        changes = {}
        for kind in KINDS:
            mask = np.array([k == kind for k in self.kinds])
            if mask.any():
                v = np.array(getattr(model, kind), float)
                v[np.array(self.joints)[mask]] = p[mask]
                changes[kind] = v
        return with_overrides(model, **changes)


@dataclass(frozen=True)
class ModeSensitivity:
    """The modes of one configuration and their first derivatives with respect to the unknowns.

    ``modes`` a :class:`~flexmodal_ros.modes.modeset.ModeSet` (mode shapes (2n, m) rows [q; q_m]);
    ``d_eigenvalues`` (m, P) complex dλ/dp [1/s per unit of p]; ``d_frequency`` (m, P) [Hz per
    unit] and ``d_damping`` (m, P) [1 per unit]; ``state_vectors`` (4n, m) the modes' right
    eigenvectors of the continuous A (for excitation responses; None for a sampled loop);
    ``loop`` the :class:`LoopModel`."""

    q: np.ndarray
    modes: ModeSet
    d_eigenvalues: np.ndarray
    d_frequency: np.ndarray
    d_damping: np.ndarray
    loop: LoopModel

    @property
    def frequencies_hz(self):
        return self.modes.frequencies_hz

    @property
    def damping_ratios(self):
        return self.modes.damping_ratios


def parameter_directions(model, unknowns: Unknowns):
    """(∂K̄/∂p, ∂D̄/∂p) as dense (P, 2n, 2n) arrays (module docstring)."""
    n = model.n
    W = np.asarray(model.W, float)
    dK = np.zeros((unknowns.size, 2 * n, 2 * n))
    dD = np.zeros_like(dK)
    for i, (kind, j) in enumerate(zip(unknowns.kinds, unknowns.joints)):
        if kind == "k":
            dK[i, j, j], dK[i, j, n + j], dK[i, n + j, j], dK[i, n + j, n + j] = W[j] ** 2, -W[j], -W[j], 1.0
        elif kind == "d_f":
            dD[i, j, j] = 1.0
        else:
            dD[i, n + j, n + j] = 1.0
    return dK, dD


def state_matrix_directions(Mbar, dK, dD):
    """∂A/∂p (P, 4n, 4n) = [[0, 0], [−M̄⁻¹∂K̄, −M̄⁻¹∂D̄]] (module docstring)."""
    m = Mbar.shape[0]
    Minv = np.linalg.inv(Mbar)
    out = np.zeros((dK.shape[0], 2 * m, 2 * m))
    out[:, m:, :m] = -Minv @ dK
    out[:, m:, m:] = -Minv @ dD
    return out


def mode_sensitivity(model, q, unknowns: Unknowns, loop: LoopModel = CONTINUOUS, data=None) -> ModeSensitivity:
    """Modes at configuration ``q`` and their derivatives with respect to ``unknowns`` for the loop
    ``loop`` (module docstring)."""
    data = create_data(model) if data is None else data
    q = np.asarray(q, float)
    n = model.n
    dK, dD = parameter_directions(model, unknowns)
    if loop.rate_hz is None:
        lin = linearize(model, data, q)
        A = state_matrix(lin.M, lin.D, lin.K)
        dA = state_matrix_directions(lin.M, dK, dD)
        w, V = np.linalg.eig(A)
        left = np.linalg.inv(V)
        dw = np.einsum("ik,pkl,li->ip", left, dA, V)                  # ψ_i ∂A φ_i
        lam, dlam = w, dw
    else:
        from scipy.linalg import expm_frechet    # deferred: scipy.linalg only for a sampled loop

        lin, A_p, B_u, F = open_loop(model, data, q)
        T = 1.0 / loop.rate_hz
        dA = state_matrix_directions(lin.M, dK, dD)
        size = 4 * n
        aug = np.zeros((5 * n, 5 * n))
        aug[:size, :size], aug[:size, size:] = A_p, B_u
        E, dE = None, []
        for d in dA:
            direction = np.zeros_like(aug)
            direction[:size, :size] = d * T
            E, frechet = expm_frechet(aug * T, direction, compute_expm=True)
            dE.append(frechet)
        if E is None:
            from scipy.linalg import expm   # deferred: as above (no unknowns: the exponential alone)
            E = expm(aug * T)
        Phi, Gamma = E[:size, :size], E[:size, size:]
        if loop.hold == "zoh":
            A_d = Phi - Gamma @ F
            dA_d = [d[:size, :size] - d[:size, size:] @ F for d in dE]
        else:
            A_d = np.block([[Phi, Gamma], [-F, np.zeros((n, n))]])
            dA_d = [np.block([[d[:size, :size], d[:size, size:]], [np.zeros((n, 5 * n))]]) for d in dE]
        mu, V = np.linalg.eig(A_d)
        left = np.linalg.inv(V)
        dmu = (np.einsum("ik,pkl,li->ip", left, np.array(dA_d), V) if dA_d
               else np.zeros((mu.size, 0), complex))
        safe = np.where(np.abs(mu) > 1e-300, mu, 1e-300)
        lam = np.log(safe) * loop.rate_hz                                  # principal branch
        dlam = dmu / (safe[:, None] * T)
    modes = modes_from_eigen(lam, V, rows=slice(0, 2 * n))
    idx = np.array([int(np.argmin(np.abs(lam - e))) for e in modes.eigenvalues], int)
    d_lam = dlam[idx] if idx.size else np.zeros((0, unknowns.size), complex)
    df, dz = mode_derivatives(modes.eigenvalues, d_lam)
    return ModeSensitivity(q.copy(), modes, d_lam, df, dz, loop)


def loop_modes(model, q, loop: LoopModel = CONTINUOUS, data=None) -> ModeSet:
    """The modes of the loop ``loop`` at ``q`` without derivatives (:func:`mode_sensitivity` with no
    unknowns)."""
    empty = Unknowns((), (), tuple(model.joint_names))
    return mode_sensitivity(model, q, empty, loop, data).modes

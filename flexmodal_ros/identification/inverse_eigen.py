"""Identification of joint stiffness and damping from modal data (thesis ch. 3).

Inverse eigenvalue problem of T.T. Do (2021), §3.4: in configuration i the linearized closed loop
(2.8) has the quadratic eigenproblem (M̄ λ² + D̄ λ + K̄) u = 0 (3.14). With the SPD square root
M̄ = S̄ S̄ (3.15), a measured pair (f̂, ζ̂) gives λ̂ = −ω̂ζ̂ + jω̂√(1−ζ̂²) (3.20), ω̂ = 2π f̂, and
the true parameters make

    |Â| = det((I λ̂² + S̄⁻¹ D̂ S̄⁻¹ λ̂ + S̄⁻¹ K̂ S̄⁻¹) / ω̂) = 0             (3.17), (3.31)

The unknowns (any subset of k (3.26), d_f, d_fm (3.27); the rest from the robot config) minimize
F = Σ (Re |Â|)² + (Im |Â|)² (3.28) in the box 0 ≤ p ≤ p_max (3.29)-(3.30), (3.42). This module
is the problem (:class:`IdentificationProblem`: residuals, F, exact Jacobians); the multistart
solve is :mod:`flexmodal_ros.identification.fit`, the result and its verdict
:mod:`flexmodal_ros.identification.report`, the measured data :mod:`flexmodal_ros.identification.measurements`.

Because D̂ and K̂ are affine in (k, d_f, d_fm) ((2.10)-(2.11)) and M̄, S̄, K_G are fixed per
configuration, the characteristic matrices are precomputed as A_i(p) = C0_i + Σ_j p_j C_ij: one
evaluation is a batched complex determinant over all measurements, and the Jacobian is exact,
∂|A|/∂p_j = tr(adj(A) C_j) (Jacobi's formula, adjugate from the SVD so it stays valid at the
singular optimum).

Second objective (not in the thesis), ``"eigenvalue"``: residual (λ_model − λ̂)/ω̂ (Re, Im) with
λ_model the model eigenvalue of the measured mode (``mode_index``) or the nearest one in the complex
plane; exact Jacobian from first-order eigenvalue perturbation. The default objective is
chosen by the noise comparison in README ("Identification").

Units: f [Hz], ζ fraction (0.05 = 5 %), k [N·m/rad] (prismatic: as in the config), d [N·m·s/rad
or N·s/m]. Residuals and F are dimensionless per objective (determinant: [rad/s]^{2n} scaling).

Success (:attr:`~flexmodal_ros.identification.report.IdentificationResult.success`) means more than
convergence: the residual must be within ``RESIDUAL_NOISE_LIMIT`` times the level the assumed
measurement noise explains, and every unknown must be identifiable from the data (standard deviation at
most ``NOT_IDENTIFIABLE_STD`` times its value).

Sizes are bounded (``MAX_STARTS``, the data's limits in :mod:`.measurements`, and the precomputed problem
``MAX_PROBLEM_BYTES``): a larger request is an InputError before anything of that size is allocated.
"""
from __future__ import annotations

import numpy as np

from ..core.errors import InputError
from ..flexible_joint.linear_model import assemble, load_stiffness, state_matrix
from ..robot.model import create_data, mass_matrix
from ..flexible_joint.ama import check_configurations
from ..modes import TWO_PI, eigenvalues_from, is_oscillatory, is_real, mode_order
from ..core.validation import shown, shown_names
from .measurements import ModalData, bound

KINDS = ("k", "d_f", "d_fm")
OBJECTIVES = ("determinant", "eigenvalue")
# Default objective, chosen by the comparison of benchmarks/bench_identification.py (README): under
# ±1/±2 pp damping noise eigenvalue matching recovers d_f markedly better and k comparably, and the
# determinant (3.31) of a 6-DOF (12x12) system is swamped by round-off (F ≈ 1e49 at the truth).
DEFAULT_OBJECTIVE = "eigenvalue"
K_MAX_DEFAULT = 5000.0                   # (3.42) [N·m/rad]
D_MAX_DEFAULT = 100.0                    # (3.42) [N·m·s/rad]
DEFAULT_STARTS = 30
# Assumed measurement noise (standard deviations) for the identifiability report: relative
# frequency and absolute damping ratio; OMA and AMA agree within about 0.05 Hz (≤ 0.8 %) and
# 0.05 pp in thesis Table 2.5.
NOISE_FREQUENCY_REL = 0.001
NOISE_DAMPING = 0.0005
REL_STD_LIMIT = 0.5                      # std > 50 % of the value → "not determined by the data" (warning)
NOT_IDENTIFIABLE_STD = 1.0               # std > 100 % of the value → not identifiable: no success
RESIDUAL_NOISE_LIMIT = 10.0              # RMS residual > 10× the noise-explained level: no success
RANK_RTOL = 1e-10                        # singular values below RANK_RTOL·σ_max count as zero
# Size limits of one identification (a request beyond them is refused before allocating; the data's
# in :mod:`.measurements`).
MAX_STARTS = 10_000
MAX_PROBLEM_BYTES = 512 * 2 ** 20        # precomputed characteristic matrices [bytes]


def problem_bytes(n, configurations, measured_modes, unknowns):
    """Estimated memory [bytes] of the precomputed problem: complex (N, P+1, 2n, 2n) characteristic
    terms and real (m, P+1, 2n, 2n) damping/stiffness bases with their temporaries."""
    block = (unknowns + 1) * (2 * n) ** 2
    return 16 * measured_modes * block + 48 * configurations * block


def check_problem_size(n, configurations, measured_modes, unknowns):
    """InputError naming the sizes if the problem would exceed MAX_PROBLEM_BYTES."""
    need = problem_bytes(n, configurations, measured_modes, unknowns)
    if need > MAX_PROBLEM_BYTES:
        raise InputError(f"measurements: {configurations} configurations, {measured_modes} measured modes and "
                         f"{unknowns} unknowns need about {need / 2 ** 20:.0f} MiB, more than the limit of "
                         f"{MAX_PROBLEM_BYTES / 2 ** 20:.0f} MiB; use fewer measurements or unknowns")


def parse_unknowns(unknowns) -> tuple:
    """Unknown kinds as a tuple in canonical order; ``None``/empty = all of k, d_f, d_fm.

    Accepts a comma-separated string or a sequence of "k", "d_f", "d_fm"."""
    if unknowns is None:
        return KINDS
    items = [u.strip() for u in unknowns.split(",")] if isinstance(unknowns, str) else list(unknowns)
    items = [u for u in items if u]
    bad = sorted(set(items) - set(KINDS))
    if bad:
        raise InputError(f"unknowns: unknown parameter(s) {shown_names(bad)} (choose from k, d_f, d_fm)")
    return tuple(k for k in KINDS if k in items) or KINDS


class IdentificationProblem:
    """Precomputed inverse eigenvalue problem for one robot model and one :class:`ModalData`.

    Holds only arrays (picklable, sent to the multistart worker processes). Parameter vector
    ``p`` (P,) = the unknowns in the order of :attr:`names` ("k/joint_1", ...), physical units.
    """

    def __init__(self, model, data: ModalData, unknowns=None, objective=DEFAULT_OBJECTIVE,
                 k_max=None, d_max=None):
        if objective not in OBJECTIVES:
            raise InputError(f"objective: must be one of {', '.join(OBJECTIVES)}, got {shown(objective)}")
        self.objective_name = objective
        self.kinds = parse_unknowns(unknowns)
        check_configurations(model, data.q, "measurements.q")
        n = self.n = model.n
        if data.mode_index.max() >= 2 * n:
            raise InputError(f"mode_index: the model has {2 * n} modes (0..{2 * n - 1}), got {data.mode_index.max()}")
        self.joint_names = tuple(model.joint_names)
        self.names = tuple(f"{kind}/{j}" for kind in self.kinds for j in self.joint_names)
        if len(self.names) >= data.num_measurements:
            raise InputError(f"unknowns: {len(self.names)} unknowns need more than {len(self.names)} measured "
                             f"modes (3.32), got {data.num_measurements}; measure more modes or fix parameters")
        check_problem_size(n, data.q.shape[0], data.num_measurements, len(self.names))
        k_max = K_MAX_DEFAULT if k_max is None else bound(k_max, "k_max")
        d_max = D_MAX_DEFAULT if d_max is None else bound(d_max, "d_max")
        self.upper = np.repeat([k_max if k == "k" else d_max for k in self.kinds], n)
        self.base = {kind: np.array(getattr(model, kind), float) for kind in KINDS}
        self.fixed = dict(W=np.array(model.W), B=np.array(model.B), kp=np.array(model.kp),
                          kd=np.array(model.kd))
        self.data = data
        mdata = create_data(model)
        self.M = np.array([mass_matrix(model, mdata, q) for q in data.q])
        self.KG = np.array([load_stiffness(model, mdata, q) for q in data.q])
        self.Mbar = assemble(self.M, self.KG, **self._params(np.zeros(len(self.names))))[0]
        w, v = np.linalg.eigh(self.Mbar)                         # S̄⁻¹ = V diag(w^-1/2) Vᵀ (3.15)
        self.Sinv = (v / np.sqrt(w)[:, None, :]) @ np.swapaxes(v, 1, 2)
        self._basis()
        self.C0, self.C = self._det_terms(*measured_eigenvalues(data.frequency_hz, data.damping_ratio))

    # -- parameters
    def _params(self, p) -> dict:
        """Keyword arguments of :func:`linearize.assemble` for the unknowns ``p``."""
        values = {kind: self.base[kind].copy() for kind in KINDS}
        for i, kind in enumerate(self.kinds):
            values[kind] = np.asarray(p[i * self.n:(i + 1) * self.n], float)
        return dict(k=values["k"], d_f=values["d_f"], d_fm=values["d_fm"], **self.fixed)

    def full_parameters(self, p):
        """(k, d_f, d_fm) per joint for the unknowns ``p`` (config values for the others)."""
        kw = self._params(p)
        return kw["k"], kw["d_f"], kw["d_fm"]

    def _basis(self):
        """S̄⁻¹D̂S̄⁻¹ and S̄⁻¹K̂S̄⁻¹ as affine functions of p: constant parts (m, 2n, 2n) and
        per-unknown parts (m, P, 2n, 2n), obtained from :func:`linearize.assemble` (exact: affine)."""
        P = len(self.names)
        p = np.vstack([np.zeros(P), np.eye(P)])                 # (P+1, P): zero, then unit vectors
        kw = self._params(p.T)                                  # per-joint arrays (n, P+1) → transpose
        kw = {key: (val.T if val.ndim == 2 else val) for key, val in kw.items()}
        _, D, K = assemble(self.M[:, None], self.KG[:, None], **kw)   # (m, P+1, 2n, 2n)
        S = self.Sinv[:, None]
        D, K = S @ D @ S, S @ K @ S
        self.Dt0, self.Kt0 = D[:, 0], K[:, 0]
        self.Dt, self.Kt = D[:, 1:] - D[:, :1], K[:, 1:] - K[:, :1]

    def _det_terms(self, lam, omega):
        """C0 (N, 2n, 2n) and C (N, P, 2n, 2n) with A_i(p) = C0_i + Σ_j p_j C_ij (3.31)."""
        c = self.data.config
        eye = np.eye(2 * self.n)
        L = lam[:, None, None]
        C0 = (L ** 2 * eye + L * self.Dt0[c] + self.Kt0[c]) / omega[:, None, None]
        C = (L[:, None] * self.Dt[c] + self.Kt[c]) / omega[:, None, None, None]
        return C0, C

    def check_finite(self, p):
        """InputError naming the measured mode(s) (and the unknowns) at which the residuals are not
        finite at ``p`` (an overflow of the measured values or of the model with these unknowns)."""
        with np.errstate(all="ignore"):
            res = self.residuals(p)
        bad = np.flatnonzero(~np.isfinite(res.reshape(-1, 2)).all(axis=1))
        if bad.size == 0:
            return
        d = self.data
        which = ", ".join(f"{d.entry(i)} = {d.frequency_hz[i]:g} Hz / {d.entry(i, 'damping_ratio')} = "
                          f"{d.damping_ratio[i]:g}" for i in bad[:3]) + (f" and {bad.size - 3} more" if bad.size > 3 else "")
        raise InputError(f"{which}: the residuals of these measured modes are not finite at the unknowns "
                         f"{', '.join(f'{n} = {v:.4g}' for n, v in zip(self.names, p))} (values too large for "
                         f"the objective '{self.objective_name}'; check them, their units, k_max and d_max)")

    # -- residuals
    def residuals(self, p, frequency_hz=None, damping_ratio=None) -> np.ndarray:
        """Residual vector (2N,) = [Re, Im] per measured mode (interleaved) at unknowns ``p``;
        optional measured values replace the data's (for sensitivity to measurement noise)."""
        p = np.asarray(p, float)
        perturbed = frequency_hz is not None or damping_ratio is not None
        f = self.data.frequency_hz if frequency_hz is None else frequency_hz
        z = self.data.damping_ratio if damping_ratio is None else damping_ratio
        if self.objective_name == "determinant":
            C0, C = self._det_terms(*measured_eigenvalues(f, z)) if perturbed else (self.C0, self.C)
            res = np.linalg.det(C0 + np.einsum("j,ijkl->ikl", p, C))
        else:
            lam, omega = measured_eigenvalues(f, z)
            res = (self._model_eigen(p, lam) - lam) / omega
        return np.column_stack([res.real, res.imag]).ravel()

    def _model_eigen(self, p, lam, vectors=False):
        """Model eigenvalue (Im ≥ 0) matched to each measured λ̂ (N,): the ``mode_index``-th mode
        (ascending |λ|) if given and present, else the nearest in the complex plane. Eigenvalues of
        the state matrix (2.14) in the coordinates v = S̄u (unit mass); with ``vectors=True`` also
        the matched v (N, 2n) and the damping matrices S̄⁻¹D̂S̄⁻¹ (N, 2n, 2n)."""
        Dt = self.Dt0 + np.einsum("j,mjkl->mkl", p, self.Dt)
        Kt = self.Kt0 + np.einsum("j,mjkl->mkl", p, self.Kt)
        A = state_matrix(np.eye(2 * self.n), Dt, Kt)
        c = self.data.config
        if vectors:
            w, V = np.linalg.eig(A)
            w, V = w[c], V[c]
        else:
            w = np.linalg.eigvals(A)[c]                                          # (N, 4n)
        order, count = mode_order(w)
        idx = self.data.mode_index
        indexed = order[np.arange(w.shape[0]), np.maximum(idx, 0)]
        upper_half = is_oscillatory(w) | is_real(w)                     # one member per pair, and the real ones
        nearest = np.argmin(np.where(upper_half, np.abs(w - lam[:, None]), np.inf), axis=1)
        pick = np.where((idx >= 0) & (idx < count), indexed, nearest)
        lam_model = np.take_along_axis(w, pick[:, None], 1)[:, 0]
        if not vectors:
            return lam_model
        v = np.take_along_axis(V[:, :2 * self.n], pick[:, None, None], 2)[:, :, 0]
        return lam_model, v, Dt[c]

    def objective(self, p) -> float:
        """F = Σ r² (3.28)."""
        r = self.residuals(p)
        return float(r @ r)

    def jacobian(self, p) -> np.ndarray:
        """Exact ∂r/∂p (2N, P). Determinant: Jacobi's formula ∂|A|/∂p_j = tr(adj(A) C_j) with the
        SVD adjugate. Eigenvalue: for the symmetric quadratic (Iλ² + D̃λ + K̃)v = 0 (3.16) the left
        eigenvector is vᵀ, so ∂λ/∂p_j = −vᵀ(λD̃_j + K̃_j)v / vᵀ(2λI + D̃)v."""
        p = np.asarray(p, float)
        if self.objective_name == "determinant":
            A = self.C0 + np.einsum("j,ijkl->ikl", p, self.C)
            G = np.einsum("ilk,ijkl->ij", _adjugate(A), self.C)
        else:
            lam, omega = measured_eigenvalues(self.data.frequency_hz, self.data.damping_ratio)
            lm, v, Dt = self._model_eigen(p, lam, vectors=True)
            c = self.data.config
            L = lm[:, None, None, None]
            num = np.einsum("ik,ijkl,il->ij", v, L * self.Dt[c] + self.Kt[c], v)
            den = np.einsum("ik,ikl,il->i", v, 2 * lm[:, None, None] * np.eye(2 * self.n) + Dt, v)
            G = -num / (den * omega)[:, None]
        return np.stack([G.real, G.imag], axis=1).reshape(-1, p.size)


def measured_eigenvalues(frequency_hz, damping_ratio):
    """λ̂ = −ω̂ζ̂ + jω̂√(1−ζ̂²) (3.20) and ω̂ = 2π f̂ [rad/s]."""
    return eigenvalues_from(frequency_hz, damping_ratio), TWO_PI * np.asarray(frequency_hz, float)


def _adjugate(A):
    """Batched adjugate adj(A) = det(A) A⁻¹ via the SVD A = U Σ Vᴴ (valid for singular A):
    adj(A) = det(U) det(Vᴴ) V diag(Π_{j≠i} σ_j) Uᴴ."""
    U, s, Vh = np.linalg.svd(A)
    ones = np.ones(s.shape[:-1] + (1,))
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)
    right = np.cumprod(np.concatenate([ones, s[..., :0:-1]], -1), -1)[..., ::-1]
    others = left * right
    phase = np.linalg.det(U) * np.linalg.det(Vh)
    adj = (np.conj(np.swapaxes(Vh, -1, -2)) * others[..., None, :]) @ np.conj(np.swapaxes(U, -1, -2))
    return phase[..., None, None] * adj

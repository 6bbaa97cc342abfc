"""Identification of joint stiffness and damping from modal data (thesis ch. 3).

Inverse eigenvalue problem of T.T. Do (2021), §3.4: in configuration i the linearized closed loop
(2.8) has the quadratic eigenproblem (M̄ λ² + D̄ λ + K̄) u = 0 (3.14). With the SPD square root
M̄ = S̄ S̄ (3.15), a measured pair (f̂, ζ̂) gives λ̂ = −ω̂ζ̂ + jω̂√(1−ζ̂²) (3.20), ω̂ = 2π f̂, and
the true parameters make

    |Â| = det((I λ̂² + S̄⁻¹ D̂ S̄⁻¹ λ̂ + S̄⁻¹ K̂ S̄⁻¹) / ω̂) = 0             (3.17), (3.31)

The unknowns (any subset of k (3.26), d_f, d_fm (3.27); the rest from the robot config) minimize
F = Σ (Re |Â|)² + (Im |Â|)² (3.28) in the box 0 ≤ p ≤ p_max (3.29)-(3.30), (3.42), by bounded
nonlinear least squares (SciPy ``least_squares``, trust-region reflective) from uniformly random
multi-starts; the lowest F wins (thesis: MATLAB lsqnonlin + MultiStart).

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

Success (:attr:`IdentificationResult.success`) means more than convergence: the residual must be
within ``RESIDUAL_NOISE_LIMIT`` times the level the assumed measurement noise explains, and every
unknown must be identifiable from the data (standard deviation at most ``NOT_IDENTIFIABLE_STD``
times its value); otherwise the message says what is wrong and how to change the request.

Sizes are bounded (``MAX_STARTS``, ``MAX_CONFIGURATIONS``, ``MAX_MEASURED_MODES``, and the
precomputed problem ``MAX_PROBLEM_BYTES``): a larger request is an InputError before anything of
that size is allocated. Multistarts run on a :class:`~flexmodal_ros.core.workers.WorkerPool` (given,
or a temporary one) and stop early through a :class:`~flexmodal_ros.core.workers.StopToken`.
"""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

from ..core.errors import InputError
from ..flexible_joint.linear_model import assemble, load_stiffness, state_matrix
from ..robot.model import create_data, mass_matrix
from ..flexible_joint.ama import check_configurations
from ..modes import TWO_PI, eigenvalues_from, is_oscillatory, is_real, mode_order
from ..robot.registry import resolve_model
from ..core.validation import (finite_array, finite_scalar, finite_vector, frozen, load_yaml_mapping, positive,
                         reject_unknown_keys, require_keys, shown)
from ..core.workers import NO_STOP, WorkerPool

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
# Size limits of one identification (a request beyond them is refused before allocating).
MAX_STARTS = 10_000
# Handing a request's chunks of starts to a running WorkerPool and collecting them [s] (process
# round trips of pickled problems; benchmarks/bench_identification.py).
POOL_DISPATCH_S = 0.05
MAX_CONFIGURATIONS = 1_000
MAX_MEASURED_MODES = 5_000
MAX_PROBLEM_BYTES = 512 * 2 ** 20        # precomputed characteristic matrices [bytes]
MAX_BOUND = 1e12                         # k_max, d_max beyond this overflow the residuals
MAX_FREQUENCY_HZ = 1e6                   # measured frequencies beyond this overflow λ² (3.31)


# ----------------------------------------------------------------------------- data model

@dataclass(frozen=True)
class ModalData:
    """Measured modal data: ``q`` (m, n) configurations [rad or m]; per measured mode (N entries):
    ``config`` index into q, ``frequency_hz`` 0 < f̂ <= MAX_FREQUENCY_HZ [Hz], ``damping_ratio``
    0 < ζ̂ < 1, ``mode_index`` 0-based model mode (ascending frequency) or −1 = match
    automatically; ``style`` how its entries are named in messages ("request": flat arrays
    frequencies_hz[i] as in IdentifyJointParameters, "file": measurements[c].modes[j] of a data
    file)."""
    q: np.ndarray
    config: np.ndarray
    frequency_hz: np.ndarray
    damping_ratio: np.ndarray
    mode_index: np.ndarray
    style: str = "request"

    @property
    def num_measurements(self) -> int:
        return int(self.frequency_hz.size)

    def with_damping(self, damping_ratio) -> "ModalData":
        """Copy with other damping ratios (e.g. shifted by an absolute amount, thesis Table 3.2)."""
        return modal_data_arrays(self.q, self.config, self.frequency_hz, damping_ratio, self.mode_index, self.style)

    def entry(self, i, field="frequency_hz") -> str:
        """Name of measured mode ``i``'s ``field`` (frequency_hz, damping_ratio, mode_index) as the
        user wrote it (:attr:`style`)."""
        return entry_name(self.config, i, field, self.style)


def modal_data(measurements, n: int, field_name: str = "measurements") -> ModalData:
    """Validate nested measurements ``[{q: [...], modes: [{frequency_hz, damping_ratio,
    mode_index?}, ...]}, ...]`` for a robot with ``n`` joints; InputError names the entry."""
    if not isinstance(measurements, (list, tuple)) or not measurements:
        raise InputError(f"{field_name}: empty (need at least one configuration with measured modes)")
    qs, config, freq, zeta, index = [], [], [], [], []
    check_sizes(len(measurements), 0)
    for i, meas in enumerate(measurements):
        where = f"{field_name}[{i}]"
        if not isinstance(meas, dict) or "q" not in meas or "modes" not in meas:
            raise InputError(f"{where}: expected a mapping with 'q' and 'modes'")
        reject_unknown_keys(meas, {"q", "modes"}, where)
        qs.append(finite_vector(meas["q"], None, f"{where}.q"))
        if qs[-1].size != n:
            raise InputError(f"{where}.q: expected {n} joint values, got {qs[-1].size}")
        modes = meas["modes"]
        if not isinstance(modes, (list, tuple)) or not modes:
            raise InputError(f"{where}.modes: empty (need at least one measured mode)")
        for j, mode in enumerate(modes):
            mw = f"{where}.modes[{j}]"
            if not isinstance(mode, dict):
                raise InputError(f"{mw}: expected a mapping with frequency_hz and damping_ratio")
            reject_unknown_keys(mode, {"frequency_hz", "damping_ratio", "mode_index"}, mw)
            require_keys(mode, ("frequency_hz", "damping_ratio"), mw)
            config.append(i)
            freq.append(finite_scalar(mode["frequency_hz"], f"{mw}.frequency_hz"))
            zeta.append(finite_scalar(mode["damping_ratio"], f"{mw}.damping_ratio"))
            index.append(_mode_index(mode.get("mode_index", -1), f"{mw}.mode_index"))
    return modal_data_arrays(np.array(qs), config, freq, zeta, index, style="file")


REQUEST_FIELDS = {"frequency_hz": "frequencies_hz", "damping_ratio": "damping_ratios", "mode_index": "mode_indices"}


def entry_name(config, i, field, style="request") -> str:
    """Measured mode ``i``'s ``field`` as the user wrote it: ``frequencies_hz[i]`` (request arrays)
    or ``measurements[c].modes[j].frequency_hz`` (data file)."""
    if style == "file":
        return f"{_entry(config, i)}.{field}"
    return f"{REQUEST_FIELDS.get(field, field)}[{i}]"


def modal_data_arrays(q, config, frequency_hz, damping_ratio, mode_index=None, style="request") -> ModalData:
    """Validated :class:`ModalData` from flat arrays (see its docstring); errors name the entry as
    the user wrote it (``style``: "request" flat arrays, "file" a data file's measurements)."""
    q = finite_array(q, "q" if style == "file" else "positions", (None, None))
    names = ("frequency_hz", "damping_ratio") if style == "file" else ("frequencies_hz", "damping_ratios")
    f = finite_vector(frequency_hz, None, names[0])
    z = finite_vector(damping_ratio, f.size, names[1])
    c = np.asarray(config, dtype=int).reshape(-1)
    idx = np.full(f.size, -1) if mode_index is None else np.asarray(mode_index, dtype=int).reshape(-1)
    if f.size == 0 or q.shape[0] == 0:
        raise InputError("measurements: empty (need at least one measured mode)")
    check_sizes(q.shape[0], f.size)
    if c.size != f.size or idx.size != f.size:
        raise InputError(f"config/mode_index: expected {f.size} entries (one per measured mode)")
    if c.min() < 0 or c.max() >= q.shape[0]:
        raise InputError(f"config: indices must lie in 0..{q.shape[0] - 1}")
    for name, bad, what in (("frequency_hz", f <= 0, "> 0"),
                            ("frequency_hz", f > MAX_FREQUENCY_HZ, f"<= {MAX_FREQUENCY_HZ:g} Hz"),
                            ("damping_ratio", (z <= 0) | (z >= 1), "in (0, 1) (fraction, not %)")):
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{entry_name(c, i, name, style)}: must be {what}, got "
                             f"{(f if name[0] == 'f' else z)[i]:g}")
    if (idx < -1).any():
        raise InputError(f"{entry_name(c, int(np.argmax(idx < -1)), 'mode_index', style)}: must be >= 0 "
                         "(or -1 = auto)")
    return ModalData(*(frozen(a) for a in (q, c, f, z, idx)), style=style)


def check_sizes(configurations, measured_modes):
    """InputError if the data exceed MAX_CONFIGURATIONS / MAX_MEASURED_MODES."""
    if configurations > MAX_CONFIGURATIONS:
        raise InputError(f"num_configurations: {configurations} is more than the maximum of {MAX_CONFIGURATIONS}")
    if measured_modes > MAX_MEASURED_MODES:
        raise InputError(f"measured modes: {measured_modes} is more than the maximum of {MAX_MEASURED_MODES}")


def _entry(config, i):
    """Name of flat entry ``i`` as measurements[c].modes[j] (modes are stored config by config)."""
    return f"measurements[{config[i]}].modes[{i - int(np.flatnonzero(config == config[i])[0])}]"


def _mode_index(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{where}: expected an integer (0-based mode number), got {shown(value)}")
    return int(value)


# ----------------------------------------------------------------------------- data file

@dataclass(frozen=True)
class DataFile:
    """A parsed identification data file: the robot model, the measurements, optional bounds."""
    model: object
    data: ModalData
    k_max: float | None
    d_max: float | None
    path: Path


DATA_KEYS = {"robot", "urdf", "params", "measurements", "bounds"}


def load_data_file(path) -> DataFile:
    """Read a YAML data file (format in README "Identification" and config/planar_2r_modal_data.yaml):
    ``robot: NAME`` or ``params: F`` (+ optional ``urdf: F``; paths relative to the file),
    ``measurements: [...]`` (see :func:`modal_data`), optional ``bounds: {k_max, d_max}``."""
    path = Path(path)
    raw = load_yaml_mapping(path, "data file")
    reject_unknown_keys(raw, DATA_KEYS, "data file")
    model = _data_file_model(raw, path.parent)
    bounds = raw.get("bounds") or {}
    if not isinstance(bounds, dict):
        raise InputError("bounds: expected a mapping with k_max and/or d_max")
    reject_unknown_keys(bounds, {"k_max", "d_max"}, "bounds")
    k_max, d_max = (None if bounds.get(key) is None else _positive(bounds[key], f"bounds.{key}")
                    for key in ("k_max", "d_max"))
    return DataFile(model, modal_data(raw.get("measurements"), model.n), k_max, d_max, path)


def _data_file_model(raw, base):
    """Robot model of a data file: bundled ``robot`` or ``params`` (+ ``urdf``), paths relative to it."""
    resolve = lambda key: None if not raw.get(key) else str(
        Path(str(raw[key])) if Path(str(raw[key])).is_absolute() else base / str(raw[key]))
    return resolve_model(raw.get("robot"), resolve("urdf"), resolve("params"))


def _positive(value, field):
    return float(positive(finite_scalar(value, field), field))


def _bound(value, field):
    value = _positive(value, field)
    if value > MAX_BOUND:
        raise InputError(f"{field}: must be <= {MAX_BOUND:g}, got {value:g}")
    return value


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


# ----------------------------------------------------------------------------- problem

def parse_unknowns(unknowns) -> tuple:
    """Unknown kinds as a tuple in canonical order; ``None``/empty = all of k, d_f, d_fm.

    Accepts a comma-separated string or a sequence of "k", "d_f", "d_fm"."""
    if unknowns is None:
        return KINDS
    items = [u.strip() for u in unknowns.split(",")] if isinstance(unknowns, str) else list(unknowns)
    items = [u for u in items if u]
    bad = sorted(set(items) - set(KINDS))
    if bad:
        raise InputError(f"unknowns: unknown parameter(s) {bad} (choose from k, d_f, d_fm)")
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
        k_max = K_MAX_DEFAULT if k_max is None else _bound(k_max, "k_max")
        d_max = D_MAX_DEFAULT if d_max is None else _bound(d_max, "d_max")
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
        self.C0, self.C = self._det_terms(*_measured_eigenvalues(data.frequency_hz, data.damping_ratio))

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
            C0, C = self._det_terms(*_measured_eigenvalues(f, z)) if perturbed else (self.C0, self.C)
            res = np.linalg.det(C0 + np.einsum("j,ijkl->ikl", p, C))
        else:
            lam, omega = _measured_eigenvalues(f, z)
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
            lam, omega = _measured_eigenvalues(self.data.frequency_hz, self.data.damping_ratio)
            lm, v, Dt = self._model_eigen(p, lam, vectors=True)
            c = self.data.config
            L = lm[:, None, None, None]
            num = np.einsum("ik,ijkl,il->ij", v, L * self.Dt[c] + self.Kt[c], v)
            den = np.einsum("ik,ikl,il->i", v, 2 * lm[:, None, None] * np.eye(2 * self.n) + Dt, v)
            G = -num / (den * omega)[:, None]
        return np.stack([G.real, G.imag], axis=1).reshape(-1, p.size)


def _measured_eigenvalues(frequency_hz, damping_ratio):
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


# ----------------------------------------------------------------------------- multistart solve

@dataclass(frozen=True)
class IdentificationResult:
    """Outcome of :func:`identify`.

    Per joint (URDF order ``joint_names``): ``stiffness`` k, ``link_damping`` d_f, ``motor_damping``
    d_fm (identified, or the config value when not an unknown). ``unknown_names``/``values``/
    ``standard_deviations``: the unknowns, their identified values and approximate standard
    deviations (same units). ``objective`` F* = Σ r² (3.28); ``residuals`` (N, 2) [Re, Im] per
    measured mode; ``jacobian_rank``/``jacobian_condition`` of the residual Jacobian with columns
    scaled by the parameter magnitudes; ``unidentifiable``: unknowns not determined by the data;
    ``warnings``: human-readable notes; ``start_objectives``: F of every local solution.
    ``residual_noise_ratio``: RMS residual over the RMS residual the assumed noise explains;
    ``not_identifiable``: unknowns whose std exceeds NOT_IDENTIFIABLE_STD × value (no success).
    ``success``: converged, residual_noise_ratio <= RESIDUAL_NOISE_LIMIT and every unknown
    identifiable; otherwise ``message`` says why and how to change the request.
    """
    joint_names: tuple
    stiffness: np.ndarray
    link_damping: np.ndarray
    motor_damping: np.ndarray
    unknown_names: tuple
    values: np.ndarray
    standard_deviations: np.ndarray
    objective: float
    objective_name: str
    residuals: np.ndarray
    success: bool
    message: str
    jacobian_rank: int
    jacobian_condition: float
    unidentifiable: tuple
    warnings: tuple
    start_objectives: np.ndarray
    starts: int
    seed: int
    function_evaluations: int
    residual_noise_ratio: float
    not_identifiable: tuple

    def to_dict(self) -> dict:
        """JSON-ready dict (keys of ``flexmodal identify --json``)."""
        return {
            "success": bool(self.success), "message": self.message,
            "joint_names": list(self.joint_names), "stiffness": self.stiffness.tolist(),
            "link_damping": self.link_damping.tolist(), "motor_damping": self.motor_damping.tolist(),
            "objective": self.objective, "objective_name": self.objective_name,
            "unknown_names": list(self.unknown_names), "values": self.values.tolist(),
            "standard_deviations": self.standard_deviations.tolist(),
            "unidentifiable": list(self.unidentifiable), "warnings": list(self.warnings),
            "jacobian_rank": self.jacobian_rank, "jacobian_condition": self.jacobian_condition,
            "residuals": self.residuals.tolist(), "starts": self.starts, "seed": self.seed,
            "function_evaluations": self.function_evaluations,
            "residual_noise_ratio": self.residual_noise_ratio, "not_identifiable": list(self.not_identifiable),
            "start_objectives": self.start_objectives.tolist(),
        }


def identify(model, data: ModalData, unknowns=None, objective=DEFAULT_OBJECTIVE, starts=DEFAULT_STARTS,
             seed=0, k_max=None, d_max=None, workers=2, noise=(NOISE_FREQUENCY_REL, NOISE_DAMPING),
             pool=None, stop=NO_STOP, progress=None, run_starts=None):
    """Identify the ``unknowns`` (subset of k, d_f, d_fm; default all) of ``model`` from ``data``.

    Bounded least squares (3.28)-(3.30) from ``starts`` points drawn uniformly in the box
    [0, k_max] / [0, d_max] (default (3.42): 5000, 100) with ``numpy.random.default_rng(seed)``
    (the result does not depend on ``workers``, the number of processes; scripts using
    ``workers`` > 1 need the ``if __name__ == "__main__"`` guard of multiprocessing). With
    ``workers`` > 1 or a ``pool`` the first start runs in this process and times the problem: the
    others go to the pool only if its cost (starting a temporary one,
    :meth:`~flexmodal_ros.core.workers.WorkerPool.start_cost`, or handing chunks to a running one,
    ``POOL_DISPATCH_S``) plus their share per worker takes less than running them here, so no
    worker count is slower than one worker.
    ``noise`` = (σ_f/f, σ_ζ) is the measurement noise assumed by the success test and the
    identifiability report. ``pool``: a :class:`~flexmodal_ros.core.workers.WorkerPool` to use instead
    of a temporary one of ``workers`` processes; ``stop``: a
    :class:`~flexmodal_ros.core.workers.StopToken` (raises :class:`~flexmodal_ros.core.workers.Interrupted`);
    ``progress(done, total, best_F)`` is called as local solutions finish.
    ``run_starts(problem, x0)`` replaces both: it returns what :func:`solve_starts` gives for ``x0``
    (starts, P), in start order (e.g. on Dask: :func:`flexmodal_ros.distributed.run_starts`).
    """
    starts, seed, noise = check_options(model, data, unknowns, objective, starts, seed, k_max, d_max, noise)
    workers = _count(workers, "workers", 64)
    problem = IdentificationProblem(model, data, unknowns, objective, k_max, d_max)
    x0 = np.random.default_rng(seed).uniform(size=(starts, len(problem.names)))
    if run_starts is not None:
        local = run_starts(problem, x0)
    elif starts > 1 and (pool is not None or workers > 1):
        began = time.perf_counter()
        local = solve_starts(problem, x0[:1], stop)                 # times one start in this process
        alone = (time.perf_counter() - began) * (starts - 1)       # the rest here [s]
        cost = POOL_DISPATCH_S if pool is not None else WorkerPool.start_cost()
        count = pool.workers if pool is not None else workers
        rest = None if progress is None else (          # counts include the first start
            lambda done, total, best: progress(done + 1, total + 1, min(best, local[0][1])))
        if cost + alone / count >= alone:                          # a pool does not pay: stay here
            local += solve_starts(problem, x0[1:], stop, rest)
        elif pool is not None:
            local += _run_starts(pool, problem, x0[1:], stop, rest)
        else:
            with WorkerPool(workers, preload=[__name__]) as own:
                local += _run_starts(own, problem, x0[1:], own.token(stop.deadline), rest)
    else:
        local = solve_starts(problem, x0, stop, progress)
    best = min(range(starts), key=lambda i: (local[i][1], i))
    x, F, _, status, message = _polish(problem, local[best], stop)
    p = x * problem.upper
    return _result(problem, p, F, status > 0, message, local, seed, noise)


def check_options(model, data, unknowns=None, objective=DEFAULT_OBJECTIVE, starts=DEFAULT_STARTS, seed=0,
                  k_max=None, d_max=None, noise=(NOISE_FREQUENCY_REL, NOISE_DAMPING)):
    """The cheap checks of :func:`identify` (same arguments), without building the problem:
    InputError naming the field. Returns (starts, seed, noise) as int, int, (float, float)."""
    kinds = parse_unknowns(unknowns)
    if objective not in OBJECTIVES:
        raise InputError(f"objective: must be one of {', '.join(OBJECTIVES)}, got {shown(objective)}")
    starts = _count(starts, "starts", MAX_STARTS)
    seed = int(seed)
    if seed < 0:
        raise InputError(f"seed: must be >= 0, got {seed}")
    for value, field in ((k_max, "k_max"), (d_max, "d_max")):
        if value is not None:
            _bound(value, field)
    noise = tuple(_positive(v, name) for v, name in zip(noise, ("frequency_noise", "damping_noise")))
    check_problem_size(model.n, data.q.shape[0], data.num_measurements, len(kinds) * model.n)
    return starts, seed, noise


def _count(value, field, maximum):
    """An integer in 1..maximum (InputError naming the field)."""
    if isinstance(value, bool) or not float(value).is_integer():
        raise InputError(f"{field}: expected an integer, got {shown(value)}")
    value = int(value)
    if not 1 <= value <= maximum:
        raise InputError(f"{field}: must be in 1..{maximum}, got {value}")
    return value


def _local_solve(problem: IdentificationProblem, x0, stop=NO_STOP):
    """One bounded TRF least-squares run in scaled unknowns x = p / upper ∈ [0, 1]."""
    up = problem.upper

    def fun(x):
        stop.check()
        return problem.residuals(x * up)

    jac = lambda x: problem.jacobian(x * up) * up
    problem.check_finite(x0 * up)            # SciPy would only say "Residuals are not finite in the initial point."
    sol = least_squares(fun, x0, jac=jac, bounds=(0.0, 1.0), method="trf",
                        xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=200 * (x0.size + 1))
    return sol.x, float(sol.fun @ sol.fun), int(sol.nfev), int(sol.status), str(sol.message)


def _polish(problem, best, stop=NO_STOP):
    """Refine the best multistart solution with unbounded Levenberg-Marquardt, kept only if it
    stays in the box and lowers F. TRF stops on its gradient test in weakly determined, nearly
    flat directions (e.g. the wrist stiffnesses of scompi from low modes); LM finishes them."""
    up = problem.upper

    def fun(x):
        stop.check()
        return problem.residuals(x * up)

    sol = least_squares(fun, best[0], jac=lambda x: problem.jacobian(x * up) * up, method="lm",
                        xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=100 * (up.size + 1))
    F = float(sol.fun @ sol.fun)
    if np.all((sol.x >= 0) & (sol.x <= 1)) and F < best[1]:
        return sol.x, F, best[2] + int(sol.nfev), best[3], best[4]
    return best


def solve_starts(problem, x0s, stop=NO_STOP, progress=None):
    """Local solutions (x, F, nfev, status, message) from each start of ``x0s`` (s, P), in order:
    the unit of work that every multistart executor maps over chunks of starts (``stop`` and
    ``progress`` as in :func:`identify`)."""
    out = []
    for x0 in x0s:
        out.append(_local_solve(problem, x0, stop))
        stop.report(out[-1][1])
        if progress:
            progress(len(out), len(x0s), min(r[1] for r in out))
    return out


def _run_starts(pool, problem, x0, stop, progress=None):
    """Local solutions for every start, in chunks on ``pool``'s workers (a few per worker); the
    workers count finished starts in ``stop``'s shared counters, reported to ``progress`` every
    0.5 s. The first failure or interruption stops the other chunks."""
    chunks = np.array_split(np.arange(len(x0)), min(len(x0), 4 * pool.workers))
    futures = {pool.submit(solve_starts, problem, x0[c], stop): k for k, c in enumerate(chunks)}
    parts, reported = [None] * len(chunks), 0
    try:
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            stop.check()
            for future in finished:
                parts[futures[future]] = future.result()
            done, best = stop.progress()
            if progress and done > reported:
                reported = done
                progress(min(done, len(x0)), len(x0), best)
    except BaseException as exc:
        for future in futures:
            future.cancel()
        pool.cancel(stop)
        pool.discard_if_broken(exc)
        raise
    return [r for part in parts for r in part]


# ----------------------------------------------------------------------------- report

def _result(problem, p, F, converged, message, local, seed, noise):
    r = problem.residuals(p)
    std, rank, cond, noise_F = _standard_deviations(problem, p, r, noise)
    ratio = float(np.sqrt(F / noise_F)) if noise_F > 0 else float("inf")
    k, d_f, d_fm = problem.full_parameters(p)
    scale = np.maximum(np.abs(p), 1e-3 * problem.upper)
    weak = tuple(nm for nm, s, sc in zip(problem.names, std, scale) if not s <= REL_STD_LIMIT * sc)
    lost = tuple(nm for nm, s, sc in zip(problem.names, std, scale) if not s <= NOT_IDENTIFIABLE_STD * sc)
    warnings = [_weak_warning(problem, nm, p, s) for nm, s in zip(problem.names, std) if nm in weak]
    at_bound = [nm for nm, v, u in zip(problem.names, p, problem.upper) if v >= u * (1 - 1e-9)]
    warnings += [f"{nm} = {p[problem.names.index(nm)]:g} is at its upper bound: raise "
                 f"{'k_max' if nm[0] == 'k' else 'd_max'}" for nm in at_bound]
    failures = [] if converged else [f"the best local solution did not converge: {message}"]
    if ratio > RESIDUAL_NOISE_LIMIT:
        failures.append(_misfit_reason(ratio, noise, at_bound, problem))
    if lost:
        failures.append(_lost_reason(problem, lost))
    return IdentificationResult(
        joint_names=problem.joint_names, stiffness=k, link_damping=d_f, motor_damping=d_fm,
        unknown_names=problem.names, values=p, standard_deviations=std, objective=float(F),
        objective_name=problem.objective_name, residuals=r.reshape(-1, 2), success=not failures,
        message="; ".join(failures) if failures else message, jacobian_rank=rank, jacobian_condition=cond,
        unidentifiable=weak, warnings=tuple(warnings), start_objectives=np.array([loc[1] for loc in local]),
        starts=len(local), seed=seed, function_evaluations=sum(loc[2] for loc in local),
        residual_noise_ratio=ratio, not_identifiable=lost)


def _misfit_reason(ratio, noise, at_bound, problem):
    """Why a fit whose residual is far above the noise level is no success, and what to check."""
    hints = []
    if (problem.data.mode_index < 0).any():
        hints.append("give mode_index for every measured mode (automatic matching can pair a measured "
                     "mode with the wrong model mode)")
    if at_bound:
        hints.append(f"raise the bounds ({', '.join(at_bound)} at the upper bound)")
    else:
        bounds = {("k_max" if kind == "k" else "d_max"): problem.upper[i * problem.n]
                  for i, kind in enumerate(problem.kinds)}
        hints.append("make sure the true values lie in the search box ("
                     + ", ".join(f"{name} = {value:g}" for name, value in bounds.items()) + ")")
    hints += ["check that damping ratios are fractions and frequencies in Hz",
              "check the parameters that are not unknowns (from the robot config)"]
    return (f"the model does not reproduce the data: RMS residual {ratio:.3g}x the level expected from the "
            f"assumed measurement noise (sigma_f/f = {noise[0]:g}, sigma_zeta = {noise[1]:g}; limit "
            f"{RESIDUAL_NOISE_LIMIT:g}x): " + "; ".join(hints))


def _lost_reason(problem, lost):
    """Why unknowns with a standard deviation above their value make the result no success."""
    joints = sorted({nm.split("/", 1)[1] for nm in lost}, key=problem.joint_names.index)
    return (f"not identifiable from the given modes: {', '.join(lost)} (standard deviation above "
            f"{100 * NOT_IDENTIFIABLE_STD:g} % of the value): measure modes in which {', '.join(joints)} "
            "move, or more configurations, or remove these from the unknowns (their config values are "
            "then used)")


def _standard_deviations(problem, p, r, noise):
    """Approximate standard deviations of the unknowns at the optimum.

    Linearized propagation through the (scaled) residual Jacobian J = U Σ Vᵀ: the larger of
    (a) the assumed measurement noise (σ_f/f, σ_ζ) mapped through ∂r/∂(f̂, ζ̂) (sandwich
    J⁺ R J⁺ᵀ, R from the noise) and (b) the residual scatter s² J⁺J⁺ᵀ, s² = F/(2N − P).
    Directions with σ_i < RANK_RTOL·σ_max (rank deficiency) give infinite deviations.
    Returns (std (P,), rank, condition number, F_noise = Σ r² that the assumed noise alone
    produces to first order)."""
    scale = np.maximum(np.abs(p), 1e-3 * problem.upper)
    J = problem.jacobian(p) * scale
    U, s, Vt = np.linalg.svd(J, full_matrices=False)
    rank = int(np.sum(s > RANK_RTOL * s[0])) if s[0] > 0 else 0
    cond = float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
    pinv = (Vt[:rank].T / s[:rank]) @ U[:, :rank].T                        # (P, 2N)
    d = problem.data
    sens, noise_F = [], 0.0
    for field_name, sigma, base in (("frequency_hz", noise[0] * d.frequency_hz, d.frequency_hz),
                                    ("damping_ratio", np.full(d.num_measurements, noise[1]),
                                     d.damping_ratio)):
        h = 1e-6 * np.maximum(np.abs(base), 1e-3)
        hi = problem.residuals(p, **{field_name: base + h})
        lo = problem.residuals(p, **{field_name: base - h})
        dr = (hi - lo).reshape(-1, 2) * (sigma / (2 * h))[:, None]
        noise_F += float(np.sum(dr ** 2))
        sens.append(_blockwise(pinv, dr))
    var_noise = sum(np.sum(v ** 2, axis=1) for v in sens)
    dof = r.size - p.size
    var_resid = (r @ r) / dof * np.sum(pinv ** 2, axis=1) if dof > 0 else np.zeros(p.size)
    var = np.maximum(var_noise, var_resid)
    null = np.any(np.abs(Vt[rank:]) > 0.1, axis=0) if rank < p.size else np.zeros(p.size, bool)
    return np.where(null, np.inf, np.sqrt(var) * scale), rank, cond, noise_F


def _blockwise(pinv, dr):
    """Columns J⁺_i dr_i (P, N): the effect on p of a unit change of each measurement i, whose
    residual pair i alone depends on it (dr (N, 2) = ∂[Re, Im]_i/∂measurement_i)."""
    P = pinv.shape[0]
    return np.einsum("pnk,nk->pn", pinv.reshape(P, -1, 2), dr)


def _weak_warning(problem, name, p, std):
    i = problem.names.index(name)
    kind, joint = name.split("/")
    msg = f"{name} = {p[i]:.4g} is not determined by the data (std ≈ {std:.3g})"
    j = problem.joint_names.index(joint)
    kd = problem.fixed["kd"][j]
    if kind == "d_fm" and kd > 10 * max(abs(p[i]), 1e-12):
        msg += f": it only enters D̄ as d_fm + Kd (2.10) and Kd = {kd:g} dominates"
    return msg


# ----------------------------------------------------------------------------- output

def write_params(model, result: IdentificationResult, out_path) -> Path:
    """Write a complete flexibility YAML (format of config/<robot>.yaml) equal to the model's
    params file with k, d_f, d_fm replaced by the identified values; the urdf path is made absolute."""
    if model.params_path is None:
        raise InputError("--write-params: the model has no params file to start from")
    raw = load_yaml_mapping(model.params_path, "params file")
    urdf = Path(str(raw["urdf"]))
    raw["urdf"] = str(urdf if urdf.is_absolute() else (Path(model.params_path).parent / urdf).resolve())
    for j, name in enumerate(result.joint_names):
        joint = raw["joints"][name]
        joint["k"] = float(result.stiffness[j])
        joint["d_f"] = float(result.link_damping[j])
        joint["d_fm"] = float(result.motor_damping[j])
    out = Path(out_path)
    try:
        out.write_text("# Identified by flexmodal identify (objective "
                       f"{result.objective_name}, F* = {result.objective:.6g})\n"
                       + yaml.safe_dump(raw, sort_keys=False))
    except OSError as exc:
        raise InputError(f"--write-params {out}: cannot write ({exc.strerror})") from None
    return out

"""The outcome of an identification (thesis ch. 3): :class:`IdentificationResult`, the
approximate standard deviations of the unknowns, the success verdict with its reasons (residual
against the assumed measurement noise, identifiability) and the identified params YAML.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..core.errors import InputError
from ..core.validation import load_yaml_mapping
from .inverse_eigen import NOT_IDENTIFIABLE_STD, RANK_RTOL, REL_STD_LIMIT, RESIDUAL_NOISE_LIMIT


@dataclass(frozen=True)
class IdentificationResult:
    """Outcome of :func:`~flexmodal_ros.identification.fit.identify`.

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


def assess(problem, p, F, converged, message, local, seed, noise):
    """:class:`IdentificationResult` of the best solution ``p`` (objective ``F``) of ``problem``,
    with ``local`` every start's (x, F, nfev, status, message) and ``noise`` (σ_f/f, σ_ζ)."""
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

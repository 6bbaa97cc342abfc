"""Experiment design: which configurations to measure, and which motors to pulse there, so that the
modes a record will show carry the most information about the unknown k, d_f, d_fm.

Per candidate configuration q and excitation e (a motor pulse on joint j, or a tool-point impulse
along an axis where the plant offers impacts):

1. the modes of the loop at q (the AMA (2.13)-(2.17), or its sampled-data form) and their
   sensitivities ∂f/∂p, ∂ζ/∂p (:func:`~.eigen_sensitivity.mode_sensitivity`: analytic eigenvalue
   derivatives) in scaled unknowns x = p/s (s the nominal value, or the range for a zero nominal);
2. each mode's free-decay amplitude at the recorded channels after e — its modal participation
   (:func:`~.pulse_response.pulse_decay_amplitudes`, :func:`~flexmodal_ros.oma.impact.free_decay_contributions`);
3. the noise-floor rule of :mod:`flexmodal_ros.oma.visibility`: with the sensors' noise
   (:class:`MeasurementModel`), which modes the record will show (SNR and Cramér–Rao standard
   deviations of f and ζ within the OMA's reporting limits) and how precisely: σ_f, σ_ζ (worst-first
   design: and a spectral dominance ≥ ``dominance_min``, ``oma.visibility.spectral_dominance``). Screening
   uses each mode's bound alone (:func:`~flexmodal_ros.oma.visibility.screen_modes`); the
   shortlisted candidates get the full rule (modes judged together with the stronger ones). Both
   add the decay of the modes judged invisible to the noise (the OMA does not hold them, so they
   stay in the residual the others are judged against) and judge again;
4. several pulses in one configuration are references of one OMA: a mode's variances combine as
   1/σ² = Σ 1/σ_e², then a floor is added for what the noise does not explain (OMA and model
   error, growing with ζ: :func:`measurement_floors`);
5. the Fisher information of the configuration, F = Σ_modes J_fᵀJ_f/σ_f² + J_ζᵀJ_ζ/σ_ζ².

Which candidates and excitations to measure, from the information of each
(:meth:`Candidate.information`), is :mod:`.design_selection`'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.blas import single_blas_thread
from ..core.errors import InputError
from ..oma.compare import channel_rows
from ..oma.impact import AXES, Impulse, free_decay_contributions
from ..oma.mode_estimation import SETTLE_SAMPLES, SNR_MIN, UNCERTAINTY_F, UNCERTAINTY_Z
from ..oma.visibility import screen_modes, spectral_dominance, visible_modes
from ..robot.model import create_data, with_overrides
from .design_selection import identifiable_mask, predicted_std, worst_relative_std
from .eigen_sensitivity import CONTINUOUS, Unknowns, loop_modes, mode_sensitivity
from .offline_plants import channel_names
from .pulse_response import pulse_decay_amplitudes

# A 20-bit encoder (2π/2²⁰ rad per count, quantization std = count/√12) when nothing else is known
# about the sensors: the noise the design assumes by default.
DEFAULT_SENSOR_STD = 2 * np.pi / 2 ** 20 / np.sqrt(12.0)
FREQUENCY_FLOOR = 1e-4     # σ_f ≥ (this + DAMPING_SLOPE ζ)·f: OMA against model on the suite's plants,
DAMPING_FLOOR = 1e-4       # σ_ζ ≥ this + DAMPING_SLOPE ζ: 1e-4 for lightly damped modes, 2.5e-4
DAMPING_SLOPE = 5e-4       # (f relative, ζ absolute) for the heavily damped ones (ζ 0.3: few cycles)
DOMINANCE_MIN = 1.0        # worst-first: a visible mode's own spectral peak over the rest (oma/visibility.py)


def measurement_floors(f, z, frequency_floor=FREQUENCY_FLOOR, damping_floor=DAMPING_FLOOR):
    """(σ_f floor [Hz], σ_ζ floor) of modes f [Hz], ζ: what OMA and model agree to beyond the
    noise, growing with the damping ratio (a heavily damped decay holds few cycles)."""
    f, z = np.asarray(f, float), np.asarray(z, float)
    return (frequency_floor + DAMPING_SLOPE * np.abs(z)) * f, damping_floor + DAMPING_SLOPE * np.abs(z)
PRIOR_WIDTH = 4.0          # the prior's σ: the range width / this
MATCH_RTOL = 0.3           # a loop mode takes the continuous mode's amplitude within this |Δλ|/|λ|


@dataclass(frozen=True)
class MeasurementModel:
    """What a record shows: ``sample_rate_hz``, ``record_s`` of free decay analysed, ``channels``
    (both | motor | link positions), ``sensor_std`` [rad or m] per channel (scalar or one per
    channel), ``frequency_floor``/``damping_floor`` (module docstring), ``snr_min`` and the OMA's
    reporting limits, ``nyquist_fraction`` (modes above it are not identifiable), ``dominance_min``
    the spectral dominance a visible mode needs (step 3; worst-first: DOMINANCE_MIN), ``spread`` the
    factor on a visible mode's predicted σ_f, σ_ζ (worst-first: learned from the σ the OMA reports,
    :func:`~.visibility_calibration.spread_samples`; it leaves the visibility as it is)."""

    sample_rate_hz: float = 1000.0
    record_s: float = 1.5
    channels: str = "both"
    sensor_std: object = DEFAULT_SENSOR_STD
    frequency_floor: float = FREQUENCY_FLOOR
    damping_floor: float = DAMPING_FLOOR
    snr_min: float = SNR_MIN
    nyquist_fraction: float = 0.9
    dominance_min: float = 0.0
    spread: float = 1.0

    def noise(self, model) -> np.ndarray:
        c = len(channel_names(model, self.channels))
        std = np.broadcast_to(np.asarray(self.sensor_std, float), (c,)).copy()
        if not (np.isfinite(std).all() and (std > 0).all()):
            raise InputError(f"sensor noise: must be > 0 per channel, got {std.tolist()}")
        return std

    @property
    def samples(self) -> int:
        return int(round(self.record_s * self.sample_rate_hz)) - SETTLE_SAMPLES


def sensor_std(model, channels, counts_per_rev=None, std=0.0, gear=None):
    """Per-channel noise std [rad] of an encoder with ``counts_per_rev`` (on the motor shaft before
    the gear ``gear`` (n,) for motor channels) plus Gaussian ``std``; DEFAULT_SENSOR_STD when
    neither is given."""
    names = channel_names(model, channels)
    if counts_per_rev is None and not std:
        return np.full(len(names), DEFAULT_SENSOR_STD)
    g = np.ones(model.n) if gear is None else np.asarray(gear, float)
    out = []
    for name in names:
        motor = name.endswith("_motor")
        j = model.joint_names.index(name[:-6] if motor else name)
        quantum = 0.0 if not counts_per_rev else 2 * np.pi / counts_per_rev / (g[j] if motor else 1.0)
        out.append(np.hypot(quantum / np.sqrt(12.0), std))
    return np.maximum(np.array(out), 1e-15)


@dataclass(frozen=True)
class Excitation:
    """One excitation of a configuration: ``kind`` "motor" (pulse on joint ``index``) or "wrench"
    (impulse along AXES[``index``] at the tool point)."""

    kind: str
    index: int

    def label(self, model) -> str:
        return (f"pulse {model.joint_names[self.index]}" if self.kind == "motor"
                else f"impact {AXES[self.index]}")


@dataclass(frozen=True)
class ExcitationPlan:
    """``pulse_torque`` (n,) [N·m] amplitude per joint; ``pulse_duration`` [s]; ``joints`` that may
    be pulsed (indices); ``wrench_force`` [N] and ``wrench_duration`` [s] of tool impacts, None =
    the plant offers none; ``pulses_per_configuration`` excitations (records) per configuration."""

    pulse_torque: np.ndarray
    pulse_duration: float = 0.002
    joints: tuple = ()
    wrench_force: float | None = None
    wrench_duration: float = 0.006
    pulses_per_configuration: int = 2

    def options(self) -> list:
        out = [Excitation("motor", j) for j in self.joints]
        if self.wrench_force:
            out += [Excitation("wrench", a) for a in range(3)]
        return out


@dataclass
class Candidate:
    """A configuration's modes and, per excitation option, the variances of f and ζ a record would
    give (inf: not visible). ``jf``/``jz`` (m, P) sensitivities in scaled unknowns; ``refined``:
    options whose variances are those of the full noise-floor rule (the others: the single-mode
    screening, :func:`~flexmodal_ros.oma.visibility.screen_modes`); ``dominance`` (options, m) each
    mode's spectral dominance in the option's record, below ``dominance_min`` not visible;
    ``spread`` the factor on the σ_f, σ_ζ of the visible modes (:class:`MeasurementModel`)."""

    q: np.ndarray
    frequencies_hz: np.ndarray
    damping_ratios: np.ndarray
    jf: np.ndarray
    jz: np.ndarray
    var_f: np.ndarray            # (options, m)
    var_z: np.ndarray
    options: list
    floor_f: np.ndarray
    floor_z: np.ndarray
    stable: bool = True
    snr: np.ndarray = field(default=None)
    refined: set = field(default_factory=set)
    response: list = field(default_factory=list, repr=False)     # per option: (λ, amplitudes) of the usable modes
    usable: np.ndarray = field(default=None, repr=False)
    rule: tuple = field(default=(), repr=False)                  # (noise, N, fs, snr_min)
    dominance: np.ndarray = field(default=None, repr=False)
    dominance_min: float = 0.0
    spread: float = 1.0

    def refine(self, options):
        """Re-evaluate ``options`` with the full noise-floor rule (:func:`visible_modes`)."""
        noise, N, fs, snr_min = self.rule
        idx = np.flatnonzero(self.usable)
        for o in options:
            if o in self.refined or not idx.size:
                continue
            lm, a = self.response[o]
            self._store(o, idx, visible_modes(lm, a[None], noise, [N], fs, (), snr_min, UNCERTAINTY_F,
                                              UNCERTAINTY_Z, remainder=True))
            self.refined.add(o)

    def screen(self, noise=None, dominance_min=None, spread=None):
        """(Re-)evaluate every option with the single-mode screening
        (:func:`~flexmodal_ros.oma.visibility.screen_modes`) at the per-channel ``noise`` [rad],
        ``dominance_min`` and ``spread`` (None: those held); full-rule refinements are dropped."""
        old, N, fs, snr_min = self.rule
        noise = old if noise is None else np.asarray(noise, float)
        self.rule = (noise, N, fs, snr_min)
        if dominance_min is not None:
            self.dominance_min = float(dominance_min)
        if spread is not None:
            self.spread = float(spread)
        self.refined = set()
        self.var_f[:], self.var_z[:] = np.inf, np.inf
        idx = np.flatnonzero(self.usable)
        if not idx.size:
            return
        for o, (lm, a) in enumerate(self.response):
            self._store(o, idx, screen_modes(lm, a[None], noise, [N], fs, snr_min, UNCERTAINTY_F, UNCERTAINTY_Z))

    def _store(self, option, idx, vis):
        """Variances (inf: not visible) and SNR of the usable modes ``idx`` for ``option``."""
        visible = vis.visible & (self.dominance[option, idx] >= self.dominance_min)
        self.var_f[option, idx] = np.where(visible, (self.spread * vis.std_frequency_hz) ** 2, np.inf)
        self.var_z[option, idx] = np.where(visible, (self.spread * vis.std_damping_ratio) ** 2, np.inf)
        self.snr[option, idx] = vis.snr

    def information(self, chosen) -> np.ndarray:
        """Fisher information (P, P) of the excitations ``chosen`` (indices into options) analysed
        together (module docstring, steps 4-5)."""
        if not len(chosen):
            return np.zeros((self.jf.shape[1],) * 2)
        inv_f = np.sum(1.0 / self.var_f[list(chosen)], axis=0)
        inv_z = np.sum(1.0 / self.var_z[list(chosen)], axis=0)
        seen = inv_f > 0
        wf = np.where(seen, 1.0 / (1.0 / np.where(seen, inv_f, 1.0) + self.floor_f ** 2), 0.0)
        wz = np.where(seen, 1.0 / (1.0 / np.where(seen, inv_z, 1.0) + self.floor_z ** 2), 0.0)
        return (self.jf.T * wf) @ self.jf + (self.jz.T * wz) @ self.jz

    def visible(self, chosen) -> np.ndarray:
        """Modes visible in at least one of the excitations ``chosen``."""
        return np.isfinite(self.var_f[list(chosen)]).any(axis=0) if len(chosen) else np.zeros(self.jf.shape[0], bool)


def parameter_scale(model, unknowns: Unknowns, ranges) -> np.ndarray:
    """Scale s of each unknown: its nominal value, or its range's upper bound where it is 0."""
    nominal = unknowns.values(model)
    return np.where(nominal > 0, nominal, ranges[1])


def prior_information(scale, ranges) -> np.ndarray:
    """A weak Gaussian prior in scaled unknowns: σ = (upper − lower)/(PRIOR_WIDTH·s)."""
    width = (ranges[1] - ranges[0]) / scale
    return np.diag(1.0 / (width / PRIOR_WIDTH) ** 2)


def candidate_configurations(model, count, seed=0, margin=0.1, fixed=None) -> np.ndarray:
    """``count`` configurations drawn uniformly inside the URDF limits shrunk by ``margin`` of each
    range (both ends); joints with ``fixed`` (dict index → value) stay there."""
    lo, hi = np.asarray(model.position_lower, float), np.asarray(model.position_upper, float)
    lo, hi = np.maximum(lo, -np.pi), np.minimum(hi, np.pi)       # unbounded joints: one turn
    span = hi - lo
    rng = np.random.default_rng(seed)
    qs = lo + margin * span + (1 - 2 * margin) * span * rng.random((int(count), model.n))
    for j, value in (fixed or {}).items():
        qs[:, j] = value
    return qs


def loop_damping(model, q, loop, measurement, data=None) -> float:
    """Smallest damping ratio of the loop's modes below the Nyquist limit at ``q`` (negative: the
    loop is unstable there; −inf if some pole is real and unstable)."""
    modes = loop_modes(model, q, loop, data)
    if modes.stability == "unstable" and not (modes.damping_ratios < 0).any():
        return -np.inf
    damped = modes.frequencies_hz * np.sqrt(np.clip(1 - modes.damping_ratios ** 2, 0, 1))
    below = damped < measurement.nyquist_fraction * 0.5 * measurement.sample_rate_hz
    return float(modes.damping_ratios[below].min(initial=np.inf))


def evaluate_candidate(model, q, unknowns, loop, plan, measurement, scale, data=None,
                       stability_loop=None) -> Candidate:
    """:class:`Candidate` of configuration ``q`` (module docstring, steps 1-3). ``stability_loop``:
    the loop the plant really runs (e.g. sampled with a period of delay), whose stability at ``q``
    decides whether the candidate may be measured (default ``loop``)."""
    data = create_data(model) if data is None else data
    sens = mode_sensitivity(model, q, unknowns, loop, data)
    modes = sens.modes
    f, z, lam = modes.frequencies_hz, modes.damping_ratios, modes.eigenvalues
    fs = measurement.sample_rate_hz
    usable = f * np.sqrt(np.clip(1 - z ** 2, 0, 1)) < measurement.nyquist_fraction * 0.5 * fs
    names = channel_names(model, measurement.channels)
    rows = channel_rows(model, names)
    noise = measurement.noise(model)
    N = measurement.samples
    t_after = SETTLE_SAMPLES / fs
    options = plan.options()
    idx_usable = np.flatnonzero(usable)
    response = []
    for o, exc in enumerate(options):
        if exc.kind == "motor":
            torque = np.zeros(model.n)
            torque[exc.index] = plan.pulse_torque[exc.index]
            lam_c, amps = pulse_decay_amplitudes(model, q, torque, plan.pulse_duration, rows, t_after, data)
        else:
            impulse = Impulse(plan.wrench_force, AXES[exc.index], 0.0, plan.wrench_duration)
            lam_c, amps, _, _ = free_decay_contributions(model, q, impulse, rows, impulse.end + t_after)
        if idx_usable.size == 0:
            response.append((lam[:0], np.zeros((0, len(rows)), complex)))
            continue
        dist = np.abs(lam_c[None, :] - lam[idx_usable, None]) / np.abs(lam[idx_usable, None])
        pick = np.argmin(dist, axis=1)
        a = np.where((dist[np.arange(pick.size), pick] <= MATCH_RTOL)[:, None], amps[pick], 0.0)   # (m_usable, c)
        lm = lam[idx_usable]
        response.append((lm, a))
    stable = modes.stable
    if stable and stability_loop is not None and stability_loop != loop:
        stable = loop_damping(model, q, stability_loop, measurement, data) > 0
    shape = (len(options), f.size)
    dominance = np.zeros(shape)
    for o, (lm, a) in enumerate(response):
        dominance[o, idx_usable] = spectral_dominance(lm, a)
    cand = Candidate(np.asarray(q, float).copy(), f, z, sens.d_frequency * scale, sens.d_damping * scale,
                     np.full(shape, np.inf), np.full(shape, np.inf), options,
                     *measurement_floors(f, z, measurement.frequency_floor, measurement.damping_floor),
                     stable, np.zeros(shape), set(), response, usable, (noise, N, fs, measurement.snr_min),
                     dominance, measurement.dominance_min, measurement.spread)
    cand.screen()
    return cand


def evaluate_pool(model, qs, unknowns, loop, plan, measurement, scale, stability_loop=None) -> list:
    """:func:`evaluate_candidate` of every configuration of ``qs`` (one BLAS thread)."""
    data = create_data(model)
    with single_blas_thread():
        return [evaluate_candidate(model, q, unknowns, loop, plan, measurement, scale, data, stability_loop)
                for q in qs]


KD_SCALES = (1.0, 0.5, 0.2)      # experiment gains tried by choose_experiment_gains: K_D times these
MIN_EXPERIMENT_DAMPING = 1e-4    # least damping ratio of the loop with the experiment gains ...
EXPERIMENT_DAMPING_SHARE = 0.1   # ... and at least this share of what the user's gains give


def choose_experiment_gains(model, qs, unknowns, plan, measurement, ranges, loop=CONTINUOUS, scales=KD_SCALES):
    """The motor damping gain K_D of the experiments: d_fm enters the closed loop only as
    d_fm + K_D (2.10), so a K_D that dominates hides it; a lower K_D during the calibration (the
    controller's kd, settable at run time; K_P unchanged) makes it visible. For each factor of
    ``scales`` the information of every candidate of ``qs`` with every excitation is summed
    (:func:`evaluate_pool`). A factor is allowed only if the loop the plant runs (``loop``: with
    a digital controller's sampling and delay, which a lower K_D can destabilize although the
    continuous loop stays stable — scompi at 1 kHz with one period of delay and K_D × 0.5) keeps,
    at every candidate, its least damped mode at MIN_EXPERIMENT_DAMPING or more and at
    EXPERIMENT_DAMPING_SHARE of what the user's gains give there or more. Of the allowed factors, the
    one that identifies
    the most unknowns (:func:`identifiable_mask`), then the smallest worst relative std, wins; ties
    keep the larger factor (the user's gains first). Returns (factor, {factor: predicted std (P,)})."""
    table, best, best_key = {}, None, None
    data = create_data(model)
    with single_blas_thread():
        reference = np.array([loop_damping(model, q, loop, measurement, data) for q in qs])
    for factor in scales:
        trial = with_overrides(model, kd=np.asarray(model.kd, float) * factor)
        if factor != 1.0:
            with single_blas_thread():
                margin = np.array([loop_damping(trial, q, loop, measurement, data) for q in qs])
            if np.any(margin < np.maximum(MIN_EXPERIMENT_DAMPING, EXPERIMENT_DAMPING_SHARE * reference)):
                continue
        scale = parameter_scale(trial, unknowns, ranges)
        pool = evaluate_pool(trial, qs, unknowns, CONTINUOUS, plan, measurement, scale)
        info = sum(c.information(list(range(len(c.options)))) for c in pool)
        std = predicted_std(info, scale)
        table[factor] = std
        ok = identifiable_mask(std, scale)
        key = (-int(ok.sum()), round(worst_relative_std(std, scale, ok), 3) if ok.any() else np.inf, -factor)
        if best_key is None or key < best_key:
            best, best_key = factor, key
    if best is None:
        raise InputError("experiment gains: the closed loop is unstable at some candidate configuration")
    return best, table


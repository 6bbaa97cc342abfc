"""The design's visibility rule, calibrated from the modes the OMA actually recovered.

The experiment design (:mod:`.experiment_design`) predicts which modes a record will show from the
sensors' noise (the noise-floor rule of :mod:`flexmodal_ros.oma.visibility`) and from how far each
mode stands out of the others at its frequency (the worst-first design: its spectral dominance,
≥ ``dominance_min``, :func:`~flexmodal_ros.oma.visibility.spectral_dominance`). Both can be wrong
for the plant at hand:

- when the user does not give the noise, the design assumes a 20-bit encoder
  (``DEFAULT_SENSOR_STD``). A plant whose records are cleaner than that (the suite's noise-free
  simulations; a robot with better encoders) shows every mode at every configuration: on
  kuka_lwr4 the design predicted 7–11 of the 14 modes below Nyquist visible at its chosen
  configurations, the OMA recovered all 14 at each;
- how well the OMA separates overlapping modes depends on their damping and on the records: on
  kuka_lwr4 at K_D × 0.2 with 2²⁰-count encoders the modes with dominance below 1 were recovered
  4–12 % of the time (the default DOMINANCE_MIN = 1 right), on a noise-free plant all of them.

The design then chooses configurations and pulses for modes that will not be there, or passes
over ones that will (docs/calibration.md, "Designed vs random").

After each measured configuration the loop calls :func:`visibility_rule`: the factor c on the
assumed noise (only when the noise was not given) and, for the worst-first design, the dominance
threshold δ (the default design keeps δ = 0: no gate) at which the
design's own rule (the screening of :func:`~.experiment_design.evaluate_candidate`,
:func:`~flexmodal_ros.oma.visibility.screen_modes`, re-evaluated at c × the noise, then the
dominance gate, both per recorded excitation as the candidates apply them) agrees best with what was
measured — per configuration and usable mode, predicted visible (in one of the recorded excitations)
against matched in the OMA; of equally good rules the
largest c, then the largest δ (the most conservative). :func:`rescale_noise` re-applies the rule to a
pool (no eigenvalue or sensitivity recomputed). Records noisier than assumed (fewer modes than
predicted) raise c the same way.

How precisely a recovered mode is measured is a third thing the design can get wrong. The OMA
reports σ_f, σ_ζ from its fit's residual (white or correlated, whichever is larger:
:func:`~flexmodal_ros.oma.mode_estimation.refine_poles`), which holds more than the sensor noise
(quantization correlated along a slow decay, the plant's nonlinearity, modes left out). On kuka_lwr4
with 2²⁰-count encoders the OMA's σ were 10–40× the design's Cramér–Rao σ at the same noise (log
ratio median 1.35 over 31 modes of one loop, quartiles 1.06–1.58 in log₁₀), scompi ~6×; without
noise (the default noise factor learned from visibility) far below. The worst-first design learns
that factor (:func:`spread_samples`, :func:`learned_spread`: the median over every (mode, f or ζ)
pair measured so far) and applies it to its predicted σ, the visibility unchanged
(docs/calibration.md, "The σ the OMA reports").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..modes import pair_modes
from ..oma.mode_estimation import UNCERTAINTY_F, UNCERTAINTY_Z
from ..oma.visibility import screen_modes

FACTORS = 10.0 ** np.arange(-4.0, 2.0 + 1e-9, 0.25)     # factors tried on the assumed noise
DOMINANCES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)  # dominance thresholds tried
MATCH_RTOL = 0.1                                        # a measured mode is a predicted one within this |Δf|/f
CHANGE = 10.0 ** 0.25                                   # the pool is re-screened when c moves by more
SPREAD_SAMPLES = 4                                      # measured (mode, f or ζ) pairs before the spread is learned


@dataclass(frozen=True)
class Observation:
    """One measured configuration: the design's view of its recorded excitation options —
    ``responses`` per option (λ (m_usable,), amplitudes (m_usable, c)) of the usable model modes of
    its :class:`~.experiment_design.Candidate`, the ``noise`` (c,) [rad] the candidate was evaluated
    at, record ``samples`` at ``sample_rate_hz`` and ``snr_min`` —, ``frequencies_hz`` of the usable
    modes, ``measured`` (m_usable,) bool, matched in the OMA, and ``option_dominance`` (options,
    m_usable) each mode's spectral dominance in each recorded option (the candidate's)."""

    responses: tuple
    noise: np.ndarray
    samples: int
    sample_rate_hz: float
    snr_min: float
    frequencies_hz: np.ndarray
    measured: np.ndarray
    option_dominance: np.ndarray

    def option_visible(self, factor) -> np.ndarray:
        """(options, m_usable) bool: each mode predicted visible in each recorded excitation at
        ``factor`` × the noise the observation was made at (the design's screening,
        :func:`screen_modes`), the dominance gate left out."""
        seen = np.zeros((len(self.responses), self.frequencies_hz.size), bool)
        for row, (lm, a) in zip(seen, self.responses):
            if lm.size:
                row[:] = screen_modes(lm, a[None], self.noise * factor, [self.samples], self.sample_rate_hz,
                                      self.snr_min, UNCERTAINTY_F, UNCERTAINTY_Z).visible
        return seen

    def visible(self, factor, dominance_min=0.0, option_visible=None) -> np.ndarray:
        """(m_usable,) predicted visible in at least one excitation at ``factor`` × the noise the
        observation was made at with a spectral dominance of at least ``dominance_min`` in that same
        excitation — the gate the design's candidates apply (:meth:`option_visible` at ``factor``,
        when already computed, may be passed)."""
        seen = self.option_visible(factor) if option_visible is None else option_visible
        return np.any(seen & (self.option_dominance >= dominance_min), axis=0)


def observe(candidate, options, measured_frequencies_hz, noise_factor=1.0) -> Observation:
    """:class:`Observation` of a measured configuration: ``candidate`` as the design evaluated it
    (at ``noise_factor`` × the assumed noise), the recorded excitation ``options``, the frequencies
    [Hz] of the modes the OMA recovered and the match kept."""
    noise, N, fs, snr_min = candidate.rule
    idx = np.flatnonzero(candidate.usable)
    f = candidate.frequencies_hz[idx]
    measured = np.zeros(idx.size, bool)
    measured[list(pair_modes(measured_frequencies_hz, f, frequency_gate=MATCH_RTOL))] = True
    return Observation(tuple(candidate.response[o] for o in options), np.asarray(noise, float) / noise_factor,
                       int(N), float(fs), float(snr_min), f, measured, candidate.dominance[np.ix_(list(options), idx)])


def visibility_rule(observations, factors=FACTORS, dominances=DOMINANCES) -> tuple:
    """(c, δ): the factor on the assumed noise among ``factors`` and the dominance threshold among
    ``dominances`` whose predicted visibility agrees with the most (configuration, mode) pairs of
    ``observations``; of equally good ones the largest c, then the largest δ (module docstring).
    ``factors=(1.0,)`` keeps the noise (the user gave it). (1.0, None) without observations."""
    if not observations:
        return 1.0, None
    best, rule = -1, (1.0, None)
    for c in factors:
        seen = [o.option_visible(c) for o in observations]
        for delta in dominances:
            agree = sum(int(np.sum(o.visible(c, delta, v) == o.measured)) for v, o in zip(seen, observations))
            if agree >= best:
                best, rule = agree, (float(c), float(delta))
    return rule


def noise_factor(observations, factors=FACTORS) -> float:
    """The factor on the assumed noise whose predicted visibility, the dominance gate left out,
    agrees with the most (configuration, mode) pairs of ``observations``; the largest of equally
    good ones. 1.0 without observations."""
    return visibility_rule(observations, factors, (0.0,))[0]


def rescale_noise(candidates, noise, dominance_min=None, spread=None) -> None:
    """Re-screen every candidate of the pool at the per-channel ``noise`` [rad], ``dominance_min``
    and ``spread`` (None: each candidate's own): variances of f and ζ of every excitation option by the
    single-mode rule (:meth:`~.experiment_design.Candidate.screen`, as
    :func:`~.experiment_design.evaluate_candidate` does), the full-rule refinements dropped (the
    next design step redoes them at this rule)."""
    for cand in candidates:
        cand.screen(noise, dominance_min, spread)


def spread_samples(candidate, options, modes) -> list:
    """log(σ the OMA reported / σ the design predicted, its spread left out), of f and of ζ, for
    each of the configuration's measured ``modes`` (dicts: ``frequency_hz``, ``oma_std_frequency_hz``,
    ``oma_std_damping_ratio``) that matches a usable mode of ``candidate`` predicted visible in the
    recorded excitation ``options`` (the σ of those analysed together, as
    :meth:`~.experiment_design.Candidate.information` combines them, floors left out)."""
    idx = np.flatnonzero(candidate.usable)
    chosen = list(options)
    if not (idx.size and chosen and modes):
        return []
    gain = candidate.spread ** 2
    inv_f = np.sum(1.0 / candidate.var_f[np.ix_(chosen, idx)], axis=0) * gain
    inv_z = np.sum(1.0 / candidate.var_z[np.ix_(chosen, idx)], axis=0) * gain
    out = []
    for j, i in pair_modes([m["frequency_hz"] for m in modes], candidate.frequencies_hz[idx],
                           frequency_gate=MATCH_RTOL).items():
        for inv, key in ((inv_f[j], "oma_std_frequency_hz"), (inv_z[j], "oma_std_damping_ratio")):
            reported = modes[i].get(key)
            if inv > 0 and reported is not None and 0 < reported < np.inf:
                out.append(float(np.log(reported * np.sqrt(inv))))
    return out


def learned_spread(samples, noise_c=1.0) -> float:
    """The factor on the design's predicted σ (:class:`~.experiment_design.MeasurementModel`
    ``spread``): exp of the median of ``samples``, :func:`spread_samples`' logs taken at the assumed
    noise, over the measured configurations, divided by the factor ``noise_c`` on that noise the
    design now applies (a Cramér–Rao σ is proportional to the noise); 1 with fewer than
    SPREAD_SAMPLES samples."""
    return float(np.exp(np.median(samples)) / noise_c) if len(samples) >= SPREAD_SAMPLES else 1.0

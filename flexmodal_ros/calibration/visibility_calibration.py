"""The design's sensor noise, calibrated from the modes the OMA actually recovered.

The experiment design (:mod:`.experiment_design`) predicts which modes a record will show from the
sensors' noise (the noise-floor rule of :mod:`flexmodal_ros.oma.visibility`). When the user does not
give that noise, the design assumes a 20-bit encoder (``DEFAULT_SENSOR_STD``). A plant whose records
are cleaner than that (the suite's noise-free simulations; a robot with better encoders) shows
every mode at every configuration: on kuka_lwr4 the design predicted 7–11 of the 14 modes below
Nyquist visible at its chosen configurations, the OMA recovered all 14 at each. The design then
chooses configurations and pulses for the visibility of modes that are visible anyway, and its
predicted σ are ~10× the σ the fit reports (docs/calibration.md, "Designed vs random").

After each measured configuration the loop calls :func:`noise_factor`: the factor c on the assumed
noise at which the design's own rule (the screening of
:func:`~.experiment_design.evaluate_candidate`, :func:`~flexmodal_ros.oma.visibility.screen_modes`,
re-evaluated at c × the noise) agrees best with what was measured — per configuration and usable
mode, predicted visible (in one of the recorded excitations) against matched in the OMA; of equally
good factors the largest (the most conservative). :func:`rescale_noise` re-applies the rule to a
pool at the new noise (no eigenvalue or sensitivity recomputed). Records noisier than assumed (fewer
modes than predicted) raise c the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..modes import pair_modes
from ..oma.mode_estimation import UNCERTAINTY_F, UNCERTAINTY_Z
from ..oma.visibility import screen_modes

FACTORS = 10.0 ** np.arange(-4.0, 2.0 + 1e-9, 0.25)     # factors tried on the assumed noise
MATCH_RTOL = 0.1                                        # a measured mode is a predicted one within this |Δf|/f
CHANGE = 10.0 ** 0.25                                   # the pool is re-screened when c moves by more


@dataclass(frozen=True)
class Observation:
    """One measured configuration: the design's view of its recorded excitation options —
    ``responses`` per option (λ (m_usable,), amplitudes (m_usable, c)) of the usable model modes of
    its :class:`~.experiment_design.Candidate`, the ``noise`` (c,) [rad] the candidate was evaluated
    at, record ``samples`` at ``sample_rate_hz`` and ``snr_min`` —, ``frequencies_hz`` of the usable
    modes and ``measured`` (m_usable,) bool, matched in the OMA."""

    responses: tuple
    noise: np.ndarray
    samples: int
    sample_rate_hz: float
    snr_min: float
    frequencies_hz: np.ndarray
    measured: np.ndarray

    def visible(self, factor) -> np.ndarray:
        """(m_usable,) predicted visible in at least one excitation at ``factor`` × the noise the
        observation was made at (the design's screening, :func:`screen_modes`)."""
        seen = np.zeros(self.frequencies_hz.size, bool)
        for lm, a in self.responses:
            if lm.size:
                seen |= screen_modes(lm, a[None], self.noise * factor, [self.samples], self.sample_rate_hz,
                                     self.snr_min, UNCERTAINTY_F, UNCERTAINTY_Z).visible
        return seen


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
                       int(N), float(fs), float(snr_min), f, measured)


def noise_factor(observations, factors=FACTORS) -> float:
    """The factor on the assumed noise whose predicted visibility agrees with the most
    (configuration, mode) pairs of ``observations``; the largest of equally good ones (module
    docstring). 1.0 without observations."""
    if not observations:
        return 1.0
    agree = np.array([sum(int(np.sum(o.visible(c) == o.measured)) for o in observations) for c in factors])
    return float(np.asarray(factors)[np.flatnonzero(agree == agree.max())[-1]])


def rescale_noise(candidates, noise) -> None:
    """Re-screen every candidate of the pool at the per-channel ``noise`` [rad]: variances of f and ζ
    of every excitation option by the single-mode rule (:meth:`~.experiment_design.Candidate.screen`,
    as :func:`~.experiment_design.evaluate_candidate` does), the full-rule refinements dropped (the
    next design step redoes them at this noise)."""
    for cand in candidates:
        cand.screen(noise)

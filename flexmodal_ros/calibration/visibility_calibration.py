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
noise at which the design's own rule (the single-mode screening of
:func:`~.experiment_design.evaluate_candidate`, SNR ∝ 1/c and the Cramér–Rao σ_f, σ_ζ ∝ c for white
noise) agrees best with what was measured — per configuration and usable mode, predicted visible
(in one of the recorded excitations) against matched in the OMA; of equally good factors the
largest (the most conservative). :func:`rescale_noise` re-applies the rule to a pool at the new
noise (no eigenvalue or sensitivity recomputed). Records noisier than assumed (fewer modes than
predicted) raise c the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..modes import pair_modes
from ..oma.mode_estimation import UNCERTAINTY_F, UNCERTAINTY_Z
from ..oma.visibility import MARGIN, single_mode_bounds

FACTORS = 10.0 ** np.arange(-4.0, 2.0 + 1e-9, 0.25)     # factors tried on the assumed noise
MATCH_RTOL = 0.1                                        # a measured mode is a predicted one within this |Δf|/f
CHANGE = 10.0 ** 0.25                                   # the pool is re-screened when c moves by more


@dataclass(frozen=True)
class Observation:
    """One measured configuration: per usable model mode of its ``candidate`` (the design's
    :class:`~.experiment_design.Candidate`) and recorded excitation option (rows): the screening's
    SNR ``snr``, σ_f ``std_f`` [Hz], σ_ζ ``std_z`` at the noise ``noise_factor`` × the assumed one;
    ``frequencies_hz`` of the usable modes; ``measured`` (m_usable,) bool, matched in the OMA."""

    snr: np.ndarray
    std_f: np.ndarray
    std_z: np.ndarray
    frequencies_hz: np.ndarray
    measured: np.ndarray
    noise_factor: float
    snr_min: float

    def visible(self, factor) -> np.ndarray:
        """(m_usable,) predicted visible in at least one excitation at ``factor`` × the assumed noise."""
        r = factor / self.noise_factor
        s, sf, sz = self.snr / r, self.std_f * r, self.std_z * r
        kept = np.maximum(s - MARGIN, 0.0) / np.maximum(s, 1e-300)
        ok = (s - MARGIN >= self.snr_min) & (sf <= kept * UNCERTAINTY_F * self.frequencies_hz) & \
             (sz <= kept * UNCERTAINTY_Z)
        return ok.any(axis=0)


def observe(candidate, options, measured_frequencies_hz, noise_factor=1.0) -> Observation:
    """:class:`Observation` of a measured configuration: ``candidate`` as the design evaluated it
    (at ``noise_factor`` × the assumed noise), the recorded excitation ``options``, the frequencies
    [Hz] of the modes the OMA recovered and the match kept."""
    noise, N, fs, snr_min = candidate.rule
    idx = np.flatnonzero(candidate.usable)
    f = candidate.frequencies_hz[idx]
    rows = [single_mode_bounds(candidate.response[o][0], candidate.response[o][1][None], noise, [N], fs)
            if idx.size else (np.zeros(0),) * 3 for o in options]
    snr, std_f, std_z = (np.array([r[k] for r in rows], float).reshape(len(options), idx.size) for k in range(3))
    measured = np.zeros(idx.size, bool)
    measured[list(pair_modes(measured_frequencies_hz, f, frequency_gate=MATCH_RTOL))] = True
    return Observation(snr, std_f, std_z, f, measured, float(noise_factor), float(snr_min))


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
    of every excitation option by the single-mode rule (as :func:`~.experiment_design.evaluate_candidate`
    does), the full-rule refinements dropped (the next design step redoes them at this noise)."""
    for cand in candidates:
        _, N, fs, snr_min = cand.rule
        cand.rule = (np.asarray(noise, float), N, fs, snr_min)
        idx = np.flatnonzero(cand.usable)
        cand.refined = set()
        cand.var_f[:], cand.var_z[:] = np.inf, np.inf
        if not idx.size:
            continue
        f = cand.frequencies_hz[idx]
        for o, (lm, a) in enumerate(cand.response):
            s, sf, sz = single_mode_bounds(lm, a[None], cand.rule[0], [N], fs)
            kept = np.maximum(s - MARGIN, 0.0) / np.maximum(s, 1e-300)
            ok = (s - MARGIN >= snr_min) & (sf <= kept * UNCERTAINTY_F * f) & (sz <= kept * UNCERTAINTY_Z)
            cand.var_f[o, idx] = np.where(ok, sf ** 2, np.inf)
            cand.var_z[o, idx] = np.where(ok, sz ** 2, np.inf)
            cand.snr[o, idx] = s

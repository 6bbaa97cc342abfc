"""Designed against random configurations: :func:`random_design` draws configurations and
excitations at random from the candidate pool of :mod:`.experiment_design`, and
:func:`compare_with_random` counts how many random configurations reach the predicted uncertainty
of a designed set (worst or geometric-mean relative σ)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from .design_selection import DesignStep, identifiable_mask, predicted_std, worst_relative_std


def random_design(candidates, budget, scale, rng, data_information=None, exclude=(),
                  pulses_per_configuration=2) -> list:
    """``budget`` candidates and, in each, ``pulses_per_configuration`` excitation options drawn at
    random (no design), with the information they give (:class:`DesignStep` list) by the full
    noise-floor rule, as the designed set's (:meth:`~.experiment_design.Candidate.refine`)."""
    P = len(scale)
    data = np.zeros((P, P)) if data_information is None else np.array(data_information)
    pool = [i for i in range(len(candidates)) if i not in set(exclude) and candidates[i].stable]
    order = rng.permutation(pool)[: int(budget)]
    steps = []
    for i in order:
        cand = candidates[int(i)]
        k = min(pulses_per_configuration, len(cand.options))
        chosen = tuple(sorted(rng.choice(len(cand.options), size=k, replace=False).tolist()))
        cand.refine(chosen)
        data = data + cand.information(list(chosen))
        steps.append(DesignStep(int(i), chosen, data.copy(), predicted_std(data, scale)))
    return steps


def mean_relative_std(std, values, identifiable=None) -> float:
    """Geometric mean of σ_i/|p_i| over the unknowns (those in ``identifiable`` if given) [-]: the
    D-criterion's measure of the uncertainty volume, (det F⁻¹)^(1/2P) for uncorrelated unknowns."""
    rel = np.asarray(std, float) / np.maximum(np.abs(values), 1e-300)
    if identifiable is not None:
        rel = rel[np.asarray(identifiable, bool)]
    return float(np.exp(np.mean(np.log(rel)))) if rel.size else 0.0


CRITERIA = {"worst": worst_relative_std, "mean": mean_relative_std}


@dataclass(frozen=True)
class DesignComparison:
    """Designed against random configurations: ``designed`` (K,) worst relative predicted std after
    1..K designed configurations; ``random`` (seeds, K_random) the same for random ones;
    ``needed_random`` (seeds,) configurations the random sets need to reach the designed value
    at ``budget`` (inf: not within K_random); ``ratio`` budget / median(needed_random)."""

    budget: int
    designed: np.ndarray
    random: np.ndarray
    needed_random: np.ndarray
    ratio: float

    def to_dict(self) -> dict:
        return {"budget": self.budget, "designed_worst_relative_std": self.designed.tolist(),
                "random_worst_relative_std": self.random.tolist(),
                "random_configurations_needed": [None if not np.isfinite(v) else int(v) for v in self.needed_random],
                "designed_over_random": self.ratio}


def compare_with_random(candidates, designed_steps, scale, seeds=5, random_budget=None,
                        pulses_per_configuration=2, identifiable=None, seed=0, criterion="worst",
                        exclude=()) -> DesignComparison:
    """How many random configurations (:func:`random_design`, ``seeds`` draws) reach the worst
    predicted std relative to ``scale`` (the nominal values, or the range for a zero nominal) of the
    designed set (``designed_steps`` from :func:`greedy_design`), over the unknowns the designed set
    identifies (σ ≤ REL_STD_LIMIT·scale) unless ``identifiable`` is given."""
    K = len(designed_steps)
    if K == 0:
        raise InputError("budget: no configuration was designed")
    values = scale
    if identifiable is None:
        identifiable = identifiable_mask(designed_steps[-1].predicted_std, scale)
    measure = CRITERIA[criterion]
    designed = np.array([measure(s.predicted_std, values, identifiable) for s in designed_steps])
    budget = random_budget or min(len(candidates), 4 * K)
    curves, needed = [], []
    for k in range(seeds):
        steps = random_design(candidates, budget, scale, np.random.default_rng(seed + 1000 + k), exclude=exclude,
                              pulses_per_configuration=pulses_per_configuration)
        curve = np.array([measure(s.predicted_std, values, identifiable) for s in steps])
        curves.append(np.pad(curve, (0, budget - curve.size), constant_values=np.inf))
        reach = np.flatnonzero(curve <= designed[-1] * (1 + 1e-9))
        needed.append(float(reach[0] + 1) if reach.size else np.inf)
    needed = np.array(needed)
    return DesignComparison(K, designed, np.array(curves), needed, K / float(np.median(needed)))

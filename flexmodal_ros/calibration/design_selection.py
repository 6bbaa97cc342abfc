"""Selection of the experiment: which candidate configurations, and which excitations there, to
measure next, from the Fisher information each would add
(:meth:`~.experiment_design.Candidate.information`, the evaluation of :mod:`.experiment_design`).

Selection (:func:`greedy_design`) is sequential: starting from the information already held (data
measured so far, or a weak prior from the parameter ranges), the configuration and its
``pulses_per_configuration`` excitations that raise the criterion most are added one at a time.
The criterion is D-optimal, log det(F_total); with targets, once some unknowns are predicted
below theirs, Ds-optimal on the others. The worst-first design (``focus_share``) is Ds-optimal on
the unknowns whose predicted σ/target is within FOCUS_SHARE of the worst (:func:`worst_focus`):
fewer configurations to bring the worst to its target, the others less accurate. A focus the
pool cannot narrow (the best candidate gives it less than STALL_GAIN and STALL_SHARE of what the
average unknown gains) is passed over for the next in line; so is, by the loop, an unknown that
STALL_STEPS measured configurations chosen for it in a row left where it was
(:func:`unserved_count`: on scompi a d_f the fit never determined held the focus, each
configuration predicted to narrow it and none doing so; docs/calibration.md), and, from the
start, one the budget cannot make identifiable even with every configuration chosen for it
(:func:`reachable_within`). The predicted σ
of each unknown is √diag(F⁻¹) of the data's information (:func:`predicted_std`; an unknown in a
direction the information does not determine is reported as not identifiable, never a number).
:func:`~.design_comparison.random_design` draws from the same pool, for comparison.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.workers import NO_STOP
from ..identification.inverse_eigen import REL_STD_LIMIT

FOCUS_SHARE = 0.7          # worst-first: Ds on σ/target above this share of the worst (docs/calibration.md)
STALL_GAIN = 2 * np.log(1 / 0.99)   # worst-first: a focus no candidate narrows by 1 % (σ, mean) and ...
STALL_SHARE = 0.1                   # ... by a tenth of what the average unknown gains is passed over
STALL_STEPS = 2                     # worst-first: measured configurations chosen for an unknown that
                                    # left its σ where it was, in a row, before the loop passes it over
RANK_RTOL = 1e-10
SHORTLIST = 1              # candidates re-evaluated with the full noise-floor rule at each step


def logdet(info, focus=None) -> float:
    """log det of ``info``, or with ``focus`` (indices) the Ds-criterion −log det((info⁻¹)_SS):
    the information about those unknowns with the others' uncertainty accounted for."""
    if focus is not None and len(focus) < info.shape[0]:
        try:
            cov = np.linalg.inv(info)[np.ix_(focus, focus)]
        except np.linalg.LinAlgError:
            return -np.inf
        sign, value = np.linalg.slogdet(cov)
        return -value if sign > 0 else -np.inf
    sign, value = np.linalg.slogdet(info)
    return value if sign > 0 else -np.inf


def best_excitations(candidate, base, count, focus=None) -> tuple:
    """The ``count`` excitation options of ``candidate`` (:class:`~.experiment_design.Candidate`)
    chosen greedily for the largest log det(base + F) (:func:`logdet` with ``focus``); returns
    (chosen indices, log det)."""
    chosen, best = [], logdet(base, focus)
    for _ in range(min(count, len(candidate.options))):
        gains = []
        for o in range(len(candidate.options)):
            if o in chosen:
                gains.append(-np.inf)
                continue
            gains.append(logdet(base + candidate.information(chosen + [o]), focus))
        o = int(np.argmax(gains))
        if chosen and gains[o] <= best + 1e-9:
            break
        chosen.append(o)
        best = gains[o]
    return tuple(chosen), best


@dataclass(frozen=True)
class DesignStep:
    """One chosen configuration: ``candidate`` index, excitation option indices ``excitations``,
    and after it the total information ``information`` (data only, scaled) and predicted
    standard deviations ``predicted_std`` (physical units; inf = not identifiable); ``focus``:
    the unknowns it was chosen for (Ds-optimal; () for all)."""

    candidate: int
    excitations: tuple
    information: np.ndarray
    predicted_std: np.ndarray
    focus: tuple = ()


def predicted_std(info, scale) -> np.ndarray:
    """√diag(F⁻¹) in physical units from the data information ``info`` (scaled unknowns); inf for
    an unknown with a component in a direction F does not determine (eigenvalue below RANK_RTOL of
    the largest)."""
    w, v = np.linalg.eigh(0.5 * (info + info.T))
    top = max(w.max(initial=0.0), 1e-300)
    keep = w > RANK_RTOL * top
    var = (v[:, keep] ** 2 / w[keep]) @ np.ones(keep.sum()) if keep.any() else np.full(info.shape[0], np.inf)
    null = np.any(np.abs(v[:, ~keep]) > 0.1, axis=1) if (~keep).any() else np.zeros(info.shape[0], bool)
    return np.where(null, np.inf, np.sqrt(var)) * scale


def worst_focus(relative_std, target, share=FOCUS_SHARE):
    """The unknowns the next configuration is chosen for: predicted σ/target (σ relative to the
    scale; ``target`` (P,) relative, inf: not waited for) above ``share`` × the worst, or σ not
    finite; None (every unknown: D-optimal) when that is all of them or none."""
    target = np.asarray(target, float)
    ratio = np.where(np.isinf(target), 0.0, np.asarray(relative_std, float) / np.where(np.isinf(target), 1.0, target))
    finite = np.isfinite(ratio)
    worst = ratio[finite].max(initial=0.0)
    focus = np.flatnonzero(~finite | (ratio > share * worst))
    return focus if 0 < focus.size < ratio.size else None


def greedy_design(candidates, budget, scale, prior, data_information=None, exclude=(),
                  pulses_per_configuration=2, shortlist=SHORTLIST, target=None, focus_share=None,
                  stall_share=STALL_SHARE) -> list:
    """D-optimal sequential choice of ``budget`` candidates (module docstring). ``prior``: the weak
    prior information; ``data_information``: what the measurements so far gave (scaled);
    ``exclude``: candidate indices already used. At each step the ``shortlist`` best candidates by
    the screening get their chosen excitations re-evaluated with the full noise-floor rule
    (:meth:`~.experiment_design.Candidate.refine`) before the choice. ``target`` (P,) relative standard deviations:
    once some unknowns are predicted below it, Ds-optimal on the others, or with ``focus_share`` on
    :func:`worst_focus`'s (inf: not waited for); a focus that the best candidate narrows by less
    than STALL_GAIN and ``stall_share`` of what the D-optimal one gives the average unknown is
    passed over (as if not waited for: the pool cannot serve it) for the next in line. Returns a
    list of :class:`DesignStep`."""
    data = np.zeros_like(prior) if data_information is None else np.array(data_information)
    used, steps = set(exclude), []
    for _ in range(int(budget)):
        base = prior + data
        waited, overall = None if target is None else np.array(target, float), None
        while True:
            focus = _focus(base, scale, waited, focus_share)
            scores = _scores(candidates, base, used, pulses_per_configuration, focus, shortlist)
            i = int(np.argmax([s for s, _ in scores]))
            if focus_share is None or focus is None or not np.isfinite(scores[i][0]):
                break
            gain = (scores[i][0] - logdet(base, focus)) / len(focus)
            if gain >= STALL_GAIN:
                break
            if overall is None:         # what the best candidate gives the average unknown (D-optimal)
                every = _scores(candidates, base, used, pulses_per_configuration, None, shortlist)
                overall = (max(s for s, _ in every) - logdet(base)) / base.shape[0]
            if not gain < stall_share * overall:
                break
            waited[focus] = np.inf      # worst-first: no candidate narrows these; the next in line
        if not np.isfinite(scores[i][0]):
            break
        chosen = scores[i][1]
        data = data + candidates[i].information(list(chosen))
        used.add(i)
        steps.append(DesignStep(i, chosen, data.copy(), predicted_std(data, scale),
                                () if focus is None else tuple(int(j) for j in focus)))
    return steps


def reachable_within(candidates, prior, scale, budget, count, mask, exclude=(), stop=NO_STOP) -> np.ndarray:
    """Worst-first: which unknowns of ``mask`` (bool, (P,)) the experiment can make identifiable
    at all — ``budget`` configurations, each chosen for that unknown alone (Ds on it, ``count``
    excitations, from ``prior``), bring its σ (data only: :func:`predicted_std`) to REL_STD_LIMIT of
    its scale. One they cannot would be reported not identifiable whatever the design did, so the
    design does not chase it (on scompi with 2²⁰ counts the d_f of joint 1 needs more than 8;
    docs/calibration.md). False outside ``mask``. At most P × ``budget`` greedy steps over the pool;
    ``stop.check()`` before each."""
    out = np.zeros(len(scale), bool)
    for i in np.flatnonzero(mask):
        base, used = np.array(prior, float), set(exclude)
        for _ in range(int(budget)):
            stop.check()
            best, pick, chosen = -np.inf, None, ()
            for c, cand in enumerate(candidates):
                if c not in used and cand.stable:
                    options, value = best_excitations(cand, base, count, [int(i)])
                    if value > best:
                        best, pick, chosen = value, c, options
            if pick is None:
                break
            used.add(pick)
            base = base + candidates[pick].information(list(chosen))
            if predicted_std(base - prior, scale)[i] <= REL_STD_LIMIT * scale[i]:
                out[i] = True
                break
    return out


def unserved_count(count, focus, before, now) -> np.ndarray:
    """Worst-first, along the loop: per unknown, how many measured configurations in a row were
    chosen for it (``focus`` of their :class:`DesignStep`) and left its σ (the design's, with what
    was measured: ``before`` → ``now``) without a 1 % fall (STALL_GAIN); any fall resets it. At
    STALL_STEPS the loop passes it over (not waited for by the design) until its σ falls."""
    fell = np.asarray(now, float) <= np.exp(-STALL_GAIN / 2) * np.asarray(before, float)
    count = np.where(fell, 0, count)
    count[[i for i in focus if not fell[i]]] += 1
    return count


def _focus(base, scale, target, focus_share):
    """greedy_design's unknowns to serve (None: all): worst-first, or those above their target."""
    if target is None:
        return None
    rel = predicted_std(base, scale) / scale
    if focus_share is not None:
        return worst_focus(rel, target, focus_share)
    above = np.flatnonzero(rel > target)
    return above if 0 < above.size < rel.size else None


def _scores(candidates, base, used, count, focus, shortlist):
    """Per candidate (criterion after it, chosen excitations), the ``shortlist`` best refined."""
    scores = [(-np.inf, ()) if i in used or not cand.stable else best_excitations(cand, base, count, focus)[::-1]
              for i, cand in enumerate(candidates)]
    for _ in range(2):                 # refined options may change the choice: until it settles
        order = np.argsort([-s for s, _ in scores])[:shortlist]
        stale = [int(i) for i in order if np.isfinite(scores[i][0]) and not set(scores[i][1]) <= candidates[i].refined]
        if not stale:
            break
        for i in stale:
            candidates[i].refine(scores[i][1])
            scores[i] = best_excitations(candidates[i], base, count, focus)[::-1]
    return scores


def identifiable_mask(std, scale) -> np.ndarray:
    """Unknowns whose (predicted or estimated) std is at most REL_STD_LIMIT times their scale."""
    std = np.asarray(std, float)
    return np.isfinite(std) & (std <= REL_STD_LIMIT * np.asarray(scale, float))


def worst_relative_std(std, values, identifiable=None) -> float:
    """max σ_i/|p_i| over the unknowns (only those in ``identifiable`` if given) [-]."""
    rel = np.asarray(std, float) / np.maximum(np.abs(values), 1e-300)
    if identifiable is not None:
        rel = rel[np.asarray(identifiable, bool)]
    return float(rel.max(initial=0.0))

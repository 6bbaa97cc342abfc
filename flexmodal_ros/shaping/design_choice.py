"""The rule of the ``auto`` shaper design and the report of a design choice (no rollout, no rclpy).

**Prediction** of a design [m]: the sum over the tracked modes (≤ 100 Hz) of c_k |a_k(t_c)|
(linearized model along the path, :mod:`flexmodal_ros.shaping.prediction`) plus the design's own
second-order (Coriolis/centrifugal) estimate (:func:`~flexmodal_ros.shaping.untreated.second_order`
on the design's reference), at one common time t_c, the end of the longest candidate (a shorter
design is credited with the decay it gets while a longer one still runs: the convention of the
simulated comparisons, :func:`~flexmodal_ros.shaping.vibration.compare`; both parts are computed
at each reference's end and decayed with the goal's eigenvalues). The second-order part differs
between designs by up to 4× (the timing of the copies shapes the quadratic forcing too) and, on
the random moves whose linear residual is below it, ranks the designs as the simulation does
(benchmarks/bench_shaper_design.py; docs/shaping/README.md).

**Rule of ``auto``** (added duration as the cost): the candidates are fixed, time-varying and
robust, plus ``robust-long`` (the robust design 1.5× as long, covering ±20 %) when the smallest
second-order estimate exceeds the smallest linear residual and the Coulomb band (the floor
dominates: only a sequence with more freedom lowers both), and then, on a one-segment move whose
shaped modes stay apart, ``robust-coriolis`` (designed against the configuration- and
velocity-dependent forcing, :mod:`flexmodal_ros.shaping.path_forcing`; its prediction's shaped
modes come from that model, which includes their second-order part). The rule below picks among
the others; robust-coriolis replaces that pick when the forcing model predicts it at most
``FORCING_GAIN`` (½) × the pick's residual and the pick's residual is at least
``FORCING_RESOLUTION`` (1 %) of the unshaped one by the same model (with every candidate
ranked by that model, its errors decided: 6 of 20 scompi random moves came out 1.8-6.5× worse
than fixed; docs/shaping/README.md). ``reason`` gives the three forcing-model residuals either way. R_min = the smallest predicted residual; fixed is as good as the
best within the model's accuracy when R_fixed ≤ (1 + ``SWITCH_MARGIN``)·R_min (the standard
practice keeps its place unless another design is predicted at least 1.5× better), the others
when R ≤ (1 + ``AUTO_MARGIN``)·R_min (10 %) and R ≤ R_fixed; of those, the one with the shortest
added delay is chosen (ties: fixed, time-varying, robust, robust-long, robust-coriolis). The choice is thus never
predicted worse than the fixed shaper, and a longer design is taken only for a predicted gain
above the margin. R includes the parts no design changes (the hold-law step of a PD-only
reference, the Coulomb band; :mod:`flexmodal_ros.shaping.untreated`): where they dominate, a
longer design buys nothing and fixed stays. ``reason`` says which and why, with every candidate's
prediction and delay.

The untreated parts reported with every design (:class:`Untreated`) are computed in
:mod:`flexmodal_ros.shaping.untreated`; the designs in :mod:`flexmodal_ros.shaping.robust_design`
and :mod:`flexmodal_ros.shaping.schedule`; :func:`~flexmodal_ros.shaping.shaper_design.shape_with_design`
builds the candidates and calls :func:`choose`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.errors import InputError
from ..core.validation import shown

DESIGNS = ("fixed", "robust", "time-varying", "auto")
DEFAULT_DESIGN = "auto"
AUTO_MARGIN = 0.10
SWITCH_MARGIN = 0.5            # fixed stays unless another design is predicted (1 + this)× better
DOMINATED_SHARE = 0.5
LIMITING_FRACTION = 0.01       # untreated parts above this × the unshaped residual cap the reduction
_TIE_ORDER = ("fixed", "time-varying", "robust", "robust-long", "robust-coriolis")


def check_design(value, error=InputError, field="shaper_design"):
    """``value`` if it is one of fixed, robust, time-varying, auto; else ``error`` naming the choices."""
    if value not in DESIGNS:
        raise error(f"{field}: unknown value {shown(value)} (choose from {', '.join(DESIGNS)})")
    return value


@dataclass(frozen=True)
class Prediction:
    """Predicted end-effector residual of one design (module docstring): ``added_delay_s``,
    ``per_mode_m`` (K,) per tracked mode at the common time on the linearized model (NaN: above
    the predicted range), ``second_order_m`` the Coriolis/centrifugal estimate."""
    design: str
    added_delay_s: float
    per_mode_m: np.ndarray
    second_order_m: float = 0.0

    @property
    def linear_m(self) -> float:
        return float(np.nansum(self.per_mode_m))

    @property
    def total_m(self) -> float:
        return self.linear_m + self.second_order_m

    def with_second_order(self, value):
        return Prediction(self.design, self.added_delay_s, self.per_mode_m, float(value))


@dataclass(frozen=True)
class Untreated:
    """What the shaper does not treat (module docstring) for the chosen design [m] at the common
    time: ``modes_m`` per unshaped tracked mode {1-based mode: residual}, ``second_order_m``
    (Coriolis/centrifugal), ``switch_step_m`` (PD law without compensation), ``coulomb_m``
    (friction band estimate), ``treated_m`` the shaped modes' predicted residual; ``share``
    untreated / total."""
    modes_m: dict
    second_order_m: float
    switch_step_m: float
    coulomb_m: float
    treated_m: float

    @property
    def total_m(self) -> float:
        return float(sum(self.modes_m.values()) + self.second_order_m + self.switch_step_m + self.coulomb_m)

    @property
    def share(self) -> float:
        whole = self.total_m + self.treated_m
        return self.total_m / whole if whole > 0 else 0.0

    @property
    def dominates(self) -> bool:
        return self.share > DOMINATED_SHARE

    def describe(self) -> str:
        """One line: the untreated parts and their share of the predicted residual."""
        parts = []
        if self.modes_m:
            big = sorted(self.modes_m.items(), key=lambda kv: -kv[1])[:3]
            parts.append("modes not shaped " + ", ".join(f"{k} ({v:.2g} m)" for k, v in big))
        if self.second_order_m:
            parts.append(f"Coriolis/centrifugal excitation (~{self.second_order_m:.2g} m, estimate)")
        if self.switch_step_m:
            parts.append(f"the step to the hold law at the end of a PD-only reference ({self.switch_step_m:.2g} m)")
        if self.coulomb_m:
            parts.append(f"Coulomb friction band (~{self.coulomb_m:.2g} m)")
        what = "; ".join(parts) if parts else "nothing"
        return f"{100 * self.share:.0f} % of the predicted residual is what the shaper does not treat: {what}"

    def to_dict(self) -> dict:
        return {"share": self.share, "dominates": self.dominates, "modes_m": {str(k): v for k, v in self.modes_m.items()},
                "second_order_m": self.second_order_m, "switch_step_m": self.switch_step_m,
                "coulomb_m": self.coulomb_m, "treated_m": self.treated_m, "description": self.describe()}


@dataclass(frozen=True)
class DesignChoice:
    """The design used for a path: ``requested`` (fixed | robust | time-varying | auto), ``chosen``,
    ``reason``; ``predictions`` {design: :class:`Prediction`} of the candidates evaluated (one for
    an explicit design, three for auto) and ``unshaped``; ``common_time_s`` t_c; ``untreated``
    (:class:`Untreated`), ``selected`` tracked modes (0-based) and the candidates' ``schedules``."""
    requested: str
    chosen: str
    reason: str
    predictions: dict
    unshaped: Prediction
    common_time_s: float
    untreated: Untreated
    selected: tuple = field(default_factory=tuple)
    schedules: dict = field(default_factory=dict, repr=False, compare=False)   # {design: ShaperSchedule}

    @property
    def predicted(self) -> Prediction:
        return self.predictions[self.chosen]

    @property
    def dominated(self) -> bool:
        """The untreated parts are most of the predicted residual and more than
        ``LIMITING_FRACTION`` of the unshaped one (they cap the reduction below 100×): callers say
        so instead of giving a reduction figure."""
        return self.untreated.dominates and self.untreated.total_m > LIMITING_FRACTION * self.unshaped.total_m

    @property
    def predicted_reduction(self) -> float:
        """Unshaped / chosen predicted residual (the parts no shaping changes included in both)."""
        extra = self.untreated.switch_step_m + self.untreated.coulomb_m
        return (self.unshaped.total_m + extra) / max(self.predicted.total_m + extra, 1e-300)

    def summary(self) -> str:
        """One line for ~/status and the CLI: the predicted residual of the chosen design and the
        unshaped one, both with the step to the hold law of a PD-only reference (the same for
        every shaping); the Coulomb band is a non-modal estimate, said apart."""
        p, step, band = self.predicted, self.untreated.switch_step_m, self.untreated.coulomb_m
        line = (f"design {self.chosen}" + (f" (auto: {self.reason})" if self.requested == "auto" else "")
                + f", predicted residual {p.total_m + step:.3g} m (unshaped {self.unshaped.total_m + step:.3g} m"
                + (f"; both include the step to the hold law at the end, {step:.2g} m" if step else "")
                + (f"; the Coulomb band, ~{band:.2g} m, is not included" if band else "") + ")")
        if self.dominated:
            return line + "; WARNING residual dominated by what the shaper does not treat: " + self.untreated.describe()
        return line + f", predicted reduction {self.predicted_reduction:.3g}x"

    def to_dict(self) -> dict:
        def pred(p):
            return {"added_delay_s": p.added_delay_s, "predicted_residual_m": p.total_m,
                    "second_order_m": p.second_order_m,
                    "predicted_residual_per_mode_m": [None if np.isnan(v) else float(v) for v in p.per_mode_m]}
        return {"requested": self.requested, "chosen": self.chosen, "reason": self.reason,
                "common_time_s": self.common_time_s, "candidates": {k: pred(v) for k, v in self.predictions.items()},
                "unshaped": pred(self.unshaped), "untreated": self.untreated.to_dict(),
                "dominated": self.dominated, "predicted_reduction": None if self.dominated else self.predicted_reduction}


def choose(predictions: dict, untreated=None) -> tuple[str, str]:
    """(design, reason) by the rule of ``auto`` (module docstring) from {design: Prediction} and
    {design: m} the parts no design changes (hold-law step, Coulomb band; default none)."""
    p = predictions
    extra = untreated or {}
    total = {name: x.total_m + extra.get(name, 0.0) for name, x in p.items()}
    best = min(total.values())
    limit = {name: (1.0 + AUTO_MARGIN) * best for name in p}
    if "fixed" in p:
        limit = {name: min(value, total["fixed"]) for name, value in limit.items()}
        limit["fixed"] = (1.0 + SWITCH_MARGIN) * best
    good = [name for name in _TIE_ORDER if name in p and total[name] <= limit[name]]
    chosen = min(good, key=lambda name: (p[name].added_delay_s, _TIE_ORDER.index(name)))
    listed = ", ".join(f"{k} {total[k]:.3g} m +{p[k].added_delay_s:.3f} s" for k in _TIE_ORDER if k in p)
    if len(good) == 1:
        why = "lowest predicted residual" + (f", > {1 + SWITCH_MARGIN:g}x below fixed" if chosen != "fixed" else "")
    else:
        why = (f"shortest of {', '.join(good)} (predicted within {100 * AUTO_MARGIN:.0f} % of the lowest; "
               f"fixed within {1 + SWITCH_MARGIN:g}x)")
    if any(extra.values()):
        why += " (with the parts no design changes: hold-law step, Coulomb band)"
    return chosen, f"{why}; predicted {listed}"



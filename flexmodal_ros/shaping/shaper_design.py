"""Which shaper along a path: fixed, robust, time-varying, or the one predicted best (no rclpy).

Designs (``shaper_design``; the shaper family zv | zvd | ei is chosen separately):

- ``fixed``: the family's shaper of the selected modes at the start configuration, used for the
  whole move (the fixed-frequency practice);
- ``robust``: one constant impulse sequence covering the frequency band each selected mode
  traverses along the path (a specified-insensitivity design, Singhose, Seering & Singer 1996;
  built in :mod:`flexmodal_ros.shaping.robust_design`);
- ``time-varying``: the configuration-dependent schedule (the family's shaper designed at every
  path sample, :func:`~flexmodal_ros.shaping.schedule.shaper_schedule`);
- ``auto`` (default): the three above are built (and, when the Coriolis/centrifugal floor
  dominates, ``robust-long``, the robust design 1.5× as long for ±20 %, and on one-segment moves
  ``robust-coriolis``, the robust design's least squares against the configuration- and
  velocity-dependent forcing, :mod:`flexmodal_ros.shaping.path_forcing`), their residual
  predicted and the rule of :mod:`flexmodal_ros.shaping.design_choice` picks one.

The robust design: :mod:`flexmodal_ros.shaping.robust_design`; the prediction and the rule of
``auto``: :mod:`flexmodal_ros.shaping.design_choice`; what the shaper does not treat:
:mod:`flexmodal_ros.shaping.untreated`; samples for a trajectory controller:
:mod:`flexmodal_ros.shaping.shaped_samples`.

**Modes**: those of :func:`~flexmodal_ros.shaping.schedule.path_modes` (end-effector step
contribution) plus those the unshaped move is predicted to excite (:func:`excited_modes`), at most
``MAX_SHAPED_MODES`` (4: the ones with the largest predicted unshaped residual; a convolved ZVD of
7 modes has 2187 impulses and a delay of 7 half-periods or more); the others are reported with
what the shaper does not treat. An explicit ``modes`` list is used as given.
"""
from __future__ import annotations

import numpy as np

from ..core.blas import single_thread_blas
from ..core.errors import InputError
from ..robot.model import create_data
from ..robot.trajectory import PiecewiseC4Trajectory
from .design_choice import (AUTO_MARGIN, DEFAULT_DESIGN, DESIGNS, DOMINATED_SHARE, LIMITING_FRACTION,  # noqa: F401
                            SWITCH_MARGIN, DesignChoice, Prediction, Untreated, _TIE_ORDER, check_design, choose)
from .prediction import PREDICTION_RATE_HZ, modal_amplitudes, path_eigenvalues
from .reference import ShapedTrajectory
from .robust_design import LONG_DESIGN, constant_schedule, design_schedule, robust_schedule  # noqa: F401
from .path_forcing import FORCING_DESIGN, FORCING_GAIN, FORCING_RESOLUTION, MAX_ADIABATIC, forcing_design, forcing_residual, path_forcing
from .schedule import path_modes
from .schedule import DEFAULT_AMA_RATE_HZ, DEFAULT_MAX_DAMPING, DEFAULT_THRESHOLD
from .schedule import DEFAULT_EXPANSION_ORDER, DEFAULT_EXPANSION_TOLERANCE
from .shapers import DEFAULT_TOLERANCE, KINDS
from .untreated import coulomb_band, modal_forcing, second_order, untreated_parts
from ..core.validation import shown

MAX_SHAPED_MODES = 4           # convolved shapers of more modes: ≥ 3⁵ impulses (ZVD), a long delay


def _predict(reference, pm, end, name, rate_hz, amplitudes=None):
    """Prediction of ``reference`` at ``end``; ``amplitudes``: its modal amplitudes at its own end
    (:func:`modal_amplitudes` with the same ``pm`` and rate) if already known — decayed to ``end``
    as modal_amplitudes does."""
    if amplitudes is None:
        amp = modal_amplitudes(reference, pm, end=end, rate_hz=rate_hz)
    else:
        duration = float(reference.duration)
        amp = amplitudes if not end > duration else amplitudes * np.exp(path_eigenvalues(pm)[-1] * (end - duration))
    return Prediction(name, float(getattr(reference, "added_delay", 0.0)), pm.contributions * np.abs(amp))



def _forcing_candidate(model, pm, path, kind, tolerance, start, failed):
    """(ShapedTrajectory of ``robust-coriolis``, its PathForcing) from the robust schedule
    ``start`` (:mod:`flexmodal_ros.shaping.path_forcing`), or None (reason kept in ``failed``):
    not a one-segment move, shaped modes too close for the model, no solution."""
    try:
        forcing = path_forcing(model, pm, path)
        if forcing.adiabatic > MAX_ADIABATIC:
            raise InputError(f"two shaped modes come too close along the path for the forcing model (coupling "
                             f"{forcing.adiabatic:.2g} per radian of their phase difference, limit {MAX_ADIABATIC:g})")
        return ShapedTrajectory(path, forcing_design(forcing, pm, path, kind, start, tolerance)), forcing
    except InputError as exc:
        failed.append(f"{FORCING_DESIGN} not available: {exc}")
        return None


def _forcing_switch(forcing, pm, path, candidates, chosen, common, mine):
    """(take robust-coriolis?, note): the forcing model's residuals [m] at the common time of
    robust-coriolis (``mine``, its prediction's shaped modes), of the design the rule chose and of
    the unshaped path; taken when it is at
    most ``FORCING_GAIN`` × the chosen one's and that one is at least ``FORCING_RESOLUTION`` ×
    the unshaped one (module docstring of :mod:`flexmodal_ros.shaping.design_choice`)."""
    def residual(ref):
        return float(forcing_residual(forcing, pm, ref, end=common).sum())
    other, none = residual(candidates[chosen]), residual(path)
    take = mine <= FORCING_GAIN * other and other >= FORCING_RESOLUTION * none
    note = (f"{FORCING_DESIGN}: the forcing model predicts {mine:.3g} m against {other:.3g} m for {chosen} "
            f"(unshaped {none:.3g} m): " + ("taken" if take else f"not taken (needs <= {FORCING_GAIN:g}x, the other "
                                            f">= {FORCING_RESOLUTION:g} x unshaped)"))
    return take, note


def excited_modes(pm, path, threshold=DEFAULT_THRESHOLD, max_damping=DEFAULT_MAX_DAMPING,
                  rate_hz=PREDICTION_RATE_HZ) -> tuple:
    """(modes, residual): tracked modes (0-based) that the unshaped move excites — damping ratio
    below ``max_damping`` along the path and predicted unshaped residual c_k |a_k| at least
    ``threshold`` × the largest of those — and that residual (K,) [m]. The contribution selection
    of :func:`~flexmodal_ros.shaping.schedule.path_modes` compares step amplitudes, which misses a
    slow mode that a move of this duration excites much more than its step amplitude says
    (kuka_lwr4: a 3.8 Hz mode with 5 % of the largest step amplitude but most of the unshaped
    residual); :func:`shape_with_design` adds these."""
    return _excited(pm, modal_amplitudes(path, pm, rate_hz=rate_hz), threshold, max_damping)


def _excited(pm, amplitudes, threshold, max_damping):
    """:func:`excited_modes` from the path's modal amplitudes (K,) (:func:`modal_amplitudes`)."""
    calm = pm.damping_ratios.max(axis=0) < max_damping
    residual = np.nan_to_num(pm.contributions * np.abs(amplitudes))
    residual[~calm] = 0.0
    if not residual.max() > 0:
        return (), residual
    return tuple(int(k) for k in np.flatnonzero(residual >= threshold * residual.max())), residual


@single_thread_blas           # many small products: BLAS threads only cost (flexmodal_ros.core.blas)
def shape_with_design(model, path: PiecewiseC4Trajectory, kind: str, shaper_design=DEFAULT_DESIGN, *, modes=None,
                      threshold=DEFAULT_THRESHOLD, max_damping=DEFAULT_MAX_DAMPING, tolerance=DEFAULT_TOLERANCE,
                      ama_rate_hz=DEFAULT_AMA_RATE_HZ, knot_rate_hz=None, workers=None, modal="exact",
                      expansion_order=DEFAULT_EXPANSION_ORDER, expansion_tolerance=DEFAULT_EXPANSION_TOLERANCE,
                      law="pd", prediction_rate_hz=PREDICTION_RATE_HZ):
    """Shape ``path`` with the ``kind`` shaper ("zv", "zvd", "ei") of its selected modes in the
    design ``shaper_design`` (module docstring), from the ``modal`` modes along it
    (:func:`~flexmodal_ros.shaping.schedule.path_modes`). ``law``: the controller the residual is
    predicted for ("pd", "feedforward": the reference through the PD's motor reference; "pd_only":
    plus the step to the hold law at the end). Returns (ShapedTrajectory or None when no mode is
    selected, PathModes, DesignChoice or None); the ShapedTrajectory carries both as ``design``
    and ``path_modes``, and its summary says the design, why and the predicted residual."""
    if kind not in KINDS:
        raise InputError(f"shaping: unknown shaper {shown(kind)} (choose from none, {', '.join(KINDS)})")
    check_design(shaper_design)
    if path.times.size < 2:
        raise InputError("trajectory: at least 2 waypoints are needed to shape a motion")
    def analysed(override):
        return path_modes(model, path, ama_rate_hz, override, threshold, max_damping, workers=workers, modal=modal,
                          expansion_order=expansion_order, expansion_tolerance=expansion_tolerance)

    pm = analysed(modes)
    path_amplitudes = None       # the unshaped path's modal amplitudes for this pm (reused by its prediction)
    if modes is None:
        path_amplitudes = modal_amplitudes(path, pm, rate_hz=prediction_rate_hz)
        excited, residual = _excited(pm, path_amplitudes, threshold, max_damping)
        wanted = set(pm.selected) | set(excited)
        if len(wanted) > MAX_SHAPED_MODES:       # the ones the move excites most
            wanted = set(sorted(wanted, key=lambda k: -residual[k])[:MAX_SHAPED_MODES])
        if wanted != set(pm.selected):
            pm, path_amplitudes = analysed(sorted(wanted)), None
    if not pm.selected:
        return None, pm, None
    data = create_data(model)       # work buffers of every model function below (this thread only)
    forcing = modal_forcing(model, pm, data)
    sel, path_force = list(pm.selected), None
    decay = path_eigenvalues(pm)[-1].real                   # (K,) after a reference ends

    def evaluated(ref):
        """(ref, linear (K,), second-order (K,)) at the reference's own end."""
        return (ref, pm.contributions * np.abs(modal_amplitudes(ref, pm, rate_hz=prediction_rate_hz)),
                second_order(model, pm, ref, ref.duration, forcing, data))

    def built(name):
        """:func:`evaluated` of design ``name``; None if auto goes on without that design
        (InputError kept in ``failed``)."""
        try:
            ref = ShapedTrajectory(path, design_schedule(pm, path, kind, name, tolerance))
        except InputError as exc:
            if shaper_design != "auto":
                raise
            failed.append(f"{name} not available: {exc}")
            return None
        return evaluated(ref)

    failed = []
    runs = {name: built(name) for name in (_TIE_ORDER[:3] if shaper_design == "auto" else (shaper_design,))}
    runs = {name: r for name, r in runs.items() if r is not None}
    if not runs:
        raise InputError("shaper design: no design available (" + "; ".join(failed) + ")")

    def at(common):          # {name: Prediction} decayed to the common time t_c
        out = {}
        for name, (ref, linear, second) in runs.items():
            factor = np.exp(decay * (common - ref.duration))
            out[name] = Prediction(name, float(ref.added_delay), linear * factor, float(np.sum(second * factor)))
        return out

    predictions = at(max(r[0].duration for r in runs.values()))
    floor = min(p.second_order_m for p in predictions.values())
    coulomb = coulomb_band(model, pm.configurations[-1], data)
    if (shaper_design == "auto" and "robust" in runs and floor > min(p.linear_m for p in predictions.values())
            and coulomb < floor):
        extra = built(LONG_DESIGN)          # the second-order floor dominates: a longer band-covering sequence
        if extra is not None:
            runs[LONG_DESIGN] = extra
        if path.positions.shape[0] == 2:    # and one designed against it (one-segment moves)
            path_force = _forcing_candidate(model, pm, path, kind, tolerance, runs["robust"][0].schedule, failed)
            if path_force is not None:
                ref, linear, second = evaluated(path_force[0])
                linear[sel], second[sel] = forcing_residual(path_force[1], pm, ref)[sel], 0.0   # both parts, one model
                runs[FORCING_DESIGN] = (ref, linear, second)
        predictions = at(max(r[0].duration for r in runs.values()))
    candidates = {name: r[0] for name, r in runs.items()}
    common = max(c.duration for c in candidates.values())
    unshaped = _predict(path, pm, common, "none", prediction_rate_hz, path_amplitudes)
    unshaped = unshaped.with_second_order(np.sum(second_order(model, pm, path, common, forcing, data)))
    parts = {name: untreated_parts(model, pm, p, common, candidates[name].duration, law, data, coulomb)
             for name, p in predictions.items()}
    if shaper_design == "auto":
        chosen, reason = choose({k: v for k, v in predictions.items() if k != FORCING_DESIGN},
                                {name: u.switch_step_m + u.coulomb_m for name, u in parts.items()})
        if FORCING_DESIGN in runs:
            mine = float(np.nansum(predictions[FORCING_DESIGN].per_mode_m[sel]))
            take, note = _forcing_switch(path_force[1], pm, path, candidates, chosen, common, mine)
            chosen, reason = (FORCING_DESIGN, note) if take else (chosen, f"{reason}; {note}")
        reason = "; ".join([reason] + failed)
    else:
        chosen, reason = shaper_design, "requested"
    untreated = parts[chosen]
    choice = DesignChoice(shaper_design, chosen, reason, predictions, unshaped, common, untreated, pm.selected,
                          {name: c.schedule for name, c in candidates.items()})
    sel = list(pm.selected)
    f0, f1 = pm.frequencies_hz[0, sel], pm.frequencies_hz[-1, sel]
    summary = (f"shaped {kind} on mode(s) {', '.join(str(k + 1) for k in sel)} "
               f"({', '.join(f'{a:.3g}->{b:.3g}' for a, b in zip(f0, f1))} Hz)")
    traj = (candidates[chosen] if knot_rate_hz is None          # built above; else with the control cycle's knots
            else ShapedTrajectory(path, candidates[chosen].schedule, summary, knot_rate_hz))
    traj.summary = f"{summary}, added delay {traj.added_delay:.4f} s; {choice.summary()}"
    traj.design, traj.path_modes = choice, pm
    return traj, pm, choice

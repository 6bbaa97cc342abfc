"""Shaper design along the path (issue 32), acceptance in the suite's simulator.

Random point-to-point moves (flexmodal_ros.shaping.vibration.random_moves, seed 1: start and goal
uniform within the URDF limits, 0.2-1 s, scaled to the URDF speed limit and 10 × it in
acceleration), 20 per robot that the shaper accepts (a move whose closed loop is not stable along
the path is refused and the next one taken: none was on these seeds), PD with static compensation
(``law="pd"``), ZVD, 2 kHz RK4, 0.5 s window after the longest reference. kuka_lwr4 with and
without its motor Coulomb friction; scompi has no Coulomb terms (checked), so its two settings are
one plant. Against the fixed-start ZVD and no shaping (peak |p_E − p_E,rest|):

(a) auto is never worse than fixed by more than 10 %;
(b) on moves whose shaped modes change by > 20 % along the path, auto is ≥ 2× better than fixed,
    or the design reports the residual as dominated by what the shaper does not treat; without
    Coulomb friction every such move reaches the 2× (one of them only with the robust-coriolis
    candidate, designed against the velocity-dependent forcing: docs/shaping/README.md);
(c) on moves that excite the modes (unshaped > 1e-4 m), auto is ≥ 10× better than no shaping,
    or the design reports the residual as dominated by what the shaper does not treat.

The distribution (median, worst) is printed by benchmarks/bench_shaper_design.py; measured (seed 1)
in docs/shaping/README.md, "Shaper design along the path". The moves run in two processes (2 cores);
~2-3 min.
Also: the robust design with the controller's model stiffness 20 % off the plant's.
"""
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.robot.trajectory import PiecewiseC4Trajectory
from flexmodal_ros.shaping import path_modes
from flexmodal_ros.shaping.trajectory_file import read_waypoints
from flexmodal_ros.shaping.vibration import compare_designs, random_moves

SEED, MOVES, DT, WINDOW = 1, 20, 5e-4, 0.5
DOCS = Path(__file__).resolve().parent.parent / "docs" / "shaping"


def evaluate(args):
    """One move of ``robot`` (coulomb: the plant keeps its Coulomb terms): residual peaks, the
    modes' relative change along the path and whether the design reports domination."""
    robot, coulomb, times, positions = args
    model = load_robot(robot)
    plant = model if coulomb else with_overrides(model, d_c=0.0, d_cm=0.0)
    try:
        residuals, choices = compare_designs(plant, times, positions, "zvd", "pd", ("fixed", "auto"), window=WINDOW,
                                             dt=DT)
    except InputError as exc:
        return {"refused": str(exc)}
    choice = choices["auto"]
    pm_f = choice.selected
    return {"peak": {k: v["peak_m"] for k, v in residuals.items()}, "chosen": choice.chosen,
            "dominated": choice.dominated, "change": _change(plant, times, positions, pm_f)}


def _change(plant, times, positions, selected):
    pm = path_modes(plant, PiecewiseC4Trajectory(times, positions), modes=list(selected))
    f = pm.frequencies_hz[:, list(selected)]
    return float(np.max((f.max(axis=0) - f.min(axis=0)) / f[0]))


def run_moves(robot, coulomb):
    model = load_robot(robot)
    gen = random_moves(model, SEED)
    out, tried = [], 0
    with ProcessPoolExecutor(2) as pool:
        while len(out) < MOVES:
            batch = [next(gen) for _ in range(MOVES - len(out))]
            tried += len(batch)
            out += [r for r in pool.map(evaluate, [(robot, coulomb, t, p) for t, p in batch]) if "refused" not in r]
            assert tried < 3 * MOVES, "most random moves were refused"
    return out


CASES = [("kuka_lwr4", False), ("kuka_lwr4", True), ("scompi", False)]


@pytest.mark.slow
@pytest.mark.parametrize("robot, coulomb", CASES)
def test_auto_design_on_random_moves(robot, coulomb):
    if robot == "scompi":
        model = load_robot(robot)
        assert not np.any(model.d_c) and not np.any(model.d_cm)       # with Coulomb = without
    results = run_moves(robot, coulomb)
    ratio = np.array([r["peak"]["auto"] / r["peak"]["fixed"] for r in results])
    gain = np.array([r["peak"]["none"] / r["peak"]["auto"] for r in results])
    assert ratio.max() <= 1.10, (robot, coulomb, ratio.round(3).tolist())                          # (a)
    for r, x, g in zip(results, ratio, gain):
        if r["change"] > 0.2:                                                                      # (b)
            assert x <= 0.5 or r["dominated"], (r, x)
        if r["peak"]["none"] > 1e-4:                                                               # (c)
            assert g >= 10 or r["dominated"], (r, g)
    big = [x for r, x in zip(results, ratio) if r["change"] > 0.2]
    if not coulomb and big:     # not vacuous: every such move gets the 2× (seed 1, kuka_lwr4: 3 of 3; the
        assert all(x <= 0.5 for x in big), big      # third needs robust-coriolis, shaping/path_forcing.py)
    excite = [g for r, g in zip(results, gain) if r["peak"]["none"] > 1e-4]
    if not coulomb:       # not vacuous: most moves that excite the modes are reduced 10× or more
        assert sum(g >= 10 for g in excite) >= 0.8 * len(excite), gain.round(1).tolist()
    else:                 # the LWR4's Coulomb band dominates, and every design says so
        assert all(r["dominated"] for r in results)


@pytest.mark.slow
@pytest.mark.parametrize("robot, move", [("kuka_lwr4", "kuka_lwr4_move.yaml"),
                                         ("scompi", "scompi_transfer_approach.yaml")])
def test_robust_design_keeps_its_benefit_with_the_model_stiffness_20_percent_off(robot, move):
    """The controller's model (shaping modes and static compensation) has 0.8 or 1.2 × the plant's
    joint stiffness (the plant starts at rest under the controller's hold): the robust design
    stays ≥ 100× below no shaping and below the time-varying design (measured, PD law, s = 0.8 /
    1.2: kuka 883× / 153×, scompi 473× / 508×; exact model 288× / 497×; docs/shaping/README.md)."""
    model = load_robot(robot)
    plant = with_overrides(model, d_c=0.0, d_cm=0.0)
    path = read_waypoints(model, DOCS / move)
    for scale in (0.8, 1.2):
        r, _ = compare_designs(plant, np.array(path.times), np.array(path.positions), "zvd", "pd",
                               ("time-varying", "robust"), stiffness_scale=scale, window=WINDOW, dt=DT)
        assert r["none"]["peak_m"] >= 100 * r["robust"]["peak_m"], (scale, r)
        assert r["robust"]["peak_m"] < r["time-varying"]["peak_m"], (scale, r)


@pytest.mark.slow
@pytest.mark.parametrize("robot, q0, qf, T", [
    ("scompi", "0,-0.5236,2.0944,-0.1745,-2.0944,0", "0,-0.3,1.8,0.1,-1.8,0", 0.3),
    ("scompi", "0,-0.5236,2.0944,-0.1745,-2.0944,0", "0,-0.3,1.8,0.1,-1.8,0", 0.5),
    ("kuka_lwr4", "0,1.2,0,1.2,0,0,0", "0,1.6,0,0.7,0,0,0", 0.5)])
def test_issue_table_moves_auto_is_not_worse_than_fixed(robot, q0, qf, T):
    """The three moves of issue 32's table (PD with static compensation, viscous friction only):
    the configuration-dependent shaper was 0.58× / 0.07× / 1.00× the fixed one; auto is at least
    as good as fixed (within 10 %) on each."""
    model = with_overrides(load_robot(robot), d_c=0.0, d_cm=0.0)
    positions = np.array([[float(v) for v in q0.split(",")], [float(v) for v in qf.split(",")]])
    r, choices = compare_designs(model, np.array([0.0, T]), positions, "zvd", "pd", ("fixed", "time-varying", "auto"),
                                 window=WINDOW, dt=DT)
    assert r["auto"]["peak_m"] <= 1.10 * r["fixed"]["peak_m"], r
    assert r["none"]["peak_m"] >= 10 * r["auto"]["peak_m"], r

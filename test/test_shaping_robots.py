"""Input shaping (issue 19) on kuka_lwr4 and scompi in the suite's simulator (acceptance).

Moves (docs/shaping/*.yaml, reasons in the files): kuka_lwr4 one 0.4 s point-to-point move of
joints 2-4 along which mode 2 drops 27 %; scompi a slow transfer then a fast approach (its modes
change < 5 % within one move that is fast enough to excite them, 21 % over the program). Both within
the URDF speed limits.

Plant: the robot with viscous friction only (thesis ch. 2 model, the one the AMA linearizes): the
LWR4's motor Coulomb friction (ch. 4 data) sticks the motors within ±D_c,m/K_P of their targets and,
with the thesis' zero link damping, leaves the link ringing at that amplitude whatever the command
(measured in the README). Integration at 2 kHz (as the ROS simulator), control at 1 kHz.
End-effector residual vibration (flexmodal_ros/shaping/vibration.py): peak and RMS of
|p_E − p_E,rest| over a common 0.5 s window that starts when the longest reference of the
comparison ends.
"""
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.shaping.trajectory_file import read_waypoints
from flexmodal_ros.shaping.vibration import compare, simulate_move

DOCS = Path(__file__).resolve().parent.parent / "docs" / "shaping"
MOVES = {"kuka_lwr4": DOCS / "kuka_lwr4_move.yaml", "scompi": DOCS / "scompi_transfer_approach.yaml"}
WINDOW = 0.5
DT = 1.0 / 2000.0


class Scenario:
    """Lazily simulated variants of one robot's move: (law, stiffness scale, shaping, fixed, modal)."""

    def __init__(self, robot):
        model = load_robot(robot)
        self.plant = with_overrides(model, d_c=0.0, d_cm=0.0)
        path = read_waypoints(model, MOVES[robot])
        self.times, self.positions = np.array(path.times), np.array(path.positions)
        self._runs = {}

    def run(self, law, scale, shaping, fixed=False, modal="exact", design="time-varying"):
        """The configuration-dependent (time-varying) design unless ``fixed`` or ``design`` say
        otherwise (issue 32: the shaper design's default is auto)."""
        key = (law, scale, shaping, fixed, modal, design)
        if key not in self._runs:
            self._runs[key] = simulate_move(self.plant, self.times, self.positions, shaping, law, scale, fixed,
                                            settle=WINDOW + 1.0, dt=DT, modal=modal, shaper_design=design)
        return self._runs[key]

    def compare(self, **runs):
        return compare({label: self.run(*key) for label, key in runs.items()}, WINDOW)


@pytest.fixture(scope="module")
def scenarios():
    return {robot: Scenario(robot) for robot in MOVES}


ROBOTS = [pytest.param("kuka_lwr4"), pytest.param("scompi", marks=pytest.mark.slow)]


@pytest.mark.parametrize("robot", ROBOTS)
def test_pd_configuration_dependent_zvd_beats_unshaped_and_fixed(scenarios, robot):
    """PD with static compensation at the reference (no flexible feedforward): configuration-
    dependent ZVD ≥ 10× less residual vibration than unshaped, ≥ 2× less than a ZVD tuned at the
    start configuration (peak and RMS). Measured: kuka 128× / 3.9×, scompi 137× / 7.3×."""
    s = scenarios[robot]
    r = s.compare(none=("pd", 1.0, "none"), zvd=("pd", 1.0, "zvd"), fixed=("pd", 1.0, "zvd", True))
    for metric in ("peak_m", "rms_m"):
        assert r["none"][metric] >= 10 * r["zvd"][metric], (metric, r)
        assert r["fixed"][metric] >= 2 * r["zvd"][metric], (metric, r)
    assert r["zvd"]["added_delay_s"] > 0 and r["none"]["added_delay_s"] == 0


@pytest.mark.parametrize("robot", ROBOTS)
def test_feedforward_from_a_model_20_percent_too_soft_shaping_helps(scenarios, robot):
    """Feedforward (and shaping modes) from a model with 0.8 × the plant's joint stiffness: shaping
    ≥ 3× less residual vibration than the unshaped feedforward. Measured: kuka 10.7×, scompi 125×."""
    s = scenarios[robot]
    r = s.compare(none=("feedforward", 0.8, "none"), zvd=("feedforward", 0.8, "zvd"))
    for metric in ("peak_m", "rms_m"):
        assert r["none"][metric] >= 3 * r["zvd"][metric], (metric, r)


@pytest.mark.parametrize("robot", ROBOTS)
def test_exact_feedforward_shaping_costs_only_its_delay(scenarios, robot):
    """Exact feedforward: what shaping costs is the added duration (kuka 0.70 s, scompi 0.27 s);
    the residual vibration is not larger with it (it is smaller: the 1 kHz zero-order-held
    feedforward is not exact either), and the tracking of its own reference stays as good."""
    s = scenarios[robot]
    r = s.compare(none=("feedforward", 1.0, "none"), zvd=("feedforward", 1.0, "zvd"))
    shaped, plain = s.run("feedforward", 1.0, "zvd"), s.run("feedforward", 1.0, "none")
    assert r["zvd"]["peak_m"] <= r["none"]["peak_m"] and r["zvd"]["rms_m"] <= r["none"]["rms_m"]
    assert 0.1 < shaped.added_delay < 1.0
    assert shaped.end_time == pytest.approx(s.times[-1] + shaped.added_delay)
    assert shaped.run.summary()["max_tracking_error_rad"] <= 1.5 * plain.run.summary()["max_tracking_error_rad"]


@pytest.mark.parametrize("robot", ROBOTS)
def test_polynomial_modal_path_leaves_the_exact_paths_residual_vibration(scenarios, robot):
    """PD law, configuration-dependent ZVD from the polynomial modal path (``modal="polynomial"``)
    instead of the shaped modes' exact eigenvalues at every sample: end-effector residual
    vibration (peak and RMS) within 2 % of the exact path's, same added delay within 0.1 ms.
    Measured: kuka 0.1 % / 0.08 %, scompi 0.0 % / 0.0 %."""
    s = scenarios[robot]
    r = s.compare(exact=("pd", 1.0, "zvd"), poly=("pd", 1.0, "zvd", False, "polynomial"))
    for metric in ("peak_m", "rms_m"):
        assert r["poly"][metric] == pytest.approx(r["exact"][metric], rel=0.02), (metric, r)
    assert r["poly"]["added_delay_s"] == pytest.approx(r["exact"]["added_delay_s"], abs=1e-4)
    assert s.run("pd", 1.0, "zvd", False, "polynomial").path_modes.modal == "polynomial"

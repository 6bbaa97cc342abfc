"""Modal maps (sweep.py) and the `flexmodal sweep` CLI: configuration sets, MAC tracking, crossings,
writers, gain sweep (thesis Fig. 2.5, notes_003 §3 oracle O4)."""
import csv
import json

import numpy as np
import pytest

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.modes import ModeSet, mac, plot_map, track_modes, write_csv, write_json
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.flexible_joint.sweep import config_grid, config_line, gain_sweep, modal_map

SCOMPI_Q1 = [0.0, -np.pi / 6, 2 * np.pi / 3, -np.pi / 18, -2 * np.pi / 3, 0.0]
SCOMPI_Q50 = [0.0, np.pi / 6, np.pi / 3, np.pi / 3, -np.pi / 3, 0.0]


@pytest.fixture(scope="module")
def scompi():
    return load_robot("scompi")


@pytest.fixture(scope="module")
def scompi_map(scompi):
    return modal_map(scompi, config_line(scompi, SCOMPI_Q1, SCOMPI_Q50, 50))


def test_gain_sweep_fig_2_5(scompi):
    """Config 1, K_P 2000 → 15000, K_D = 0.425 √K_P: f1 2.39 → 6.51 Hz, ζ1 9.44 → 7.85 %."""
    kps = np.linspace(2000, 15000, 14)
    res = gain_sweep(scompi, SCOMPI_Q1, kps)
    f1 = np.array([r.frequencies_hz[0] for r in res])
    z1 = 100 * np.array([r.damping_ratios[0] for r in res])
    assert abs(f1[0] - 2.39) <= 0.01 and abs(f1[-1] - 6.51) <= 0.01
    assert abs(z1[0] - 9.44) <= 0.01 and abs(z1[-1] - 7.85) <= 0.01
    assert np.all(np.diff(f1) > 0) and np.all(np.diff(z1) < 0)


def test_config_line_and_grid(scompi):
    line = config_line(scompi, SCOMPI_Q1, SCOMPI_Q50, 50)
    assert line.shape == (50, 6)
    np.testing.assert_allclose(line[[0, -1]], [SCOMPI_Q1, SCOMPI_Q50])
    grid = config_grid(scompi, np.zeros(6), {"joint_2": [0.1, 0.2, 0.3], "joint_5": [-1.0, 1.0]})
    assert grid.shape == (6, 6)
    np.testing.assert_allclose(grid[:, 1], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3])
    np.testing.assert_allclose(grid[:, 4], [-1.0, 1.0, 1.0, -1.0, -1.0, 1.0])  # serpentine
    assert np.all(grid[:, [0, 2, 3, 5]] == 0)
    steps = np.abs(np.diff(config_grid(scompi, np.zeros(6), {"joint_2": [0, 1, 2], "joint_3": [0, 1],
                                                              "joint_4": [0, 1, 2]}), axis=0))
    assert np.all(steps.sum(axis=1) == 1)  # consecutive configurations are grid neighbours
    with pytest.raises(InputError, match="joint"):
        config_grid(scompi, np.zeros(6), {"joint_9": [0.0]})
    with pytest.raises(InputError, match="num"):
        config_line(scompi, SCOMPI_Q1, SCOMPI_Q50, 1)
    with pytest.raises(InputError, match="q_end"):
        config_line(scompi, SCOMPI_Q1, SCOMPI_Q50[:5], 5)


def test_mac_properties():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 3)) + 1j * rng.normal(size=(6, 3))
    m = mac(a, a * (2 - 3j))  # invariant to complex scaling
    np.testing.assert_allclose(np.diag(m), 1.0)
    assert np.all((m >= 0) & (m <= 1 + 1e-12))
    e = np.eye(4)
    np.testing.assert_allclose(mac(e, e), np.eye(4))


def _fake(freqs, shapes):
    """ModeSet with given (sorted) frequencies and shapes (only fields tracking uses)."""
    freqs = np.asarray(freqs, float)
    shapes = np.asarray(shapes, complex)
    return ModeSet(freqs, np.full(freqs.size, 0.05), 2j * np.pi * freqs, shapes, np.zeros(0),
                   "stable", np.zeros(0, complex))


def test_tracking_follows_shapes_through_a_crossing():
    """Mode A (shape e1) rises 1 → 3 Hz through mode B (shape e2, 2 Hz): sorted order swaps between
    configurations 2 and 3 (1-based); tracking keeps identities and reports one crossing there."""
    e1, e2 = np.array([1.0, 0.1, 0, 0]), np.array([0.0, 0, 1, 0.2])
    results = []
    for fa in [1.0, 1.5, 2.5, 3.0]:
        pairs = sorted([(fa, e1), (2.0, e2)], key=lambda p: p[0])
        results.append(_fake([p[0] for p in pairs], np.stack([p[1] for p in pairs], axis=1)))
    order, crossings = track_modes(results)
    np.testing.assert_array_equal(order, [[0, 1], [0, 1], [1, 0], [1, 0]])
    assert len(crossings) == 1
    assert crossings[0].modes == (0, 1) and crossings[0].between == (1, 2)
    assert "configurations 2 and 3" in crossings[0].description


def test_tracking_rejects_changing_mode_count():
    r2 = _fake([1.0, 2.0], np.eye(4)[:, :2])
    r1 = _fake([1.0], np.eye(4)[:, :1])
    with pytest.raises(InputError, match="track_modes"):
        track_modes([r2, r1])


def test_scompi_map_is_tracked_consistently(scompi_map):
    order = scompi_map.mode_order
    assert order.shape == (50, 12)
    assert all(sorted(row) == list(range(12)) for row in order)
    for i in range(1, 50):  # tracked shapes of neighbours match well
        a = scompi_map.results[i - 1].mode_shapes[:, order[i - 1]]
        b = scompi_map.results[i].mode_shapes[:, order[i]]
        assert np.diag(mac(a, b)).min() > 0.9
    f = scompi_map.tracked("frequencies_hz")
    for c in scompi_map.crossings:  # each reported crossing really swaps the tracked order
        (a, b), (i, j) = c.modes, c.between
        assert (f[i, a] - f[i, b]) * (f[j, a] - f[j, b]) < 0


def test_writers(scompi_map, tmp_path):
    with open(write_csv(scompi_map, tmp_path / "m.csv")) as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:2] == ["configuration", "q_joint_1"] and "f12_hz" in rows[0] and "zeta12" in rows[0]
    assert len(rows) == 51
    f = scompi_map.tracked("frequencies_hz")
    assert float(rows[8][rows[0].index("f1_hz")]) == f[7, 0]
    doc = json.loads(write_json(scompi_map, tmp_path / "m.json").read_text())
    assert len(doc["results"]) == 50 and len(doc["mode_order"]) == 50
    assert doc["results"][7]["frequencies_hz"] == scompi_map.results[7].frequencies_hz.tolist()
    png = plot_map(scompi_map, tmp_path / "m.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000


def test_progress_bar(scompi, capsys):
    modal_map(scompi, config_line(scompi, SCOMPI_Q1, SCOMPI_Q50, 20), progress=True)
    assert "20/20" in capsys.readouterr().err


def test_cli_sweep_line(tmp_path, capsys):
    a, b = (",".join(map(repr, q)) for q in (SCOMPI_Q1, SCOMPI_Q50))
    assert cli_main(["sweep", "--robot", "scompi", "--line", a, b, "--num", "50", "--tool-mass", "4",
                     "--out-dir", str(tmp_path), "--no-progress", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_configurations"] == 50 and out["num_modes"] == 12 and out["all_stable"]
    assert abs(out["frequency_range_hz"][0] - 5.13) <= 0.01  # case 2 minimum (§2.4.2)
    for name in ("modal_map.csv", "modal_map.json", "modal_map.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_cli_sweep_grid_and_configs(tmp_path, capsys):
    assert cli_main(["sweep", "--robot", "planar_2r", "--grid", "joint_2=0:3:4", "--grid", "joint_1=-1:1:3",
                     "--out-dir", str(tmp_path), "--no-progress", "--no-plot", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_configurations"] == 12
    path = tmp_path / "q.csv"
    path.write_text("0.1,0.2\n0.3,0.4\n")
    assert cli_main(["sweep", "--robot", "planar_2r", "--configs", str(path), "--out-dir", str(tmp_path),
                     "--no-progress", "--no-plot", "--no-track"]) == 0
    assert "2 configurations" in capsys.readouterr().out


@pytest.mark.parametrize("argv, field", [
    (["--grid", "joint_2=0:3"], "--grid"),
    (["--grid", "nope=0:1:3"], "nope"),
    (["--configs", "/nonexistent.csv"], "--configs"),
    (["--line", "0,0", "1,1", "--num", "1"], "num"),
    (["--line", "0,0", "1,nan"], "q_end"),
])
def test_cli_sweep_bad_input(tmp_path, capsys, argv, field):
    assert cli_main(["sweep", "--robot", "planar_2r", *argv, "--out-dir", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err

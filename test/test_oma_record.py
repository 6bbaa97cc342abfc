"""Issue 29 item 16: `flexmodal oma --save-record F` writes the analysed record (CSV or ROS 2 bag)
with its excitation (end instant and the simulated impulse); read back through --csv / --bag the
stored instant starts the free decay, so the analysis of the file is the analysis of the record."""
import json
import subprocess
import sys

import numpy as np
import pytest

from flexmodal_ros.core.errors import InputError
from flexmodal_ros.oma.bags import read_joint_states, write_joint_states
from flexmodal_ros.oma.impact import Impulse, simulate_impact
from flexmodal_ros.oma.pipeline import run_oma
from flexmodal_ros.oma.record import free_decay_start, read_csv, write_csv
from flexmodal_ros.robot.registry import load_robot

Q0 = np.zeros(7)


@pytest.fixture(scope="module")
def kuka_record():
    """kuka_lwr4 at q = 0: the response peaks late, so a guessed free-decay start leaves 202
    samples and SSI-cov refuses the record; the stored instant keeps the whole decay."""
    model = load_robot("kuka_lwr4")
    record = simulate_impact(model, Q0, Impulse(), 2.5, 1000.0)
    return model, record, summary(run_oma(record, model, Q0, "ssi-cov"))


def summary(result):
    comp = result.comparisons[0]
    return (np.round(result.identified.frequencies_hz, 9).tolist(), [r.status for r in comp.rows])


@pytest.mark.parametrize("kind", ["csv", "sqlite3", "mcap"])
def test_saved_record_reads_back_with_its_excitation(kuka_record, tmp_path, kind):
    model, record, original = kuka_record
    if kind == "csv":
        back = read_csv(write_csv(record, tmp_path / "r.csv"))
    else:
        back = read_joint_states(write_joint_states(tmp_path / "bag", record, storage=kind))
    np.testing.assert_array_equal(back.values, record.values)
    assert back.excitation_end == pytest.approx(record.excitation_end - record.t[0], abs=1e-9) \
        or back.excitation_end == pytest.approx(record.excitation_end, abs=1e-12)
    assert free_decay_start(back) == free_decay_start(record) == 206
    assert back.metadata["impulse"] == record.metadata["impulse"]
    assert summary(run_oma(back, model, Q0, "ssi-cov")) == original


def test_without_the_instant_the_start_is_guessed(kuka_record, tmp_path):
    """The same samples without the header comments: the free decay is guessed (late peak)."""
    model, record, _ = kuka_record
    text = write_csv(record, tmp_path / "r.csv").read_text()
    plain = tmp_path / "plain.csv"
    plain.write_text("".join(line + "\n" for line in text.splitlines() if not line.startswith("#")))
    guessed = read_csv(plain)
    assert guessed.excitation_end is None and free_decay_start(guessed) > 2000
    # the short guessed segment is analysed at the orders it supports, with a warning (it used to
    # fail: "ssi-cov order 100 is too high"; a calibration must not die of a short record)
    result = run_oma(guessed, model, Q0, "ssi-cov")
    assert any("model orders limited to" in w for w in result.identified.warnings)


@pytest.mark.parametrize("line, match", [
    ("# excitation_end_s: soon\n", "'# excitation_end_s:' is not a number"),
    ("# metadata: {not json\n", "'# metadata:' is not JSON"),
    ('# metadata: {"impulse": {"force": "x"}}\n', "impulse must have force, axis, start, duration"),
])
def test_bad_record_headers_are_refused(kuka_record, tmp_path, line, match):
    text = write_csv(kuka_record[1], tmp_path / "r.csv").read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(line + "".join(l + "\n" for l in text.splitlines() if not l.startswith("#")))
    with pytest.raises(InputError, match=match):
        read_csv(bad)


def test_cli_save_record_round_trip(tmp_path):
    common = ["--robot", "planar_2r", "--q", "0.3,0.5", "--no-plot", "--json"]

    def oma(*argv):
        proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "oma", *common, *argv],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first = oma("--save-record", str(tmp_path / "rec.csv"), "--out-dir", str(tmp_path / "a"))
    assert first["files"]["record"] == str(tmp_path / "rec.csv")
    assert (tmp_path / "rec.csv").read_text().startswith("# excitation_end_s: 0.206")
    again = oma("--csv", str(tmp_path / "rec.csv"), "--out-dir", str(tmp_path / "b"))
    assert again["identified"]["frequencies_hz"] == first["identified"]["frequencies_hz"]
    assert [r["status"] for r in again["comparisons"][0]["rows"]] == \
        [r["status"] for r in first["comparisons"][0]["rows"]]
    bag = oma("--save-record", str(tmp_path / "rec_bag"), "--out-dir", str(tmp_path / "c"))
    from_bag = oma("--bag", str(tmp_path / "rec_bag"), "--out-dir", str(tmp_path / "d"))
    assert from_bag["identified"]["frequencies_hz"] == bag["identified"]["frequencies_hz"]
    proc = subprocess.run([sys.executable, "-m", "flexmodal_ros.cli", "oma", *common, "--save-record",
                           str(tmp_path / "rec_bag")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--save-record" in proc.stderr and "already exists" in proc.stderr

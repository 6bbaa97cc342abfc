"""Issue 18: modal maps and identification multi-starts on Dask, maps streamed to a Zarr store.

A LocalCluster of 2 single-threaded worker processes (scheduler, nannies and workers on
127.0.0.1) is started once for the module and reached by its tcp:// address, as a remote cluster
would be; one test starts the embedded ``local:N`` cluster itself.
"""
import hashlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.distributed import (map_results, open_executor, open_store, parse_scheduler,
                                       plot_store, run_starts, sweep_to_store, tracked_rows)
from flexmodal_ros.distributed.executors import LOOPBACK_CLUSTER
from flexmodal_ros.core.errors import InputError
from flexmodal_ros.identification.fit import identify
from flexmodal_ros.flexible_joint.ama import modal_analysis_batch
from flexmodal_ros.robot.registry import load_robot
from flexmodal_ros.distributed import modal_map
from flexmodal_ros.flexible_joint.sweep import config_grid, grid_spec

from test_identification import TABLE_3_1_Q, TABLE_3_2, model_modes

REPO = Path(__file__).resolve().parents[1]
RTOL = 1e-12


@pytest.fixture(scope="module")
def cluster():
    """Address of a LocalCluster(2) started in this test module (loopback only, no dashboard)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, **LOOPBACK_CLUSTER) as lc:
        yield lc


@pytest.fixture(scope="module")
def kuka():
    return load_robot("kuka_lwr4")


@pytest.fixture(scope="module")
def grid_2000(kuka):
    """2,000 kuka_lwr4 configurations (40 × 50 serpentine grid over joints 2 and 4)."""
    return grid_spec(kuka, np.full(7, 0.1), {"joint_2": np.linspace(-1.0, 1.0, 40),
                                             "joint_4": np.linspace(0.2, 1.5, 50)})


@pytest.fixture(scope="module")
def reference(kuka, grid_2000):
    """Today's local path: the in-memory, MAC-tracked modal map."""
    return modal_map(kuka, grid_2000.rows())


def assert_store_equals_map(path, mmap):
    group = open_store(path)
    width = mmap.mode_order.shape[1]
    for field in ("frequencies_hz", "damping_ratios"):
        np.testing.assert_allclose(tracked_rows(group, field)[:, :width], mmap.tracked(field), rtol=RTOL, atol=0)
    np.testing.assert_array_equal(group["mode_order"][:][:, :width], mmap.mode_order)
    np.testing.assert_array_equal(group["configurations"][:], mmap.configurations)
    np.testing.assert_array_equal(group["crossing_configurations"][:],
                                  np.array([c.between for c in mmap.crossings]).reshape(-1, 2))
    np.testing.assert_array_equal(group["crossing_modes"][:],
                                  np.array([c.modes for c in mmap.crossings]).reshape(-1, 2))
    codes = {"stable": 0, "marginally stable": 1, "unstable": 2}
    np.testing.assert_array_equal(group["stability"][:], [codes[r.stability] for r in mmap.results])
    return group


def tree_digest(path):
    """Hash of every file (name and bytes) under ``path``."""
    h = hashlib.sha256()
    for f in sorted(Path(path).rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(path)).encode() + f.read_bytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------- lazy grid

def test_lazy_grid_slices_equal_the_materialized_serpentine_grid(kuka):
    axes = {"joint_1": [0.0, 0.5, 1.0], "joint_3": [-1.0, 0.0], "joint_6": [0.1, 0.2, 0.3, 0.4]}
    grid = grid_spec(kuka, np.full(7, 0.2), axes)
    full = config_grid(kuka, np.full(7, 0.2), axes)
    assert grid.size == 24 and full.shape == (24, 7)
    pieces = np.vstack([grid.rows(s, s + 5) for s in range(0, 24, 5)])
    np.testing.assert_array_equal(pieces, full)
    assert np.all(np.abs(np.diff(full, axis=0)).astype(bool).sum(axis=1) == 1)   # neighbours


# ----------------------------------------------------------------------------- same numbers

def test_2000_config_kuka_grid_same_numbers_local_and_cluster(kuka, grid_2000, reference, cluster, tmp_path):
    assert len(reference.results) == 2000 and len(reference.crossings) > 0
    on_dask = modal_map(kuka, grid_2000.rows(), scheduler=cluster.scheduler_address)
    for field in ("frequencies_hz", "damping_ratios"):
        np.testing.assert_allclose(on_dask.tracked(field), reference.tracked(field), rtol=RTOL, atol=0)
    np.testing.assert_array_equal(on_dask.mode_order, reference.mode_order)
    assert [c.description for c in on_dask.crossings] == [c.description for c in reference.crossings]
    # Out of core, chunks of 256 (8 chunks: tracking joined at 7 boundaries), on the cluster and locally.
    run = sweep_to_store(kuka, grid_2000, tmp_path / "dask.zarr", scheduler=cluster.scheduler_address,
                         chunk_size=256)
    assert (run.computed, run.resumed) == (8, 0)
    assert run.summary["num_crossings"] == len(reference.crossings)
    assert run.summary["crossings"] == [c.description for c in reference.crossings[:10]]
    assert_store_equals_map(tmp_path / "dask.zarr", reference)
    png = plot_store(tmp_path / "dask.zarr", tmp_path / "map.png")
    assert png.stat().st_size > 10000


def test_table_3_2_identification_same_best_solution_on_cluster(cluster):
    planar = load_robot("planar_2r")
    shift, expected, _ = TABLE_3_2[1]                      # case 2: −0.5 pp damping
    data = model_modes(planar, TABLE_3_1_Q, (0, 3))
    data = data.with_damping(data.damping_ratio + shift)
    local = identify(planar, data, objective="determinant", starts=12, seed=3, workers=1)
    with open_executor(cluster.scheduler_address) as executor:
        remote = identify(planar, data, objective="determinant", starts=12, seed=3,
                          run_starts=lambda p, x0: run_starts(executor, p, x0, starts_per_task=5))
    np.testing.assert_array_equal(remote.values, local.values)
    np.testing.assert_array_equal(remote.start_objectives, local.start_objectives)
    assert remote.objective == local.objective
    np.testing.assert_allclose(remote.values[:2], expected[:2], atol=0.1)     # Table 3.2 oracle
    np.testing.assert_allclose(remote.values[2:], expected[2:], atol=0.01)


# ----------------------------------------------------------------------------- store

def test_10k_eigenvalue_store_read_back_with_zarr_xarray_pandas_dask(kuka, cluster, tmp_path):
    """The benchmark's 10⁶ path (frequencies + damping, no shapes) on 10⁴ configurations."""
    import dask.array as da
    import xarray as xr
    import zarr

    grid = grid_spec(kuka, np.zeros(7), {"joint_2": np.linspace(-1.2, 1.2, 100),
                                         "joint_4": np.linspace(0.1, 1.9, 100)})
    path = tmp_path / "map10k.zarr"
    run = sweep_to_store(kuka, grid, path, scheduler=cluster.scheduler_address, track=False,
                         chunk_size=2048)
    assert run.computed == 5 and run.summary["num_configurations"] == 10_000
    ds = xr.open_zarr(path, consolidated=False)
    assert ds.sizes["configuration"] == 10_000 and ds["frequencies_hz"].dims == ("configuration", "mode")
    assert "mode_shapes" not in ds and "mode_order" not in ds
    f = ds["frequencies_hz"].values
    sample = np.arange(0, 10_000, 97)
    expect = modal_analysis_batch(kuka, grid.rows()[sample], shapes=False)
    for i, r in zip(sample, expect):
        np.testing.assert_allclose(f[i, :r.num_modes], r.frequencies_hz, rtol=RTOL, atol=0)
        assert np.isnan(f[i, r.num_modes:]).all()
    z = zarr.open_group(str(path), mode="r", use_consolidated=False)
    np.testing.assert_array_equal(z["configurations"][:], grid.rows())
    df = ds[["damping_ratios"]].to_dataframe()
    assert len(df) == 10_000 * 14
    lazy = da.from_zarr(str(path), component="damping_ratios")
    assert lazy.chunks[0] == (2048,) * 4 + (1808,)
    assert float(da.nanmax(lazy).compute()) == run.summary["damping_range"][1]
    assert run.summary["stability_counts"]["stable"] == int((ds["stability"].values == 0).sum())


def test_local_store_and_resume_computes_only_missing_chunks(tmp_path):
    planar = load_robot("planar_2r")
    grid = grid_spec(planar, np.zeros(2), {"joint_1": np.linspace(-2, 2, 40), "joint_2": np.linspace(0.1, 3, 50)})
    reference = modal_map(planar, grid.rows())
    path = tmp_path / "resume.zarr"
    sweep_to_store(planar, grid, path, chunk_size=500, workers=2)
    assert_store_equals_map(path, reference)
    import zarr
    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    # As if the run had stopped before chunks 1 and 3 were written.
    group["chunk_done"][[1, 3]] = False
    group["frequencies_hz"][500:1000] = np.nan
    group["mode_order"][:] = -1
    run = sweep_to_store(planar, grid, path, workers=1)     # chunk size taken from the store
    assert (run.computed, run.resumed) == (2, 2)
    assert_store_equals_map(path, reference)


def test_killed_worker_still_gives_the_complete_correct_store(kuka, grid_2000, reference, cluster, tmp_path):
    path = tmp_path / "killed.zarr"
    outcome = {}

    def work():
        try:
            outcome["run"] = sweep_to_store(kuka, grid_2000, path, scheduler=cluster.scheduler_address,
                                            chunk_size=100)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc

    from distributed import Client
    with Client(cluster) as client:
        victim = next(iter(client.run(os.getpid).values()))
    thread = threading.Thread(target=work)
    thread.start()
    deadline = time.monotonic() + 60
    import zarr
    while time.monotonic() < deadline:
        if (path / "chunk_done").exists():
            done = zarr.open_group(str(path), mode="r", use_consolidated=False)["chunk_done"][:]
            if done.sum() >= 2:
                break
        time.sleep(0.01)
    assert 2 <= done.sum() < 20, "the kill must land mid-run"
    os.kill(victim, signal.SIGKILL)
    thread.join(120)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["run"].computed == 20
    assert_store_equals_map(path, reference)


# ----------------------------------------------------------------------------- bad input

def test_bad_scheduler_and_store_inputs(kuka, tmp_path):
    planar = load_robot("planar_2r")
    line = np.linspace([0.1, 0.2], [0.5, 0.9], 30)
    for spec in ("local:0", "local:x", "http://127.0.0.1:8786", "tcp://127.0.0.1", ""):
        with pytest.raises(InputError, match="--scheduler"):
            parse_scheduler(spec)
    with socket.socket() as s:          # a free loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="no Dask scheduler reachable"):
        map_results(planar, line, scheduler=f"tcp://127.0.0.1:{port}", timeout=1.0)
    with pytest.raises(InputError, match="no Dask scheduler reachable"):
        sweep_to_store(planar, line, tmp_path / "never.zarr", scheduler=f"tcp://127.0.0.1:{port}",
                       timeout=1.0)
    # Not writable: the parent is a file.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot create"):
        sweep_to_store(planar, line, blocker / "map.zarr")
    # Something that is not a store.
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine")
    with pytest.raises(InputError, match="not a flexmodal modal-map store"):
        sweep_to_store(planar, line, tmp_path / "notes")
    assert (tmp_path / "notes" / "a.txt").read_text() == "mine"
    # A store of another robot, another grid, another model or other options: refused, untouched.
    path = tmp_path / "planar.zarr"
    sweep_to_store(planar, line, path, chunk_size=8)
    before = tree_digest(path)
    with pytest.raises(InputError, match="robot: store 'planar_2r', this run 'kuka_lwr4'"):
        sweep_to_store(kuka, np.zeros((30, 7)), path)
    with pytest.raises(InputError, match="configurations: this run's list differs"):
        sweep_to_store(planar, line + 0.01, path)
    from flexmodal_ros.robot.model import with_overrides
    with pytest.raises(InputError, match="model parameters"):
        sweep_to_store(with_overrides(planar, kp=[4000.0, 4000.0]), line, path)
    with pytest.raises(InputError, match="tracked"):
        sweep_to_store(planar, line, path, track=False)
    with pytest.raises(InputError, match="chunk_size"):
        sweep_to_store(planar, line, path, chunk_size=16)
    assert tree_digest(path) == before
    for bad in (0, -3, 2.5):
        with pytest.raises(InputError, match="chunk_size"):
            sweep_to_store(planar, line, tmp_path / "c.zarr", chunk_size=bad)
    with pytest.raises(InputError, match="3 values per configuration|expected 2"):
        sweep_to_store(planar, np.zeros((4, 3)), tmp_path / "d.zarr")
    with pytest.raises(InputError, match="not found"):
        open_store(tmp_path / "nothing.zarr")


def test_cli_sweep_store_and_identify_on_a_scheduler(cluster, tmp_path, capsys):
    addr = cluster.scheduler_address
    store = tmp_path / "cli.zarr"
    argv = ["sweep", "--robot", "planar_2r", "--grid", "joint_1=-1:1:9", "--grid", "joint_2=0.2:2:7",
            "--scheduler", addr, "--store", str(store), "--chunk-size", "20", "--out-dir", str(tmp_path),
            "--no-progress", "--json"]
    assert cli_main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_configurations"] == 63 and out["chunks_computed"] == 4
    assert (tmp_path / "modal_map.png").stat().st_size > 10000
    assert cli_main(argv) == 0                                   # re-run: everything resumed
    again = json.loads(capsys.readouterr().out)
    assert (again["chunks_computed"], again["chunks_resumed"]) == (0, 4)
    assert {k: v for k, v in again.items() if "chunks" not in k} == \
        {k: v for k, v in out.items() if "chunks" not in k}
    assert cli_main(["sweep", "--robot", "kuka_lwr4", "--line", "0,0,0,0,0,0,0", "0,1,0,1,0,0,0",
                     "--num", "5", "--store", str(store), "--no-progress"]) == 2
    assert "holds a different modal map" in capsys.readouterr().err
    assert cli_main(["sweep", "--robot", "planar_2r", "--line", "0,0", "1,1", "--scheduler", "local:zero",
                     "--no-plot", "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--scheduler" in err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli_main(["sweep", "--robot", "planar_2r", "--line", "0,0", "1,1", "--num", "4", "--no-progress",
                     "--scheduler", f"tcp://127.0.0.1:{port}", "--scheduler-timeout", "1", "--no-plot",
                     "--out-dir", str(tmp_path)]) == 2
    assert "no Dask scheduler reachable within 1 s" in capsys.readouterr().err
    assert cli_main(["identify", "--data", str(REPO / "config" / "planar_2r_modal_data.yaml"),
                     "--starts", "4", "--unknowns", "k", "--scheduler", addr, "--json"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert cli_main(["identify", "--data", str(REPO / "config" / "planar_2r_modal_data.yaml"),
                     "--starts", "4", "--unknowns", "k", "--workers", "1", "--json"]) == 0
    assert remote == json.loads(capsys.readouterr().out)


def test_embedded_local_cluster_listens_on_loopback_only():
    """--scheduler local:N: every socket of the client, scheduler, nanny and worker is on 127.0.0.1."""
    import psutil

    from flexmodal_ros.identification.fit import solve_starts
    from flexmodal_ros.identification.inverse_eigen import IdentificationProblem

    planar = load_robot("planar_2r")
    problem = IdentificationProblem(planar, model_modes(planar, TABLE_3_1_Q[:4], (0, 3)), unknowns="k")
    x0 = np.random.default_rng(1).uniform(size=(3, 2))
    with open_executor("local:1") as executor:
        info = executor.client.scheduler_info()
        addresses = [info["address"], *info["workers"]] + [w["nanny"] for w in info["workers"].values()]
        assert all(a.startswith("tcp://127.0.0.1:") for a in addresses), addresses
        procs = [psutil.Process()] + psutil.Process().children(recursive=True)
        listening = [c.laddr.ip for p in procs for c in p.net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and set(listening) == {"127.0.0.1"}, listening
        remote = run_starts(executor, problem, x0)
    local = solve_starts(problem, x0)
    assert [r[1] for r in remote] == [r[1] for r in local]


def _heartbeat_record_kept(dask_worker):
    import logging
    record = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 0,
                               "Failed to communicate with scheduler during heartbeat.", None, None)
    logger = logging.getLogger("distributed.worker")
    ours = [f for f in logger.filters if type(f).__module__ == "flexmodal_ros.distributed.worker_logging"]
    return str(dask_worker.status), len(ours), logger.filter(record)


def test_a_closing_worker_of_a_local_cluster_does_not_log_its_failed_heartbeat():
    """CI (Jazzy, README's `flexmodal sweep ... --scheduler local:2`): a worker's heartbeat racing
    its own close logged "Failed to communicate with scheduler during heartbeat." with a
    CommClosedError traceback, every task done. Dropped while the worker closes, kept while it runs."""
    from distributed.core import Status

    from flexmodal_ros.distributed.worker_logging import dropped

    with open_executor("local:1") as executor:
        status, filters, kept = next(iter(executor.client.run(_heartbeat_record_kept).values()))
    assert filters == 1                                  # installed on the worker
    assert status == "Status.running" and kept          # a running worker's failed heartbeat is an error
    message = "Failed to communicate with scheduler during heartbeat."
    assert [dropped(message, s) for s in (Status.closing, Status.closing_gracefully, Status.closed)] == [True] * 3
    assert not dropped(message, Status.running)
    assert not dropped("Unexpected exception during heartbeat. Closing worker.", Status.closing)


# ----------------------------------------------------------------------------- ROS

def test_modal_map_service_refuses_maps_above_the_inline_limit(ros):
    """~/compute_modal_map answers small maps inline; above max_map_configurations it answers
    success=false with a pointer to the store path, and keeps serving."""
    from rclpy.parameter import Parameter

    from flexmodal_interfaces.srv import ComputeModalMap
    from flexmodal_ros.nodes.modal_analysis_server import ModalAnalysisServer

    node = ros.add_node(ModalAnalysisServer(context=ros.context, parameter_overrides=[
        Parameter("robot", value="planar_2r"), Parameter("max_map_configurations", value=6)]))
    client = ros.node("map_client").create_client(ComputeModalMap, "/modal_analysis/compute_modal_map")

    def request(m):
        req = ComputeModalMap.Request()
        req.num_configurations = m
        req.positions = np.linspace([0.1, 0.2], [0.5, 1.5], m).ravel().tolist()
        req.track_modes = True
        return req

    big = ros.call(client, request(7))
    assert not big.success and not big.results
    assert "max_map_configurations (6)" in big.message and "--store" in big.message, big.message
    small = ros.call(client, request(6))
    assert small.success and len(small.results) == 6 and len(small.mode_order) == 6 * 4
    assert node.max_map == 6

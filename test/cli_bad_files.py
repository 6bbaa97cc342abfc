"""Run every ``flexmodal`` subcommand against bad files for each of its file options (issue 29 item 7).

Used by test/test_cli_bad_files.py: ``python test/cli_bad_files.py WORKDIR`` prints one JSON line
per case {"case", "argv", "code", "stderr", "seconds"}. The CLI and its heavy dependencies are
imported once; each case then runs in a forked child (fresh process state, real exit code and
stderr, a hang is killed after TIME_LIMIT_S) — what the console script does, at a fraction of
the start-up cost of one interpreter per case.

The subcommands and their file options come from the parser itself
(:func:`flexmodal_ros.cli.build_parser`, options declared with ``file_kind``); BASE gives a
valid command line per subcommand, VALID a valid value per file option (the bad value replaces it).
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # no BLAS thread pools across fork()
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from flexmodal_ros.cli import build_parser, main  # noqa: E402
from flexmodal_ros.robot.registry import share_dir  # noqa: E402

TIME_LIMIT_S = 30.0
SHARE = share_dir()
PLANAR_PARAMS = str(SHARE / "config" / "planar_2r.yaml")
PLANAR_URDF = str(SHARE / "urdf" / "planar_2r.urdf")


def valid_files(work: Path) -> dict:
    """Valid inputs the base command lines use."""
    traj = work / "traj.yaml"
    traj.write_text(yaml.safe_dump({"points": [{"time": 0.0, "positions": [0.3, 0.5]},
                                               {"time": 0.3, "positions": [0.4, 0.6]}]}))
    configs = work / "configs.csv"
    configs.write_text("0.1,0.2\n0.3,0.4\n")
    links_configs = work / "links_configs.csv"
    links_configs.write_text("0.0,1.0,1.0\n0.0,1.1,1.0\n")
    t = np.arange(400) / 1000.0
    y = np.exp(-3 * t) * np.sin(2 * np.pi * 20 * t)
    record = work / "record.csv"
    record.write_text("t,joint_1_motor,joint_2_motor\n" + "".join(
        f"{a!r},{b!r},{c!r}\n" for a, b, c in zip(t, y, 0.5 * y + 0.1 * np.cos(2 * np.pi * 45 * t) * np.exp(-5 * t))))
    return {"traj": str(traj), "configs": str(configs), "links_configs": str(links_configs), "record": str(record)}


def base_commands(work: Path, files: dict) -> dict:
    """A valid command line per subcommand, and {option: valid value} for its file options
    (options not in the dict are optional and absent from the base line)."""
    out = str(work / "out")
    planar = ["--params", PLANAR_PARAMS]
    return {
        "model": (planar, {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF}),
        "dh2urdf": ([str(SHARE / "urdf" / "planar_2r.dh.yaml")],
                    {"dh_file": str(SHARE / "urdf" / "planar_2r.dh.yaml"), "-o": str(work / "p.urdf")}),
        "modal": (planar + ["--q", "0.3,0.5"], {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF}),
        "sweep": (planar + ["--configs", files["configs"], "--no-plot", "--no-progress"],
                  {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "--configs": files["configs"],
                   "--out-dir": out, "--store": str(work / "store.zarr")}),
        "identify": (["--data", str(SHARE / "config" / "planar_2r_modal_data.yaml"), "--starts", "1",
                      "--workers", "1"],
                     {"--data": str(SHARE / "config" / "planar_2r_modal_data.yaml"),
                      "--write-params": str(work / "id.yaml")}),
        "codegen": (planar, {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "--out-dir": out}),
        "invdyn": (planar + ["--q", "0,0", "--qd", "0,0", "--qdd", "0,0", "--q3", "0,0", "--q4", "0,0"],
                   {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "--plot": out}),
        "simulate": (planar + ["--q0", "0.3,0.5", "--qf", "0.4,0.6", "--T", "0.3", "--settle", "0.05",
                               "--plot-dir", ""],
                     {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "--trajectory": files["traj"],
                      "--plot-dir": out}),
        "export": (planar + ["--format", "mjcf", "-o", str(work / "robot.xml")],
                   {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "-o": str(work / "robot.xml")}),
        "expand": (planar + ["--about", "0.3,0.5", "--order", "2"],
                   {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "-o": str(work / "c.npz"),
                    "--plot-dir": out}),
        "links": (["--robot", "three_link_arm", "--q", "0,1,1", "--modes", "3"],
                  {"--params": str(SHARE / "config" / "three_link_arm.yaml"),
                   "--urdf": str(SHARE / "urdf" / "three_link_arm.urdf"), "--configs": files["links_configs"],
                   "--out-dir": out}),
        "constrained": (["--model", "fourbar", "--loops", "2", "--method", "mcs"], {"--model": "fourbar"}),
        "oma": (planar + ["--csv", files["record"], "--q", "0.3,0.5", "--no-plot", "--out-dir", out],
                {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "--csv": files["record"],
                 "--bag": None, "--out-dir": out, "--data-out": str(work / "data.yaml"),
                 "--save-record": str(work / "saved.csv")}),
        "shape": (planar + ["--trajectory", files["traj"], "--shaper", "zv", "-o", str(work / "shaped.csv")],
                  {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "--trajectory": files["traj"],
                   "-o": str(work / "shaped.csv")}),
        "calibrate": (planar + ["--budget", "1", "--validation", "0", "--candidates", "4", "--no-tracking",
                                "-o", str(work / "cal.yaml")],
                      {"--params": PLANAR_PARAMS, "--urdf": PLANAR_URDF, "-o": str(work / "cal.yaml"),
                       "--report-dir": out, "--true-params": PLANAR_PARAMS}),
        "doctor": ([], {}),                     # no file option: nothing to feed it (test_cli_bad_files)
    }


# options whose base line gives another source they would conflict with, and what to drop then
CONFLICTS = {("oma", "--bag"): ["--csv"], ("sweep", "--store"): [], ("links", "--configs"): ["--q"],
             ("simulate", "--trajectory"): ["--q0", "--qf", "--T"], ("expand", "--plot-dir"): ["--about", "--order"]}
EXTRA = {("sweep", "--store"): ["--no-plot"], ("expand", "--plot-dir"): ["--paper"],
         ("invdyn", "--plot"): ["--trajectory", "thesis", "--samples", "3", "--robot", "kuka_lwr4"],
         ("links", "--out-dir"): ["--plot-mode", "1"]}
DROP_FOR = {("invdyn", "--plot"): ["--params", "--q", "--qd", "--qdd", "--q3", "--q4"],
            ("expand", "--plot-dir"): ["--params"]}


def bad_inputs(work: Path) -> dict:
    fifo = work / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (work / "binary").write_bytes(bytes(range(256)) * 64)
    (work / "latin1.yaml").write_bytes("robot: caf\xe9\nurdf: x\n".encode("latin-1"))
    (work / "empty").write_bytes(b"")
    (work / "huge_line").write_bytes(b"a" * 200_000 + b"\n")
    (work / "a_directory").mkdir(exist_ok=True)
    return {"binary": work / "binary", "non-utf8": work / "latin1.yaml", "empty": work / "empty",
            "huge line": work / "huge_line", "directory": work / "a_directory", "fifo": fifo,
            "/dev/zero": Path("/dev/zero"), "missing": work / "no_such_file.yaml"}


def bad_outputs(work: Path) -> dict:
    (work / "a_directory").mkdir(exist_ok=True)
    (work / "regular").write_text("x")
    return {"/dev/full": Path("/dev/full"), "directory": work / "a_directory",
            "missing parent": work / "no_such_dir" / "f.out", "parent is a file": work / "regular" / "f.out",
            "unwritable": Path("/sys/flexmodal_bad_file_test.out")}


def bad_output_dirs(work: Path) -> dict:
    (work / "regular").write_text("x")
    return {"existing file": work / "regular", "under a file": work / "regular" / "sub",
            "/dev/full": Path("/dev/full"), "unwritable": Path("/sys/flexmodal_bad_file_test"),
            "unwritable parent": Path("/proc/flexmodal_bad_file_test/sub")}


def file_options(parser):
    """{subcommand: {option: kind}} from the parser (actions tagged by ``file_option``)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, p in sub.choices.items():
        out[name] = {(a.option_strings[0] if a.option_strings else a.dest): a.file_kind
                     for a in p._actions if getattr(a, "file_kind", None)}
    return out


def command(name, base, option, value, valid):
    """The argv of subcommand ``name`` with file option ``option`` set to ``value``."""
    argv = list(base)
    drop = CONFLICTS.get((name, option), []) + DROP_FOR.get((name, option), [])
    for flag in drop:
        if flag in argv:
            i = argv.index(flag)
            takes = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            del argv[i:i + 1 + takes]
    argv += EXTRA.get((name, option), [])
    if not option.startswith("-"):                 # positional: the first argument
        if argv and argv[0] == valid.get(option):
            argv = argv[1:]
        return [name, str(value)] + argv
    if option in argv:
        argv[argv.index(option) + 1] = str(value)
    else:
        argv += [option, str(value)]
    return [name] + argv


def run_case(argv):
    """(exit code, stderr text, seconds, timed out) of ``flexmodal argv`` in a forked child."""
    read, write = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:                                           # child: the console script's behaviour
        os.close(read)
        os.dup2(write, 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        code = 1
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:                             # what the interpreter prints for an uncaught error
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)
    os.close(write)
    chunks, timed_out = [], False
    while True:
        left = TIME_LIMIT_S - (time.monotonic() - start)
        if left <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([read], [], [], left)
        if ready:
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    os.close(read)
    code = os.waitstatus_to_exitcode(status)
    return code, b"".join(chunks).decode("utf-8", "replace"), time.monotonic() - start, timed_out


def cases(work: Path):
    parser = build_parser()
    files = valid_files(work)
    bases = base_commands(work, files)
    inputs, outputs, dirs = bad_inputs(work), bad_outputs(work), bad_output_dirs(work)
    for name, options in file_options(parser).items():
        base, valid = bases[name]
        for option, kind in options.items():
            bad = {"input": inputs, "output": outputs, "output_dir": dirs}[kind]
            for label, value in bad.items():
                yield f"{name} {option} <{label}>", command(name, base, option, value, valid)


def extra_cases(work: Path):
    """Bad requests of issue 29 item 7 that are not bad files: refused before any work."""
    many = work / "many_waypoints.yaml"
    many.write_text("points:\n" + "".join(f"  - {{time: {0.01 * k:.2f}, positions: [0.3, 0.5]}}\n"
                                          for k in range(20_000)))
    planar = ["--params", PLANAR_PARAMS]
    yield "constrained --loops <2147483647>", ["constrained", "--model", "fourbar", "--loops", "2147483647"]
    yield "constrained --elements <500>", ["constrained", "--model", "pendulum", "--elements", "500"]
    yield "shape --trajectory <20000 waypoints>", ["shape", *planar, "--trajectory", str(many), "--shaper", "zv",
                                                   "-o", str(work / "shaped.csv")]
    yield "simulate --trajectory <20000 waypoints>", ["simulate", *planar, "--trajectory", str(many),
                                                      "--plot-dir", ""]
    yield "expand --order <2147483647>", ["expand", "--robot", "kuka_lwr4", "--about", "0,0.5,0,1,0,0.5,0",
                                          "--order", "2147483647"]
    yield "links --modes <200>", ["links", "--robot", "three_link_arm", "--q", "0,1,1", "--modes", "200"]


def main_driver():
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    only = sys.argv[2] if len(sys.argv) > 2 else None
    for label, argv in [*cases(work), *extra_cases(work)]:
        if only and not label.startswith(only):
            continue
        code, err, seconds, timed_out = run_case(argv)
        print(json.dumps({"case": label, "argv": argv, "code": code, "stderr": err, "seconds": seconds,
                          "timed_out": timed_out}), flush=True)


if __name__ == "__main__":
    main_driver()

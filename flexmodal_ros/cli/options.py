"""Options and helpers shared by the ``flexmodal`` subcommands.

Every option that names a file or a directory is declared through :func:`file_option`, which tags
the argparse action with ``file_kind`` ("input", "output" or "output_dir"): the bad-file test
(test/test_cli_bad_files.py) finds them there. Outputs are checked before any work with
:func:`checked_output` / :func:`checked_output_dir` (core: :func:`~flexmodal_ros.core.validation.output_file`,
:func:`~flexmodal_ros.core.validation.output_directory`) and written through
:func:`~flexmodal_ros.core.validation.write_output`.
"""
import io
import json
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.validation import output_directory, output_file, read_text_file, shown, write_output
from ..flexible_joint.sweep import MAX_CONFIGURATIONS, check_map_size, config_grid, config_line, grid_spec
from ..robot.params import Tool
from ..robot.registry import resolve_model
from ..modes import plot_map, write_csv, write_json

FILE_KINDS = ("input", "output", "output_dir")


def file_option(parser, *flags, kind, **kwargs):
    """``parser.add_argument(*flags, **kwargs)`` for an option naming a file or directory, tagged
    with ``file_kind`` = ``kind`` (one of FILE_KINDS)."""
    if kind not in FILE_KINDS:
        raise ValueError(f"kind: expected one of {FILE_KINDS}, got {shown(kind)}")
    action = parser.add_argument(*flags, **kwargs)
    action.file_kind = kind
    return action


def checked_output(args, dest, option):
    """The output file of option ``option`` (``args.<dest>``; None if not given), checked before
    any work."""
    value = getattr(args, dest)
    return None if value is None else output_file(value, option)


def checked_output_dir(args, dest, option, needed=True):
    """The output directory of option ``option`` (``args.<dest>``), created and checked before any
    work when ``needed`` (None if not given or not needed)."""
    value = getattr(args, dest)
    return None if value in (None, "") or not needed else output_directory(value, option)


def add_model_options(parser):
    """--robot NAME | --urdf F --params F."""
    group = parser.add_argument_group("robot model")
    group.add_argument("--robot", help="bundled robot name (scompi, planar_2r, kuka_lwr4)")
    file_option(group, "--urdf", kind="input", help="URDF file (default: the one named in --params)")
    file_option(group, "--params", kind="input", help="flexibility YAML file")


def model_from_args(args):
    """The model selected by :func:`add_model_options`."""
    return resolve_model(args.robot, args.urdf, args.params)


def add_sweep_output_options(parser, stem, workers="worker threads"):
    """--out-dir, --no-track, --no-plot, --workers, --no-progress, --max-configurations of the
    sweep commands."""
    file_option(parser, "--out-dir", kind="output_dir", default=".",
                help=f"directory for {stem}.{{csv,json,png}} (default .)")
    parser.add_argument("--no-track", action="store_true", help="keep modes in frequency order (no MAC tracking)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    parser.add_argument("--workers", type=int, default=None, help=f"{workers} (default: up to 2 CPUs)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--max-configurations", type=int, default=MAX_CONFIGURATIONS,
                        help=f"refuse maps larger than this (default {MAX_CONFIGURATIONS}, about 0.3 GB)")


MAX_CROSSINGS_SHOWN = 10


def write_map_outputs(mmap, out_dir, stem, title, plot=True):
    """``stem``.csv / .json (and .png unless ``plot`` is false) of a ModalMap in ``out_dir``."""

    out = output_directory(out_dir, "--out-dir")
    files = [write_output(out / f"{stem}.csv", "--out-dir", lambda p: write_csv(mmap, p)),
             write_output(out / f"{stem}.json", "--out-dir", lambda p: write_json(mmap, p))]
    if plot:
        files.append(write_output(out / f"{stem}.png", "--out-dir", lambda p: plot_map(mmap, p, title=title)))
    return files


def print_crossings(crossings, stem):
    """The first MAX_CROSSINGS_SHOWN crossing descriptions, then how many more are in the JSON."""
    for c in crossings[:MAX_CROSSINGS_SHOWN]:
        print(f"  {c}")
    if len(crossings) > MAX_CROSSINGS_SHOWN:
        print(f"  ... {len(crossings) - MAX_CROSSINGS_SHOWN} more mode crossings (see {stem}.json)")


def add_json_option(parser):
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def parse_floats(text, field):
    """'1,2.5,-3' -> float array; InputError naming the option on anything else."""
    try:
        values = [float(v) for v in str(text).split(",") if v.strip() != ""]
    except ValueError:
        raise InputError(f"{field}: expected comma-separated numbers, got {shown(text)}") from None
    if not values:
        raise InputError(f"{field}: no values given")
    return np.array(values)


def print_json(obj):
    """Print ``obj`` as JSON (numpy arrays and scalars converted)."""
    print(json.dumps(obj, default=_to_builtin))


def _to_builtin(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def add_override_options(p):
    """--kp, --kd, --tool-mass, --wrench: changes of the robot model for one run."""
    p.add_argument("--kp", help="motor-side P gain(s): one value or one per joint [N m/rad]")
    p.add_argument("--kd", help="motor-side D gain(s): one value or one per joint [N m s/rad]")
    p.add_argument("--tool-mass", type=float, help="point-mass tool at the end-effector frame [kg] "
                   "(replaces the configured tool; 0 removes it)")
    p.add_argument("--wrench", help="constant external wrench fx,fy,fz,mx,my,mz in frame 0 [N, N m]")


def model_overrides(args):
    """Keyword overrides (kp, kd, tool, wrench) given on the command line (None = not given)."""
    return {"kp": None if args.kp is None else parse_floats(args.kp, "--kp"),
            "kd": None if args.kd is None else parse_floats(args.kd, "--kd"),
            "tool": None if args.tool_mass is None else Tool.point_mass(args.tool_mass),
            "wrench": None if args.wrench is None else parse_floats(args.wrench, "--wrench")}


def configurations_from_args(args, model, lazy=False):
    """The configurations of --line/--grid/--configs (at most --max-configurations); a --grid stays
    lazy with ``lazy`` (the out-of-core store path, which only bounds each axis)."""
    limit = args.max_configurations
    if args.line:
        return config_line(model, parse_floats(args.line[0], "--line Q_START"),
                           parse_floats(args.line[1], "--line Q_END"), args.num, limit)
    if args.grid:
        base = np.zeros(model.n) if args.q is None else parse_floats(args.q, "--q")
        axes = dict(_grid_axis(spec, limit) for spec in args.grid)
        return grid_spec(model, base, axes) if lazy else config_grid(model, base, axes, limit)
    return _read_configs(Path(args.configs))


def _grid_axis(spec, limit):
    """'joint_2=-1:1:11' -> ('joint_2', 11 values)."""
    name, sep, rng = spec.partition("=")
    parts = rng.split(":")
    if not sep or len(parts) != 3:
        raise InputError(f"--grid: expected JOINT=START:STOP:NUM, got {shown(spec)}")
    start, stop, num = parse_floats(",".join(parts), f"--grid {name}")
    if num < 1 or num != int(num):
        raise InputError(f"--grid {name}: NUM must be a positive integer, got {shown(parts[2])}")
    check_map_size(int(num), limit, f"--grid {name}")
    return name.strip(), np.linspace(start, stop, int(num))


def _read_configs(path):
    text = read_text_file(path, "--configs")
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        raise InputError(f"--configs {path}: no configurations (empty file)")
    try:
        return np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2)
    except ValueError as exc:
        raise InputError(f"--configs {path}: not a numeric CSV ({shown(str(exc), 200)})") from None

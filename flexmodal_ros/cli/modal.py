"""``flexmodal modal`` (one configuration) and ``flexmodal sweep`` (modal map) subcommands.

Configurations outside the URDF position limits are computed and warned about on stderr."""
import io
import sys
from pathlib import Path

import numpy as np

from ..config import Tool
from ..errors import InputError
from ..modal import limit_warnings, modal_analysis
from ..model import with_overrides
from ..modes import plot_map, write_csv, write_json
from ..sweep import MAX_CONFIGURATIONS, check_map_size, config_grid, config_line, modal_map
from ..validation import read_text_file, shown
from .common import add_json_option, add_model_options, model_from_args, parse_floats, print_json

MAX_CROSSINGS_SHOWN = 10


def add_parser(sub):
    p = sub.add_parser("modal", help="modal parameters of the closed loop in one configuration")
    add_model_options(p)
    p.add_argument("--q", required=True, help="configuration, comma-separated, URDF joint order [rad or m]")
    _add_override_options(p)
    add_json_option(p)
    p.set_defaults(func=run)

    s = sub.add_parser("sweep", help="modal map over a line, grid or list of configurations")
    add_model_options(s)
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--line", nargs=2, metavar=("Q_START", "Q_END"),
                       help="straight line between two comma-separated configurations (with --num)")
    where.add_argument("--grid", action="append", metavar="JOINT=START:STOP:NUM",
                       help="vary JOINT over NUM values (repeatable; others at --q)")
    where.add_argument("--configs", metavar="FILE",
                       help="CSV file, one configuration per row (URDF joint order, no header)")
    s.add_argument("--num", type=int, default=50, help="configurations on --line (default 50)")
    s.add_argument("--max-configurations", type=int, default=MAX_CONFIGURATIONS,
                   help=f"refuse maps larger than this (default {MAX_CONFIGURATIONS}, about 0.3 GB)")
    s.add_argument("--q", help="base configuration of --grid (default: zeros)")
    _add_override_options(s)
    s.add_argument("--out-dir", default=".", help="directory for modal_map.{csv,json,png} (default .)")
    s.add_argument("--no-track", action="store_true", help="keep modes in frequency order (no MAC tracking)")
    s.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    s.add_argument("--workers", type=int, default=None, help="worker threads (default: up to 2 CPUs)")
    s.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_json_option(s)
    s.set_defaults(func=run_sweep)


def _add_override_options(p):
    p.add_argument("--kp", help="motor-side P gain(s): one value or one per joint [N m/rad]")
    p.add_argument("--kd", help="motor-side D gain(s): one value or one per joint [N m s/rad]")
    p.add_argument("--tool-mass", type=float, help="point-mass tool at the end-effector frame [kg] "
                   "(replaces the configured tool; 0 removes it)")
    p.add_argument("--wrench", help="constant external wrench fx,fy,fz,mx,my,mz in frame 0 [N, N m]")


def _model(args):
    """Robot model with the command-line overrides applied."""
    model = model_from_args(args)
    kp = None if args.kp is None else parse_floats(args.kp, "--kp")
    kd = None if args.kd is None else parse_floats(args.kd, "--kd")
    tool = None if args.tool_mass is None else Tool.point_mass(args.tool_mass)
    wrench = None if args.wrench is None else parse_floats(args.wrench, "--wrench")
    return with_overrides(model, kp=kp, kd=kd, tool=tool, wrench=wrench)


def run(args):
    model = _model(args)
    result = modal_analysis(model, parse_floats(args.q, "--q"))
    _warn(limit_warnings(model, result.q, "--q"))
    if args.json:
        print_json(result.to_dict(model.joint_names))
        return 0
    print(f"robot {model.name}, q = {np.array2string(result.q, precision=5)}")
    print(f"motor equilibrium q_m^d [rad] = {np.array2string(result.motor_equilibrium, precision=5)}")
    print(f"{'mode':>4} {'f [Hz]':>11} {'zeta [%]':>9}  eigenvalue [1/s]")
    for i, (f, z, lam) in enumerate(zip(result.frequencies_hz, result.damping_ratios, result.eigenvalues)):
        print(f"{i + 1:>4} {f:>11.4f} {100 * z:>9.4f}  {lam.real:.6g} + {lam.imag:.6g}j")
    if result.real_eigenvalues.size:
        print(f"real (overdamped) eigenvalues [1/s]: {np.array2string(result.real_eigenvalues, precision=6)}")
    print(result.stability if result.stable else
          f"{result.stability.upper()}: eigenvalues with Re >= 0 (within round-off): "
          f"{np.array2string(result.unstable_eigenvalues, precision=6)}")
    return 0


def _warn(lines):
    """Warnings go to stderr (stdout stays parseable, e.g. with --json)."""
    for line in lines:
        print(f"flexmodal: warning: {line}", file=sys.stderr)


def _configurations(args, model):
    limit = args.max_configurations
    if args.line:
        return config_line(model, parse_floats(args.line[0], "--line Q_START"),
                           parse_floats(args.line[1], "--line Q_END"), args.num, limit)
    if args.grid:
        base = np.zeros(model.n) if args.q is None else parse_floats(args.q, "--q")
        return config_grid(model, base, dict(_grid_axis(spec, limit) for spec in args.grid), limit)
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
    try:
        return np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2)
    except ValueError as exc:
        raise InputError(f"--configs {path}: not a numeric CSV ({shown(str(exc), 200)})") from None


def run_sweep(args):
    model = _model(args)
    qs = _configurations(args, model)
    mmap = modal_map(model, qs, track=not args.no_track, workers=args.workers,
                     progress=not args.no_progress, max_configurations=args.max_configurations)
    _warn(limit_warnings(model, mmap.configurations, "configurations"))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = [write_csv(mmap, out / "modal_map.csv"), write_json(mmap, out / "modal_map.json")]
    if not args.no_plot:
        files.append(plot_map(mmap, out / "modal_map.png", title=f"{model.name}: modal map"))
    f = mmap.tracked("frequencies_hz")
    z = mmap.tracked("damping_ratios")
    summary = {"robot": model.name, "num_configurations": len(mmap.results),
               "num_modes": int(f.shape[1]), "frequency_range_hz": [np.nanmin(f), np.nanmax(f)],
               "damping_range": [np.nanmin(z), np.nanmax(z)],
               "all_stable": all(r.stable for r in mmap.results),
               "crossings": [c.description for c in mmap.crossings], "files": [str(p) for p in files]}
    if args.json:
        print_json(summary)
        return 0
    print(f"{model.name}: {summary['num_configurations']} configurations, {summary['num_modes']} modes, "
          f"f {summary['frequency_range_hz'][0]:.4f}..{summary['frequency_range_hz'][1]:.4f} Hz, "
          f"zeta {100 * summary['damping_range'][0]:.4f}..{100 * summary['damping_range'][1]:.4f} %, "
          f"{'all stable' if summary['all_stable'] else 'SOME UNSTABLE'}")
    for c in summary["crossings"][:MAX_CROSSINGS_SHOWN]:
        print(f"  {c}")
    if len(summary["crossings"]) > MAX_CROSSINGS_SHOWN:
        print(f"  ... {len(summary['crossings']) - MAX_CROSSINGS_SHOWN} more mode crossings (see modal_map.json)")
    print("wrote " + ", ".join(summary["files"]))
    return 0

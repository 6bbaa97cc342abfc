"""``flexmodal modal`` (one configuration) and ``flexmodal sweep`` (modal map) subcommands.

Configurations outside the URDF position limits are computed and warned about on stderr."""
import sys

import numpy as np

from ..flexible_joint.ama import limit_warnings, modal_analysis
from ..robot.model import with_overrides
from ..flexible_joint.sampled import HOLDS
from ..flexible_joint.sweep import modal_map
from .options import (add_json_option, add_model_options, add_override_options, add_sweep_output_options,
                      checked_output_dir, configurations_from_args, file_option, model_from_args, model_overrides,
                      parse_floats, print_crossings, print_json, write_map_outputs)
from .constrained import add_method_option, robot_sweep, run_robot_modal, wants_constrained
from .scheduler import add_store_options, check_scheduler, run_store_sweep
from ..flexible_joint.sampled import sampled_modal_analysis


def add_parser(sub):
    p = sub.add_parser("modal", help="modal parameters of the closed loop in one configuration")
    add_model_options(p)
    p.add_argument("--q", required=True, help="configuration, comma-separated, URDF joint order [rad or m]")
    add_override_options(p)
    add_method_option(p)
    p.add_argument("--controller-rate-hz", type=float,
                   help="modes of the sampled-data loop: set-point law run at this rate [Hz] and held "
                        "(default: continuous law, thesis AMA)")
    p.add_argument("--hold", default="zoh", choices=HOLDS,
                   help="zoh: applied at once; zoh-delay: one period late (default zoh)")
    add_json_option(p)
    p.set_defaults(func=run)

    s = sub.add_parser("sweep", help="modal map over a line, grid or list of configurations")
    add_model_options(s)
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--line", nargs=2, metavar=("Q_START", "Q_END"),
                       help="straight line between two comma-separated configurations (with --num)")
    where.add_argument("--grid", action="append", metavar="JOINT=START:STOP:NUM",
                       help="vary JOINT over NUM values (repeatable; others at --q)")
    file_option(where, "--configs", kind="input", metavar="FILE",
                help="CSV file, one configuration per row (URDF joint order, no header)")
    s.add_argument("--num", type=int, default=50, help="configurations on --line (default 50)")
    s.add_argument("--q", help="base configuration of --grid (default: zeros)")
    add_override_options(s)
    add_sweep_output_options(s, "modal_map")
    add_method_option(s)
    add_store_options(s)
    add_json_option(s)
    s.set_defaults(func=run_sweep)





def _model(args):
    """Robot model with the command-line overrides applied."""
    return with_overrides(model_from_args(args), **model_overrides(args))


def run(args):
    if wants_constrained(args):  # closed-chain robot or --method: flexmodal_ros.constrained
        return run_robot_modal(args)
    model = _model(args)
    q = parse_floats(args.q, "--q")
    if args.controller_rate_hz is not None:
        result = sampled_modal_analysis(model, q, args.controller_rate_hz, args.hold)
    else:
        result = modal_analysis(model, q)
    _warn(limit_warnings(model, result.q, "--q"))
    if args.json:
        print_json(result.to_dict(model.joint_names))
        return 0
    print(f"robot {model.name}, q = {np.array2string(result.q, precision=5)}")
    print(f"motor equilibrium q_m^d [rad] = {np.array2string(result.motor_equilibrium, precision=5)}")
    if args.controller_rate_hz is not None:
        print(f"sampled-data loop: law at {result.controller_rate_hz:g} Hz, hold {result.hold} "
              f"(Nyquist {0.5 * result.controller_rate_hz:g} Hz)")
    above = getattr(result, "above_nyquist", np.zeros(result.num_modes, bool))
    print(f"{'mode':>4} {'f [Hz]':>11} {'zeta [%]':>9}  eigenvalue [1/s]")
    for i, (f, z, lam) in enumerate(zip(result.frequencies_hz, result.damping_ratios, result.eigenvalues)):
        print(f"{i + 1:>4} {f:>11.4f} {100 * z:>9.4f}  {lam.real:.6g} + {lam.imag:.6g}j"
              + ("  (above Nyquist)" if above[i] else ""))
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


def run_sweep(args):
    checked_output_dir(args, "out_dir", "--out-dir", needed=not (args.store and args.no_plot))
    if wants_constrained(args):  # closed-chain robot or --method: flexmodal_ros.constrained
        model, mmap = robot_sweep(args)
    else:
        model = _model(args)
        if args.store:
            return run_store_sweep(args, model, configurations_from_args(args, model, lazy=True), print_json)
        check_scheduler(args)
        configurations = configurations_from_args(args, model)
        if args.scheduler:
            from ..distributed import modal_map as dask_map, open_executor  # deferred: Dask, only with --scheduler
            with open_executor(args.scheduler, timeout=args.scheduler_timeout) as executor:
                mmap = dask_map(model, configurations, track=not args.no_track, progress=not args.no_progress,
                                scheduler=executor, max_configurations=args.max_configurations)
        else:
            mmap = modal_map(model, configurations, track=not args.no_track, workers=args.workers,
                             progress=not args.no_progress, max_configurations=args.max_configurations)
        _warn(limit_warnings(model, mmap.configurations, "configurations"))
    files = write_map_outputs(mmap, args.out_dir, "modal_map", f"{model.name}: modal map", not args.no_plot)
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
    print_crossings(summary["crossings"], "modal_map")
    print("wrote " + ", ".join(summary["files"]))
    return 0

"""``flexmodal identify``: joint stiffness and damping from modal data (thesis ch. 3)."""
import contextlib
import functools

import numpy as np

from ..identification.fit import identify
from ..identification.inverse_eigen import (DEFAULT_OBJECTIVE, DEFAULT_STARTS, NOISE_DAMPING, NOISE_FREQUENCY_REL,
                                            OBJECTIVES)
from ..identification.measurements import load_data_file
from ..identification.report import write_params
from .options import add_json_option, checked_output, file_option, print_json
from .scheduler import add_scheduler_options, check_scheduler
from ..distributed import open_executor, run_starts


def add_parser(sub):
    p = sub.add_parser("identify", help="identify k, d_f, d_fm from frequencies and damping ratios "
                       "measured in several configurations")
    file_option(p, "--data", kind="input", required=True, help="YAML data file (robot + measurements; see "
                   "config/planar_2r_modal_data.yaml)")
    p.add_argument("--unknowns", default="k,d_f,d_fm",
                   help="comma-separated subset of k,d_f,d_fm (default: all; others from the config)")
    p.add_argument("--starts", type=int, default=DEFAULT_STARTS,
                   help=f"multistart initial points (default {DEFAULT_STARTS})")
    p.add_argument("--seed", type=int, default=0, help="random seed of the initial points (default 0)")
    p.add_argument("--objective", choices=OBJECTIVES, default=DEFAULT_OBJECTIVE,
                   help=f"determinant = thesis (3.31); eigenvalue = model-eigenvalue matching "
                   f"(default {DEFAULT_OBJECTIVE})")
    p.add_argument("--k-max", type=float, help="upper bound of k [N m/rad] (default: data file, else 5000)")
    p.add_argument("--d-max", type=float, help="upper bound of d [N m s/rad] (default: data file, else 100)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--noise-frequency", type=float, default=NOISE_FREQUENCY_REL,
                   help=f"assumed relative frequency noise sigma_f/f (default {NOISE_FREQUENCY_REL})")
    p.add_argument("--noise-damping", type=float, default=NOISE_DAMPING,
                   help=f"assumed damping-ratio noise sigma_zeta, a fraction (default {NOISE_DAMPING})")
    file_option(p, "--write-params", kind="output", metavar="OUT.yaml",
                   help="write a complete flexibility YAML with the identified values")
    add_scheduler_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args):
    checked_output(args, "write_params", "--write-params")
    data_file = load_data_file(args.data)
    check_scheduler(args)
    pick = lambda cli, file: cli if cli is not None else file
    with contextlib.ExitStack() as stack:
        runner = None
        if args.scheduler:
            executor = stack.enter_context(open_executor(args.scheduler, timeout=args.scheduler_timeout))
            runner = functools.partial(run_starts, executor)
        result = identify(data_file.model, data_file.data, unknowns=args.unknowns,
                          objective=args.objective, starts=args.starts, seed=args.seed,
                          k_max=pick(args.k_max, data_file.k_max), d_max=pick(args.d_max, data_file.d_max),
                          workers=args.workers, noise=(args.noise_frequency, args.noise_damping),
                          run_starts=runner)
    if args.write_params:
        write_params(data_file.model, result, args.write_params)
    if args.json:
        print_json(result.to_dict())
    else:
        print(_report(result, args.write_params))
    return 0 if result.success else 1


def _report(result, written):
    lines = [f"objective {result.objective_name}: F* = {result.objective:.6g} "
             f"({'success' if result.success else 'no success'}; {result.starts} starts, "
             f"seed {result.seed}, {result.function_evaluations} evaluations)",
             f"{'joint':<14}{'k [N m/rad]':>14}{'d_f':>11}{'d_fm':>11}"]
    for j, name in enumerate(result.joint_names):
        lines.append(f"{name:<14}{result.stiffness[j]:>14.6g}{result.link_damping[j]:>11.4g}"
                     f"{result.motor_damping[j]:>11.4g}")
    lines.append("unknown          value      approx. std")
    for name, v, s in zip(result.unknown_names, result.values, result.standard_deviations):
        lines.append(f"{name:<14}{v:>11.6g}{s:>14.3g}")
    lines.append(f"Jacobian rank {result.jacobian_rank}/{len(result.unknown_names)}, "
                 f"condition {result.jacobian_condition:.3g}; max |residual| "
                 f"{np.abs(result.residuals).max():.3g} over {len(result.residuals)} measured modes; "
                 f"residual {result.residual_noise_ratio:.3g}x the noise level")
    lines += [f"warning: {w}" for w in result.warnings]
    if not result.success:
        lines.append(f"NO SUCCESS: {result.message}")
    if written:
        lines.append(f"wrote {written}")
    return "\n".join(lines)

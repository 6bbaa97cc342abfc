"""``flexmodal codegen`` (generated C + operation counts) and ``flexmodal invdyn`` (feedforward values).

    flexmodal codegen --robot kuka_lwr4 --json
    flexmodal invdyn --robot kuka_lwr4 --q 0,0,0,0,0,0,0 --qd ... --qdd ... --q3 ... --q4 ... --json
    flexmodal invdyn --robot kuka_lwr4 --trajectory thesis --plot plots/    # thesis §4.4.4 figures

Output file names start with the robot name of the params YAML, reduced to a plain file name
(:func:`~flexmodal_ros.core.validation.safe_filename`): they always land inside --out-dir / --plot.
"""
import shutil

import numpy as np

from ..core.errors import InputError
from ..robot.inverse_dynamics import FeedforwardOutput, FlexibleJointFeedforward, feedforward_numeric
from ..robot.trajectory import THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, point_to_point
from ..core.validation import finite_vector, output_path, write_output
from .options import (add_json_option, add_model_options, checked_output_dir, file_option, model_from_args,
                      parse_floats, print_json)

_STATE = (("q", "position [rad or m]"), ("qd", "velocity"), ("qdd", "acceleration"),
          ("q3", "jerk"), ("q4", "snap"))
_PLOTTED = (("tau", "τ [N m]"), ("tau_dot", "τ' [N m/s]"), ("tau_ddot", "τ'' [N m/s²]"),
            ("motor_torque", "τ_m [N m]"))


def add_parser(sub):
    p = sub.add_parser("codegen", help="generate and compile C code of τ, τ', τ'', q_m and τ_m; op counts")
    add_model_options(p)
    file_option(p, "--out-dir", kind="output_dir", help="also copy the generated C source here")
    add_json_option(p)
    p.set_defaults(func=run)

    s = sub.add_parser("invdyn", help="flexible-joint feedforward (4.6)-(4.10) at a state or along a trajectory")
    add_model_options(s)
    for name, what in _STATE:
        s.add_argument(f"--{name}", help=f"link {what}, comma-separated, URDF joint order")
    s.add_argument("--trajectory", choices=["thesis"],
                   help="evaluate along the thesis LWR4 point-to-point motion (4.29)-(4.30), T = 3 s")
    s.add_argument("--samples", type=int, default=301, help="trajectory samples (default 301)")
    file_option(s, "--plot", kind="output_dir", metavar="DIR",
                help="save PNG plots of τ, τ', τ'', τ_m and a CSV here")
    add_json_option(s)
    s.set_defaults(func=run_invdyn)


def run(args):
    out_dir = checked_output_dir(args, "out_dir", "--out-dir")
    model = model_from_args(args)
    ff = FlexibleJointFeedforward(model)
    info = ff.library
    rigid = info.operations_rigid           # stored with the library (no regeneration on a cache hit)
    source = info.source
    if out_dir:
        target = output_path(out_dir, f"{model.name}_feedforward", ".c")
        source = write_output(target, "--out-dir", lambda path: shutil.copy(info.source, path))
    result = {"robot": model.name, "n": model.n, "operations": info.operations,
              "operations_rigid_terms": rigid, "source": str(source), "library": info.library,
              "symbol": info.symbol, "hash": info.hash, "generation_s": info.generation_s,
              "compile_s": info.compile_s}
    if args.json:
        print_json(result)
    else:
        ops = info.operations
        print(f"{model.name}: n = {model.n}; τ, τ', τ'', q_m, q_m', q_m'', τ_m: {ops['add']} add/sub, "
              f"{ops['mul']} mul, {ops['div']} div, {ops['trig']} trig, {ops['other']} other "
              f"(total {ops['total']}); τ, τ', τ'' alone: {rigid['add']} add/sub, {rigid['mul']} mul, "
              f"{rigid['trig']} trig")
        print(f"source  {source}\nlibrary {info.library}")
    return 0


def run_invdyn(args):
    checked_output_dir(args, "plot", "--plot", needed=bool(args.trajectory))
    model = model_from_args(args)
    if args.trajectory:
        return _run_trajectory(args, model)
    missing = [f"--{name}" for name, _ in _STATE if getattr(args, name) is None]
    if missing:
        raise InputError(f"{', '.join(missing)}: required (or use --trajectory thesis)")
    state = [finite_vector(parse_floats(getattr(args, name), f"--{name}"), model.n, f"--{name}")
             for name, _ in _STATE]
    out = FlexibleJointFeedforward(model)(*state)
    if args.json:
        print_json({"robot": model.name, **out._asdict()})
    else:
        for field, value in out._asdict().items():
            print(f"{field:<19}" + " ".join(f"{v:12.6g}" for v in value))
    return 0


def _run_trajectory(args, model):
    if model.n != THESIS_LWR4_Q0.size:
        raise InputError(f"--trajectory thesis: the thesis motion has {THESIS_LWR4_Q0.size} joints, "
                         f"robot {model.name} has {model.n}")
    if args.samples < 2:
        raise InputError(f"--samples: must be >= 2, got {args.samples}")
    times = np.linspace(0.0, THESIS_LWR4_T, args.samples)
    states = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, times)
    ff = FlexibleJointFeedforward(model)
    rows = [ff(*(s[i] for s in states)) for i in range(times.size)]
    series = FeedforwardOutput(*(np.array(col) for col in zip(*rows)))
    ref = np.array([feedforward_numeric(model, *(s[i] for s in states)).motor_torque for i in range(times.size)])
    result = {"robot": model.name, "samples": times.size, "duration_s": THESIS_LWR4_T,
              "max_abs": {f: float(np.abs(getattr(series, f)).max()) for f in FeedforwardOutput._fields},
              "motor_torque_max_deviation_from_pinocchio": float(np.abs(series.motor_torque - ref).max())}
    if args.plot:
        result["files"] = write_output(args.plot, "--plot", lambda folder: _save_plots(folder, model, times, series))
    if args.json:
        print_json(result)
    else:
        print(f"{model.name}: thesis trajectory, {times.size} samples over {THESIS_LWR4_T} s; max |τ_m - "
              f"Pinocchio reference| = {result['motor_torque_max_deviation_from_pinocchio']:.3g} N m")
        for path in result.get("files", []):
            print(f"wrote {path}")
    return 0


def _save_plots(folder, model, times, series):
    # deferred: matplotlib
    import matplotlib
    matplotlib.use("Agg")
    # deferred: matplotlib
    import matplotlib.pyplot as plt
    files = []
    for field, label in _PLOTTED:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(times, getattr(series, field), label=list(model.joint_names))
        ax.set_xlabel("t [s]")
        ax.set_ylabel(label)
        ax.set_title(f"{model.name}: {field} along the thesis trajectory (4.29)-(4.30)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        path = output_path(folder, f"{model.name}_{field}", ".png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(str(path))
    header = ",".join(["t"] + [f"{f}_{j}" for f in FeedforwardOutput._fields for j in model.joint_names])
    table = np.column_stack([times] + [getattr(series, f) for f in FeedforwardOutput._fields])
    csv = output_path(folder, f"{model.name}_feedforward", ".csv")
    np.savetxt(csv, table, delimiter=",", header=header, comments="")
    return files + [str(csv)]

"""``flexmodal simulate``: offline closed loop (feedforward+PD controller + flexible-joint plant, no ROS).

Reference: the thesis' LWR4 point-to-point trajectory (T = 3 s, notes_003 §5) by default, or
``--q0/--qf/--T`` for any robot. Prints max/rms link tracking error [rad] and peak motor torques
[N·m]; writes ``closed_loop.png`` (tracking errors and torques) to ``--plot-dir``.
"""
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..simulation import DEFAULT_DT, run_closed_loop, save_closed_loop_plot, thesis_trajectory
from .common import add_json_option, add_model_options, model_from_args, parse_floats, print_json

DEFAULT_PLOT_DIR = "flexmodal_output/simulate"


def add_parser(sub):
    p = sub.add_parser("simulate", help="offline closed loop: feedforward+PD controller on the "
                                        "flexible-joint plant (no ROS)")
    add_model_options(p)
    p.add_argument("--no-feedforward", action="store_true",
                   help="PD only (same gains, reference W q^d, no feedforward torque)")
    p.add_argument("--q0", help="start configuration, comma-separated [rad or m] (default: thesis LWR4 q0)")
    p.add_argument("--qf", help="goal configuration, comma-separated (default: thesis LWR4 qf)")
    p.add_argument("--T", type=float, help="motion time [s] (default 3, thesis)")
    p.add_argument("--settle", type=float, default=0.5, help="time simulated after the motion [s] (default 0.5)")
    p.add_argument("--rate-hz", type=float, default=1000.0, help="controller rate [Hz] (default 1000)")
    p.add_argument("--dt", type=float, default=DEFAULT_DT, help=f"integration step [s] (default {DEFAULT_DT:g})")
    p.add_argument("--delay-cycles", type=int, default=0,
                   help="command transport delay in controller cycles (default 0)")
    p.add_argument("--plot-dir", default=DEFAULT_PLOT_DIR, help=f"where closed_loop.png goes "
                                                                f"(default {DEFAULT_PLOT_DIR}); '' = no plot")
    add_json_option(p)
    p.set_defaults(func=run)


def reference_from_args(args, model):
    """(times, positions) of the requested point-to-point reference."""
    if args.q0 is None and args.qf is None:
        times, positions = thesis_trajectory(model)
    elif args.q0 is None or args.qf is None:
        raise InputError("--q0/--qf: give both (or neither for the thesis LWR4 trajectory)")
    else:
        positions = np.array([parse_floats(args.q0, "--q0"), parse_floats(args.qf, "--qf")])
        times = np.array([0.0, 3.0])
    if args.T is not None:
        if not args.T > 0:
            raise InputError(f"--T: must be > 0 s, got {args.T}")
        times = np.array([0.0, args.T])
    return times, positions


def run(args):
    model = model_from_args(args)
    times, positions = reference_from_args(args, model)
    if args.settle < 0 or args.delay_cycles < 0 or not args.rate_hz > 0:
        raise InputError("--settle/--delay-cycles/--rate-hz: must be >= 0, >= 0 and > 0")
    result = run_closed_loop(model, times, positions, times[-1] + args.settle,
                             use_feedforward=not args.no_feedforward, control_rate_hz=args.rate_hz,
                             dt=args.dt, command_delay_cycles=args.delay_cycles)
    out = {"robot": model.name, "feedforward": not args.no_feedforward, **result.summary()}
    if args.plot_dir:
        Path(args.plot_dir).mkdir(parents=True, exist_ok=True)
        path = Path(args.plot_dir) / "closed_loop.png"
        save_closed_loop_plot({"feedforward+PD" if out["feedforward"] else "PD only": result}, path)
        out["plot"] = str(path)
    if args.json:
        print_json(out)
        return 0
    print(f"{model.name}: {'feedforward+PD' if out['feedforward'] else 'PD only'}, "
          f"{times[-1]:g} s motion at {args.rate_hz:g} Hz")
    print(f"max_tracking_error_rad {out['max_tracking_error_rad']:.3e}")
    print(f"rms_tracking_error_rad {out['rms_tracking_error_rad']:.3e}")
    print("peak_motor_torque " + " ".join(f"{v:.2f}" for v in out["peak_motor_torque"]) + " N m")
    print(f"saturated_cycles {out['saturated_cycles']}")
    if "plot" in out:
        print(f"plot {out['plot']}")
    return 0

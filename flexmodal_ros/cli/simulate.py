"""``flexmodal simulate``: offline closed loop (feedforward+PD controller + flexible-joint plant, no ROS).

Reference: the thesis' LWR4 point-to-point trajectory (T = 3 s, notes_003 §5) by default,
``--q0/--qf/--T`` for any robot, or ``--trajectory FILE`` (waypoint YAML of ``flexmodal shape``).
Prints max/rms link tracking error [rad], peak motor torques [N·m] and the end-effector residual
vibration (peak/rms [m] over the ``--settle`` window after the reference ends:
flexmodal_ros/shaping/vibration.py); writes ``closed_loop.png`` (tracking errors and torques) and
``residual_vibration.png`` to ``--plot-dir``.

``--shaping zv|zvd|ei`` shapes the reference with the configuration-dependent modes of the
controller's model in the ``--shaper-design`` (fixed | robust | time-varying | auto, default auto)
and runs the unshaped reference too (``unshaped`` in the output; with ``--compare-fixed`` also the
shaper fixed at the start configuration, ``fixed_start``; all over one common settling window
that starts when the longest of them ends, each simulated until it ends; when the predicted
residual is dominated by what the shaper does not treat, or the shaped residual is larger, no
reduction figure is printed but what dominates, with its share; ``--modal polynomial``: the shaped modes' polynomial eigenvalues along the
path instead of their exact eigenvalues at every sample); ``--model-stiffness-scale s`` gives the controller
(feedforward, shaping, hold law) a model whose joint stiffness is s × the plant's; ``--law`` picks
the controller: feedforward (default), pd_only (= ``--no-feedforward``: PD on W q^d, no
compensation), pd (PD with the static compensation (2.2)-(2.3) at the moving reference).
"""
import numpy as np

from ..core.errors import InputError
from ..robot.model import with_overrides
from ..shaping import SHAPING_CHOICES
from ..shaping.trajectory_file import read_waypoints
from ..shaping.vibration import LAWS, compare, plot_residual, prepare_reference, simulate_move
from ..simulation import DEFAULT_DT, save_closed_loop_plot, thesis_trajectory
from ..core.validation import write_output
from .options import (add_json_option, add_model_options, checked_output_dir, file_option, model_from_args,
                      parse_floats, print_json)
from .shape import add_shaping_options, shaping_options

DEFAULT_PLOT_DIR = "flexmodal_output/simulate"


def add_parser(sub):
    p = sub.add_parser("simulate", help="offline closed loop: feedforward+PD controller on the "
                                        "flexible-joint plant (no ROS)")
    add_model_options(p)
    p.add_argument("--no-feedforward", action="store_true",
                   help="PD only (same gains, reference W q^d, no feedforward torque)")
    p.add_argument("--law", choices=LAWS, help="controller: feedforward (default), pd_only (= --no-feedforward), "
                                              "pd (PD + static compensation (2.2)-(2.3) at the moving reference)")
    p.add_argument("--q0", help="start configuration, comma-separated [rad or m] (default: thesis LWR4 q0)")
    p.add_argument("--qf", help="goal configuration, comma-separated (default: thesis LWR4 qf)")
    p.add_argument("--T", type=float, help="motion time [s] (default 3, thesis)")
    file_option(p, "--trajectory", kind="input", help="waypoint YAML instead of --q0/--qf/--T (see flexmodal shape)")
    p.add_argument("--shaping", choices=SHAPING_CHOICES, default="none",
                   help="input shaping of the reference with the configuration-dependent modes (default none)")
    p.add_argument("--model-stiffness-scale", type=float, default=1.0,
                   help="joint stiffness of the controller's model / the plant's (default 1)")
    p.add_argument("--no-coulomb", action="store_true",
                   help="plant without Coulomb friction (the viscous model of thesis ch. 2)")
    add_shaping_options(p)
    p.add_argument("--compare-fixed", action="store_true",
                   help="with --shaping: also run the shaper fixed at the start configuration's modes")
    p.add_argument("--settle", type=float, default=0.5,
                   help="time simulated after the (longest) reference, = the residual-vibration window [s] "
                        "(default 0.5)")
    p.add_argument("--rate-hz", type=float, default=1000.0, help="controller rate [Hz] (default 1000)")
    p.add_argument("--dt", type=float, default=DEFAULT_DT, help=f"integration step [s] (default {DEFAULT_DT:g})")
    p.add_argument("--delay-cycles", type=int, default=0,
                   help="command transport delay in controller cycles (default 0)")
    file_option(p, "--plot-dir", kind="output_dir", default=DEFAULT_PLOT_DIR,
                help=f"where the PNGs go (default {DEFAULT_PLOT_DIR}); '' = no plot")
    add_json_option(p)
    p.set_defaults(func=run)


def reference_from_args(args, model):
    """(times, positions) of the requested reference."""
    if args.trajectory:
        if args.q0 is not None or args.qf is not None or args.T is not None:
            raise InputError("--trajectory: give either a trajectory file or --q0/--qf/--T")
        path = read_waypoints(model, args.trajectory)
        return np.array(path.times), np.array(path.positions)
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
    plot_dir = checked_output_dir(args, "plot_dir", "--plot-dir")
    model = model_from_args(args)
    times, positions = reference_from_args(args, model)
    if not args.settle > 0 or args.delay_cycles < 0 or not args.rate_hz > 0:
        raise InputError("--settle/--delay-cycles/--rate-hz: must be > 0, >= 0 and > 0")
    if args.law and args.no_feedforward and args.law != "pd_only":
        raise InputError(f"--no-feedforward: contradicts --law {args.law}")
    law = args.law or ("pd_only" if args.no_feedforward else "feedforward")
    plant = with_overrides(model, d_c=0.0, d_cm=0.0) if args.no_coulomb else model
    common = dict(law=law, stiffness_scale=args.model_stiffness_scale, settle=args.settle, dt=args.dt,
                  control_rate_hz=args.rate_hz, command_delay_cycles=args.delay_cycles)
    options = shaping_options(args) if args.shaping != "none" else {}
    design = options.pop("shaper_design", "auto")
    references = {}                 # every variant is shaped first: the common window fits the longest
    if args.shaping != "none":
        references["unshaped"] = prepare_reference(plant, times, positions)
        if args.compare_fixed:
            references["fixed_start"] = prepare_reference(plant, times, positions, args.shaping, law,
                                                          args.model_stiffness_scale, "fixed", **options)
    label = args.shaping if args.shaping != "none" else "unshaped"
    references[label] = prepare_reference(plant, times, positions, args.shaping, law, args.model_stiffness_scale,
                                          design, **options)
    end = max(float(r.duration) for r in references.values())
    runs = {name: simulate_move(plant, times, positions, args.shaping if name != "unshaped" else "none",
                                reference=ref, until=end + args.settle, **common)
            for name, ref in references.items()}
    main = runs[label]
    residuals = compare(runs, args.settle)
    out = {"robot": model.name, "law": law, "feedforward": law == "feedforward", "shaping": args.shaping,
           "model_stiffness_scale": args.model_stiffness_scale, **main.run.summary(),
           "residual_vibration": residuals[label], "added_duration_s": main.added_delay}
    if args.shaping != "none":
        base = runs["unshaped"]
        ratio = residuals["unshaped"]["peak_m"] / max(residuals[label]["peak_m"], 1e-300)
        choice = main.design
        honest = choice is not None and (choice.dominated or ratio < 1.0)
        out["unshaped"] = {**base.run.summary(), "residual_vibration": residuals["unshaped"]}
        out["residual_vibration_ratio"] = ratio
        out["residual_vibration_reduction"] = None if honest else ratio
        out["shaped_modes"] = main.path_modes.to_dict() if main.path_modes is not None else None
        out["shaping_summary"] = getattr(main.reference, "summary", "")
        out["design"] = choice.to_dict() if choice is not None else None
        if honest:
            out["not_reduced"] = (choice.untreated.describe() if choice.dominated else
                                  "the prediction expected a reduction; " + choice.untreated.describe())
        if "fixed_start" in runs:
            out["fixed_start"] = {"residual_vibration": residuals["fixed_start"],
                                  "added_duration_s": runs["fixed_start"].added_delay}
    if plot_dir:
        path = plot_dir / "closed_loop.png"
        write_output(path, "--plot-dir", lambda p: save_closed_loop_plot(
            {f"{law} {name}": r.run for name, r in runs.items()}, p))
        out["plot"] = str(path)
        out["residual_plot"] = str(write_output(plot_dir / "residual_vibration.png", "--plot-dir", lambda p: plot_residual(
            runs, p, f"{model.name}: {law}, end-effector residual vibration", args.settle)))
    if args.json:
        print_json(out)
        return 0
    print(f"{model.name}: {law}, shaping {args.shaping}, {times[-1]:g} s reference at {args.rate_hz:g} Hz")
    print(f"max_tracking_error_rad {out['max_tracking_error_rad']:.3e}")
    print(f"rms_tracking_error_rad {out['rms_tracking_error_rad']:.3e}")
    print("peak_motor_torque " + " ".join(f"{v:.2f}" for v in out["peak_motor_torque"]) + " N m")
    print(f"saturated_cycles {out['saturated_cycles']}")
    rv = out["residual_vibration"]
    print(f"residual_vibration peak {rv['peak_m']:.3e} m rms {rv['rms_m']:.3e} m "
          f"(window {rv['start_s']:.3f} s + {rv['window_s']:g} s)")
    if args.shaping != "none":
        u = out["unshaped"]["residual_vibration"]
        if out["residual_vibration_reduction"] is not None:
            verdict = f"{out['residual_vibration_reduction']:.3g}x reduction"
        else:
            verdict = (f"no reduction claimed (unshaped/shaped {out['residual_vibration_ratio']:.3g}): "
                       f"{out['not_reduced']}")
        print(f"unshaped residual_vibration peak {u['peak_m']:.3e} m rms {u['rms_m']:.3e} m: {verdict}, "
              f"added_duration_s {out['added_duration_s']:.4f}")
        print(out["shaping_summary"])
        if "fixed_start" in out:
            f = out["fixed_start"]["residual_vibration"]
            print(f"fixed at the start configuration: residual_vibration peak {f['peak_m']:.3e} m rms "
                  f"{f['rms_m']:.3e} m ({f['peak_m'] / max(rv['peak_m'], 1e-300):.3g}x the "
                  f"{main.design.chosen if main.design is not None else 'shaped'} design), added_duration_s "
                  f"{out['fixed_start']['added_duration_s']:.4f}")
    for key in ("plot", "residual_plot"):
        if key in out:
            print(f"{key} {out[key]}")
    return 0

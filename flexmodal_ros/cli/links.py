"""``flexmodal links``: natural frequencies and mode shapes of beam-link arms (flexmodal_ros.links).

One configuration (``--q``), a sweep over joint angles (``--grid`` / ``--line`` / ``--configs``,
mode-tracked, CSV/JSON/PNG as ``flexmodal sweep``), or frequencies vs joint stiffness
(``--kt-sweep``, like the paper's Table 7 study).
"""
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..links import BEAM_MODELS, JOINT_MODELS, link_arm_from_model, link_modes, with_joints, with_thickness
from ..links.sweeps import joint_stiffness_sweep, link_modal_map
from ..links.solve import MAX_MODES, REGIMES, check_request
from ..core.validation import write_output, shown
from ..modes import plot_tracked
from .options import (add_json_option, add_model_options, add_sweep_output_options, checked_output_dir,
                      configurations_from_args, file_option, model_from_args, parse_floats, print_crossings,
                      print_json, write_map_outputs)
from ..links.shapes import plot_mode


def add_parser(sub):
    p = sub.add_parser("links", help="natural frequencies and mode shapes of beam-link arms (Timoshenko / "
                       "Euler-Bernoulli links)")
    add_model_options(p)
    p.add_argument("--q", help="joint angles, comma-separated, URDF joint order [rad, or deg with --degrees]; "
                   "base configuration of --grid / --kt-sweep")
    p.add_argument("--degrees", action="store_true", help="--q, --grid, --line and --configs are in degrees")
    p.add_argument("--model", default="timoshenko", choices=BEAM_MODELS, help="beam model (default timoshenko)")
    p.add_argument("--modes", type=int, default=10, help=f"number of modes, 1..{MAX_MODES} (default 10)")
    p.add_argument("--regime", default="full", choices=REGIMES,
                   help="full spectrum (default) or only below the Timoshenko cut-off (the paper's regime)")
    p.add_argument("--thickness-factor", type=float,
                   help="multiply every section's in-plane depth (default: the YAML's links.thickness_factor)")
    p.add_argument("--joints", choices=JOINT_MODELS,
                   help="joint model: rigid (paper), elastic (spring k), servo (spring k + rotor B held by kp); "
                        "default: the YAML's links.joint_model")
    p.add_argument("--joint-stiffness", help="joint spring k_T: one value or one per joint [N m/rad] "
                   "(default: the YAML's k; needs --joints elastic or servo)")
    p.add_argument("--plot-mode", type=int, metavar="J", help="write a PNG of mode J (1-based) to --out-dir")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--line", nargs=2, metavar=("Q_START", "Q_END"),
                       help="sweep: straight line between two configurations (with --num)")
    where.add_argument("--grid", action="append", metavar="JOINT=START:STOP:NUM",
                       help="sweep: vary JOINT over NUM values (repeatable; others at --q)")
    file_option(where, "--configs", kind="input", metavar="FILE", help="sweep: CSV file, one configuration per row")
    where.add_argument("--kt-sweep", metavar="E0:E1:NUM",
                       help="frequencies vs joint stiffness k_T = 10^E for NUM exponents from E0 to E1, "
                            "all joints (with --joints elastic or servo; default elastic)")
    p.add_argument("--num", type=int, default=50, help="configurations on --line (default 50)")
    add_sweep_output_options(p, "link_modes", "sweep: worker processes")
    add_json_option(p)
    p.set_defaults(func=run)


def _arm(args):
    """(flexible-joint model, link arm) with the command-line choices applied."""
    model = model_from_args(args)
    arm = link_arm_from_model(model)
    if args.thickness_factor is not None:
        arm = with_thickness(arm, args.thickness_factor)
    joints = args.joints or ("elastic" if args.kt_sweep and arm.joint_model == "rigid" else arm.joint_model)
    stiffness = None if args.joint_stiffness is None else parse_floats(args.joint_stiffness, "--joint-stiffness")
    if joints != arm.joint_model or stiffness is not None:
        arm = with_joints(arm, joints, stiffness)
    return model, arm


def _angles(args, values):
    return np.radians(values) if args.degrees else np.asarray(values, float)


def run(args):
    check_request(args.modes, args.model, args.regime, "--modes")
    sweep = bool(args.line or args.grid or args.configs or args.kt_sweep)
    checked_output_dir(args, "out_dir", "--out-dir", needed=sweep or args.plot_mode is not None)
    model, arm = _arm(args)
    if args.line or args.grid or args.configs:
        return _run_sweep(args, model, arm)
    if args.q is None:
        raise InputError("--q: joint angles are required (or give a sweep: --grid, --line, --configs)")
    q = _angles(args, parse_floats(args.q, "--q"))
    if args.kt_sweep:
        return _run_kt_sweep(args, arm, q)
    res = link_modes(arm, q, args.modes, args.model, args.regime, field="--modes")
    files = []
    if args.plot_mode is not None:
        target = Path(args.out_dir) / f"link_mode_{args.plot_mode}.png"
        files.append(str(write_output(target, "--out-dir", lambda path: plot_mode(arm, res, args.plot_mode - 1, path))))
    if args.json:
        doc = {"robot": arm.name, "link_names": list(arm.link_names)}
        doc.update(res.to_dict(arm.joint_names))
        doc["files"] = files
        print_json(doc)
        return 0
    print(f"robot {arm.name}: {args.model} links ({', '.join(arm.link_names)}), {arm.joint_model} joints, "
          f"thickness factor {arm.thickness_factor:g}")
    print(f"q = {np.array2string(np.degrees(res.q), precision=4)} deg")
    print(f"{'mode':>4} {'f [Hz]':>12} {'axial [%]':>10}  {'sigma_min/max':>13}")
    for j, (f, ax, above, sv) in enumerate(zip(res.frequencies_hz, res.axial_fractions, res.above_cutoff,
                                              res.singular_ratios)):
        print(f"{j + 1:>4} {f:>12.6g} {100 * ax:>10.2f}  {sv:>13.1e}{'  above cut-off' if above else ''}")
    for f in files:
        print(f"wrote {f}")
    return 0


def _run_sweep(args, model, arm):
    qs = _angles(args, configurations_from_args(args, model))
    mmap = link_modal_map(arm, qs, args.modes, args.model, args.regime, track=not args.no_track,
                          workers=args.workers, progress=not args.no_progress)
    files = write_map_outputs(mmap, args.out_dir, "link_modes", f"{arm.name}: {args.model} link modes",
                              not args.no_plot)
    f = mmap.tracked("frequencies_hz")
    summary = {"robot": arm.name, "model": args.model, "joint_model": arm.joint_model,
               "num_configurations": len(mmap.results), "num_modes": int(f.shape[1]),
               "frequency_range_hz": [float(np.nanmin(f)), float(np.nanmax(f))],
               "crossings": [c.description for c in mmap.crossings], "files": [str(p) for p in files]}
    if args.json:
        print_json(summary)
        return 0
    print(f"{arm.name}: {summary['num_configurations']} configurations, {summary['num_modes']} {args.model} "
          f"link modes, f {summary['frequency_range_hz'][0]:.6g}..{summary['frequency_range_hz'][1]:.6g} Hz")
    print_crossings(summary["crossings"], "link_modes")
    print("wrote " + ", ".join(summary["files"]))
    return 0


def _run_kt_sweep(args, arm, q):
    start, stop, num = parse_floats(args.kt_sweep.replace(":", ","), "--kt-sweep")
    if num < 2 or num != int(num) or not stop > start:
        raise InputError("--kt-sweep: expected E0:E1:NUM with E1 > E0 and integer NUM >= 2, "
                         f"got {shown(args.kt_sweep)}")
    stiffness = 10.0 ** np.linspace(start, stop, int(num))
    mmap = joint_stiffness_sweep(arm, q, stiffness, args.modes, args.model, args.regime)
    files = write_map_outputs(mmap, args.out_dir, "link_modes_vs_kt", "", plot=False)
    rigid = link_modes(with_joints(arm, "rigid"), q, args.modes, args.model, args.regime, field="--modes").frequencies_hz
    f = mmap.tracked("frequencies_hz")
    if not args.no_plot:
        files.append(write_output(Path(args.out_dir) / "link_modes_vs_kt.png", "--out-dir", lambda path: plot_tracked(
            np.log10(stiffness), f, mmap.tracked("damping_ratios"), path, title=f"{arm.name}: {args.model} link "
            f"modes vs joint stiffness ({arm.joint_model})", xlabel="log10 k_T [N m/rad]")))
    relative = (rigid[None, :] - np.sort(f, axis=1)) / rigid[None, :]
    summary = {"robot": arm.name, "model": args.model, "joint_model": arm.joint_model,
               "joint_stiffness": stiffness.tolist(), "rigid_frequencies_hz": rigid.tolist(),
               "frequencies_hz": f.tolist(), "max_relative_drop": np.abs(relative).max(axis=1).tolist(),
               "files": [str(p) for p in files]}
    if args.json:
        print_json(summary)
        return 0
    print(f"{arm.name}: {args.model} link modes vs joint stiffness ({arm.joint_model} joints), "
          f"q = {np.array2string(np.degrees(q), precision=4)} deg")
    print(f"{'k_T [N m/rad]':>14} {'max (f_rigid - f)/f_rigid':>26} {'k_T x that':>12}")
    for k, d in zip(stiffness, summary["max_relative_drop"]):
        print(f"{k:>14.3e} {d:>26.3e} {k * d:>12.4g}")
    print("wrote " + ", ".join(summary["files"]))
    return 0

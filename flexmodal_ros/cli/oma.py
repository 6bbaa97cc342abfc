"""``flexmodal oma``: operational modal analysis of a simulated impact test, a ROS 2 bag or a CSV
record; comparison with the AMA; oma.json, oma.csv, stabilization.png and identify_data.yaml.

``--save-record F`` writes the analysed record: ``F.csv`` as CSV (``# excitation_end_s:`` header
comment), anything else as a new ROS 2 bag directory (sqlite3; MCAP if F ends in ``.mcap``) with
the excitation end on the topic ``/flexmodal/excitation_end``. Read back through ``--csv`` /
``--bag``, the stored instant is where the free decay starts (no guess from the response)."""
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..robot.params import Tool
from ..core.errors import InputError
from ..robot.model import with_overrides
from ..core.validation import output_file, write_output, shown
from ..oma.bags import read_joint_states, write_joint_states
from ..oma.impact import AXES, CHANNEL_SETS, DYNAMICS, HOLDS, EncoderNoise, Impulse, simulate_impact
from ..oma.estimators import METHODS
from ..oma.pipeline import run_oma, write_outputs
from ..oma.record import read_csv, write_csv
from .options import (add_json_option, add_model_options, checked_output, checked_output_dir, file_option,
                      model_from_args, parse_floats, print_json)

DEFAULT_OUT = "flexmodal_output/oma"


def add_parser(sub):
    p = sub.add_parser("oma", help="identify modes from an impact test (simulated), a bag or a CSV "
                                   "record and compare them with the model")
    add_model_options(p)
    p.add_argument("--q", help="configuration, comma-separated [rad or m] (bag: default = median of the "
                               "recorded link positions)")
    p.add_argument("--kp", help="motor-side P gain(s) [N m/rad]")
    p.add_argument("--kd", help="motor-side D gain(s) [N m s/rad]")
    p.add_argument("--tool-mass", type=float, help="point-mass tool at the end-effector frame [kg]")
    src = p.add_argument_group("recorded data (instead of a simulation)")
    file_option(src, "--bag", kind="input", help="ROS 2 bag directory (or its .db3/.mcap file), sqlite3 or MCAP")
    src.add_argument("--topic", default="/joint_states", help="JointState topic (default /joint_states)")
    file_option(src, "--csv", kind="input", help="CSV record: a t column then one column per channel")
    src.add_argument("--joints", help="channels to analyse, comma-separated (default: bag: every "
                                      "<joint>_motor of the robot, else all)")
    src.add_argument("--start", type=float, help="analyse from this time [s after the first sample]")
    src.add_argument("--end", type=float, help="analyse up to this time [s after the first sample]")
    sim = p.add_argument_group("simulated impact test (thesis §2.4.3)")
    sim.add_argument("--impulse", type=float, default=50.0, help="impulse force [N] (default 50)")
    sim.add_argument("--impulse-axis", default="y0",
                     help=f"axis of frame 0, one of {', '.join(AXES)} (default y0); several, comma-separated "
                          "(e.g. x0,y0,z0): one impact test per axis, identified together (multi-reference)")
    sim.add_argument("--t-impulse", type=float, default=0.2, help="impulse start [s] (default 0.2)")
    sim.add_argument("--impulse-duration", type=float, default=0.006, help="[s] (default 0.006)")
    sim.add_argument("--duration", type=float, default=2.5, help="record length [s] (default 2.5)")
    sim.add_argument("--sample-rate", type=float, default=1000.0, help="record rate [Hz] (default 1000)")
    sim.add_argument("--channels", default="motor_positions", choices=CHANNEL_SETS,
                     help="recorded channels (default motor_positions)")
    sim.add_argument("--dynamics", default="nonlinear", choices=DYNAMICS,
                     help="nonlinear closed loop (default) or the AMA's linear model (exact discretization)")
    sim.add_argument("--noise", help="measurement noise: counts=COUNTS_PER_REV,std=RAD[,seed=N] "
                                     "(quantization on the motor shaft before the gear, Gaussian std)")
    p.add_argument("--controller-rate-hz", type=float,
                   help="set-point law sampled at this rate and held (simulation) and compared with the "
                        "sampled-data AMA; default: continuous law")
    p.add_argument("--hold", default="zoh", choices=HOLDS, help="hold of the sampled law (default zoh)")
    p.add_argument("--method", default="era", choices=METHODS, help="identification method (default era)")
    p.add_argument("--orders", help="model orders START:STOP[:STEP] (default: era/ssi-cov 2:100:2, var 2:30)")
    p.add_argument("--snr-min", type=float, help="least SNR of a reported mode (default 5)")
    file_option(p, "--out-dir", kind="output_dir", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    file_option(p, "--data-out", kind="output", help="append the identified modes to this identification data file "
                                                     "(default OUT_DIR/identify_data.yaml, new)")
    file_option(p, "--save-record", kind="output", metavar="F",
                help="also write the analysed record: F.csv as CSV, else a new ROS 2 bag directory F (MCAP if F "
                     "ends in .mcap), with its excitation end (read back by --csv / --bag)")
    p.add_argument("--no-plot", action="store_true", help="skip stabilization.png")
    add_json_option(p)
    p.set_defaults(func=run)


def parse_orders(text):
    """'2:100:2' → range; InputError naming the option otherwise."""
    parts = str(text).split(":")
    try:
        values = [int(v) for v in parts]
    except ValueError:
        raise InputError(f"--orders: expected START:STOP[:STEP] integers, got {shown(text)}") from None
    if len(values) not in (2, 3) or values[0] < 2 or values[1] < values[0] or (len(values) == 3 and values[2] < 1):
        raise InputError(f"--orders: expected 2 <= START <= STOP and STEP >= 1, got {shown(text)}")
    return list(range(values[0], values[1] + 1, values[2] if len(values) == 3 else 1))


def parse_noise(text):
    """'counts=1048576,std=1e-6,seed=0' → EncoderNoise (counts may be written 2^20)."""
    fields = {}
    for item in str(text).split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in ("counts", "std", "seed"):
            raise InputError(f"--noise: expected counts=N,std=S[,seed=K], got {shown(text)}")
        value = value.strip()
        try:
            if "^" in value:
                base, exp = value.split("^")
                fields[key.strip()] = float(base) ** float(exp)
            else:
                fields[key.strip()] = float(value)
        except ValueError:
            raise InputError(f"--noise: {key.strip()} is not a number: {shown(value)}") from None
    return EncoderNoise(fields.get("counts"), fields.get("std", 0.0), int(fields.get("seed", 0)))


def _model(args):
    if not (args.robot or args.params):
        return None
    model = model_from_args(args)
    kp = None if args.kp is None else parse_floats(args.kp, "--kp")
    kd = None if args.kd is None else parse_floats(args.kd, "--kd")
    tool = None if args.tool_mass is None else Tool.point_mass(args.tool_mass)
    return with_overrides(model, kp=kp, kd=kd, tool=tool)


def parse_axes(text):
    """'x0,y0' → ('x0', 'y0'); InputError naming the option otherwise."""
    axes = tuple(a.strip() for a in str(text).split(","))
    unknown = [a for a in axes if a not in AXES]
    if unknown or len(set(axes)) != len(axes):
        raise InputError(f"--impulse-axis: expected distinct axes among {', '.join(AXES)}, got {shown(text)}")
    return axes


def _record(args, model):
    """(record or list of references, q) from the selected source."""
    joints = [j.strip() for j in args.joints.split(",")] if args.joints else None
    if args.bag and args.csv:
        raise InputError("--bag/--csv: give one record source")
    if args.bag or args.csv:
        if args.noise:
            raise InputError("--noise: only for simulated records")
        if args.bag:
            if joints is None and model is not None:
                joints = [j + "_motor" for j in model.joint_names]
            record = read_joint_states(args.bag, args.topic, joints, args.start, args.end)
        else:
            record = read_csv(args.csv, joints)
            if args.start is not None or args.end is not None:
                record = record.window(None if args.start is None else record.t[0] + args.start,
                                       None if args.end is None else record.t[0] + args.end)
        q = parse_floats(args.q, "--q") if args.q else None
        if q is None and model is not None and args.bag:
            try:
                links = read_joint_states(args.bag, args.topic, list(model.joint_names), args.start, args.end)
            except InputError as exc:
                raise InputError(f"--q: not given, and the bag's link positions cannot be read ({exc})") from None
            q = np.median(links.values, axis=0)
        return record, q
    if model is None:
        raise InputError("no record: give --robot (simulated impact test), --bag or --csv")
    if not args.q:
        raise InputError("--q: the configuration of the impact test is required")
    q = parse_floats(args.q, "--q")
    noise = parse_noise(args.noise) if args.noise else None
    records = []
    try:
        for k, axis in enumerate(parse_axes(args.impulse_axis)):      # independent noise per impact
            impulse = Impulse(args.impulse, axis, args.t_impulse, args.impulse_duration)
            records.append(simulate_impact(model, q, impulse, args.duration, args.sample_rate,
                                           args.controller_rate_hz, args.hold, args.dynamics, args.channels,
                                           None if noise is None else replace(noise, seed=noise.seed + k)))
    except InputError as exc:
        raise InputError(_as_options(str(exc))) from None
    return (records[0] if len(records) == 1 else records), q


# core field names of the simulated impact test → the options that set them (messages name the option)
_OPTION_NAMES = {"impulse_axis": "--impulse-axis", "t_impulse": "--t-impulse", "impulse_duration": "--impulse-duration",
                 "impulse": "--impulse", "sample_rate_hz/duration": "--sample-rate/--duration",
                 "noise counts": "--noise counts", "noise std": "--noise std", "controller_rate_hz": "--controller-rate-hz"}


def _as_options(message):
    field, sep, rest = message.partition(":")
    return f"{_OPTION_NAMES[field]}{sep}{rest}" if field in _OPTION_NAMES else message


def save_record_target(text):
    """(path, kind) of --save-record: kind "csv" for F.csv, else "sqlite3"/"mcap" for a new bag
    directory F; checked before any work (a bag must not exist yet)."""
    path = Path(text)
    if path.suffix.lower() == ".csv":
        return output_file(path, "--save-record"), "csv"
    if path.exists() or path.is_symlink():
        raise InputError(f"--save-record {path}: already exists (a bag is written as a new directory; "
                         "give a new name, or F.csv for CSV)")
    output_file(path, "--save-record")             # the parent directory must exist and be writable
    return path, "mcap" if path.suffix.lower() == ".mcap" else "sqlite3"


def _save_record(record, path, kind):
    if kind == "csv":
        return write_output(path, "--save-record", lambda p: write_csv(record, p))
    return write_output(path, "--save-record", lambda p: write_joint_states(p, record, storage=kind))


def run(args):
    out_dir = checked_output_dir(args, "out_dir", "--out-dir")
    checked_output(args, "data_out", "--data-out")
    target = save_record_target(args.save_record) if args.save_record else None
    model = _model(args)
    record, q = _record(args, model)
    if target and isinstance(record, list):
        raise InputError("--save-record: several impact tests (--impulse-axis with several axes) give several "
                         "records; save one axis at a time")
    orders = parse_orders(args.orders) if args.orders else None
    result = run_oma(record, model, q, args.method, orders, args.controller_rate_hz, args.hold, args.snr_min)
    saved = {"record": _save_record(result.record, *target)} if target else {}
    result = write_output(out_dir, "--out-dir", lambda folder: write_outputs(
        result, folder, plot=not args.no_plot, data_out=args.data_out, files=saved))
    if args.json:
        print_json(result.to_dict())
        return 0
    ident = result.identified
    record = result.record
    refs = f" x {len(result.records)} references" if len(result.records) > 1 else ""
    print(f"{record.num_channels} channels ({', '.join(record.channels)}), {record.num_samples} samples{refs} at "
          f"{record.sample_rate_hz:g} Hz; {ident.method}, orders "
          f"{ident.diagram.orders[0]}..{ident.diagram.orders[-1]}: {ident.num_modes} modes "
          f"in {result.seconds:.2f} s")
    for w in ident.warnings:
        print(f"warning: {w}")
    if not result.comparisons:
        for i, (f, z, s) in enumerate(zip(ident.frequencies_hz, ident.damping_ratios, ident.snr)):
            print(f"{i + 1:>4} {f:>11.4f} Hz {100 * z:>8.4f} %  SNR {s:.3g}")
    for comp in result.comparisons:
        print(comp.table())
    if ident.combination_terms:
        print("combination terms (nonlinear, not modes): " + ", ".join(
            f"{c['frequency_hz']:.2f} Hz" for c in ident.combination_terms))
    print("wrote " + ", ".join(str(v) for v in result.files.values()))
    return 0

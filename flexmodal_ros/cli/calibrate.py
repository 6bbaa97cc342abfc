"""``flexmodal calibrate``: joint stiffness and damping of a robot from designed experiments —
configurations, motor pulses, OMA, weighted identification, validation — written as a loadable
params YAML (flexmodal_ros/calibration/).

``--plant ros`` runs in a process of its own, ``python -m flexmodal_ros.nodes.topic_plant`` with the
same arguments (the ROS plant lives with the nodes, above the CLI); its output and exit status are
this command's."""
import subprocess
import sys

import numpy as np

from ..calibration.campaign import DEFAULT_RANGES, CalibrationSettings, calibrate
from ..calibration.campaign_settings import USER_DESIGNS
from ..calibration.calibration_report import write_params, write_report, write_sidecar
from ..calibration.eigen_sensitivity import Unknowns
from ..calibration.experiment_design import sensor_std
from ..calibration.offline_plants import CHANNELS, PlantOptions, make_plant
from ..core.errors import InputError
from ..identification.inverse_eigen import parse_unknowns
from ..oma.impact import gear_ratios
from ..robot.registry import resolve_model
from .oma import parse_noise
from .options import (add_json_option, add_model_options, checked_output, checked_output_dir, file_option,
                      model_from_args, parse_floats, print_json)
from ..core.validation import shown, shown_names

PLANTS = ("sim", "mujoco", "ros")


def add_parser(sub):
    p = sub.add_parser("calibrate", help="calibrate k, d_f, d_fm: designed configurations, motor pulses, OMA, "
                                         "identification, validation; writes a loadable params YAML")
    add_model_options(p)
    p.add_argument("--plant", choices=PLANTS, default="sim",
                   help="sim = the suite's RK4 plant, mujoco = the exported robot on MuJoCo (both offline, with "
                        "the controller), ros = a running robot or simulator behind the suite's topics")
    p.add_argument("--budget", type=int, default=8, help="most configurations measured (default 8)")
    p.add_argument("--unknowns", default="k,d_f,d_fm", help="subset of k,d_f,d_fm (default all)")
    p.add_argument("--joints", help="joints calibrated, comma-separated (default all)")
    p.add_argument("--pulse-joints", help="joints the experiment may pulse, comma-separated (default: those of "
                                          "--joints, else all)")
    file_option(p, "-o", "--output", kind="output", required=True, help="calibrated params YAML to write")
    file_option(p, "--report-dir", kind="output_dir", help="report, plots and the data of every configuration "
                                        "(default: <output stem>_report next to the output)")
    truth = p.add_argument_group("hidden truth of a simulated plant (sim, mujoco)")
    file_option(truth, "--true-params", kind="input", help="params YAML of the simulated robot (default: the nominal one)")
    truth.add_argument("--true-random", type=int, metavar="SEED",
                       help="draw the truth from the nominal values: k x U(0.7, 1.3), d_f and d_fm x U(0.5, 2)")
    truth.add_argument("--noise", help="encoder noise in the simulated records: counts=COUNTS_PER_REV,std=RAD[,seed=N]")
    exp = p.add_argument_group("experiment")
    exp.add_argument("--validation", type=int, default=2, help="validation configurations (default 2)")
    exp.add_argument("--pulses", type=int, default=2, help="excitations (records) per configuration (default 2)")
    exp.add_argument("--pulse-repeats", type=int, default=1,
                     help="records per excitation, averaged: noise std / sqrt(repeats) (default 1)")
    exp.add_argument("--candidates", type=int, default=120, help="candidate configurations (default 120)")
    exp.add_argument("--excitation-limit", help="bound of the pulse amplitude [N m], one or per joint "
                                                "(default 10 %% of the effort limit)")
    exp.add_argument("--pulse-torque", help="pulse amplitude [N m], one or per joint (default: the limit)")
    exp.add_argument("--pulse-duration", type=float, help="[s] (default two control periods)")
    exp.add_argument("--impacts", action="store_true", help="tool-point impacts allowed as excitations too")
    exp.add_argument("--experiment-kd-scale", help="K_D factor during the experiments, or auto (default auto)")
    exp.add_argument("--design", choices=USER_DESIGNS, default="optimal",
                     help="optimal: D/Ds-optimal on every unknown above its target (default); worst-first: on those "
                          "near the worst σ/target, with overlapping modes judged invisible (fewer configurations "
                          "for the worst unknown under quantized encoders, the others less accurate)")
    exp.add_argument("--target-k", type=float, default=0.005, help="stop when σ(k)/k is below (default 0.005)")
    exp.add_argument("--target-d", type=float, default=0.03, help="... and σ(d)/d below (default 0.03)")
    defaults = ", ".join(f"{k}={a:g}:{b:g}" for k, (a, b) in DEFAULT_RANGES.items())
    exp.add_argument("--ranges", help=f"factor ranges of the nominal values, e.g. k=0.5:2,d_fm=0.2:5 "
                                      f"(default {defaults})")
    exp.add_argument("--channels", choices=CHANNELS, default="both", help="recorded positions (default both)")
    exp.add_argument("--seed", type=int, default=0, help="candidates, validation and starts (default 0)")
    exp.add_argument("--starts", type=int, default=3, help="starts of the final fit (default 3)")
    exp.add_argument("--random-seeds", type=int, default=5, help="random designs compared (default 5)")
    exp.add_argument("--no-tracking", action="store_true", help="skip the tracking validation")
    loop = p.add_argument_group("control loop")
    loop.add_argument("--rate", type=float, default=1000.0, help="control and record rate [Hz] (default 1000)")
    loop.add_argument("--delay-cycles", type=int, default=1, choices=(0, 1),
                      help="offline plants: command applied 0 or 1 period late (default 1, as a ROS loop)")
    loop.add_argument("--dt", type=float, help="offline plants: integration step [s] (default: automatic)")
    ros = p.add_argument_group("--plant ros")
    ros.add_argument("--controller", default="/feedforward_pd_controller", help="controller node (default "
                                                                                "/feedforward_pd_controller)")
    ros.add_argument("--link-state", default="absolute", choices=("absolute", "deflection"),
                     help="joint-state convention of the robot (default absolute)")
    ros.add_argument("--hold", default="zoh-delay", choices=("zoh", "zoh-delay"),
                     help="sampled-data loop model of the robot's control loop (default zoh-delay)")
    add_json_option(p)
    p.set_defaults(func=run)


def _ranges(text):
    out = dict(DEFAULT_RANGES)
    if not text:
        return out
    for item in text.split(","):
        key, _, value = item.partition("=")
        parts = value.split(":")
        try:
            lo, hi = (float(v) for v in parts)
        except ValueError:
            raise InputError(f"--ranges: expected KIND=LOWER:UPPER, got {shown(item)}") from None
        if key.strip() not in DEFAULT_RANGES:
            raise InputError(f"--ranges: unknown kind {shown(key.strip())} (k, d_f, d_fm)")
        out[key.strip()] = (lo, hi)
    return out


def truth_model(args, model):
    """The simulated plant's parameters: --true-params, --true-random, or the nominal model."""
    if args.true_params and args.true_random is not None:
        raise InputError("--true-params and --true-random: give one")
    if args.true_params:
        true = resolve_model(None, None, args.true_params)
        if true.joint_names != model.joint_names:
            raise InputError(f"--true-params: joints {list(true.joint_names)} differ from the robot's "
                             f"{list(model.joint_names)}")
        return true
    if args.true_random is not None:
        return random_truth(model, args.true_random)
    return model


def random_truth(model, seed):
    """k × U(0.7, 1.3), d_f and d_fm × U(0.5, 2) per joint (the acceptance's hidden-truth draw)."""
    rng = np.random.default_rng(seed)
    u = Unknowns.build(model)
    n = model.n
    factors = np.concatenate([rng.uniform(0.7, 1.3, n), rng.uniform(0.5, 2.0, 2 * n)])
    return u.apply(model, u.values(model) * factors)


def settings_from_args(args, model, noise):
    joints = None if not args.joints else tuple(j.strip() for j in args.joints.split(",") if j.strip())
    pulse_joints = None
    if args.pulse_joints is not None:
        pulse_joints = tuple(j.strip() for j in args.pulse_joints.split(",") if j.strip())
        unknown = [j for j in pulse_joints if j not in model.joint_names]
        if unknown or not pulse_joints:
            raise InputError(f"--pulse-joints: unknown joint(s) {shown_names(unknown)}; robot has "
                             f"{', '.join(model.joint_names)}" if unknown else "--pulse-joints: no joint given")
    scale = args.experiment_kd_scale
    if scale in (None, "", "auto"):
        scale = None
    else:
        try:
            scale = float(scale)
        except ValueError:
            raise InputError(f"--experiment-kd-scale: expected a number or auto, got {shown(scale)}") from None
    per_joint = lambda text, name: None if text is None else parse_floats(text, name)
    std = None
    if noise is not None:
        std = sensor_std(model, args.channels, noise.counts_per_rev, noise.std, gear_ratios(model))
    return CalibrationSettings(
        unknowns=parse_unknowns(args.unknowns), joints=joints, pulse_joints=pulse_joints, budget=args.budget, validation=args.validation,
        pulses_per_configuration=args.pulses, pulse_repeats=args.pulse_repeats, excitation_limit=per_joint(args.excitation_limit, "--excitation-limit"),
        pulse_torque=per_joint(args.pulse_torque, "--pulse-torque"), pulse_duration=args.pulse_duration,
        impacts=args.impacts, candidates=args.candidates, target_k=args.target_k, target_d=args.target_d,
        ranges=_ranges(args.ranges), starts=args.starts, seed=args.seed, sensor_std=std,
        random_seeds=args.random_seeds, tracking=not args.no_tracking, experiment_kd_scale=scale, design=args.design)


def run(args):
    model = model_from_args(args)
    noise = parse_noise(args.noise) if args.noise else None
    out = checked_output(args, "output", "-o")                  # outputs checked before any work
    if not args.report_dir:
        args.report_dir = str(out.with_name(out.stem + "_report"))
    report_dir = checked_output_dir(args, "report_dir", "--report-dir")
    if args.plant == "ros":
        if noise is not None or args.true_params or args.true_random is not None:
            raise InputError("--noise/--true-params/--true-random: only for the simulated plants (sim, mujoco)")
        settings = settings_from_args(args, model, None)
        run_ros_calibration = getattr(args, "ros_runner", None)
        if run_ros_calibration is None:
            return _ros_process(args.argv)
        result = run_ros_calibration(model, settings, report_dir, args.controller, args.link_state, args.rate,
                                     args.hold, progress=None if args.json else _progress)
        truth = None
    else:
        truth = truth_model(args, model)
        settings = settings_from_args(args, model, noise)
        options = PlantOptions(control_rate_hz=args.rate, command_delay_cycles=args.delay_cycles, dt=args.dt,
                               noise=noise, channels=args.channels)
        plant = make_plant(args.plant, truth, model, np.zeros(model.n), options)
        result = calibrate(model, plant, settings, report_dir, None if args.json else _progress,
                           truth_model=truth if truth is not model else None)
    result.files["params"] = write_params(result, out, args.plant)
    result.files["sidecar"] = write_sidecar(result, out)
    result.files.update(write_report(result, report_dir))
    write_sidecar(result, out)                     # again, with the report's files listed
    if args.json:
        print_json(result.to_dict())
    else:
        print(summary(result))
    return 0 if result.success else 1


ROS_PROCESS_MODULE = "flexmodal_ros.nodes.topic_plant"


def _ros_process(argv):
    """Exit status of ``python -m flexmodal_ros.nodes.topic_plant`` with ``argv`` (stdout/stderr
    shared; Ctrl-C reaches both processes, the child cancels and this one waits for it)."""
    child = subprocess.Popen([sys.executable, "-m", ROS_PROCESS_MODULE, *argv])
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


def _progress(info):
    if info["stage"] == "configuration done":
        worst = [s / abs(v) for s, v in zip(info["std"], info["values"]) if abs(v) > 1e-9 and np.isfinite(s)]
        print(f"[{info['elapsed_s']:7.1f} s] configuration {info['configuration']}/{info['budget']}: "
              f"{info['modes_measured']} modes measured ({info['modes_expected']} expected by the design), "
              f"worst relative std {max(worst, default=float('nan')):.3g}",
              flush=True)


def summary(result) -> str:
    lines = [f"{'calibrated' if result.success else 'NOT calibrated'}: {result.message}; "
             f"{len(result.configurations)} configuration(s), {result.loop.label}, "
             f"K_D x {result.experiment_kd_scale:g} during the experiments",
             f"{'unknown':<16}{'nominal':>12}{'calibrated':>14}{'std':>11}  status"]
    rows = zip(result.unknown_names, result.nominal, result.values, result.std, result.identifiable)
    for name, nom, v, s, ok in rows:
        lines.append(f"{name:<16}{nom:>12.6g}{v:>14.6g}{s:>11.3g}  "
                     + ("identified" if ok else "NOT IDENTIFIABLE (nominal kept)"))
    if result.validation:
        v = result.validation_errors()
        lines.append(f"validation ({len(result.validation)} configurations, {v['calibrated']['modes']} modes): "
                     "max |Δf|/f "
                     f"{v['calibrated']['max_frequency_error_rel']:.2g} calibrated vs "
                     f"{v['nominal']['max_frequency_error_rel']:.2g} nominal; max |Δζ| "
                     f"{100 * v['calibrated']['max_damping_error']:.2g} pp vs "
                     f"{100 * v['nominal']['max_damping_error']:.2g} pp")
    if result.tracking and "calibrated" in result.tracking:
        t = result.tracking
        lines.append(f"tracking ({t['trajectory']}): max error {t['calibrated']['max_tracking_error_rad']:.3g} rad "
                     f"calibrated, {t['true']['max_tracking_error_rad']:.3g} true, "
                     f"{t['nominal']['max_tracking_error_rad']:.3g} nominal")
    if result.design is not None:
        d = result.design
        needed = ", ".join(">%d" % d.random.shape[1] if not np.isfinite(v) else str(int(v)) for v in d.needed_random)
        lines.append(f"design: {d.budget} designed configurations reach a worst relative std of {d.designed[-1]:.3g}; "
                     f"random configurations need {needed}")
    lines += [f"{k}: {v}" for k, v in result.files.items()]
    return "\n".join(lines)

"""``flexmodal export``: Gazebo (URDF/SDF + ros2_control) or MuJoCo (MJCF) flexible-joint description."""
import time

from ..export import FORMATS, LINK_DAMPING_MODES, ROTOR_MODES, export_files
from ..export.tree import check_source_urdf
from ..core.validation import write_output
from .options import add_json_option, add_model_options, checked_output, file_option, model_from_args, print_json
from ..robot.params import load_config
from ..robot.registry import robot_paths
import tempfile
from pathlib import Path
from ..export.fidelity import mujoco_fidelity, random_configurations, urdf_fidelity
from ..export.gazebo import write_urdf


def add_parser(sub):
    p = sub.add_parser("export", help="write a Gazebo (URDF/SDF + ros2_control) or MuJoCo (MJCF) "
                       "description with a rotor link, <joint>_motor and an elastic joint per joint")
    add_model_options(p)
    p.add_argument("--format", required=True, choices=FORMATS)
    file_option(p, "-o", "--output", kind="output", required=True, help="description file to write")
    p.add_argument("--rotor", choices=ROTOR_MODES, help="rotor inertia mapping (default: armature for "
                   "mjcf, gear for urdf/sdf; see README 'Gazebo and MuJoCo')")
    p.add_argument("--link-damping", choices=LINK_DAMPING_MODES, help="link damping d_f mapping "
                   "(default: tendon for mjcf, elastic for urdf/sdf)")
    p.add_argument("--gear-ratio", type=float, help="N of the gear-coupled rotor where the params "
                   "YAML gives B only (rotor I_r = B/N^2)")
    p.add_argument("--timestep", type=float, default=0.001, help="physics step [s] (MuJoCo option, "
                   "Gazebo world, controller_manager rate 1/timestep); default 0.001")
    p.add_argument("--check", type=int, default=0, metavar="M",
                   help="also compare the exported robot's modes with the suite's AMA at M random "
                   "configurations (MJCF: MuJoCo; URDF/SDF: the exported URDF in Pinocchio)")
    add_json_option(p)
    p.set_defaults(func=run)


def run(args):
    output = checked_output(args, "output", "-o")
    source = _source_urdf(args)
    if source is not None:
        check_source_urdf(source)               # unsupported joints: the export's own message
    model = model_from_args(args)
    start = time.perf_counter()
    result = write_output(output, "-o", lambda path: export_files(model, args.format, path, args.rotor,
                                                                   args.link_damping, args.gear_ratio, args.timestep))
    out = dict(result.to_dict(), format=args.format, export_time_s=time.perf_counter() - start)
    if args.check > 0:
        out["check"] = _check(model, args, result).to_dict()
    if args.json:
        print_json(out)
        return 0
    print(f"{args.format} description of {model.name} written to {result.description} "
          f"(rotor={out['rotor']}, link_damping={out['link_damping']}, {out['export_time_s'] * 1e3:.1f} ms)")
    for key in ("controllers", "world"):
        if out[key]:
            print(f"{key}: {out[key]}")
    if "check" in out:
        c = out["check"]
        print(f"modes vs the suite's AMA at {args.check} random configurations ({c['engine']}): "
              f"max |df/f| {c['max_freq_rel']:.3e}, max |dzeta/zeta| {c['max_damping_rel']:.3e}, "
              f"max |dzeta| {c['max_damping_abs']:.3e}, max |dlambda/lambda| {c['max_eigenvalue_rel']:.3e}")
    return 0


def _source_urdf(args):
    """The URDF file the model options name (the one in the params YAML if --urdf is absent)."""

    if args.urdf:
        return args.urdf
    if args.params:
        return load_config(args.params).urdf_path
    return robot_paths(args.robot)[0] if args.robot else None


def _check(model, args, result):

    # deferred: CasADi (through export.mujoco_plant)
    from ..export.mujoco_plant import MujocoRobot

    qs = random_configurations(model, args.check)
    if args.format == "mjcf":
        return mujoco_fidelity(model, MujocoRobot.from_model(model, result.description, args.timestep), qs)
    if args.format == "urdf":
        return urdf_fidelity(model, result.description, qs)
    with tempfile.TemporaryDirectory() as tmp:     # SDF: same structure, read through its URDF twin
        path = Path(tmp) / "twin.urdf"
        path.write_text(write_urdf(result.exported, result.controllers))
        return urdf_fidelity(model, path, qs)

"""``flexmodal model`` (model summary) and ``flexmodal dh2urdf`` (DH table -> URDF)."""
import numpy as np

from ..core.validation import write_output
from ..robot.dh import dh_to_urdf, load_dh
from ..robot.model import summary
from .options import add_json_option, add_model_options, checked_output, file_option, model_from_args, print_json


def add_parser(sub):
    p = sub.add_parser("model", help="print the flexible-joint model of a robot")
    add_model_options(p)
    add_json_option(p)
    p.set_defaults(func=run_model)
    d = sub.add_parser("dh2urdf", help="write a URDF from a standard-DH table YAML")
    file_option(d, "dh_file", kind="input", help="DH table YAML (see flexmodal_ros/robot/dh.py)")
    file_option(d, "-o", "--output", kind="output", help="output URDF (default: print)")
    d.set_defaults(func=run_dh2urdf)


def run_model(args):
    model = model_from_args(args)
    if not args.json:
        print(summary(model))
        return 0
    print_json({"robot": model.name, "joint_names": list(model.joint_names),
                "prismatic": model.prismatic, "link_masses": [model.pin.inertias[i].mass
                                                              for i in range(1, model.pin.njoints)],
                "k": model.k, "r": model.r, "d_f": model.d_f, "d_fm": model.d_fm, "d_c": model.d_c,
                "d_cm": model.d_cm, "B": model.B, "kp": model.kp, "kd": model.kd, "gravity": model.gravity,
                "tool_mass": model.tool.mass, "effort_limit": np.where(np.isinf(model.effort_limit), None,
                                                                      model.effort_limit).tolist()})
    return 0


def run_dh2urdf(args):
    output = checked_output(args, "output", "-o")
    name, base, links = load_dh(args.dh_file)
    text = dh_to_urdf(name, links, base)
    if output:
        write_output(output, "-o", lambda path: path.write_text(text))
    else:
        print(text, end="")
    return 0

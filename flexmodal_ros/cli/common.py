"""Options and helpers shared by the ``flexmodal`` subcommands."""
import json

import numpy as np

from ..errors import InputError
from ..robots import resolve_model
from ..validation import shown


def add_model_options(parser):
    """--robot NAME | --urdf F --params F."""
    group = parser.add_argument_group("robot model")
    group.add_argument("--robot", help="bundled robot name (scompi, planar_2r, kuka_lwr4)")
    group.add_argument("--urdf", help="URDF file (default: the one named in --params)")
    group.add_argument("--params", help="flexibility YAML file")


def model_from_args(args):
    """The model selected by :func:`add_model_options`."""
    return resolve_model(args.robot, args.urdf, args.params)


def add_json_option(parser):
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def parse_floats(text, field):
    """'1,2.5,-3' -> float array; InputError naming the option on anything else."""
    try:
        values = [float(v) for v in str(text).split(",") if v.strip() != ""]
    except ValueError:
        raise InputError(f"{field}: expected comma-separated numbers, got {shown(text)}") from None
    if not values:
        raise InputError(f"{field}: no values given")
    return np.array(values)


def print_json(obj):
    """Print ``obj`` as JSON (numpy arrays and scalars converted)."""
    print(json.dumps(obj, default=_to_builtin))


def _to_builtin(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")

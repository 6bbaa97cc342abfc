"""``flexmodal shape``: input shaping of a waypoint trajectory with the configuration-dependent modes.

Reads the waypoint YAML (flexmodal_ros/shaping/trajectory_file.py), runs the closed-loop AMA along
the path (``--ama-rate-hz`` samples per second of motion; ``--modal polynomial``: polynomial
eigenvalues of the shaped modes instead), selects the modes that dominate the
end-effector response (or ``--modes``), designs the ``--shaper`` in the ``--shaper-design``
(fixed | robust | time-varying | auto, default auto: flexmodal_ros/shaping/shaper_design.py) and
writes the shaped reference with its derivatives 1..4 as CSV at ``--rate-hz``. Prints the selected
modes, the design chosen and why, the added duration [s], the percentage residual vibration of
each mode on the linearized model, unshaped and shaped, and the predicted end-effector residual
(or, when what the shaper does not treat dominates it, that and its share instead of a
reduction). No mode to shape: the unshaped reference is written, with a warning.
"""
import sys

import numpy as np

from ..core.errors import InputError
from ..shaping import DEFAULT_DESIGN, DESIGNS, KINDS, MODAL_CHOICES, shape_with_design
from ..shaping.trajectory_file import read_waypoints, write_samples
from ..shaping.vibration import linearized_vibration
from ..core.validation import write_output
from .options import (add_json_option, add_model_options, checked_output, file_option, model_from_args, parse_floats,
                      print_json)
from ..shaping import path_derivatives


def add_shaping_options(p):
    """Options shared with ``flexmodal simulate``: --modes, --threshold, --tolerance,
    --shaper-design, --fixed-shaper, --ama-rate-hz, --modal."""
    p.add_argument("--modes", help="modes to shape, 1-based, comma-separated (default: those dominating the "
                                   "end-effector response)")
    p.add_argument("--threshold", type=float, default=0.1,
                   help="mode selection: minimum end-effector contribution relative to the largest (default 0.1)")
    p.add_argument("--tolerance", type=float, default=0.05, help="EI vibration tolerance V (default 0.05)")
    p.add_argument("--shaper-design", choices=DESIGNS, default=None,
                   help="shaper along the path: fixed (start configuration's modes), robust (one sequence covering "
                        "the modes' frequency bands along the path), time-varying (configuration-dependent), auto "
                        "(the one predicted best, the added delay as the cost; default)")
    p.add_argument("--fixed-shaper", action="store_true", help="= --shaper-design fixed")
    p.add_argument("--ama-rate-hz", type=float, default=100.0,
                   help="modal analyses per second of motion along the path (default 100)")
    p.add_argument("--modal", choices=MODAL_CHOICES, default="exact",
                   help="modes along the path: exact eigenvalues of the shaped modes at every sample, or "
                        "polynomial eigenvalues of them (expansions in the path parameter, verified at their "
                        "reach; default exact)")


def shaping_options(args):
    """Keyword options of :func:`~flexmodal_ros.shaping.shape_trajectory` from the parsed options."""
    modes = None
    if args.modes:
        values = parse_floats(args.modes, "--modes")
        if np.any(values != np.round(values)) or np.any(values < 1):
            raise InputError(f"--modes: expected 1-based mode numbers, got {args.modes}")
        modes = [int(v) - 1 for v in values]
    if not args.threshold > 0:
        raise InputError(f"--threshold: must be > 0, got {args.threshold}")
    return {"modes": modes, "threshold": args.threshold, "tolerance": args.tolerance,
            "ama_rate_hz": args.ama_rate_hz, "modal": args.modal, "shaper_design": shaper_design_of(args)}


def shaper_design_of(args):
    """--shaper-design, with --fixed-shaper as its alias (a contradiction is an InputError)."""
    if args.fixed_shaper and args.shaper_design not in (None, "fixed"):
        raise InputError(f"--fixed-shaper: contradicts --shaper-design {args.shaper_design}")
    return "fixed" if args.fixed_shaper else (args.shaper_design or DEFAULT_DESIGN)


def add_parser(sub):
    p = sub.add_parser("shape", help="input shaping (zv, zvd, ei) of a waypoint trajectory with the "
                                     "configuration-dependent modes")
    add_model_options(p)
    file_option(p, "--trajectory", kind="input", required=True,
                help="waypoint YAML (joint_names, points: time, positions)")
    p.add_argument("--shaper", required=True, choices=KINDS, help="shaper family")
    file_option(p, "-o", "--output", kind="output", required=True,
                help="CSV of the shaped reference and its derivatives")
    p.add_argument("--rate-hz", type=float, default=1000.0, help="sample rate of the CSV [Hz] (default 1000)")
    add_shaping_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args):
    output = checked_output(args, "output", "-o")
    model = model_from_args(args)
    path = read_waypoints(model, args.trajectory)
    if not args.rate_hz > 0:
        raise InputError(f"--rate-hz: must be > 0, got {args.rate_hz}")
    options = shaping_options(args)
    shaped, modes, choice = shape_with_design(model, path, args.shaper, **options)
    reference = shaped if shaped is not None else path
    t = np.arange(int(np.floor(reference.duration * args.rate_hz)) + 1) / args.rate_hz
    if shaped is not None:
        samples = shaped.evaluate(t)
    else:
        samples = path_derivatives(path, t)[0]
        print(f"flexmodal shape: warning: no mode qualifies for shaping (threshold {args.threshold:g}); "
              "the reference is written unshaped", file=sys.stderr)
    write_output(output, "-o", lambda p: write_samples(p, model.joint_names, t, samples))
    out = {"robot": model.name, "shaper": args.shaper, "shaped": shaped is not None,
           "shaper_design": options["shaper_design"], "fixed_shaper": options["shaper_design"] == "fixed",
           "output": str(args.output), "samples": int(t.size),
           "duration_s": float(reference.duration), "unshaped_duration_s": float(path.duration),
           "added_duration_s": float(getattr(shaped, "added_delay", 0.0)), **modes.to_dict()}
    if shaped is not None:
        out["percentage_vibration_unshaped"] = linearized_vibration(path, modes).tolist()
        out["percentage_vibration_shaped"] = linearized_vibration(shaped, modes).tolist()
        out["design"] = choice.to_dict()
    if args.json:
        print_json(out)
        return 0
    print(f"{model.name}: {args.shaper} shaping of {args.trajectory} ({path.times.size} waypoints, "
          f"{path.duration:g} s)")
    print(f"modes shaped {out['selected_modes']} (1-based), frequency range "
          + ", ".join(f"{a:.3g}-{b:.3g} Hz" for a, b in out["frequency_range_hz"]))
    print(f"added_duration_s {out['added_duration_s']:.4f}")
    if shaped is not None:
        print("percentage_vibration (linearized) unshaped "
              + " ".join(f"{v:.3g}" for v in out["percentage_vibration_unshaped"])
              + " -> shaped " + " ".join(f"{v:.3g}" for v in out["percentage_vibration_shaped"]))
        print(choice.summary())
    print(f"wrote {args.output} ({t.size} samples at {args.rate_hz:g} Hz)")
    return 0

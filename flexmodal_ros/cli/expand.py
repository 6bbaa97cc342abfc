"""``flexmodal expand``: eigenpairs as polynomials of the configuration (Palomba & Vidoni 2019).

``flexmodal expand --robot NAME --about q0 --order t [--modes ...] [--velocities] [-o coeffs.npz]
[--at q1 --at q2 ... --json]`` expands the selected eigenpairs of a bundled flexible-joint robot
(closed-loop AMA, x = q) or of a flexible-link ERLS arm (``--robot erls_2link``; x = q_r, or
{q_r; q̇_r} with ``--velocities``) and evaluates the polynomials, next to the exact solution, at the
``--at`` points. ``--table1`` prints the paper's Table 1; ``--paper`` runs its validation task.
"""
import sys
import warnings

import numpy as np

from ..core.errors import InputError
from ..core.validation import write_output, shown
from ..modes import frequencies_and_damping, mac
from .options import (add_json_option, add_model_options, checked_output, checked_output_dir, file_option,
                      model_from_args, parse_floats, print_json)
from ..expansion.multiindex import table1

DEFAULT_TOLERANCE = 1e-3   # = flexmodal_ros.expansion.recursion.DEFAULT_TOLERANCE (checked in the tests);
# the parametric core (CasADi, SciPy sparse) is imported on use so that other subcommands start fast


def add_parser(sub):
    p = sub.add_parser("expand", help="eigenpairs as polynomials of the configuration (parametric modal analysis)")
    add_model_options(p)
    p.add_argument("--about", help="expansion point x0: q (URDF joint order) [rad or m]; with --velocities "
                   "(flexible-link arms) q then q̇ [rad/s]")
    p.add_argument("--order", type=int, default=3, help="Taylor order t >= 1 (default 3); at most 6 and "
                   "C(p + t, t) <= 1000 terms (flexmodal_ros/expansion/multiindex.py)")
    p.add_argument("--modes", help="1-based mode numbers at x0, comma-separated (default: all modes)")
    p.add_argument("--velocities", action="store_true",
                   help="also expand in the joint velocities (flexible-link arms: x = {q_r, q̇_r})")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help=f"relative eigenvalue error that defines the trust radius (default {DEFAULT_TOLERANCE:g})")
    file_option(p, "-o", "--output", kind="output", help="write the coefficients to this .npz file")
    p.add_argument("--at", action="append", default=[], metavar="X",
                   help="evaluate the polynomials and the exact solution at X (repeatable)")
    p.add_argument("--table1", action="store_true", help="print Table 1 of the paper (addend counts)")
    p.add_argument("--paper", action="store_true",
                   help="run the paper's validation task (straight path, t = 4) on the ERLS arm")
    file_option(p, "--plot-dir", kind="output_dir", default="flexmodal_output/expand", help="PNG output of --paper")
    add_json_option(p)
    p.set_defaults(func=run)


def run(args):
    # deferred: CasADi, scipy.sparse (through expansion.recursion)
    from ..expansion.recursion import expand

    if args.table1:
        return _table1(args)
    if args.paper:
        checked_output_dir(args, "plot_dir", "--plot-dir")
        return _paper(args)
    output = checked_output(args, "output", "-o")
    if args.about is None:
        raise InputError("--about: the expansion point is required (or use --table1 / --paper)")
    system = _system(args)
    modes = None if args.modes is None else [int(v) for v in _integers(args.modes, "--modes")]
    points = [parse_floats(text, "--at") for text in args.at]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        poly = expand(system, order=args.order, modes=modes, tolerance=args.tolerance, order_field="--order",
                      modes_field="--modes")
        rows = [_point(system, poly, x) for x in points]
    notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    if output:
        write_output(output, "-o", poly.save)
    at0 = poly.evaluate(poly.x0, warn=False)
    out = {"robot": system.describe().get("robot", system.describe().get("model")),
           "system": system.kind, "parameters": list(poly.parameter_names), "about": poly.x0.tolist(),
           "order": poly.order, "num_terms": poly.num_terms, "mode_numbers": poly.mode_numbers.tolist(),
           "frequencies_hz": at0.frequencies_hz[0].tolist(), "damping_ratios": at0.damping_ratios[0].tolist(),
           "trust_radius": poly.trust_radius, "tolerance": poly.tolerance,
           "expansion_time_s": poly.expansion_time_s, "output": args.output, "warnings": notes, "at": rows}
    for note in notes:
        print(f"flexmodal expand: warning: {note}", file=sys.stderr)
    if args.json:
        print_json(out)
        return 0
    _print_text(out)
    return 0


def _system(args):
    """Parametric system of the chosen robot: ERLS arm (bundled name or ``model: erls`` file) or
    flexible-joint robot, at the ``--about`` point."""
    # deferred: CasADi, scipy.sparse (through expansion.erls.erls_linearization)
    from ..expansion.erls.erls_linearization import ErlsSystem, operating_point
    # deferred: CasADi (through expansion.erls.erls_model)
    from ..expansion.erls.erls_model import bundled_erls, is_erls_file, load_erls
    # deferred: CasADi, scipy.sparse (through expansion.flexible_joint)
    from ..expansion.flexible_joint import FlexibleJointSystem

    erls = None
    if args.params and is_erls_file(args.params):
        erls = load_erls(args.params)
    elif args.robot and not args.params and not args.urdf:
        erls = bundled_erls(args.robot)
    x0 = parse_floats(args.about, "--about")
    if erls is None:
        if args.velocities:
            raise InputError("--velocities: a flexible-joint robot's set-point closed loop (2.8) does not "
                             "depend on velocities (static expansion x = q only)")
        model = model_from_args(args)
        if x0.size != model.n:
            raise InputError(f"--about: expected {model.n} values ({', '.join(model.joint_names)}), got {x0.size}")
        return FlexibleJointSystem(model, x0)
    nr = erls.n_r
    want = 2 * nr if args.velocities else nr
    if x0.size != want:
        raise InputError(f"--about: expected {want} values ({', '.join(erls.rigid_names)}"
                         f"{' then their velocities' if args.velocities else ''}), got {x0.size}")
    point = operating_point(erls, x0[:nr], x0[nr:] if args.velocities else None)
    return ErlsSystem(erls, point, ("positions", "velocities") if args.velocities else ("positions",))


def _integers(text, field):
    values = parse_floats(text, field)
    if np.any(values != np.round(values)):
        raise InputError(f"{field}: expected integers, got {shown(text)}")
    return values.astype(int)


def _point(system, poly, x) -> dict:
    """Polynomial and exact f, ζ of the expanded modes at x (exact mode matched by MAC)."""
    if x.size != len(poly.parameter_names):
        raise InputError(f"--at: expected {len(poly.parameter_names)} values "
                         f"({', '.join(poly.parameter_names)}), got {x.size}")
    ev = poly.evaluate(x, left=False)
    exact = system.exact_modes(x[None, :])[0]
    best = []
    for j in range(poly.num_pairs):
        lam = ev.eigenvalues[0, j]
        if poly.real_pairs[j] or exact.num_modes == 0:
            pool = np.concatenate([exact.real_eigenvalues, exact.eigenvalues])
            best.append(pool[np.argmin(np.abs(pool - lam))])
        else:
            best.append(exact.eigenvalues[np.argmax(mac(exact.mode_shapes, ev.right[0][:, j:j + 1])[:, 0])])
    f_ex, z_ex = (values.tolist() for values in frequencies_and_damping(best))
    return {"x": x.tolist(), "distance": float(poly.distance(x)[0]),
            "inside_trust_region": bool(ev.inside_trust[0]),
            "polynomial": {"frequencies_hz": ev.frequencies_hz[0].tolist(),
                           "damping_ratios": ev.damping_ratios[0].tolist(),
                           "error_estimate": ev.error_estimate[0].tolist()},
            "exact": {"frequencies_hz": f_ex, "damping_ratios": z_ex}}


def _print_text(out):
    print(f"{out['system']} {out['robot']}: x = ({', '.join(out['parameters'])}) about "
          f"{np.array2string(np.array(out['about']), precision=5)}, order {out['order']}, "
          f"{out['num_terms']} terms, {len(out['mode_numbers'])} eigenpairs, trust radius "
          f"{out['trust_radius']:.4g}, expansion {1e3 * out['expansion_time_s']:.1f} ms")
    print(f"{'mode':>5} {'f [Hz]':>11} {'zeta [%]':>9}")
    for m, f, z in zip(out["mode_numbers"], out["frequencies_hz"], out["damping_ratios"]):
        print(f"{m:>5} {f:>11.4f} {100 * z:>9.4f}")
    for row in out["at"]:
        print(f"at {np.array2string(np.array(row['x']), precision=5)} (distance {row['distance']:.4g}"
              f"{'' if row['inside_trust_region'] else ', OUTSIDE the trust radius'}):")
        print(f"{'mode':>5} {'f poly':>11} {'f exact':>11} {'zeta poly %':>12} {'zeta exact %':>13} {'err est':>9}")
        poly, exact = row["polynomial"], row["exact"]
        for k, m in enumerate(out["mode_numbers"]):
            print(f"{m:>5} {poly['frequencies_hz'][k]:>11.4f} {exact['frequencies_hz'][k]:>11.4f} "
                  f"{100 * poly['damping_ratios'][k]:>12.4f} {100 * exact['damping_ratios'][k]:>13.4f} "
                  f"{poly['error_estimate'][k]:>9.2e}")
    if out["output"]:
        print(f"wrote {out['output']}")


def _table1(args):

    table = table1()
    if args.json:
        print_json({"n_r": list(range(1, 7)), "t": list(range(1, 6)), **table})
        return 0
    print("Number of addends C(p+t, t) of the polynomial eigenpairs (Palomba & Vidoni 2019, Table 1)")
    print(f"{'n_r':>3} | {'static x = q_r, t = 1..5':<32}| dynamic x = {{q_r, q̇_r}}, t = 1..5")
    for n, (s, d) in enumerate(zip(table["static"], table["dynamic"]), start=1):
        print(f"{n:>3} | {' '.join(f'{v:>5}' for v in s):<32}| {' '.join(f'{v:>5}' for v in d)}")
    return 0


def _paper(args):
    # deferred: CasADi (through expansion.erls.erls_model)
    from ..expansion.erls.erls_model import bundled_erls, load_erls
    # deferred: CasADi, scipy.sparse (through expansion.erls.erls_task)
    from ..expansion.erls.erls_task import plot_validation, validation_task

    if args.params:
        model = load_erls(args.params)
    else:
        model = bundled_erls(args.robot or "erls_2link")
        if model is None:
            raise InputError(f"--robot: {shown(args.robot)} is not a bundled flexible-link (ERLS) arm")
    result = validation_task(model)
    summary = result.summary()
    summary["plots"] = [str(p) for p in write_output(args.plot_dir, "--plot-dir",
                                                     lambda folder: plot_validation(result, folder))]
    if args.json:
        print_json(summary)
        return 0
    print(f"ERLS arm {model.name}: straight 0.3 m path in 0.5 s, {len(result.trajectory.t)} points, "
          f"expansion at T/2 in x = (q1, q2, q̇1, q̇2), t = {result.polynomial.order} "
          f"({summary['num_terms']} terms)")
    for j, m in enumerate(summary["mode_numbers"]):
        lo, hi = summary["frequency_range_hz"][j]
        print(f"elastic mode {j + 1} (mode {m}): f {lo:.3f}..{hi:.3f} Hz "
              f"({summary['frequency_variation_percent'][j]:.1f} %), max eps_f middle 80 % "
              f"{summary['max_eps_f_middle_percent'][j]:.3f} % (all {summary['max_eps_f_percent'][j]:.3f} %), "
              f"min MAC right/left {summary['min_mac_right'][j]:.5f}/{summary['min_mac_left'][j]:.5f}")
    print(f"exact eigen-solutions {1e3 * summary['time_exact_eig_s']:.1f} ms (with re-linearization "
          f"{1e3 * summary['time_exact_s']:.1f} ms), polynomial {1e3 * summary['time_poly_s']:.2f} ms: "
          f"{summary['reduction_percent']:.1f} % less")
    print("wrote " + ", ".join(summary["plots"]))
    return 0

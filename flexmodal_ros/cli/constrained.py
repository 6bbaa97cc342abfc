"""``flexmodal constrained`` (paper models) and the closed-chain path of ``modal``/``sweep``.

``flexmodal constrained --model fourbar --loops N [--damping c] [--method mcs|rcs|ucs|all]``,
``--model pendulum --elements n_p``, ``--model fourbar_singular`` or ``--model FILE.yaml``:
static equilibrium and the linearizations of :mod:`flexmodal_ros.constrained`.

``flexmodal modal``/``sweep`` call :func:`wants_constrained` and, for a robot whose YAML declares
loop closures (or whenever ``--method`` is given), :func:`run_robot_modal` / :func:`robot_sweep`.
Default method for robots: ``mcs`` — the exact spectrum with no spurious eigenvalues to filter and
the smallest eigenproblem (2(n − m), fastest for robot-sized models); at singular configurations
of the mechanism the independent coordinates are re-selected automatically.
"""
import dataclasses
import time

import numpy as np

from ..core.errors import InputError
from ..modes import snap_to_axis
from .options import (add_json_option, configurations_from_args, file_option, model_overrides, parse_floats,
                      print_json)
from ..constrained import Penalty
from ..constrained import modal_analysis, static_equilibrium
from ..robot.registry import is_closed_chain
from ..constrained.closed_chain import with_robot_overrides
from ..constrained.closed_chain import resolve_closed_chain
from ..modes import progress_bar

DEFAULT_ROBOT_METHOD = "mcs"
METHOD_CHOICES = ("mcs", "rcs", "ucs")


def add_parser(sub):
    p = sub.add_parser("constrained", help="linearization of constrained multibody systems "
                       "(four-bar, flexible double pendulum): MCS, RCS, UCS")
    file_option(p, "--model", kind="input", required=True,
                help="bundled model (fourbar, fourbar_singular, pendulum) or a model YAML file")
    p.add_argument("--loops", type=int, help="four-bar: number of loops N")
    p.add_argument("--damping", type=float, help="four-bar: dashpot c_f alongside each spring [N s/m]")
    p.add_argument("--elements", type=int, help="pendulum: finite elements per link n_p")
    p.add_argument("--method", choices=METHOD_CHOICES + ("all",), default="all",
                   help="linearization method (default: all three)")
    p.add_argument("--modes", type=int, help="only the k lowest modes, by sparse shift-invert ARPACK")
    p.add_argument("--refine", type=int, help="refine the k lowest modes by inverse iteration "
                   "(default: all of --modes, none otherwise)")
    p.add_argument("--alpha", type=float, help="UCS penalty factor α (default: the model file's)")
    p.add_argument("--xi", type=float, help="UCS ξ (default: the model file's)")
    p.add_argument("--omega", type=float, help="UCS ω [rad/s] (default: the model file's)")
    p.add_argument("--show", type=int, default=8, help="modes shown / written (0 = all; default 8)")
    add_json_option(p)
    p.set_defaults(func=run)


def _penalty(args, base):

    return Penalty(base.alpha if args.alpha is None else args.alpha,
                   base.xi if args.xi is None else args.xi,
                   base.omega if args.omega is None else args.omega)


def first_modes(modes, count):
    """``modes`` restricted to its first ``count`` modes (0: all) — for display and JSON size."""
    if not count or modes.num_modes <= count:
        return modes
    return dataclasses.replace(modes, frequencies_hz=modes.frequencies_hz[:count],
                               damping_ratios=modes.damping_ratios[:count],
                               eigenvalues=modes.eigenvalues[:count],
                               mode_shapes=modes.mode_shapes[:, :count])


def run(args):
    # deferred: scipy.sparse (through constrained.eigenanalysis)
    from ..constrained.eigenanalysis import check_dense_size
    # deferred: CasADi, scipy.sparse (through constrained.paper_models)
    from ..constrained.paper_models import load_paper_model, paper_model_size

    if args.show < 0:
        raise InputError("--show: must be >= 0")
    names = {"loops": "--loops", "elements": "--elements", "damping": "--damping"}
    sizes = dict(loops=args.loops, damping=args.damping, elements=args.elements)
    check_dense_size(paper_model_size(args.model, names, **sizes), args.modes, "--modes")
    model = load_paper_model(args.model, names, **sizes)
    system = model.system
    eq = static_equilibrium(system, model.guess)
    penalty = _penalty(args, model.penalty)
    methods = METHOD_CHOICES if args.method == "all" else (args.method,)
    results = {}
    for method in methods:
        start = time.perf_counter()
        result = modal_analysis(system, eq, method, num_modes=args.modes, penalty=penalty,
                                refine=args.refine, num_modes_field="--modes")
        results[method] = (result, time.perf_counter() - start)
    if args.json:
        print_json({"model": model.name, "parameters": dataclasses.asdict(model.parameters),
                    "n": system.n, "m": system.m,
                    "equilibrium": {"q": eq.q, "multipliers": eq.multipliers,
                                    "constraint_rank": eq.constraint_rank, "notes": list(eq.notes)},
                    "methods": {k: dict(first_modes(r, args.show).to_dict(), seconds=t)
                                for k, (r, t) in results.items()}})
        return 0
    print(f"{model.name}: {system.name}, n = {system.n} coordinates, m = {system.m} constraints "
          f"(rank {eq.constraint_rank}), {system.n - eq.constraint_rank} DOF")
    if "phi" in system.coordinate_names:
        print(f"equilibrium angle phi = {eq.q[system.index('phi')]:.6f} rad")
    for note in eq.notes:
        print(f"note: {note}")
    for method, (result, seconds) in results.items():
        shown = first_modes(result, args.show)
        print(f"{method.upper()}: {result.num_modes} modes, {result.spurious_eigenvalues.size} "
              f"spurious eigenvalues discarded, {1e3 * seconds:.2f} ms")
        for i, lam in enumerate(snap_to_axis(shown.eigenvalues)):      # undamped: Re s = 0, not round-off
            re = lam.real
            print(f"  s{i + 1} = {re:.6g} ± {lam.imag:.8g}i   f = {shown.frequencies_hz[i]:.6g} Hz"
                  f"   zeta = {0.0 - 100 * re / abs(lam):.4g} %")
        if result.real_eigenvalues.size:
            print(f"  real eigenvalues: {np.array2string(result.real_eigenvalues, precision=6)}")
        for key in ("reselected", "compressed"):
            if key in result.diagnostics:
                print(f"  {result.diagnostics[key]}")
    return 0


# --- closed-chain robots in `flexmodal modal` / `flexmodal sweep` ----------------------------

def add_method_option(parser):
    parser.add_argument("--method", choices=METHOD_CHOICES,
                        help="constrained linearization (closed-chain robots; default "
                             f"{DEFAULT_ROBOT_METHOD} for them)")


def wants_constrained(args) -> bool:
    """True for a closed-chain robot or when ``--method`` is given."""

    return bool(getattr(args, "method", None)) or is_closed_chain(args.robot, args.urdf, args.params)


def _robot(args):

    robot = resolve_closed_chain(args.robot, args.urdf, args.params)
    return with_robot_overrides(robot, **model_overrides(args))


def run_robot_modal(args):
    # deferred: CasADi, scipy.sparse (through constrained.closed_chain_analysis)
    from ..constrained.closed_chain_analysis import robot_modes, robot_result_dict

    robot = _robot(args)
    method = args.method or DEFAULT_ROBOT_METHOD
    modes, point = robot_modes(robot, parse_floats(args.q, "--q"), method)
    if args.json:
        print_json(robot_result_dict(robot, modes, point))
        return 0
    print(f"robot {robot.name} (closed chain, {len(robot.closures)} loop closure(s)), method "
          f"{method.upper()}, q = {np.array2string(point.q, precision=5)} "
          f"({', '.join(robot.joint_names)})")
    print(f"motor equilibrium q_m^d [rad] = {np.array2string(point.motor, precision=5)}")
    print(f"{'mode':>4} {'f [Hz]':>11} {'zeta [%]':>9}  eigenvalue [1/s]")
    for i, (f, z, lam) in enumerate(zip(modes.frequencies_hz, modes.damping_ratios, modes.eigenvalues)):
        print(f"{i + 1:>4} {f:>11.4f} {100 * z:>9.4f}  {lam.real:.6g} + {lam.imag:.6g}j")
    if modes.spurious_eigenvalues.size:
        print(f"{modes.spurious_eigenvalues.size} spurious eigenvalues discarded")
    for note in list(point.notes) + modes.diagnostics.get("notes", []):
        print(f"note: {note}")
    print(modes.stability)
    return 0


class _ActuatedCoordinates:
    """The actuated joints as the coordinates of a sweep (what ``config_line``/``config_grid``
    need: ``n``, ``joint_names``, ``joint_index``)."""

    def __init__(self, robot):
        self.joint_names = robot.actuated_names
        self.n = len(self.joint_names)

    def joint_index(self, name):
        if name not in self.joint_names:
            raise InputError(f"--grid: '{name}' is not an actuated joint ({', '.join(self.joint_names)})")
        return self.joint_names.index(name)


def robot_sweep(args):
    """(robot, ModalMap) of a closed-chain sweep over actuated-joint configurations
    (:func:`~flexmodal_ros.constrained.closed_chain_analysis.robot_modal_map`)."""
    # deferred: CasADi, scipy.sparse (through constrained.closed_chain_analysis)
    from ..constrained.closed_chain_analysis import robot_modal_map

    robot = _robot(args)
    coords = _ActuatedCoordinates(robot)
    configs = np.atleast_2d(configurations_from_args(args, coords))
    if configs.shape[1] != coords.n:
        raise InputError(f"configurations: expected {coords.n} values per row "
                         f"({', '.join(coords.joint_names)}), got {configs.shape[1]}")
    with progress_bar(len(configs), "modal map", enabled=not args.no_progress) as bar:
        mmap, _ = robot_modal_map(robot, configs, args.method or DEFAULT_ROBOT_METHOD,
                                  track=not args.no_track, progress=bar.update)
    return robot, mmap

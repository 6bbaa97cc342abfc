"""Input shaping from the live, configuration-dependent modal parameters (issue 19; no rclpy).

Modules:
- ``shapers``: ZV, ZVD (Singer & Seering 1990) and EI (Singhose, Seering & Singer 1994) impulse
  sequences from (f, ζ), convolution for several modes, percentage residual vibration and
  insensitivity;
- ``reference``: shaping a C⁴ waypoint reference (thesis (4.29)-(4.30)) by a time-varying impulse
  sequence, y(t) = Σ A_i(t) q(t − τ_i(t)), with exact derivatives up to the 4th (what the
  feedforward (4.6)-(4.10) needs);
- ``schedule``: the closed-loop AMA (2.13)-(2.17) along the path (exact, or the polynomial fast
  path of :mod:`flexmodal_ros.expansion.path`), mode tracking (MAC), selection of the modes that
  dominate the end-effector response, and the shaper designed at every sample;
- ``vibration``: residual vibration of a move (linearized modal measure and end-effector peak/RMS
  in simulation), closed-loop comparisons and plots;
- ``trajectory_file``: the trajectory file format of ``flexmodal shape``.

:class:`ReferenceShaper` is what the controller calls on each accepted reference.
"""
from ..core.errors import InputError
from ..robot.trajectory import PiecewiseC4Trajectory
from .reference import DEFAULT_KNOT_RATE_HZ, ShapedTrajectory, ShaperSchedule, path_derivatives, shape_with
from .schedule import (DEFAULT_AMA_RATE_HZ, DEFAULT_EXPANSION_ORDER, DEFAULT_EXPANSION_TOLERANCE,
                       DEFAULT_MAX_DAMPING, DEFAULT_THRESHOLD, MODAL_CHOICES, PathModes, check_modal, path_modes,
                       shape_trajectory, shaper_schedule)
from .shapers import (DEFAULT_TOLERANCE, KINDS, Shaper, convolve, design, ei, insensitivity,
                      percentage_vibration, zv, zvd)
from .shaper_design import DEFAULT_DESIGN, DESIGNS, DesignChoice, check_design, shape_with_design
from .shapers import ei_table
from ..expansion.flexible_joint import segment_taylor_map
from ..core.validation import shown

SHAPING_CHOICES = ("none",) + KINDS


def check_shaping(kind, error=InputError):
    """``kind`` if it is one of none, zv, zvd, ei; else ``error`` naming the choices."""
    if kind not in SHAPING_CHOICES:
        raise error(f"shaping: unknown value {shown(kind)} (choose from {', '.join(SHAPING_CHOICES)})")
    return kind


class PassThrough:
    """An accepted path left unshaped, with the reason (``summary``): the explicit pass-through when
    no mode qualifies for shaping. Behaves as the wrapped path."""
    explicit = False

    def __init__(self, path, summary):
        self.path, self.summary = path, summary

    def __getattr__(self, name):
        return getattr(self.path, name)


class ReferenceShaper:
    """Callable path → shaped reference for :class:`~flexmodal_ros.control.FailSafeController`.

    ``kind``: none | zv | zvd | ei; ``knot_rate_hz``: knots of the piecewise polynomial a control
    cycle evaluates (:class:`~flexmodal_ros.shaping.reference.ShapedTrajectory`); the other options
    as in :func:`~flexmodal_ros.shaping.shaper_design.shape_with_design` (``shaper_design``: fixed | robust |
    time-varying | auto, default auto; ``law`` the residual is predicted for; ``modal="polynomial"``: its
    symbolic Taylor map is built here, ~1 s, not in the first trajectory callback). A path without
    a selectable mode is returned as a :class:`PassThrough` whose summary starts with "WARNING".
    Errors (unstable closed loop along the path, bad options) are InputErrors: the trajectory is
    rejected.
    """

    def __init__(self, model, kind, knot_rate_hz=DEFAULT_KNOT_RATE_HZ, **options):
        self.model, self.kind = model, check_shaping(kind)
        check_design(options.get("shaper_design", DEFAULT_DESIGN))
        self.knot_rate_hz, self.options = knot_rate_hz, options
        self.last_modes = self.last_design = None
        # what the first reference would otherwise load inside a control-loop callback (~1 s)
        # deferred: scipy.interpolate
        import scipy.interpolate  # noqa: F401
        # deferred: scipy.optimize
        import scipy.optimize  # noqa: F401   (also the robust design's linear program)
        if self.kind == "ei":
            ei_table(options.get("tolerance", DEFAULT_TOLERANCE))
        if check_modal(options.get("modal", "exact")) == "polynomial":     # symbolic Taylor map (~1 s)
            segment_taylor_map(model, options.get("expansion_order", DEFAULT_EXPANSION_ORDER))

    def __call__(self, path: PiecewiseC4Trajectory):
        if self.kind == "none":
            return path
        traj, self.last_modes, self.last_design = shape_with_design(self.model, path, self.kind,
                                                                    knot_rate_hz=self.knot_rate_hz, **self.options)
        if traj is None:
            return PassThrough(path, f"WARNING not shaped ({self.kind}): no mode of the closed loop "
                                     f"qualifies (contribution threshold, damping below "
                                     f"{self.options.get('max_damping', DEFAULT_MAX_DAMPING):g})")
        return traj


__all__ = ["DEFAULT_AMA_RATE_HZ", "DEFAULT_EXPANSION_ORDER", "DEFAULT_EXPANSION_TOLERANCE", "DEFAULT_KNOT_RATE_HZ",
           "DEFAULT_DESIGN", "DESIGNS", "DesignChoice", "DEFAULT_MAX_DAMPING", "check_design",
           "shape_with_design", "DEFAULT_THRESHOLD", "DEFAULT_TOLERANCE", "KINDS", "MODAL_CHOICES", "PassThrough",
           "PathModes", "ReferenceShaper", "SHAPING_CHOICES", "ShapedTrajectory", "Shaper", "ShaperSchedule",
           "check_modal", "check_shaping", "convolve", "design", "ei", "insensitivity", "path_derivatives",
           "path_modes", "percentage_vibration", "shape_trajectory", "shape_with", "shaper_schedule", "zv", "zvd"]

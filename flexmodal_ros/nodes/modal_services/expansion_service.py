"""Polynomial eigenpairs in the ``modal_analysis`` node: ``~/expand_modal_parameters`` and the
polynomial fast path of the live topic (:mod:`flexmodal_ros.expansion`)."""
import math
import warnings

from ...core.errors import FlexmodalError
from ...flexible_joint.ama import modal_analysis
from ...robot.model import create_data
from ..base import confined_path
from ..conversions import expansion_request_to_core, expansion_to_response
from ...core.validation import shown

MODAL_METHODS = ("exact", "polynomial")
# Default of the node's max_expansion_terms: the expansion's work grows with its number of terms
# C(p + t, t) (p joints, order t); kuka_lwr4 order 4 = 330 terms, order 5 = 792, scompi order 5 = 462
# (time per term: docs/ros_robustness.md, benchmarks/bench_expansion.py in docs/benchmarks.md).
MAX_EXPANSION_TERMS = 500


def expansion_terms(joints, order):
    """Number of polynomial terms C(p + t, t) of an expansion of ``order`` t in ``joints`` p."""
    return math.comb(joints + order, order)


def check_expansion_options(method, order, tolerance, radius, max_terms):
    """The node's expansion parameters; FlexmodalError naming the parameter."""
    if method not in MODAL_METHODS:
        raise FlexmodalError(f"parameter modal_method: must be 'exact' or 'polynomial', got {shown(method)}")
    for name, value, ok in (("expansion_order", order, order >= 1),
                            ("expansion_tolerance", tolerance, 0 <= tolerance < math.inf),
                            ("trust_radius", radius, 0 <= radius < math.inf),
                            ("max_expansion_terms", max_terms, max_terms >= 1)):
        if not ok:
            raise FlexmodalError(f"parameter {name}: got {value}; expansion_order and max_expansion_terms must "
                                 "be >= 1, expansion_tolerance and trust_radius finite and >= 0 (0 = the core's "
                                 "default / automatic)")


class ExpansionService:
    """Answers ExpandModalParameters for ``model`` (expansion ``order`` by default, re-expansion
    ``tolerance`` None = the core's default); ``tracker`` is the live topic's polynomial fast path
    (None with modal_method 'exact'), built here when ``method`` is 'polynomial'."""

    def __init__(self, model, method="exact", order=3, tolerance=None, radius=None, max_terms=MAX_EXPANSION_TERMS,
                 output_root=None, overwrite=False):
        self.model, self.order, self.tolerance = model, order, tolerance
        self.max_terms, self.output_root, self.overwrite = max_terms, output_root, overwrite
        self.check_order(order, "expansion_order")
        self.data = create_data(model)
        self.tracker = None
        if method == "polynomial":
            from ...expansion.live import PolynomialModalTracker  # deferred: CasADi Taylor maps, only when used

            self.tracker = PolynomialModalTracker(model, order, tolerance, radius)
            self.tracker.warm_up()

    def expand(self, request, response, stamp):
        # deferred: CasADi Taylor maps and SciPy sparse, loaded by the first expansion request
        from ...expansion.flexible_joint import FlexibleJointSystem
        from ...expansion.live import LIVE_TOLERANCE
        from ...expansion.recursion import expand

        args = expansion_request_to_core(self.model, request)
        order = args["order"] or self.order
        self.check_order(order, "order")
        path = None
        if args["output_path"]:          # checked before the work, written after it
            if self.output_root is None:
                raise FlexmodalError("output_path: this node writes no files (no output directory)")
            path = confined_path(self.output_root, args["output_path"], "output_path", self.overwrite)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            poly = expand(FlexibleJointSystem(self.model), args["q"], order, args["modes"],
                          left=False, tolerance=self.tolerance or LIVE_TOLERANCE)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                poly.save(confined_path(self.output_root, str(path), "output_path", self.overwrite))
            except OSError as exc:
                raise FlexmodalError(f"output_path: cannot write {str(path)!r} ({exc.strerror})") from None
        if args["use_for_live"] and self.tracker is not None:
            self.tracker.install(poly)
        result = modal_analysis(self.model, args["q"], self.data)
        notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        if args["use_for_live"] and self.tracker is None:
            notes.append("use_for_live ignored: the node runs with modal_method 'exact'")
        expansion_to_response(poly, result, self.model.joint_names, response, notes, stamp)

    def check_order(self, order, field):
        """FlexmodalError naming ``field`` when an expansion of ``order`` has more terms than the
        node's max_expansion_terms (its work bound)."""
        terms = expansion_terms(self.model.n, order)
        if terms > self.max_terms:
            raise FlexmodalError(f"{field}: an expansion of order {order} in {self.model.n} joints has {terms} terms, "
                                 f"more than this node's max_expansion_terms ({self.max_terms}); lower the order "
                                 f"(or raise max_expansion_terms: the work grows with the number of terms)")

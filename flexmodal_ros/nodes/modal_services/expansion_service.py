"""Polynomial eigenpairs in the ``modal_analysis`` node: ``~/expand_modal_parameters`` and the
polynomial fast path of the live topic (:mod:`flexmodal_ros.expansion`)."""
import warnings

from ...core.errors import FlexmodalError
from ...flexible_joint.ama import modal_analysis
from ...robot.model import create_data
from ..conversions import expansion_request_to_core, expansion_to_response

MODAL_METHODS = ("exact", "polynomial")


def check_expansion_options(method, order, tolerance, radius):
    """The live-topic options of the node; FlexmodalError naming the parameter."""
    if method not in MODAL_METHODS:
        raise FlexmodalError(f"parameters: modal_method must be 'exact' or 'polynomial', got {method!r}")
    if order < 1 or tolerance < 0 or radius < 0:
        raise FlexmodalError("parameters: expansion_order must be >= 1, expansion_tolerance and "
                             "trust_radius >= 0 (0 = the core's default / automatic)")


class ExpansionService:
    """Answers ExpandModalParameters for ``model`` (expansion ``order`` by default, re-expansion
    ``tolerance`` None = the core's default); ``tracker`` is the live topic's polynomial fast path
    (None with modal_method 'exact'), built here when ``method`` is 'polynomial'."""

    def __init__(self, model, method="exact", order=3, tolerance=None, radius=None):
        self.model, self.order, self.tolerance = model, order, tolerance
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            poly = expand(FlexibleJointSystem(self.model), args["q"], args["order"] or self.order, args["modes"],
                          left=False, tolerance=self.tolerance or LIVE_TOLERANCE)
        if args["output_path"]:
            try:
                poly.save(args["output_path"])
            except OSError as exc:
                raise FlexmodalError(f"output_path: cannot write ({exc.strerror})") from None
        if args["use_for_live"] and self.tracker is not None:
            self.tracker.install(poly)
        result = modal_analysis(self.model, args["q"], self.data)
        notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        if args["use_for_live"] and self.tracker is None:
            notes.append("use_for_live ignored: the node runs with modal_method 'exact'")
        expansion_to_response(poly, result, self.model.joint_names, response, notes, stamp)

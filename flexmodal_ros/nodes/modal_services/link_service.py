"""Beam-link robots in the ``modal_analysis`` node: ``~/compute_link_modes`` (flexmodal_ros.links)."""
from ...core.errors import FlexmodalError, InputError
from ...links.arm import has_links, link_arm_from_model
from ...links.solve import MAX_MODES, link_modes
from ..conversions import link_modes_request_to_core, link_modes_to_response

# Default of the node's max_link_modes, the bound on one request's work: the root search and
# confirmation grow fast with the number of modes (three_link_arm on this project's machine: 40
# modes 1.3 s, 60 modes 8.9 s; the core's MAX_MODES = 200 takes minutes).
MAX_LINK_MODES = 40


def check_max_link_modes(value):
    """The node's max_link_modes parameter (1 .. the core's MAX_MODES); FlexmodalError otherwise."""
    if not 1 <= value <= MAX_MODES:
        raise FlexmodalError(f"parameter max_link_modes: must be in [1, {MAX_MODES}], got {value}")
    return value


class LinkService:
    """Answers ComputeLinkModes for ``model`` (a robot whose YAML has a ``links:`` section; others
    are refused with the reason); at most ``max_modes`` modes per request."""

    def __init__(self, model, max_modes=MAX_LINK_MODES):
        self.model, self.max_modes = model, max_modes
        self.arm = link_arm_from_model(model) if has_links(model) else None

    def link_modes(self, request, response, stamp=None):
        if self.arm is None:
            raise InputError(f"robot {self.model.name} has no flexible links (no links: section in its YAML)")
        if request.num_modes > self.max_modes:
            raise InputError(f"num_modes: {request.num_modes} is more than this node's max_link_modes "
                             f"({self.max_modes}); ask for fewer modes")
        arm, q, model, num_modes, regime = link_modes_request_to_core(self.arm, request)
        link_modes_to_response(arm, link_modes(arm, q, num_modes, model, regime), regime, response)

"""Beam-link robots in the ``modal_analysis`` node: ``~/compute_link_modes`` (flexmodal_ros.links)."""
from ...core.errors import InputError
from ...links.arm import has_links, link_arm_from_model
from ...links.solve import link_modes
from ..conversions import link_modes_request_to_core, link_modes_to_response


class LinkService:
    """Answers ComputeLinkModes for ``model`` (a robot whose YAML has a ``links:`` section; others
    are refused with the reason)."""

    def __init__(self, model):
        self.model = model
        self.arm = link_arm_from_model(model) if has_links(model) else None

    def link_modes(self, request, response, stamp=None):
        if self.arm is None:
            raise InputError(f"robot {self.model.name} has no flexible links (no links: section in its YAML)")
        arm, q, model, num_modes, regime = link_modes_request_to_core(self.arm, request)
        link_modes_to_response(arm, link_modes(arm, q, num_modes, model, regime), regime, response)

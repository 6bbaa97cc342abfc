"""Flexible-joint robots in the ``modal_analysis`` node: ``~/compute_modal_parameters`` (the AMA
(2.13)-(2.18), or the sampled-data loop with ``controller_rate_hz`` > 0), ``~/compute_modal_map``
and the live ``~/modal_parameters`` (exact AMA, or the polynomial fast path of
:mod:`flexmodal_ros.expansion.live`)."""
from ...core.errors import FlexmodalError
from ...flexible_joint.ama import limit_warnings, modal_analysis
from ...flexible_joint.sweep import modal_map
from ...robot.model import create_data
from ..conversions import (joint_state_to_configuration, modal_map_request_to_core, modal_map_to_response,
                           modal_request_to_core, modal_result_to_msg, sampled_request_options)

MAX_MAP_CONFIGURATIONS = 2000   # default of max_map_configurations (≈ 0.5 s of one core for the 7-joint LWR4)


def check_map_request_size(num_configurations, limit):
    """Refuse maps above ``limit`` configurations: they belong to the out-of-core CLI path."""
    if num_configurations > limit:
        raise FlexmodalError(
            f"num_configurations: {num_configurations} is more than this node's max_map_configurations "
            f"({limit}); compute large maps out of core with `flexmodal sweep --robot NAME --grid ... "
            f"--store MAP.zarr [--scheduler local:N|tcp://HOST:PORT]` (README: Dask), or split the request")


class FlexibleJointService:
    """Answers modal requests for a :class:`~flexmodal_ros.robot.model.FlexibleJointModel`;
    ``tracker``: the polynomial fast path of the live topic (None: exact AMA)."""

    def __init__(self, model, max_map, link_state, tracker=None):
        self.model, self.max_map, self.link_state, self.tracker = model, max_map, link_state, tracker
        self.data = create_data(model)

    def parameters(self, request, response, stamp):
        model, q = modal_request_to_core(self.model, request)
        rate, hold = sampled_request_options(request)
        if rate is None:
            result = modal_analysis(model, q, self.data)
        else:                                  # deferred: SciPy's expm, only for a sampled-data request
            from ...flexible_joint.sampled import sampled_modal_analysis
            result = sampled_modal_analysis(model, q, rate, hold, self.data)
        modal_result_to_msg(result, self.model.joint_names, stamp, limit_warnings(self.model, q, "positions"),
                            msg=response.result)

    def modal_map(self, request, response, stamp):
        check_map_request_size(request.num_configurations, self.max_map)
        model, qs = modal_map_request_to_core(self.model, request)
        mmap = modal_map(model, qs, track=request.track_modes)
        modal_map_to_response(mmap, response, stamp, self.model)

    def live(self, msg, stamp):
        """JointState → ModalParameters for the live topic (FlexmodalError for a bad joint state)."""
        q = joint_state_to_configuration(self.model, msg, self.link_state)
        result = self.tracker(q) if self.tracker is not None else modal_analysis(self.model, q, self.data)
        return modal_result_to_msg(result, self.model.joint_names, stamp, limit_warnings(self.model, q, "joint_states"))

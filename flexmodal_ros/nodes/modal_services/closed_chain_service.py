"""Closed-chain robots in the ``modal_analysis`` node: ``~/compute_modal_parameters``,
``~/compute_modal_map`` and the live topic delegating to :mod:`flexmodal_ros.constrained.closed_chain`
(parameter ``method``: mcs | rcs | ucs, default mcs). Message conversion in
:mod:`flexmodal_ros.nodes.conversions`, numerics in the core. The last solved configuration is the
starting guess of the next closure solve (continuity of the live topic and of repeated calls).
"""
from ...constrained.closed_chain_analysis import robot_modal_map, robot_modes
from ...core.errors import FlexmodalError
from .flexible_joint_service import check_map_request_size
from ..conversions import (closed_chain_map_request_to_core, closed_chain_map_to_response,
                          closed_chain_request_to_core, closed_chain_result_to_msg,
                          joint_state_to_closed_chain)
from ...core.validation import shown

METHODS = ("mcs", "rcs", "ucs")
DEFAULT_METHOD = "mcs"


class ClosedChainService:
    """Answers modal requests for a :class:`~flexmodal_ros.constrained.closed_chain.ClosedChainRobot`."""

    def __init__(self, robot, method, max_map):
        method = method or DEFAULT_METHOD
        if method not in METHODS:
            raise FlexmodalError(f"parameters: method must be one of {', '.join(METHODS)}, got {shown(method)}")
        self.robot, self.method, self.max_map, self.guess = robot, method, max_map, None

    def parameters(self, request, response, stamp):
        """ComputeModalParameters.Request → the response's result (raises FlexmodalError on bad input)."""
        robot, values = closed_chain_request_to_core(self.robot, request)
        modes, point = robot_modes(robot, values, self.method, guess=self.guess)
        self.guess = point.q
        response.result = closed_chain_result_to_msg(robot, modes, point, stamp)

    def modal_map(self, request, response, stamp):
        check_map_request_size(request.num_configurations, self.max_map)
        robot, rows = closed_chain_map_request_to_core(self.robot, request)
        mmap, points = robot_modal_map(robot, rows, self.method, track=request.track_modes)
        return closed_chain_map_to_response(robot, mmap, points, response, stamp)

    def live(self, msg, stamp):
        """JointState → ModalParameters for the live topic."""
        values = joint_state_to_closed_chain(self.robot, msg)
        modes, point = robot_modes(self.robot, values, self.method, guess=self.guess)
        self.guess = point.q
        return closed_chain_result_to_msg(self.robot, modes, point, stamp)

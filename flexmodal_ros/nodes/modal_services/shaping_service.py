"""Input shaping in the ``modal_analysis`` node: ``~/shape_trajectory`` (waypoints → the shaped
reference sampled for any trajectory controller, :func:`flexmodal_ros.shaping.shaped_samples.shape_samples`;
work bounds in :mod:`flexmodal_ros.nodes.conversions.shaping_messages`; limits refused, never
time-scaled)."""
from ...core.errors import InputError
from ...robot.trajectory import PiecewiseC4Trajectory
from ...shaping.shaped_samples import shape_samples
from ..conversions.shaping_messages import MAX_SHAPE_SAMPLES, shape_request_to_core, shaped_samples_to_response


class ShapingService:
    """Answers ShapeTrajectory for ``model`` (flexible-joint serial robots; closed-chain robots are
    refused with the reason)."""

    def __init__(self, model):
        self.model = model
        self.closed_chain = bool(getattr(model, "closed_chain", False))

    def shape_trajectory(self, request, response, stamp=None):
        """Fill ``response``; returns its message (the design's notes; the node keeps it)."""
        if self.closed_chain:
            raise InputError("shape_trajectory: not available for closed-chain robots (flexible-joint "
                             "serial robots only)")
        req = shape_request_to_core(self.model, request)
        samples = shape_samples(req.model, PiecewiseC4Trajectory(req.times, req.positions), req.kind,
                                req.shaper_design, req.rate_hz, max_samples=MAX_SHAPE_SAMPLES)
        return shaped_samples_to_response(samples, req, self.model, response).message

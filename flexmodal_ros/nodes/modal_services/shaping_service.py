"""Input shaping in the ``modal_analysis`` node: ``~/shape_trajectory`` (waypoints → the shaped
reference sampled for any trajectory controller, :func:`flexmodal_ros.shaping.shaped_samples.shape_samples`;
work bounds in :mod:`flexmodal_ros.nodes.conversions.shaping_messages`; limits refused, never
time-scaled). The last ``CACHE_SIZE`` answers are kept: a planner that sends the same waypoints
again (same gains, shaper, design and rate) gets the same samples without the modal analysis
along the path (the robot model does not change while the node runs)."""
import threading
from collections import OrderedDict

from ...core.errors import InputError


class ShapingService:
    """Answers ShapeTrajectory for ``model`` (flexible-joint serial robots; closed-chain robots are
    refused with the reason)."""

    CACHE_SIZE = 8

    def __init__(self, model):
        self.model = model
        self.closed_chain = bool(getattr(model, "closed_chain", False))
        self._cache, self._lock = OrderedDict(), threading.Lock()

    def shape_trajectory(self, request, response, stamp=None):
        """Fill ``response``; returns its message (the design's notes; the node keeps it)."""
        if self.closed_chain:
            raise InputError("shape_trajectory: not available for closed-chain robots (flexible-joint "
                             "serial robots only)")
        # deferred: the shaping core (path modes, Taylor expansion, CasADi) is not needed before
        # the first ~/shape_trajectory request; the modal server starts without it
        from ...robot.trajectory import PiecewiseC4Trajectory
        from ...shaping.shaped_samples import shape_samples
        from ..conversions.shaping_messages import MAX_SHAPE_SAMPLES, shape_request_to_core, shaped_samples_to_response

        req = shape_request_to_core(self.model, request)
        key = (id(self.model), req.model.kp.tobytes(), req.model.kd.tobytes(), req.times.tobytes(),
               req.positions.tobytes(), req.kind, req.shaper_design, float(req.rate_hz))
        with self._lock:
            samples = self._cache.get(key)
            if samples is not None:
                self._cache.move_to_end(key)
        if samples is None:
            samples = shape_samples(req.model, PiecewiseC4Trajectory(req.times, req.positions), req.kind,
                                    req.shaper_design, req.rate_hz, max_samples=MAX_SHAPE_SAMPLES)
            with self._lock:
                self._cache[key] = samples
                while len(self._cache) > self.CACHE_SIZE:
                    self._cache.popitem(last=False)
        return shaped_samples_to_response(samples, req, self.model, response).message

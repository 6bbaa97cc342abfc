"""The controller node's run-time parameters (settable with ``ros2 param set``; the list and their
meaning: :mod:`flexmodal_ros.nodes.feedforward_pd_controller`) and their translation into the
controller's :class:`~flexmodal_ros.control.limits.SafetyLimits`."""
from ..control import SafetyLimits
from ..control.limits import ACCELERATION_PER_VELOCITY, DEFAULT_VELOCITY_LIMIT
from ..core.errors import FlexmodalError
from .base import SettableParameters


def declare_settable(node, model):
    """The run-time parameters of ``node`` controlling ``model``, declared with their effective
    values: the params YAML's gains, the URDF's velocity limits, acceleration limits following
    velocity_limits and velocity_scale until set themselves."""
    defaults = SafetyLimits()
    settable = SettableParameters(node)
    for name, default in (("use_feedforward", True), ("state_timeout_s", 0.05), ("start_tolerance", 0.05),
                          ("position_margin", defaults.position_margin), ("velocity_scale", defaults.velocity_scale),
                          ("state_velocity_factor", defaults.state_velocity_factor),
                          ("max_trajectory_points", defaults.max_trajectory_points),
                          ("max_trajectory_duration_s", defaults.max_trajectory_duration),
                          ("max_start_delay_s", defaults.max_start_delay)):
        settable.declare(name, default)
    urdf_velocity = [float(v) if v < float("inf") else DEFAULT_VELOCITY_LIMIT for v in model.velocity_limit]
    for name, default in (("kp", model.kp), ("kd", model.kd), ("velocity_limits", urdf_velocity)):
        settable.declare(name, [float(v) for v in default], per_joint=True)

    def acceleration(v):
        return [ACCELERATION_PER_VELOCITY * a * v["velocity_scale"] for a in v["velocity_limits"]]
    settable.declare("acceleration_limits", acceleration(settable.values), per_joint=True)
    settable.follow("acceleration_limits", ("velocity_limits", "velocity_scale"), acceleration)
    return settable


def safety_limits(values):
    """The :class:`SafetyLimits` of the parameter ``values`` (FlexmodalError for a velocity_scale
    that is not a positive finite number: the node refuses what an offline simulation allows)."""
    v = values
    limits = SafetyLimits(position_margin=v["position_margin"], velocity_scale=v["velocity_scale"],
                          velocity_limits=v["velocity_limits"], acceleration_limits=v["acceleration_limits"],
                          state_velocity_factor=v["state_velocity_factor"],
                          max_trajectory_points=v["max_trajectory_points"],
                          max_trajectory_duration=v["max_trajectory_duration_s"],
                          max_start_delay=v["max_start_delay_s"])
    if not 0 < v["velocity_scale"] < float("inf"):
        raise FlexmodalError(f"velocity_scale: must be a positive number, got {v['velocity_scale']}")
    return limits

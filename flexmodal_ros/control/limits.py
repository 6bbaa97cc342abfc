"""Thresholds of the fail-safe policy: plausible states, trajectory rates and sizes (ROS-free).

Velocity limits from the URDF (``DEFAULT_VELOCITY_LIMIT`` where it gives none) times
``velocity_scale``, or given per joint; acceleration limits given per joint, or
``ACCELERATION_PER_VELOCITY`` × the velocity limit; the measured state is within the limits inside the URDF
position limits ± ``position_margin`` (motor: ± the spring deflection at the effort limit) with
|velocity| ≤ ``state_velocity_factor`` × the velocity limit (:meth:`SafetyLimits.resolved`'s state
bounds), and plausible with any position up to ``STATE_BOUND`` and those velocities
(:func:`plausible_bounds`): a robot that is outside its limits is still measured (the fail-safe
policy holds it there, :mod:`.failsafe`).
"""
import math
from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..core.validation import per_joint
from ..robot.trajectory import MAX_WAYPOINTS

# Tolerance on URDF position limits for trajectory waypoints [rad or m] (limits are printed rounded).
LIMIT_TOLERANCE = 1e-9
DEFAULT_VELOCITY_LIMIT = 10.0        # [rad/s or m/s] where the URDF gives no velocity limit
ACCELERATION_PER_VELOCITY = 10.0     # [1/s] default acceleration limit = this × velocity limit
STATE_BOUND = 1e6                    # no measured position or velocity is plausible beyond this
DEFAULT_MAX_START_DELAY = 60.0       # [s] a reference may start at most this long after the last sample
RECOVERY_INSET = 0.01                # [rad or m] a recovery move ends this far inside the position limits


@dataclass(frozen=True)
class SafetyLimits:
    """Thresholds of the fail-safe policy (module docstring). Units rad or m (prismatic), per s.

    ``position_margin``: measured link positions beyond the URDF limits by more than this are
    implausible; ``velocity_scale``: multiplies the URDF velocity limits (inf: no rate checks,
    for offline what-if simulations); ``velocity_limits`` / ``acceleration_limits``: per joint
    (scalar or n values) instead of the defaults; ``state_velocity_factor``: measured |velocity|
    beyond this × velocity limit is implausible; ``max_trajectory_points`` and
    ``max_trajectory_duration`` [s] bound a reference; ``max_start_delay`` [s]: how far after the
    last joint-state sample a reference may be scheduled to start."""
    position_margin: float = 0.1
    velocity_scale: float = 1.0
    velocity_limits: tuple | None = None
    acceleration_limits: tuple | None = None
    state_velocity_factor: float = 3.0
    max_trajectory_points: int = MAX_WAYPOINTS
    max_trajectory_duration: float = 3600.0
    max_start_delay: float = DEFAULT_MAX_START_DELAY

    def resolved(self, model):
        """(velocity limits (n,), acceleration limits (n,), state bounds (lo, hi) (4n,) in the order
        q, q̇, q_m, q̇_m); InputError naming the field for bad values."""
        n = model.n
        for name in ("position_margin", "velocity_scale", "state_velocity_factor", "max_trajectory_duration",
                     "max_start_delay"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and not math.isnan(value)):
                raise InputError(f"{name}: must be > 0, got {value}")
        if int(self.max_trajectory_points) < 2:
            raise InputError(f"max_trajectory_points: must be >= 2, got {self.max_trajectory_points}")
        if self.velocity_limits is None:
            velocity = np.where(np.isfinite(model.velocity_limit), model.velocity_limit, DEFAULT_VELOCITY_LIMIT)
        else:
            velocity = _positive_per_joint(self.velocity_limits, n, "velocity_limits")
        velocity = velocity * self.velocity_scale
        acceleration = (ACCELERATION_PER_VELOCITY * velocity if self.acceleration_limits is None
                        else _positive_per_joint(self.acceleration_limits, n, "acceleration_limits"))
        W = np.asarray(model.W, float)
        margin = self.position_margin
        deflection = model.effort_limit / model.k                  # spring torque at the effort limit
        speed = self.state_velocity_factor * velocity
        lo = np.concatenate([model.position_lower - margin, -speed,
                             W * (model.position_lower - margin) - deflection, -W * speed])
        hi = np.concatenate([model.position_upper + margin, speed,
                             W * (model.position_upper + margin) + deflection, W * speed])
        bounds = (np.clip(lo, -STATE_BOUND, STATE_BOUND), np.clip(hi, -STATE_BOUND, STATE_BOUND))
        return velocity, acceleration, bounds


def plausible_bounds(bounds):
    """The plausibility bounds of measured states for ``bounds`` (lo, hi) (4n,) of
    :meth:`SafetyLimits.resolved`: positions (link and motor) up to ±STATE_BOUND, velocities as
    in ``bounds``."""
    lo, hi = (np.array(b, dtype=float) for b in bounds)
    n = lo.size // 4
    for k in (0, 2):
        lo[k * n:(k + 1) * n], hi[k * n:(k + 1) * n] = -STATE_BOUND, STATE_BOUND
    return lo, hi


def _positive_per_joint(values, n, field):
    arr = per_joint(values, n, field)
    if np.any(arr <= 0):
        raise InputError(f"{field}: must be > 0, got {arr.tolist()}")
    return arr


_STATE_FIELDS = ("position", "velocity")


def implausible_state(model, values, bounds):
    """Message for the first entry of ``values`` = [q; q̇; q_m; q̇_m] (4n,) outside ``bounds`` =
    (lo, hi) of :meth:`SafetyLimits.resolved` (NaN and inf included), or "" when all are in."""
    lo, hi = bounds
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= lo) & (values <= hi)))
    if bad.size == 0:
        return ""
    k, n = int(bad[0]), model.n
    field = _STATE_FIELDS[(k // n) % 2]
    joint = model.joint_names[k % n] + ("_motor" if k >= 2 * n else "")
    if not np.isfinite(values[k]):
        return f"joint_states.{field}: NaN or inf for {joint}"
    return (f"joint_states.{field}: {joint} = {values[k]:.6g} is implausible (outside [{lo[k]:.6g}, {hi[k]:.6g}]: "
            f"URDF limits with the controller's margins)")

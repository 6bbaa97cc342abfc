"""The /joint_states convention ``link_state`` and the matching command scaling (ROS-free).

- ``"absolute"`` (the built-in ``flexible_joint_simulator``, default): joint ``<joint>`` reports the
  link coordinate q [rad or m], ``<joint>_motor`` the motor coordinate q_m [rad]; commands are the
  motor torques τ_m [N m].
- ``"deflection"`` (exported robots: Gazebo's joint_state_broadcaster, ``mujoco_simulator``):
  ``<joint>`` is the elastic joint s_e = q − r q_m (the deflection q − q_m of a revolute joint),
  ``<joint>_motor`` the motor joint s_m = r q_m (r = 1 for revolute joints; the rack travel [m] of
  a prismatic one); commands are the motor-joint efforts W τ_m [N m or N]. So q = s_e + s_m and
  q_m = W s_m (tree.py).
"""
import numpy as np

from ..core.errors import ConfigError
from ..core.validation import shown

LINK_STATES = ("absolute", "deflection")


def check_link_state(value, field="link_state", error=ConfigError):
    """``value`` if it is one of LINK_STATES, else ``error`` naming the field."""
    if value not in LINK_STATES:
        raise error(f"{field}: expected one of {', '.join(LINK_STATES)}, got {shown(value)}")
    return value


class StateConvention:
    """Conversions between a ``link_state`` convention and the model coordinates of ``model``."""

    def __init__(self, model, link_state="absolute"):
        self.link_state = check_link_state(link_state)
        self.deflection = link_state == "deflection"
        W = np.asarray(model.W, dtype=float)
        self.n = model.n
        self._W = W
        self._W2 = np.concatenate([W, W])

    def to_model_inplace(self, values):
        """Gathered [q; q̇; q_m; q̇_m] (4n,) as reported → model coordinates, in place."""
        if self.deflection:
            n2 = 2 * self.n
            values[:n2] += values[n2:]
            values[n2:] *= self._W2
        return values

    @property
    def motor_scale(self):
        """W twice (2n), the factors :meth:`to_model_inplace` applies to the motor values, or None
        (absolute convention: no conversion)."""
        return self._W2.copy() if self.deflection else None

    def positions_to_model(self, link, motor):
        """Reported link/motor positions (n,) each → (q, q_m)."""
        link, motor = np.asarray(link, float), np.asarray(motor, float)
        return (link + motor, self._W * motor) if self.deflection else (link, motor)

    def from_model(self, q, qd, q_m, qd_m):
        """Model coordinates → reported (link, link rate, motor, motor rate)."""
        if not self.deflection:
            return q, qd, q_m, qd_m
        s_m, v_m = np.asarray(q_m) / self._W, np.asarray(qd_m) / self._W
        return np.asarray(q) - s_m, np.asarray(qd) - v_m, s_m, v_m

    @property
    def effort_scale(self):
        """Factor from τ_m to the commanded effort (W for deflection, None = 1)."""
        return self._W.copy() if self.deflection else None

"""std_msgs/Float64MultiArray motor torque commands (/effort_controller/commands)."""

import numpy as np

from .cdr import SerializedMessage
from ...core.validation import finite_vector


class TorqueCommandWriter:
    """Motor torques (n,) [N m] → serialized std_msgs/Float64MultiArray (URDF order,
    gz_ros2_control convention; empty layout) for ``Publisher.publish``. ``scale`` (n,): publish
    scale·τ instead (the motor-joint efforts W τ_m of exported robots, export/convention.py)."""

    def __init__(self, n, scale=None):
        # deferred: std_msgs (ROS message types, built interfaces)
        from std_msgs.msg import Float64MultiArray

        self._message = SerializedMessage(Float64MultiArray(data=[0.0] * n), arrays=("data",))
        self._data = self._message.values["data"]
        self._scale = None if scale is None else np.asarray(scale, dtype=float)   # efforts = scale τ

    def native_buffer(self):
        """(the serialized message's bytearray, byte offset of its data values, the scale or None)
        for a C writer that fills and publishes the same buffer."""
        return self._message.buffer, self._message.offsets["data"], self._scale

    def __call__(self, tau):
        if self._scale is None:
            self._data[:] = tau
        else:
            np.multiply(tau, self._scale, out=self._data)
        return self._message.serialized()


def command_to_torque(model, msg):
    """std_msgs/Float64MultiArray → motor torques (n,); InputError if the size is wrong or NaN/inf."""

    return finite_vector(list(msg.data), model.n, "effort_controller/commands.data")

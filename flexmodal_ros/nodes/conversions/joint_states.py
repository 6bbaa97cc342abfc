"""sensor_msgs/JointState ↔ the controller's and the plants' states (link and ``<joint>_motor`` joints)."""
from typing import NamedTuple

import numpy as np

from ...core.errors import InputError
from ...core.fallbacks import warn_fallback
from .cdr import SerializedMessage
from .stamps import seconds_to_stamp
from ...export.convention import StateConvention
from ...control import implausible_state
import struct


MOTOR_SUFFIX = "_motor"
# What a controller status says when /joint_states lacks what the controller reads (README: "State
# interfaces the controller needs", e.g. a joint_state_broadcaster that publishes link joints only).
STATE_INTERFACES_HINT = ("the controller needs the position and velocity state interfaces of every link "
                         "joint <joint> and of every motor joint <joint>_motor (motor side, after the gear) "
                         "in /joint_states: export them from the ros2_control hardware and list them in "
                         "joint_state_broadcaster (README: State interfaces the controller needs)")


def plant_joint_state(model, t, q, qd, q_m, qd_m, link_effort, motor_effort):
    """sensor_msgs/JointState stamped at t [s]: the n link joints (URDF names; effort = spring
    torque on the link [N m or N]) then the n motor joints ``<joint>_motor`` (effort = τ_m [N m])."""
    # deferred: sensor_msgs (ROS message types, built interfaces)
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp = seconds_to_stamp(t)
    msg.name = _state_names(model.joint_names)
    msg.position = [*map(float, q), *map(float, q_m)]
    msg.velocity = [*map(float, qd), *map(float, qd_m)]
    msg.effort = [*map(float, link_effort), *map(float, motor_effort)]
    return msg


def _state_names(link_names):
    """Names a JointState must carry: each link joint, then each ``<joint>_motor``."""
    return list(link_names) + [j + MOTOR_SUFFIX for j in link_names]


class JointStateReader:
    """sensor_msgs/JointState → :class:`~flexmodal_ros.control.JointSample` (URDF order) for one model
    (finite float vectors of length n, new for each sample: ``update_state(..., validated=True)``).

    Needs position and velocity of every link joint and of every ``<joint>_motor``; other joint
    names are ignored. InputError naming the field: size mismatch, missing joints, NaN/inf, and
    with ``bounds`` = (lo, hi) over [q; q̇; q_m; q̇_m] (4n,) (the controller's
    :attr:`~flexmodal_ros.control.FailSafeController.state_bounds`; replace the attribute to
    change them) values outside them — one comparison covers NaN, inf and implausible values —
    unless they are within ``outer_bounds`` (the controller's ``plausible_bounds``: a robot
    outside its limits is still measured; the controller decides what to do with it).
    Runs once per 1 kHz controller cycle: the name → row mapping of the last name list is kept
    (a publisher sends the same names every time), and the four vectors are gathered in one step.
    :meth:`from_bytes` reads a serialized message (raw subscription: the executor builds no
    message object per sample).
    """

    def __init__(self, model, link_state="absolute", bounds=None, outer_bounds=None):
        # deferred: control.law (the control law, CasADi), for the nodes that read joint states
        # into samples; the modal server imports this module for MOTOR_SUFFIX and StateConvention
        from ...control.law import JointSample

        self.model = model
        self.bounds, self.outer_bounds = bounds, outer_bounds
        self._sample = JointSample
        self._names = None
        self._take = None
        self._layout = None
        convention = StateConvention(model, link_state)     # "deflection": exported robots
        self._to_model = convention.to_model_inplace if convention.deflection else None
        self._motor_scale = convention.motor_scale

    def __call__(self, msg):
        names, pos, vel = msg.name, msg.position, msg.velocity
        if len(pos) != len(names) or len(vel) != len(names):
            field, values = ("position", pos) if len(pos) != len(names) else ("velocity", vel)
            raise InputError(f"joint_states.{field}: {len(values)} values for {len(names)} names"
                             + (f" (no {field} state interface published); {STATE_INTERFACES_HINT}"
                                if not len(values) else ""))
        if names != self._names:
            self._take, self._names = self._gather_index(names), list(names)
        values = np.concatenate((pos, vel))[self._take]           # q, q̇, q_m, q̇_m
        self._check(values)
        n, stamp = self.model.n, msg.header.stamp
        return self._sample(stamp.sec + 1e-9 * stamp.nanosec, values[:n], values[n:2 * n],
                            values[2 * n:3 * n], values[3 * n:])

    def from_bytes(self, buf):
        """:class:`JointSample` of a serialized JointState (``bytes``), same checks and errors.

        While every byte but the stamp and the values equals the last accepted message's (same
        sender, names and sizes) the stamp and values are read in place; otherwise the message is
        deserialized and read as above, and the byte layout of the new message is learned.
        """
        layout = self._layout
        if layout is not None and layout.matches(buf):
            values = np.frombuffer(buf, float, layout.count, layout.start)[layout.take]
            self._check(values)
            sec, nanosec = layout.stamp(buf)
            n = self.model.n
            return self._sample(sec + 1e-9 * nanosec, values[:n], values[n:2 * n], values[2 * n:3 * n],
                                values[3 * n:])
        # deferred: rclpy
        from rclpy.serialization import deserialize_message
        # deferred: sensor_msgs (ROS message types, built interfaces)
        from sensor_msgs.msg import JointState

        try:
            msg = deserialize_message(buf, JointState)
        except RuntimeError as exc:               # rclpy's RMWError: not a valid serialized JointState
            raise InputError(f"joint_states: cannot deserialize {len(buf)} bytes ({exc})") from None
        sample = self(msg)
        self._layout = _JointStateLayout.learn(msg, buf, self._take)
        return sample

    def native_layout(self):
        """:class:`ByteLayout` of the sender's messages that :meth:`from_bytes` reads in place
        (None until one is learned, or when it cannot be used), for a C reader."""
        layout = self._layout
        if layout is None:
            return None
        if layout.native is None:
            pattern = bytearray(layout.size)
            for a, b, constant in layout.regions:
                pattern[a:b] = constant
            layout.native = ByteLayout(layout.size, tuple((a, b) for a, b, _ in layout.regions), bytes(pattern),
                                       layout.stamp_at, layout.start, layout.take, self._motor_scale)
        return layout.native

    def _gather_index(self, names):
        """Index into [position; velocity] of q, q̇, q_m, q̇_m; InputError naming missing joints."""
        index = {name: i for i, name in enumerate(names)}
        links = list(self.model.joint_names)
        motors = [j + MOTOR_SUFFIX for j in links]
        missing = [j for j in links + motors if j not in index]
        if missing:
            raise InputError(f"joint_states.name: missing the position and velocity state interfaces of "
                             f"{', '.join(missing)}; {STATE_INTERFACES_HINT}")
        m = len(names)
        rows = [[index[j] + offset for j in group] for group, offset in
                ((links, 0), (links, m), (motors, 0), (motors, m))]
        return np.array(rows).ravel()

    def _check(self, values):
        """InputError naming the field and joints of every NaN/inf in the gathered ``values`` (with
        the hint on state interfaces), or with ``bounds`` of the first value outside them (after a
        deflection-convention sample is converted to the model's, in place: NaN stays NaN). With
        bounds one comparison covers NaN (its comparisons are false), ±inf and implausible values."""
        if self._to_model is not None:
            self._to_model(values)
        bounds = self.bounds
        if bounds is None:
            if np.isfinite(values).all():
                return
        elif ((values >= bounds[0]) & (values <= bounds[1])).all():
            return
        outer = self.outer_bounds
        if outer is not None and ((values >= outer[0]) & (values <= outer[1])).all():
            return
        if not np.isfinite(values).all():
            raise InputError(self._nonfinite(values))
        raise InputError(implausible_state(self.model, values, outer if outer is not None else bounds))

    def _nonfinite(self, values):
        """Error text naming the field and joints of every NaN/inf in gathered ``values``."""
        n = self.model.n
        bad = {}
        for k in np.flatnonzero(~np.isfinite(values)):
            field = "velocity" if (k // n) % 2 else "position"
            bad.setdefault(field, []).append(self.model.joint_names[k % n] + (MOTOR_SUFFIX if k >= 2 * n else ""))
        listed = "; ".join(f"joint_states.{field}: NaN or inf for {', '.join(joints)}" for field, joints in bad.items())
        return (f"{listed} (joint_state_broadcaster publishes NaN for a state interface the hardware does "
                f"not export); {STATE_INTERFACES_HINT}")


class ByteLayout(NamedTuple):
    """A learned JointState layout for C (:meth:`JointStateReader.native_layout`): message
    ``size`` [bytes]; ``regions`` ((a, b),) ×3 whose bytes must equal ``pattern``'s; int32 sec +
    uint32 nanosec of the stamp at ``stamp_at``; [q; q̇; q_m; q̇_m] = the float64 values at
    ``values_at`` + 8 × ``gather`` (4n), then, with ``motor_scale`` (W twice, deflection
    convention): q, q̇ += the motor values, and the motor values ×= motor_scale."""
    size: int
    regions: tuple
    pattern: bytes
    stamp_at: int
    values_at: int
    gather: np.ndarray
    motor_scale: np.ndarray | None


def _no_layout(why):
    """None (no in-place layout for this sender's JointState), after one warning saying why."""
    warn_fallback("flexmodal_ros.nodes.conversions", "reading JointState stamps and values in place", why,
                  "every message from this sender is deserialized by rclpy", "one deserialization per message",
                  stacklevel=3)
    return None


class _JointStateLayout:
    """Where stamp, positions and velocities sit in one sender's serialized JointState, and the
    bytes that must not change for that to hold (everything else but the effort values)."""

    def __init__(self, size, regions, stamp_at, start, count, take):

        self.size, self.regions, self.start, self.count, self.take = size, regions, start, count, take
        self._stamp, self.stamp_at = struct.Struct("=iI"), stamp_at
        self.native = None                  # its ByteLayout, made when first asked for

    @classmethod
    def learn(cls, msg, buf, take):
        """Layout of ``buf`` (the serialization of ``msg``, whose fields are overwritten here) from
        rmw's serialization of the same message with marker values (:class:`SerializedMessage`);
        None when it cannot be used (then every message is deserialized)."""
        m = len(msg.name)
        try:
            probe = SerializedMessage(msg, arrays=("position", "velocity"), stamps=("header.stamp",))
        except RuntimeError:          # a marker also occurs in the names or frame_id
            return _no_layout("a marker value of the layout probe occurs in the names or frame_id")
        at = probe.offsets
        s0, p0, v0 = at["header.stamp"], at["position"], at["velocity"]
        if len(probe.serialized()) != len(buf) or (v0 - p0) % 8 or not s0 + 8 <= p0 < v0:
            return _no_layout("the probe's serialization does not line up with the message")
        edges = ((0, s0), (s0 + 8, p0), (p0 + 8 * m, v0))
        regions = tuple((a, b, bytes(buf[a:b])) for a, b in edges)
        shift = (v0 - p0) // 8                        # velocity k sits at float index shift + k
        gather = np.where(take >= m, take - m + shift, take)
        return cls(len(buf), regions, s0, p0, shift + m, gather)

    def matches(self, buf):
        (a0, b0, k0), (a1, b1, k1), (a2, b2, k2) = self.regions
        return len(buf) == self.size and buf[a0:b0] == k0 and buf[a1:b1] == k1 and buf[a2:b2] == k2

    def stamp(self, buf):
        """(sec, nanosec) of header.stamp."""
        return self._stamp.unpack_from(buf, self.stamp_at)


def joint_state_to_sample(model, msg):
    """One sensor_msgs/JointState → JointSample (see :class:`JointStateReader`, for repeated use)."""
    return JointStateReader(model)(msg)


class JointStateWriter:
    """Plant state → serialized sensor_msgs/JointState of :func:`plant_joint_state` (same names,
    fields and units) for ``Publisher.publish``; and the matching rosgraph_msgs/Clock."""

    def __init__(self, model):
        # deferred: rosgraph_msgs (ROS message types, built interfaces)
        from rosgraph_msgs.msg import Clock

        n = model.n
        zeros = np.zeros(n)
        self._state = SerializedMessage(plant_joint_state(model, 0.0, *[zeros] * 6),
                                        arrays=("position", "velocity", "effort"), stamps=("header.stamp",))
        self._clock = SerializedMessage(Clock(), stamps=("clock",))
        self._fields = [self._state.values[f].reshape(2, n) for f in ("position", "velocity", "effort")]

    def __call__(self, t, q, qd, q_m, qd_m, link_effort, motor_effort):
        """(JointState bytes, Clock bytes) stamped at simulation time t [s]."""
        for view, link, motor in zip(self._fields, (q, qd, link_effort), (q_m, qd_m, motor_effort)):
            view[0], view[1] = link, motor
        self._state.set_time("header.stamp", t)
        self._clock.set_time("clock", t)
        return self._state.serialized(), self._clock.serialized()

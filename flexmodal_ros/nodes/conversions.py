"""Conversions between flexmodal_interfaces / ROS messages and the ROS-free core types.

The only place where message fields are read or filled; nodes call these functions and the core
never sees a message.
"""
import array
from typing import NamedTuple

import numpy as np

from ..control.excitation import MotorExcitation
from ..core.errors import InputError
from ..core.validation import finite_vector
from ..flexible_joint.modal import configuration_from_names

# --- modal analysis (ComputeModalParameters, ComputeModalMap, ModalParameters) -----------------

def _modal_overrides(model, request):
    """Per-request overrides (gains, tool, wrench) of a Compute* request → core model."""
    from ..robot.params import make_tool
    from ..flexible_joint.modal import configuration_from_names
    from ..robot.model import with_overrides

    gains = {}
    for field in ("kp", "kd"):
        values = list(getattr(request, field))
        if len(values) > 1:
            values = configuration_from_names(model, list(request.joint_names), values, field)
        gains[field] = values if len(values) else None
    tool = None
    if request.override_tool:
        tool = make_tool({"mass": float(request.tool_mass), "com": list(request.tool_com),
                          "inertia": [list(request.tool_inertia[3 * r:3 * r + 3]) for r in range(3)]}, "tool", InputError)
    wrench = list(request.wrench) if request.override_wrench else None
    return with_overrides(model, kp=gains["kp"], kd=gains["kd"], tool=tool, wrench=wrench)


def modal_request_to_core(model, request):
    """ComputeModalParameters.Request → (model with overrides, q in URDF order)."""
    from ..flexible_joint.modal import configuration_from_names, plain_configuration

    if not (request.joint_names or len(request.kp) or len(request.kd) or request.override_tool
            or request.override_wrench):       # the usual request: all joints in URDF order, no overrides
        q = plain_configuration(model, request.positions)
        if q is not None:
            return model, q                    # else the general path below names the problem
    q = configuration_from_names(model, list(request.joint_names), list(request.positions))
    return _modal_overrides(model, request), q


def sampled_request_options(request):
    """ComputeModalParameters.Request → (controller_rate_hz or None for the continuous law, hold)."""
    if request.controller_rate_hz == 0.0 and not request.hold:
        return None, "zoh"                  # the usual request: continuous law, checked in one step
    from ..flexible_joint.sampled import check_hold
    from ..core.validation import finite_scalar

    rate = finite_scalar(request.controller_rate_hz, "controller_rate_hz")
    if rate < 0:
        raise InputError(f"controller_rate_hz: must be > 0 Hz (or 0 = continuous law), got {rate:g}")
    return (rate or None), check_hold(request.hold or "zoh")


def modal_map_request_to_core(model, request):
    """ComputeModalMap.Request → (model with overrides, configurations (m, n) in URDF order)."""
    from ..flexible_joint.modal import configuration_from_names

    m = int(request.num_configurations)
    width = len(request.joint_names) or model.n
    positions = list(request.positions)
    if m < 1:
        raise InputError("num_configurations: must be >= 1")
    if len(positions) != m * width:
        raise InputError(f"positions: expected num_configurations x {width} = {m * width} values, "
                         f"got {len(positions)}")
    qs = [configuration_from_names(model, list(request.joint_names),
                                   positions[i * width:(i + 1) * width]) for i in range(m)]
    return _modal_overrides(model, request), qs


def _doubles(values) -> array.array:
    """A float64 array (any shape, row-major) as the array.array('d') a rosidl float64[] field
    takes as is (a list is checked element by element: 6 µs for 196 mode-shape entries)."""
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=float).tobytes())
    return out


def modal_result_to_msg(result, joint_names, stamp=None, warnings=(), msg=None):
    """core ModalResult → flexmodal_interfaces/ModalParameters (``stamp``: builtin_interfaces/Time;
    ``warnings``: notes on the result, e.g. from :func:`flexmodal_ros.flexible_joint.modal.limit_warnings`);
    ``msg``: a new (default) message to fill, e.g. a response's field, instead of building
    another one."""
    from flexmodal_interfaces.msg import ModalParameters

    msg = ModalParameters() if msg is None else msg
    if stamp is not None:
        msg.stamp = stamp
    msg.joint_names = list(joint_names)
    msg.positions = _doubles(result.q)
    msg.motor_equilibrium = _doubles(result.motor_equilibrium)
    msg.num_modes = result.num_modes
    msg.frequencies_hz = _doubles(result.frequencies_hz)
    msg.damping_ratios = _doubles(result.damping_ratios)
    msg.eigenvalues_real = _doubles(result.eigenvalues.real)
    msg.eigenvalues_imag = _doubles(result.eigenvalues.imag)
    msg.mode_shape_rows, msg.mode_shape_cols = result.mode_shapes.shape
    msg.mode_shapes_real = _doubles(result.mode_shapes.real)
    msg.mode_shapes_imag = _doubles(result.mode_shapes.imag)
    msg.real_eigenvalues = _doubles(result.real_eigenvalues)
    msg.stable = bool(result.stable)
    msg.stability = result.stability
    msg.unstable_eigenvalues_real = _doubles(result.unstable_eigenvalues.real)
    msg.unstable_eigenvalues_imag = _doubles(result.unstable_eigenvalues.imag)
    msg.warnings = list(warnings)
    return msg


def modal_map_to_response(mmap, response, stamp=None, model=None):
    """core ModalMap → ComputeModalMap.Response fields (results, mode_order, crossings); with
    ``model``, each result carries its URDF-limit warnings."""
    from ..flexible_joint.modal import limit_warnings

    response.results = [modal_result_to_msg(r, mmap.joint_names, stamp,
                                            () if model is None else limit_warnings(model, r.q, "positions"))
                        for r in mmap.results]
    response.mode_order = [] if mmap.mode_order is None else mmap.mode_order.ravel().tolist()
    response.crossings = [c.description for c in mmap.crossings]
    return response


def joint_state_to_configuration(model, msg, link_state="absolute"):
    """sensor_msgs/JointState → link configuration q in URDF order (other joints are ignored).
    ``link_state="deflection"`` (exported robots): q = position(<joint>) + position(<joint>_motor)."""
    from ..export.convention import StateConvention
    from ..flexible_joint.modal import configuration_from_names

    convention = StateConvention(model, link_state)
    names, pos = list(msg.name), list(msg.position)
    if len(names) != len(pos):
        raise InputError(f"joint_states: {len(names)} names but {len(pos)} positions")
    needed = list(model.joint_names) + ([j + MOTOR_SUFFIX for j in model.joint_names] if convention.deflection else [])
    missing = [j for j in needed if j not in names]
    if missing:
        raise InputError(f"joint_states: missing joint(s) {missing}")
    link = configuration_from_names(model, list(model.joint_names), [pos[names.index(j)] for j in model.joint_names])
    if not convention.deflection:
        return link
    motor = finite_vector([pos[names.index(j + MOTOR_SUFFIX)] for j in model.joint_names], model.n, "positions")
    return convention.positions_to_model(link, motor)[0]


# --- identification (IdentifyJointParameters) ---------------------------------------------------

def identification_request_to_core(model, request):
    """IdentifyJointParameters.Request → keyword arguments of
    :func:`flexmodal_ros.identification.inverse_eigen.identify` except the node defaults: ``data`` (ModalData),
    ``unknowns``, and ``objective``/``starts``/``k_max``/``d_max`` (None = node default), ``seed``,
    ``noise`` (σ_f/f, σ_ζ; a zero field takes the core default). Sizes are checked against the
    identification maxima before anything is built from them."""
    from ..identification.inverse_eigen import NOISE_DAMPING, NOISE_FREQUENCY_REL, check_sizes, modal_data_arrays
    from ..flexible_joint.modal import configuration_from_names

    m = int(request.num_configurations)
    width = len(request.joint_names) or model.n
    if m < 1:
        raise InputError("num_configurations: must be >= 1 (no measurements given)")
    check_sizes(m, len(request.frequencies_hz))
    positions = list(request.positions)
    counts = [int(c) for c in request.modes_per_configuration]
    freq, zeta = list(request.frequencies_hz), list(request.damping_ratios)
    if len(positions) != m * width:
        raise InputError(f"positions: expected num_configurations x {width} = {m * width} values, "
                         f"got {len(positions)}")
    if len(counts) != m:
        raise InputError(f"modes_per_configuration: expected {m} entries, got {len(counts)}")
    if len(freq) != sum(counts) or len(zeta) != sum(counts):
        raise InputError(f"frequencies_hz/damping_ratios: expected sum(modes_per_configuration) = "
                         f"{sum(counts)} values each, got {len(freq)} and {len(zeta)}")
    index = list(request.mode_indices)
    if index and len(index) != sum(counts):
        raise InputError(f"mode_indices: expected empty or {sum(counts)} entries, got {len(index)}")
    qs = [configuration_from_names(model, list(request.joint_names),
                                   positions[i * width:(i + 1) * width]) for i in range(m)]
    data = modal_data_arrays(np.array(qs), np.repeat(np.arange(m), counts), freq, zeta, index or None)
    noise = (float(request.frequency_noise) or NOISE_FREQUENCY_REL, float(request.damping_noise) or NOISE_DAMPING)
    return dict(data=data, unknowns=list(request.unknowns) or None,
                objective=request.objective or None, starts=int(request.starts) or None,
                seed=int(request.seed), k_max=float(request.k_max) or None,
                d_max=float(request.d_max) or None, noise=noise)


def identification_result_to_response(result, response):
    """core IdentificationResult → IdentifyJointParameters.Response or Identify.Result (filled in
    place; the two have the same fields)."""
    response.success = bool(result.success)
    response.message = "; ".join(result.warnings) if result.success else result.message
    response.warnings = list(result.warnings)
    response.residual_noise_ratio = float(result.residual_noise_ratio)
    response.joint_names = list(result.joint_names)
    response.stiffness = result.stiffness.tolist()
    response.link_damping = result.link_damping.tolist()
    response.motor_damping = result.motor_damping.tolist()
    response.objective = float(result.objective)
    response.residuals = result.residuals.ravel().tolist()
    response.standard_deviations = [float(s) for s in result.standard_deviations]
    response.unknown_names = list(result.unknown_names)
    response.unidentifiable = list(result.unidentifiable)
    response.jacobian_rank = int(result.jacobian_rank)
    response.jacobian_condition = float(result.jacobian_condition)
    return response


# --- controller and simulator (JointState, JointTrajectory, Float64MultiArray) -----------------

MOTOR_SUFFIX = "_motor"
# What a controller status says when /joint_states lacks what the controller reads (README: "State
# interfaces the controller needs", e.g. a joint_state_broadcaster that publishes link joints only).
STATE_INTERFACES_HINT = ("the controller needs the position and velocity state interfaces of every link "
                         "joint <joint> and of every motor joint <joint>_motor (motor side, after the gear) "
                         "in /joint_states: export them from the ros2_control hardware and list them in "
                         "joint_state_broadcaster (README: State interfaces the controller needs)")


def stamp_to_seconds(stamp):
    """builtin_interfaces/Time → float seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def split_seconds(t):
    """float seconds (>= 0) → (sec, nanosec) of builtin_interfaces/Time, rounded to the nanosecond."""
    return divmod(int(round(t * 1e9)), 1_000_000_000)


def seconds_to_stamp(t):
    """float seconds (>= 0) → builtin_interfaces/Time."""
    from builtin_interfaces.msg import Time

    sec, nanosec = split_seconds(t)
    return Time(sec=sec, nanosec=nanosec)


def plant_joint_state(model, t, q, qd, q_m, qd_m, link_effort, motor_effort):
    """sensor_msgs/JointState stamped at t [s]: the n link joints (URDF names; effort = spring
    torque on the link [N m or N]) then the n motor joints ``<joint>_motor`` (effort = τ_m [N m])."""
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
    """sensor_msgs/JointState → :class:`~flexmodal_ros.control.law.JointSample` (URDF order) for one model
    (finite float vectors of length n, new for each sample: ``update_state(..., validated=True)``).

    Needs position and velocity of every link joint and of every ``<joint>_motor``; other joint
    names are ignored. InputError naming the field: size mismatch, missing joints, NaN/inf, and
    with ``bounds`` = (lo, hi) over [q; q̇; q_m; q̇_m] (4n,) (the controller's
    :attr:`~flexmodal_ros.control.law.FailSafeController.state_bounds`; replace the attribute to
    change them) values outside them — one comparison covers NaN, inf and implausible values.
    Runs once per 1 kHz controller cycle: the name → row mapping of the last name list is kept
    (a publisher sends the same names every time), and the four vectors are gathered in one step.
    :meth:`from_bytes` reads a serialized message (raw subscription: the executor builds no
    message object, ~20 µs less per sample).
    """

    def __init__(self, model, link_state="absolute", bounds=None):
        from ..control.law import JointSample
        from ..export.convention import StateConvention

        self.model = model
        self.bounds = bounds
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
        from rclpy.serialization import deserialize_message
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
        if not np.isfinite(values).all():
            raise InputError(self._nonfinite(values))
        from ..control.law import implausible_state
        raise InputError(implausible_state(self.model, values, bounds))

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


class _JointStateLayout:
    """Where stamp, positions and velocities sit in one sender's serialized JointState, and the
    bytes that must not change for that to hold (everything else but the effort values)."""

    def __init__(self, size, regions, stamp_at, start, count, take):
        import struct

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
            return None
        at = probe.offsets
        s0, p0, v0 = at["header.stamp"], at["position"], at["velocity"]
        if len(probe.serialized()) != len(buf) or (v0 - p0) % 8 or not s0 + 8 <= p0 < v0:
            return None
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


def max_trajectory_bytes(n, points):
    """Largest serialized trajectory_msgs/JointTrajectory that can hold ``points`` waypoints of
    ``n`` joints with positions, velocities, accelerations and efforts (CDR: four sequences of
    n float64 with their lengths and alignment, the duration) plus 64 kiB of header and names:
    a bigger message is refused before it is deserialized."""
    return 65536 + points * (4 * (8 + 8 * n) + 8)


def trajectory_to_core(model, msg, max_points=None):
    """trajectory_msgs/JointTrajectory → (times [s] (m,), positions (m, n) in URDF order, start
    time [s] or None when header.stamp is zero = "start now"). InputError naming the field for
    unknown/missing/duplicate joint names, empty points, wrong position counts, more than
    ``max_points`` waypoints."""
    if max_points is not None and len(msg.points) > max_points:
        raise InputError(f"points: {len(msg.points)} waypoints, more than max_trajectory_points ({max_points})")
    from ..core.validation import shown, shown_names

    names = list(msg.joint_names)
    unknown = [j for j in names if j not in model.joint_names]
    if unknown:
        raise InputError(f"joint_names: unknown joint(s) {shown_names(unknown)} (robot {model.name} has "
                         f"{', '.join(model.joint_names)})")
    if len(set(names)) != len(names) or len(names) != model.n:
        raise InputError(f"joint_names: need each of the {model.n} joints exactly once, got {shown(names)}")
    points = msg.points
    if not points:
        raise InputError("points: the trajectory has no waypoints")
    sizes = np.array([len(p.positions) for p in points])
    if (sizes != model.n).any():
        k = int(np.argmax(sizes != model.n))
        raise InputError(f"points[{k}].positions: expected {model.n} values, got {sizes[k]}")
    order = [names.index(j) for j in model.joint_names]
    positions = np.array([p.positions for p in points], dtype=float)[:, order]
    times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in points])
    start = stamp_to_seconds(msg.header.stamp)
    return times, positions, (start if start > 0 else None)


def core_to_trajectory(joint_names, times, positions, start_time=None):
    """(times [s], positions (m, n), start time [s] or None) → trajectory_msgs/JointTrajectory."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
    msg.joint_names = list(joint_names)
    if start_time is not None:
        msg.header.stamp = seconds_to_stamp(start_time)
    for t, pos in zip(times, positions):
        sec, nanosec = split_seconds(float(t))
        msg.points.append(JointTrajectoryPoint(positions=[float(v) for v in pos],
                                               time_from_start=Duration(sec=sec, nanosec=nanosec)))
    return msg


class SerializedMessage:
    """A message serialized once by the middleware, then rewritten in place and published as bytes
    (``Publisher.publish`` accepts serialized messages): a 1 kHz publisher skips building and
    converting a message object every period.

    ``msg`` fixes everything but the rewritten fields: its float64[] fields named in ``arrays`` and
    builtin_interfaces/Time fields named in ``stamps`` (dotted paths) are first set to marker
    values, whose unique byte positions in rmw's own serialization locate the fields; the
    encoding (alignment, endianness) therefore stays the middleware's. ``values[path]``: writable
    float64 view of an array field; ``offsets[path]``: byte offset of an array or time field;
    :meth:`set_time` writes a time field; :meth:`serialized` returns the bytes to publish.
    """

    def __init__(self, msg, arrays=(), stamps=()):
        import struct

        from builtin_interfaces.msg import Time
        from rclpy.serialization import serialize_message

        self._time = struct.Struct("=iI")          # int32 sec, uint32 nanosec
        for k, path in enumerate(arrays):
            _set_path(msg, path, [1e15 + 1e6 * k + i + 0.25 for i in range(len(_get_path(msg, path)))])
        for k, path in enumerate(stamps):
            _set_path(msg, path, Time(sec=2_000_000_011 - k, nanosec=987_654_321 - k))
        self._buffer = bytearray(serialize_message(msg))
        self.values, self.offsets = {}, {}
        for path in arrays:
            marker = np.array(_get_path(msg, path), dtype=float)
            self.offsets[path] = self._locate(marker.tobytes(), path)
            self.values[path] = np.frombuffer(self._buffer, float, marker.size, self.offsets[path])
            self.values[path][:] = 0.0
        for path in stamps:
            t = _get_path(msg, path)
            self.offsets[path] = self._locate(self._time.pack(t.sec, t.nanosec), path)

    def _locate(self, marker, path):
        at = self._buffer.find(marker)
        if at < 0 or self._buffer.find(marker, at + 1) >= 0:
            raise RuntimeError(f"SerializedMessage: field {path} not found exactly once in the serialized message")
        return at

    def set_time(self, path, t):
        """Write time t [s] (>= 0) into the Time field ``path``."""
        self._time.pack_into(self._buffer, self.offsets[path], *split_seconds(t))

    @property
    def buffer(self):
        """The message's serialized bytes, rewritten in place (a bytearray)."""
        return self._buffer

    def serialized(self):
        """The current message as bytes (a copy: safe to publish while the fields are rewritten)."""
        return bytes(self._buffer)


def _get_path(msg, path):
    for name in path.split("."):
        msg = getattr(msg, name)
    return msg


def _set_path(msg, path, value):
    *parents, name = path.split(".")
    setattr(_get_path(msg, ".".join(parents)) if parents else msg, name, value)


class TorqueCommandWriter:
    """Motor torques (n,) [N m] → serialized std_msgs/Float64MultiArray (URDF order,
    gz_ros2_control convention; empty layout) for ``Publisher.publish``. ``scale`` (n,): publish
    scale·τ instead (the motor-joint efforts W τ_m of exported robots, export/convention.py)."""

    def __init__(self, n, scale=None):
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


class JointStateWriter:
    """Plant state → serialized sensor_msgs/JointState of :func:`plant_joint_state` (same names,
    fields and units) for ``Publisher.publish``; and the matching rosgraph_msgs/Clock."""

    def __init__(self, model):
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


def command_to_torque(model, msg):
    """std_msgs/Float64MultiArray → motor torques (n,); InputError if the size is wrong or NaN/inf."""
    from ..core.validation import finite_vector

    return finite_vector(list(msg.data), model.n, "effort_controller/commands.data")


# --- polynomial eigenpairs (ExpandModalParameters) -----------------------------------------------

def expansion_request_to_core(model, request):
    """ExpandModalParameters.Request → dict(q (URDF order), order (None = node default), modes
    (1-based list or None), use_for_live, output_path (None if empty))."""
    from ..flexible_joint.modal import configuration_from_names

    q = configuration_from_names(model, list(request.joint_names), list(request.positions))
    modes = [int(m) for m in request.modes]
    return {"q": q, "order": int(request.order) or None, "modes": modes or None,
            "use_for_live": bool(request.use_for_live), "output_path": request.output_path or None}


def expansion_to_response(poly, result, joint_names, response, notes=(), stamp=None):
    """core ModalPolynomial (+ the exact ModalResult at its expansion point) →
    ExpandModalParameters.Response fields (filled in place)."""
    response.warnings = [str(n) for n in notes]
    response.result = modal_result_to_msg(result, joint_names, stamp)
    response.order = int(poly.order)
    response.num_parameters = len(poly.parameter_names)
    response.num_terms = int(poly.num_terms)
    response.mode_numbers = [int(m) for m in poly.mode_numbers]
    response.trust_radius = float(poly.trust_radius)
    response.expansion_time_s = float(poly.expansion_time_s)
    response.multi_indices = [int(e) for e in poly.multi_indices.exponents.ravel()]
    response.eigenvalue_coefficients_real = poly.eigenvalues.real.ravel().tolist()
    response.eigenvalue_coefficients_imag = poly.eigenvalues.imag.ravel().tolist()
# --- flexible links (ComputeLinkModes) ---------------------------------------------------------

def link_modes_request_to_core(arm, request):
    """ComputeLinkModes.Request → (arm with the request's joint model / thickness, q in URDF order,
    model, num_modes, regime); empty / zero fields take the defaults documented in the .srv."""
    from ..links import with_joints, with_thickness
    from ..flexible_joint.modal import configuration_from_names

    q = configuration_from_names(arm, list(request.joint_names), list(request.positions))
    if request.thickness_factor != 0.0:
        arm = with_thickness(arm, request.thickness_factor)
    if request.joint_model and request.joint_model != arm.joint_model:
        arm = with_joints(arm, request.joint_model)
    num_modes = int(request.num_modes) or 10
    return arm, q, request.model or "timoshenko", num_modes, request.regime or "full"


def link_modes_to_response(arm, result, regime, response):
    """core LinkModes → ComputeLinkModes.Response (fields as documented in the .srv)."""
    from ..links.solve import mode_stations

    points, shapes = mode_stations(arm, result.q, result, result.station_x)
    response.model, response.joint_model, response.regime = result.model, result.joint_model, regime
    response.thickness_factor = float(result.thickness_factor)
    response.link_names = list(arm.link_names)
    response.num_modes = result.num_modes
    response.frequencies_hz = result.frequencies_hz.tolist()
    response.axial_fractions = result.axial_fractions.tolist()
    response.above_cutoff = [bool(v) for v in result.above_cutoff]
    response.singular_ratios = result.singular_ratios.tolist()
    response.station_x = result.station_x.tolist()
    response.station_positions = points.reshape(-1).tolist()
    response.mode_shape_rows, response.mode_shape_cols = shapes.shape[0] * shapes.shape[1] * 2, result.num_modes
    response.mode_shapes = shapes.reshape(-1, result.num_modes).reshape(-1).tolist()
    return response
# --- closed-chain robots (flexmodal_ros.constrained; ComputeModalParameters / ComputeModalMap) --

def closed_chain_values(robot, joint_names, values, field="positions"):
    """Configuration values of a closed-chain robot from a request: with empty ``joint_names``
    either one value per tree joint (Pinocchio order) or per actuated joint; with names, either
    every joint or exactly the actuated joints, each once (reordered to the robot's order)."""
    from ..core.validation import finite_vector

    values = finite_vector(values, None, field)
    names = list(joint_names)
    if not names:
        if values.size not in (robot.n, robot.actuated.size):
            raise InputError(f"{field}: expected {robot.actuated.size} actuated-joint values "
                             f"({', '.join(robot.actuated_names)}) or {robot.n} values, got {values.size}")
        return values
    for order in (robot.joint_names, robot.actuated_names):
        if sorted(names) == sorted(order) and len(set(names)) == len(names):
            if values.size != len(names):
                raise InputError(f"{field}: expected {len(names)} values (one per joint name), "
                                 f"got {values.size}")
            return values[[names.index(j) for j in order]]
    raise InputError(f"joint_names: name every joint {list(robot.joint_names)} or exactly the "
                     f"actuated ones {list(robot.actuated_names)}, each once; got {names}")


def _closed_chain_overrides(robot, request):
    """Gains (0, 1 or one per actuated joint, actuated order), tool and wrench of a request."""
    from ..robot.params import make_tool
    from ..constrained.closed_chain import with_robot_overrides

    gains = {f: (list(getattr(request, f)) or None) for f in ("kp", "kd")}
    tool = None
    if request.override_tool:
        tool = make_tool({"mass": float(request.tool_mass), "com": list(request.tool_com),
                          "inertia": [list(request.tool_inertia[3 * r:3 * r + 3]) for r in range(3)]},
                         "tool", InputError)
    wrench = list(request.wrench) if request.override_wrench else None
    return with_robot_overrides(robot, kp=gains["kp"], kd=gains["kd"], tool=tool, wrench=wrench)


def closed_chain_request_to_core(robot, request):
    """ComputeModalParameters.Request → (robot with overrides, configuration values)."""
    values = closed_chain_values(robot, list(request.joint_names), list(request.positions))
    return _closed_chain_overrides(robot, request), values


def closed_chain_map_request_to_core(robot, request):
    """ComputeModalMap.Request → (robot with overrides, list of configuration values)."""
    m = int(request.num_configurations)
    positions = list(request.positions)
    if m < 1:
        raise InputError("num_configurations: must be >= 1")
    if len(positions) % m:
        raise InputError(f"positions: {len(positions)} values do not split into "
                         f"num_configurations = {m} equal rows")
    width = len(positions) // m
    rows = [closed_chain_values(robot, list(request.joint_names), positions[i * width:(i + 1) * width])
            for i in range(m)]
    return _closed_chain_overrides(robot, request), rows


def closed_chain_result_to_msg(robot, modes, point, stamp=None):
    """ConstrainedModes + SetPoint → ModalParameters (:func:`modal_result_to_msg`):
    ``joint_names``/``positions`` every tree joint, ``motor_equilibrium`` the actuated joints'
    q_m^d, mode-shape rows [q; q_m]."""
    from ..flexible_joint.modal import ModalResult

    result = ModalResult(**modes.mode_fields(), q=point.q, motor_equilibrium=point.motor)
    return modal_result_to_msg(result, robot.joint_names, stamp)


def closed_chain_map_to_response(robot, mmap, points, response, stamp=None):
    """ModalMap + set-points → ComputeModalMap.Response fields."""
    response.results = [closed_chain_result_to_msg(robot, r, p, stamp)
                        for r, p in zip(mmap.results, points)]
    response.mode_order = [] if mmap.mode_order is None else mmap.mode_order.ravel().tolist()
    response.crossings = [c.description for c in mmap.crossings]
    return response


def joint_state_to_closed_chain(robot, msg):
    """sensor_msgs/JointState → every tree joint's position if all are present, else the actuated
    joints' (other joints are ignored)."""
    names, pos = list(msg.name), list(msg.position)
    if len(names) != len(pos):
        raise InputError(f"joint_states: {len(names)} names but {len(pos)} positions")
    for order in (robot.joint_names, robot.actuated_names):
        if all(j in names for j in order):
            return closed_chain_values(robot, list(order), [pos[names.index(j)] for j in order],
                                       "joint_states")
    missing = [j for j in robot.actuated_names if j not in names]
    raise InputError(f"joint_states: missing joint(s) {missing}")
# --- modal test (RunModalTest) -----------------------------------------------------------------

def serialized_stamp_ns(buf):
    """header.stamp [ns] of a CDR-serialized std_msgs/Header-first message (e.g. JointState): the
    stamp's sec (int32) and nanosec (uint32) follow the 4-byte encapsulation header, whose second
    byte gives the byte order (1 = little endian)."""
    import struct

    buf = bytes(buf)
    if len(buf) < 12:
        raise InputError(f"joint_states: {len(buf)} bytes is no serialized JointState")
    sec, nanosec = struct.unpack_from("<iI" if buf[1] == 1 else ">iI", buf, 4)
    return sec * 1_000_000_000 + nanosec


def modal_test_request_to_core(model, request):
    """RunModalTest.Request → dict(duration, trigger_impulse, impulse_service, wrench,
    impulse_duration, pre_trigger, channels, method, output_dir, model); InputError naming the field."""
    from ..robot.params import Tool
    from ..robot.model import with_overrides
    from ..oma.estimators import METHODS
    from ..core.validation import finite_scalar, finite_vector

    duration = finite_scalar(request.duration, "duration")
    pre = finite_scalar(request.pre_trigger, "pre_trigger")
    if duration <= 0:
        raise InputError(f"duration: must be > 0 s, got {duration:g}")
    if pre < 0 or (request.trigger_impulse and pre >= duration):
        raise InputError(f"pre_trigger: must be >= 0 s and shorter than duration, got {pre:g}")
    wrench = finite_vector(list(request.wrench), 6, "wrench")
    impulse_duration = finite_scalar(request.impulse_duration, "impulse_duration")
    if request.trigger_impulse and (impulse_duration <= 0 or not wrench.any()):
        raise InputError("wrench/impulse_duration: a triggered impulse needs a nonzero wrench and a duration > 0 s")
    method = request.method or "era"
    if method not in METHODS:
        raise InputError(f"method: must be one of {', '.join(METHODS)}, got {method!r}")
    channels = list(request.channels) or [j + MOTOR_SUFFIX for j in model.joint_names]
    target = model
    if request.override_tool:
        target = with_overrides(model, tool=Tool.point_mass(finite_scalar(request.tool_mass, "tool_mass")))
    return dict(duration=duration, trigger_impulse=bool(request.trigger_impulse),
                impulse_service=request.impulse_service, wrench=wrench, impulse_duration=impulse_duration,
                pre_trigger=pre, channels=channels, method=method, output_dir=request.output_dir, model=target)


def modal_test_result_to_response(result, response, bag_path):
    """core OmaResult (with a comparison) → RunModalTest.Response fields (filled in place)."""
    ident = result.identified
    response.frequencies_hz = ident.frequencies_hz.tolist()
    response.damping_ratios = ident.damping_ratios.tolist()
    response.snr = ident.snr.tolist()
    response.sample_rate_hz = float(result.record.sample_rate_hz)
    response.positions = [float(v) for v in result.q]
    rows = result.comparisons[0].rows if result.comparisons else []
    response.ama_frequencies_hz = [r.ama_frequency_hz for r in rows]
    response.ama_damping_ratios = [r.ama_damping_ratio for r in rows]
    response.status = [r.status for r in rows]
    response.matched_mode = [int(r.oma_mode or 0) for r in rows]
    response.delta_frequency_hz = [float(r.delta_frequency_hz) for r in rows]
    response.delta_damping_ratio = [float(r.delta_damping) for r in rows]
    response.table = result.comparisons[0].table() if result.comparisons else ""
    response.bag_path = str(bag_path)
    response.plot_path = str(result.files.get("png", ""))
    return response



# --- motor excitation (Excite) -------------------------------------------------------------------

def excite_request_to_core(model, request):
    """Excite.Request → (MotorExcitation (start = start_time, or 0), start_now: start_time == 0)."""
    torque = configuration_from_names(model, list(request.joint_names), list(request.torque), "torque")
    start = float(request.start_time)
    if not np.isfinite(start) or start < 0:
        raise InputError(f"start_time: must be >= 0 s (0 = next cycle), got {start}")
    return (MotorExcitation(torque, start, float(request.duration), request.kind or "pulse",
                            float(request.f0_hz or 1.0), float(request.f1_hz or 100.0)), start == 0.0)

"""Conversions between flexmodal_interfaces / ROS messages and the ROS-free core types.

The only place where message fields are read or filled; nodes call these functions and the core
never sees a message. Shared module: add your own functions, do not rewrite others'.
"""
import numpy as np

from ..errors import InputError

# --- modal analysis (ComputeModalParameters, ComputeModalMap, ModalParameters) -----------------

def _modal_overrides(model, request):
    """Per-request overrides (gains, tool, wrench) of a Compute* request → core model."""
    from ..config import make_tool
    from ..modal import configuration_from_names
    from ..model import with_overrides

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
    from ..modal import configuration_from_names

    q = configuration_from_names(model, list(request.joint_names), list(request.positions))
    return _modal_overrides(model, request), q


def modal_map_request_to_core(model, request):
    """ComputeModalMap.Request → (model with overrides, configurations (m, n) in URDF order)."""
    from ..modal import configuration_from_names

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


def modal_result_to_msg(result, joint_names, stamp=None, warnings=()):
    """core ModalResult → flexmodal_interfaces/ModalParameters (``stamp``: builtin_interfaces/Time;
    ``warnings``: notes on the result, e.g. from :func:`flexmodal_ros.modal.limit_warnings`)."""
    from flexmodal_interfaces.msg import ModalParameters

    msg = ModalParameters()
    if stamp is not None:
        msg.stamp = stamp
    msg.joint_names = list(joint_names)
    msg.positions = result.q.tolist()
    msg.motor_equilibrium = result.motor_equilibrium.tolist()
    msg.num_modes = result.num_modes
    msg.frequencies_hz = result.frequencies_hz.tolist()
    msg.damping_ratios = result.damping_ratios.tolist()
    msg.eigenvalues_real = result.eigenvalues.real.tolist()
    msg.eigenvalues_imag = result.eigenvalues.imag.tolist()
    msg.mode_shape_rows, msg.mode_shape_cols = result.mode_shapes.shape
    msg.mode_shapes_real = result.mode_shapes.real.ravel().tolist()
    msg.mode_shapes_imag = result.mode_shapes.imag.ravel().tolist()
    msg.real_eigenvalues = result.real_eigenvalues.tolist()
    msg.stable = bool(result.stable)
    msg.stability = result.stability
    msg.unstable_eigenvalues_real = result.unstable_eigenvalues.real.tolist()
    msg.unstable_eigenvalues_imag = result.unstable_eigenvalues.imag.tolist()
    msg.warnings = list(warnings)
    return msg


def modal_map_to_response(mmap, response, stamp=None, model=None):
    """core ModalMap → ComputeModalMap.Response fields (results, mode_order, crossings); with
    ``model``, each result carries its URDF-limit warnings."""
    from ..modal import limit_warnings

    response.results = [modal_result_to_msg(r, mmap.joint_names, stamp,
                                            () if model is None else limit_warnings(model, r.q, "positions"))
                        for r in mmap.results]
    response.mode_order = [] if mmap.mode_order is None else mmap.mode_order.ravel().tolist()
    response.crossings = [c.description for c in mmap.crossings]
    return response


def joint_state_to_configuration(model, msg):
    """sensor_msgs/JointState → link configuration q in URDF order (other joints are ignored)."""
    from ..modal import configuration_from_names

    names, pos = list(msg.name), list(msg.position)
    if len(names) != len(pos):
        raise InputError(f"joint_states: {len(names)} names but {len(pos)} positions")
    missing = [j for j in model.joint_names if j not in names]
    if missing:
        raise InputError(f"joint_states: missing joint(s) {missing}")
    return configuration_from_names(model, list(model.joint_names),
                                    [pos[names.index(j)] for j in model.joint_names])


# --- identification (IdentifyJointParameters) ---------------------------------------------------

def identification_request_to_core(model, request):
    """IdentifyJointParameters.Request → keyword arguments of
    :func:`flexmodal_ros.identification.identify` except the node defaults: ``data`` (ModalData),
    ``unknowns``, and ``objective``/``starts``/``k_max``/``d_max`` (None = node default), ``seed``,
    ``noise`` (σ_f/f, σ_ζ; a zero field takes the core default). Sizes are checked against the
    identification maxima before anything is built from them."""
    from ..identification import NOISE_DAMPING, NOISE_FREQUENCY_REL, check_sizes, modal_data_arrays
    from ..modal import configuration_from_names

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
    """sensor_msgs/JointState → :class:`~flexmodal_ros.control.JointSample` (URDF order) for one model
    (finite float vectors of length n, new for each sample: ``update_state(..., validated=True)``).

    Needs position and velocity of every link joint and of every ``<joint>_motor``; other joint
    names are ignored. InputError naming the field: size mismatch, missing joints, NaN/inf, and
    with ``bounds`` = (lo, hi) over [q; q̇; q_m; q̇_m] (4n,) (the controller's
    :attr:`~flexmodal_ros.control.FailSafeController.state_bounds`; replace the attribute to
    change them) values outside them — one comparison covers NaN, inf and implausible values.
    Runs once per 1 kHz controller cycle: the name → row mapping of the last name list is kept
    (a publisher sends the same names every time), and the four vectors are gathered in one step.
    :meth:`from_bytes` reads a serialized message (raw subscription: the executor builds no
    message object, ~20 µs less per sample).
    """

    def __init__(self, model, bounds=None):
        from ..control import JointSample

        self.model = model
        self.bounds = bounds
        self._sample = JointSample
        self._names = None
        self._take = None
        self._layout = None

    def __call__(self, msg):
        names, pos, vel = msg.name, msg.position, msg.velocity
        if len(pos) != len(names) or len(vel) != len(names):
            field, values = ("position", pos) if len(pos) != len(names) else ("velocity", vel)
            raise InputError(f"joint_states.{field}: {len(values)} values for {len(names)} names")
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

    def _gather_index(self, names):
        """Index into [position; velocity] of q, q̇, q_m, q̇_m; InputError naming missing joints."""
        index = {name: i for i, name in enumerate(names)}
        links = list(self.model.joint_names)
        motors = [j + MOTOR_SUFFIX for j in links]
        missing = [j for j in links + motors if j not in index]
        if missing:
            raise InputError(f"joint_states.name: missing joint(s) {', '.join(missing)}")
        m = len(names)
        rows = [[index[j] + offset for j in group] for group, offset in
                ((links, 0), (links, m), (motors, 0), (motors, m))]
        return np.array(rows).ravel()

    def _check(self, values):
        """InputError naming the field and joint of the first NaN/inf (or, with bounds, value out
        of bounds: one test covers NaN, whose comparisons are false, ±inf and implausible values)
        in the gathered ``values``."""
        bounds = self.bounds
        if bounds is None:
            if np.isfinite(values).all():
                return
        elif ((values >= bounds[0]) & (values <= bounds[1])).all():
            return
        from ..control import implausible_state
        raise InputError(implausible_state(self.model, values, bounds or (-np.inf, np.inf)))


class _JointStateLayout:
    """Where stamp, positions and velocities sit in one sender's serialized JointState, and the
    bytes that must not change for that to hold (everything else but the effort values)."""

    def __init__(self, size, regions, stamp_at, start, count, take):
        import struct

        self.size, self.regions, self.start, self.count, self.take = size, regions, start, count, take
        self._stamp, self._stamp_at = struct.Struct("=iI"), stamp_at

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
        return self._stamp.unpack_from(buf, self._stamp_at)


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
    from ..validation import shown, shown_names

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
    gz_ros2_control convention; empty layout) for ``Publisher.publish``."""

    def __init__(self, n):
        from std_msgs.msg import Float64MultiArray

        self._message = SerializedMessage(Float64MultiArray(data=[0.0] * n), arrays=("data",))
        self._data = self._message.values["data"]

    def __call__(self, tau):
        self._data[:] = tau
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
    from ..validation import finite_vector

    return finite_vector(list(msg.data), model.n, "effort_controller/commands.data")

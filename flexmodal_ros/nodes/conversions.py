"""Conversions between flexmodal_interfaces / ROS messages and the ROS-free core types.

The only place where message fields are read or filled; nodes call these functions and the core
never sees a message. Shared module: add your own functions, do not rewrite others'.
"""
import functools


# --- modal analysis (ComputeModalParameters, ComputeModalMap, ModalParameters) -----------------

def _modal_overrides(model, request):
    """Per-request overrides (gains, tool, wrench) of a Compute* request → core model."""
    from ..config import make_tool
    from ..errors import InputError
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
    from ..errors import InputError
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


def modal_result_to_msg(result, joint_names, stamp=None):
    """core ModalResult → flexmodal_interfaces/ModalParameters (``stamp``: builtin_interfaces/Time)."""
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
    msg.unstable_eigenvalues_real = result.unstable_eigenvalues.real.tolist()
    msg.unstable_eigenvalues_imag = result.unstable_eigenvalues.imag.tolist()
    return msg


def modal_map_to_response(mmap, response, stamp=None):
    """core ModalMap → ComputeModalMap.Response fields (results, mode_order, crossings)."""
    response.results = [modal_result_to_msg(r, mmap.joint_names, stamp) for r in mmap.results]
    response.mode_order = [] if mmap.mode_order is None else mmap.mode_order.ravel().tolist()
    response.crossings = [c.description for c in mmap.crossings]
    return response


def joint_state_to_configuration(model, msg):
    """sensor_msgs/JointState → link configuration q in URDF order (other joints are ignored)."""
    from ..errors import InputError
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
    ``unknowns``, and ``objective``/``starts``/``k_max``/``d_max`` (None = node default), ``seed``."""
    import numpy as np

    from ..errors import InputError
    from ..identification import modal_data_arrays
    from ..modal import configuration_from_names

    m = int(request.num_configurations)
    width = len(request.joint_names) or model.n
    positions = list(request.positions)
    counts = [int(c) for c in request.modes_per_configuration]
    freq, zeta = list(request.frequencies_hz), list(request.damping_ratios)
    if m < 1:
        raise InputError("num_configurations: must be >= 1 (no measurements given)")
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
    return dict(data=data, unknowns=list(request.unknowns) or None,
                objective=request.objective or None, starts=int(request.starts) or None,
                seed=int(request.seed), k_max=float(request.k_max) or None,
                d_max=float(request.d_max) or None)


def identification_result_to_response(result, response):
    """core IdentificationResult → IdentifyJointParameters.Response (filled in place)."""
    response.success = bool(result.success)
    response.message = "; ".join(result.warnings) if result.success else result.message
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


def seconds_to_stamp(t):
    """float seconds (>= 0) → builtin_interfaces/Time."""
    from builtin_interfaces.msg import Time

    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


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


def _state_rows(link_names, msg_names):
    """Row of each link joint then each ``<joint>_motor`` in a JointState's name list; InputError
    naming the missing joints."""
    rows = _state_rows_cached(tuple(link_names), tuple(msg_names))
    if rows is None:
        from ..errors import InputError

        wanted = _state_names(link_names)
        raise InputError(f"joint_states.name: missing joint(s) {', '.join(j for j in wanted if j not in msg_names)}")
    return rows


@functools.lru_cache(maxsize=16)
def _state_rows_cached(link_names, msg_names):
    """Cached row lookup of :func:`_state_rows` (a publisher sends the same names every time);
    None if a joint is missing."""
    import numpy as np

    index = {name: i for i, name in enumerate(msg_names)}
    wanted = _state_names(link_names)
    if any(j not in index for j in wanted):
        return None
    rows = np.array([index[j] for j in wanted])
    rows.flags.writeable = False
    return rows


def joint_state_to_sample(model, msg):
    """sensor_msgs/JointState → :class:`~flexmodal_ros.control.JointSample` (URDF order).

    Needs position and velocity of every link joint and of every ``<joint>_motor``; other joint
    names are ignored. InputError naming the field: size mismatch, missing joints, NaN/inf.
    Runs once per 1 kHz controller cycle: the name → row mapping is cached.
    """
    import numpy as np

    from ..control import JointSample
    from ..errors import InputError

    names = msg.name
    for field in ("position", "velocity"):
        if len(getattr(msg, field)) != len(names):
            raise InputError(f"joint_states.{field}: {len(getattr(msg, field))} values for {len(names)} names")
    rows = _state_rows(model.joint_names, names)
    pos = np.asarray(msg.position, dtype=float)[rows]
    vel = np.asarray(msg.velocity, dtype=float)[rows]
    if not (np.isfinite(pos).all() and np.isfinite(vel).all()):
        wanted = _state_names(model.joint_names)
        for field, values in (("position", pos), ("velocity", vel)):
            if not np.isfinite(values).all():
                raise InputError(f"joint_states.{field}: NaN or inf for {wanted[int(np.flatnonzero(~np.isfinite(values))[0])]}")
    n = model.n
    return JointSample(stamp_to_seconds(msg.header.stamp), pos[:n], vel[:n], pos[n:], vel[n:])


def trajectory_to_core(model, msg):
    """trajectory_msgs/JointTrajectory → (times [s] (m,), positions (m, n) in URDF order, start
    time [s] or None when header.stamp is zero = "start now"). InputError naming the field for
    unknown/missing/duplicate joint names, empty points, wrong position counts."""
    import numpy as np

    from ..errors import InputError

    names = list(msg.joint_names)
    unknown = [j for j in names if j not in model.joint_names]
    if unknown:
        raise InputError(f"joint_names: unknown joint(s) {', '.join(unknown)} (robot {model.name} has "
                         f"{', '.join(model.joint_names)})")
    if len(set(names)) != len(names) or len(names) != model.n:
        raise InputError(f"joint_names: need each of the {model.n} joints exactly once, got {names}")
    if not msg.points:
        raise InputError("points: the trajectory has no waypoints")
    order = [names.index(j) for j in model.joint_names]
    positions = []
    for k, point in enumerate(msg.points):
        if len(point.positions) != model.n:
            raise InputError(f"points[{k}].positions: expected {model.n} values, got {len(point.positions)}")
        positions.append(np.asarray(point.positions, dtype=float)[order])
    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
    start = stamp_to_seconds(msg.header.stamp)
    return np.array(times), np.array(positions), (start if start > 0 else None)


def core_to_trajectory(joint_names, times, positions, start_time=None):
    """(times [s], positions (m, n), start time [s] or None) → trajectory_msgs/JointTrajectory."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
    msg.joint_names = list(joint_names)
    if start_time is not None:
        msg.header.stamp = seconds_to_stamp(start_time)
    for t, pos in zip(times, positions):
        ns = int(round(float(t) * 1e9))
        msg.points.append(JointTrajectoryPoint(positions=[float(v) for v in pos],
                                               time_from_start=Duration(sec=ns // 1_000_000_000,
                                                                        nanosec=ns % 1_000_000_000)))
    return msg


def torque_command(tau, msg=None):
    """Motor torques (n,) [N m] → std_msgs/Float64MultiArray (URDF order, gz_ros2_control convention).

    ``msg``: a message to fill and return instead of a new one (a 1 kHz publisher reuses one)."""
    import array

    import numpy as np
    from std_msgs.msg import Float64MultiArray

    msg = Float64MultiArray() if msg is None else msg
    msg.data = array.array("d", np.asarray(tau, dtype=float).tobytes())
    return msg


def command_to_torque(model, msg):
    """std_msgs/Float64MultiArray → motor torques (n,); InputError if the size is wrong or NaN/inf."""
    from ..validation import finite_vector

    return finite_vector(list(msg.data), model.n, "effort_controller/commands.data")

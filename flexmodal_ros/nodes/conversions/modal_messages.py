"""ComputeModalParameters, ComputeModalMap, ModalParameters ↔ the flexible-joint AMA."""
from ...core.errors import InputError
from ...core.validation import finite_scalar, finite_vector
from ...export.convention import StateConvention
from ...flexible_joint.ama import configuration_from_names, limit_warnings, plain_configuration
from ...flexible_joint.sampled import check_hold
from ...robot.model import with_overrides
from ...robot.params import make_tool
from .cdr import float64_array
from .joint_states import MOTOR_SUFFIX


# --- modal analysis (ComputeModalParameters, ComputeModalMap, ModalParameters) -----------------

def _modal_overrides(model, request):
    """Per-request overrides (gains, tool, wrench) of a Compute* request → core model."""

    gains = {}
    for field in ("kp", "kd"):
        values = list(getattr(request, field))
        if len(values) > 1:
            values = configuration_from_names(model, list(request.joint_names), values, field)
        gains[field] = values if len(values) else None
    tool = None
    if request.override_tool:
        inertia = [list(request.tool_inertia[3 * r:3 * r + 3]) for r in range(3)]
        tool = make_tool({"mass": float(request.tool_mass), "com": list(request.tool_com), "inertia": inertia},
                         "tool", InputError)
    wrench = list(request.wrench) if request.override_wrench else None
    return with_overrides(model, kp=gains["kp"], kd=gains["kd"], tool=tool, wrench=wrench)


def modal_request_to_core(model, request):
    """ComputeModalParameters.Request → (model with overrides, q in URDF order)."""

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

    rate = finite_scalar(request.controller_rate_hz, "controller_rate_hz")
    if rate < 0:
        raise InputError(f"controller_rate_hz: must be > 0 Hz (or 0 = continuous law), got {rate:g}")
    return (rate or None), check_hold(request.hold or "zoh")


def modal_map_request_to_core(model, request):
    """ComputeModalMap.Request → (model with overrides, configurations (m, n) in URDF order)."""

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


def modal_result_to_msg(result, joint_names, stamp=None, warnings=(), msg=None):
    """core ModalResult → flexmodal_interfaces/ModalParameters (``stamp``: builtin_interfaces/Time;
    ``warnings``: notes on the result, e.g. from :func:`flexmodal_ros.flexible_joint.ama.limit_warnings`);
    ``msg``: a new (default) message to fill, e.g. a response's field, instead of building
    another one."""
    # deferred: flexmodal_interfaces (ROS message types, built interfaces)
    from flexmodal_interfaces.msg import ModalParameters

    msg = ModalParameters() if msg is None else msg
    if stamp is not None:
        msg.stamp = stamp
    msg.joint_names = list(joint_names)
    msg.positions = float64_array(result.q)
    msg.motor_equilibrium = float64_array(result.motor_equilibrium)
    msg.num_modes = result.num_modes
    msg.frequencies_hz = float64_array(result.frequencies_hz)
    msg.damping_ratios = float64_array(result.damping_ratios)
    msg.eigenvalues_real = float64_array(result.eigenvalues.real)
    msg.eigenvalues_imag = float64_array(result.eigenvalues.imag)
    msg.mode_shape_rows, msg.mode_shape_cols = result.mode_shapes.shape
    msg.mode_shapes_real = float64_array(result.mode_shapes.real)
    msg.mode_shapes_imag = float64_array(result.mode_shapes.imag)
    msg.real_eigenvalues = float64_array(result.real_eigenvalues)
    msg.stable = bool(result.stable)
    msg.stability = result.stability
    msg.unstable_eigenvalues_real = float64_array(result.unstable_eigenvalues.real)
    msg.unstable_eigenvalues_imag = float64_array(result.unstable_eigenvalues.imag)
    msg.warnings = list(warnings)
    return msg


def modal_map_to_response(mmap, response, stamp=None, model=None):
    """core ModalMap → ComputeModalMap.Response fields (results, mode_order, crossings); with
    ``model``, each result carries its URDF-limit warnings."""

    response.results = [modal_result_to_msg(r, mmap.joint_names, stamp,
                                            () if model is None else limit_warnings(model, r.q, "positions"))
                        for r in mmap.results]
    response.mode_order = [] if mmap.mode_order is None else mmap.mode_order.ravel().tolist()
    response.crossings = [c.description for c in mmap.crossings]
    return response


def joint_state_to_configuration(model, msg, link_state="absolute"):
    """sensor_msgs/JointState → link configuration q in URDF order (other joints are ignored).
    ``link_state="deflection"`` (exported robots): q = position(<joint>) + position(<joint>_motor)."""

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

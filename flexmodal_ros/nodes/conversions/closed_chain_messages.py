"""ComputeModalParameters / ComputeModalMap for closed-chain robots ↔ flexmodal_ros.constrained."""


from ...core.errors import InputError
from .modal_messages import modal_result_to_msg
from ...core.validation import finite_vector
from ...robot.params import make_tool
from ...constrained.closed_chain import with_robot_overrides
from ...flexible_joint.ama import ModalResult


# --- closed-chain robots (flexmodal_ros.constrained; ComputeModalParameters / ComputeModalMap) --

def closed_chain_values(robot, joint_names, values, field="positions"):
    """Configuration values of a closed-chain robot from a request: with empty ``joint_names``
    either one value per tree joint (Pinocchio order) or per actuated joint; with names, either
    every joint or exactly the actuated joints, each once (reordered to the robot's order)."""

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

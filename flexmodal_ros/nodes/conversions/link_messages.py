"""ComputeLinkModes ↔ flexible-link modes."""
from ...links import with_joints, with_thickness


# --- flexible links (ComputeLinkModes) ---------------------------------------------------------

def link_modes_request_to_core(arm, request):
    """ComputeLinkModes.Request → (arm with the request's joint model / thickness, q in URDF order,
    model, num_modes, regime); empty / zero fields take the defaults documented in the .srv."""
    # deferred: Pinocchio, PyYAML (through flexible_joint.ama)
    from ...flexible_joint.ama import configuration_from_names

    q = configuration_from_names(arm, list(request.joint_names), list(request.positions))
    if request.thickness_factor != 0.0:
        arm = with_thickness(arm, request.thickness_factor)
    if request.joint_model and request.joint_model != arm.joint_model:
        arm = with_joints(arm, request.joint_model)
    num_modes = int(request.num_modes) or 10
    return arm, q, request.model or "timoshenko", num_modes, request.regime or "full"


def link_modes_to_response(arm, result, regime, response):
    """core LinkModes → ComputeLinkModes.Response (fields as documented in the .srv)."""
    # deferred: the link-mode core (links.shapes, links.characteristic), loaded with the first link response
    from ...links.shapes import mode_stations

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

"""IdentifyJointParameters (service and ~/identify action) ↔ the identification."""

import numpy as np

from ...core.errors import InputError


# --- identification (IdentifyJointParameters) ---------------------------------------------------

def identification_request_to_core(model, request):
    """IdentifyJointParameters.Request → keyword arguments of
    :func:`flexmodal_ros.identification.fit.identify` except the node defaults: ``data`` (ModalData),
    ``unknowns``, and ``objective``/``starts``/``k_max``/``d_max`` (None = node default), ``seed``,
    ``noise`` (σ_f/f, σ_ζ; a zero field takes the core default). Sizes are checked against the
    identification maxima before anything is built from them."""
    # deferred: Pinocchio, PyYAML, scipy.optimize (through identification.inverse_eigen)
    from ...identification.inverse_eigen import NOISE_DAMPING, NOISE_FREQUENCY_REL
    # deferred: Pinocchio (through identification.measurements)
    from ...identification.measurements import check_sizes, modal_data_arrays
    # deferred: Pinocchio, PyYAML (through flexible_joint.ama)
    from ...flexible_joint.ama import configuration_from_names

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

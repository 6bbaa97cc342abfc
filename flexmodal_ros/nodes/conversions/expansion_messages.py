"""ExpandModalParameters ↔ polynomial eigenpairs."""


from .modal_messages import modal_result_to_msg
from ...flexible_joint.ama import configuration_from_names


# --- polynomial eigenpairs (ExpandModalParameters) -----------------------------------------------

def expansion_request_to_core(model, request):
    """ExpandModalParameters.Request → dict(q (URDF order), order (None = node default), modes
    (1-based list or None), use_for_live, output_path (None if empty))."""

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

"""RunModalTest ↔ the OMA pipeline."""


from ...core.errors import InputError
from .joint_states import MOTOR_SUFFIX
from ...robot.params import Tool
from ...robot.model import with_overrides
from ...oma.estimators import check_method
from ...core.validation import finite_scalar, finite_vector


# --- modal test (RunModalTest) -----------------------------------------------------------------


def modal_test_request_to_core(model, request):
    """RunModalTest.Request → dict(duration, trigger_impulse, impulse_service, wrench,
    impulse_duration, pre_trigger, channels, method, output_dir, model); InputError naming the field."""

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
    check_method(method)
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

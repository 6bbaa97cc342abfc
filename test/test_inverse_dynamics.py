"""Symbolic inverse dynamics with generated C code (issue 5, thesis ch. 4; oracle O8 of notes_003).

Oracles: Pinocchio's RNEA (τ, 1e-10 N m), its analytic derivatives (τ', 1e-9 relative), a central
finite difference of that τ' along a smooth trajectory (τ'', 1e-6 relative), and (4.6)-(4.10)
written out here on top of Pinocchio for the LWR4 thesis trajectory (τ_m, 1e-8 N m).
"""
import json

import casadi as ca
import numpy as np
import pinocchio as pin
import pytest

from flexmodal_ros.cli import main as cli_main
from flexmodal_ros.core.errors import BuildError, InputError
from flexmodal_ros.robot.inverse_dynamics import FlexibleJointFeedforward, feedforward_numeric
from flexmodal_ros.robot.inverse_dynamics.build import count_operations, emit_c, feedforward_function
from flexmodal_ros.robot.model import with_overrides
from flexmodal_ros.robot.registry import list_robots, load_robot
from flexmodal_ros.robot.trajectory import THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, point_to_point

ROBOTS = list_robots()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("flexmodal_cache")


@pytest.fixture(scope="module")
def evaluators(cache):
    """One compiled evaluator per bundled robot (compiled once into the module's cache)."""
    return {name: FlexibleJointFeedforward(load_robot(name), cache=cache) for name in ROBOTS}


def _random_state(n, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-2, 2, n) for _ in range(5)]


def _tau_dot_pinocchio(pm, data, q, qd, qdd, q3):
    """τ' = ∂τ/∂q q' + ∂τ/∂q' q'' + ∂τ/∂q'' q''' from computeRNEADerivatives."""
    dq, dv, da = pin.computeRNEADerivatives(pm, data, q, qd, qdd)
    return dq @ qd + dv @ qdd + (np.triu(da) + np.triu(da, 1).T) @ q3


@pytest.mark.parametrize("robot", ROBOTS)
def test_tau_and_tau_dot_match_pinocchio(evaluators, robot):
    ff = evaluators[robot]
    pm, data = ff.model.pin, ff.model.pin.createData()
    for seed in range(10):
        q, qd, qdd, q3, q4 = _random_state(ff.n, seed)
        out = ff(q, qd, qdd, q3, q4)
        assert np.abs(out.tau - pin.rnea(pm, data, q, qd, qdd)).max() < 1e-10
        ref = _tau_dot_pinocchio(pm, data, q, qd, qdd, q3)
        assert np.abs(out.tau_dot - ref).max() < 1e-9 * np.abs(ref).max()


@pytest.mark.parametrize("robot", ROBOTS)
def test_tau_ddot_matches_finite_difference_of_tau_dot(evaluators, robot):
    ff = evaluators[robot]
    pm, data = ff.model.pin, ff.model.pin.createData()
    rng = np.random.default_rng(7)
    q0, qf = rng.uniform(-1.5, 1.5, (2, ff.n))
    T, h = 2.0, 1e-4
    for t in (0.3, 0.8, 1.1, 1.6):
        out = ff(*point_to_point(q0, qf, T, t))
        lo, hi = (_tau_dot_pinocchio(pm, data, *point_to_point(q0, qf, T, s)[:4]) for s in (t - h, t + h))
        fd = (hi - lo) / (2 * h)
        assert np.abs(out.tau_ddot - fd).max() < 1e-6 * np.abs(fd).max()


def test_lwr4_motor_torque_on_thesis_trajectory(evaluators):
    """(4.6)-(4.10) with τ_f, written out independently on Pinocchio values, over the whole motion."""
    ff = evaluators["kuka_lwr4"]
    m = ff.model
    worst = 0.0
    for t in np.linspace(0.0, THESIS_LWR4_T, 151):
        q, qd, qdd, q3, q4 = point_to_point(THESIS_LWR4_Q0, THESIS_LWR4_QF, THESIS_LWR4_T, t)
        ref = feedforward_numeric(m, q, qd, qdd, q3, q4)
        np.testing.assert_allclose(ref.tau, pin.rnea(m.pin, m.pin.createData(), q, qd, qdd), atol=1e-10)
        K, Dv, Dc, Jm, Dvm, Dcm = m.k, m.d_f, m.d_c, m.B, m.d_fm, m.d_cm
        tau_f = Dv * qd + Dc * np.sign(qd)
        qm_dot = qd + (ref.tau_dot + Dv * qdd) / K                                  # (4.8)
        qm_ddot = qdd + (ref.tau_ddot + Dv * q3) / K                                # (4.9)
        tau_m = Jm * qm_ddot + Dvm * qm_dot + Dcm * np.sign(qm_dot) + ref.tau + tau_f  # (4.10) + τ_f
        out = ff(q, qd, qdd, q3, q4)
        np.testing.assert_allclose(out.motor_position, q + (ref.tau + tau_f) / K, rtol=0, atol=1e-12)  # (4.7)
        np.testing.assert_allclose(ref.motor_torque, tau_m, rtol=0, atol=1e-10)
        worst = max(worst, np.abs(out.motor_torque - tau_m).max())
    assert worst < 1e-8
    assert np.all(m.B > 0) and np.all(m.d_cm > 0)           # the thesis' motor data is really in play


def test_numeric_second_derivative_matches_generated_code(evaluators):
    ff = evaluators["scompi"]                                 # prismatic joint 1 + revolute joints
    for seed in range(5):
        state = _random_state(ff.n, 100 + seed)
        a, b = ff(*state), feedforward_numeric(ff.model, *state)
        for field in a._fields:
            scale = max(1.0, np.abs(getattr(b, field)).max())
            assert np.abs(getattr(a, field) - getattr(b, field)).max() < 1e-11 * scale, field


def test_motor_reference_satisfies_the_plant_equations_with_w(evaluators, cache):
    """Scompi (prismatic joint 1, r = 0.057 m, W ≠ 1, viscous link friction, Coulomb added here):
    the outputs satisfy both rows of the reduced model (2.1) with τ_f, and q_m' is d(q_m)/dt."""
    ff = evaluators["scompi"]
    m = with_overrides(ff.model, d_c=[3.0, 1.0, 2.0, 0.5, 0.2, 0.1], d_cm=0.7)
    ffc = FlexibleJointFeedforward(m, cache=cache)
    rng = np.random.default_rng(9)
    q0, qf = rng.uniform(-0.8, 0.8, (2, m.n))
    for t in (0.4, 1.0, 1.7):
        q, qd, qdd, q3, q4 = point_to_point(q0, qf, 2.0, t)
        out = ffc(q, qd, qdd, q3, q4)
        K, W = m.k, m.W
        link = (pin.rnea(m.pin, m.pin.createData(), q, qd, qdd) + m.d_f * qd + m.d_c * np.sign(qd)
                + K * W * (W * q - out.motor_position))
        motor = (m.B * out.motor_acceleration + m.d_fm * out.motor_velocity + m.d_cm * np.sign(out.motor_velocity)
                 - K * (W * q - out.motor_position) - out.motor_torque)
        assert np.abs(link).max() < 1e-8 and np.abs(motor).max() < 1e-8
        h = 1e-5                                        # Coulomb derivative is zero: sign(q') constant here
        lo, hi = (ffc(*point_to_point(q0, qf, 2.0, s)) for s in (t - h, t + h))
        np.testing.assert_allclose((hi.motor_position - lo.motor_position) / (2 * h), out.motor_velocity,
                                   rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose((hi.motor_velocity - lo.motor_velocity) / (2 * h), out.motor_acceleration,
                                   rtol=1e-6, atol=1e-7)


def test_any_axis_and_prismatic_joints():
    """Unaligned revolute/prismatic axes, negative axes and rotated placements (not from a DH table)."""
    pm = pin.Model()
    parent = 0
    joints = [pin.JointModelPrismaticUnaligned(0.2, 0.5, 0.8), pin.JointModelRevoluteUnaligned(0.6, 0.0, -0.8),
              pin.JointModelPY(), pin.JointModelRX(), pin.JointModelRevoluteUnaligned(0.0, -1.0, 0.0)]
    rng = np.random.default_rng(3)
    for k, jm in enumerate(joints):
        placement = pin.SE3(pin.rpy.rpyToMatrix(*rng.uniform(-3, 3, 3)), rng.uniform(-0.5, 0.5, 3))
        parent = pm.addJoint(parent, jm, placement, f"j{k}")
        pm.appendBodyToJoint(parent, pin.Inertia.Random(), pin.SE3.Identity())
    pm.gravity.linear = np.array([1.0, -2.0, -9.81])
    f = feedforward_function(pm, None)
    data = pm.createData()
    for seed in range(5):
        q, qd, qdd, q3, q4 = _random_state(pm.nv, seed)
        y = np.asarray(f(np.concatenate([q, qd, qdd, q3, q4]))).ravel().reshape(3, pm.nv)
        assert np.abs(y[0] - pin.rnea(pm, data, q, qd, qdd)).max() < 1e-10
        ref = _tau_dot_pinocchio(pm, data, q, qd, qdd, q3)
        assert np.abs(y[1] - ref).max() < 1e-9 * np.abs(ref).max()


def test_virtual_machine_fallback_equals_compiled(evaluators):
    ff = evaluators["planar_2r"]
    vm = FlexibleJointFeedforward(ff.model, compiled=False)
    state = _random_state(ff.n, 11)
    np.testing.assert_allclose(np.array(vm(*state)), np.array(ff(*state)), rtol=1e-14, atol=1e-12)


def test_operation_counts_of_emitted_code():
    m = load_robot("kuka_lwr4")
    f = feedforward_function(m.pin, None, "lwr4_rigid")
    ops = count_operations(emit_c(f))
    # Cross-check the parser of the C text with CasADi's own instruction list of the same function.
    codes = [f.instruction_id(k) for k in range(f.n_instructions())]
    assert ops["mul"] == sum(c in (ca.OP_MUL, ca.OP_TWICE, ca.OP_SQ) for c in codes)
    assert ops["add"] == sum(c in (ca.OP_ADD, ca.OP_SUB, ca.OP_NEG) for c in codes)
    assert ops["trig"] == sum(c in (ca.OP_SIN, ca.OP_COS) for c in codes) == 12   # thesis: 12 sin/cos
    # Acceptance: at most 1.5x the thesis' 1289 add/sub + 1516 mul for τ, τ', τ''.
    assert ops["add"] + ops["mul"] <= 1.5 * (1289 + 1516)


def test_cache_reuses_library_and_tracks_parameters(evaluators, cache):
    ff = evaluators["planar_2r"]
    again = FlexibleJointFeedforward(ff.model, cache=cache)
    assert again.library == ff.library                       # loaded from the cache, not rebuilt
    stiffer = FlexibleJointFeedforward(with_overrides(ff.model, k=2 * ff.model.k), cache=cache)
    assert stiffer.library.hash != ff.library.hash
    state = _random_state(ff.n, 5)
    a, b = ff(*state), stiffer(*state)
    np.testing.assert_allclose(b.tau, a.tau, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.motor_position - state[0], (a.motor_position - state[0]) / 2, atol=1e-12)


def test_bad_input_names_the_field(evaluators):
    ff = evaluators["planar_2r"]
    good = _random_state(ff.n, 1)
    with pytest.raises(InputError, match="^qd: expected 2 values"):
        ff(good[0], [1.0, 2.0, 3.0], *good[2:])
    with pytest.raises(InputError, match="^q3: contains NaN"):
        ff(*good[:3], [np.nan, 0.0], good[4])
    with pytest.raises(InputError, match="^q4:"):
        feedforward_numeric(ff.model, *good[:4], [0.0])


def test_missing_compiler_names_the_fallback(tmp_path, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))                # no cc/gcc reachable
    with pytest.raises(BuildError, match="no C compiler.*compiled=False"):
        FlexibleJointFeedforward(load_robot("planar_2r"), cache=tmp_path / "cache")


def test_cli_codegen_and_invdyn(cache, monkeypatch, capsys):
    monkeypatch.setenv("FLEXMODAL_CACHE", str(cache))
    assert cli_main(["codegen", "--robot", "planar_2r", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["operations"]) >= {"add", "mul", "div", "trig", "total"}
    assert out["library"].endswith(".so") and out["source"].endswith(".c")
    state = _random_state(2, 4)
    argv = ["invdyn", "--robot", "planar_2r", "--json"]
    for name, values in zip(("--q", "--qd", "--qdd", "--q3", "--q4"), state):
        argv.append(f"{name}=" + ",".join(repr(float(v)) for v in values))
    assert cli_main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    ref = feedforward_numeric(load_robot("planar_2r"), *state)
    for field in ref._fields:
        np.testing.assert_allclose(got[field], getattr(ref, field), rtol=1e-12, atol=1e-10)
    assert cli_main(argv[:4] + ["--q=1,2,3"] + argv[5:]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--q:" in err


def test_evaluate_in_place_equals_call_and_validates(evaluators):
    """The allocation-free evaluate(x, out) (issue 17) gives the __call__ values, follows re-bound
    buffers, and names a non-finite input field from the generated Σx check."""
    ff = evaluators["kuka_lwr4"]
    state = _random_state(ff.n, 7)
    ref = np.array(ff(*state))
    x, out = np.array(state, float), np.empty((7, ff.n))
    assert ff.evaluate(x, out) is out
    np.testing.assert_array_equal(out, ref)
    x2, out2 = 2 * x, np.empty(7 * ff.n)
    ff.evaluate(x2, out2)                                    # other buffers: re-bound
    np.testing.assert_array_equal(out2.reshape(7, ff.n), np.array(ff(*x2)))
    x[:] = state                                             # first buffers again, new values in place
    x[0, 0] += 0.1
    ff.evaluate(x, out)
    np.testing.assert_array_equal(out, np.array(ff(*x)))
    x[3, 2] = np.inf
    with pytest.raises(InputError, match="^q3: contains NaN or inf"):
        ff.evaluate(x, out)
    with pytest.raises(InputError, match="evaluate: x needs"):
        ff.evaluate(np.zeros(5 * ff.n + 1), out)
    vm = FlexibleJointFeedforward(ff.model, compiled=False)
    out_vm = np.empty((7, ff.n))
    vm.evaluate(np.array(state, float), out_vm)
    np.testing.assert_allclose(out_vm, ref, rtol=1e-13, atol=1e-10)


def test_rigid_term_counts_are_stored_with_the_library(evaluators, cache):
    """Issue 17: `flexmodal codegen` reads the τ, τ', τ'' counts from the cached library's metadata
    (no symbolic RNEA on a cache hit); they equal a separate rigid-only generation."""
    ff = evaluators["kuka_lwr4"]
    rigid = count_operations(emit_c(feedforward_function(ff.model.pin, None, "lwr4_rigid")))
    assert ff.library.operations_rigid == rigid
    assert FlexibleJointFeedforward(ff.model, cache=cache).library.operations_rigid == rigid   # cache hit

"""Feedforward+PD tracking law and set-point hold law as one generated control cycle (ROS-free).

Thesis: T.T. Do (2021). Plant (2.1) / ch. 4 form (4.1)-(4.4); motor coordinates q_m after the gear
[rad], motor torques τ_m after the gear [N·m], link coordinates q [rad or m].

Tracking law (De Luca 2000 scheme, notes_003 §7 item 10; not written out in the thesis):

    τ_m = τ_m^d + K_P (q_m^d − q_m) + K_D (q̇_m^d − q̇_m)

with q_m^d, q̇_m^d, τ_m^d from the flexible-joint inverse dynamics (4.6)-(4.10) of the C⁴ link
reference. "PD only" (``use_feedforward=False``) keeps the gains but uses τ_m^d = 0 and the link
reference mapped through the gear, q_m^d = W q^d, q̇_m^d = W q̇^d.

Hold law: the set-point PD with constant compensation (2.2)-(2.3) about a link set-point q^d.

Both laws have the form τ_m = r − K_P q_m − K_D q̇_m with a reference term r (the hold law's is
constant). :class:`ControlLaw` evaluates a whole cycle (link reference on the current C⁴ segment
(4.29)-(4.30), feedforward, law, saturation at the effort limits) as one call of generated C
(:func:`control_law_function`): the 1 kHz node spends its time budget in Python bookkeeping only.

The fail-safe policy that runs these laws is :mod:`.failsafe`.
"""
from enum import Enum
from typing import NamedTuple

import casadi as ca
import numpy as np

from ..flexible_joint.linear_model import static_compensation
from ..robot import trajectory
from ..robot.inverse_dynamics.build import CompiledFunction, build_library, model_feedforward_function
from ..robot.trajectory import ETA_COEFFICIENTS


class Mode(str, Enum):
    """Controller modes of the fail-safe policy (module docstring)."""
    WAITING = "waiting"
    HOLD = "hold"
    TRACKING = "tracking"
    STALE = "stale"
    OUT_OF_LIMITS = "out_of_limits"


class JointSample(NamedTuple):
    """One measured state: time t [s] (joint-state stamp), link q, q̇ and motor q_m, q̇_m (n,) each."""
    t: float
    q: np.ndarray
    qd: np.ndarray
    q_m: np.ndarray
    qd_m: np.ndarray


class Command(NamedTuple):
    """Output of one control cycle: motor torques τ_m [N·m] (URDF order, after saturation), the mode,
    the joints clipped at their effort limit, and the link reference q^d [rad or m] of this cycle
    (the hold set-point in HOLD/STALE)."""
    tau: np.ndarray
    mode: Mode
    saturated: np.ndarray
    q_ref: np.ndarray


def saturate(tau, limit):
    """Clip τ to ±limit (URDF effort limits; inf = none). Returns (clipped τ, bool mask of clipped joints)."""
    tau = np.asarray(tau, dtype=float)
    clipped = np.minimum(np.maximum(tau, -limit), limit)   # = np.clip, several times cheaper on (n,)
    return clipped, clipped != tau


# Layout of the control-law vectors (:func:`control_law_function`): scalars, else n entries each.
LAW_INPUTS = ("tracking", "use_feedforward", "s", "T", "q_a", "q_b", "r_hold", "q_m", "qd_m", "kp", "kd",
              "explicit", "reference", "excitation")
LAW_OUTPUTS = ("tau", "q_ref", "saturated", "n_saturated", "n_nonfinite")
_LAW_SCALARS = ("tracking", "use_feedforward", "s", "T", "n_saturated", "n_nonfinite", "explicit")
_LAW_DERIVATIVES = ("reference",)        # q^d, q̇^d, q̈^d, q⃛^d, q^d(4): 5n entries


def static_hold_torque(model, data, q):
    """The STALE command at link position ``q``: the constant static torque
    W⁻¹(g(q) − Jᵀ(q) τ_ext) (the feed-through term of (2.2)), saturated; (τ, saturated joints)."""
    return saturate(static_compensation(model, data, q) / model.W, model.effort_limit)


def law_layout(names, n):
    """{name: slice} of the named blocks packed in order into one vector, and its length."""
    slices, k = {}, 0
    for name in names:
        size = 1 if name in _LAW_SCALARS else 5 * n if name in _LAW_DERIVATIVES else n
        slices[name], k = slice(k, k + size), k + size
    return slices, k


def control_law_function(model, name="flexmodal_law"):
    """CasADi Function u → y of one control cycle of ``model`` (layout: LAW_INPUTS / LAW_OUTPUTS).

    Inputs: tracking (1 = tracking law, 0 = hold law), use_feedforward (1/0), the segment of the
    C⁴ reference from q_a to q_b [rad or m] of duration T [s] at phase s in [0, 1], the hold law's
    reference term r_hold [N·m] (:func:`~flexmodal_ros.flexible_joint.linear_model.setpoint_reference`), measured
    q_m [rad], q̇_m [rad/s], gains K_P, K_D (inputs, so that they can change at run time without
    a new library). Link reference q^(k) = η^(k)(s) T⁻ᵏ (q_b − q_a) (+ q_a for k = 0)
    (4.29)-(4.30), or, with explicit = 1, the given ``reference`` [q^d; q̇^d; q̈^d; q⃛^d; q^d(4)]
    (any C⁴ reference, e.g. a shaped one: flexmodal_ros/shaping); feedforward (4.6)-(4.10) of
    that reference; reference term
    r = τ_m^d + K_P q_m^d + K_D q̇_m^d (feedforward on), K_P W q^d + K_D W q̇^d (off), r_hold (hold);
    τ_m = r − K_P q_m − K_D q̇_m + u_exc clipped at the URDF effort limits, u_exc the ``excitation``
    input [N·m] (zero except during a motor excitation: flexmodal_ros/control/excitation.py).
    Outputs: tau [N·m], q_ref = q^d [rad or m], saturated (1/0 per joint), n_saturated,
    n_nonfinite = entries of τ (before clipping) and q^d that are NaN or ±inf (the clipping would
    turn NaN into a limit: the caller must check this count first).
    """
    n = model.n
    ins, size = law_layout(LAW_INPUTS, n)
    u = ca.SX.sym("u", size)
    v = {key: u[sl] for key, sl in ins.items()}
    dq, inv_t = v["q_b"] - v["q_a"], 1.0 / v["T"]
    derivs, scale = [], 1.0
    for coeffs in ETA_COEFFICIENTS:                              # Horner: η⁽ᵏ⁾(s), highest power first
        eta = 0.0
        for c in coeffs:
            eta = eta * v["s"] + float(c)
        derivs.append(eta * scale * dq)
        scale = scale * inv_t
    derivs[0] = derivs[0] + v["q_a"]
    derivs = [ca.if_else(v["explicit"], v["reference"][k * n:(k + 1) * n], d) for k, d in enumerate(derivs)]
    ff = model_feedforward_function(model, f"{name}_ff")(ca.vertcat(*derivs))
    kp, kd, W = v["kp"], v["kd"], ca.DM(np.asarray(model.W, dtype=float))
    r_ff = ff[6 * n:7 * n] + kp * ff[3 * n:4 * n] + kd * ff[4 * n:5 * n]
    r_pd = W * (kp * derivs[0] + kd * derivs[1])
    r = ca.if_else(v["tracking"], ca.if_else(v["use_feedforward"], r_ff, r_pd), v["r_hold"])
    tau = r - kp * v["q_m"] - kd * v["qd_m"] + v["excitation"]
    finite = lambda x: ca.fabs(x) <= np.finfo(float).max        # false for NaN and ±inf
    nonfinite = ca.sum1(ca.vertcat(*[1 - finite(x) for x in ca.vertsplit(ca.vertcat(tau, derivs[0]))]))
    clipped, saturated = [], []
    for j, limit in enumerate(np.asarray(model.effort_limit, dtype=float)):
        if np.isfinite(limit):
            clipped.append(ca.fmin(ca.fmax(tau[j], -limit), limit))
            saturated.append(ca.fabs(tau[j]) > limit)
        else:
            clipped.append(tau[j])
            saturated.append(ca.SX(0.0))
    sat = ca.vertcat(*saturated)
    return ca.Function(name, [u], [ca.cse(ca.vertcat(*clipped, derivs[0], sat, ca.sum1(sat), nonfinite))])


class ControlLaw:
    """One control cycle of :func:`control_law_function` per :meth:`run` on preallocated vectors.

    Write the inputs through the views named as in LAW_INPUTS (``law.q_m[:] = ...``, scalars as
    ``law.s[0] = ...``), call :meth:`run`, read the outputs through the LAW_OUTPUTS views.
    compiled=True (default): generated C, compiled once per model and cached like the feedforward
    (:func:`~flexmodal_ros.robot.inverse_dynamics.build.build_library`; :attr:`compiled` is its
    :class:`~flexmodal_ros.robot.inverse_dynamics.build.CompiledFunction`, for C callers); compiled=False:
    CasADi's virtual machine (no C compiler needed, slower; :attr:`compiled` is None). The gains
    are inputs, initialised from the model (:meth:`set_gains` changes them). Not thread-safe.
    """

    def __init__(self, model, compiled=True, cache=None):
        if compiled:
            self.library = build_library(model, cache, control_law_function, "law",
                                         sources=(__file__, trajectory.__file__),
                                         parameters={"W": model.W, "effort_limit": model.effort_limit})
            self.compiled = CompiledFunction(self.library)
            self.u, self.y, self.run = self.compiled.x, self.compiled.y, self.compiled.run
        else:
            self.library = self.compiled = None
            self._function = control_law_function(model)
            self.u = np.zeros(self._function.size1_in(0))
            self.y = np.zeros(self._function.size1_out(0))
            self.run = self._run_vm
        for names, vector in ((LAW_INPUTS, self.u), (LAW_OUTPUTS, self.y)):
            for key, sl in law_layout(names, model.n)[0].items():
                setattr(self, key, vector[sl])
        self.T[0] = 1.0      # any valid segment: unused branches of the law stay finite
        self.set_gains(model.kp, model.kd)

    def set_gains(self, kp, kd):
        """Motor-side gains K_P [N·m/rad], K_D [N·m·s/rad] (n,) used from the next :meth:`run`."""
        self.kp[:], self.kd[:] = kp, kd

    def evaluate(self, tracking, q_m, qd_m):
        """:meth:`run` the tracking (``tracking``) or the hold law for the motor state ``q_m``,
        ``qd_m`` (n,) (reference and excitation already written); True when its result is finite."""
        self.tracking[0] = tracking
        self.q_m[:] = q_m
        self.qd_m[:] = qd_m
        self.run()
        return not self.n_nonfinite[0]

    def _run_vm(self):
        self.y[:] = np.asarray(self._function(self.u)).ravel()

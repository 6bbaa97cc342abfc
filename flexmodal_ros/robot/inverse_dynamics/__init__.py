"""Symbolic inverse dynamics of flexible-joint robots with generated C code (thesis T.T. Do 2021, ch. 4).

    from flexmodal_ros.robot.inverse_dynamics import FlexibleJointFeedforward, feedforward_numeric
    ff = FlexibleJointFeedforward(model)        # builds or loads the compiled library (cached)
    out = ff(q, qd, qdd, q3, q4)                # FeedforwardOutput, arrays of length n
    ff.evaluate(x, y)                           # control loops: x (5, n) in, y (7, n) out, no allocation
    ref = feedforward_numeric(model, q, qd, qdd, q3, q4)   # Pinocchio reference, same fields

Fields (SI units; link side rad or m, motor side rad after the gear): tau (4.6) [N m or N],
tau_dot, tau_ddot (its time derivatives, Alg. 2), motor_position q_m (4.7), motor_velocity (4.8),
motor_acceleration (4.9), motor_torque τ_m (4.10, with link friction τ_f) [N m].
"""
import math
from typing import NamedTuple

import numpy as np

from ...core.errors import InputError
from .build import (CompiledFunction, build_library, checked_feedforward_function, feedforward_function,
                    flex_params)
from .numeric import flexible_feedforward

INPUT_FIELDS = ("q", "qd", "qdd", "q3", "q4")


class FeedforwardOutput(NamedTuple):
    """Feedforward of the flexible-joint robot at one time instant (arrays of length n)."""
    tau: np.ndarray
    tau_dot: np.ndarray
    tau_ddot: np.ndarray
    motor_position: np.ndarray
    motor_velocity: np.ndarray
    motor_acceleration: np.ndarray
    motor_torque: np.ndarray


def pack_inputs(n, values, out=None):
    """Stack q, q', q'', q''', q'''' into one finite vector of length 5n (InputError naming the field)."""
    x = np.empty(5 * n) if out is None else out
    for k, (field, v) in enumerate(zip(INPUT_FIELDS, values)):
        a = np.asarray(v, dtype=float)
        if a.shape != (n,):
            raise InputError(f"{field}: expected {n} values, got shape {a.shape}")
        x[k * n:(k + 1) * n] = a
    if not np.isfinite(x).all():
        field = INPUT_FIELDS[int(np.flatnonzero(~np.isfinite(x))[0]) // n]
        raise InputError(f"{field}: contains NaN or inf")
    return x


class FlexibleJointFeedforward:
    """Fast evaluator of τ, τ', τ'', q_m, q_m', q_m'', τ_m (4.6)-(4.10) for a FlexibleJointModel.

    compiled=True (default): generated C, compiled once and cached by model hash (see
    :func:`.build.build_library`; BuildError naming the fallback if there is no C compiler).
    compiled=False: the same CasADi graph run by CasADi's virtual machine (no compiler needed).
    One instance per thread (it owns its input/output buffers).
    """

    def __init__(self, model, compiled=True, cache=None):
        self.model = model
        self.n = model.n
        self._bound = (None, None)
        if compiled:
            self.library = build_library(model, cache, checked_feedforward_function, "ffc")
            self._c = CompiledFunction(self.library)
            self._input_sum = self._c.outputs[1]
        else:
            self.library = None
            self._c = None
            self._fn = feedforward_function(model.pin, flex_params(model))
        self._x, self._y = np.zeros(5 * self.n), np.zeros(7 * self.n)   # buffers of __call__

    def __call__(self, q, qd, qdd, q3, q4):
        """FeedforwardOutput at (q, q', q'', q''', q'''') (each of length n, SI units)."""
        self.evaluate(pack_inputs(self.n, (q, qd, qdd, q3, q4), self._x), self._y)
        return FeedforwardOutput._make(self._y.reshape(7, self.n).copy())

    def evaluate(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Allocation-free call for control loops: ``out`` (7, n) = [τ; τ'; τ''; q_m; q_m'; q_m''; τ_m]
        at ``x`` (5, n) = [q; q'; q''; q'''; q''''] (SI units; both float64 C-contiguous, 5n and 7n
        values in any shape). The compiled function reads ``x`` and writes ``out`` in place: they
        are bound once and re-bound only when other arrays are passed. Non-finite inputs raise
        InputError naming the field (detected by the generated code's Σx output)."""
        if self._c is None:
            out.reshape(-1)[:] = np.asarray(self._fn(pack_inputs(self.n, x.reshape(5, self.n)))).ravel()
            return out
        if x is not self._bound[0] or out is not self._bound[1]:
            self._bind(x, out)
        self._c.run()
        if not math.isfinite(self._input_sum[0]):
            pack_inputs(self.n, x.reshape(5, self.n))       # raises, naming the field
            raise InputError("q, qd, qdd, q3, q4: values too large (their sum overflows)")
        return out

    def _bind(self, x, out):
        try:
            self._c.bind("in", 0, x)
            self._c.bind("out", 0, out)
        except ValueError as exc:
            self._bound = (None, None)
            raise InputError(f"evaluate: x needs {5 * self.n} and out {7 * self.n} values ({exc})") from None
        self._bound = (x, out)


def feedforward_numeric(model, q, qd, qdd, q3, q4):
    """Reference FeedforwardOutput from Pinocchio (RNEA, its analytic derivatives, spatial jets)."""
    n = model.n
    x = pack_inputs(n, (q, qd, qdd, q3, q4)).reshape(5, n)
    return FeedforwardOutput(*flexible_feedforward(model, *x))


__all__ = ["FeedforwardOutput", "FlexibleJointFeedforward", "feedforward_numeric", "pack_inputs"]

"""Excitation through the motors: a short torque pulse or chirp added to the hold law's command
(the controller's :meth:`~flexmodal_ros.control.law.FailSafeController.excite`, the simulators'
plant-side input), bounded in amplitude and duration.

Signal (:class:`MotorExcitation`): per joint an amplitude τ_j [N·m after the gear, like τ_m],
from ``start`` for ``duration`` [s]:

- ``pulse``: u_j(t) = τ_j (a rectangular pulse; a digital controller holds it over its periods);
- ``chirp``: u_j(t) = τ_j sin(2π (f0 s + (f1 − f0) s²/(2 d))), s = t − start, d = duration (a
  linear sweep f0 → f1 [Hz]).

It is added to the command *before* the saturation at the effort limits, like any command
(the controller's law: :mod:`flexmodal_ros.control.law`), and refused above a bound
(:func:`check_excitation`: amplitude per joint and duration).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_scalar, finite_vector

KINDS = ("pulse", "chirp")
MAX_DURATION = 10.0          # [s] no excitation lasts longer (a pulse lasts milliseconds)


@dataclass(frozen=True)
class MotorExcitation:
    """Motor torque excitation (module docstring): ``torque`` (n,) amplitudes [N·m], ``start`` [s]
    on the caller's clock, ``duration`` [s], ``kind`` pulse | chirp, chirp band ``f0``..``f1`` [Hz]."""

    torque: np.ndarray
    start: float = 0.0
    duration: float = 0.002
    kind: str = "pulse"
    f0: float = 1.0
    f1: float = 100.0

    def __post_init__(self):
        object.__setattr__(self, "torque", finite_vector(self.torque, None, "torque"))
        if self.kind not in KINDS:
            raise InputError(f"kind: must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name in ("start", "duration", "f0", "f1"):
            finite_scalar(getattr(self, name), name)
        if not self.duration > 0:
            raise InputError(f"duration: must be > 0 s, got {self.duration:g}")
        if self.kind == "chirp" and not (self.f0 > 0 and self.f1 > 0):
            raise InputError(f"f0/f1: the chirp band must be > 0 Hz, got {self.f0:g}..{self.f1:g}")

    @property
    def end(self) -> float:
        return self.start + self.duration

    def at(self, t) -> np.ndarray:
        """u(t) (n,) [N·m]; zero outside [start, end)."""
        s = float(t) - self.start
        if not 0.0 <= s < self.duration - 1e-12:
            return np.zeros_like(self.torque)
        if self.kind == "pulse":
            return self.torque.copy()
        phase = 2 * np.pi * (self.f0 * s + 0.5 * (self.f1 - self.f0) * s * s / self.duration)
        return self.torque * np.sin(phase)

    def shifted(self, start: float) -> "MotorExcitation":
        """The same signal starting at ``start`` [s]."""
        return MotorExcitation(self.torque, float(start), self.duration, self.kind, self.f0, self.f1)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "torque": self.torque.tolist(), "start": self.start,
                "duration": self.duration, "f0": self.f0, "f1": self.f1}


def pulse_on(model, joints, amplitude, duration, start=0.0) -> MotorExcitation:
    """A pulse of ``amplitude`` [N·m] (scalar or one per joint in ``joints``) on the motors of
    ``joints`` (0-based indices), zero on the others."""
    torque = np.zeros(model.n)
    torque[list(joints)] = amplitude
    return MotorExcitation(torque, start, duration)


def check_excitation(model, excitation: MotorExcitation, max_torque, max_duration: float = MAX_DURATION):
    """InputError naming the field when ``excitation`` does not fit the robot (n amplitudes) or
    exceeds ``max_torque`` [N·m] (scalar or per joint: the bound set by the controller's or the
    calibration's parameter) or ``max_duration`` [s]. Returns the excitation."""
    if excitation.torque.size != model.n:
        raise InputError(f"torque: expected {model.n} amplitudes (one per joint), got {excitation.torque.size}")
    limit = np.broadcast_to(np.asarray(max_torque, float), (model.n,))
    over = np.flatnonzero(np.abs(excitation.torque) > limit * (1 + 1e-12))
    if over.size:
        j = int(over[0])
        raise InputError(f"torque: {abs(excitation.torque[j]):g} N m on {model.joint_names[j]} is above the "
                         f"excitation limit of {limit[j]:g} N m (parameter max_excitation_torque)")
    if excitation.duration > max_duration:
        raise InputError(f"duration: {excitation.duration:g} s is longer than the limit of {max_duration:g} s")
    return excitation




# Default bound of the excitation amplitude: this fraction of the URDF effort limit (10 N m where
# the URDF gives none); the hold law keeps the rest of the effort range.
DEFAULT_LIMIT_FRACTION = 0.1
DEFAULT_LIMIT_WITHOUT_EFFORT = 10.0


def default_excitation_limit(model) -> np.ndarray:
    """Per-joint excitation bound [N·m] when none is configured (see DEFAULT_LIMIT_FRACTION)."""
    effort = np.asarray(model.effort_limit, float)
    return np.where(np.isfinite(effort), DEFAULT_LIMIT_FRACTION * effort, DEFAULT_LIMIT_WITHOUT_EFFORT)

"""Excitation through the motors: a short torque pulse or chirp added to the hold law's command
(the controller's :meth:`~flexmodal_ros.control.failsafe.FailSafeController.excite`, the simulators'
plant-side input), bounded in amplitude and duration.

Signal (:class:`MotorExcitation`): per joint an amplitude τ_j [N·m after the gear, like τ_m],
from ``start`` for ``duration`` [s]:

- ``pulse``: u_j(t) = τ_j (a rectangular pulse; a digital controller holds it over its periods);
- ``chirp``: u_j(t) = τ_j sin(2π (f0 s + (f1 − f0) s²/(2 d))), s = t − start, d = duration (a
  linear sweep f0 → f1 [Hz]).

It is added to the command *before* the saturation at the effort limits, like any command
(the controller's law: :mod:`flexmodal_ros.control.law`), and refused above a bound
(:func:`check_excitation`: amplitude per joint and duration). :class:`ExcitationSchedule` is the
controller's side: one excitation at a time, started, run and cancelled by the fail-safe policy
(:mod:`flexmodal_ros.control.failsafe`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_array, finite_scalar, finite_vector, per_joint, shown

KINDS = ("pulse", "chirp")
MAX_DURATION = 10.0          # [s] no excitation lasts longer (a pulse lasts milliseconds)
EXCITATION_MAX_DURATION = 1.0        # [s] default bound of the controller's excitation duration


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
            raise InputError(f"kind: must be one of {', '.join(KINDS)}, got {shown(self.kind)}")
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


class ExcitationSchedule:
    """The controller's motor excitation (at most one): bounds ``limit`` [N·m] per joint and
    ``max_duration`` [s], the scheduled or running :class:`MotorExcitation` (``current``) and its
    torque at each cycle (:meth:`torque_at`). The policy around it (only in HOLD, cancelled on
    leaving HOLD or a fault) is :class:`~flexmodal_ros.control.failsafe.FailSafeController`'s."""

    def __init__(self, model):
        self.limit = default_excitation_limit(model)
        self.max_duration = EXCITATION_MAX_DURATION
        self.current = None
        self._start_now = False

    def set_limits(self, n, torque=None, duration=None):
        """Amplitude bound (scalar or n values [N·m]) and duration bound [s]; None keeps the current
        one; InputError naming the field for values that are not finite and > 0."""
        limit = self.limit if torque is None else per_joint(torque, n, "max_excitation_torque")
        if np.any(limit <= 0):
            raise InputError(f"max_excitation_torque: must be > 0, got {limit.tolist()}")
        longest = self.max_duration if duration is None else float(
            finite_array(duration, "max_excitation_duration_s", ()))
        if not longest > 0:
            raise InputError(f"max_excitation_duration_s: must be > 0 s, got {longest:g}")
        self.limit, self.max_duration = limit, longest

    def schedule(self, model, excitation, start_now, t):
        """Accept ``excitation`` at joint-state time ``t`` [s]: from the first cycle that runs it
        (``start_now``) or from ``excitation.start``. Returns a one-line description; InputError
        naming the field when one runs already, it exceeds the bounds or starts in the past."""
        if self.current is not None:
            raise InputError(f"excitation: another one runs until t={self.current.end:.4f} s")
        check_excitation(model, excitation, self.limit, self.max_duration)
        if not start_now and excitation.start < t:
            raise InputError(f"start_time: {excitation.start:.4f} s is in the past (joint-state time {t:.4f} s)")
        self.current, self._start_now = excitation, bool(start_now)
        when = "at the next cycle" if start_now else f"at t={excitation.start:.4f} s"
        return (f"excitation accepted: {excitation.kind}, peak {np.abs(excitation.torque).max():g} N m, "
                f"{excitation.duration:g} s, starting {when}")

    @property
    def waiting_to_start_now(self):
        """True while a "start now" excitation has not started yet."""
        return self._start_now

    def torque_at(self, t, out, events):
        """Write the torque at sample time ``t`` [s] into ``out`` (zero after the end, when the
        excitation is dropped); start/finish events appended to ``events``."""
        if self._start_now:
            self.current, self._start_now = self.current.shifted(t), False
            events.append(f"hold: excitation started at t={t:.4f} s")
        if t >= self.current.end - 1e-12:
            out[:] = 0.0
            self.current = None
            events.append(f"hold: excitation finished at t={t:.4f} s")
        else:
            out[:] = self.current.at(t)

    def cancel(self, out):
        """Drop the excitation; zero torque into ``out``."""
        out[:] = 0.0
        self.current = None

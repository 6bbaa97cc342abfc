"""The controller's view of the measured joint state (ROS-free): which samples are taken, whether
they are inside the limits, and whether they still arrive (the screening rows of the policy table
in :mod:`.failsafe`).

:class:`MeasuredState` keeps the last valid :class:`~.law.JointSample`, its steady-clock receipt
time and the receipt time of the last sample whose stamp advanced. A sample is

- rejected (InputError naming the field) when it is not finite, of the wrong size or implausible
  (:func:`~.limits.plausible_bounds`: positions up to ``STATE_BOUND``, velocities within
  ``state_velocity_factor`` × the velocity limit);
- outside the limits when a link or motor position is beyond :meth:`~.limits.SafetyLimits.resolved`'s
  state bounds: rejected like an implausible one until such samples have come for
  ``state_timeout`` (a glitch is not a state), then taken (the state machine goes OUT_OF_LIMITS);
- stale when no valid sample came, or the stamps did not advance, for more than ``state_timeout``.

It also tells whether the samples are **caught up** (:attr:`MeasuredState.caught_up`), which a
"start now" trajectory or excitation waits for: after this process stalled (a busy machine, a
debugger, SIGSTOP), the transport delivers the states published meanwhile, and the controller may
take many of them — in a burst, or one per cycle when its cycles are slower than the stream (CI:
six queued states 2 ms apart were taken at ordinary gaps, so a rule on the gap between two
samples did not see them). A start taken from one of them would lie in the past and the move would
begin mid-way. A sample is therefore judged by its **lag**: how far its stamp is behind the last
trusted sample's stamp advanced at the stream's pace (joint-state seconds per steady second — 1
for a robot or a real-time simulator — learned from the ordinary gaps between samples, so slower
and faster simulations are judged by their own pace). It is *behind* when the lag exceeds
``BEHIND_TOLERANCE`` s plus ``PACE_SLACK`` × the steady time since that trusted sample (the pace's
own uncertainty), at most ``MAX_TOLERANCE`` s, at the pace. The samples are caught up from the
first one that is not behind, or once the lag has stayed within ``BEHIND_TOLERANCE`` of one value
for ``CATCH_UP_BOUND`` s of steady time: a paused simulator resumes with a constant lag — its
stamps stopped while the clock went on — and is then trusted from there, while queued states
being worked off have a lag that moves and keep the start waiting until the fresh ones arrive. The
lag shrinks when they are taken faster than the stream; it grows when they are taken slower (a
cycle starved right after the stall, e.g. while the node's other thread works off its own queue:
Jazzy CI, a start was taken 30 ms after a stamp 1 s old; the former rule — trusted once the lag
has not shrunk for CATCH_UP_BOUND — allowed that if 15 queued states took 0.25 s). A lag that
has not shrunk for ``NOT_CATCHING_UP_BOUND`` s is trusted as well: a stream that resumed at a
slower pace than the one learned looks the same, and a "start now" must not wait for ever.
"""
import math

import numpy as np

from ..core.errors import InputError
from .law import JointSample, Mode
from .limits import implausible_state, plausible_bounds

BEHIND_TOLERANCE = 0.05    # s (at the pace) a sample's stamp may lag the trusted line before it is behind
PACE_SLACK = 0.02          # relative uncertainty of the learned pace, widening the tolerance with the span
MAX_TOLERANCE = 0.1        # s (at the pace): the widest tolerance (a long stall must not widen it further)
PACE_RANGE = (0.125, 8.0)  # pair ratios (to the pace) that teach the pace (a stall's gap and a burst do not)
PACE_GAIN = 0.02           # weight of one pair in the pace (log-average over ~50 pairs)
CATCH_UP_BOUND = 0.25      # steady seconds of a constant lag, after which the stream is trusted
NOT_CATCHING_UP_BOUND = 1.0  # steady seconds of a lag that does not shrink, after which it is trusted


class MeasuredState:
    """Screening of the joint-state samples of ``model`` (module docstring); :meth:`set_bounds`
    before the first sample."""

    def __init__(self, model):
        self.model = model
        self.sample = None
        self.received = None
        self.advanced = None           # steady time of the last sample whose stamp advanced
        self.outside_since = None      # receipt time of the first of consecutive samples outside the limits
        self.pace = 1.0                # joint-state seconds per steady second (module docstring)
        self.trusted = None            # (stamp, steady receipt time) of the last trusted sample
        self.behind_since = None       # (lag, receipt time) when the lag of the behind samples last shrank
        self.constant_since = None     # (lag, receipt time) since which their lag has stayed within the tolerance
        self.state_bounds = self.plausible_bounds = self._position_bounds = None

    def set_bounds(self, bounds):
        """State bounds (lo, hi) (4n,) in the order q, q̇, q_m, q̇_m (:meth:`SafetyLimits.resolved`);
        they act from the next sample."""
        n = self.model.n
        self.state_bounds = bounds
        self.plausible_bounds = plausible_bounds(bounds)
        self._position_bounds = tuple(np.concatenate([b[:n], b[2 * n:3 * n]]) for b in bounds)

    def take(self, sample, received, validated, mode, recovering, state_timeout):
        """Screen ``sample`` received at steady time ``received`` [s] and make it the last valid one;
        returns (previous sample, the limit violation or "", whether its stamp advanced). InputError
        naming the field when it is rejected (nothing changes then). ``validated``: see
        :meth:`~.failsafe.FailSafeController.update_state`. Outside the limits, a sample is taken
        at once in OUT_OF_LIMITS or while ``recovering``."""
        checked = sample if validated else self.checked(sample)
        outside = self.violation(checked)
        if outside:
            if self.outside_since is None:
                self.outside_since = received
            if mode != Mode.OUT_OF_LIMITS and not recovering and received - self.outside_since < state_timeout:
                raise InputError(f"{outside} (taken as the measured state once such samples have come for "
                                 f"state_timeout = {state_timeout:g} s)")
        else:
            self.outside_since = None
        previous = self.sample
        self._judge(checked.t, received)
        self.sample, self.received = checked, received
        advanced = previous is None or checked.t != previous.t
        if advanced:
            self.advanced = received
        return previous, outside, advanced

    def adopt(self, sample, received):
        """``sample`` (checked by the caller, stamp advanced) received at ``received`` [s]."""
        self._judge(sample.t, received)
        self.sample = sample
        self.received = self.advanced = received

    @property
    def caught_up(self):
        """Whether the last sample is not behind the stream (module docstring)."""
        return self.behind_since is None

    def lag(self, stamp, received):
        """How far [s of stamp] a sample with ``stamp`` received at steady time ``received`` is
        behind the last trusted sample advanced at the pace, and the tolerance it is judged with."""
        t0, r0 = self.trusted
        span = received - r0
        return t0 + self.pace * span - stamp, self.pace * min(BEHIND_TOLERANCE + PACE_SLACK * span, MAX_TOLERANCE)

    def _judge(self, stamp, received):
        """Whether the sample (``stamp``, steady ``received``) is behind (module docstring); a trusted
        one teaches the pace from its gap to the previous sample when that pair is ordinary."""
        if self.sample is None:
            self.trusted = (stamp, received)
            return
        dt, dr = stamp - self.sample.t, received - self.received
        if dt <= 0.0:
            return
        lag, tolerance = self.lag(stamp, received)
        if lag <= tolerance:
            self.trusted, self.behind_since, self.constant_since = (stamp, received), None, None
            ratio = dt / dr / self.pace if dr > 0.0 else math.inf
            if PACE_RANGE[0] <= ratio <= PACE_RANGE[1]:
                self.pace *= ratio ** PACE_GAIN
        else:
            step = self.pace * BEHIND_TOLERANCE
            if self.behind_since is None or lag < self.behind_since[0] - step:
                self.behind_since = self.constant_since = (lag, received)      # catching up
            elif abs(lag - self.constant_since[0]) > step:
                self.constant_since = (lag, received)   # the lag grows: queued states taken slowly
            if (received - self.constant_since[1] > CATCH_UP_BOUND         # a constant lag: the stream paused
                    or received - self.behind_since[1] > NOT_CATCHING_UP_BOUND):
                self.trusted, self.behind_since, self.constant_since = (stamp, received), None, None

    def stale_reason(self, now, state_timeout):
        """Why the samples are stale at steady time ``now`` [s], or "" when they are not (or none came yet)."""
        if self.sample is None or now - self.advanced <= state_timeout:
            return ""
        if now - self.received <= state_timeout:
            return (f"joint-state stamp frozen at t={self.sample.t:.4f} s for {now - self.advanced:.3f} s "
                    f"(> {state_timeout:g} s)")
        return f"no valid joint state for {now - self.received:.3f} s (> {state_timeout:g} s)"

    def violation(self, sample):
        """"" when the sample's link and motor positions are within the limits (:attr:`state_bounds`),
        else the message naming the first position outside them."""
        lo, hi = self._position_bounds
        n = self.model.n
        q, q_m = sample.q, sample.q_m
        if (q >= lo[:n]).all() and (q <= hi[:n]).all() and (q_m >= lo[n:]).all() and (q_m <= hi[n:]).all():
            return ""
        return implausible_state(self.model, np.concatenate(sample[1:]), self.state_bounds).replace(
            "is implausible", "is outside the limits")

    def checked(self, sample):
        """Float copy of a sample; InputError naming the field if not finite, of the wrong size, or
        implausible (:attr:`plausible_bounds`)."""
        try:   # fast path (1 kHz): the four vectors in one array, one finiteness check
            block = np.array(sample[1:], dtype=float)
        except (ValueError, TypeError):
            block = None
        lo, hi = self.plausible_bounds
        if (block is not None and block.shape == (4, self.model.n) and math.isfinite(sample.t)
                and ((block.ravel() >= lo) & (block.ravel() <= hi)).all()):
            return JointSample(float(sample.t), *block)
        return self._checked_fields(sample)

    def _checked_fields(self, sample):
        """:meth:`checked` field by field, for the error message naming the field."""
        n = self.model.n
        arrays = {f: np.array(getattr(sample, f), dtype=float) for f in ("q", "qd", "q_m", "qd_m")}
        for f, a in arrays.items():
            if a.shape != (n,):
                raise InputError(f"{f}: expected {n} values, got shape {a.shape}")
            if not np.isfinite(a).all():
                raise InputError(f"{f}: contains NaN or inf")
        if not np.isfinite(sample.t):
            raise InputError("t: contains NaN or inf")
        problem = implausible_state(self.model, np.concatenate(list(arrays.values())), self.plausible_bounds)
        if problem:
            raise InputError(problem)
        return JointSample(float(sample.t), **arrays)

"""Wall-clock pacing of a simulation loop (ROS-free): one period of simulation time per
``period / real_time_factor`` of wall time (``real_time_factor`` 0: unpaced).

When the loop falls more than one period behind its schedule (the process or the machine was
stalled), :meth:`RealTimePacing.wait` re-anchors the schedule instead of running the missed periods
back to back: like Gazebo, the simulation then lags wall time by the stall, and a controller never
sees a burst of states faster than real time. Counts go to a ``stats`` dict shared with the caller:
``overrun_steps`` (steps that started more than one period behind the schedule), ``schedule_slips``
and ``slipped_s`` (re-anchorings and the wall time [s] given up by them).
"""
import time

from ..core.errors import FlexmodalError


def check_rates(rate_hz, integration_rate_hz, min_integration_rate_hz, real_time_factor, lockstep_timeout):
    """FlexmodalError naming the parameter: rate_hz > 0, integration_rate_hz >= the engine's
    minimum and a multiple of rate_hz, real_time_factor >= 0, lockstep_timeout_s > 0."""
    if not rate_hz > 0:
        raise FlexmodalError(f"rate_hz: must be > 0, got {rate_hz}")
    ratio = integration_rate_hz / rate_hz
    if integration_rate_hz < min_integration_rate_hz or abs(ratio - round(ratio)) > 1e-9:
        raise FlexmodalError(f"integration_rate_hz: must be >= {min_integration_rate_hz:g} and a "
                             f"multiple of rate_hz, got {integration_rate_hz}")
    if not real_time_factor >= 0:
        raise FlexmodalError(f"real_time_factor: must be >= 0 (0 = unpaced), got {real_time_factor}")
    if not lockstep_timeout > 0:
        raise FlexmodalError(f"lockstep_timeout_s: must be > 0, got {lockstep_timeout}")


class RealTimePacing:
    """The schedule of a loop advancing ``period`` [s] of simulation time per step at
    ``real_time_factor`` (module docstring)."""

    def __init__(self, period, real_time_factor, stats):
        self.period, self.rtf, self.stats = period, real_time_factor, stats
        self.pace = period / real_time_factor if real_time_factor > 0 else 0.0
        self.wall0 = time.monotonic()

    def anchor(self):
        """Simulation time 0 is now."""
        self.wall0 = time.monotonic()

    def scheduled(self, t):
        """Wall time at which simulation time ``t`` [s] is due, or None when unpaced."""
        return self.wall0 + t / self.rtf if self.rtf > 0 else None

    def published(self, published, scheduled, delays_us):
        """A state published at wall time ``published`` that was due at ``scheduled`` (None:
        unpaced): its delay [µs] into ``delays_us``, an overrun counted."""
        if scheduled is not None:
            delays_us.append(1e6 * (published - scheduled))
            self.stats["overrun_steps"] += published - scheduled > self.pace

    def wait(self, t, lock):
        """Sleep until simulation time ``t`` [s] is due; re-anchor when more than a period late
        (the counts taken under ``lock``)."""
        target = self.scheduled(t)
        if target is None:
            return
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif -delay > self.pace:     # stalled by more than a period: re-anchor, no burst catch-up
            self.wall0 -= delay
            with lock:
                self.stats["schedule_slips"] += 1
                self.stats["slipped_s"] -= delay

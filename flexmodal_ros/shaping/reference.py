"""Shaping of a C⁴ joint-space reference by a (time-varying) impulse sequence, exact derivatives.

Unshaped reference: a :class:`~flexmodal_ros.trajectory.PiecewiseC4Trajectory` q(t) (waypoints
joined by the rest-to-rest 9th-order profile (4.29)-(4.30), thesis T.T. Do 2021). Its *path
parameter* p(t) = k + η(s) on segment k (s = (t − t_k)/T_k) runs from 0 to m − 1 and has zero
derivatives 1..4 at every waypoint; the configuration is a function of p alone (a straight line in
joint space per segment).

Shaped reference (one time-varying shaper of N impulses, amplitudes A_i and delays τ_i):

    y(t) = Σ_i A_i(t) q(t − τ_i(t)),    Σ_i A_i(t) = 1 for every t,

where the shaper parameters at output time t are those designed for the modes of the configuration
of the unshaped reference at the same time, i.e. functions of p(t): each sampled along the path
(uniformly in η per segment) and interpolated per segment by a quintic spline in η (C⁴), so
A_i(t) = Â_i(p(t)) and τ_i(t) = τ̂_i(p(t)) are C⁴ in t with derivatives 1..4 zero at every
waypoint (chain rule through η). With constant parameters this is the classic convolution of the
reference with the impulse sequence. y is C⁴ and its derivatives up to the 4th are exact:

    d/dt q(u(t)) with u = t − τ_i(t):  q' u',  q'' u'² + q' u'',  q''' u'³ + 3 q'' u' u'' + q' u''',
    q'''' u'⁴ + 6 q''' u'² u'' + q'' (3 u''² + 4 u' u''') + q' u''''    (Faà di Bruno),

    y^(m) = Σ_i Σ_{j ≤ m} C(m, j) A_i^(j) [q(u_i)]^(m−j)    (Leibniz).

Before the start the parameters are those of the first configuration, after the end those of the
last: y rests at the first waypoint for t ≤ 0 and reaches the last one at t = duration = T +
max_i τ_i(T) (all copies at rest; the shaper's *added delay*), as Σ A_i = 1 there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..trajectory import PiecewiseC4Trajectory, eta
from ..validation import finite_array


def path_derivatives(path: PiecewiseC4Trajectory, t):
    """Exact (q, q', q'', q''', q'''') of ``path`` at times t (any shape): array t.shape + (5, n);
    and the path parameter (p, p', ..., p'''') : t.shape + (5,). Vectorized
    :meth:`PiecewiseC4Trajectory.sample`."""
    t = np.asarray(t, float)
    times, pos = path.times, path.positions
    flat = t.ravel()
    if times.size == 1:
        q = np.zeros((flat.size, 5, path.n))
        q[:, 0] = pos[0]
        p = np.zeros((flat.size, 5))
        return q.reshape(t.shape + (5, path.n)), p.reshape(t.shape + (5,))
    k = np.clip(np.searchsorted(times, flat, side="right") - 1, 0, times.size - 2)
    T = times[k + 1] - times[k]
    e = eta((flat - times[k]) / T)                                   # (5, m); clipped to [0, 1]
    e = e * T[None, :] ** -np.arange(5.0)[:, None]
    e[1:, (flat <= times[0]) | (flat >= times[-1])] = 0.0
    dq = pos[k + 1] - pos[k]                                          # (m, n)
    q = e.T[:, :, None] * dq[:, None, :]
    q[:, 0] += pos[k]
    p = e.T.copy()
    p[:, 0] += k
    return q.reshape(t.shape + (5, path.n)), p.reshape(t.shape + (5,))


def compose(outer, inner):
    """Derivatives 0..4 of f(g(t)) from outer = (f, f', f'', f''', f'''') evaluated at g(t) (shape
    (..., 5, *rest) with derivative axis 1 after the leading sample axis) and inner = (g, g', ...,
    g'''') (..., 5) (Faà di Bruno)."""
    f0, f1, f2, f3, f4 = (outer[:, j] for j in range(5))
    shape = (inner.shape[0],) + (1,) * (outer.ndim - 2)
    g1, g2, g3, g4 = (inner[:, j].reshape(shape) for j in range(1, 5))
    return np.stack([f0,
                     f1 * g1,
                     f2 * g1 ** 2 + f1 * g2,
                     f3 * g1 ** 3 + 3.0 * f2 * g1 * g2 + f1 * g3,
                     f4 * g1 ** 4 + 6.0 * f3 * g1 ** 2 * g2 + f2 * (3.0 * g2 ** 2 + 4.0 * g1 * g3) + f1 * g4],
                    axis=1)


def path_samples(path: PiecewiseC4Trajectory, rate_hz: float, minimum: int = 8):
    """Sample points of the path for the modal analysis: per segment k, max(minimum, ⌈rate_hz·T_k⌉
    + 1) values of η uniform in [0, 1] (uniform along the straight joint-space segment). Returns
    (segment index (m,), η (m,), configurations (m, n)); a single-waypoint path gives one sample."""
    if not (np.isfinite(rate_hz) and rate_hz > 0):
        raise InputError(f"ama_rate_hz: must be > 0, got {rate_hz}")
    if path.times.size == 1:
        return np.zeros(1, int), np.zeros(1), path.positions[:1].copy()
    seg, etas = [], []
    for k, T in enumerate(np.diff(path.times)):
        count = max(minimum, int(math.ceil(rate_hz * T)) + 1)
        seg.append(np.full(count, k))
        etas.append(np.linspace(0.0, 1.0, count))
    seg, etas = np.concatenate(seg), np.concatenate(etas)
    dq = path.positions[seg + 1] - path.positions[seg]
    return seg, etas, path.positions[seg] + etas[:, None] * dq


@dataclass(frozen=True)
class ShaperSchedule:
    """A time-varying shaper along a path: per sample (segment index, η) the impulse ``amplitudes``
    and ``delays`` [s] (m, N) (one designed shaper per sample, fixed impulse order), ``kind``.
    Interpolated per segment by quintic splines in η (module docstring)."""
    segment: np.ndarray
    eta: np.ndarray
    amplitudes: np.ndarray
    delays: np.ndarray
    kind: str

    def __post_init__(self):
        if self.amplitudes.shape != self.delays.shape or self.amplitudes.shape[0] != self.eta.size:
            raise InputError("shaper schedule: amplitudes, delays and samples disagree in size")
        splines = []
        from scipy.interpolate import make_interp_spline
        values = np.concatenate([self.amplitudes, self.delays], axis=1)
        for k in range(int(self.segment.max()) + 1):
            rows = self.segment == k
            x, y = self.eta[rows], values[rows]
            if x.size < 6 or np.any(np.diff(x) <= 0):
                raise InputError(f"shaper schedule: segment {k} needs >= 6 increasing samples, got {x.size}")
            splines.append(make_interp_spline(x, y, k=5))
        object.__setattr__(self, "_splines", splines)

    @property
    def num_impulses(self) -> int:
        return int(self.amplitudes.shape[1])

    def parameters(self, p):
        """(A, τ) and their derivatives with respect to the path parameter p (m, 5) ... at path
        parameters p (m,): arrays (m, 5, N) each (derivative orders 0..4)."""
        p = np.asarray(p, float)
        last = len(self._splines) - 1
        k = np.clip(np.floor(p).astype(int), 0, last)
        x = np.clip(p - k, 0.0, 1.0)
        out = np.empty((p.size, 5, 2 * self.num_impulses))
        for seg in np.unique(k):
            rows = k == seg
            spline = self._splines[seg]
            for order in range(5):
                out[rows, order] = spline(x[rows], nu=order)
        N = self.num_impulses
        return out[:, :, :N], out[:, :, N:]

    def at_times(self, path: PiecewiseC4Trajectory, t):
        """(A, τ) with their time derivatives 0..4 at times t (m,): (m, 5, N) each; constant (the
        first / last sample) outside the path's time span."""
        _, p = path_derivatives(path, t)
        A, tau = self.parameters(p[:, 0])
        return compose(A, p), compose(tau, p)


class ShapedTrajectory:
    """The shaped reference y(t) = Σ_i A_i(t) q(t − τ_i(t)) of a waypoint path (module docstring).

    Same interface as :class:`~flexmodal_ros.trajectory.PiecewiseC4Trajectory` where the
    controller uses it: ``times`` / ``positions`` (the unshaped waypoints), ``n``, ``duration``
    (including the added delay), ``sample(t)``; plus :meth:`evaluate` (exact, vectorized),
    ``added_delay`` [s], ``schedule`` and ``summary`` (a one-line description).

    ``table_rate_hz``: if given, y and its derivatives are tabulated at that rate from t = 0 to
    the end at construction, and :meth:`sample` reads the table (4th-order Taylor expansion from
    the nearest tabulated time: exact at the tabulated times, which a fixed-rate controller hits).
    """

    explicit = True       # the controller feeds the derivatives to the law (no segment form)

    def __init__(self, path: PiecewiseC4Trajectory, schedule: ShaperSchedule, summary: str = "",
                 table_rate_hz: float | None = None):
        self.path, self.schedule, self.summary = path, schedule, summary
        self.times, self.positions = path.times, path.positions
        A_end, tau_end = schedule.at_times(path, np.array([path.duration]))
        self.final_delays = tau_end[0, 0]
        self.final_amplitudes = A_end[0, 0]
        self.added_delay = float(self.final_delays.max())
        self.duration = path.duration + self.added_delay
        self._table = self._rate = None
        if table_rate_hz is not None:
            if not (np.isfinite(table_rate_hz) and table_rate_hz > 0):
                raise InputError(f"rate_hz: must be > 0, got {table_rate_hz}")
            self._rate = float(table_rate_hz)
            count = int(math.ceil(self.duration * self._rate)) + 2
            self._table = self.evaluate(np.arange(count) / self._rate)
            self._taylor = np.array([[1.0 / math.factorial(j - i) if j >= i else 0.0 for j in range(5)]
                                     for i in range(5)])

    @property
    def n(self):
        return self.path.n

    def evaluate(self, t):
        """Exact (y, y', y'', y''', y'''') at times t (m,): array (m, 5, n) [rad or m, per s^k]."""
        t = np.atleast_1d(np.asarray(t, float))
        A, tau = self.schedule.at_times(self.path, t)                  # (m, 5, N)
        out = np.zeros((t.size, 5, self.n))
        binom = [[math.comb(m, j) for j in range(m + 1)] for m in range(5)]
        for i in range(self.schedule.num_impulses):
            u = -tau[:, :, i]
            u[:, 0] += t
            u[:, 1] += 1.0
            q, _ = path_derivatives(self.path, u[:, 0])
            g = compose(q, u)                                           # (m, 5, n)
            a = A[:, :, i]
            for m in range(5):
                for j in range(m + 1):
                    out[:, m] += binom[m][j] * a[:, j, None] * g[:, m - j]
        return out

    def sample(self, t):
        """(q, q', q'', q''', q'''') at the scalar time t [s], each (n,) (table + Taylor when
        tabulated, else exact)."""
        t = float(t)
        if not np.isfinite(t):
            raise InputError(f"t: must be finite, got {t}")
        if self._table is None:
            return tuple(self.evaluate([t])[0])
        j = min(max(int(round(t * self._rate)), 0), self._table.shape[0] - 1)
        delta = t - j / self._rate
        if delta == 0.0:
            row = self._table[j]
        else:
            row = (self._taylor * delta ** np.maximum(np.arange(5)[None, :] - np.arange(5)[:, None], 0)) @ self._table[j]
        return tuple(row)


def shape_with(path: PiecewiseC4Trajectory, shaper, table_rate_hz=None) -> ShapedTrajectory:
    """``path`` convolved with one fixed impulse sequence ``shaper``
    (:class:`~flexmodal_ros.shaping.shapers.Shaper` without batch axes): fixed-frequency shaping,
    y(t) = Σ_i A_i q(t − t_i)."""
    amps, delays = np.asarray(shaper.amplitudes, float), np.asarray(shaper.times, float)
    if amps.ndim != 1:
        raise InputError(f"shaper: expected one impulse sequence, got a batch of shape {amps.shape[:-1]}")
    if path.times.size < 2:
        raise InputError("trajectory: at least 2 waypoints are needed to shape a motion")
    segments = path.times.size - 1
    eta_nodes = np.tile(np.linspace(0.0, 1.0, 6), segments)
    segment = np.repeat(np.arange(segments), 6)
    schedule = ShaperSchedule(segment, eta_nodes, np.tile(amps, (segment.size, 1)),
                              np.tile(delays, (segment.size, 1)), shaper.kind)
    return ShapedTrajectory(path, schedule, f"shaped {shaper.kind} (fixed impulse sequence), added delay "
                                            f"{delays.max():.4f} s", table_rate_hz)

"""Shaping of a C⁴ joint-space reference by a (time-varying) impulse sequence, exact derivatives.

Unshaped reference: a :class:`~flexmodal_ros.robot.trajectory.PiecewiseC4Trajectory` q(t) (waypoints
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
from dataclasses import dataclass, field

import numpy as np

from ..core.blas import single_thread_blas
from ..core.errors import InputError
from ..robot.trajectory import HermiteC4, PiecewiseC4Trajectory, eta


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
    k = _segments(times, flat)
    spans = np.diff(times)
    T = spans[k]
    e = eta((flat - times[k]) / T)                                   # (5, m); clipped to [0, 1]
    e *= (spans[None, :] ** -np.arange(5.0)[:, None])[:, k]          # T_k^-j, one power per segment
    e[1:, (flat <= times[0]) | (flat >= times[-1])] = 0.0
    dq = pos[k + 1] - pos[k]                                          # (m, n)
    q = e.T[:, :, None] * dq[:, None, :]
    q[:, 0] += pos[k]
    p = e.T.copy()
    p[:, 0] += k
    return q.reshape(t.shape + (5, path.n)), p.reshape(t.shape + (5,))


def _segments(times, u):
    """Segment index k of the waypoint times ``times`` at each time of ``u`` (1-D): the last
    waypoint at or before it, within 0 .. len(times) − 2."""
    if times.size == 2:                      # one segment
        return np.zeros(u.shape, np.intp)
    k = np.searchsorted(times, u, side="right") - 1
    return np.minimum(np.maximum(k, 0, out=k), times.size - 2, out=k)


def compose(outer, inner):
    """Derivatives 0..4 of f(g(t)) (Faà di Bruno) from outer = (f, f', ..., f'''') at g(t), shape
    (m, 5, *rest), and inner = (g, g', ..., g''''), shape (m, 5) or (m, 5, *rest) (broadcast)."""
    orders = outer.shape[1]          # fewer than 5 (m, k, *rest): only the derivatives 0..k − 1
    f = [outer[:, j] for j in range(orders)] + [None] * (5 - orders)
    extra = (1,) * (outer.ndim - inner.ndim)
    g1, g2, g3, g4 = (inner[:, j].reshape(inner[:, j].shape + extra) for j in range(1, 5))
    terms = [lambda: f[0],
             lambda: f[1] * g1,
             lambda: f[2] * g1 ** 2 + f[1] * g2,
             lambda: f[3] * g1 ** 3 + 3.0 * f[2] * g1 * g2 + f[1] * g3,
             lambda: f[4] * g1 ** 4 + 6.0 * f[3] * g1 ** 2 * g2 + f[2] * (3.0 * g2 ** 2 + 4.0 * g1 * g3) + f[1] * g4]
    return np.stack([term() for term in terms[:orders]], axis=1)


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
        # deferred: scipy.interpolate
        from scipy.interpolate import make_interp_spline
        values = np.concatenate([self.amplitudes, self.delays], axis=1)
        constant = bool(np.all(values == values[:1]))
        for k in range(int(self.segment.max()) + 1):
            rows = self.segment == k
            x, y = self.eta[rows], values[rows]
            if x.size < 6 or np.any(np.diff(x) <= 0):
                raise InputError(f"shaper schedule: segment {k} needs >= 6 increasing samples, got {x.size}")
            if not constant:               # a constant schedule's splines are its first row (fitted on demand)
                splines.append(make_interp_spline(x, y, k=5))
        object.__setattr__(self, "_splines", splines if not constant else None)
        object.__setattr__(self, "constant", constant)
        object.__setattr__(self, "_first", values[0].copy())

    constant: bool = field(init=False, default=False)      # one impulse sequence along the whole path

    @property
    def num_impulses(self) -> int:
        return int(self.amplitudes.shape[1])

    def parameters(self, p, orders=5):
        """(A, τ) and their derivatives with respect to the path parameter p (m, 5) ... at path
        parameters p (m,): arrays (m, orders, N) each (derivative orders 0..orders − 1, default
        0..4)."""
        p = np.asarray(p, float)
        if self.constant:                  # the values everywhere, derivatives 0
            out = np.zeros((p.size, orders, self._first.size))
            out[:, 0] = self._first
            N = self.num_impulses
            return out[:, :, :N], out[:, :, N:]
        if self._splines is None:          # marked time-varying after construction (tests of the general path)
            # deferred: scipy.interpolate
            from scipy.interpolate import make_interp_spline
            values = np.concatenate([self.amplitudes, self.delays], axis=1)
            object.__setattr__(self, "_splines", [make_interp_spline(self.eta[self.segment == k], values[self.segment == k],
                                                                     k=5) for k in range(int(self.segment.max()) + 1)])
        last = len(self._splines) - 1
        k = np.clip(np.floor(p).astype(int), 0, last)
        x = np.clip(p - k, 0.0, 1.0)
        out = np.empty((p.size, orders, 2 * self.num_impulses))
        if last == 0:                      # one segment: no row selection
            for order in range(orders):
                out[:, order] = self._splines[0](x, nu=order)
        else:
            for seg in np.unique(k):
                rows = k == seg
                spline = self._splines[seg]
                for order in range(orders):
                    out[rows, order] = spline(x[rows], nu=order)
        N = self.num_impulses
        return out[:, :, :N], out[:, :, N:]

    def at_times(self, path: PiecewiseC4Trajectory, t):
        """(A, τ) with their time derivatives 0..4 at times t (m,): (m, 5, N) each; constant (the
        first / last sample) outside the path's time span."""
        _, p = path_derivatives(path, t)
        A, tau = self.parameters(p[:, 0])
        return compose(A, p), compose(tau, p)


DEFAULT_KNOT_RATE_HZ = 200.0


class ShapedTrajectory:
    """The shaped reference y(t) = Σ_i A_i(t) q(t − τ_i(t)) of a waypoint path (module docstring).

    Same interface as :class:`~flexmodal_ros.robot.trajectory.PiecewiseC4Trajectory` where the
    controller uses it: ``times`` / ``positions`` (the unshaped waypoints), ``n``, ``duration``
    (including the added delay), ``sample(t)``; plus :meth:`evaluate` (exact, vectorized),
    ``added_delay`` [s], ``schedule`` and ``summary`` (a one-line description); ``design``
    (:class:`~flexmodal_ros.shaping.shaper_design.DesignChoice`) and ``path_modes`` when made by
    :func:`~flexmodal_ros.shaping.shaper_design.shape_with_design`.

    ``knot_rate_hz``: if given, :meth:`sample` (what a control cycle calls) reads a piecewise
    polynomial built at construction (:class:`~flexmodal_ros.robot.trajectory.HermiteC4`): y and
    its derivatives 0..4 are evaluated exactly at knots every 1/knot_rate_hz s plus the instants where a copy of the path starts or stops a segment
    (t − τ_i(t) = a waypoint time: where y⁽⁵⁾ jumps), and each interval between knots holds the
    degree-9 polynomial matching all of them at both ends (two-point Hermite). It is C⁴, its
    derivatives are exactly those of one function, it equals y with derivatives at the knots, and
    in between y is smooth (C^∞ apart from the parameter splines' knots), so the interpolation
    error is far below the controller's resolution (~1e-9 of the position). Without it,
    :meth:`sample` evaluates y exactly (slower: benchmarks/bench_shaping.py).
    """

    explicit = True       # the controller feeds the derivatives to the law (no segment form)

    def __init__(self, path: PiecewiseC4Trajectory, schedule: ShaperSchedule, summary: str = "",
                 knot_rate_hz: float | None = None):
        self.path, self.schedule, self.summary = path, schedule, summary
        self.design = self.path_modes = None     # set by shaper_design.shape_with_design
        self.times, self.positions = path.times, path.positions
        A_end, tau_end = schedule.at_times(path, np.array([path.duration]))
        self.final_delays = tau_end[0, 0]
        self.final_amplitudes = A_end[0, 0]
        self.added_delay = float(self.final_delays.max())
        self.duration = path.duration + self.added_delay
        self._knots = None
        if knot_rate_hz is not None:
            if not (np.isfinite(knot_rate_hz) and knot_rate_hz > 0):
                raise InputError(f"knot_rate_hz: must be > 0, got {knot_rate_hz}")
            self._build_polynomial(float(knot_rate_hz))

    @property
    def n(self):
        return self.path.n

    def segment_starts(self):
        """Times t [s] at which a copy of the path passes a waypoint time, t − τ_i(t) = t_k (m·N,),
        by Newton's method on t − τ_i(t) − t_k (|τ_i'| ≪ 1; stops at 1e-13 s, a few steps)."""
        N = self.schedule.num_impulses
        if self.schedule.constant:           # fixed delays: t = t_k + τ_i exactly
            return (self.path.times[:, None] + self.schedule.delays[0][None, :]).ravel()
        base = np.repeat(self.path.times, N)
        which = np.tile(np.arange(N), self.path.times.size)
        rows = np.arange(base.size)
        t = base.copy()
        for _ in range(8):
            _, tau = self.schedule.at_times(self.path, t)
            step = (t - tau[rows, 0, which] - base) / (1.0 - tau[rows, 1, which])
            t = t - step
            if np.abs(step).max() < 1e-13:
                break
        return t

    @single_thread_blas          # small products over ~1000 knots: BLAS threads only cost (flexmodal_ros.core.blas)
    def _build_polynomial(self, rate):
        grid = np.arange(int(math.ceil(self.duration * rate)) + 1) / rate
        kinks = self.segment_starts()
        kinks = np.unique(np.r_[kinks[(kinks > 0.0) & (kinks < self.duration)], 0.0, self.duration])
        # grid knots closer than a fifth of the spacing to a kink are dropped (short intervals
        # would amplify round-off in the derivatives by h⁻⁴)
        near = np.abs(grid[:, None] - kinks[None, :]).min(axis=1) < 0.2 / rate
        knots = np.unique(np.r_[grid[~near], kinks])
        self._polynomial = HermiteC4(knots, self.evaluate(knots))
        self._knots = knots

    @single_thread_blas
    def evaluate(self, t, orders=5):
        """Exact (y, y', y'', y''', y'''') at times t (m,): array (m, 5, n) [rad or m, per s^k]
        (the first ``orders`` of them: (m, orders, n)).

        On segment k the path is q_k + Δq_k η(s), so copy i contributes A_i (q_k + Δq_k e_i) with
        the scalar e_i(t) = η(s(t − τ_i(t))): the Leibniz and Faà di Bruno products are formed on
        scalars per impulse and summed per segment before the few outer products with q_k, Δq_k.
        The chain rule through p(t) is :func:`compose`; the products are :meth:`_combine`.
        """
        t = np.atleast_1d(np.asarray(t, float))
        _, p = path_derivatives(self.path, t)
        A, tau = self.schedule.parameters(p[:, 0], orders=max(orders, 2))   # (m, orders, N), d^j/dp^j
        return self._combine(t, compose(A, p), compose(tau, p), orders)

    def _combine(self, t, A, tau, orders=5):
        """The products: y and its derivatives (m, 5, n) at times t
        (m,) from the impulse amplitudes A and delays tau with their time derivatives (m, 5, N)."""
        N = self.schedule.num_impulses
        u = -tau
        u[:, 0] += t[:, None]
        u[:, 1] += 1.0                                                  # u_i = t − τ_i and its derivatives
        times, pos = self.path.times, self.path.positions
        flat = u[:, 0].ravel()
        seg = _segments(times, flat)
        T = np.diff(times)
        scale = ((1.0 / T)[:, None] ** np.arange(5.0)).T                # (5, segments): T_k⁻ʲ
        e = eta((flat - times[seg]) / T[seg])                           # (5, m·N)
        e *= scale[:, seg]
        e[1:, (flat <= times[0]) | (flat >= times[-1])] = 0.0
        e = np.moveaxis(e.reshape(5, t.size, N), 0, 1)[:, :orders]      # (m, orders, N): d^j η / du^j
        if self.schedule.constant:                                     # u' = 1, A' = 0: d^m (A_i e_i) = A_i e_i^(m)
            weight = A[:, :1] * e
        else:
            if u.shape[1] < 5:                                          # compose reads u's derivatives 1..4
                u = np.concatenate([u, np.zeros((u.shape[0], 5 - u.shape[1], N))], axis=1)
            c = compose(e, u)                                           # (m, orders, N): d^j e_i / dt^j
            weight = np.zeros_like(c)                                   # d^m (A_i e_i) / dt^m
            for m in range(orders):
                for j in range(m + 1):
                    weight[:, m] += math.comb(m, j) * A[:, j] * c[:, m - j]
        seg = seg.reshape(t.size, N)
        out = weight @ np.diff(pos, axis=0)[seg]                        # (m, orders, N) @ (m, N, n)
        out += A[:, :orders] @ pos[seg]
        return out

    def sample(self, t):
        """(q, q', q'', q''', q'''') at the scalar time t [s], each (n,): the piecewise polynomial
        when built (``knot_rate_hz``), else the exact value."""
        t = float(t)
        if not np.isfinite(t):
            raise InputError(f"t: must be finite, got {t}")
        if self._knots is None:
            return tuple(self.evaluate([t])[0])
        return self._polynomial.sample(t)


def shape_with(path: PiecewiseC4Trajectory, shaper, knot_rate_hz=None) -> ShapedTrajectory:
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
                                            f"{delays.max():.4f} s", knot_rate_hz)

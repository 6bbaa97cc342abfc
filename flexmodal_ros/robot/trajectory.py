"""C⁴ joint trajectories for the flexible-joint feedforward (thesis T.T. Do 2021, §4.4.5).

The feedforward (4.6)-(4.10) needs q, q', q'', q''' and q'''' (τ'' depends on q⁽⁴⁾), so
references must be four times continuously differentiable. Point to point, the thesis uses
(4.29)-(4.30):

    q(t) = q0 + (qf - q0) η(t/T),   η(s) = 70 s⁹ - 315 s⁸ + 540 s⁷ - 420 s⁶ + 126 s⁵,

with η'(s) = 630 s⁴ (1 - s)⁴, so derivatives 1..4 vanish at both ends (4.31)-(4.32).
:class:`PiecewiseC4Trajectory` joins waypoints with such rest-to-rest segments (timed by the
waypoints' time_from_start), which keeps the whole reference C⁴.

Units: t, T in s; q in rad (revolute) or m (prismatic); derivatives per s^k.
"""
import math

import numpy as np

from ..core.errors import InputError
from ..core.validation import finite_array, finite_vector

# KUKA LWR4 example of thesis §4.4.4 (notes_003 §5): T = 3 s, q0 -> qf [rad].
THESIS_LWR4_T = 3.0
THESIS_LWR4_Q0 = np.array([-np.pi / 4, -np.pi / 4, np.pi / 4, np.pi / 4, -np.pi / 4, -2 * np.pi / 3, np.pi / 4])
THESIS_LWR4_QF = np.array([5 * np.pi / 6, 2 * np.pi / 3, -5 * np.pi / 6, -2 * np.pi / 3, 3 * np.pi / 4, np.pi / 2,
                           -3 * np.pi / 4])

# Coefficients of η(s) (4.30), highest power first, and of its derivatives 1..4 (exact integers).
_ETA = [np.array([70.0, -315.0, 540.0, -420.0, 126.0, 0.0, 0.0, 0.0, 0.0, 0.0])]
for _ in range(4):
    _ETA.append(np.polyder(_ETA[-1]))
ETA_COEFFICIENTS = np.array([np.pad(c, (10 - c.size, 0)) for c in _ETA])   # (5, 10), highest power first
_POWERS = np.arange(9.0, -1.0, -1.0)
ETA_ASCENDING = np.ascontiguousarray(ETA_COEFFICIENTS[:, ::-1])                 # (5, 10), lowest power first


def _peak(coeffs):
    """max |p(s)| over s in [0, 1] of the polynomial ``coeffs`` (at its stationary points or ends)."""
    roots = np.roots(np.polyder(coeffs))
    candidates = [0.0, 1.0] + [r.real for r in roots if abs(r.imag) < 1e-12 and 0.0 <= r.real <= 1.0]
    return max(abs(np.polyval(coeffs, s)) for s in candidates)


# max |η'| = 630/256 (at s = 1/2) and max |η''| ≈ 9.372 over [0, 1]: peak speed and acceleration of a
# segment are these times |Δq|/T and |Δq|/T².
ETA_PEAKS = (_peak(ETA_COEFFICIENTS[1]), _peak(ETA_COEFFICIENTS[2]))
_DERIVATIVE_ORDERS = np.arange(5.0)


def eta(s):
    """η(s) and its derivatives dᵏη/dsᵏ, k = 0..4, at s in [0, 1] (4.30); array of shape (5,) + s.shape.

    Integer coefficients make η(0) = 0, η(1) = 1 and all derivatives 1..4 at s = 0 and s = 1
    exactly zero in floating point (every partial sum is an exact integer there). The powers s^k
    are running products (cheaper than ``numpy.power``; exact at s = 0 and 1 as well).
    """
    s = np.clip(np.asarray(s, dtype=float), 0.0, 1.0)
    powers = np.empty((10,) + s.shape)                  # power-major: contiguous running products
    powers[0, ...] = 1.0
    powers[1, ...] = s
    for k in range(2, 10):
        np.multiply(powers[k - 1, ...], s, out=powers[k, ...])
    return (ETA_ASCENDING @ powers.reshape(10, -1)).reshape((5,) + s.shape)


def point_to_point(q0, qf, T, t):
    """Rest-to-rest 9th-order profile (4.29)-(4.32) from q0 to qf in T seconds, sampled at t.

    Returns (q, qd, qdd, q3, q4): each of shape (n,) for a scalar t, (len(t), n) for an array t.
    Outside [0, T] the robot rests at q0 (t < 0) or qf (t > T).
    """
    q0 = finite_vector(q0, None, "q0")
    qf = finite_vector(qf, q0.size, "qf")
    T = float(finite_array(T, "T", ()))
    if T <= 0:
        raise InputError(f"T: duration must be > 0 s, got {T:g}")
    t = finite_array(t, "t")
    if t.ndim > 1:
        raise InputError(f"t: expected a scalar or a 1-D array, got shape {t.shape}")
    e = eta(t / T)                                        # (5,) or (5, m)
    scale = T ** -_DERIVATIVE_ORDERS                      # dᵏ/dtᵏ = T⁻ᵏ dᵏ/dsᵏ
    dq = qf - q0
    derivs = [np.multiply.outer(e[k] * scale[k], dq) for k in range(5)]
    derivs[0] = derivs[0] + q0
    return tuple(derivs)


MAX_WAYPOINTS = 1000   # waypoints of one trajectory: the controller's default max_trajectory_points,
                       # and the bound of trajectory files (flexmodal shape / simulate --trajectory)


class PiecewiseC4Trajectory:
    """Waypoints joined by rest-to-rest C⁴ segments (4.29)-(4.30), e.g. from a JointTrajectory.

    ``times`` (m,) strictly increasing, finite [s] (time_from_start); ``positions`` (m, n) finite.
    Between waypoints k and k+1 the profile runs from positions[k] to positions[k+1] in
    times[k+1] - times[k]; velocities to snap are zero at every waypoint, so the trajectory is C⁴.
    Before times[0] it rests at positions[0], after times[-1] at positions[-1].
    """

    def __init__(self, times, positions):
        self.times = finite_array(times, "times", (None,))
        if self.times.size == 0:
            raise InputError("times: at least one waypoint is required")
        bad = np.flatnonzero(np.diff(self.times) <= 0)
        if bad.size:
            k = int(bad[0])
            raise InputError(f"times: must be strictly increasing, but times[{k + 1}] = "
                             f"{self.times[k + 1]:g} <= times[{k}] = {self.times[k]:g}")
        self.positions = finite_array(positions, "positions", (self.times.size, None))
        self.times.setflags(write=False)
        self.positions.setflags(write=False)

    @property
    def n(self):
        """Number of joints."""
        return self.positions.shape[1]

    @property
    def duration(self):
        """times[-1] [s]."""
        return float(self.times[-1])

    def peak_rates(self):
        """(peak |q̇|, peak |q̈|) of every segment, each (m-1, n) [per s, per s²] (ETA_PEAKS)."""
        dq = np.abs(np.diff(self.positions, axis=0))
        T = np.diff(self.times)[:, None]
        return ETA_PEAKS[0] * dq / T, ETA_PEAKS[1] * dq / T ** 2

    def segment_index(self, t):
        """Index k of the segment from waypoint k to k+1 that holds time t [s] (times[k] <= t <
        times[k+1]); -1 before the first waypoint, m-1 from the last one on."""
        return int(np.searchsorted(self.times, t, side="right")) - 1

    def sample(self, t):
        """(q, qd, qdd, q3, q4) at the scalar time t [s], each of shape (n,) (cheap: no re-validation
        of the waypoints, suitable for a 1 kHz control loop)."""
        t = float(t)
        if not np.isfinite(t):
            raise InputError(f"t: must be finite, got {t}")
        times, pos = self.times, self.positions
        k = self.segment_index(t)
        if k < 0 or k >= times.size - 1:
            zero = np.zeros(self.n)
            return (pos[max(k, 0)].copy(), zero, zero.copy(), zero.copy(), zero.copy())
        T = times[k + 1] - times[k]
        e = ETA_COEFFICIENTS @ ((t - times[k]) / T) ** _POWERS * T ** -_DERIVATIVE_ORDERS   # η⁽ᵏ⁾(s) / Tᵏ
        dq = pos[k + 1] - pos[k]
        return (pos[k] + e[0] * dq, e[1] * dq, e[2] * dq, e[3] * dq, e[4] * dq)


# Interval polynomials (two-point Hermite, degree 9): the 4th-order Taylor polynomial of y at the
# left knot plus s⁵ Q(s), Q of degree 4 fitted to the right knot's residuals (s = (t − a)/h).
# Stored this way the snap is not a 1e-7-level difference of position-sized coefficients.
_TAYLOR = np.array([[1.0 / math.factorial(j - k) if j >= k else 0.0 for j in range(5)] for k in range(5)])
_TAIL_POWERS = np.arange(5, 10)
_TAIL_FALLING = np.array([[math.perm(p, k) for p in _TAIL_POWERS] for k in range(5)], float)   # p!/(p−k)!
_TAIL_INV = np.linalg.inv(_TAIL_FALLING)                        # d^k/ds^k Σ c_p s^p at s = 1 → c
_TAIL_EXPONENT = _TAIL_POWERS[None, :] - np.arange(5)[:, None]
_STEP_EXPONENT = np.maximum(np.arange(5)[None, :] - np.arange(5)[:, None], 0)


class HermiteC4:
    """C⁴ piecewise polynomial through given values and derivatives 0..4 at knots: on each interval
    the degree-9 polynomial matching all of them at both ends (two-point Hermite), so it equals
    them at the knots and its derivatives are exactly those of one function. ``knots`` (K,)
    strictly increasing [s]; ``values`` (K, 5, n): y and its derivatives 1..4 at the knots.
    Outside the knots: the first / last position with zero derivatives (a reference at rest).
    :meth:`sample` is what a control cycle calls (its cost: benchmarks/bench_shaping.py)."""

    def __init__(self, knots, values):
        knots = np.asarray(knots, float)
        Y = np.asarray(values, float)
        h = np.diff(knots)
        steps = h[:, None, None] ** _STEP_EXPONENT[None]                # (K-1, 5, 5): h^(j−k)
        taylor_b = np.einsum("ikj,ijn->ikn", steps * _TAYLOR[None], Y[:-1])   # left Taylor at the right knot
        residual = (Y[1:] - taylor_b) * (h[:, None] ** np.arange(5.0))[:, :, None]     # d^k/ds^k at s = 1
        self._tail = np.einsum("pk,ikn->ipn", _TAIL_INV, residual)     # (K-1, 5, n): c_5..c_9
        self.knots, self._left, self._h, self._last = knots, Y[:-1], h, 0
        self._rest = (Y[0], Y[-1])

    def sample(self, t):
        """(y, y', y'', y''', y'''') at the scalar time t [s], each (n,)."""
        knots = self.knots
        if t <= knots[0] or t >= knots[-1]:
            rest = self._rest[0] if t <= knots[0] else self._rest[1]
            out = np.zeros_like(rest)
            out[0] = rest[0]
            return tuple(out)
        j = self._last
        if not knots[j] <= t < knots[j + 1]:
            j = self._last = int(np.searchsorted(knots, t, side="right")) - 1
        h, delta = self._h[j], t - knots[j]
        rows = (_TAYLOR * delta ** _STEP_EXPONENT) @ self._left[j]      # Taylor polynomial at the left knot
        basis = _TAIL_FALLING * (delta / h) ** _TAIL_EXPONENT           # d^k s^p / ds^k, p = 5..9
        rows += (basis @ self._tail[j]) * ((1.0 / h) ** np.arange(5.0))[:, None]
        return tuple(rows)


class SampledC4Trajectory(PiecewiseC4Trajectory):
    """A reference given as samples: ``times`` (m,) strictly increasing [s], ``positions``,
    ``velocities`` and ``accelerations`` (m, n) (e.g. a shaped trajectory from the modal server's
    ``~/shape_trajectory``, or a planner's time-parameterized path: a JointTrajectory with
    velocities and accelerations), tracked through its C⁴ interpolation: :class:`HermiteC4` with
    the given derivatives 0..2, and jerk and snap at the samples from the accelerations by
    second-order finite differences on the non-uniform grid (q⁽³⁾_i: the derivative of the
    parabola through a_{i−1}, a_i, a_{i+1}; q⁽⁴⁾_i = 2[(a_{i+1} − a_i)/h_i − (a_i − a_{i−1})/h_{i−1}]
    / (h_{i−1} + h_i); at an end where the reference rests (zero velocity and acceleration) zero,
    else one-sided). Samples of a smooth reference every h reproduce its jerk to O(h²) (a shaped
    reference's snap has kinks where a copy of the path starts or stops a segment: between
    samples the difference is larger; on the README kuka move with the feedforward law, 1 kHz
    samples leave the residual of the exact shaped reference to 0.3 %, 200 Hz ones to 7 %); samples
    with zero velocities and accelerations give the rest-to-rest segments of
    :class:`PiecewiseC4Trajectory` exactly. ``explicit``: the control law takes the derivatives
    as given (no segment form)."""

    explicit = True

    def __init__(self, times, positions, velocities, accelerations):
        super().__init__(times, positions)
        m, n = self.positions.shape
        self.velocities = finite_array(velocities, "velocities", (m, n))
        self.accelerations = finite_array(accelerations, "accelerations", (m, n))
        Y = np.zeros((m, 5, n))
        Y[:, 0], Y[:, 1], Y[:, 2] = self.positions, self.velocities, self.accelerations
        if m >= 3:
            a, h = self.accelerations, np.diff(self.times)[:, None]
            hl, hr = h[:-1], h[1:]
            Y[1:-1, 3] = (-hr / (hl * (hl + hr)) * a[:-2] + (hr - hl) / (hl * hr) * a[1:-1]
                          + hl / (hr * (hl + hr)) * a[2:])
            Y[1:-1, 4] = 2.0 * ((a[2:] - a[1:-1]) / hr - (a[1:-1] - a[:-2]) / hl) / (hl + hr)
            for end, inner in ((0, 1), (m - 1, m - 2)):
                if np.any(self.velocities[end] != 0) or np.any(a[end] != 0):
                    Y[end, 3] = (a[inner] - a[end]) / (self.times[inner] - self.times[end])
                    Y[end, 4] = Y[inner, 4]
        self._polynomial = HermiteC4(self.times, Y) if m >= 2 else None
        self.velocities.setflags(write=False)
        self.accelerations.setflags(write=False)

    def peak_rates(self):
        """(peak |q̇|, peak |q̈|) of every interval, each (m-1, n): the larger of its two samples'."""
        v, a = np.abs(self.velocities), np.abs(self.accelerations)
        return np.maximum(v[:-1], v[1:]), np.maximum(a[:-1], a[1:])

    def sample(self, t):
        """(q, q', q'', q''', q'''') at the scalar time t [s], each (n,)."""
        t = float(t)
        if not np.isfinite(t):
            raise InputError(f"t: must be finite, got {t}")
        if self._polynomial is None:
            zero = np.zeros(self.n)
            return (self.positions[0].copy(), zero, zero.copy(), zero.copy(), zero.copy())
        return self._polynomial.sample(t)

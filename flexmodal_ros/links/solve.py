"""First N natural frequencies and mode shapes of a beam-link arm (roots of (40), shapes (41)-(44)).

Algorithm (:func:`link_modes`):

1. an upper frequency with at least N roots below it, by doubling, using the Wittrick–Williams
   count J(ω) of :mod:`.stiffness` (exact: no root can hide from it);
2. isolation: J on a grid uniform in √ω (bending roots crowd at low ω), then bisection of every
   interval holding more than one root until each holds exactly one (two roots closer than
   ``DOUBLE_RTOL`` relative are a double root). With a ``guess`` (the roots of a neighbouring
   configuration, as in a sweep) J is evaluated at each guessed root ±``WARM_RTOL`` instead of on
   the grid; the count decides, so a poor guess costs time, never a root;
3. refinement of all brackets at once on det K(ω), which has no poles below the frame's limit and
   changes sign once in each bracket, with sign (−1)^J(ω): Newton steps on log|det K| from the
   guessed root (or the bracket's middle), safeguarded by bisection;
4. polishing and confirmation: K(ω) mixes stiff axial and soft bending terms in global axes,
   which limits its roots to ~1e-8 relative for very slender arms; each root is polished on det
   of the paper's equilibrated M(ω) (39): one secant step through ω(1 ± ``SECANT_STEP``), or,
   for roots with a close neighbour or when det M does not change sign over the step,
   Chandrupatla in the root's own Wittrick–Williams bracket (on det K if that bracket contains
   a cut-off, where the paper's basis degenerates); the smallest singular value of M(ω_j) must
   then be ≤ ``CONFIRM_RTOL``·σ_max (two for a double root); its singular vector is the mode (37);
5. shapes: U, V, Ψ of every link from the null vector, in frame 0 through (41)-(44)
   (:mod:`.shapes`).

Size limits (checked before the expensive steps, errors name the request field): at most
``MAX_MODES`` = 50 modes per request, and the frame that isolates them may have at most
``MAX_FRAME_UNKNOWNS`` = 240 nodal unknowns (its links are cut into segments short enough for the
highest frequency asked; each count and determinant factorizes that dense matrix, and the number
of counts grows with the modes, so the work grows about as the fourth power of the modes;
measurements in docs/benchmarks.md). A more slender arm reaches the frame limit with fewer modes;
the error then says how many modes fit. ``stop`` / ``deadline`` (:func:`link_modes`) interrupt
the work between iterations.
"""
from __future__ import annotations

import numpy as np

from ..core.blas import single_thread_blas
from ..core.errors import InputError
from ..core.workers import StopToken
from ..modes import TWO_PI
from .arm import check_angles
from .beam import BEAM_MODELS
from .characteristic import characteristic_matrix, equilibrate, section_constants, singular_check
from .shapes import LinkModes, assemble_modes
from .stiffness import build_frame, count_below, determinant
from ..core.validation import shown

MAX_MODES = 50         # per request; see "Size limits" in the module docstring
MAX_FRAME_UNKNOWNS = 240   # nodal unknowns of the Wittrick–Williams frame (cost ∝ unknowns³ per count)
REGIMES = ("full", "below-cutoff")
DOUBLE_RTOL = 1e-11    # brackets narrower than this (relative) with two roots = double root
ROOT_RTOL = 1e-7       # relative tolerance of the roots refined on det K(ω)
POLISH_RTOL = 2e-14    # relative tolerance of the roots polished on det M(ω)
POLISH_BRACKET = 1e-6  # half-width of the polishing brackets, relative
SECANT_STEP = 3e-7     # half-width of the secant polishing step, relative (> the K roots error)
NEWTON_STEP = 1e-7     # relative difference step of the Newton refinement on det K
CONFIRM_RTOL = 1e-7    # σ_min/σ_max of the equilibrated M(ω_j) that confirms a root
GRID_PER_MODE = 3
WARM_RTOL = 0.01       # warm start: count at each guessed root ±1 %


def check_request(num_modes, model, regime, field="num_modes"):
    """InputError naming the field for a bad mode count (``field``: the request field or CLI
    option as the user wrote it), beam model or regime."""
    if model not in BEAM_MODELS:
        raise InputError(f"model: expected one of {', '.join(BEAM_MODELS)}, got {shown(model)}")
    if regime not in REGIMES:
        raise InputError(f"regime: expected one of {', '.join(REGIMES)}, got {shown(regime)}")
    if isinstance(num_modes, bool) or not isinstance(num_modes, (int, np.integer)) \
            or not 1 <= num_modes <= MAX_MODES:
        raise InputError(f"{field}: expected an integer from 1 to {MAX_MODES}, got {shown(num_modes)}")


def _stop_token(stop, deadline):
    """A StopToken for ``stop`` and/or ``deadline`` (time.monotonic()), or None."""
    if deadline is None:
        return stop
    if stop is None:
        return StopToken(float(deadline))
    return _Both(stop, StopToken(float(deadline)))


class _Both:
    def __init__(self, *tokens):
        self.tokens = tokens

    def check(self):
        for token in self.tokens:
            token.check()


def _check(stop):
    if stop is not None:
        stop.check()


def cutoff(arm, model: str) -> float:
    """Lowest Timoshenko cut-off ω_lim over the links [rad/s] (inf for the EB models)."""
    if model != "timoshenko":
        return np.inf
    return min(TWO_PI * b.cutoff_hz for b in arm.beams)


@single_thread_blas
def natural_frequencies(arm, q, num_modes: int = 10, model: str = "timoshenko", regime: str = "full",
                        guess=None, stop=None, deadline=None, field="num_modes") -> np.ndarray:
    """ω (N,) [rad/s], ascending with multiplicities: the first ``num_modes`` roots of (40), steps
    1-3 of the module docstring. ``guess`` (N,) [rad/s] warm-starts the isolation;
    ``regime="below-cutoff"`` refuses (InputError) when fewer than N roots lie below ω_lim.
    ``stop`` (a :class:`~flexmodal_ros.core.workers.StopToken`) and ``deadline`` (a
    ``time.monotonic()`` value) end the work with :class:`~flexmodal_ros.core.workers.Interrupted`;
    ``field`` names the mode count in errors."""
    q = check_angles(arm, q)
    check_request(num_modes, model, regime, field)
    stop = _stop_token(stop, deadline)
    _check(stop)
    limit = cutoff(arm, model) if regime == "below-cutoff" else np.inf
    points = _warm_points(guess, num_modes, limit)
    if points is not None:
        frame = build_frame(arm, q, model, points[-1])
        if frame.size > MAX_FRAME_UNKNOWNS:
            points = None
        else:
            J = count_below(frame, points)
            if J[-1] < num_modes:
                points = None
    if points is None:
        w_hi, frame = _upper_bound(arm, q, num_modes, model, limit, stop, field)
        points = w_hi * (np.arange(1, GRID_PER_MODE * num_modes + 1) / (GRID_PER_MODE * num_modes)) ** 2
        J = count_below(frame, points)
    brackets = _isolate(frame, points, J, num_modes, stop)
    roots = _refine(frame, brackets, guess, stop)
    lo = np.concatenate([[b[0]] * b[3] for b in brackets])
    hi = np.concatenate([[b[1]] * b[3] for b in brackets])
    single = np.concatenate([[b[3] == 1] * b[3] for b in brackets])
    return _polish(arm, q, model, frame, roots, lo, hi, single, stop)[:num_modes]


def _upper_bound(arm, q, N, model, limit, stop=None, field="num_modes"):
    top = limit * (1 - 1e-9)
    w = min(_first_guess(arm, model) * N, top)
    reached = 0
    while True:
        _check(stop)
        frame = build_frame(arm, q, model, w)
        if frame.size > MAX_FRAME_UNKNOWNS:
            raise InputError(f"{field}: {N} modes of this arm need a frame of {frame.size} unknowns, more than "
                             f"{MAX_FRAME_UNKNOWNS} (ask for at most {max(reached, 1)} modes; limits in "
                             f"flexmodal_ros/links/solve.py)")
        J = int(count_below(frame, [w])[0])
        reached = J
        if J >= N:
            return w, frame
        if w >= top:
            f_lim = limit / TWO_PI        # allow-pole-logic: the cut-off angular frequency in Hz, no eigenvalue
            raise InputError(f"{field}: only {J} natural frequencies lie below the Timoshenko cut-off "
                             f"f_lim = {f_lim:.6g} Hz (regime below-cutoff); ask for at most "
                             f"{J} modes, or use the full spectrum")
        w = min(2.0 * w, top)


def _first_guess(arm, model):
    """A frequency of the order of the arm's first mode [rad/s] (cantilever of the shortest link)."""
    return min(3.5 / b.length ** 2 * np.sqrt(section_constants(b, model)[0] / (b.rho * b.S)) for b in arm.beams)


def _warm_points(guess, N, limit):
    """Count points for a warm start: each guessed root ±WARM_RTOL and a top point (sorted), or
    None when the guess is unusable (roots that moved further are still caught by the counts)."""
    if guess is None:
        return None
    g = np.sort(np.asarray(guess, float))
    if g.shape != (N,) or not np.all(np.isfinite(g)) or g[0] <= 0:
        return None
    top = g[-1] * (1 + 2 * WARM_RTOL)
    if top >= limit:
        return None
    pts = np.unique(np.concatenate([g * (1 - WARM_RTOL), g * (1 + WARM_RTOL), [top]]))
    return pts[pts > 0]


def _isolate(frame, points, J, N, stop=None):
    """[(lo, hi, J(lo), multiplicity)] for roots 1..N from counts ``J`` at sorted ``points``
    (J(points[-1]) ≥ N): intervals with more than one root are bisected until they hold one, or
    are narrower than DOUBLE_RTOL (a multiple root)."""
    lo = np.concatenate([[0.0], points[:-1]])
    Jlo = np.concatenate([[0], J[:-1]])
    pending = [(a, b, ja, jb) for a, b, ja, jb in zip(lo, points, Jlo, J) if jb > ja and ja < N]
    done = []
    while pending:
        _check(stop)
        split = [p for p in pending if p[3] - p[2] > 1 and p[1] - p[0] > DOUBLE_RTOL * p[1]]
        done += [(a, b, ja, jb - ja) for a, b, ja, jb in pending
                 if jb - ja == 1 or b - a <= DOUBLE_RTOL * b]
        if not split:
            break
        mids = np.array([0.5 * (a + b) for a, b, _, _ in split])
        Jm = count_below(frame, mids)
        pending = []
        for (a, b, ja, jb), m, jm in zip(split, mids, Jm):
            pending += [p for p in ((a, m, ja, jm), (m, b, jm, jb)) if p[3] > p[2] and p[2] < N]
    done.sort()
    return done


def _refine(frame, brackets, guess=None, stop=None):
    """ω (M,) [rad/s] with multiplicities: single-root brackets refined all at once on det K(ω)
    to ROOT_RTOL (:func:`_newton_on_k`, from the guessed root when one lies in the bracket, else
    the bracket's middle); multiple roots at the centre of their (DOUBLE_RTOL-narrow) bracket."""
    single = [i for i, b in enumerate(brackets) if b[3] == 1]
    roots = {i: 0.5 * (b[0] + b[1]) for i, b in enumerate(brackets) if b[3] > 1}
    if single:
        lo = np.array([brackets[i][0] for i in single])
        hi = np.array([brackets[i][1] for i in single])
        start = 0.5 * (lo + hi)
        if guess is not None:
            g = np.sort(np.asarray(guess, float))
            pick = np.clip(np.searchsorted(g, start), 0, g.size - 1)
            start = np.where((g[pick] > lo) & (g[pick] < hi), g[pick], start)
        parity = np.array([brackets[i][2] for i in single])
        roots.update(zip(single, _newton_on_k(frame, lo, hi, parity, start, ROOT_RTOL, stop=stop)))
    out = []
    for i, b in enumerate(brackets):
        out += [roots[i]] * b[3]
    return np.array(out)


def _newton_on_k(frame, lo, hi, parity_lo, start, rtol, maxiter=60, stop=None):
    """Single roots of det K(ω) in the brackets [lo, hi], all at once: safeguarded Newton steps on
    det K with the derivative of log|det K| from a second point ω(1 + NEWTON_STEP) in the same
    batched call; bisection when a step leaves the bracket. The sign of det K is (−1)^J(ω)
    (det K(0) > 0), so ``parity_lo`` = J(lo) mod 2 gives the bracket's signs without evaluating
    them. Stops when a step is below ``rtol`` relative or the root lies within the difference step."""
    a, b = np.array(lo, float), np.array(hi, float)
    sign_a = np.where(np.asarray(parity_lo) % 2 == 0, 1.0, -1.0)
    x = np.where((start > a) & (start < b), start, 0.5 * (a + b))
    active = np.ones(x.size, bool)
    for _ in range(maxiter):
        _check(stop)
        h = np.minimum(NEWTON_STEP * x, 0.5 * (b - x))  # x + h stays inside the one-root bracket
        s0, s1, l0, l1 = np.ones(x.size), np.ones(x.size), np.zeros(x.size), np.zeros(x.size)
        live = np.flatnonzero(active)                  # converged brackets are not evaluated again
        sign, logdet = determinant(frame, np.concatenate([x[live], x[live] + h[live]]))
        s0[live], s1[live] = sign[:live.size], sign[live.size:]
        l0[live], l1[live] = logdet[:live.size], logdet[live.size:]
        left = s0 == sign_a  # the root lies above x
        a, b = np.where(active & left, x, a), np.where(active & ~left, x, b)
        straddle = s0 != s1  # the root lies in [x, x + h]: linear interpolation of det K
        ratio = np.exp(np.clip(l1 - l0, -700, 700))
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = x - h / (l1 - l0)
            interp = x + h / (1.0 + ratio)
        step = np.where(straddle, interp, newton)
        bad = ~np.isfinite(step) | (step <= a) | (step >= b)
        step = np.where(straddle, interp, np.where(bad, 0.5 * (a + b), step))
        done = straddle | (np.abs(step - x) <= rtol * x)
        x = np.where(active, step, x)
        active &= ~done
        if not active.any():
            return x
    raise RuntimeError("Newton refinement on det K did not converge")


def _polish(arm, q, model, frame, roots, lo, hi, single, stop=None):
    """Roots refined on det M(ω): one secant step through ω(1 ± SECANT_STEP) where det M changes
    sign there and no neighbour or cut-off is within POLISH_BRACKET; otherwise Chandrupatla in
    the root's own Wittrick–Williams bracket [lo, hi] (on det M, or on det K if a cut-off lies
    inside, where the paper's basis degenerates). Multiple roots are left as they are."""
    out = roots.copy()
    limits = [TWO_PI * b.cutoff_hz for b in arm.beams] if model == "timoshenko" else []
    alone = single.copy()
    gaps = np.diff(roots)
    alone[:-1] &= gaps > 3 * POLISH_BRACKET * roots[1:]
    alone[1:] &= gaps > 3 * POLISH_BRACKET * roots[1:]
    for lim in limits:
        alone &= np.abs(roots / lim - 1) > 10 * POLISH_BRACKET
    idx = np.nonzero(alone)[0]
    done = np.zeros(roots.size, bool)
    if idx.size:
        w = roots[idx]
        pair = np.concatenate([w * (1 - SECANT_STEP), w * (1 + SECANT_STEP)])
        mats = characteristic_matrix(arm, q, pair, model)
        _, dr, dc = equilibrate(mats[:idx.size])
        scale = np.concatenate([dr, dr])[:, :, None] * np.concatenate([dc, dc])[:, None, :]
        sign, logdet = np.linalg.slogdet(mats * scale)
        ref = np.maximum(logdet[:idx.size], logdet[idx.size:])
        f_lo = sign[:idx.size] * np.exp(logdet[:idx.size] - ref)
        f_hi = sign[idx.size:] * np.exp(logdet[idx.size:] - ref)
        secant = f_lo * f_hi < 0
        a, b = pair[:idx.size][secant], pair[idx.size:][secant]
        out[idx[secant]] = a - f_lo[secant] * (b - a) / (f_hi[secant] - f_lo[secant])
        done[idx[secant]] = True
    rest = np.nonzero(single & ~done)[0]
    _check(stop)
    if rest.size:
        straddle = np.zeros(rest.size, bool)
        for lim in limits:
            straddle |= (lo[rest] <= lim * (1 + 1e-9)) & (hi[rest] >= lim * (1 - 1e-9))
        straddle |= lo[rest] <= 0                     # the paper's basis needs ω > 0
        on_m, on_k = rest[~straddle], rest[straddle]
        if on_m.size:
            polished = _chandrupatla_on_m(arm, q, model, lo[on_m], hi[on_m])
            failed = np.isnan(polished)                 # det M without a sign change: a pole inside
            out[on_m[~failed]] = polished[~failed]
            on_k = np.concatenate([on_k, on_m[failed]])
        if on_k.size:
            out[on_k] = _chandrupatla_on_k(frame, lo[on_k], hi[on_k], POLISH_RTOL)
    return out


def _chandrupatla_on_m(arm, q, model, lo, hi):
    """Single roots of det M(ω) (equilibration fixed per bracket at its midpoint) in [lo, hi];
    NaN for brackets over which det M does not change sign (the paper's M(ω) has poles of its
    own, e.g. where a link's basis functions degenerate: those roots are polished on det K)."""
    _, dr, dc = equilibrate(characteristic_matrix(arm, q, 0.5 * (lo + hi), model))

    def scaled(w, which):
        return np.linalg.slogdet(characteristic_matrix(arm, q, w, model) * dr[which][:, :, None]
                                 * dc[which][:, None, :])

    every = np.arange(lo.size)
    sign_hi, ref = scaled(hi, every)
    sign_lo, log_lo = scaled(lo, every)
    out = np.full(lo.size, np.nan)
    ok = (sign_lo * sign_hi < 0) & np.isfinite(log_lo) & np.isfinite(ref)
    if not ok.any():
        return out
    keep = np.flatnonzero(ok)

    def scaled_det(w, which):
        sign, logdet = scaled(w, keep[which])
        return sign * np.exp(logdet - ref[keep[which]])

    out[keep] = chandrupatla(scaled_det, lo[keep], hi[keep], sign_lo[keep] * np.exp(log_lo[keep] - ref[keep]),
                             sign_hi[keep], POLISH_RTOL)
    return out


def _chandrupatla_on_k(frame, lo, hi, rtol, guess=None):
    """Single roots of det K(ω) in [lo, hi] (no poles below frame.omega_max), scaled per bracket
    by |det K| at its upper end."""
    sign_hi, ref = determinant(frame, hi)
    sign_lo, log_lo = determinant(frame, lo)

    def scaled_det(w, which):
        sign, logdet = determinant(frame, w)
        return sign * np.exp(logdet - ref[which])

    return chandrupatla(scaled_det, lo, hi, sign_lo * np.exp(log_lo - ref), sign_hi, rtol, start=guess)


def chandrupatla(fun, a, b, fa, fb, xrtol, maxiter=100, start=None):
    """Roots of ``fun(x, index)`` in brackets [a, b] (arrays, f(a)·f(b) < 0), all at once.

    Chandrupatla's (1997) method: each step evaluates f at x1 + t(x2 − x1), x1 the newest point
    and x2 the bracket end of opposite sign; t from inverse quadratic interpolation through the
    last three points when they satisfy Chandrupatla's criterion, else t = ½ (bisection; the
    first step is a regula falsi step kept within 5-95 % of the bracket); steps
    are kept at least ``tol`` inside the bracket; stops when |x2 − x1| < 2·tol or when an
    interpolation step moved less than tol (superlinear convergence), tol = xrtol·|x|.
    ``fun`` receives the abscissae of all brackets (converged ones at their root) and their
    indices; ``start`` (optional,
    strictly inside the brackets) replaces the first trial points.
    """
    x1, x2 = np.array(a, float), np.array(b, float)
    f1, f2 = np.array(fa, float), np.array(fb, float)
    if np.any(np.sign(f1) == np.sign(f2)):
        raise RuntimeError("chandrupatla: a bracket does not change sign")
    x3, f3 = x2.copy(), f2.copy()
    t = np.clip(f1 / (f1 - f2), 0.05, 0.95)  # first step: regula falsi
    if start is not None:
        t = (np.asarray(start, float) - x1) / (x2 - x1)
    best = np.where(np.abs(f1) < np.abs(f2), x1, x2)
    active = np.ones(x1.shape, bool)
    last = np.full(x1.shape, np.nan)  # previous trial point
    interpolated = np.zeros(x1.shape, bool)
    every = np.arange(x1.size)
    for _ in range(maxiter):
        xt = np.where(active, x1 + t * (x2 - x1), best)
        small_step = interpolated & (np.abs(xt - last) <= xrtol * np.abs(xt))
        last = xt
        ft = fun(xt, every)
        same = np.sign(ft) == np.sign(f1)
        x3, f3 = np.where(same, x1, x2), np.where(same, f1, f2)
        x2, f2 = np.where(same, x2, x1), np.where(same, f2, f1)
        x1, f1 = xt, ft
        best = np.where(active, np.where(np.abs(f1) < np.abs(f2), x1, x2), best)
        width = np.abs(x2 - x1)
        tol = xrtol * np.abs(best)
        tl = tol / np.where(width > 0, width, 1.0)
        active &= ~((width <= 2 * tol) | (ft == 0) | small_step)
        if not active.any():
            return best
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            xi = (x1 - x2) / (x3 - x2)
            phi = (f1 - f2) / (f3 - f2)
            t_iqi = f1 / (f2 - f1) * f3 / (f2 - f3) + (x3 - x1) / (x2 - x1) * f1 / (f3 - f1) * f2 / (f3 - f2)
        interpolated = (phi * phi < xi) & ((1 - phi) ** 2 < 1 - xi) & np.isfinite(t_iqi)
        t = np.clip(np.where(interpolated, t_iqi, 0.5), tl, 1 - tl)
    raise RuntimeError("chandrupatla: no convergence")


@single_thread_blas
def link_modes(arm, q, num_modes: int = 10, model: str = "timoshenko", regime: str = "full",
               guess=None, stop=None, deadline=None, field="num_modes") -> LinkModes:
    """First ``num_modes`` natural frequencies [Hz] and mode shapes of ``arm`` at joint angles ``q``
    (n,) [rad] for beam ``model`` (timoshenko | euler-bernoulli | eb-inextensible): steps 1-5 of
    the module docstring. ``guess``: natural frequencies [rad/s] of a nearby configuration (warm
    start; ignored when J does not confirm it). Raises InputError on bad input (``field`` names
    the mode count as the caller's user wrote it) and RuntimeError if a root fails its
    singular-value confirmation (a numerical failure, never expected); ``stop`` / ``deadline``
    as :func:`natural_frequencies`."""
    q = check_angles(arm, q)
    omegas = natural_frequencies(arm, q, num_modes, model, regime, guess, stop, deadline, field)
    coeffs, ratios = _null_vectors(arm, q, omegas, model)
    return assemble_modes(arm, q, model, omegas, coeffs, ratios, omegas > cutoff(arm, model))


def _null_vectors(arm, q, omegas, model):
    """Coefficient columns (6n, N) and σ_min/σ_max (N,) of M(ω_j); a root of multiplicity k takes
    the k smallest singular vectors."""
    ratios_all, vecs = singular_check(arm, q, omegas, model)
    coeffs, ratios = np.zeros((6 * arm.n, omegas.size)), np.zeros(omegas.size)
    j = 0
    while j < omegas.size:
        mult = int(np.sum(np.abs(omegas - omegas[j]) <= DOUBLE_RTOL * omegas[j]))
        if ratios_all[j, mult - 1] > CONFIRM_RTOL:
            raise RuntimeError(f"root ω = {omegas[j]:.9g} rad/s not confirmed by M(ω): "
                               f"σ_min/σ_max = {ratios_all[j, :mult]}")
        coeffs[:, j:j + mult] = vecs[j, :, :mult]
        ratios[j:j + mult] = ratios_all[j, :mult]
        j += mult
    return coeffs, ratios



"""Simulated impact test (thesis §2.4.3): an impulse wrench on the tool, the closed loop
(2.1)+(2.2) about a set-point, the response sampled like encoders, optionally with encoder noise.

Why the record's dynamics are those of the AMA's model. The AMA (thesis (2.7)-(2.14)) is the
linearization, at the equilibrium (q^d, q_m^d) of (2.3), of exactly the closed loop simulated here:
plant (2.1) with viscous friction D, D_m (the ch. 2 model: Coulomb terms, which (2.8) does not
have, are removed) under the set-point law (2.2) evaluated *continuously* (the thesis' ODE
set-up). Two ways to produce the record, neither with a discretization error that matters:

- ``dynamics="nonlinear"`` (default): the nonlinear closed loop in deviations δx = x − x_eq,
  written δẋ = A δx + b + N(δx) with A the AMA's state matrix (2.14): the linear part is
  propagated exactly (matrix exponential) and only the nonlinear remainder N — second order in the
  response — by an integrating-factor (Lawson) RK4 with steps of 1/4000 s, split at the impulse's
  start and end (:class:`_Lawson`). Its truncation error is RK4's on N alone, far below 1e-6 of
  the response (test_oma.py compares it with SciPy's DOP853 at rtol 1e-11). What the record then
  holds beyond the AMA are the nonlinear terms themselves: the 50 N × 6 ms impulse moves the
  motors by ~1e-4 rad, and products of modes appear as combination terms λ_i + λ_j at ~1e-4 of the
  response, which the mode selection recognizes and reports as such
  (:func:`flexmodal_ros.oma.mode_estimation.identify_modes`).
- ``dynamics="linear"``: the AMA's own linear model M̄ δz̈ + D̄ δż + K̄ δz = [Jᵀw; 0], propagated by
  the exact discretization (matrix exponential, the constant wrench integrated exactly):
  no discretization error at all, and fast.

With ``controller_rate_hz`` the law is instead sampled at that rate and held (zero-order hold;
``hold="zoh-delay"`` applies each command one period late, as a ROS loop does): the sampled-data
loop of :func:`flexmodal_ros.flexible_joint.sampled.sampled_modal_analysis`. Held over 1/4000 s (the existing
fixed-step simulator) the law already shifts Scompi's modes by up to 0.5 % in f and 0.9 pp in ζ.

Measurement (``EncoderNoise``): motor encoders sit on the motor shaft before the gear, so the
motor-side angle N·q_m is quantized to 2π/counts_per_rev, then Gaussian noise (std [rad], on the
recorded channel) is added.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..core.errors import InputError
from ..flexible_joint.linear_model import state_matrix
from ..modes import is_oscillatory, is_real
from ..robot.model import create_data, ee_jacobian, with_overrides
from ..simulation import FlexibleJointPlant, SetpointLaw, rest_state
from ..core.validation import finite_scalar, finite_vector, load_yaml_mapping, shown
from .record import Record, make_record
from ..flexible_joint.sampled import open_loop

AXES = ("x0", "y0", "z0", "mx0", "my0", "mz0")
CHANNEL_SETS = ("motor_positions", "link_positions")
DYNAMICS = ("nonlinear", "linear")
HOLDS = ("zoh", "zoh-delay")
MOTOR_SUFFIX = "_motor"
MAX_STEP = 2.5e-4    # [s] Lawson-RK4 step of the nonlinear closed loop (4 per 1 kHz sample)


@dataclass(frozen=True)
class Impulse:
    """A wrench of size ``force`` [N, or N·m for m*0 axes] along ``axis`` of frame 0 at the tool
    point E, for start ≤ t < start + duration [s] (thesis: 50 N along y0, [0.2, 0.206] s)."""

    force: float = 50.0
    axis: str = "y0"
    start: float = 0.2
    duration: float = 0.006

    def __post_init__(self):
        if self.axis not in AXES:
            raise InputError(f"impulse_axis: must be one of {', '.join(AXES)}, got {shown(self.axis)}")
        finite_scalar(self.force, "impulse")
        if not (np.isfinite(self.start) and self.start >= 0):
            raise InputError(f"t_impulse: must be >= 0 s, got {self.start}")
        if not (np.isfinite(self.duration) and self.duration > 0):
            raise InputError(f"impulse_duration: must be > 0 s, got {self.duration}")

    @property
    def wrench(self) -> np.ndarray:
        w = np.zeros(6)
        w[AXES.index(self.axis)] = self.force
        return w

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass(frozen=True)
class EncoderNoise:
    """Measurement model: ``counts_per_rev`` (None = no quantization) on the motor shaft before
    the gear, ``std`` Gaussian noise [rad] on each recorded channel, ``seed``."""

    counts_per_rev: float | None = None
    std: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.counts_per_rev is not None and not (np.isfinite(self.counts_per_rev) and self.counts_per_rev >= 1):
            raise InputError(f"noise counts: must be >= 1 count per revolution, got {self.counts_per_rev}")
        if not (np.isfinite(self.std) and self.std >= 0):
            raise InputError(f"noise std: must be >= 0 rad, got {self.std}")

    def apply(self, values, gear, rng=None):
        """Quantize N·q (``gear`` (c,) ratios, 1 = on the recorded axis) and add noise."""
        rng = rng or np.random.default_rng(self.seed)
        out = np.array(values, float)
        if self.counts_per_rev:
            quantum = 2 * np.pi / self.counts_per_rev
            out = np.round(out * gear / quantum) * quantum / gear
        if self.std > 0:
            out = out + rng.normal(0.0, self.std, out.shape)
        return out


def gear_ratios(model) -> np.ndarray | None:
    """Gear ratios N per joint from the robot's flexibility YAML (``N`` entries), or None when the
    YAML gives the reflected inertia B directly (no N)."""
    if model.params_path is None:
        return None
    joints = load_yaml_mapping(model.params_path, "params").get("joints", {})
    ratios = [joints.get(j, {}).get("N") for j in model.joint_names]
    return None if any(r is None for r in ratios) else np.array(ratios, float)


def channel_names(model, channels: str) -> list[str]:
    """Channel names of a channel set: ``<joint>_motor`` (motor_positions) or ``<joint>``."""
    if channels not in CHANNEL_SETS:
        raise InputError(f"channels: must be one of {', '.join(CHANNEL_SETS)}, got {shown(channels)}")
    suffix = MOTOR_SUFFIX if channels == "motor_positions" else ""
    return [j + suffix for j in model.joint_names]


def simulate_impact(model, q, impulse: Impulse = Impulse(), duration: float = 2.5,
                    sample_rate_hz: float = 1000.0, controller_rate_hz: float | None = None,
                    hold: str = "zoh", dynamics: str = "nonlinear", channels: str = "motor_positions",
                    noise: EncoderNoise | None = None) -> Record:
    """Impact test on ``model`` held at configuration ``q`` (module docstring): returns a
    :class:`~flexmodal_ros.oma.record.Record` sampled at ``sample_rate_hz`` from t = 0 to
    ``duration`` [s] whose ``excitation_end`` is the end of the impulse. ``controller_rate_hz``
    None = continuous law; otherwise the law is sampled at that rate (= ``sample_rate_hz``: the
    record is taken at the control instants) and held (``hold``)."""
    q = finite_vector(q, model.n, "q")
    if dynamics not in DYNAMICS:
        raise InputError(f"dynamics: must be one of {', '.join(DYNAMICS)}, got {shown(dynamics)}")
    if hold not in HOLDS:
        raise InputError(f"hold: must be one of {', '.join(HOLDS)}, got {shown(hold)}")
    fs = finite_scalar(sample_rate_hz, "sample_rate_hz")
    duration = finite_scalar(duration, "duration")
    if fs <= 0 or duration <= 0:
        raise InputError(f"sample_rate_hz/duration: must be > 0, got {fs} and {duration}")
    if impulse.end >= duration:
        raise InputError(f"duration: {duration} s ends before the impulse does ({impulse.end} s)")
    names = channel_names(model, channels)
    plant_model = with_overrides(model, d_c=0.0, d_cm=0.0)        # the ch. 2 model: viscous only
    times = np.arange(int(np.floor(duration * fs + 1e-9)) + 1) / fs
    x_eq, _ = rest_state(plant_model, q)
    if controller_rate_hz is None:
        run = _continuous_linear if dynamics == "linear" else _continuous_nonlinear
        dx = run(plant_model, q, x_eq, impulse, times)
    else:
        rate = finite_scalar(controller_rate_hz, "controller_rate_hz")
        if abs(rate - fs) > 1e-9 * fs:
            raise InputError(f"controller_rate_hz: the held law is recorded at its own instants; give "
                             f"the sample rate {fs:g} Hz, got {controller_rate_hz}")
        dx = _held(plant_model, q, x_eq, impulse, times, rate, hold, dynamics)
    n = model.n
    rows = slice(n, 2 * n) if channels == "motor_positions" else slice(0, n)
    values = x_eq[rows] + dx[:, rows]
    meta = {"source": "simulation", "robot": model.name, "q": q.tolist(), "dynamics": dynamics,
            "law": "continuous" if controller_rate_hz is None else f"held at {controller_rate_hz:g} Hz ({hold})",
            "impulse": {"force": impulse.force, "axis": impulse.axis, "start": impulse.start,
                        "duration": impulse.duration}}
    if noise is not None:
        gear = np.ones(n)
        if channels == "motor_positions" and noise.counts_per_rev:
            ratios = gear_ratios(model)
            if ratios is None:
                raise InputError(f"noise counts: robot {model.name} gives no gear ratios N (B directly); "
                                 "quantization on the motor shaft needs them")
            gear = ratios
        elif noise.counts_per_rev and model.prismatic.any():
            raise InputError("noise counts: link-side quantization of a prismatic joint is not defined")
        values = noise.apply(values, gear)
        meta["noise"] = {"counts_per_rev": noise.counts_per_rev, "std": noise.std, "seed": noise.seed}
    return make_record(times, values, names, excitation_end=impulse.end, metadata=meta)


def free_decay_contributions(model, q, impulse: Impulse, rows, t0: float):
    """Each mode's part of the free decay after ``impulse`` in the AMA's linear model at
    configuration ``q``, at the channels whose rows of the position state [δq; δq_m] are ``rows``,
    from time ``t0`` ≥ the impulse's end [s] on: the state after the impulse is
    x₁ = ∫₀^T e^{As} ds B_w w (T its duration; :meth:`_Lawson.propagators`), its modal coordinates
    η = V⁻¹x₁ (A V = V Λ), and mode j (Im λ_j > 0) contributes y_c(t₀ + k/fs) = Re(a_jc z_j^k) with
    a_jc = 2 V_cj η_j e^{λ_j (t₀ − t_end)}; a real pole r contributes V_cr η_r e^{r (t₀ − t_end)} e^{r k/fs}.

    Returns (λ (m,) with Im > 0, amplitudes (m, c) complex, real poles (r,), their amplitudes
    (r, c)). For the held law the continuous model's amplitudes are used (its modes move by
    ≤ 1.8 % at 1 kHz; this is an amplitude estimate, not a pole).
    """
    plant_model = with_overrides(model, d_c=0.0, d_cm=0.0)
    A, _, _, B_w, _ = _linear_parts(plant_model, finite_vector(q, model.n, "q"))
    _, _, G, _ = _Lawson(A).propagators(impulse.duration)
    lam, V = np.linalg.eig(A)
    eta = np.linalg.solve(V, G @ (B_w @ impulse.wrench)) * np.exp(lam * (t0 - impulse.end))
    part = V[list(rows)] * eta[None, :]                       # (c, 4n)
    complex_, real = is_oscillatory(lam), is_real(lam)
    return lam[complex_], 2.0 * part[:, complex_].T, lam[real].real, part[:, real].real.T


class _Lawson:
    """Integrating-factor (Lawson) 4th-order Runge-Kutta for δẋ = A δx + b + N(δx): the linear part
    (the AMA's A and a constant input b) is propagated exactly by e^{Ah}, only the small nonlinear
    remainder N — second order in the response — is integrated by RK4. The stiff, fast mode
    (Scompi's 850 Hz, ζ = 0.8) costs nothing and the truncation error is RK4's on N alone
    (relative ~(ωh)⁵/120 of a term that is itself ~1e-4 of the response)."""

    def __init__(self, A):
        self.A = A
        self._exp = {}

    def propagators(self, h):
        """e^{Ah}, e^{Ah/2} and G_h = ∫₀ʰ e^{As} ds, G_{h/2} (augmented matrix exponential: no
        inverse of A, which is singular for a plant without its controller)."""
        key = round(h * 1e12)
        if key not in self._exp:
            m = self.A.shape[0]
            aug = np.zeros((2 * m, 2 * m))
            aug[:m, :m], aug[:m, m:] = self.A, np.eye(m)
            full, half = sla.expm(aug * h), sla.expm(aug * (0.5 * h))
            self._exp[key] = (full[:m, :m], half[:m, :m], full[:m, m:], half[:m, m:])
        return self._exp[key]

    def step(self, dx, h, b, remainder):
        """δx after h [s] with the constant input b (4n,) and the remainder N(δx)."""
        E, Eh, G, Gh = self.propagators(h)
        full = E @ dx + G @ b               # exact affine flow over h and h/2
        half = Eh @ dx + Gh @ b
        k1 = remainder(dx)
        k2 = remainder(half + 0.5 * h * (Eh @ k1))
        k3 = remainder(half + 0.5 * h * k2)
        k4 = remainder(full + h * (Eh @ k3))
        return full + (h / 6.0) * (E @ k1 + 2.0 * (Eh @ (k2 + k3)) + k4)


def _substeps(a, b, impulse):
    """Sub-intervals of [a, b] no longer than MAX_STEP, split at the impulse edges, with the
    wrench active on each (None when off)."""
    cuts = [a] + [e for e in (impulse.start, impulse.end) if a + 1e-12 < e < b - 1e-12] + [b]
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        m = max(1, int(np.ceil((hi - lo) / MAX_STEP - 1e-9)))
        w = impulse.wrench if impulse.start - 1e-12 <= lo < impulse.end - 1e-12 else None
        out += [((hi - lo) / m, w)] * m
    return out


def _continuous_nonlinear(model, q, x_eq, impulse, times):
    A, _, _, B_w, _ = _linear_parts(model, q)
    plant = FlexibleJointPlant(model, friction=True)
    law = SetpointLaw(model, q, plant.data)
    lawson = _Lawson(A)
    zero = np.zeros(A.shape[0])
    out = np.zeros((times.size, x_eq.size))
    dx = np.zeros(x_eq.size)
    remainders = {}
    for k in range(1, times.size):
        for h, w in _substeps(times[k - 1], times[k], impulse):
            key = w is not None
            if key not in remainders:
                b = zero if w is None else B_w @ w
                remainders[key] = (b, lambda d, b=b, w=w: plant.derivative(x_eq + d, law, w) - A @ d - b)
            b, N = remainders[key]
            dx = lawson.step(dx, h, b, N)
        out[k] = dx
    return out


def _linear_parts(model, q):
    """Continuous closed-loop A (2.14), the plant without controller (A_p, B_u, feedback F:
    :func:`flexmodal_ros.flexible_joint.sampled.open_loop`) and the wrench input matrix B_w (state
    δx = [δq; δq_m; δq̇; δq̇_m])."""
    data = create_data(model)
    lin, A_p, B_u, F = open_loop(model, data, q)
    n = model.n
    A = state_matrix(lin.M, lin.D, lin.K)
    B_w = np.vstack([np.zeros((2 * n, 6)), np.linalg.inv(lin.M)[:, :n] @ ee_jacobian(model, data, q).T])
    return A, A_p, B_u, B_w, F


def _continuous_linear(model, q, x_eq, impulse, times):
    """The AMA's linear model, exact: δx(t + h) = e^{Ah} δx + G_h B_w w (:meth:`_Lawson.propagators`)."""
    A, _, _, B_w, _ = _linear_parts(model, q)
    flows = _Lawson(A)
    zero = np.zeros(A.shape[0])

    def step(dx, h, w):
        E, _, G, _ = flows.propagators(h)
        return E @ dx + (G @ (B_w @ w) if w is not None else zero)
    return _propagate(step, impulse, times, x_eq.size)


def _propagate(step, impulse, times, size):
    """Deviations at ``times`` with the impulse's edges as extra step boundaries."""
    out = np.zeros((times.size, size))
    dx = np.zeros(size)
    for k in range(1, times.size):
        a, b = times[k - 1], times[k]
        cuts = [a] + [e for e in (impulse.start, impulse.end) if a < e < b] + [b]
        for u, v in zip(cuts[:-1], cuts[1:]):
            w = impulse.wrench if impulse.start <= u + 1e-12 < impulse.end else None
            dx = step(dx, v - u, w)
        out[k] = dx
    return out


def _held(model, q, x_eq, impulse, times, rate, hold, dynamics):
    """Law sampled at ``rate`` and held (zero-order hold, optionally one period late)."""
    law = SetpointLaw(model, q)
    u_eq = law(x_eq)
    n = model.n
    _, A_p, B_u, B_w, F = _linear_parts(model, q)
    lawson = _Lawson(A_p)
    size = A_p.shape[0]
    if dynamics == "linear":

        def advance(dx, u, a, b, w):
            E, _, G, _ = lawson.propagators(b - a)
            return E @ dx + G @ (B_u @ u + (B_w @ w if w is not None else 0.0))
        feedback = lambda dx: -F @ dx
    else:
        plant = FlexibleJointPlant(model, friction=True)

        def advance(dx, u, a, b, w):
            bvec = B_u @ u + (B_w @ w if w is not None else np.zeros(size))
            tau = u_eq + u
            N = lambda d: plant.derivative(x_eq + d, tau, w) - A_p @ d - bvec
            m = max(1, int(np.ceil((b - a) / MAX_STEP - 1e-9)))
            for _ in range(m):
                dx = lawson.step(dx, (b - a) / m, bvec, N)
            return dx
        feedback = lambda dx: law(x_eq + dx) - u_eq
    ticks = np.arange(int(np.floor(times[-1] * rate + 1e-9)) + 1) / rate
    states = {0: np.zeros(size)}
    dx, pending = np.zeros(size), np.zeros(n)
    for k in range(ticks.size - 1):
        u_now = feedback(dx)
        u = u_now if hold == "zoh" else pending
        pending = u_now
        a, b = ticks[k], ticks[k + 1]
        cuts = [a] + [e for e in (impulse.start, impulse.end) if a < e < b] + [b]
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            w = impulse.wrench if impulse.start <= lo + 1e-12 < impulse.end else None
            dx = advance(dx, u, lo, hi, w)
        states[k + 1] = dx
    return np.array([states[i] for i in np.rint(times * rate).astype(int)])

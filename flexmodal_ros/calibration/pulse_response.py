"""Free decay of the linearized closed loop after a motor torque pulse: the modal participation
of each mode at each channel (what the experiment design expects a record to show).

The closed loop linearized about q (2.14), ẋ = A x + b u with b = B_u τ (the motor rows of the
input, B_u of :func:`~flexmodal_ros.flexible_joint.sampled.open_loop`), reaches x₁ = G_T B_u τ
after a rectangular pulse τ of duration T, G_T = ∫₀ᵀ e^{As} ds (augmented matrix exponential, no
inverse of A); with A V = V Λ and η = V⁻¹ x₁, mode j contributes y_c(t₁ + t) = Re(a_jc e^{λ_j t})
at channel c, a_jc = 2 V_cj η_j. The same construction as the tool-point impact's
(:func:`flexmodal_ros.oma.impact.free_decay_contributions`), with the motor torque as the input.
"""
from __future__ import annotations

import numpy as np

from ..flexible_joint.linear_model import state_matrix
from ..flexible_joint.sampled import open_loop
from ..robot.model import create_data


def pulse_decay_amplitudes(model, q, torque, duration, rows, t_after=0.0, data=None):
    """Free decay after a rectangular motor pulse ``torque`` (n,) [N·m] of ``duration`` [s] in the
    continuous closed loop at ``q`` (module docstring), at the channels whose rows of [δq; δq_m]
    are ``rows``, from ``t_after`` [s] after the pulse's end: (λ (m,) with Im > 0, amplitudes
    (m, c) complex)."""
    from scipy.linalg import expm     # deferred: scipy.linalg

    data = create_data(model) if data is None else data
    lin, _, B_u, _ = open_loop(model, data, np.asarray(q, float))
    A = state_matrix(lin.M, lin.D, lin.K)
    size = A.shape[0]
    aug = np.zeros((2 * size, 2 * size))
    aug[:size, :size], aug[:size, size:] = A, np.eye(size)
    G = expm(aug * float(duration))[:size, size:]
    x1 = G @ (B_u @ np.asarray(torque, float))
    lam, V = np.linalg.eig(A)
    eta = np.linalg.solve(V, x1) * np.exp(lam * float(t_after))
    keep = lam.imag > 1e-9 * np.abs(lam)
    part = V[list(rows)][:, keep] * eta[keep][None, :]
    return lam[keep], 2.0 * part.T


# A pulse should move the robot enough to stand out of the sensor noise and little enough to keep the
# response linear. Measured on kuka_lwr4 (RK4 plant, K_D x 0.2, docs/calibration.md, step 4 and "Measurement noise"):
# a pulse response peaking at 1.1e-3 rad leaves the noise-free OMA's close modes (6.3-7.2 Hz) within
# 1e-8 (q = 0) to 1e-4 (a bent configuration) of the linear loop's, inside the measurement floors.
# Under 2^20 counts + 1e-6 rad the OMA of a 4e-4 rad response merged 6.3-7.2 Hz into one pole
# (8.5 σ off) and 14-15 Hz into another (14 σ); of a 1e-3 rad response it did not (all ≤ 2.3 σ).
TARGET_MOTION = 2e-4       # [rad] bound of the linear response's peak at any channel ...
TARGET_SNR = 200.0         # ... or this many times the sensor noise (the default, conservative sizing)
NOISE_SNR = 500.0          # with the sensors' noise stated: this many times the noise ...
MAX_MOTION = 1e-3          # ... up to this [rad]
MAX_PULSE_S = 0.008        # ... and a pulse the torque bound stops short lengthened up to this [s]


def pulse_amplitudes(model, q, duration, limit, rows, noise_std=0.0, data=None) -> np.ndarray:
    """Per joint the motor pulse amplitude [N m] whose free decay at configuration ``q`` peaks at
    max(TARGET_MOTION, TARGET_SNR × ``noise_std``) on the channels ``rows`` (bound: the sum of the
    modes' amplitude moduli), at most ``limit`` (n,)."""
    target = max(TARGET_MOTION, TARGET_SNR * float(np.max(noise_std)))
    return _pulse_sizes(model, q, duration, limit, rows, target, data)[0]


def pulse_plan(model, q, duration, period, limit, rows, noise_std, data=None):
    """(duration [s], amplitudes (n,) [N m]) of the motor pulses when the sensors' noise
    ``noise_std`` is stated (the user's ``sensor_std``): the free decay peaks at
    min(MAX_MOTION, max(TARGET_MOTION, NOISE_SNR × noise)); where the torque ``limit`` stops a
    joint short of that, the pulse is lengthened by whole control ``period``s [s] (the same for
    every joint) until every joint reaches it or the pulse lasts MAX_PULSE_S (an impulse for the
    modes below ~30 Hz at 8 ms; the experiment design sees the pulse's spectrum). Measured linear
    on kuka_lwr4 only (docs/calibration.md): scompi's acceptance run (MuJoCo, seed 4) got k/joint_6
    3.6 % off with 8.6e-4 rad pulses against < 2 % with the default sizing, which is why this is
    not the default."""
    data = create_data(model) if data is None else data
    target = min(MAX_MOTION, max(TARGET_MOTION, NOISE_SNR * float(np.max(noise_std))))
    steps = max(1, int(round(float(duration) / period)))
    while True:
        torque, short = _pulse_sizes(model, q, steps * period, limit, rows, target, data)
        if not short or (steps + 1) * period > max(MAX_PULSE_S, float(duration)) + 1e-12:
            return steps * period, torque
        steps += 1


def _pulse_sizes(model, q, duration, limit, rows, target, data):
    """(amplitudes (n,), whether the limit stopped a joint short of ``target``)."""
    data = create_data(model) if data is None else data
    out = np.empty(model.n)
    short = False
    for j in range(model.n):
        unit = np.zeros(model.n)
        unit[j] = 1.0
        _, amps = pulse_decay_amplitudes(model, q, unit, duration, rows, 0.0, data)
        peak = float(np.abs(amps).sum(axis=0).max()) if amps.size else 0.0
        out[j] = limit[j] if peak <= 0 else min(limit[j], target / peak)
        short |= peak > 0 and limit[j] < target / peak
    return out, short

"""Output-only pole estimators over a range of model orders: VAR (thesis), SSI-cov, ERA.

Each estimator takes y (N, c) — deviations of c channels sampled at fs — or a list of such
segments (several records of the same system: *references*, e.g. impacts along different axes;
the channels are the same, the lengths may differ) and returns one :class:`OrderPoles` per model
order: continuous-time poles λ = fs·ln μ (μ the discrete poles, the
principal logarithm: damped frequencies up to the Nyquist frequency fs/2), mode shapes at the c
channels (columns), and each pole's initial amplitude in the record where the method gives one.

- :func:`var_poles` — the thesis' method (T.T. Do 2021 §2.4.3; Vu et al. 2011): vector
  autoregression y_k = Σ_{i=1..p} A_i y_{k−i} + e_k of orders p fitted by least squares (QR of the
  regressor of the largest order, the rows of all references stacked; the leading blocks of its R
  factor solve every smaller order,
  rank-deficient blocks by SVD pseudo-inverse), poles = eigenvalues of the companion (discrete
  state) matrix [[A_1 … A_p], [I 0]], shapes = its eigenvectors' first block.
- :func:`ssi_cov_poles` — covariance-driven stochastic subspace identification (Peeters & De Roeck
  1999): output covariances R_i = E[y_{k+i} y_kᵀ] (summed over the references) in a block Toeplitz
  matrix T = O Γ, SVD,
  observability matrix O_n = U_n S_n^½ for order n, A = O_n↑⁺ O_n↓ (shift invariance), C = O_n's
  first block row.
- :func:`era_poles` — Eigensystem Realization Algorithm (Juang & Pappa 1985) on a free decay: the
  block Hankel matrix H₀ = [y_{i+j}] of the decay itself (the free decay of x_{k+1} = A x_k,
  y = C x is a sequence of "Markov parameters" C A^k x_0), SVD, A_n = S_n^{−½} U_nᵀ H₁ V_n S_n^{−½}
  with the one-step-shifted H₁, C_n = first block row of U_n S_n^½; the state at k = 0 gives each
  pole's amplitude. For noise-free sampled linear data the realization is exact at the true order.
  Several references (multi-reference ERA: Juang & Pappa's block Hankel has one block column per
  input) put their Hankel matrices side by side, H₀ = [H₀⁽¹⁾ … H₀⁽ᴿ⁾] = O [Γ⁽¹⁾ … Γ⁽ᴿ⁾]: one
  realization (A, C) whose modes share their shapes across the records. From one free decay, two
  modes whose poles nearly coincide differ only by their time functions (each channel's amplitude
  is free), which no realistic signal-to-noise ratio separates; references that mix them
  differently separate them by their shapes.

Written here rather than taken from pyOMA2: pyOMA2 has SSI-cov but no VAR and no free-decay ERA,
its default damping ceiling (0.2) drops Scompi's 26 % mode, and its automatic selection needs a
clustering set-up per record; benchmarks/bench_oma.py compares these estimators with pyOMA2's
SSI-cov on the same record (time and errors).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..core.errors import InputError
from ..core.validation import shown

METHODS = ("era", "ssi-cov", "var")


@dataclass(frozen=True)
class OrderPoles:
    """Poles of one model order: ``order``; ``eigenvalues`` λ (k,) complex [1/s]; ``shapes``
    (c, k) complex (unnormalized); ``amplitudes`` (k,) initial amplitude of each pole's
    contribution ‖φ_j a_j‖ in channel units, or NaN when the method gives none."""

    order: int
    eigenvalues: np.ndarray
    shapes: np.ndarray
    amplitudes: np.ndarray


def check_orders(orders, num_channels: int, num_samples: int, method: str) -> np.ndarray:
    """Sorted unique model orders (ints ≥ 2) that the record can support; InputError otherwise.

    VAR order p has c·p parameters per equation: needs p·c < N/2. SSI/ERA order n (state size)
    needs n < N/4.
    """
    try:
        arr = np.unique(np.asarray(orders, dtype=float).reshape(-1))
    except (TypeError, ValueError):
        raise InputError(f"orders: expected integers, got {shown(orders)}") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
        raise InputError(f"orders: expected integers, got {shown(np.asarray(orders).tolist())}")
    arr = arr.astype(int)
    if arr[0] < 2:
        raise InputError(f"orders: must be >= 2, got {arr[0]}")
    limit = num_samples // (2 * num_channels) if method == "var" else num_samples // 4
    if arr[-1] > limit:
        raise InputError(f"orders: {method} order {arr[-1]} is too high for {num_samples} samples of "
                         f"{num_channels} channels (at most {limit}); record longer or lower the orders")
    return arr


def as_segments(y) -> list:
    """``y`` (N, c) or a list of (N_r, c) segments → list of float arrays with a common c;
    InputError otherwise."""
    segments = [np.asarray(seg, float) for seg in (y if isinstance(y, (list, tuple)) else [y])]
    if not segments or any(seg.ndim != 2 for seg in segments) or len({seg.shape[1] for seg in segments}) != 1:
        raise InputError("records: every reference needs the same channels (samples x channels arrays)")
    return segments


def _poles(mu, fs):
    """Continuous-time λ = fs ln μ of discrete poles μ (principal branch; μ = 0 → very fast real)."""
    mu = np.asarray(mu, complex)
    tiny = np.abs(mu) < 1e-300
    lam = fs * np.log(np.where(tiny, 1e-300, mu))
    # A real negative μ is a pole at exactly the Nyquist frequency: keep the Im > 0 member.
    return np.where(np.isclose(mu.imag, 0.0) & (mu.real < 0), lam.real + 1j * np.pi * fs, lam)


def var_poles(y, fs, orders) -> list[OrderPoles]:
    """VAR poles for each order p in ``orders`` (module docstring); shapes from the companion
    eigenvectors' first block, no amplitudes (NaN)."""
    segments = as_segments(y)
    c = segments[0].shape[1]
    orders = check_orders(orders, c, sum(seg.shape[0] for seg in segments), "var")
    pmax = int(orders[-1])
    if min(seg.shape[0] for seg in segments) <= 2 * pmax:
        raise InputError(f"orders: VAR order {pmax} needs references longer than {2 * pmax} samples")
    # Regressor [y_{k−1}, …, y_{k−pmax}] and target y_k for k = pmax..N−1 of every reference.
    blocks = []
    for seg in segments:
        N = seg.shape[0]
        phi = np.empty((N - pmax, c * pmax + c))
        for i in range(1, pmax + 1):
            phi[:, (i - 1) * c:i * c] = seg[pmax - i:N - i]
        phi[:, c * pmax:] = seg[pmax:]
        blocks.append(phi)
    R = sla.qr(np.vstack(blocks), mode="r", check_finite=False)[0][: c * pmax + c]
    out = []
    for p in orders:
        m = c * p
        R11, rhs = R[:m, :m], R[:m, c * pmax:]
        diag = np.abs(np.diag(R11))
        if diag.min() > 1e-10 * diag.max():
            theta = sla.solve_triangular(R11, rhs, check_finite=False)
        else:                                   # rank-deficient: minimum-norm pseudo-inverse
            theta = np.linalg.lstsq(R11, rhs, rcond=1e-12)[0]
        comp = np.zeros((m, m))
        comp[:c] = theta.T                      # y_k = [A_1 … A_p] [y_{k−1}; …; y_{k−p}]
        comp[c:, :-c] = np.eye(m - c)
        mu, vec = np.linalg.eig(comp)
        out.append(OrderPoles(int(p), _poles(mu, fs), vec[:c], np.full(mu.size, np.nan)))
    return out


def _block_hankel(y, rows, cols, shift=0):
    """(rows·c, cols) block Hankel [y_{i+j+shift}] of y (N, c)."""
    c = y.shape[1]
    H = np.empty((rows * c, cols))
    for i in range(rows):
        H[i * c:(i + 1) * c] = y[i + shift:i + shift + cols].T
    return H


def _block_rows(max_order, c):
    """Block rows of the Hankel/Toeplitz matrices: twice what the largest order needs (≥ 4)."""
    return max(4, 2 * int(np.ceil((max_order + 1) / c)))


def era_poles(y, fs, orders, block_rows=None) -> list[OrderPoles]:
    """ERA poles of the free decay ``y`` (N, c), or of several (multi-reference, module docstring),
    for each state order n in ``orders``; amplitudes = ‖φ_j‖·|(Ψ⁻¹x₀)_j| with x₀ the realized
    initial state (root sum of squares over the references)."""
    segments = as_segments(y)
    c = segments[0].shape[1]
    orders = check_orders(orders, c, sum(seg.shape[0] for seg in segments), "era")
    s = block_rows or _block_rows(orders[-1], c)
    widths = [seg.shape[0] - s for seg in segments]
    if min(widths) < 1 or sum(widths) < orders[-1] + 1:
        raise InputError(f"orders: record too short for ERA order {orders[-1]} "
                         f"({', '.join(str(seg.shape[0]) for seg in segments)} samples)")
    H0 = np.hstack([_block_hankel(seg, s, w) for seg, w in zip(segments, widths)])
    U, S, Vt = np.linalg.svd(H0, full_matrices=False)
    r = int(orders[-1])
    if S[r - 1] <= 0:
        raise InputError("record: the free decay has too few independent components for these orders")
    H1 = np.hstack([_block_hankel(seg, s, w, shift=1) for seg, w in zip(segments, widths)])
    G = U[:, :r].T @ H1 @ Vt[:r].T                 # U_rᵀ H₁ V_r, truncated per order below
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])      # column of each reference's k = 0
    out = []
    for n in orders:
        scale = 1.0 / np.sqrt(S[:n])
        A = scale[:, None] * G[:n, :n] * scale[None, :]
        C = U[:c, :n] * np.sqrt(S[:n])
        x0 = np.sqrt(S[:n])[:, None] * Vt[:n, starts]
        mu, psi = np.linalg.eig(A)
        shapes = C @ psi
        coeff = np.linalg.solve(psi, x0.astype(complex))
        amp = np.linalg.norm(shapes, axis=0) * np.linalg.norm(coeff, axis=1)
        out.append(OrderPoles(int(n), _poles(mu, fs), shapes, amp))
    return out


def ssi_cov_poles(y, fs, orders, block_rows=None) -> list[OrderPoles]:
    """SSI-cov poles of ``y`` (N, c), or of several references, for each state order n in
    ``orders`` (module docstring).

    Covariance estimates R_i = Σ_{k<M} y_{k+i} y_kᵀ / M (M = N − 2s, the same samples for
    every lag i = 1..2s−1; summed over the references, divided by ΣM), Toeplitz block (a, b) =
    R_{s+a−b}; no amplitudes (NaN).
    """
    segments = as_segments(y)
    c = segments[0].shape[1]
    orders = check_orders(orders, c, sum(seg.shape[0] for seg in segments), "ssi-cov")
    s = block_rows or _block_rows(orders[-1], c)
    lags = 2 * s
    if 2 * s >= min(seg.shape[0] for seg in segments) // 2:
        raise InputError(f"orders: record too short for SSI-cov order {orders[-1]} "
                         f"({', '.join(str(seg.shape[0]) for seg in segments)} samples)")
    # R_i over one common sample range k = 0..M−1 for every lag: for a free decay
    # (x_{k+1} = A x_k) the Toeplitz matrix then factors exactly as O Γ.
    R = np.zeros((lags, c, c))
    total = 0
    for seg in segments:
        M = seg.shape[0] - lags
        R += np.array([seg[i:i + M].T @ seg[:M] for i in range(lags)])
        total += M
    R /= total
    T = np.empty((s * c, s * c))
    for a in range(s):
        for b in range(s):
            T[a * c:(a + 1) * c, b * c:(b + 1) * c] = R[s + a - b]
    U, S, _ = np.linalg.svd(T)
    out = []
    for n in orders:
        O = U[:, :n] * np.sqrt(S[:n])
        A = np.linalg.lstsq(O[:-c], O[c:], rcond=None)[0]
        mu, psi = np.linalg.eig(A)
        out.append(OrderPoles(int(n), _poles(mu, fs), O[:c] @ psi, np.full(mu.size, np.nan)))
    return out


ESTIMATORS = {"era": era_poles, "ssi-cov": ssi_cov_poles, "var": var_poles}


def check_method(method):
    """InputError naming the field unless ``method`` is one of :data:`METHODS`."""
    if method not in ESTIMATORS:
        raise InputError(f"method: must be one of {', '.join(METHODS)}, got {shown(method)}")


def estimate_poles(method: str, y, fs, orders, **options) -> list[OrderPoles]:
    """Dispatch to the estimator named ``method`` (one of :data:`METHODS`)."""
    check_method(method)
    return ESTIMATORS[method](y, fs, orders, **options)

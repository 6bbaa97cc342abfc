"""Measurement noise of a record, estimated from the record itself (no model): what the OMA
whitens its channels by when a record is noisy (:mod:`.mode_estimation`)."""
from __future__ import annotations

import numpy as np

from .estimators import as_segments

# Second differences of white noise of std σ have std √6 σ; the median absolute value of a normal
# variable is 0.6745 of its std (a robust estimate: the early, large second differences of fast modes
# are a minority of the samples).
MAD_TO_STD = 1.0 / 0.6745


def noise_level(ys) -> np.ndarray:
    """Per channel (c,) the measurement noise std of the segments ``ys``, from their second
    differences (median absolute value · MAD_TO_STD / √6, pooled over the references): the
    signal's second difference at f ≪ fs is (2π f/fs)² times smaller, so what remains is the
    noise (and the quantization, ≈ quantum/√12 when the signal crosses many quanta). An upper
    bound for records with strong modes near the Nyquist frequency."""
    d2 = np.vstack([np.diff(y, 2, axis=0) for y in as_segments(ys)])
    return MAD_TO_STD * np.median(np.abs(d2), axis=0) / np.sqrt(6.0)

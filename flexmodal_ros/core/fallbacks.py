"""One warning per fallback: when an accelerated or optional path is unavailable and another runs
instead, the user is told once per process what, why, what runs instead and what it costs.

Light on purpose (the standard library only): every layer imports it.
"""
from __future__ import annotations

import threading
import warnings


class FallbackWarning(RuntimeWarning):
    """An accelerated or optional path is unavailable; a slower or simpler one runs instead."""


_WARNED: set = set()
_LOCK = threading.Lock()


def warn_fallback(owner: str, unavailable: str, why: str, instead: str, cost: str, stacklevel: int = 2) -> bool:
    """Warn once per process and (``owner``, ``unavailable``) pair: "<owner>: <unavailable> is
    unavailable (<why>); <instead> — cost: <cost>". Returns True when this call warned."""
    with _LOCK:
        if (owner, unavailable) in _WARNED:
            return False
        _WARNED.add((owner, unavailable))
    warnings.warn(f"{owner}: {unavailable} is unavailable ({why}); {instead} — cost: {cost}",
                  FallbackWarning, stacklevel=stacklevel + 1)
    return True

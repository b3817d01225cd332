"""Pacing: how fast a session's feed releases ticks, as a factor of real time.

`max` (None) releases every tick as fast as the engine takes it; `realtime` (1.0) releases a
tick when the wall clock since the session started reaches its market time; `N` runs N times
faster than real time. Pacing changes when things happen, never what happens: the feed still
stops at each ordinal's cutoff until its turn is armed, so every pace gives the same ledger.
"""

from __future__ import annotations

import math

MAX_PACE = 1e9


class PaceError(ValueError):
    """A pace that is neither max, realtime nor a positive factor."""


def parse_pace(text: str) -> float | None:
    """`max` → None, `realtime` → 1.0, `N` (a number > 0) → N."""
    word = text.strip().lower()
    if word == "max":
        return None
    if word == "realtime":
        return 1.0
    try:
        factor = float(word)
    except ValueError:
        raise PaceError(f"pace must be max, realtime or a factor of real time like 60, got {text!r}") from None
    if not (math.isfinite(factor) and 0 < factor <= MAX_PACE):
        raise PaceError(f"pace factor must be > 0 and <= {MAX_PACE:g}, got {text!r}")
    return factor


def pace_name(factor: float | None) -> str:
    """The canonical text of a pace (`max`, `realtime`, or the factor)."""
    if factor is None:
        return "max"
    return "realtime" if factor == 1.0 else f"{factor:g}"


__all__ = ["MAX_PACE", "PaceError", "pace_name", "parse_pace"]

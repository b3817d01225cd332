"""The time a model call's policy reads and waits on, injected so its tests are deterministic.

`monotonic()` measures deadlines and pacing (never goes back); `wall()` is the UNIX time, read
only to turn a server's absolute retry time (an HTTP date, an RFC 3339 reset) into seconds;
`sleep(s)` waits. `SYSTEM_CLOCK` is the real one. Nothing read here reaches a ledger or a
capture: it decides when a request is sent, never what a run records.
"""

from __future__ import annotations

import time
from typing import Protocol


class MonotonicClock(Protocol):
    def monotonic(self) -> float:
        ...

    def wall(self) -> float:
        ...

    def sleep(self, seconds: float) -> None:
        ...


class SystemClock:
    """The process's clocks. `time.monotonic` is CLOCK_MONOTONIC on Linux and macOS: one
    system-wide clock, so processes on one host agree on it (the shared limiter relies on it)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()

__all__ = ["SYSTEM_CLOCK", "MonotonicClock", "SystemClock"]

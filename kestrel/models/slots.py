"""Calls in flight per endpoint: a bound on how many attempts run at once, and a count of them.

`CallSlots(limit)` is one endpoint's: an attempt takes a slot before its request and gives it
back when the answer (or the error) is in; with `limit` None it only counts. `Slots.get(
provider, base_url, limit)` hands every agent of one endpoint (the key of
`kestrel.models.limiter.endpoint_key`) the same `CallSlots`, so a sweep's `--max-concurrency
PROVIDER=N` binds across all its sessions. `wait_idle` is how a stopping sweep waits for the
calls still in flight before it closes their clients (no thread or socket outlives it).

Invariants: `in_flight` never exceeds `limit`; a slot is waited for at most the time given
(the call's deadline), then the attempt is refused as a call failure; thread-safe.
"""

from __future__ import annotations

import threading

from kestrel.models.limiter import endpoint_key


class CallSlots:
    """One endpoint's calls in flight, at most `limit` (None: unbounded)."""

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"a concurrency limit must be >= 1, got {limit}")
        self.limit = limit
        self._cond = threading.Condition()
        self._in_flight = 0
        self.most = 0  # the most calls in flight at once so far

    def acquire(self, timeout: float) -> bool:
        """Take a slot, waiting at most `timeout` seconds; False when none freed in time."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self.limit is None or self._in_flight < self.limit,
                                     max(timeout, 0.0))
            if ok:
                self._in_flight += 1
                self.most = max(self.most, self._in_flight)
            return ok

    def release(self) -> None:
        with self._cond:
            if self._in_flight <= 0:
                raise RuntimeError("CallSlots.release without a slot taken")
            self._in_flight -= 1
            self._cond.notify_all()

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no call is in flight, at most `timeout` seconds; True when idle."""
        with self._cond:
            return self._cond.wait_for(lambda: self._in_flight == 0, max(timeout, 0.0))


class Slots:
    """The `CallSlots` of each endpoint (provider + base URL), made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, CallSlots] = {}

    def get(self, provider: str, base_url: str | None, limit: int | None = None) -> CallSlots:
        """The endpoint's slots; every caller of one endpoint must name the same `limit`."""
        key = endpoint_key(provider, base_url)
        with self._lock:
            slots = self._slots.get(key)
            if slots is None:
                slots = self._slots[key] = CallSlots(limit)
            elif slots.limit != limit:
                raise ValueError(f"{key}: the concurrency limit is {slots.limit}, not {limit}: give one limit "
                                 "per endpoint")
            return slots

    def all(self) -> list[CallSlots]:
        with self._lock:
            return list(self._slots.values())

    def wait_idle(self, timeout: float) -> bool:
        """Wait (at most `timeout` seconds in all) until no endpoint has a call in flight."""
        import time

        end = time.monotonic() + timeout
        return all(s.wait_idle(end - time.monotonic()) for s in self.all())


__all__ = ["CallSlots", "Slots"]

"""A client-side rate limiter per provider endpoint: requests per minute and tokens per minute,
so a sweep stays under a provider's limits instead of bouncing off them.

The rule is GCRA (the generic cell rate algorithm, a token bucket kept as one "theoretical
arrival time" per limit), written sans-IO: `plan` says when a request may start, `commit`
books it, `reconcile` corrects a token estimate with the usage the provider reported, `hold`
keeps every request back until a time a server asked for (a 429's `Retry-After`). Each is a
pure function of the state (`LimiterState`), the limit and the time, so the in-process limiter
(`RateLimiter`, thread-safe) and the one shared by the processes of a host (`SharedRateLimiter`,
SQLite) run the same arithmetic, and async code can await the returned start time itself.

Invariants:
- requests start at most `requests_per_minute / 60` per second on average, with a burst of at
  most `burst_s` seconds' worth on top (default 0: evenly paced);
- tokens likewise: a request books its estimated tokens (input estimate + output limit) when
  it starts, and the difference to its actual usage is booked when it ends (`settle`), so the
  pacing follows what was really spent;
- a request whose start would fall after its deadline is refused before it is booked
  (`RateLimited`): a refused request costs the limiter nothing;
- every state change happens under one lock (a thread lock; for the shared limiter a SQLite
  `BEGIN IMMEDIATE` transaction): two callers never book the same slot.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from kestrel.models.clock import SYSTEM_CLOCK, MonotonicClock
from kestrel.models.errors import ModelError


class RateLimit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A provider's limits as the client keeps them (None: that limit is not kept)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise ValueError(f"{name.replace('_', ' ')} must be > 0, got {value}")
        if not math.isfinite(self.burst_s) or self.burst_s < 0:
            raise ValueError(f"rate limit burst must be >= 0 seconds, got {self.burst_s}")

    @property
    def active(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    def split(self, parts: int) -> RateLimit:
        """One of `parts` equal shares (for processes that cannot share a limiter, such as
        the workers of a cluster on several hosts)."""
        if parts < 1:
            raise ValueError(f"a rate limit splits into >= 1 parts, got {parts}")
        rpm, tpm = self.requests_per_minute, self.tokens_per_minute
        return RateLimit(None if rpm is None else rpm / parts, None if tpm is None else tpm / parts,
                         self.burst_s)


class LimiterState(msgspec.Struct, frozen=True):
    """The limiter's state: each limit's theoretical arrival time and the server's hold
    (monotonic seconds)."""

    requests_tat: float = 0.0
    tokens_tat: float = 0.0
    hold_until: float = 0.0


class Permit(msgspec.Struct, frozen=True):
    """A booked request: it may start at `start` (monotonic seconds); `tokens` were booked."""

    start: float
    tokens: int


class RateLimited(ModelError):
    """The limiter's next slot is after the call's deadline (no request was sent)."""


def plan(limit: RateLimit, pace: LimiterState, now: float) -> float:
    """When a request asked for at `now` may start."""
    start = max(now, pace.hold_until)
    if limit.requests_per_minute is not None:
        start = max(start, pace.requests_tat - limit.burst_s)
    if limit.tokens_per_minute is not None:
        start = max(start, pace.tokens_tat - limit.burst_s)
    return start


def commit(limit: RateLimit, pace: LimiterState, start: float, tokens: int) -> LimiterState:
    """`pace` after booking a request of `tokens` tokens that starts at `start`."""
    rpm, tpm = limit.requests_per_minute, limit.tokens_per_minute
    return LimiterState(
        pace.requests_tat if rpm is None else max(pace.requests_tat, start) + 60.0 / rpm,
        pace.tokens_tat if tpm is None else max(pace.tokens_tat, start) + tokens * 60.0 / tpm,
        pace.hold_until,
    )


def reconcile(limit: RateLimit, pace: LimiterState, booked: int, actual: int) -> LimiterState:
    """`pace` once a request that booked `booked` tokens turned out to use `actual`."""
    tpm = limit.tokens_per_minute
    if tpm is None or booked == actual:
        return pace
    return LimiterState(pace.requests_tat, pace.tokens_tat + (actual - booked) * 60.0 / tpm, pace.hold_until)


def hold(pace: LimiterState, until: float) -> LimiterState:
    """`pace` with every request held back until `until` (a server's wait)."""
    return LimiterState(pace.requests_tat, pace.tokens_tat, max(pace.hold_until, until))


T = TypeVar("T")


def _refusal(start: float, now: float, deadline: float) -> RateLimited:
    return RateLimited(
        f"client rate limit: the next request slot is in {start - now:.2f}s, after the call's "
        f"deadline (in {max(deadline - now, 0.0):.2f}s)"
    )


class RateLimiter:
    """The in-process limiter of one endpoint (thread-safe). `reserve` books a slot and
    returns it (never sleeps: an async caller awaits `permit.start` itself); `acquire` also
    sleeps until it."""

    def __init__(self, limit: RateLimit, *, clock: MonotonicClock = SYSTEM_CLOCK) -> None:
        self.limit = limit
        self.clock = clock
        self._lock = threading.Lock()
        self._pace = LimiterState()

    def reserve(self, tokens: int, deadline: float) -> Permit:
        """Book a request of `tokens` tokens that must start before `deadline` (monotonic
        seconds), or raise `RateLimited` without booking it."""
        with self._lock:
            now = self.clock.monotonic()
            start = plan(self.limit, self._pace, now)
            if start > deadline:
                raise _refusal(start, now, deadline)
            self._pace = commit(self.limit, self._pace, start, tokens)
        return Permit(start, tokens)

    def acquire(self, tokens: int, deadline: float) -> Permit:
        permit = self.reserve(tokens, deadline)
        self.clock.sleep(permit.start - self.clock.monotonic())
        return permit

    def settle(self, permit: Permit, actual_tokens: int) -> None:
        with self._lock:
            self._pace = reconcile(self.limit, self._pace, permit.tokens, actual_tokens)

    def hold(self, seconds: float) -> None:
        """Hold every request back for `seconds` from now (a server's 429 wait)."""
        with self._lock:
            self._pace = hold(self._pace, self.clock.monotonic() + seconds)


STALE_AHEAD_S = 3600.0
"""A shared state further ahead of now than this is from another boot of the host (the
monotonic clock restarts at boot): it is reset, never waited on."""


class SharedRateLimiter:
    """The limiter of one endpoint shared by every process on the host that opens the same
    SQLite file (WAL; each booking one `BEGIN IMMEDIATE` transaction). The time is the
    system-wide monotonic clock, so the file is for one host: on a cluster, give each worker
    `limit.split(workers)` instead. Every process must use the same `limit` for a key."""

    def __init__(self, path: str | Path, key: str, limit: RateLimit, *, clock: MonotonicClock = SYSTEM_CLOCK) -> None:
        self.limit = limit
        self.clock = clock
        self.key = key
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a pacing state: losing the last booking is harmless
        self._db.execute("CREATE TABLE IF NOT EXISTS pace (key TEXT PRIMARY KEY, requests_tat REAL NOT NULL,"
                         " tokens_tat REAL NOT NULL, hold_until REAL NOT NULL)")

    def _change(self, change: Callable[[LimiterState, float], tuple[LimiterState, T]]) -> T:
        """Run `change(pace, now) -> (pace, permit)` in one transaction."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                now = self.clock.monotonic()
                row = db.execute("SELECT requests_tat, tokens_tat, hold_until FROM pace WHERE key = ?",
                                 (self.key,)).fetchone()
                pace = LimiterState(*row) if row is not None else LimiterState()
                if max(pace.requests_tat, pace.tokens_tat, pace.hold_until) > now + STALE_AHEAD_S:
                    pace = LimiterState()
                new, out = change(pace, now)
                db.execute("INSERT OR REPLACE INTO pace VALUES (?, ?, ?, ?)",
                           (self.key, new.requests_tat, new.tokens_tat, new.hold_until))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return out

    def reserve(self, tokens: int, deadline: float) -> Permit:
        def book(pace: LimiterState, now: float) -> tuple[LimiterState, Permit]:
            start = plan(self.limit, pace, now)
            if start > deadline:
                raise _refusal(start, now, deadline)
            return commit(self.limit, pace, start, tokens), Permit(start, tokens)

        return self._change(book)

    def acquire(self, tokens: int, deadline: float) -> Permit:
        permit = self.reserve(tokens, deadline)
        self.clock.sleep(permit.start - self.clock.monotonic())
        return permit

    def settle(self, permit: Permit, actual_tokens: int) -> None:
        self._change(lambda pace, now: (reconcile(self.limit, pace, permit.tokens, actual_tokens), None))

    def hold(self, seconds: float) -> None:
        self._change(lambda pace, now: (hold(pace, now + seconds), None))

    def close(self) -> None:
        with self._lock:
            self._db.close()


Limiter = RateLimiter | SharedRateLimiter


def endpoint_key(provider: str, base_url: str | None) -> str:
    """The limiter's key: the provider and the base URL (None: the SDK's default endpoint)."""
    return f"{provider}@{(base_url or 'default').rstrip('/')}"


class Limiters:
    """One limiter per endpoint (`endpoint_key`), made on first use and then shared by every
    agent that asks for the same endpoint: the composition root holds one `Limiters` for a
    process. With `shared_path`, the limiters are `SharedRateLimiter`s on that file (shared
    with the other processes of the host that name it)."""

    def __init__(self, *, shared_path: str | Path | None = None, clock: MonotonicClock = SYSTEM_CLOCK) -> None:
        self._shared_path = shared_path
        self._clock = clock
        self._lock = threading.Lock()
        self._made: dict[str, Limiter] = {}

    def get(self, provider: str, base_url: str | None, limit: RateLimit) -> Limiter:
        key = endpoint_key(provider, base_url)
        with self._lock:
            made = self._made.get(key)
            if made is not None:
                if made.limit != limit:
                    raise ValueError(f"{key}: one endpoint has one rate limit, got {limit} after {made.limit}")
                return made
            new: Limiter = (RateLimiter(limit, clock=self._clock) if self._shared_path is None
                            else SharedRateLimiter(self._shared_path, key, limit, clock=self._clock))
            self._made[key] = new
            return new


__all__ = [
    "Limiter",
    "Limiters",
    "LimiterState",
    "Permit",
    "RateLimit",
    "RateLimited",
    "RateLimiter",
    "SharedRateLimiter",
    "commit",
    "endpoint_key",
    "hold",
    "plan",
    "reconcile",
]

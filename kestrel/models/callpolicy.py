"""How a model agent makes its calls: retries, a rate limiter, spending caps, a reply cache,
call slots and a stop signal.

`CallPolicy` gathers them with safe defaults: retries on (`RetryPolicy()`: at most 6 attempts
within the call's deadline), no client-side limiter, no spending cap, no reply cache, no
concurrency bound (`slots`: an endpoint's `CallSlots`, bounding and counting the attempts in
flight), no stop signal (`stop`: once set, every later attempt fails at once without a request,
how a cancelled sweep ends its sessions quickly). Each is used only when given. The objects it holds are shared on purpose: give every agent of one
endpoint the same limiter (`Limiters.get`), every run of a sweep the sweep's `SpendingBudget`
next to its own, every process the same cache directory.

`CallStats` counts what happened (thread-safe), for tests, reports and benchmarks.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import msgspec

from kestrel.models.clock import SYSTEM_CLOCK, MonotonicClock
from kestrel.models.limiter import Limiter
from kestrel.models.replycache import ReplyCache
from kestrel.models.retry import RetryPolicy
from kestrel.models.slots import CallSlots
from kestrel.models.spending import SpendingBudget


class CallCounts(msgspec.Struct, frozen=True):
    """A snapshot of `CallStats`: `calls` asked of the agent; `attempts` requests sent;
    `retries` (attempts after the first); `failed` calls (after their last attempt), of which
    `fatal`; `refused` by a spending cap; `cached` answered from the reply cache (no request);
    `rate_limited` attempts answered 429; `limiter_wait_s` and `backoff_s` spent waiting."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    failed: int = 0
    fatal: int = 0
    refused: int = 0
    cached: int = 0
    rate_limited: int = 0
    limiter_wait_s: float = 0.0
    backoff_s: float = 0.0


class CallStats:
    """Thread-safe counters (see `CallCounts`); `counts()` is a snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = CallCounts()

    def add(self, **deltas: float) -> None:
        with self._lock:
            c = self._counts
            self._counts = msgspec.structs.replace(
                c, **{k: getattr(c, k) + v for k, v in deltas.items()}
            )

    def counts(self) -> CallCounts:
        with self._lock:
            return self._counts


@dataclass(frozen=True)
class CallPolicy:
    """See the module docstring. `clock` and `rng` are injected for deterministic tests (the
    default rng is seeded from the OS: concurrent clients must not back off in step)."""

    retry: RetryPolicy = RetryPolicy()
    limiter: Limiter | None = None
    budgets: tuple[SpendingBudget, ...] = ()
    cache: ReplyCache | None = None
    slots: CallSlots | None = None
    stop: threading.Event | None = None
    clock: MonotonicClock = SYSTEM_CLOCK
    rng: random.Random = field(default_factory=random.Random)
    stats: CallStats = field(default_factory=CallStats)


__all__ = ["CallCounts", "CallPolicy", "CallStats"]

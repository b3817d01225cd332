"""When a failed model call is tried again: exponential backoff with full jitter, the server's
own wait honoured, bounded by a number of attempts and by the call's deadline.

Invariants:
- only a retryable failure (`ModelError.retryable`: a timeout, a dropped connection, HTTP
  408/409/429/5xx) is retried; a fatal one (HTTP 401/403/404) never is;
- retry k (k = 0 for the first) waits a pause drawn uniformly from
  `[min_backoff_s, ceiling(k)]`, `ceiling(k) = max(min_backoff_s, min(max_backoff_s,
  base_backoff_s * 2**k))` (full jitter above a floor: an immediate retry after a failure
  mostly meets the same failure). The randomness is an injected `random.Random`;
- when the server says how long to wait (`Retry-After` in seconds or as an HTTP date,
  `retry-after-ms`, OpenAI's `x-ratelimit-reset-requests/-tokens` durations such as `1s` or
  `6m0s`, Anthropic's `anthropic-ratelimit-*-reset` RFC 3339 times), the pause is that wait,
  neither shorter nor padded with the backoff (a 429 asking for 40 ms is retried after 40 ms,
  not after the 0.5 s floor); the endpoint's client-side limiter, when there is one, holds
  every request until then and paces them after it, so the retries do not leave in step;
- at most `max_attempts` attempts in all; a retry is made only when its pause plus
  `min_attempt_s` still fits before the call's deadline; otherwise the last error is the
  call's failure at once (it is not held until the deadline).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import random
import re
from collections.abc import Iterable, Mapping

import msgspec

from kestrel.models.errors import ModelError

DEFAULT_MAX_ATTEMPTS = 6


class RetryPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The retry bounds (see the module invariants); the defaults: 6 attempts, pauses from
    0.5 s, ceilings 1, 2, 4, 8, 16 s (capped at 30 s), an attempt only with >= 50 ms left."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    min_backoff_s: float = 0.5
    base_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    min_attempt_s: float = 0.05

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 20:
            raise ValueError(f"max attempts must be 1 to 20, got {self.max_attempts}")
        for name in ("min_backoff_s", "base_backoff_s", "max_backoff_s", "min_attempt_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"retry {name} must be a finite number >= 0, got {value}")
        if self.max_backoff_s < self.min_backoff_s:
            raise ValueError(
                f"retry max_backoff_s ({self.max_backoff_s}) must be >= min_backoff_s ({self.min_backoff_s})"
            )

    def ceiling(self, retry: int) -> float:
        """The longest backoff of retry `retry` (0-based), before any server wait."""
        grown = self.base_backoff_s * 2.0 ** min(retry, 60)
        return max(self.min_backoff_s, min(self.max_backoff_s, grown))

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The jittered backoff of retry `retry`: uniform in `[min_backoff_s, ceiling(retry)]`."""
        return rng.uniform(self.min_backoff_s, self.ceiling(retry))

    def pause(self, retry: int, server_wait: float | None, rng: random.Random) -> float:
        """The pause before retry `retry`: the server's wait when it gave one, else the
        jittered backoff."""
        return self.backoff(retry, rng) if server_wait is None else server_wait

    def next_pause(
        self, made: int, error: ModelError, wait: float | None, left: float, rng: random.Random
    ) -> float | None:
        """After `made` attempts, the last ending with `error` (the server asking to `wait`
        seconds, None: it did not say) and `left` seconds before the deadline: the pause
        before the next attempt, or None when the call has failed."""
        if not error.retryable or made >= self.max_attempts:
            return None
        pause = self.pause(made - 1, wait, rng)
        return pause if pause + self.min_attempt_s <= left else None


# ------------------------------------------------------------------------------------------
# The server's wait, from the response headers

_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

OPENAI_RESETS = (("x-ratelimit-reset-requests", "x-ratelimit-remaining-requests"),
                 ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens"))
ANTHROPIC_KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


def go_duration(text: str) -> float | None:
    """Seconds of a Go-style duration (`1s`, `6m0s`, `20ms`, `1h2m3.5s`), None if it is not one."""
    text = text.strip()
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _http_date(text: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp() - now


def _rfc3339(text: str, now: float) -> float | None:
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp() - now


def _exhausted_first(resets: Iterable[tuple[float, str | None]]) -> float | None:
    """The wait of the exhausted limits (remaining 0), else of them all: the longest."""
    found = list(resets)
    exhausted = [w for w, remaining in found if remaining is not None and _seconds(remaining) == 0]
    waits = exhausted or [w for w, _ in found]
    return max(waits) if waits else None


def server_wait(headers: Mapping[str, str], now: float) -> float | None:
    """The seconds the response's headers ask to wait before another request (>= 0), or None
    when they say nothing usable. `now` is the UNIX time (for absolute times). Precedence:
    `retry-after-ms`, `Retry-After` (seconds or an HTTP date), then the providers' rate-limit
    resets (those of an exhausted limit, else all of them: the longest)."""
    h = {k.lower(): v for k, v in headers.items()}
    wait: float | None = None
    if "retry-after-ms" in h:
        ms = _seconds(h["retry-after-ms"])
        wait = None if ms is None else ms / 1000.0
    if wait is None and "retry-after" in h:
        text = h["retry-after"].strip()
        wait = _seconds(text)
        if wait is None:
            wait = _http_date(text, now)
    if wait is None:
        resets: list[tuple[float, str | None]] = []
        for reset, remaining in OPENAI_RESETS:
            if reset in h:
                w = go_duration(h[reset])
                if w is None:
                    w = _seconds(h[reset])
                if w is not None:
                    resets.append((w, h.get(remaining)))
        for kind in ANTHROPIC_KINDS:
            reset = f"anthropic-ratelimit-{kind}-reset"
            if reset in h:
                w = _rfc3339(h[reset], now)
                if w is not None:
                    resets.append((w, h.get(f"anthropic-ratelimit-{kind}-remaining")))
        wait = _exhausted_first(resets)
    return None if wait is None else max(wait, 0.0)


__all__ = ["DEFAULT_MAX_ATTEMPTS", "RetryPolicy", "go_duration", "server_wait"]

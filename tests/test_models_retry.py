"""Retries: the real SDKs against the loopback server, the policy's clock virtual (sleeps are
recorded, never waited): the server's wait is honoured in every form the providers send it,
the backoff is full jitter within its bounds, attempts and the deadline bound a call, and
401/403/404 fail at once (fatal for the run)."""

from __future__ import annotations

import email.utils
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from call_helpers import EPOCH, PLAN, VirtualClock, agent, request
from kestrel.data.sample import load_sample
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.errors import FatalModelError, ModelError
from kestrel.models.retry import RetryPolicy, go_duration, server_wait
from kestrel.session.runner import SessionOptions, run_session
from model_server import DROPPED, Canned, Faults, serve

PROVIDERS = ["openai", "anthropic"]


def first_then_plan(first: Canned) -> Any:
    """The first request gets `first`, every later one the plan."""
    seen: list[int] = []

    def script(path: str, body: dict[str, Any]) -> Canned:
        seen.append(1)
        return first if len(seen) == 1 else Canned(PLAN)

    return script


def policy(clock: VirtualClock, **retry: Any) -> CallPolicy:
    return CallPolicy(retry=RetryPolicy(**retry), clock=clock, rng=random.Random(7))


def rfc1123(t: float) -> str:
    return email.utils.formatdate(t, usegmt=True)


def rfc3339(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat().replace("+00:00", "Z")


# the server's wait, each form; the jittered backoff of a first retry is at most 1 s, so the
# pause is exactly the server's wait when that is longer
SERVER_WAITS = [
    ((("retry-after", "7"),), 7.0),
    ((("retry-after", rfc1123(EPOCH + 12)),), 12.0),
    ((("retry-after-ms", "2500"), ("retry-after", "3")), 2.5),
    ((("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "20s"),
      ("x-ratelimit-remaining-tokens", "5000"), ("x-ratelimit-reset-tokens", "6m0s")), 20.0),
    ((("x-ratelimit-reset-tokens", "1m30.5s"),), 90.5),
    ((("anthropic-ratelimit-requests-remaining", "0"),
      ("anthropic-ratelimit-requests-reset", rfc3339(EPOCH + 9))), 9.0),
    ((("anthropic-ratelimit-output-tokens-remaining", "0"),
      ("anthropic-ratelimit-output-tokens-reset", rfc3339(EPOCH + 4)),
      ("anthropic-ratelimit-requests-remaining", "40"),
      ("anthropic-ratelimit-requests-reset", rfc3339(EPOCH + 30))), 4.0),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("headers", "wait"), SERVER_WAITS, ids=lambda x: str(x)[:40])
def test_the_servers_wait_is_honoured(provider: str, headers: tuple[tuple[str, str], ...], wait: float) -> None:
    clock = VirtualClock()
    with serve(first_then_plan(Canned(status=429, headers=headers))) as srv:
        reply = agent(provider, srv, policy(clock)).author(request())
        statuses = [r.status for r in srv.recorded()]
    assert reply.text == PLAN and statuses == [429, 200]
    assert clock.sleeps == [pytest.approx(wait)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_short_server_wait_is_not_padded_with_the_backoff(provider: str) -> None:
    """A 429 asking for 40 ms is retried after 40 ms, not after the 0.5 s backoff floor."""
    clock = VirtualClock()
    headers = (("retry-after-ms", "40"), ("retry-after", "1"))
    with serve(first_then_plan(Canned(status=429, headers=headers))) as srv:
        reply = agent(provider, srv, policy(clock)).author(request())
    assert reply.text == PLAN and clock.sleeps == [pytest.approx(0.04)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_wait_past_the_deadline_fails_at_once(provider: str) -> None:
    clock = VirtualClock()
    with serve(first_then_plan(Canned(status=429, headers=(("retry-after", "600"),)))) as srv:
        with pytest.raises(ModelError, match="HTTP 429") as err:
            agent(provider, srv, policy(clock), timeout_s=60).author(request())
        sent = srv.count()
    assert sent == 1 and clock.sleeps == [] and not isinstance(err.value, FatalModelError)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("first", [Canned(status=500), Canned(status=503), Canned(status=408), Canned(drop=True)],
                         ids=["500", "503", "408", "dropped"])
def test_a_transient_failure_is_retried_after_the_jittered_backoff(provider: str, first: Canned) -> None:
    clock = VirtualClock()
    with serve(first_then_plan(first)) as srv:
        reply = agent(provider, srv, policy(clock)).author(request())
        statuses = [r.status for r in srv.recorded()]
    assert reply.text == PLAN
    assert statuses == [first.status if not first.drop else DROPPED, 200]
    (pause,) = clock.sleeps
    assert 0.5 <= pause <= 1.0  # retry 0: uniform in [min_backoff_s, base_backoff_s]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_attempts_are_bounded(provider: str) -> None:
    clock = VirtualClock()
    with serve(lambda path, body: Canned(status=500)) as srv:
        with pytest.raises(ModelError, match=r"HTTP 500 .*\(after 4 attempts\)"):
            agent(provider, srv, policy(clock, max_attempts=4)).author(request())
        sent = srv.count()
    # the SDK's own retries are off: exactly the policy's attempts reach the server
    assert sent == 4 and len(clock.sleeps) == 3
    for k, pause in enumerate(clock.sleeps):
        assert 0.5 <= pause <= max(0.5, min(30.0, 2.0**k))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_deadline_bounds_the_retries(provider: str) -> None:
    """A server that always asks for 3 s: within a 9 s budget (timeout 10 s), attempts at
    0, 3 and 6 s; a fourth would start at 9 s, with no time left for it."""
    clock = VirtualClock()
    with serve(lambda path, body: Canned(status=503, headers=(("retry-after", "3"),))) as srv:
        with pytest.raises(ModelError, match=r"HTTP 503 .*\(after 3 attempts\)"):
            agent(provider, srv, policy(clock), timeout_s=10).author(request())
        sent = srv.count()
    assert sent == 3 and clock.sleeps == [3.0, 3.0]
    assert clock.now - 1000.0 <= 0.9 * 10


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_unknown_model_errors_are_fatal_at_once(provider: str, status: int) -> None:
    clock = VirtualClock()
    with serve(lambda path, body: Canned(status=status)) as srv:
        a = agent(provider, srv, policy(clock))
        with pytest.raises(FatalModelError, match=f"HTTP {status}") as first:
            a.author(request())
        # every later call fails the same way at once, without a request
        with pytest.raises(FatalModelError) as again:
            a.author(request("11:00"))
        sent = srv.count()
    assert sent == 1 and clock.sleeps == []
    assert str(again.value) == str(first.value) and "the run cannot go on" in str(first.value)
    counts = a.policy.stats.counts()
    assert (counts.calls, counts.attempts, counts.failed, counts.fatal) == (2, 1, 2, 2)


def test_a_fatal_error_stands_the_ordinal_down_with_its_reason_today() -> None:
    """Until the session fails the run on it, a fatal error is a fail-closed stand-down of
    every ordinal, with one request in all."""
    with serve(lambda path, body: Canned(status=401)) as srv:
        result = run_session(load_sample(), agent("openai", srv), SessionOptions(checkpoints=("11:00",)))
        sent = srv.count()
    turns = [o for d in result.days for o in d.outcomes]
    assert sent == 1 and len(turns) == 2
    assert all("FatalModelError" in o.armed and "HTTP 401" in o.armed for o in turns)


def test_retries_under_injected_faults_lose_no_call_and_duplicate_none() -> None:
    """A server that fails a seeded 30% of requests (500 or a dropped connection): 20 calls
    all answered, each answered once."""
    clock = VirtualClock()
    with serve(lambda path, body: Canned(PLAN), faults=Faults(error_rate=0.15, drop_rate=0.15, seed=3)) as srv:
        replies = [agent("openai", srv, policy(clock)).author(request(f"c{k}", f"CLOCK {k}")) for k in range(20)]
        answered, duplicated, failed = srv.answered(), srv.duplicated(), srv.count() - srv.answered()
    assert [r.text for r in replies] == [PLAN] * 20
    assert answered == 20 and duplicated == 0 and failed > 0
    assert len(clock.sleeps) == failed


# ------------------------------------------------------------------------------------------
# The policy's rules, for all inputs


@given(st.integers(0, 40), st.floats(0, 5), st.floats(0, 5), st.floats(0, 100), st.integers(0, 2**32))
def test_full_jitter_stays_within_its_bounds(retry: int, floor: float, base: float, cap: float, seed: int) -> None:
    cap = max(cap, floor)
    p = RetryPolicy(min_backoff_s=floor, base_backoff_s=base, max_backoff_s=cap)
    ceiling = max(floor, min(cap, base * 2**retry))
    pause = p.backoff(retry, random.Random(seed))
    assert floor <= pause <= ceiling
    assert p.pause(retry, 2 * cap + 1, random.Random(seed)) == 2 * cap + 1  # the server's time, exactly
    assert p.pause(retry, floor / 2, random.Random(seed)) == floor / 2  # not padded to the floor


@given(st.integers(0, 6))
def test_full_jitter_spreads_over_the_whole_window(retry: int) -> None:
    p = RetryPolicy()
    rng = random.Random(retry)
    draws = [p.backoff(retry, rng) for _ in range(400)]
    lo, hi = 0.5, max(0.5, min(30.0, 2.0**retry))
    assert min(draws) < lo + 0.05 * (hi - lo) and max(draws) > hi - 0.05 * (hi - lo)


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999))
def test_go_durations(h: int, m: int, s: int, ms: int) -> None:
    assert go_duration(f"{h}h{m}m{s}.{ms:03d}s") == pytest.approx(h * 3600 + m * 60 + s + ms / 1000)
    assert go_duration(f"{ms}ms") == pytest.approx(ms / 1000)
    assert go_duration(f"{m}m{s}s") == pytest.approx(m * 60 + s)


@pytest.mark.parametrize("bad", ["", "soon", "1x", "s", "1s junk", "-1s"])
def test_go_duration_rejects_what_is_not_one(bad: str) -> None:
    assert go_duration(bad) is None


def test_server_wait_ignores_what_it_cannot_read() -> None:
    assert server_wait({}, EPOCH) is None
    assert server_wait({"Retry-After": "whenever"}, EPOCH) is None
    assert server_wait({"Retry-After": rfc1123(EPOCH - 60)}, EPOCH) == 0.0  # a past date: now
    assert server_wait({"RETRY-AFTER": "4"}, EPOCH) == 4.0  # header names are case-insensitive


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"max_attempts": 21}, {"min_backoff_s": -1.0}, {"base_backoff_s": float("nan")},
     {"min_backoff_s": 5.0, "max_backoff_s": 1.0}],
)
def test_bad_retry_bounds_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="retry|attempts"):
        RetryPolicy(**kwargs)

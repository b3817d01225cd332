"""The client-side rate limiter: its GCRA rules for all inputs, and, measured by the loopback
server's own count, that it keeps real SDK calls from threads and from two processes under a
requests-per-second and a tokens-per-minute limit (without it, the same load bounces)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from call_helpers import VirtualClock, agent, request, start_together
from kestrel.models.adapter import ModelAgent
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.errors import ModelError
from kestrel.models.limiter import (
    Limiters,
    LimiterState,
    RateLimit,
    RateLimited,
    RateLimiter,
    SharedRateLimiter,
    commit,
    endpoint_key,
    plan,
)
from kestrel.models.retry import RetryPolicy
from model_server import Canned, serve

ROOT = Path(__file__).resolve().parents[1]

arrivals = st.lists(st.floats(0, 5), min_size=1, max_size=40).map(lambda xs: sorted(xs))


@given(arrivals, st.floats(6, 600), st.floats(0, 2))
def test_requests_start_no_faster_than_the_rate_plus_the_burst(times: list[float], rpm: float, burst: float) -> None:
    limit = RateLimit(requests_per_minute=rpm, burst_s=burst)
    pace, starts = LimiterState(), []
    for now in times:
        start = plan(limit, pace, now)
        assert start >= now
        pace = commit(limit, pace, start, 0)
        starts.append(start)
    interval = 60.0 / rpm
    assert starts == sorted(starts)
    # any window of W seconds holds at most (W + burst) / interval + 1 starts
    for i in range(len(starts)):
        for j in range(i, len(starts)):
            span = starts[j] - starts[i]
            assert j - i + 1 <= (span + burst) / interval + 1 + 1e-6


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=30), st.floats(1000, 10**6))
def test_tokens_are_paced_by_what_was_booked(sizes: list[int], tpm: float) -> None:
    limit = RateLimit(tokens_per_minute=tpm)
    pace, start = LimiterState(), 0.0
    starts = []
    for n in sizes:  # all ask at t = 0: each starts once the tokens before it are paid for
        start = plan(limit, pace, 0.0)
        pace = commit(limit, pace, start, n)
        starts.append(start)
    expected = [sum(sizes[:k]) * 60.0 / tpm for k in range(len(sizes))]
    assert starts == pytest.approx(expected)


def test_settling_the_actual_tokens_moves_the_next_start() -> None:
    clock = VirtualClock()
    lim = RateLimiter(RateLimit(tokens_per_minute=6000), clock=clock)  # 100 tokens a second
    first = lim.reserve(1000, deadline=clock.now + 100)
    lim.settle(first, 200)  # it used 200, not the 1,000 booked
    assert lim.reserve(10, deadline=clock.now + 100).start == pytest.approx(clock.now + 2.0)


def test_a_slot_past_the_deadline_is_refused_and_not_booked() -> None:
    clock = VirtualClock()
    lim = RateLimiter(RateLimit(requests_per_minute=60), clock=clock)
    assert lim.reserve(0, clock.now + 10).start == clock.now
    with pytest.raises(RateLimited, match="client rate limit"):
        lim.reserve(0, clock.now + 0.5)
    assert lim.reserve(0, clock.now + 10).start == pytest.approx(clock.now + 1.0)  # the refusal took nothing


def test_a_servers_hold_stops_every_request_until_it_ends() -> None:
    clock = VirtualClock()
    lim = RateLimiter(RateLimit(requests_per_minute=6000), clock=clock)
    lim.hold(5.0)
    assert lim.reserve(0, clock.now + 10).start == pytest.approx(clock.now + 5.0)


def test_a_retry_with_no_slot_before_the_deadline_fails_with_the_servers_error() -> None:
    clock = VirtualClock()
    limiter = RateLimiter(RateLimit(requests_per_minute=1), clock=clock)  # one request a minute
    with serve(lambda path, body: Canned(status=500)) as srv:
        a = agent("openai", srv, CallPolicy(limiter=limiter, clock=clock), timeout_s=10)
        with pytest.raises(ModelError, match=r"HTTP 500 .*\(after 1 attempt; client rate limit: the next "
                                             r"request slot is in \d+\.\d+s"):
            a.author(request())
        sent = srv.count()
    assert sent == 1 and len(clock.sleeps) == 1  # the backoff; then no slot fits


def test_one_limiter_per_endpoint() -> None:
    made = Limiters()
    limit = RateLimit(requests_per_minute=100)
    a = made.get("openai", "http://127.0.0.1:8000/v1/", limit)
    assert made.get("openai", "http://127.0.0.1:8000/v1", limit) is a
    assert made.get("openai", None, limit) is not a and made.get("anthropic", "http://127.0.0.1:8000/v1", limit) is not a
    assert endpoint_key("openai", None) == "openai@default"
    with pytest.raises(ValueError, match="one rate limit"):
        made.get("openai", "http://127.0.0.1:8000/v1", RateLimit(requests_per_minute=5))


@pytest.mark.parametrize("kwargs", [{"requests_per_minute": 0.0}, {"tokens_per_minute": -5.0}, {"burst_s": -1.0}])
def test_bad_limits_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        RateLimit(**kwargs)


# ------------------------------------------------------------------------------------------
# Against the loopback server's count: threads


SERVER_RPS = 10
PACED_RPM = 0.8 * SERVER_RPS * 60
"""The client keeps 8 a second: the slack absorbs a request delayed on its way (a busy host)."""
NO_RETRY = RetryPolicy(max_attempts=1)


def burst_of_calls(agents: list[ModelAgent], calls_each: int, filler: str = "") -> list[str]:
    """Each agent (one per thread, as sessions are) makes `calls_each` calls at once (their
    briefings end with `filler`); the errors raised, one line each."""
    errors: list[str] = []
    lock = threading.Lock()

    def work(a: ModelAgent) -> None:
        for k in range(calls_each):
            try:
                a.author(request(f"c{k}", f"CLOCK {id(a) % 9973:04d} {k:02d} {filler}"))
            except Exception as exc:
                with lock:
                    errors.append(str(exc))

    threads = [threading.Thread(target=work, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_limiter_keeps_threads_under_the_servers_rate(provider: str) -> None:
    limiter = RateLimiter(RateLimit(requests_per_minute=PACED_RPM))
    with serve(lambda path, body: Canned("PASS"), rps=SERVER_RPS) as srv:
        agents = [agent(provider, srv, CallPolicy(retry=NO_RETRY, limiter=limiter), system="S")
                                for _ in range(4)]
        errors = burst_of_calls(agents, 6)
        rejected, answered, most = srv.count(429), srv.answered(), srv.most_in_window(1.0)
    assert errors == [] and rejected == 0 and answered == 24
    assert most <= SERVER_RPS


def test_without_the_limiter_the_same_load_bounces() -> None:
    """The control: the same threads with no limiter (and no retry) meet 429s."""
    with serve(lambda path, body: Canned("PASS"), rps=SERVER_RPS) as srv:
        agents = [agent("openai", srv, CallPolicy(retry=NO_RETRY), system="S") for _ in range(4)]
        errors = burst_of_calls(agents, 6)
        rejected = srv.count(429)
    assert rejected > 0 and len(errors) == rejected and all("HTTP 429" in e for e in errors)


def test_the_limiter_keeps_tokens_under_the_tokens_per_minute() -> None:
    """About 5 requests' worth of tokens a second, measured by the tokens the server
    answered: within any 2 s window, at most 2 s of the rate plus one request."""
    filler = "quote bars levels " * 20
    with serve(lambda path, body: Canned("PASS"), rps=1000) as srv:
        probe = agent("openai", srv, system="S", max_output_tokens=16)
        probe.author(request("probe", f"CLOCK 0000 00 {filler}"))
        per_call = srv.recorded()[0].tokens
        tpm = per_call * 5 * 60
        limiter = RateLimiter(RateLimit(tokens_per_minute=tpm))
        agents = [agent("openai", srv, CallPolicy(limiter=limiter), system="S", max_output_tokens=16)
                                for _ in range(3)]
        errors = burst_of_calls(agents, 6, filler)
        records = srv.recorded()[1:]
    assert errors == [] and all(r.status == 200 for r in records) and len(records) == 18
    ats = sorted(r.at for r in records)
    biggest = max(r.tokens for r in records)
    assert biggest <= 1.1 * per_call
    for i, t0 in enumerate(ats):
        in_window = sum(r.tokens for r in records if t0 <= r.at < t0 + 2.0)
        assert in_window <= tpm / 60 * 2.0 + biggest, (i, in_window)
    # and the pacing is real: 18 calls of ~per_call tokens at 5 a second take >= ~3 s
    assert ats[-1] - ats[0] >= 2.5


# ------------------------------------------------------------------------------------------
# Two processes: the shared limiter keeps them together under the rate


CHILD = r"""
import sys
from kestrel.models.adapter import ModelAgent, ModelConfig
from kestrel.models.adapter import ModelAgent
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.errors import ModelError
from kestrel.models.limiter import RateLimit, RateLimiter, SharedRateLimiter, endpoint_key
from kestrel.models.wires import OpenAIChat
from kestrel.models.retry import RetryPolicy
from kestrel.session.protocol import AuthorRequest

url, db, rpm, calls, shared = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
limit = RateLimit(requests_per_minute=rpm)
limiter = SharedRateLimiter(db, endpoint_key("openai", url), limit) if shared else RateLimiter(limit)
config = ModelConfig("openai", "gpt-4o", base_url=url, timeout_s=60)
wire = OpenAIChat(config, "sk")
wire.connect()
agent = ModelAgent(config, wire, system="S", policy=CallPolicy(retry=RetryPolicy(max_attempts=1), limiter=limiter))
print("ready", flush=True)
sys.stdin.readline()  # start together
failed = 0
for k in range(calls):
    try:
        agent.author(AuthorRequest(ordinal=f"c{k}", iteration=0, briefing=f"CLOCK {k} {sys.argv[6]}"))
    except Exception as exc:
        failed += 1
print(failed)
"""


PROCESS_RPS = 5
"""The server's limit for the two processes: low enough that a busy host still makes the
calls faster than each process's share (the control must reach the limit)."""


def two_processes(tmp_path: Path, shared: bool) -> tuple[int, int, int, int]:
    """(429s, answered, most answered in a 1 s window, calls failed) of 2 processes x 8
    calls, each process's limiter at 80% of the server's limit."""
    with serve(lambda path, body: Canned("PASS"), rps=PROCESS_RPS) as srv:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [subprocess.Popen([sys.executable, "-c", CHILD, srv.openai_url, str(tmp_path / "pace.sqlite3"),
                                   str(0.8 * PROCESS_RPS * 60), "8", "1" if shared else "0", f"p{k}"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=ROOT, env=env)
                 for k in range(2)]
        start_together(procs)
        outs = [p.communicate(timeout=120) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
        return srv.count(429), srv.answered(), srv.most_in_window(1.0), sum(int(o[0]) for o in outs)


def test_a_shared_limiter_keeps_two_processes_under_the_rate(tmp_path: Path) -> None:
    rejected, answered, most, failed = two_processes(tmp_path, shared=True)
    assert (rejected, answered, failed, most <= PROCESS_RPS) == (0, 16, 0, True), most


def test_two_processes_with_their_own_limiters_bounce(tmp_path: Path) -> None:
    """The control: each process keeps 4 a second, together 8: the server answers 429s."""
    rejected, _, _, failed = two_processes(tmp_path, shared=False)
    assert rejected > 0 and failed == rejected


def test_a_stale_shared_state_from_another_boot_is_reset(tmp_path: Path) -> None:
    clock = VirtualClock()
    db = tmp_path / "pace.sqlite3"
    key = endpoint_key("openai", None)
    old = SharedRateLimiter(db, key, RateLimit(requests_per_minute=60), clock=clock)
    old.hold(10 * 3600.0)  # as if written when the monotonic clock was far ahead
    old.close()
    fresh = SharedRateLimiter(db, key, RateLimit(requests_per_minute=60), clock=clock)
    assert fresh.reserve(0, clock.now + 1).start == clock.now

"""The reply cache: a rerun against a cache makes no call and gives byte-identical ledgers and
captures, its calls marked cached with the dollars saved, not spent; the key covers every
request parameter; the cache is never used unless given; concurrent writers in threads and
in two processes lose nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from call_helpers import PLAN, agent, request, start_together
from kestrel.data.sample import load_sample
from kestrel.models.callpolicy import CallPolicy
from kestrel.models.cost import run_cost
from kestrel.models.errors import ModelError
from kestrel.models.replycache import CACHE_FILE, CachedReply, ReplyCache, reply_key
from kestrel.session.protocol import Usage
from kestrel.session.runner import SessionOptions, SessionResult, run_session
from model_server import Canned, ModelServer, by_iteration, serve

ROOT = Path(__file__).resolve().parents[1]
VIEW = "VIEW deep: quote, bars(5m, 12), stats BUDGET 800"
OPTS = SessionOptions(checkpoints=("11:00",))


def session(provider: str, srv: ModelServer, cache: ReplyCache | None) -> tuple[SessionResult, int]:
    """A session against `srv`; the requests it sent."""
    before = srv.count()
    result = run_session(load_sample(), agent(provider, srv, CallPolicy(cache=cache)), OPTS)
    return result, srv.count() - before


def calls(result: SessionResult) -> list[Any]:
    return [e for e in result.evidence if e.latency_ms is not None]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_rerun_from_the_cache_makes_no_call_and_the_same_ledger(provider: str, tmp_path: Path) -> None:
    with serve(by_iteration(VIEW, PLAN)) as srv:  # one endpoint: its base URL is part of the key
        first, sent_first = session(provider, srv, ReplyCache(tmp_path / "cache"))
        again, sent_again = session(provider, srv, ReplyCache(tmp_path / "cache"))  # as a new process would
    assert sent_first == 4 and sent_again == 0
    assert again.ledger_jsonl() == first.ledger_jsonl() and again.capture_jsonl() == first.capture_jsonl()
    assert [(e.kind, e.usage) for e in calls(again)] == [(e.kind, e.usage) for e in calls(first)]
    assert not any(e.cached for e in calls(first)) and all(e.cached for e in calls(again))
    agent_id = first.header.agent
    spent = run_cost(agent_id, first.evidence, [o for d in first.days for o in d.outcomes])
    saved = run_cost(agent_id, again.evidence, [o for d in again.days for o in d.outcomes])
    assert spent["total"]["usd"] > 0 and spent["total"]["usd_saved"] == 0 and spent["total"]["cached"] == 0
    assert saved["total"]["usd"] == 0 and saved["total"]["usd_saved"] == pytest.approx(spent["total"]["usd"])
    assert saved["total"]["cached"] == 4 and all(c["cached"] for c in saved["calls"])
    assert saved["total"]["input"] == spent["total"]["input"]  # the tokens are the recorded call's


def test_a_hit_returns_the_recorded_reply_and_usage(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 1234, "completion_tokens": 56, "prompt_tokens_details": {"cached_tokens": 1000}}
    cache = ReplyCache(tmp_path)
    with serve(lambda path, body: Canned(PLAN, usage=usage, finish="length")) as srv:
        first = agent("openai", srv, CallPolicy(cache=cache)).author(request())
        second_agent = agent("openai", srv, CallPolicy(cache=cache))
        second = second_agent.author(request())
        sent = srv.count()
    assert sent == 1
    assert (second.text, second.usage, second.uncertain) == (PLAN, Usage(input=1234, output=56, cache_read=1000), True)
    assert (first.text, first.usage, first.uncertain, first.cached, second.cached) == (
        second.text, second.usage, second.uncertain, False, True)
    assert second_agent.policy.stats.counts().cached == 1 and second_agent.policy.stats.counts().attempts == 0


def test_the_cache_is_never_used_unless_given(tmp_path: Path) -> None:
    with serve(lambda path, body: Canned(PLAN)) as srv:
        a = agent("openai", srv)
        replies = [a.author(request()), agent("openai", srv).author(request())]
        sent = srv.count()
    assert sent == 2 and not any(r.cached for r in replies)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_call_is_not_recorded(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path)
    with serve(lambda path, body: Canned(PLAN) if len(srv.requests) > 1 else Canned(status=400)) as srv:
        with pytest.raises(ModelError, match="HTTP 400"):
            agent("openai", srv, CallPolicy(cache=cache)).author(request())
        assert len(cache) == 0
        reply = agent("openai", srv, CallPolicy(cache=cache)).author(request())
        sent = srv.count()
    assert sent == 2 and reply.text == PLAN and not reply.cached and len(cache) == 1


BASE: dict[str, Any] = {"model": "gpt-4o", "max_tokens": 2048,
                        "messages": [{"role": "system", "content": "card"}, {"role": "user", "content": "brief"}]}


@pytest.mark.parametrize(
    ("provider", "model", "url", "body"),
    [
        ("anthropic", "gpt-4o", "http://h/v1", BASE),
        ("openai", "gpt-4o-mini", "http://h/v1", BASE),
        ("openai", "gpt-4o", "http://other/v1", BASE),
        ("openai", "gpt-4o", None, BASE),
        ("openai", "gpt-4o", "http://h/v1", {**BASE, "max_tokens": 2049}),
        ("openai", "gpt-4o", "http://h/v1", {**BASE, "reasoning_effort": "low"}),
        ("openai", "gpt-4o", "http://h/v1", {**BASE, "messages": BASE["messages"][:1]}),
        ("openai", "gpt-4o", "http://h/v1", {**BASE, "messages": [BASE["messages"][0],
                                                                 {"role": "user", "content": "brief!"}]}),
        ("openai", "gpt-4o", "http://h/v1", {**BASE, "messages": [{"role": "user", "content": "card"},
                                                                 BASE["messages"][1]]}),
    ],
)
def test_every_request_parameter_is_part_of_the_key(
    provider: str, model: str, url: str | None, body: dict[str, Any]
) -> None:
    assert reply_key(provider, model, url, body) != reply_key("openai", "gpt-4o", "http://h/v1", BASE)


def test_the_key_ignores_key_order_and_a_trailing_slash() -> None:
    reordered = dict(reversed(list(BASE.items())))
    assert reply_key("openai", "gpt-4o", "http://h/v1/", reordered) == reply_key("openai", "gpt-4o", "http://h/v1", BASE)


def test_an_unusable_cache_directory_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot open the reply cache in"):
        ReplyCache(blocker / "cache")


# ------------------------------------------------------------------------------------------
# Concurrent writers


def reply_of(k: int) -> CachedReply:
    return CachedReply(f"reply {k}", Usage(input=k, output=k % 7), truncated=k % 2 == 0)


def test_threads_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path)
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            for k in range(t * 50, t * 50 + 100):  # each range overlaps the next thread's
                cache.put(f"k{k}", "openai", "m", reply_of(k))
                assert cache.get(f"k{k}") == reply_of(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) == 7 * 50 + 100 and cache.stored == 7 * 50 + 100
    assert all(cache.get(f"k{k}") == reply_of(k) for k in range(7 * 50 + 100))


WRITER = r"""
import sys
from kestrel.models.replycache import CachedReply, ReplyCache
from kestrel.session.protocol import Usage

cache = ReplyCache(sys.argv[1])
lo, hi = int(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()  # start together
for k in range(lo, hi):
    cache.put(f"k{k}", "openai", "m", CachedReply(f"reply {k}", Usage(input=k, output=k % 7), truncated=k % 2 == 0))
    assert cache.get(f"k{k}") is not None
print(cache.stored)
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(lo), str(lo + 400)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, env=env)
             for lo in (0, 200)]
    start_together(procs)
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    assert sum(int(o[0]) for o in outs) == 600  # the 200 keys both wrote were stored once
    cache = ReplyCache(tmp_path)
    assert len(cache) == 600 and all(cache.get(f"k{k}") == reply_of(k) for k in range(600))
    assert (tmp_path / CACHE_FILE).is_file()

"""The session host: external and in-process agents, the same loop and ledgers as `run_session`,
ordered event streams, isolation of concurrent sessions, abandonment, close, resume from a
committed prefix, usage estimates. Every test runs on asyncio and trio."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from kestrel.service.host import (
    EvidenceEvent,
    HostClient,
    HostError,
    LedgerEvents,
    RequestEvent,
    RunEnded,
    SessionEvent,
    TurnEvent,
    open_host,
)
from kestrel.agents.fixed import FixedAgent
from kestrel.agents.recorded import RecordedAgent
from kestrel.agents.scripted import Raise, ScriptedAgent
from kestrel.data.sample import load_sample
from kestrel.engine.ledger import Ledger
from kestrel.frame.text import estimate_tokens
from kestrel.session.capture import decode_capture
from kestrel.session.protocol import PassTurn, StandDownTurn, Supersede, Usage
from kestrel.session.runner import SessionOptions, run_session
from kestrel.session.spec import ResolvedRun, RunSpec, SpecError

pytestmark = pytest.mark.anyio

ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
FADE = (
    "PLAN fade UNTIL 15:30 RISK maxpos 100 maxloss 300\n"
    "WHEN last > high(30m): SELL 100 MKT STOP +0.5 TARGET -1\n"
)
CHECKS = ("11:00", "13:30")


async def drive(host: HostClient, spec: RunSpec | ResolvedRun, replies: list[str]) -> tuple[str, RunEnded, list[RequestEvent]]:
    """Play `replies` as the external agent of a new session, then PASS to the end."""
    started = await host.start(spec)
    sid, outcome = started.session_id, started.outcome
    asked: list[RequestEvent] = []
    queue = list(replies)
    while isinstance(outcome, RequestEvent):
        asked.append(outcome)
        outcome = await host.submit(sid, queue.pop(0) if queue else "PASS")
    assert isinstance(outcome, RunEnded)
    return sid, outcome, asked


async def test_external_session_equals_the_fixed_agent_and_replays(anyio_backend: str) -> None:
    spec = RunSpec(checkpoints=CHECKS)
    async with open_host() as host:
        sid, end, asked = await drive(host, spec, ["VIEW scout: quote, bars(5m, 6)", "PLAN", ORB])
        result = await host.result(sid)
    assert end.state == "done" and end.summary is not None
    assert [(r.request.ordinal, r.request.iteration) for r in asked] == [
        ("OPEN", 0), ("OPEN", 1), ("OPEN", 2), ("11:00", 0), ("13:30", 0)
    ]
    assert asked[1].request.view_name == "scout" and "BARS 5m" in asked[1].request.briefing
    assert asked[2].request.repair_error is not None and "line 1" in asked[2].request.repair_error
    fixed = run_session(load_sample(), FixedAgent(ORB), SessionOptions(checkpoints=CHECKS))
    assert result.ledger_jsonl() == fixed.ledger_jsonl()
    assert Ledger.from_jsonl(result.ledger_jsonl()).summary().trades >= 1
    header, turns = decode_capture(result.capture_jsonl())
    assert header.agent == "external" and header.schedule == ("OPEN", *CHECKS)
    assert [type(t.turn) for t in turns] == [Supersede, PassTurn, PassTurn]
    replay = run_session(load_sample(), RecordedAgent(turns, agent_id=header.agent),
                         SessionOptions(checkpoints=CHECKS, source=header.source))
    assert replay.ledger_jsonl() == result.ledger_jsonl()
    assert replay.capture_jsonl() == result.capture_jsonl()
    kinds = [e.kind for e in result.evidence]
    assert kinds == ["view-request", "repair"]


async def test_events_come_in_order_and_follow_sees_them_all(anyio_backend: str) -> None:
    seen: list[tuple[str, SessionEvent]] = []

    async def observer(session_id: str, event: SessionEvent) -> None:
        seen.append((session_id, event))

    async with open_host(observer=observer) as host:
        sid, _end, _asked = await drive(host, RunSpec(checkpoints=("11:00",)), ["VIEW v: quote", ORB])
        followed = [e async for e in host.follow(sid)]
        tail = [e async for e in host.follow(sid, after=3)]
        result = await host.result(sid)
    assert [e.seq for e in followed] == list(range(1, len(followed) + 1))
    assert tail == followed[3:]
    kinds = [type(e).__name__ for e in followed]
    assert kinds[:5] == ["RequestEvent", "RequestEvent", "EvidenceEvent", "TurnEvent", "LedgerEvents"]
    assert kinds[-1] == "RunEnded"
    # the observer saw every event but the host's own end record, before the host numbered it
    assert [msgspec.structs.replace(e, seq=0) for _, e in seen] == [
        msgspec.structs.replace(e, seq=0) for e in followed[:-1]
    ]
    assert {s for s, _ in seen} == {sid}
    turns = [e.turn for e in followed if isinstance(e, TurnEvent)]
    assert turns == decode_capture(result.capture_jsonl())[1]
    events = [ev for e in followed if isinstance(e, LedgerEvents) for ev in e.events]
    assert events == result.days[0].ledger.events
    indexes = [e.index for e in followed if isinstance(e, LedgerEvents)]
    assert indexes == sorted(indexes) and indexes[0] == 0
    evidence = [e.record for e in followed if isinstance(e, EvidenceEvent)]
    assert evidence == result.evidence


async def test_concurrent_sessions_are_isolated(anyio_backend: str) -> None:
    plans = [ORB, FADE, "STANDDOWN \"no edge\"", ORB, FADE, "PASS"]
    ledgers: dict[int, bytes] = {}
    async with open_host() as host:

        async def one(k: int) -> None:
            sid, end, _ = await drive(host, RunSpec(checkpoints=CHECKS), [f"VIEW v{k}: quote", plans[k]])
            assert end.state == "done"
            ledgers[k] = (await host.result(sid)).ledger_jsonl()

        async with anyio.create_task_group() as tg:
            for k in range(len(plans)):
                tg.start_soon(one, k)
        assert len(await host.sessions()) == len(plans)
    for k, text in enumerate(plans):
        if text.startswith("PLAN"):
            expected = run_session(load_sample(), FixedAgent(text), SessionOptions(checkpoints=CHECKS))
            assert ledgers[k] == expected.ledger_jsonl(), k
    assert ledgers[0] == ledgers[3] and ledgers[1] == ledgers[4] and ledgers[0] != ledgers[1]


async def test_an_abandoned_session_stands_down_fail_closed(anyio_backend: str) -> None:
    async with open_host(abandon_after=0.2) as host:
        started = await host.start(RunSpec(checkpoints=CHECKS))
        sid = started.session_id
        outcome = await host.next_outcome(sid, started.outcome.seq)
        assert isinstance(outcome, RunEnded) and outcome.state == "done"
        assert outcome.reason is not None and "abandoned" in outcome.reason
        with pytest.raises(HostError, match="abandoned"):
            await host.submit(sid, "PASS")
        result = await host.result(sid)
    turns = [o.turn for o in result.days[0].outcomes]
    assert len(turns) == 3 and all(isinstance(t, StandDownTurn) for t in turns)
    assert all("abandoned" in t.reason and "fail-closed" in t.reason for t in turns)  # type: ignore[union-attr]


async def test_refusals_are_clear_and_the_host_keeps_serving(anyio_backend: str) -> None:
    async with open_host() as host:
        with pytest.raises(HostError, match="unknown session 'nope'"):
            await host.submit("nope", "PASS")
        for bad in (RunSpec(days=0), RunSpec(profile="turbo"), RunSpec(effort="max"),
                    RunSpec(checkpoints=("25:00",)), RunSpec(data="/no/such.csv"),
                    RunSpec(date="2001-01-01"), RunSpec(token_budget=0)):
            with pytest.raises(SpecError):
                await host.start(bad)
        fixed = await host.start(RunSpec(), FixedAgent(ORB), agent_id="fixed")
        with pytest.raises(HostError, match="in-process agent"):
            await host.submit(fixed.session_id, "PASS")
        with pytest.raises(HostError, match="submit replies until"):
            started = await host.start(RunSpec())
            await host.result(started.session_id)
        closed = await host.close(started.session_id)
        assert closed.state == "waiting"
        with pytest.raises(HostError, match="unknown session"):
            await host.status(started.session_id)
        sid, end, _ = await drive(host, RunSpec(), [ORB])
        assert end.state == "done"
        with pytest.raises(HostError, match="not waiting"):
            await host.submit(sid, "PASS")


async def test_in_process_agents_run_through_the_host(anyio_backend: str) -> None:
    agent = ScriptedAgent([Raise("model unavailable"), ORB, "PASS"])
    async with open_host() as host:
        result = await host.run(RunSpec(checkpoints=CHECKS), agent)
    agent.assert_finished()
    first, second, _ = result.days[0].outcomes
    assert first.turn == StandDownTurn("agent failed: RuntimeError: model unavailable (fail-closed stand-down)")
    assert isinstance(second.turn, Supersede)


async def test_resume_reapplies_committed_turns_without_asking(anyio_backend: str) -> None:
    spec = RunSpec(checkpoints=CHECKS, days=2)
    async with open_host() as host:
        sid, _, _ = await drive(host, spec, [ORB, "PASS", FADE])
        original = await host.result(sid)
        _, turns = decode_capture(original.capture_jsonl())
        # a crash after three committed turns: the agent is asked only for the rest
        agent = ScriptedAgent(["PASS", "PASS", "PASS"])
        started = await host.start(spec, agent, committed=turns[:3])
        outcome = started.outcome
        replayed: list[bool] = []
        while not isinstance(outcome, RunEnded):
            outcome = await host.next_outcome(started.session_id, outcome.seq)
        for e in [e async for e in host.follow(started.session_id)]:
            if isinstance(e, TurnEvent):
                replayed.append(e.replayed)
        resumed = await host.result(started.session_id)
    agent.assert_finished()
    assert replayed == [True, True, True, False, False, False]
    assert resumed.ledger_jsonl() == original.ledger_jsonl()
    _, again = decode_capture(resumed.capture_jsonl())
    assert [(t.date, t.ordinal, t.turn) for t in again] == [(t.date, t.ordinal, t.turn) for t in turns]


async def test_usage_is_reported_or_estimated(anyio_backend: str) -> None:
    async with open_host() as host:
        started = await host.start(RunSpec())
        sid = started.session_id
        first = started.outcome
        view = "VIEW v: quote"
        second = await host.submit(sid, view)  # no counts: estimated
        assert isinstance(second, RequestEvent)
        left = second.request.budget_left
        spent = estimate_tokens(first.request.briefing) + estimate_tokens(view)
        assert left is not None and left.tokens == 8000 - spent and left.iterations == 2
        third = await host.submit(sid, "PLAN", input_tokens=1000, output_tokens=5)
        assert isinstance(third, RequestEvent) and third.request.budget_left is not None
        assert third.request.budget_left.tokens == 8000 - spent - 1005
        await host.submit(sid, ORB)
        result = await host.result(sid)
    usages = [e.usage for e in result.evidence]
    assert usages == [
        Usage(input=estimate_tokens(first.request.briefing), output=estimate_tokens(view)),
        Usage(input=1000, output=5),
    ]
    assert result.days[0].outcomes[0].tokens_spent > spent + 1005


async def test_the_dual_budget_and_profiles_apply_to_external_agents(anyio_backend: str) -> None:
    async with open_host() as host:
        # fast: cap 1; the second invalid reply (repair streak 2) escalates, restoring cap 3
        sid, end, asked = await drive(host, RunSpec(profile="fast"), ["PLAN"] * 4)
        result = await host.result(sid)
    turn = result.days[0].outcomes[0].turn
    assert isinstance(turn, StandDownTurn) and "fail-closed" in turn.reason
    assert "authoring budget exhausted" in turn.reason and "view_request_cap 3" in turn.reason
    assert end.state == "done"
    assert [e.kind for e in result.evidence] == ["repair", "repair", "escalation", "repair", "repair"]
    assert [r.request.iteration for r in asked[:4]] == [0, 1, 2, 3]


def test_the_docs_example_runs() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "mcp.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/mcp.md", "exec"), {"__name__": "docs_example"})


async def test_finished_sessions_are_kept_up_to_a_bound(anyio_backend: str) -> None:
    async with open_host(keep_finished=2) as host:
        ids: list[str] = []
        for _ in range(3):  # one after the other: each is done before the next starts
            await host.run(RunSpec(), FixedAgent(ORB))
            ids += [s.session_id for s in await host.sessions() if s.session_id not in ids]
        waiting = (await host.start(RunSpec())).session_id  # running sessions are never dropped
        assert sorted(s.session_id for s in await host.sessions()) == sorted([*ids[1:], waiting])
        with pytest.raises(HostError, match="unknown session"):
            await host.result(ids[0])


TRADE = "PLAN m\nWHEN time >= 10:00: BUY 1 MKT\nWHEN time >= 10:30: FLAT\n"


async def test_a_hosted_session_uses_the_instruments_multiplier(anyio_backend: str) -> None:
    """Money in a hosted run is in the instrument's units (contract multiplier), as in
    `run_session`; the capture header records the engine the run used, and replays."""
    from dataclasses import replace

    from kestrel.market.instrument import Instrument
    from kestrel.session.spec import resolve_run

    base = load_sample()
    data = replace(base, instrument=Instrument(symbol=base.symbol, tick_size=base.tick_size, multiplier=125000.0))
    date = data.sessions[0].date
    spec = RunSpec(date=date.isoformat())
    async with open_host() as host:
        sid, end, _ = await drive(host, resolve_run(spec, data), [TRADE])
        result = await host.result(sid)
    assert end.state == "done"
    fixed = run_session(data, FixedAgent(TRADE), SessionOptions(source=result.header.source), date=date)
    unit = run_session(base, FixedAgent(TRADE), SessionOptions(), date=date)
    assert result.ledger_jsonl() == fixed.ledger_jsonl() != unit.ledger_jsonl()
    header, turns = decode_capture(result.capture_jsonl())
    assert header.engine is not None and header.engine.multiplier == 125000
    replay = run_session(data, RecordedAgent(turns, agent_id=header.agent),
                         SessionOptions(engine=header.engine, source=header.source), date=date)
    assert replay.ledger_jsonl() == result.ledger_jsonl()
    assert replay.capture_jsonl() == result.capture_jsonl()

"""Isolated author calls: a timed-out call is abandoned, its late reply discarded and recorded
as evidence, and the next ordinal's call starts at once (actors on asyncio and trio, and the
direct path, with the same semantics)."""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from kestrel.service.actors.driver import simulate
from kestrel.data.sample import load_sample
from kestrel.session.protocol import AgentReply, AuthorRequest, StandDownTurn, Supersede
from kestrel.session.runner import SessionOptions, SessionResult, run_session

ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
OPTS = SessionOptions(checkpoints=("11:00", "13:30"))
TIMEOUT = 1.0  # the margins below scale with it: a loaded machine stalls a thread for ~0.1 s
HANG_S = 5.0  # a bound so a broken runtime fails the test instead of hanging it


class SlowFirstAgent:
    """A model-like (blocking) agent whose FIRST call hangs until the second call has started;
    the third call waits until the first one has finished, so its late reply exists before the
    session ends (the runtime collects it after each ordinal and at the day's end). Under a runtime that queues calls behind a hung one, the second call never
    starts while the first waits, and every ordinal times out."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True
    agent_id = "slow-first"
    model = "slow-first"

    def __init__(self) -> None:
        self.second_started = threading.Event()
        self.first_finished = threading.Event()
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def author(self, request: AuthorRequest) -> AgentReply:
        with self._lock:
            self.calls.append(request.ordinal)
            n = len(self.calls)
        if n == 1:
            self.second_started.wait(HANG_S)
            self.first_finished.set()
            return AgentReply("PLAN late\nWHEN last > 0: BUY 1 MKT STOP -1\n")
        if n == 2:
            self.second_started.set()
        if n == 3:  # well inside the timeout: a slow machine never makes this call time out
            self.first_finished.wait(TIMEOUT / 2)
        return AgentReply(ORB)


def check_only_open_stands_down(result: SessionResult, agent: SlowFirstAgent) -> None:
    assert agent.calls == ["OPEN", "11:00", "13:30"]
    first, second, third = result.days[0].outcomes
    assert first.turn == StandDownTurn(
        f"agent failed: timed out after {TIMEOUT:g}s (fail-closed stand-down)"
    )
    assert isinstance(second.turn, Supersede) and second.armed == "armed orb"
    # the same plan again restates the incumbent: kept with its state, not re-armed
    assert isinstance(third.turn, Supersede) and third.armed == "kept orb (restated: the same plan, its state kept)"
    kinds = [(e.ordinal, e.kind) for e in result.evidence]
    assert ("OPEN", "agent-error") in kinds
    late = [e for e in result.evidence if e.kind == "late-reply"]
    assert len(late) == 1
    assert late[0].ordinal == "OPEN" and late[0].date == result.days[0].date
    assert late[0].text is not None and late[0].text.startswith("PLAN late")
    assert late[0].reason == f"discarded: answered after the {TIMEOUT:g}s timeout"
    # the late plan was never armed: nothing in the capture or the ledger names it
    # (matched as the plan's name: the capture header's engine config spells "latency")
    assert b'"name":"late"' not in result.capture_jsonl()
    assert b'"plan":"late"' not in result.ledger_jsonl()


@pytest.mark.anyio
async def test_a_timed_out_call_never_delays_the_next_ordinal(anyio_backend: str) -> None:
    agent = SlowFirstAgent()
    result = await simulate(load_sample(), agent, OPTS, agent_timeout=TIMEOUT)
    check_only_open_stands_down(result, agent)


def test_the_direct_path_isolates_calls_the_same_way() -> None:
    agent = SlowFirstAgent()
    result = run_session(load_sample(), agent, OPTS, agent_timeout=TIMEOUT)
    check_only_open_stands_down(result, agent)


@pytest.mark.anyio
async def test_direct_and_actors_agree_on_a_slow_first_agent(anyio_backend: str) -> None:
    direct = run_session(load_sample(), SlowFirstAgent(), OPTS, agent_timeout=TIMEOUT)
    on_actors = await simulate(load_sample(), SlowFirstAgent(), OPTS, agent_timeout=TIMEOUT)
    assert on_actors.ledger_jsonl() == direct.ledger_jsonl()
    assert on_actors.capture_jsonl() == direct.capture_jsonl()

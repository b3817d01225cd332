"""Sessions on actors: the same result as `run_session`, on asyncio and trio; only terminal
turns on the bus; fail-closed agent failures and timeouts; the simulated-time barrier."""

from __future__ import annotations

import random
import time
from typing import ClassVar

import pytest

from kestrel.service.actors.driver import run_simulation, simulate
from kestrel.agents.baseline import BaselineAgent
from kestrel.agents.recorded import RecordedAgent
from kestrel.agents.scripted import Raise, ScriptedAgent
from kestrel.data.sample import load_sample
from kestrel.session.capture import CapturedTurn, decode_capture
from kestrel.session.loop import Evidence
from kestrel.session.protocol import AgentReply, AuthorRequest, StandDownTurn, Supersede, Usage
from kestrel.session.runner import SessionOptions, run_session

pytestmark = pytest.mark.anyio

ORB = (
    "PLAN orb UNTIL 15:45 RISK maxpos 100 maxloss 300\n"
    "WHEN time >= 10:00 AND last > high(30m): BUY 100 MKT STOP -0.5 TARGET +1\n"
)
OPTS = SessionOptions(checkpoints=("11:00", "13:30"))


async def test_actors_match_run_session_over_two_days(anyio_backend: str) -> None:
    data = load_sample()
    direct = run_session(data, BaselineAgent(), OPTS, days=2)
    on_actors = await simulate(data, BaselineAgent(), OPTS, days=2, batch=1000)
    assert on_actors.ledger_jsonl() == direct.ledger_jsonl()
    assert on_actors.capture_jsonl() == direct.capture_jsonl()
    assert [d.outcomes for d in on_actors.days] == [d.outcomes for d in direct.days]


async def test_replay_on_actors_reproduces_the_ledger(anyio_backend: str) -> None:
    data = load_sample()
    original = await simulate(data, BaselineAgent(), OPTS)
    header, turns = decode_capture(original.capture_jsonl())
    replay = await simulate(data, RecordedAgent(turns, agent_id=header.agent), OPTS)
    assert replay.ledger_jsonl() == original.ledger_jsonl()
    assert replay.capture_jsonl() == original.capture_jsonl()


async def test_only_terminal_turns_travel_on_the_bus(anyio_backend: str) -> None:
    agent = ScriptedAgent(["VIEW scout: quote", "PLAN", ORB, "PASS"], usage=Usage(input=10))
    bus_turns: list[CapturedTurn] = []
    sink: list[Evidence] = []
    result = await simulate(
        load_sample(), agent, SessionOptions(checkpoints=("11:00",)), sink=sink.append, turns=bus_turns
    )
    agent.assert_finished()
    assert [(t.ordinal, type(t.turn).__name__) for t in bus_turns] == [
        ("OPEN", "Supersede"),
        ("11:00", "PassTurn"),
    ]
    assert bus_turns == decode_capture(result.capture_jsonl())[1]
    assert [(e.iteration, e.kind) for e in sink] == [(0, "view-request"), (1, "repair")]


async def test_agent_exception_stands_down_and_the_session_goes_on(anyio_backend: str) -> None:
    agent = ScriptedAgent([Raise("model unavailable"), ORB])
    result = await simulate(load_sample(), agent, SessionOptions(checkpoints=("11:00",)))
    first, second = result.days[0].outcomes
    assert first.turn == StandDownTurn(
        "agent failed: RuntimeError: model unavailable (fail-closed stand-down)"
    )
    assert isinstance(second.turn, Supersede) and second.armed == "armed orb"


class SlowAgent:
    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True
    agent_id = "slow"
    model = "slow"

    def author(self, request: AuthorRequest) -> AgentReply:
        time.sleep(0.5)
        return AgentReply("PASS")


async def test_agent_timeout_stands_down(anyio_backend: str) -> None:
    result = await simulate(load_sample(), SlowAgent(), SessionOptions(), agent_timeout=0.05)
    assert result.days[0].outcomes[0].turn == StandDownTurn(
        "agent failed: timed out after 0.05s (fail-closed stand-down)"
    )


class JitteryAgent:
    """Answers like the baseline after a random delay, recording what it was shown."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = True
    agent_id = "baseline"
    model = ""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._inner = BaselineAgent()
        self.briefings: list[str] = []

    def author(self, request: AuthorRequest) -> AgentReply:
        time.sleep(self._rng.uniform(0.0, 0.03))
        self.briefings.append(request.briefing)
        return self._inner.author(request)


async def test_agent_latency_never_changes_the_result(anyio_backend: str) -> None:
    data = load_sample()
    direct_agent = JitteryAgent(0)
    direct = run_session(data, direct_agent, OPTS)
    slow_agent = JitteryAgent(1)
    on_actors = await simulate(data, slow_agent, OPTS, batch=500)
    # the barrier: the agent saw exactly the same snapshots (market and account)
    assert slow_agent.briefings == direct_agent.briefings
    assert on_actors.ledger_jsonl() == direct.ledger_jsonl()


def test_asyncio_and_trio_give_byte_identical_ledgers() -> None:
    data = load_sample()
    a = run_simulation(data, BaselineAgent(), OPTS, backend="asyncio", days=2)
    t = run_simulation(data, BaselineAgent(), OPTS, backend="trio", days=2)
    assert a.ledger_jsonl() == t.ledger_jsonl() and a.capture_jsonl() == t.capture_jsonl()
    # and a replay of the capture, on either backend, reproduces the ledger byte for byte
    header, turns = decode_capture(a.capture_jsonl())
    for backend in ("asyncio", "trio"):
        replay = run_simulation(
            data, RecordedAgent(turns, agent_id=header.agent), OPTS, backend=backend, days=2
        )
        assert replay.ledger_jsonl() == a.ledger_jsonl()
        assert replay.capture_jsonl() == a.capture_jsonl()
    assert len(a.ledger_jsonl().splitlines()) > 10
    with pytest.raises(ValueError, match="unknown backend"):
        run_simulation(data, BaselineAgent(), OPTS, backend="curio")


async def test_the_engine_actor_refuses_an_unknown_message(anyio_backend: str) -> None:
    # an unknown message is a bug in the sender: it fails the ask, it never finishes the day
    from kestrel.service.actors.engine import DayLedger, EngineActor, CloseDay, StartDay
    from kestrel_actors.errors import AskFailed
    from kestrel_actors.system import ActorSystem
    from kestrel.engine.config import EngineConfig

    data = load_sample()
    async with ActorSystem() as system:
        engine = system.spawn(lambda: EngineActor(EngineConfig(), data.symbol, data.tick_size), name="engine")
        await engine.ask(StartDay(data.sessions[-1]), timeout=None)
        with pytest.raises(AskFailed) as failed:
            await engine.ask("finish, please", timeout=None)  # type: ignore[call-overload]  # a bogus message on purpose
        assert isinstance(failed.value.error, AssertionError)
        # the session was not finished by the bogus message: a CloseDay still needs a StartDay
        await engine.ask(StartDay(data.sessions[-1]), timeout=None)
        assert isinstance(await engine.ask(CloseDay(), timeout=None), DayLedger)

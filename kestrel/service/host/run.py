"""One hosted session: driver + engine + feed + agent on the session's own actor system.

`run_hosted` wires the same actors `kestrel.service.actors.driver.simulate` wires (`DriverActor`, `EngineActor`,
`FeedActor`: the same barrier, loop, capture and ledger), with two differences:

- the agent actor is a `HostedAgentActor`: it emits a `RequestEvent` for every ask and answers
  from an in-process `Agent`, or from a `ReplyPort` when the agent is external (its replies
  arrive as messages); turns of a committed prefix (`committed`, for resuming a run after a
  crash) are answered from the record, never asked again;
- a `TapActor` subscribed to the session's `turns` and `ledger` topics turns what the bus
  carries into `TurnEvent`s, `EvidenceEvent`s and `LedgerEvents` for the `Outlet`.

Each session has its own `ActorSystem`, hence its own bus: sessions never see each other's
turns or ledger events. The outlet's `emit` is awaited in line, so an observer that commits
each event before returning (the daemon's store) holds the session until the commit is done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

import msgspec

from kestrel_actors import Actor, ActorRef, ActorSystem
from kestrel.service.actors.agent import AgentActor, AgentMessage, TakeLate
from kestrel.service.actors.driver import DriverActor, RunSession
from kestrel.service.actors.engine import LEDGER_TOPIC, TURNS_TOPIC, EngineActor, LedgerBatch
from kestrel.service.actors.feed import DEFAULT_BATCH_TICKS, FeedActor, Pace
from kestrel.service.host.blind_requests import BlindRequests
from kestrel.service.host.events import (
    BudgetLeft,
    EvidenceEvent,
    HostedRequest,
    LedgerEvents,
    RequestEvent,
    SessionEvent,
    TurnEvent,
)
from kestrel.service.host.port import ReplyPort
from kestrel.agents.recorded import turn_text
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, Answered, CallOutcome, LateReply
from kestrel.session.capture import CapturedTurn
from kestrel.session.loop import Evidence
from kestrel.session.protocol import Agent, AgentReply, AgentTurn, AuthorRequest, StandDownTurn
from kestrel.session.runner import DayResult, SessionResult, capture_header, engine_config
from kestrel.session.spec import ResolvedRun, budget_left

Emit = Callable[[SessionEvent], Awaitable[None]]
Slot = tuple[str, str]


class ExternalAgent:
    """The identity of an agent whose replies arrive as messages (never called directly)."""

    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = False

    def __init__(self, agent_id: str, model: str = "") -> None:
        self._agent_id = agent_id
        self._model = model

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def model(self) -> str:
        return self._model

    def author(self, request: AuthorRequest) -> AgentReply:
        raise RuntimeError("an external agent answers through its ReplyPort, not by a call")


class Outlet:
    """The session's ordered event output. Evidence records wait (`sink`) until the turn of
    their loop is emitted, so they come out just before it."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self._evidence: list[Evidence] = []

    def sink(self, record: Evidence) -> None:
        self._evidence.append(record)

    def take_evidence(self) -> list[Evidence]:
        taken, self._evidence = self._evidence, []
        return taken


class Flush(msgspec.Struct, frozen=True, tag="tap_flush"):
    """Answered once the tap has emitted everything it received before."""


class TapActor(Actor[CapturedTurn | LedgerBatch | Flush]):
    def __init__(self, outlet: Outlet, committed: Mapping[Slot, AgentTurn]) -> None:
        self._outlet = outlet
        self._committed = committed
        self._date = ""
        self._index = 0

    async def receive(self, message: CapturedTurn | LedgerBatch | Flush) -> object:
        out = self._outlet
        if isinstance(message, CapturedTurn):
            for record in out.take_evidence():
                await out.emit(EvidenceEvent(record))
            if message.date != self._date:
                self._date, self._index = message.date, 0
            replayed = (message.date, message.ordinal) in self._committed
            await out.emit(TurnEvent(message, replayed=replayed))
        elif isinstance(message, LedgerBatch):
            await out.emit(LedgerEvents(self._date, self._index, message.events))
            self._index += len(message.events)
        return None


def hosted_request(request: AuthorRequest, date: str) -> HostedRequest:
    left = budget_left(request.briefing)
    return HostedRequest(
        date=date,
        ordinal=request.ordinal,
        iteration=request.iteration,
        briefing=request.briefing,
        repair_error=request.repair_error,
        view_name=request.view_name,
        budget_left=None if left is None else BudgetLeft(*left),
        effort=request.effort,
    )


class HostedAgentActor(Actor[AgentMessage]):
    """Answers the driver's `AskAgent` calls: from the committed prefix, else from the agent.
    An in-process agent is called exactly as `AgentActor` calls it (its handler, reused: the
    same isolated calls, timeouts and late replies); an external agent's reply is awaited on
    its `ReplyPort`, and an ended port answers with a fail-closed STANDDOWN naming why
    (abandoned, closed). With `shown` (a blind run's `BlindRequests`) every agent, in process
    or external, is asked the mapped request, and the `RequestEvent` carries it."""

    def __init__(
        self,
        source: Agent | ReplyPort,
        outlet: Outlet,
        tap: ActorRef[Any],
        committed: Mapping[Slot, AgentTurn],
        shown: BlindRequests | None = None,
    ) -> None:
        self._source = source
        self._shown = shown
        self._inner = AgentActor(source) if not isinstance(source, ReplyPort) else None
        self._outlet = outlet
        self._tap = tap
        self._committed = committed

    async def receive(self, message: AgentMessage) -> CallOutcome | list[LateReply | Abandoned]:
        if isinstance(message, TakeLate):
            return [] if self._inner is None else await self._inner.receive(message)
        request, date = message.request, message.date or ""
        turn = self._committed.get((date, request.ordinal))
        if turn is not None:
            return Answered(AgentReply(turn_text(turn)))
        source = self._source
        if isinstance(source, ReplyPort) and source.ended is not None:
            return self._ended(source.ended)
        await self._tap.ask(Flush(), timeout=None)  # the ledger so far goes out first
        if self._shown is not None:  # a blind run: every agent reads the one mapped request
            request, date = self._shown.read(request, date)
            message = msgspec.structs.replace(message, request=request)
        if isinstance(source, ReplyPort):
            source.expect(request)
        await self._outlet.emit(RequestEvent(hosted_request(request, date)))
        if self._inner is not None:
            return await self._inner.receive(message)
        assert isinstance(source, ReplyPort)
        reply = await source.wait()
        return self._ended(source.ended or "no reply") if reply is None else Answered(reply)

    @staticmethod
    def _ended(why: str) -> Answered:
        return Answered(AgentReply(turn_text(StandDownTurn(f"{why} (fail-closed stand-down)"))))


def committed_turns(turns: list[CapturedTurn]) -> dict[Slot, AgentTurn]:
    return {(t.date, t.ordinal): t.turn for t in turns}


async def run_hosted(
    run: ResolvedRun,
    source: Agent | ReplyPort,
    identity: Agent,
    emit: Emit,
    *,
    committed: list[CapturedTurn] | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S,
    batch: int = DEFAULT_BATCH_TICKS,
    pace: Pace | None = None,
    shown: BlindRequests | None = None,
) -> SessionResult:
    """Run the session `run` on its own actor system (see the module docstring); `pace`
    has the feed release ticks by the wall clock (`kestrel.service.actors.feed`; same ledger);
    `shown`, a blind run's `BlindRequests`: the agent is asked the mapped requests."""
    options, plan, data = run.options, run.schedule, run.data
    prefix = committed_turns(committed or [])
    outlet = Outlet(emit)
    config = engine_config(options, data)  # the instrument's multiplier, as `simulate` runs it
    async with ActorSystem() as system:
        engine = system.spawn(
            lambda: EngineActor(config, data.symbol, data.tick_size, options.engine_path),
            name="engine",
        )
        tap = system.spawn(lambda: TapActor(outlet, prefix), name="tap")
        system.bus.subscribe(TURNS_TOPIC, engine)
        system.bus.subscribe(TURNS_TOPIC, tap)
        system.bus.subscribe(LEDGER_TOPIC, tap)
        feed = system.spawn(lambda: FeedActor(plan, engine, batch, pace), name="feed")
        agent = system.spawn(lambda: HostedAgentActor(source, outlet, tap, prefix, shown), name="agent")
        driver = system.spawn(
            lambda: DriverActor(
                plan,
                agent=agent,
                identity=identity,
                engine=engine,
                feed=feed,
                options=options,
                sink=outlet.sink,
                progress=None,
                agent_timeout=agent_timeout,
            ),
            name="driver",
        )
        results: list[DayResult] = await driver.ask(RunSession(), timeout=None)
        await tap.ask(Flush(), timeout=None)
    return SessionResult(capture_header(data, plan, identity.agent_id, options), results, options.engine_path)


__all__ = [
    "ExternalAgent",
    "Flush",
    "HostedAgentActor",
    "Outlet",
    "TapActor",
    "committed_turns",
    "hosted_request",
    "run_hosted",
]

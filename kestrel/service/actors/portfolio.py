"""A universe session on actors: the portfolio engine actor, the agent actor and the portfolio
driver actor, over the sans-IO `kestrel.session.portfolio.PortfolioDayDriver`.

The driver runs the same day driver as the in-process `kestrel.session.portfolio.drive`, and
only moves messages: `RunTo` is a barrier the engine actor answers once the merged ticks up to
it have run, `ReadState` an account query (the ledger's entries since the last read),
`RunAuthoring` the bounded authoring loop against the agent actor (each call an `AskAgent`,
timed out and isolated there), `Apply` the terminal turn published on the bus (topic
`portfolio-turns`: the engine actor applies it) and then a `Sync` whose answer says what the
engine did, `Close` the rest of the session. Late replies of abandoned calls are collected
after each authoring and settled once at the end of the run, as `drive` does.

Each step waits for its answer before the next is asked for, so nothing depends on the
scheduling of the tasks: the ledger and the capture are byte for byte those of `run_portfolio`,
on asyncio and on trio. The engine actor owns its `PortfolioEngine` while the system runs; the
result hands it back once the system has stopped.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, assert_never

import anyio
import msgspec

from kestrel_actors.actor import Actor
from kestrel_actors.ref import ActorRef
from kestrel_actors.system import ActorSystem
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import EnginePath
from kestrel.engine.portfolio import PortfolioEngine
from kestrel.engine.portfolio.ledger import PortfolioEvent
from kestrel.market.account import Notice
from kestrel.market.portfolio import PortfolioBounds, PortfolioState
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe
from kestrel.service.actors.agent import AgentActor, author_through, take_late
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, LateReply
from kestrel.session.loop import AuthoringLoop, Done, Evidence
from kestrel.session.options import EvidenceSink, SessionOptions
from kestrel.session.portfolio import (
    Apply,
    Briefing,
    CapturedPortfolioTurn,
    Close,
    PortfolioDayDriver,
    PortfolioResult,
    ReadState,
    RunAuthoring,
    RunTo,
    apply_portfolio_turn,
    capture_of,
    late_evidence,
    pick_universe_sessions,
    settle_turns,
    universe_configs,
)
from kestrel.session.portfolio_day import run_blind
from kestrel.frame.blind import Blind
from kestrel.session.protocol import Agent, PortfolioTurn

PORTFOLIO_TURNS_TOPIC = "portfolio-turns"
BACKENDS = ("asyncio", "trio")


# ------------------------------------------------------------------------------------------
# the engine actor's messages


class OpenSession(msgspec.Struct, frozen=True, tag="open_session"):
    session: SessionSpec


class RunUntil(msgspec.Struct, frozen=True, tag="run_until"):
    """Run the merged ticks with ts <= `until_ns` (None: to the close); answered once run."""

    until_ns: int | None


class StateQuery(msgspec.Struct, frozen=True, tag="state"):
    """The account, and the ledger's entries from index `since` on (answered `StateView`)."""

    since: int = 0


class StateView(msgspec.Struct, frozen=True):
    """The account and the ledger's entries not read yet; `read` the ledger's length now."""

    state: PortfolioState
    entries: list[tuple[str | None, PortfolioEvent]]
    read: int


class ApplyTurn(msgspec.Struct, frozen=True, tag="apply_turn"):
    """A terminal turn of the universe, taking effect at `at_ns` (carried on the bus)."""

    turn: PortfolioTurn
    at_ns: int


class Sync(msgspec.Struct, frozen=True, tag="sync"):
    """Answered `Applied` once everything sent to the engine before it is handled."""


class Applied(msgspec.Struct, frozen=True):
    """What the last turn did (`apply_portfolio_turn`'s text)."""

    what: str


class CloseSession(msgspec.Struct, frozen=True, tag="close_session"):
    pass


class LedgerQuery(msgspec.Struct, frozen=True, tag="ledger_lines"):
    """The ledger's lines from byte `offset` on (answered `LedgerLines`)."""

    offset: int = 0


class LedgerLines(msgspec.Struct, frozen=True):
    """Ledger lines (JSON lines, exactly as the ledger file holds them) and how many lines
    and bytes the ledger holds in all."""

    jsonl: bytes
    lines: int
    end: int


PortfolioEngineMessage = OpenSession | RunUntil | StateQuery | ApplyTurn | Sync | CloseSession | LedgerQuery


class PortfolioEngineActor(Actor[PortfolioEngineMessage]):
    """The universe's one account and its books (`PortfolioEngine`), one session at a time."""

    def __init__(self, engine: PortfolioEngine, path: EnginePath = "auto") -> None:
        self.engine = engine
        self.path = path
        self.applied = "passed"

    async def receive(self, message: PortfolioEngineMessage) -> object:
        engine = self.engine
        if isinstance(message, RunUntil):
            engine.run(message.until_ns, self.path)
            return None
        if isinstance(message, StateQuery):
            ledger = engine.ledger
            return StateView(engine.state(), ledger.entries_since(message.since), len(ledger))
        if isinstance(message, ApplyTurn):
            self.applied = apply_portfolio_turn(engine, message.turn, message.at_ns)
            return None
        if isinstance(message, Sync):
            return Applied(self.applied)
        if isinstance(message, OpenSession):
            engine.open_session(message.session)
            return None
        if isinstance(message, CloseSession):
            engine.close_session(self.path)
            return None
        if isinstance(message, LedgerQuery):
            ledger = engine.ledger
            return LedgerLines(ledger.bytes_from(message.offset), len(ledger), ledger.nbytes)
        assert_never(message)


# ------------------------------------------------------------------------------------------
# the driver


class RunUniverse(msgspec.Struct, frozen=True, tag="run_universe"):
    pass


DayTurns = Callable[[tuple[CapturedPortfolioTurn, ...], LedgerLines, int], Awaitable[None]]
"""Awaited with each session's turns once it is over, the ledger lines it added and the
run-wide number of the first of them (a host emits them)."""


class PortfolioDriverActor(Actor[RunUniverse]):
    """Runs the sessions' `PortfolioDayDriver`s (shared with `drive`) through messages;
    `on_day`, when given, is awaited with each session's turns as it ends. `blind` is the run's
    one blind mapping (the agent actor's agent then reads through `blind_agent`); at the CLOSE
    cadence each session's decided turn is the next session's carried one (`settle_turns`)."""

    def __init__(self, sessions: Sequence[SessionSpec], universe: Universe, *, agent: ActorRef[Any],
                 identity: Agent, engine: ActorRef[Any], options: SessionOptions,
                 bounds: PortfolioBounds | None, configs: Mapping[str, EngineConfig] | None,
                 briefing: Briefing | None, sink: EvidenceSink | None, agent_timeout: float | None,
                 on_day: DayTurns | None = None, blind: Blind | None = None) -> None:
        self.sessions = list(sessions)
        self.universe = universe
        self.agent = agent
        self.identity = identity
        self.engine = engine
        self.options = options
        self.bounds = bounds
        self.configs = configs
        self.briefing = briefing
        self.sink = sink
        self.timeout = agent_timeout
        self.on_day = on_day
        self.blind = blind

    async def receive(self, message: RunUniverse) -> list[CapturedPortfolioTurn]:
        turns: list[CapturedPortfolioTurn] = []
        untold: tuple[Notice, ...] = ()
        read = 0
        offset = lines = 0
        a = self.identity
        carried: PortfolioTurn | None = None
        for k, session in enumerate(self.sessions):
            await self.engine.ask(OpenSession(session), timeout=None)
            driver = PortfolioDayDriver(self.universe, session, self.options, configs=self.configs,
                                        bounds=self.bounds, agent_id=a.agent_id, model=a.model,
                                        iterative=a.iterative, sink=self.sink, briefing=self.briefing,
                                        notices=untold, blind=self.blind, carried=carried)
            while True:
                step = driver.next_step()
                if isinstance(step, RunTo):
                    await self.engine.ask(RunUntil(step.until_ns), timeout=None)
                    driver.ran()
                elif isinstance(step, ReadState):
                    view = await self.engine.ask(StateQuery(read), expect=StateView, timeout=None)
                    driver.state(view.state, view.entries)
                    read = view.read
                elif isinstance(step, RunAuthoring):
                    driver.authored(await self._author(step.loop))
                    for record in await self._late(final=False):
                        driver.record(late_evidence(record, a.model, self.options.profile))
                elif isinstance(step, Apply):
                    await self.ctx.system.bus.publish(PORTFOLIO_TURNS_TOPIC, ApplyTurn(step.turn, step.at_ns))
                    report = await self.engine.ask(Sync(), expect=Applied, timeout=None)
                    driver.applied(report.what)
                elif isinstance(step, Close):
                    await self.engine.ask(CloseSession(), timeout=None)
                    driver.closed()
                else:
                    settle_turns(turns, driver, step)
                    if self.on_day is not None:
                        added = await self.engine.ask(LedgerQuery(offset), expect=LedgerLines, timeout=None)
                        await self.on_day(step.turns, added, lines)
                        offset, lines = added.end, added.lines
                    break
            carried = driver.decided
            view = await self.engine.ask(StateQuery(read), expect=StateView, timeout=None)
            driver.heard(view.entries)  # after the last ordinal: told the next session
            read = view.read
            untold = driver.untold
            if k == len(self.sessions) - 1:
                for record in await self._late(final=True):
                    driver.record(late_evidence(record, a.model, self.options.profile))
        return turns

    async def _author(self, loop: AuthoringLoop) -> Done:
        return await author_through(self.agent, loop, self.timeout)

    async def _late(self, final: bool) -> list[LateReply | Abandoned]:
        return await take_late(self.agent, final, self.timeout)


# ------------------------------------------------------------------------------------------
# the run


async def run_universe_sessions(system: ActorSystem, sessions: Sequence[SessionSpec], universe: Universe,
                                engine: PortfolioEngine, *, agent: ActorRef[Any], identity: Agent,
                                options: SessionOptions, bounds: PortfolioBounds, configs: Mapping[str, EngineConfig],
                                sink: EvidenceSink | None, agent_timeout: float | None,
                                briefing: Briefing | None = None, on_day: DayTurns | None = None,
                                blind: Blind | None = None) -> list[CapturedPortfolioTurn]:
    """Every session of a universe run on `system`, whose agent actor `agent` is spawned: the
    engine actor owning `engine` (subscribed to `portfolio-turns`) and the driver (its
    arguments, `PortfolioDriverActor`'s); the turns captured. What every actor shell of a
    universe run wires (`simulate_universe`, the host's `run_hosted_universe`)."""
    engine_ref = system.spawn(lambda: PortfolioEngineActor(engine, options.engine_path), name="portfolio-engine")
    system.bus.subscribe(PORTFOLIO_TURNS_TOPIC, engine_ref)
    driver = system.spawn(
        lambda: PortfolioDriverActor(sessions, universe, agent=agent, identity=identity, engine=engine_ref,
                                     options=options, bounds=bounds, configs=configs, briefing=briefing, sink=sink,
                                     agent_timeout=agent_timeout, on_day=on_day, blind=blind),
        name="portfolio-driver")
    captured: list[CapturedPortfolioTurn] = await driver.ask(RunUniverse(), timeout=None)
    return captured


async def simulate_universe(
    universe: Universe,
    agent: Agent,
    bounds: PortfolioBounds,
    options: SessionOptions = SessionOptions(),
    *,
    date: dt.date | None = None,
    days: int = 1,
    briefing: Briefing | None = None,
    configs: dict[str, EngineConfig] | None = None,
    sink: EvidenceSink | None = None,
    agent_timeout: float | None = DEFAULT_AGENT_TIMEOUT_S,
    turns: list[ApplyTurn] | None = None,
    news_sha256: str | None = None,
) -> PortfolioResult:
    """`run_portfolio` on an actor system (the agent, the driver, the portfolio engine and the
    bus): the same sessions, turns, ledger and capture. `turns`, when given, receives every
    message the bus carried on `portfolio-turns`, for inspection."""
    sessions = pick_universe_sessions(universe, date, days)
    cfgs = universe_configs(universe, options) if configs is None else configs
    engine = PortfolioEngine(universe, cfgs, bounds)
    evidence: list[Evidence] = []

    def record(e: Evidence) -> None:
        evidence.append(e)
        if sink is not None:
            sink(e)

    async with ActorSystem() as system:
        room = max(1, len(sessions) * (1 + len(options.checkpoints)))
        tap = system.bus.subscribe_stream(PORTFOLIO_TURNS_TOPIC, capacity=room) if turns is not None else None
        blind, asked = run_blind(universe, options, agent)
        agent_ref = system.spawn(lambda: AgentActor(asked), name="agent")
        captured = await run_universe_sessions(system, sessions, universe, engine, agent=agent_ref, identity=agent,
                                               options=options, bounds=bounds, configs=cfgs, briefing=briefing,
                                               sink=record, agent_timeout=agent_timeout, blind=blind)
        if tap is not None and turns is not None:
            system.bus.unsubscribe(tap)
            async for message in tap:
                turns.append(message)
    capture = capture_of(universe, sessions, bounds, cfgs, options, agent.agent_id, captured, news_sha256)
    return PortfolioResult(engine, capture, captured, evidence)


def run_universe_simulation(
    universe: Universe,
    agent: Agent,
    bounds: PortfolioBounds,
    options: SessionOptions = SessionOptions(),
    *,
    backend: str = "asyncio",
    date: dt.date | None = None,
    days: int = 1,
    briefing: Briefing | None = None,
    configs: dict[str, EngineConfig] | None = None,
    sink: EvidenceSink | None = None,
    agent_timeout: float | None = DEFAULT_AGENT_TIMEOUT_S,
    news_sha256: str | None = None,
) -> PortfolioResult:
    """`simulate_universe` from synchronous code, on the `asyncio` or `trio` backend (the
    signature of `run_portfolio` with the backend)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use asyncio or trio")

    async def main() -> PortfolioResult:
        return await simulate_universe(universe, agent, bounds, options, date=date, days=days, briefing=briefing,
                                       configs=configs, sink=sink, agent_timeout=agent_timeout,
                                       news_sha256=news_sha256)

    result: PortfolioResult = anyio.run(main, backend=backend)
    return result


def universe_runner(backend: str) -> Callable[..., PortfolioResult]:
    """`run_portfolio`'s drop-in on the actor backend `backend` (asyncio or trio)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use asyncio or trio")
    return functools.partial(run_universe_simulation, backend=backend)


__all__ = [
    "PORTFOLIO_TURNS_TOPIC",
    "Applied",
    "DayTurns",
    "LedgerLines",
    "LedgerQuery",
    "ApplyTurn",
    "CloseSession",
    "OpenSession",
    "PortfolioDriverActor",
    "PortfolioEngineActor",
    "RunUniverse",
    "RunUntil",
    "StateQuery",
    "StateView",
    "Sync",
    "run_universe_sessions",
    "run_universe_simulation",
    "simulate_universe",
    "universe_runner",
]

"""`DriverActor` and `simulate`: a session on actors.

The driver owns the frozen snapshots and the pane catalog (through `kestrel.session.runner`'s
helpers), runs the ordinal schedule and the bounded authoring loop against the agent actor,
publishes ONLY the terminal turn on the bus (topic `turns`: the engine arms it, the capture
records it), and writes the iteration evidence to the evidence sink, never to the bus.

Per ordinal: release the feed up to the cutoff → read the account → author → release the
authoring window (cutoff to the ordinal's time, run by the incumbent) → publish the turn →
`Sync` with the engine (the turn is armed) → only then release the next ticks. The
same steps as `run_session`, so both give byte-identical ledgers and captures, on asyncio and
on trio.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

from kestrel_actors.actor import Actor
from kestrel.service.actors.agent import AgentActor, author_through, take_late
from kestrel.service.actors.engine import (
    TURNS_TOPIC,
    AccountQuery,
    AccountView,
    ArmAt,
    ArmReport,
    DayLedger,
    EngineActor,
    CloseDay,
    StartDay,
    Sync,
)
from kestrel.service.actors.feed import DEFAULT_BATCH_TICKS, AdvanceTo, FeedActor, LoadDay, Pace
from kestrel_actors.ref import ActorRef
from kestrel_actors.system import ActorSystem
from kestrel.engine.ledger import Ledger
from kestrel.market import MarketData
from kestrel.market.account import Notice
from kestrel.session import day as steps
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, LateReply
from kestrel.session.capture import CapturedTurn
from kestrel.session.day import DayDriver
from kestrel.session.loop import AuthoringLoop, Done
from kestrel.session.protocol import Agent
from kestrel.session.runner import (
    DayResult,
    EvidenceSink,
    SessionDay,
    SessionOptions,
    SessionResult,
    capture_header,
    engine_config,
    session_days,
)

class RunSession(msgspec.Struct, frozen=True, tag="run_session"):
    pass


class DriverActor(Actor[RunSession]):
    """Runs the days' schedules: the sans-IO `DayDriver` (shared with `run_day`) says what comes
    next, this actor only moves messages (feed barrier, account, agent asks, bus, engine sync)."""

    def __init__(
        self,
        days: list[SessionDay],
        *,
        agent: ActorRef[Any],
        identity: Agent,
        engine: ActorRef[Any],
        feed: ActorRef[Any],
        options: SessionOptions,
        sink: EvidenceSink | None,
        progress: Callable[[int, int], None] | None,
        agent_timeout: float,
    ) -> None:
        self._days = days
        self._agent = agent
        self._identity = identity
        self._engine = engine
        self._feed = feed
        self._options = options
        self._sink = sink
        self._progress = progress
        self._timeout = agent_timeout

    async def receive(self, message: RunSession) -> list[DayResult]:
        results: list[DayResult] = []
        for k, day in enumerate(self._days):
            untold = results[-1].untold if results else ()
            results.append(await self._run_day(k, day, last=k == len(self._days) - 1, notices=untold))
            if self._progress is not None:
                self._progress(k + 1, len(self._days))
        return results

    async def _author(self, loop: AuthoringLoop) -> Done:
        return await author_through(self._agent, loop, self._timeout)

    async def _late(self, final: bool) -> list[LateReply | Abandoned]:
        return await take_late(self._agent, final, self._timeout)

    async def _run_day(self, k: int, day: SessionDay, *, last: bool,
                       notices: tuple[Notice, ...] = ()) -> DayResult:
        """Drive the day's `DayDriver` (the same state machine as `run_day`) through messages;
        `notices` are the previous day's untold ones."""
        a = self._identity
        driver = DayDriver(day, self._options, agent_id=a.agent_id, model=a.model,
                           iterative=a.iterative, sink=self._sink, notices=notices)
        await self._engine.ask(StartDay(day.session), timeout=None)
        await self._feed.ask(LoadDay(k), timeout=None)
        while True:
            step = driver.next_step()
            if isinstance(step, steps.RunTicks):  # the feed is the barrier
                await self._feed.ask(AdvanceTo(step.stretch), timeout=None)
                driver.ran()
            elif isinstance(step, steps.ReadAccount):
                view = await self._engine.ask(AccountQuery(step.since), expect=AccountView, timeout=None)
                driver.account(view.state, view.events)
            elif isinstance(step, steps.RunAuthoring):
                driver.authored(await self._author(step.loop))
            elif isinstance(step, steps.Arm):  # the engine arms what the bus carries
                if step.delayed:  # an arm latency: the engine arms at that instant, not the ordinal's
                    await self._engine.ask(ArmAt(step.at_ns), timeout=None)
                await self.ctx.system.bus.publish(TURNS_TOPIC, step.turn)
                report = await self._engine.ask(Sync(), expect=ArmReport, timeout=None)
                driver.armed(report.armed, report.incumbent)
            elif isinstance(step, steps.CollectLate):
                driver.late(await self._late(step.end and last))
            elif isinstance(step, steps.FinishDay):
                ledger = await self._engine.ask(CloseDay(), expect=DayLedger, timeout=None)
                driver.finished(Ledger.from_jsonl(ledger.jsonl), ledger.engine_ticks, ledger.carry)
            else:
                return step.result


async def simulate(
    data: MarketData,
    agent: Agent,
    options: SessionOptions = SessionOptions(),
    *,
    date: dt.date | None = None,
    days: int = 1,
    sink: EvidenceSink | None = None,
    progress: Callable[[int, int], None] | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S,
    batch: int = DEFAULT_BATCH_TICKS,
    turns: list[CapturedTurn] | None = None,
    pace: Pace | None = None,
) -> SessionResult:
    """Run the session on an actor system (agent, driver, engine, feed and the bus).
    `pace`, when given, has the feed release ticks by the wall clock (same ledger).

    `turns`, when given, receives every message published on the `turns` topic (what the bus
    carried), for inspection."""
    plan = session_days(data, options, date, days)
    config = engine_config(options, data)
    async with ActorSystem() as system:
        engine = system.spawn(
            lambda: EngineActor(config, data.symbol, data.tick_size, options.engine_path),
            name="engine",
        )
        system.bus.subscribe(TURNS_TOPIC, engine)
        # the tap is read after the run: room for every turn, so publishing never blocks on it
        room = max(1, sum(len(d.ordinals) for d in plan))
        tap = system.bus.subscribe_stream(TURNS_TOPIC, capacity=room) if turns is not None else None
        feed = system.spawn(lambda: FeedActor(plan, engine, batch, pace), name="feed")
        agent_ref = system.spawn(lambda: AgentActor(agent), name="agent")
        driver = system.spawn(
            lambda: DriverActor(
                plan,
                agent=agent_ref,
                identity=agent,
                engine=engine,
                feed=feed,
                options=options,
                sink=sink,
                progress=progress,
                agent_timeout=agent_timeout,
            ),
            name="driver",
        )
        results: list[DayResult] = await driver.ask(RunSession(), timeout=None)
        if tap is not None and turns is not None:
            system.bus.unsubscribe(tap)
            async for message in tap:
                turns.append(message)
    return SessionResult(capture_header(data, plan, agent.agent_id, options), results, options.engine_path)


def run_simulation(
    data: MarketData,
    agent: Agent,
    options: SessionOptions = SessionOptions(),
    *,
    backend: str = "asyncio",
    date: dt.date | None = None,
    days: int = 1,
    sink: EvidenceSink | None = None,
    progress: Callable[[int, int], None] | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S,
    pace: Pace | None = None,
) -> SessionResult:
    """`simulate` from synchronous code, on the `asyncio` or `trio` backend."""
    if backend not in ("asyncio", "trio"):
        raise ValueError(f"unknown backend {backend!r}: use asyncio or trio")

    async def main() -> SessionResult:
        return await simulate(
            data, agent, options, date=date, days=days, sink=sink, progress=progress,
            agent_timeout=agent_timeout, pace=pace,
        )

    result: SessionResult = anyio.run(main, backend=backend)
    return result


__all__ = ["DEFAULT_AGENT_TIMEOUT_S", "DriverActor", "RunSession", "run_simulation", "simulate"]

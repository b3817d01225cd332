"""`run_session`: one simulated session, synchronously, for embedding in other drivers.

Per session (trading day) and per ordinal of its schedule, in order:
1. the engine takes every tick up to the ordinal's cutoff (`time - guard`), on its vectorized
   fast path where that applies (`engine_path="auto"`, the default) or always on the per-tick
   reference path (`engine_path="reference"`); both give the same ledger byte for byte;
2. the snapshot is frozen at the cutoff with the engine's account and the incumbent plan;
3. the bounded authoring loop runs against the agent (single-shot agents answer once);
4. the guard is the authoring window: the engine takes the ticks from the cutoff up to the
   ordinal's time under the incumbent plan, and only then is the terminal turn armed
   (supersede / stand down / pass), captured, and the evidence sent to the sink. The feed
   is a barrier, so no result depends on how long the agent really took;
then the engine runs the rest of the session and applies its end-of-day policy. Under
`end_of_day="carry"` the next session's engine opens with the position, its average price
and its protective orders (`Engine.carry_out`); entry rules never carry. The engine's money
uses the instrument's contract multiplier (`MarketData.instrument.multiplier`).

Both this module and the actor shell (`kestrel.service.actors.driver`) drive ONE day driver, the sans-IO
`DayDriver` (`kestrel.session.day`): it says which step comes next, each driver does it its
own way (here: the engine in process, the blocking agent called directly), so both give the
same ledger and capture. The pieces live in their own modules and are re-exported here:
`kestrel.session.options` (`SessionOptions`), `.days` (`SessionDay`, the schedule and tick
stretches), `.results` (`DayResult`, `SessionResult`), `.day` (`DayDriver`, `DayRun`,
`advance`, `apply_turn`).
Deterministic: nothing here reads the wall clock; the same inputs give byte-identical ledgers,
captures and evidence.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, overload

import msgspec

from kestrel.engine.book import Carry
from kestrel.market import MarketData
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.universe import Universe
from kestrel.market.account import Notice
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, LateReplies, LateReply, late_grace
from kestrel.session.day import (
    Arm,
    RunAuthoring,
    CollectLate,
    DayDriver,
    DayRun,
    FinishDay,
    Finished,
    ReadAccount,
    RunTicks,
    advance,
    apply_turn,
    new_engine,
)
from kestrel.session.days import SessionDay, pick_sessions, session_days
from kestrel.session.drive import author_turn
from kestrel.session.loop import Evidence
from kestrel.session.portfolio import DEFAULT_CAPITAL, PortfolioResult, run_portfolio
from kestrel.session.options import ENGINE_PATHS, EvidenceSink, SessionError, SessionOptions, engine_config
from kestrel.session.protocol import Agent
from kestrel.session.results import DayResult, OrdinalOutcome, SessionResult, capture_header, path_tally


def evidence_logger(log: Any, event: str = "authoring_iteration") -> EvidenceSink:
    """An evidence sink writing each record as one structlog event (e.g. to the JSON-lines
    logger of `kestrel.logs.open_json_sink`)."""

    def sink(record: Evidence) -> None:
        log.info(event, **msgspec.to_builtins(record))

    return sink


def run_day(
    day: SessionDay,
    agent: Agent,
    options: SessionOptions = SessionOptions(),
    sink: EvidenceSink | None = None,
    carry: Carry | None = None,
    *,
    agent_timeout: float | None = DEFAULT_AGENT_TIMEOUT_S,
    late: LateReplies | None = None,
    last: bool = True,
    notices: tuple[Notice, ...] = (),
) -> DayResult:
    """One session, synchronously (see the module docstring for the steps); `carry` is the
    previous session's carried position (`DayResult.carry`). A blocking agent's call past
    `agent_timeout` seconds is abandoned (the ordinal stands down) and its late reply, once
    it arrives (on this day or a later one of the run sharing the box `late`), is `late-reply`
    evidence; on the `last` day of the run abandoned calls are waited for (at most
    `late_grace`), then each one still running is `abandoned` (`LateReplies.close`).
    `notices` are the previous session's untold notices (`DayResult.untold`), for the first
    briefing of this one."""
    box = late if late is not None else LateReplies()
    engine = new_engine(day, engine_config(options, day.data), carry)
    driver = DayDriver(day, options, agent_id=agent.agent_id, model=agent.model,
                       iterative=agent.iterative, sink=sink, notices=notices)
    tally = path_tally()
    while True:
        step = driver.next_step()
        if isinstance(step, RunTicks):
            advance(engine, day.stretch(step.stretch), options.engine_path, tally)
            driver.ran()
        elif isinstance(step, ReadAccount):
            driver.account(engine.account(), engine.ledger.events[step.since:])
        elif isinstance(step, RunAuthoring):
            driver.authored(author_turn(step.loop, agent, timeout=agent_timeout, late=box))
        elif isinstance(step, Arm):
            incumbent, armed = apply_turn(engine, step.turn.turn, step.incumbent, step.at_ns)
            driver.armed(armed, incumbent)
        elif isinstance(step, CollectLate):
            if step.end and last:  # the end of the run: a late reply just after it is still recorded
                box.settle(late_grace(agent_timeout))
                driver.late(box.close())
            else:
                driver.late(box.take())
        elif isinstance(step, FinishDay):
            engine.finish()
            driver.finished(engine.ledger, tally, engine.carry_out())
        else:
            return step.result


def session_date(date: object) -> dt.date | None:
    """`date` as a calendar date: a `datetime.date` (a `datetime` gives its date), an ISO
    `YYYY-MM-DD` string, or None; anything else is a `SessionError` saying what to pass."""
    if date is None:
        return None
    if isinstance(date, dt.datetime):
        return date.date()
    if isinstance(date, dt.date):
        return date
    if isinstance(date, str):
        try:
            return dt.date.fromisoformat(date.strip())
        except ValueError:
            raise SessionError(f"date {date!r} is not an ISO date: write it like 2025-03-14") from None
    raise SessionError(f"date must be a datetime.date or an ISO string like 2025-03-14, got {type(date).__name__}")


@overload
def run_session(data: MarketData, agent: Agent, options: SessionOptions = ..., *, date: dt.date | str | None = ...,
                days: int = ..., sink: EvidenceSink | None = ..., progress: Callable[[int, int], None] | None = ...,
                agent_timeout: float | None = ..., bounds: PortfolioBounds | None = ...) -> SessionResult: ...


@overload
def run_session(data: Universe, agent: Agent, options: SessionOptions = ..., *, date: dt.date | str | None = ...,
                days: int = ..., sink: EvidenceSink | None = ..., progress: Callable[[int, int], None] | None = ...,
                agent_timeout: float | None = ..., bounds: PortfolioBounds | None = ...) -> PortfolioResult: ...


def run_session(
    data: MarketData | Universe,
    agent: Agent,
    options: SessionOptions = SessionOptions(),
    *,
    date: dt.date | str | None = None,
    days: int = 1,
    sink: EvidenceSink | None = None,
    progress: Callable[[int, int], None] | None = None,
    agent_timeout: float | None = DEFAULT_AGENT_TIMEOUT_S,
    bounds: PortfolioBounds | None = None,
) -> SessionResult | PortfolioResult:
    """Run `days` sessions ending at `date` (default: the data's last complete session, else
    its most covered one: `kestrel.session.coverage.default_session_index`), one engine per day.
    `agent_timeout` bounds each call of a blocking agent, as on actors (`kestrel.session.calls`).
    On a `Universe`, a portfolio session (`kestrel.session.portfolio.run_portfolio`) on one
    account of `bounds` (default: `PortfolioBounds(capital=DEFAULT_CAPITAL)`), its last session
    by default."""
    date = session_date(date)
    if isinstance(data, Universe):
        return run_portfolio(data, agent, bounds or PortfolioBounds(capital=DEFAULT_CAPITAL), options,
                             date=date, days=days, sink=sink, agent_timeout=agent_timeout)
    plan = session_days(data, options, date, days)
    late = LateReplies()
    engine_config(options, data)  # a multiplier conflict fails before anything runs
    results: list[DayResult] = []
    carry: Carry | None = None
    for k, day in enumerate(plan):
        results.append(run_day(day, agent, options, sink, carry, agent_timeout=agent_timeout, late=late,
                               last=k == len(plan) - 1, notices=results[-1].untold if results else ()))
        carry = results[-1].carry
        if progress is not None:
            progress(k + 1, len(plan))
    return SessionResult(capture_header(data, plan, agent.agent_id, options), results, options.engine_path)


__all__ = [
    "ENGINE_PATHS",
    "DayDriver",
    "DayResult",
    "DayRun",
    "EvidenceSink",
    "OrdinalOutcome",
    "SessionDay",
    "SessionError",
    "SessionOptions",
    "SessionResult",
    "apply_turn",
    "evidence_logger",
    "capture_header",
    "advance",
    "engine_config",
    "new_engine",
    "path_tally",
    "pick_sessions",
    "run_day",
    "run_session",
    "session_days",
]

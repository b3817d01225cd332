"""A hosted universe session: one agent trading a universe on one account, behind the host.

`UniverseSpec` is what a client asks for (the flags of `kestrel simulate --data UNIVERSE`:
the universe's path, `symbols`, `capital`, the portfolio bounds, the schedule, the loop's
posture, `blind` and `news`); `resolve_universe` checks it and loads the universe and its news
(`UniverseRun`), raising `SpecError` with one line naming the fix. `run_hosted_universe` runs
it on the session's own actor system: the portfolio driver and engine actors of
`kestrel.service.actors.portfolio` (`run_universe_sessions`)
(the ledger and capture of `run_portfolio`, byte for byte) with the host's agent actor
(`HostedAgentActor`: a `RequestEvent` for every ask, answered by an in-process agent or by an
external one through its `ReplyPort`); each session's turns are emitted as
`PortfolioTurnEvent`s when the session closes, the evidence of its authoring loops first.

In blind mode the run has one `Blind` (`UniverseRun.blind`): the driver freezes every briefing
and view with it and reads every reply over its aliases, mapping it back before it is checked or
armed, whoever the agent is; what the agent is asked (`RequestEvent`, and an in-process agent's
own request) is the one request mapped by the agent actor (`kestrel.service.host.blind_requests`).

`universe_summary` is a universe run's machine-readable summary: the portfolio report's
JSON (`kestrel.report.portfolio.to_json`) and the run's dates, end holdings and turns, the
document `kestrel simulate --data UNIVERSE --json` prints. `universe_capture` is the run's
capture file (replays with `kestrel replay`).
"""

from __future__ import annotations

import datetime as dt
import glob as globs
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from kestrel_actors import Actor, ActorSystem
from kestrel.data.news import NewsSource
from kestrel.frame.blind import Blind
from kestrel.engine.portfolio import PortfolioEngine
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe
from kestrel.service.actors.agent import AgentMessage, AskAgent
from kestrel.service.actors.portfolio import LedgerLines, run_universe_sessions
from kestrel.service.host.blind_requests import BlindRequests
from kestrel.service.host.events import EvidenceEvent, PortfolioLedgerLines, PortfolioTurnEvent
from kestrel.service.host.port import ReplyPort
from kestrel.service.host.run import Emit, HostedAgentActor, Outlet, TapActor
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, Answered, CallOutcome, LateReply
from kestrel.session.loop import LoopSettings
from kestrel.market.news import NO_NEWS, NewsFeed
from kestrel.session.options import SessionError, SessionOptions
from kestrel.session.portfolio import (
    DEFAULT_CAPITAL,
    CapturedPortfolioTurn,
    PortfolioResult,
    capture_of,
    pick_universe_sessions,
    run_summary,
    universe_configs,
)
from kestrel.session.portfolio_capture import CaptureHead, UniverseSource, capture_bytes
from kestrel.session.protocol import Agent, AgentReply
from kestrel.session.schedule import DEFAULT_GUARD_S
from kestrel.session.spec import EFFORTS, SpecError

MAX_SYMBOLS = 500  # the most symbols one hosted universe run trades


class UniverseSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A universe run a client asks for: `data` a long-format file (a `symbol` column), a folder
    or a glob of per-symbol files; `symbols` those to trade (default: every one); the account
    (`capital`, `max_gross` times equity, `max_open` positions, `portfolio_maxloss`,
    `no_short`); `maxpos` each symbol's position bound (default: scaled to the instrument);
    `blind` blind mode; `news` a news file (a path the caller has confined to its roots)."""

    data: str
    symbols: tuple[str, ...] | None = None
    capital: float = DEFAULT_CAPITAL
    max_gross: float = 1.0
    max_open: int | None = None
    portfolio_maxloss: float | None = None
    no_short: bool = False
    maxpos: float | None = None
    date: str | None = None
    days: int = 1
    checkpoints: tuple[str, ...] = ()
    guard_s: int = DEFAULT_GUARD_S
    profile: str | None = None
    max_iterations: int | None = None
    token_budget: int | None = None
    effort: str | None = None
    engine_path: str = "auto"
    blind: bool = False
    news: str | None = None


@dataclass(frozen=True)
class UniverseRun:
    """A universe spec made runnable: the universe (narrowed to its symbols), how it was loaded,
    the account's bounds, the options and the sessions it runs; `news` the news file read
    (recorded in its captures)."""

    spec: UniverseSpec
    universe: Universe
    source: UniverseSource
    bounds: PortfolioBounds
    options: SessionOptions
    sessions: list[SessionSpec]
    news: NewsSource | None = None

    @cached_property
    def blind(self) -> Blind | None:
        """The run's one blind mapping (None unless the options ask for blind mode)."""
        from kestrel.session.blind import blind_of

        return blind_of(self.universe) if self.options.blind else None

    @property
    def news_sha256(self) -> str | None:
        return None if self.news is None else self.news.sha256

    @property
    def date(self) -> dt.date:
        return self.sessions[-1].date

    @property
    def schedule(self) -> list[str]:
        return ["OPEN", *self.options.checkpoints]


def is_universe_name(path: str, name: str) -> bool:
    """Whether a data path names a universe: a folder, a glob, or a file with a `symbol` column
    and no `symbol=` option choosing one member (`name` the data name with its options)."""
    if path == "sample":
        return False
    if Path(path).is_dir() or globs.has_magic(path):
        return True
    if "|symbol=" in name:
        return False
    from kestrel.data import DataError
    from kestrel.data.readers import file_header

    try:
        header = file_header(path, ",")
    except (DataError, OSError):
        return False
    return header is not None and any(h.strip().lower() == "symbol" for h in header)


def _options(spec: UniverseSpec, news: NewsFeed = NO_NEWS) -> SessionOptions:
    from kestrel.engine import EngineConfig
    from kestrel.session import profiles
    from kestrel.session.options import engine_path_of

    if spec.effort is not None and spec.effort not in EFFORTS:
        raise SpecError(f"effort must be one of {', '.join(EFFORTS)}, got {spec.effort!r}")
    for field, value in (("max_iterations", spec.max_iterations), ("token_budget", spec.token_budget)):
        if value is not None and value < 1:
            raise SpecError(f"{field} must be >= 1, got {value}")
    try:
        profile = profiles.lookup(spec.profile) if spec.profile is not None else None
    except profiles.ProfileError as exc:
        raise SpecError(str(exc)) from None
    flags = profiles.Flags(view_request_cap=spec.max_iterations, authoring_token_budget=spec.token_budget,
                           effort=spec.effort)
    resolved = profiles.resolve(flags, None, profile)
    if spec.maxpos is not None and not spec.maxpos > 0:
        raise SpecError(f"maxpos must be > 0, got {spec.maxpos}")
    try:
        engine = EngineConfig() if spec.maxpos is None else EngineConfig(maxpos=spec.maxpos)
        return SessionOptions(checkpoints=tuple(c.strip() for c in spec.checkpoints if c.strip()),
                              guard_s=spec.guard_s, settings=LoopSettings.of(resolved.settings),
                              policy=resolved.policy, profile=resolved.profile, data_name=spec.data,
                              engine_path=engine_path_of(spec.engine_path), engine=engine, blind=spec.blind,
                              news=news)
    except (SessionError, ValueError) as exc:
        raise SpecError(str(exc)) from None


def resolve_universe(spec: UniverseSpec) -> UniverseRun:
    """Check `spec` and load its universe (see the module docstring); `spec.data` is a path
    the caller has already confined to its roots."""
    from kestrel.data import DataError
    from kestrel.data.universe import load_universe

    if not 1 <= spec.days <= 366:
        raise SpecError(f"days must be 1 to 366, got {spec.days}")
    if not 0 <= spec.guard_s < 86400:
        raise SpecError(f"guard_s must be 0 to 86399 seconds, got {spec.guard_s}")
    symbols = None if spec.symbols is None else [s.strip() for s in spec.symbols if s.strip()]
    if symbols is not None and not symbols:
        raise SpecError("symbols is empty: give symbols like [\"AAPL\", \"MSFT\"], or leave it out for every one")
    if symbols is not None and len(symbols) > MAX_SYMBOLS:
        raise SpecError(f"{len(symbols)} symbols: at most {MAX_SYMBOLS} per run")
    date: dt.date | None = None
    if spec.date is not None:
        try:
            date = dt.date.fromisoformat(spec.date.strip())
        except ValueError:
            raise SpecError(f"date must be YYYY-MM-DD, got {spec.date[:40]!r}") from None
    try:
        bounds = PortfolioBounds(capital=spec.capital, max_gross=spec.max_gross, max_open=spec.max_open,
                                 session_maxloss=spec.portfolio_maxloss, no_short=spec.no_short)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    feed, news = _news(spec.news)
    options = _options(spec, feed)
    source = UniverseSource(spec.data)
    try:
        universe = load_universe(spec.data, symbols=symbols).universe
    except DataError as exc:
        raise SpecError(str(exc)) from None
    except OSError as exc:
        raise SpecError(f"cannot read {spec.data}: {exc.strerror or exc}") from None
    if len(universe.symbols) > MAX_SYMBOLS:
        raise SpecError(f"the universe holds {len(universe.symbols)} symbols: pick at most {MAX_SYMBOLS} with symbols")
    try:
        sessions = pick_universe_sessions(universe, date, spec.days)
    except SessionError as exc:
        raise SpecError(str(exc)) from None
    return UniverseRun(spec, universe, source, bounds, options, sessions, news)


def _news(path: str | None) -> tuple[NewsFeed, NewsSource | None]:
    """The feed and source of the news file at `path` (the empty feed without one)."""
    from kestrel.data import DataError
    from kestrel.data.news import load_news

    if path is None:
        return NO_NEWS, None
    try:
        loaded = load_news(path)
    except DataError as exc:
        raise SpecError(str(exc)) from None
    return loaded.feed, loaded.source


def universe_summary(result: PortfolioResult) -> dict[str, Any]:
    """The run's summary (the module docstring): the report's JSON, the dates, the end cash,
    equity and holdings, and the turns (`run_summary`)."""
    from kestrel.report.portfolio import from_portfolio_run, to_json

    body = to_json(from_portfolio_run(result.engine, result.capture.dates))
    body.update(run_summary(result))
    return body


def universe_capture(run: UniverseRun, result: PortfolioResult) -> bytes:
    """The run's capture file (its universe source and ledger checksum, then its capture)."""
    return capture_bytes(run.source, result.capture, result.ledger.to_jsonl(), run.news)


def partial_capture(run: UniverseRun, agent_id: str, turns: Sequence[CapturedPortfolioTurn]) -> bytes:
    """The capture file of a run that ended early: its committed `turns`, under the header of
    its universe without a ledger checksum (a replay reproduces the ledger up to its last turn)."""
    cfgs = universe_configs(run.universe, run.options)
    capture = capture_of(run.universe, run.sessions, run.bounds, cfgs, run.options, agent_id, turns,
                         run.news_sha256)
    head = msgspec.json.encode(CaptureHead(run.source, None, msgspec.UNSET if run.news is None else run.news))
    return head[:-1] + b"," + capture.to_json()[1:] + b"\n"


class ResumedAgentActor(Actor[AgentMessage]):
    """Answers each ordinal of a committed prefix with its recorded text (the agent is not
    asked again), every other ask through the host's agent actor."""

    def __init__(self, inner: HostedAgentActor, committed: Sequence[CapturedPortfolioTurn]) -> None:
        self.inner = inner
        self.committed = {(t.date, t.ordinal): t.text for t in committed}

    async def receive(self, message: AgentMessage) -> CallOutcome | list[LateReply | Abandoned]:
        if isinstance(message, AskAgent):
            text = self.committed.get((message.date or "", message.request.ordinal))
            if text is not None:
                return Answered(AgentReply(text))
        return await self.inner.receive(message)


class _DayTurns:
    """Emits a finished session's turns, the evidence recorded before them first, then the
    ledger lines the session added."""

    def __init__(self, outlet: Outlet) -> None:
        self.outlet = outlet

    async def __call__(self, turns: tuple[CapturedPortfolioTurn, ...], added: LedgerLines, first: int) -> None:
        await self.flush()
        for t in turns:
            await self.outlet.emit(PortfolioTurnEvent(t))
        if added.jsonl:
            date = turns[0].date if turns else ""
            await self.outlet.emit(PortfolioLedgerLines(date, first, added.jsonl))

    async def flush(self) -> None:
        for record in self.outlet.take_evidence():
            await self.outlet.emit(EvidenceEvent(record))


async def run_hosted_universe(run: UniverseRun, source: Agent | ReplyPort, identity: Agent, emit: Emit, *,
                              agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S,
                              committed: Sequence[CapturedPortfolioTurn] = ()) -> PortfolioResult:
    """Run the universe session `run` on its own actor system (the module docstring); the
    ordinals of `committed` (a resumed run's) are answered with their recorded text."""
    options, universe, bounds = run.options, run.universe, run.bounds
    outlet = Outlet(emit)
    day_turns = _DayTurns(outlet)
    cfgs = universe_configs(universe, options)
    engine = PortfolioEngine(universe, cfgs, bounds)
    blind = run.blind
    shown = None if blind is None else BlindRequests.of(blind, run.sessions)
    async with ActorSystem() as system:
        tap = system.spawn(lambda: TapActor(outlet, {}), name="tap")  # answers the agent's Flush
        agent = system.spawn(lambda: ResumedAgentActor(HostedAgentActor(source, outlet, tap, {}, shown), committed),
                             name="agent")
        captured = await run_universe_sessions(system, run.sessions, universe, engine, agent=agent,
                                               identity=identity, options=options, bounds=bounds, configs=cfgs,
                                               sink=outlet.sink, agent_timeout=agent_timeout, on_day=day_turns,
                                               blind=blind)
        await day_turns.flush()  # the late replies' evidence, settled at the end of the run
    capture = capture_of(universe, run.sessions, bounds, cfgs, options, identity.agent_id, captured,
                         run.news_sha256)
    return PortfolioResult(engine, capture, captured, [])


__all__ = [
    "MAX_SYMBOLS",
    "ResumedAgentActor",
    "partial_capture",
    "UniverseRun",
    "UniverseSpec",
    "is_universe_name",
    "resolve_universe",
    "run_hosted_universe",
    "universe_capture",
    "universe_summary",
]

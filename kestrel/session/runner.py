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

The actor shell (`actors.driver`) runs exactly these steps through messages, using the same
sans-IO pieces (`SessionDay` for the schedule and tick ranges, `DayRun` for the loop and the
bookkeeping, `advance` and `apply_turn` for the engine), so both give the same ledger and
capture.
Deterministic: nothing here reads the wall clock; the same inputs give byte-identical ledgers,
captures and evidence.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kestrel.engine.book import Carry
from kestrel.data.source import DataSource
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import Engine
from kestrel.engine.ledger import Ledger, LedgerEvent, LedgerSummary
from kestrel.frame import DEFAULT_CATALOG, MarketData, Ordinal, PaneCatalog, SessionSpec, freeze
from kestrel.frame.account import AccountState
from kestrel.frame.ticks import NS_PER_S, Ticks
from kestrel.lang import ast
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, LateReplies, LateReply, late_grace
from kestrel.session.capture import CaptureHeader, CapturedTurn, encode_capture
from kestrel.session.coverage import Coverage, coverage, default_session_index
from kestrel.session.drive import author_turn
from kestrel.session.loop import AuthoringLoop, Done, Evidence, LoopSettings
from kestrel.session.ports import snapshot_ports
from kestrel.session.profiles import Policy
from kestrel.session.protocol import Agent, AgentTurn, StandDownTurn, Supersede, Usage
from kestrel.session.risk import RiskBounds
from kestrel.session.schedule import DEFAULT_GUARD_S, ScheduleError, cutoff_ns, ordinals

EvidenceSink = Callable[[Evidence], None]
ENGINE_PATHS = ("auto", "reference")


def evidence_logger(log: Any, event: str = "authoring_iteration") -> EvidenceSink:
    """An evidence sink writing each record as one structlog event (e.g. to the JSON-lines
    logger of `kestrel.logs.open_json_sink`)."""

    def sink(record: Evidence) -> None:
        log.info(event, **msgspec.to_builtins(record))

    return sink


class SessionError(ValueError):
    """Bad session inputs (an unknown date, no session in the data, ...)."""


@dataclass(frozen=True)
class SessionOptions:
    """How a session runs. `profile` is recorded in evidence only, never in ledger/capture."""

    checkpoints: tuple[str, ...] = ()
    guard_s: int = DEFAULT_GUARD_S
    settings: LoopSettings = LoopSettings()
    policy: Policy | None = None
    profile: str | None = None
    allowed_panes: tuple[str, ...] | None = None
    engine: EngineConfig = field(default_factory=EngineConfig)
    catalog: PaneCatalog = DEFAULT_CATALOG
    data_name: str = "sample"
    engine_path: str = "auto"
    source: DataSource | None = None  # recorded in the capture header, checked by replay
    # called with each terminal turn as it is taken (e.g. a `CaptureWriter` appending it)
    on_turn: Callable[[CapturedTurn], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.guard_s < 86400:
            raise SessionError(
                f"guard must be 0 to 86399 seconds, got {self.guard_s} (a negative guard would "
                "let the snapshot see ticks after the ordinal)"
            )
        if self.engine_path not in ENGINE_PATHS:
            raise SessionError(
                f"unknown engine path {self.engine_path!r}: use auto (fast path where it "
                "applies) or reference (always per tick)"
            )


class OrdinalOutcome(msgspec.Struct, frozen=True):
    """What happened at one ordinal (for reports): the terminal turn and the loop's cost."""

    date: str
    ordinal: str
    turn: AgentTurn
    iterations: int
    tokens_spent: int
    evidence: int
    escalations: int
    armed: str


def path_tally() -> dict[str, int]:
    """Ticks run per engine path (`fast`, `reference`), both keys always present."""
    return {"fast": 0, "reference": 0}


class DayResult(msgspec.Struct):
    """One session's outcome. `engine_ticks` counts the ticks each engine path ran (it may
    differ between the direct and the actor run, which batch the ticks differently; the
    ledger never does). `partial` marks a session the data does not span and `coverage`
    says how much it does (`kestrel.session.coverage`); PnL is in `currency`, the
    instrument's quote currency."""

    date: str
    ledger: Ledger
    outcomes: list[OrdinalOutcome]
    turns: list[CapturedTurn]
    evidence: list[Evidence]
    tz: str = "UTC"
    decimals: int = 2
    engine_ticks: dict[str, int] = msgspec.field(default_factory=path_tally)
    partial: bool = False
    coverage: str = ""
    currency: str = "USD"
    carry: Carry | None = None  # what the next session opens with (end_of_day="carry")

    @property
    def summary(self) -> LedgerSummary:
        return self.ledger.summary()


class SessionResult(msgspec.Struct):
    header: CaptureHeader
    days: list[DayResult]
    engine_path: str = "auto"

    def ledger_jsonl(self) -> bytes:
        return b"".join(d.ledger.to_jsonl() for d in self.days)

    def capture_jsonl(self) -> bytes:
        """The capture, its header carrying the SHA-256 of `ledger_jsonl()`."""
        header = msgspec.structs.replace(self.header, ledger_sha256=hashlib.sha256(self.ledger_jsonl()).hexdigest())
        return encode_capture(header, [t for d in self.days for t in d.turns])

    @property
    def evidence(self) -> list[Evidence]:
        return [e for d in self.days for e in d.evidence]


# ------------------------------------------------------------------------------------------
# building blocks shared with the actor driver


def pick_sessions(data: MarketData, date: dt.date | None = None, days: int = 1) -> list[SessionSpec]:
    """The `days` sessions ending at `date` (default: the data's last COMPLETE session, else its
    most covered one, see `kestrel.session.coverage`)."""
    if not data.sessions:
        raise SessionError("the data holds no session: load data with a session schedule")
    if days < 1:
        raise SessionError(f"--days must be >= 1, got {days}")
    if date is None:  # at least `days` sessions when the data holds them (the default may be early)
        end = min(max(default_session_index(data), days - 1), len(data.sessions) - 1)
    else:
        found = [i for i, s in enumerate(data.sessions) if s.date == date]
        if not found:
            have = ", ".join(s.date.isoformat() for s in data.sessions)
            raise SessionError(f"no session on {date.isoformat()} in the data; sessions: {have}")
        end = found[0]
    start = end - days + 1
    if start < 0:
        raise SessionError(
            f"asked for {days} days ending {data.sessions[end].date.isoformat()}, but the data "
            f"holds only {end + 1} sessions up to it"
        )
    return list(data.sessions[start : end + 1])


@dataclass
class SessionDay:
    """One session's schedule and ticks: ordinals, their cutoffs, and the tick ranges the
    engine takes: `stretch(2i)` runs up to ordinal i's cutoff (the snapshot's), `stretch(2i+1)`
    from the cutoff to the ordinal's time (the authoring window, under the incumbent plan);
    the turn is armed after it; `stretch(2n)` runs to the close (n ordinals)."""

    data: MarketData
    session: SessionSpec
    ordinals: tuple[Ordinal, ...]
    guard_s: int
    ticks: Ticks = field(init=False)
    bounds: list[int] = field(init=False)

    def __post_init__(self) -> None:
        t = self.data.ticks
        lo = t.index_at(self.session.open_ns, side="left")
        hi = t.index_at(self.session.close_ns, side="right")
        self.ticks = t.slice(lo, hi)
        for before, o in zip(self.ordinals, self.ordinals[1:]):
            if self.cutoff(o) < before.time_ns:
                raise ScheduleError(
                    f"checkpoint {o.label} is within the {self.guard_s} s guard of "
                    f"{before.label}: its snapshot would be frozen before {before.label}'s turn "
                    "takes effect; space checkpoints further apart or shorten --guard")
        cuts: list[int] = [0]
        for o in self.ordinals:
            cuts += [self.ticks.index_at(self.cutoff(o)), self.ticks.index_at(o.time_ns)]
        self.bounds = [max(cuts[: i + 1]) for i in range(len(cuts))]

    @classmethod
    def of(cls, data: MarketData, session: SessionSpec, checkpoints: Sequence[str], guard_s: int) -> SessionDay:
        return cls(data, session, ordinals(session, checkpoints), guard_s)

    @property
    def date(self) -> str:
        return self.session.date.isoformat()

    def cutoff(self, o: Ordinal) -> int:
        return cutoff_ns(o, self.guard_s)

    @property
    def coverage(self) -> Coverage:
        """How the data covers this session (complete or partial)."""
        return coverage(self.data, self.session)

    @property
    def stretches(self) -> int:
        """How many stretches the day has: two per ordinal and the tail."""
        return 2 * len(self.ordinals) + 1

    def stretch(self, k: int) -> Ticks:
        """The k-th stretch of ticks (see the class docstring)."""
        hi = self.bounds[k + 1] if k + 1 < len(self.bounds) else len(self.ticks)
        return self.ticks.slice(self.bounds[k], hi)

    def segment(self, i: int) -> Ticks:
        """Ticks the engine takes before ordinal `i`'s snapshot (up to its cutoff)."""
        return self.stretch(2 * i)

    def window(self, i: int) -> Ticks:
        """Ordinal `i`'s authoring window: from its cutoff up to its time (the incumbent runs)."""
        return self.stretch(2 * i + 1)

    def tail(self) -> Ticks:
        """Ticks after the last ordinal's time, to the close."""
        return self.stretch(2 * len(self.ordinals))


def engine_config(options: SessionOptions, data: MarketData) -> EngineConfig:
    """The engine's config for `data`: the options' with the instrument's contract multiplier
    (money per price point per unit). A multiplier set in the options must agree with it."""
    cfg = options.engine
    mult = data.instrument.multiplier
    if cfg.multiplier == mult:
        return cfg
    if cfg.multiplier != 1.0:
        raise SessionError(
            f"the engine config's multiplier {cfg.multiplier:g} disagrees with the instrument's "
            f"{mult:g} ({data.symbol}); set the multiplier on the data's instrument")
    return msgspec.structs.replace(cfg, multiplier=mult)


def new_engine(day: SessionDay, config: EngineConfig, carry: Carry | None) -> Engine:
    """The engine of one session, opening with `carry` (the previous session's, or None)."""
    return Engine(config, day.session, day.data.symbol, day.data.tick_size, carry)


def session_days(
    data: MarketData, options: SessionOptions, date: dt.date | None = None, days: int = 1
) -> list[SessionDay]:
    """The `days` sessions ending at `date`, each with its schedule (fails on a bad date,
    day count or checkpoint before anything runs)."""
    sessions = pick_sessions(data, date, days)
    return [SessionDay.of(data, s, options.checkpoints, options.guard_s) for s in sessions]


def advance(engine: Engine, ticks: Ticks, path: str, tally: dict[str, int]) -> list[LedgerEvent]:
    """Run `engine` over `ticks` (a stretch between two cutoffs, or a feed batch of one)
    without ending its session; returns the new ledger events and counts the ticks in
    `tally` under the path that ran them. `path` is `auto` (the engine's fast path where it
    applies) or `reference`; both give the same ledger."""
    n = len(ticks)
    if n == 0:
        return []
    mark = len(engine.ledger)
    engine.run(ticks, path=path, final=False)
    tally[engine.last_path] += n
    return engine.ledger.events[mark:]


def apply_turn(engine: Engine, turn: AgentTurn, incumbent: ast.Plan | None,
               at_ns: int | None = None) -> tuple[ast.Plan | None, str]:
    """Arm the terminal turn at `at_ns` (its ordinal's instant); returns the new incumbent
    plan and what was done. A plan the engine refuses stands the session down (fail closed)
    with the engine's reason."""
    if isinstance(turn, Supersede):
        try:
            engine.arm(turn.plan, at_ns)
        except ValueError as exc:
            reason = " ".join(f"plan {turn.plan.name} refused by the engine: {exc}".split())
            engine.stand_down(reason, at_ns)
            return None, f"refused: {reason}"
        return turn.plan, f"armed {turn.plan.name}"
    if isinstance(turn, StandDownTurn):
        engine.stand_down(turn.reason, at_ns)
        return None, f"stood down: {turn.reason}"
    return incumbent, "passed" if incumbent is None else f"kept {incumbent.name}"


class DayRun:
    """The sans-IO bookkeeping of one session for one agent, shared by `run_day` and the
    actor driver. Per ordinal `i`: `open(i, account, incumbent)` gives the authoring loop over
    the snapshot frozen at the cutoff; once it is done, `close(loop, done)` sends its evidence
    to the sink and returns the captured turn (the only thing for the bus and the capture);
    `settle(armed)` records what the engine did with it. `result(...)` ends the day."""

    def __init__(
        self,
        day: SessionDay,
        options: SessionOptions,
        *,
        agent_id: str,
        model: str,
        iterative: bool,
        sink: EvidenceSink | None = None,
    ) -> None:
        self.day = day
        self.options = options
        self.agent_id = agent_id
        self.model = model
        self.iterative = iterative
        self.sink = sink
        self.outcomes: list[OrdinalOutcome] = []
        self.turns: list[CapturedTurn] = []
        self.evidence: list[Evidence] = []
        self._closed: tuple[int, AuthoringLoop, Done] | None = None

    def open(self, i: int, account: AccountState, incumbent: ast.Plan | None) -> AuthoringLoop:
        """The authoring loop of ordinal `i`. Profile policies apply to iterative agents only
        (single-shot agents never enter the loop)."""
        day, options = self.day, self.options
        o = day.ordinals[i]
        snap = freeze(day.data, o.time_ns, day.guard_s * NS_PER_S, account, incumbent)
        cfg = engine_config(options, day.data)
        bounds = RiskBounds(maxpos=cfg.maxpos, maxloss=cfg.maxloss, multiplier=cfg.multiplier,
                            tick_size=day.data.tick_size)
        ports = snapshot_ports(
            snap, o, catalog=options.catalog, allowed_panes=options.allowed_panes, bounds=bounds
        )
        return AuthoringLoop(
            ordinal=o.label,
            ports=ports,
            settings=options.settings,
            policy=options.policy if self.iterative else None,
            model=self.model,
            profile=options.profile,
            iterative=self.iterative,
            date=day.date,
            instrument=day.data.instrument,
            limits=bounds,
        )

    def close(self, i: int, loop: AuthoringLoop, done: Done) -> CapturedTurn:
        for record in loop.evidence:
            self._record(record)
        turn = CapturedTurn(self.day.date, self.day.ordinals[i].label, done.turn, self.agent_id)
        self.turns.append(turn)
        if self.options.on_turn is not None:
            self.options.on_turn(turn)
        self._closed = (i, loop, done)
        return turn

    def _record(self, record: Evidence) -> None:
        self.evidence.append(record)
        if self.sink is not None:
            self.sink(record)

    def record_late(self, late: LateReply) -> None:
        """Evidence of an abandoned call that answered after its timeout (`late-reply`): the
        reply is discarded, its text, usage and error are kept for the record."""
        reply = late.reply
        self._record(
            Evidence(
                ordinal=late.ordinal,
                iteration=late.iteration,
                kind="late-reply",
                model=self.model,
                usage=reply.usage if reply is not None else Usage(),
                budget_exhausted=False,
                latency_ms=late.elapsed_ms,
                reason=f"discarded: answered after the {late.timeout:g}s timeout",
                error=late.error,
                profile=self.options.profile,
                date=late.date,
                text=reply.text if reply is not None else None,
            )
        )

    def record_abandoned(self, call: Abandoned) -> None:
        """Evidence of an abandoned call that had not answered when the run's wait for it
        ended (`abandoned`): its tokens and cost are unknown (the provider may bill it)."""
        self._record(
            Evidence(
                ordinal=call.ordinal,
                iteration=call.iteration,
                kind="abandoned",
                model=self.model,
                usage=Usage(),
                budget_exhausted=False,
                reason=f"no answer after the {call.timeout:g}s timeout by the end of the run: "
                       "tokens and cost unknown",
                profile=self.options.profile,
                date=call.date,
            )
        )

    def settle(self, armed: str) -> None:
        if self._closed is None:
            raise RuntimeError("DayRun.settle before close: close the ordinal's loop first")
        i, loop, done = self._closed
        self._closed = None
        self.outcomes.append(
            OrdinalOutcome(
                date=self.day.date,
                ordinal=self.day.ordinals[i].label,
                turn=done.turn,
                iterations=done.iterations,
                tokens_spent=done.tokens_spent,
                evidence=len(loop.evidence),
                escalations=loop.escalations,
                armed=armed,
            )
        )

    def result(self, ledger: Ledger, engine_ticks: dict[str, int],
               carry: Carry | None = None) -> DayResult:
        day = self.day
        cover = day.coverage
        return DayResult(
            day.date, ledger, self.outcomes, self.turns, self.evidence, day.session.tz,
            day.data.price_decimals, dict(engine_ticks), not cover.complete, cover.describe(),
            day.data.instrument.currency, carry,
        )


def record_late(run: DayRun, records: Sequence[LateReply | Abandoned]) -> None:
    """Record what the box handed over: each late reply and each call given up on, once."""
    for record in records:
        if isinstance(record, LateReply):
            run.record_late(record)
        else:
            run.record_abandoned(record)


def capture_header(
    data: MarketData, days: Sequence[SessionDay], agent_id: str, options: SessionOptions
) -> CaptureHeader:
    return CaptureHeader(
        data=options.data_name,
        symbol=data.symbol,
        dates=tuple(d.date for d in days),
        schedule=tuple(o.label for o in days[0].ordinals) if days else (),
        guard_s=options.guard_s,
        agent=agent_id,
        engine=options.engine,
        source=options.source,
    )


# ------------------------------------------------------------------------------------------
# the synchronous embedding


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
) -> DayResult:
    """One session, synchronously (see the module docstring for the steps); `carry` is the
    previous session's carried position (`DayResult.carry`). A blocking agent's call past
    `agent_timeout` seconds is abandoned (the ordinal stands down) and its late reply, once
    it arrives (on this day or a later one of the run sharing the box `late`), is `late-reply`
    evidence; on the `last` day of the run abandoned calls are waited for (at most
    `late_grace`), then each one still running is `abandoned` (`LateReplies.close`)."""
    box = late if late is not None else LateReplies()
    engine = new_engine(day, engine_config(options, day.data), carry)
    run = DayRun(day, options, agent_id=agent.agent_id, model=agent.model,
                 iterative=agent.iterative, sink=sink)
    tally = path_tally()
    incumbent: ast.Plan | None = None
    for i in range(len(day.ordinals)):
        advance(engine, day.segment(i), options.engine_path, tally)
        loop = run.open(i, engine.account(), incumbent)
        done = author_turn(loop, agent, timeout=agent_timeout, late=box)
        run.close(i, loop, done)
        advance(engine, day.window(i), options.engine_path, tally)  # the incumbent runs
        incumbent, armed = apply_turn(engine, done.turn, incumbent, day.ordinals[i].time_ns)
        run.settle(armed)
        for record in box.take():
            run.record_late(record)
    advance(engine, day.tail(), options.engine_path, tally)
    engine.finish()
    if last:  # the end of the run: a late reply just after it is still recorded
        box.settle(late_grace(agent_timeout))
    record_late(run, box.close() if last else box.take())
    return run.result(engine.ledger, tally, engine.carry_out())


def run_session(
    data: MarketData,
    agent: Agent,
    options: SessionOptions = SessionOptions(),
    *,
    date: dt.date | None = None,
    days: int = 1,
    sink: EvidenceSink | None = None,
    progress: Callable[[int, int], None] | None = None,
    agent_timeout: float | None = DEFAULT_AGENT_TIMEOUT_S,
) -> SessionResult:
    """Run `days` sessions ending at `date` (default: the data's last complete session, else
    its most covered one: `kestrel.session.coverage.default_session_index`), one engine per day.
    `agent_timeout` bounds each call of a blocking agent, as on actors (`kestrel.session.calls`)."""
    plan = session_days(data, options, date, days)
    late = LateReplies()
    engine_config(options, data)  # a multiplier conflict fails before anything runs
    results: list[DayResult] = []
    carry: Carry | None = None
    for k, day in enumerate(plan):
        results.append(run_day(day, agent, options, sink, carry, agent_timeout=agent_timeout, late=late,
                               last=k == len(plan) - 1))
        carry = results[-1].carry
        if progress is not None:
            progress(k + 1, len(plan))
    return SessionResult(capture_header(data, plan, agent.agent_id, options), results, options.engine_path)


__all__ = [
    "ENGINE_PATHS",
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
    "record_late",
    "run_day",
    "run_session",
    "session_days",
]

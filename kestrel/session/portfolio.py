"""A portfolio session: one agent trading a universe on one account, session after session.

Per session, per ordinal (OPEN and the checkpoints; for daily bars OPEN alone is the daily
cadence: a decision on a session's close takes effect at the next open, and the OPEN ordinal's
snapshot holds every bar up to that close), in order, as the sans-IO `PortfolioDayDriver` asks:
1. `RunTo(cutoff)`: the merged ticks up to the ordinal's cutoff (`time - guard`);
2. `ReadState`: the account (`PortfolioState`) at the cutoff;
3. `RunAuthoring(loop)`: the project's bounded authoring loop (`kestrel.session.loop`) over the
   universe frozen at the cutoff (`kestrel.session.ports.universe_ports`): VIEW requests
   answered from the same snapshot, invalid replies repaired with their error, plans assessed
   against their own symbol's bounds, all under the profile's view-request cap and token
   budget, every non-terminal step an `Evidence` record (to the sink); an exhausted budget,
   a refusal or a failed call stands every symbol down (fail closed);
4. `RunTo(time)`: the authoring window, under the incumbent plans;
5. `Apply`: the turn takes effect at the ordinal's time: each `PLAN ... ON SYM` supersedes only
   its symbol's incumbent, `STANDDOWN` stands every symbol down, `STANDDOWN ON SYM` one,
   `PASS` keeps all;
then `Close` (the rest of the session and each engine's end-of-day policy) and `Finished`.

The synchronous `run_portfolio` drives it in process (`drive`: the agent called through
`kestrel.session.drive.author_turn`, so calls time out and late replies are evidence as in a
single-symbol session); an actor shell answers the same steps. A run's capture
(`PortfolioCapture`: the universe's symbols and sessions, the options, each turn's terminal
reply text by date and ordinal) replays byte for byte through `replay`. Deterministic:
nothing here reads the wall clock.

The briefing is the frame's (`kestrel.frame.universe_view.universe_briefing`: CLOCK, RULES with
the per-symbol and the account's bounds, BUDGET, REPLY, then the view: the default universe
view or the one the agent asked for). A `Briefing` function `(universe, ordinal, cutoff_ns,
state, date) -> text` may replace the default view's text (`account_briefing`: the clock, the
account, a line per symbol); a VIEW the agent asks for is the frame's either way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import msgspec
import numpy as np

from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import EnginePath
from kestrel.engine.portfolio import PortfolioEngine, PortfolioLedger
from kestrel.engine.ledger import Disarmed, OrderRejected
from kestrel.engine.plans import PlanError
from kestrel.frame import Ordinal, typed_universe
from kestrel.lang import ast, format_ast
from kestrel.market.account import Notice
from kestrel.market.portfolio import PortfolioBounds, PortfolioState
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, Abandoned, LateReplies, LateReply, late_grace
from kestrel.session.drive import author_turn
from kestrel.session.loop import AuthoringLoop, Done, Evidence, LoopPorts
from kestrel.session.options import EvidenceSink, SessionError, SessionOptions, engine_config, engine_path_of
from kestrel.session.ports import MAX_PLANS, TURN_LIMITS, interpret_module, universe_ports
from kestrel.session.protocol import (
    Agent,
    AgentReply,
    AuthorRequest,
    Invalid,
    ModuleReply,
    PortfolioTurn,
    Reply,
    RequestView,
    StandDownTurn,
    Usage,
)
from kestrel.session.risk import RiskBounds
from kestrel.session.rules import notices_of, superseded, terms_of
from kestrel.session.schedule import cutoff_ns, ordinals

DEFAULT_CAPITAL = 100_000.0  # a universe session's starting cash when none is given
AGENT_STANDDOWN = "stand down requested by the agent"  # the reason of a STANDDOWN ON SYM
REPAIR_KINDS = ("repair", "self-correction", "risk-review", "bound-check")


# ------------------------------------------------------------------------------------------
# the turn of a universe


def read_turn(text: str, symbols: Sequence[str], lots: Mapping[str, float] | None = None) -> PortfolioTurn | str:
    """`text` as a portfolio turn over `symbols`, or the error to send back (one line or the
    language's repair text): `kestrel.session.ports.interpret_module`, a VIEW being no turn."""
    reply = interpret_module(text, symbols, lots)
    if isinstance(reply, ModuleReply):
        return reply.turn
    if isinstance(reply, RequestView):
        return "a VIEW is a request for panes, not a turn: answer with PLANs, STANDDOWN or PASS"
    if isinstance(reply, Invalid):
        return reply.error
    return "not a turn of a universe: answer with PLANs (each ON a symbol), STANDDOWN or PASS"


def standdown_text(reason: str) -> str:
    """The reply text that stands every symbol down with `reason` (what a capture records for a
    stand-down the loop decided: a budget spent, a refusal, a failed call)."""
    return format_ast(ast.StandDown(reason=" ".join(reason.replace('"', "'").split())))


def turn_of(done: Done) -> PortfolioTurn:
    """The universe's turn of a finished loop: its module, or every symbol stood down with the
    loop's fail-closed reason (a PASS when the loop passed)."""
    if done.module is not None:
        return done.module
    if isinstance(done.turn, StandDownTurn):
        return PortfolioTurn(all_down=" ".join(done.turn.reason.replace('"', "'").split()))
    return PortfolioTurn()


def apply_portfolio_turn(engine: PortfolioEngine, turn: PortfolioTurn, at_ns: int) -> str:
    """Apply `turn` at `at_ns`; returns what was done (a plan the engine refuses stands its
    symbol down with the engine's reason)."""
    done: list[str] = []
    if turn.all_down is not None:
        engine.stand_down(None, turn.all_down, at_ns)
        done.append(f"all stood down: {turn.all_down}")
    for sym in turn.stand_down:
        engine.stand_down(sym, AGENT_STANDDOWN, at_ns)
        done.append(f"{sym} stood down")
    for p in turn.plans:
        assert p.instrument is not None
        try:
            engine.arm(p.instrument, p, at_ns)
            done.append(f"armed {p.name} on {p.instrument}")
        except (PlanError, ValueError) as exc:
            reason = " ".join(f"plan {p.name} refused by the engine: {exc}".split())
            engine.stand_down(p.instrument, reason, at_ns)
            done.append(f"refused: {reason}")
    return "; ".join(done) if done else "passed"


# ------------------------------------------------------------------------------------------
# the briefing

Briefing = Callable[[Universe, Ordinal, int, PortfolioState, dt.date], str]
"""(universe, ordinal, cutoff_ns, account, session date) -> the briefing's text."""


def frame_briefing(universe: Universe, ordinal: Ordinal, cutoff: int, state: PortfolioState, date: dt.date) -> str:
    """The default briefing: the universe frozen at the cutoff (`kestrel.frame.universe.
    freeze_universe`, the account included) in its default view (`kestrel.frame.universe_view.
    universe_briefing`: kernel panes, the watchlist, the portfolio, the events)."""
    from kestrel.frame.universe import freeze_universe
    from kestrel.frame.universe_view import universe_briefing

    snap = freeze_universe(universe, cutoff, state, time_ns=ordinal.time_ns)
    return universe_briefing(snap, ordinal)


def account_briefing(universe: Universe, ordinal: Ordinal, cutoff: int, state: PortfolioState, date: dt.date) -> str:
    """The built-in briefing: the clock, the account, and per symbol its last adjusted price at
    or before the cutoff, its change over the last two sessions' last prices seen, and the
    position (a symbol with no tick yet says so). Reads nothing after `cutoff`."""
    label = ordinal.label
    lines = [f"CLOCK {date.isoformat()} {label} (data to the cutoff)",
             f"ACCOUNT {state.currency} cash {state.cash:.2f} equity {state.equity:.2f} gross {state.gross:.2f} "
             f"net {state.net:.2f} open {state.open_positions}"]
    for m, h in zip(universe.members, state.holdings):
        t = m.adjusted.ticks
        n = t.index_at(cutoff)
        if n == 0:
            lines.append(f"{m.symbol} no data yet pos {h.position}")
            continue
        last = float(t.last[n - 1]) if t.last[n - 1] == t.last[n - 1] else (float(t.bid[n - 1]) + float(t.ask[n - 1])) / 2
        opens = m.adjusted.session_open_ns
        k = int(np.searchsorted(opens, int(t.ts[n - 1]), side="right")) - 1
        chg = ""
        if k >= 1:
            j = t.index_at(int(opens[k]), side="left")
            if j > 0:
                prev = float(t.last[j - 1])
                if prev == prev and prev:
                    chg = f" chg1d {100 * (last / prev - 1):+.2f}%"
        lines.append(f"{m.symbol} last {m.adjusted.format_price(last)}{chg} pos {h.position}")
    lines.append("REPLY PLANs each ON a symbol (one per symbol), STANDDOWN [\"reason\"] or PASS")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# the sans-IO day driver


@dataclass(frozen=True)
class RunTo:
    """Run the merged ticks with ts <= `until_ns` (None: to the close); then `ran()`."""

    until_ns: int | None


@dataclass(frozen=True)
class ReadState:
    """Read the account (`PortfolioEngine.state()`) and the ledger's entries not read yet;
    then `state(s, entries)`."""


@dataclass(frozen=True)
class RunAuthoring:
    """Run the authoring loop against the agent until it is done
    (`kestrel.session.drive.author_turn`); then `authored(done)`."""

    loop: AuthoringLoop


@dataclass(frozen=True)
class Apply:
    """Apply `turn` at `at_ns` (`apply_portfolio_turn`); then `applied(what)`."""

    turn: PortfolioTurn
    at_ns: int


@dataclass(frozen=True)
class Close:
    """Close the session (`PortfolioEngine.close_session`); then `closed()`."""


@dataclass(frozen=True)
class Finished:
    """The day is over: its turns."""

    turns: tuple[CapturedPortfolioTurn, ...]


Step = RunTo | ReadState | RunAuthoring | Apply | Close | Finished


class CapturedPortfolioTurn(msgspec.Struct, frozen=True):
    """One ordinal's answer: the terminal reply's text (a stand-down the loop decided is written
    as its `STANDDOWN "reason"`), what it did, and how many repairs (repairs and reviews) the
    loop took before it."""

    date: str
    ordinal: str
    text: str
    applied: str
    repairs: int = 0


class PortfolioDayDriver:
    """One session of a universe for one agent (the module docstring's steps): each step must
    be answered by its own method before the next is asked for (a wrong answer raises
    RuntimeError). Nothing here does I/O, runs the engine or calls the agent. `evidence` holds
    the loop's records so far (each also given to `sink` as it is made)."""

    def __init__(self, universe: Universe, session: SessionSpec, options: SessionOptions = SessionOptions(), *,
                 configs: Mapping[str, EngineConfig] | None = None, bounds: PortfolioBounds | None = None,
                 agent_id: str = "", model: str = "", iterative: bool = False, sink: EvidenceSink | None = None,
                 briefing: Briefing | None = None, notices: tuple[Notice, ...] = ()) -> None:
        """`notices`: the broker's notices of the previous session not told yet (its driver's
        `untold` once it closed, with `heard` of the ledger's entries after its last ordinal)."""
        self.universe = universe
        self.session = session
        self.options = options
        self.ordinals: tuple[Ordinal, ...] = ordinals(session, options.checkpoints)
        self.configs = dict(configs) if configs is not None else universe_configs(universe, options)
        self.bounds = bounds
        self.agent_id, self.model, self.iterative = agent_id, model, iterative
        self.sink = sink
        self.briefing = briefing
        self.evidence: list[Evidence] = []
        self.pending: tuple[Notice, ...] = notices
        self.own: set[str] = set()
        self.risk_bounds = {m.symbol: RiskBounds.of(self.configs[m.symbol], m.data.tick_size)
                            for m in universe.members}
        first = self.configs[universe.members[0].symbol]
        self.terms = terms_of(first)
        self._script = self._steps()
        self._step: Step = next(self._script)

    def next_step(self) -> Step:
        return self._step

    def ran(self) -> None:
        self._answer(RunTo, None)

    def state(self, state: PortfolioState, entries: Sequence[tuple[str | None, object]] = ()) -> None:
        """The account, and the ledger's entries since the last read (the broker's notices for
        the briefing: rejections, and disarms the agent did not ask for)."""
        self.heard(entries)
        self._answer(ReadState, state)

    def heard(self, entries: Sequence[tuple[str | None, object]]) -> None:
        """Ledger entries read: their notices wait for the next briefing."""
        events = [e for _, e in entries if isinstance(e, (OrderRejected, Disarmed))]
        self.pending += notices_of(events, self.own)

    @property
    def untold(self) -> tuple[Notice, ...]:
        """The broker's notices no briefing has told yet: the next session's `notices`."""
        return self.pending

    def authored(self, done: Done) -> None:
        self._answer(RunAuthoring, done)

    def applied(self, what: str) -> None:
        self._answer(Apply, what)

    def closed(self) -> None:
        self._answer(Close, None)

    def record(self, record: Evidence) -> None:
        """Keep `record` (and give it to the sink): the loop's, or a late reply's."""
        self.evidence.append(record)
        if self.sink is not None:
            self.sink(record)

    def _answer(self, kind: type, reply: object) -> None:
        if not isinstance(self._step, kind):
            raise RuntimeError(f"PortfolioDayDriver: answered {kind.__name__} while the step is "
                               f"{type(self._step).__name__}")
        self._step = self._script.send(reply)

    def open(self, o: Ordinal, cut: int, state: PortfolioState) -> tuple[AuthoringLoop, list[str]]:
        """The authoring loop of ordinal `o` over the universe frozen at `cut` with the account,
        and the list its interpreter appends each terminal text to (the capture's text)."""
        from kestrel.frame.universe import freeze_universe

        opts = self.options
        snap = freeze_universe(self.universe, cut, state, time_ns=o.time_ns, terms=self.terms, bounds=self.bounds,
                               notices=self.pending)
        self.pending = tuple(n for n in self.pending if n.ts > cut)  # told now
        custom = self.briefing
        date = self.session.date
        default_text = None if custom is None else (lambda: custom(self.universe, o, cut, state, date))
        ports = universe_ports(snap, o, bounds=self.risk_bounds, catalog=opts.catalog,
                               allowed_panes=opts.allowed_panes, default_text=default_text)
        texts: list[str] = []
        read = ports.interpret

        def interpret(text: str) -> Reply:
            reply = read(text)
            if isinstance(reply, ModuleReply):
                texts.append(text)
            return reply

        loop = AuthoringLoop(
            ordinal=o.label, ports=dataclasses.replace(ports, interpret=interpret), settings=opts.settings,
            policy=opts.policy if self.iterative else None, model=self.model, profile=opts.profile,
            iterative=self.iterative, date=date.isoformat(), universe=typed_universe(snap, o))
        return loop, texts

    def _steps(self) -> Generator[Step, object, None]:
        turns: list[CapturedPortfolioTurn] = []
        date = self.session.date
        for o in self.ordinals:
            cut = cutoff_ns(o, self.options.guard_s)
            yield RunTo(cut)
            state = yield ReadState()
            assert isinstance(state, PortfolioState)
            loop, texts = self.open(o, cut, state)
            done = yield RunAuthoring(loop)
            assert isinstance(done, Done)
            for record in loop.evidence:
                self.record(record)
            turn = turn_of(done)
            self.own.update(superseded(p.name) for p in turn.plans)
            if turn.all_down is not None:
                self.own.add(turn.all_down)
            if turn.stand_down:
                self.own.add(AGENT_STANDDOWN)
            text = texts[-1] if done.module is not None and texts else (
                standdown_text(turn.all_down) if turn.all_down is not None else "PASS")
            repairs = sum(1 for r in loop.evidence if r.kind in REPAIR_KINDS)
            yield RunTo(o.time_ns)
            what = yield Apply(turn, o.time_ns)
            assert isinstance(what, str)
            turns.append(CapturedPortfolioTurn(date.isoformat(), o.label, text, what, repairs))
        yield Close()
        yield Finished(tuple(turns))


def late_evidence(record: LateReply | Abandoned, model: str, profile: str | None) -> Evidence:
    """The evidence of an abandoned call: `late-reply` (it answered after its timeout: the
    reply discarded, its text and usage kept) or `abandoned` (no answer by the end of the run)."""
    if isinstance(record, Abandoned):
        return Evidence(ordinal=record.ordinal, iteration=record.iteration, kind="abandoned", model=model,
                        usage=Usage(), budget_exhausted=False,
                        reason=f"no answer after the {record.timeout:g}s timeout by the end of the run: "
                               "tokens and cost unknown", profile=profile, date=record.date)
    reply = record.reply
    return Evidence(ordinal=record.ordinal, iteration=record.iteration, kind="late-reply", model=model,
                    usage=reply.usage if reply is not None else Usage(), budget_exhausted=False,
                    latency_ms=record.elapsed_ms, reason=f"discarded: answered after the {record.timeout:g}s timeout",
                    error=record.error, profile=profile, date=record.date,
                    text=reply.text if reply is not None else None)


# ------------------------------------------------------------------------------------------
# the run, its capture and its replay


class PortfolioCapture(msgspec.Struct, frozen=True):
    """What a portfolio run needs to be replayed: its symbols, sessions (dates), the engine
    configs and bounds, the schedule and every turn's reply text."""

    symbols: tuple[str, ...]
    dates: tuple[str, ...]
    bounds: PortfolioBounds
    configs: dict[str, EngineConfig]
    checkpoints: tuple[str, ...]
    guard_s: int
    engine_path: str
    agent_id: str
    turns: tuple[CapturedPortfolioTurn, ...]

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)

    @classmethod
    def from_json(cls, data: bytes) -> PortfolioCapture:
        return msgspec.json.decode(data, type=cls)


@dataclass
class PortfolioResult:
    engine: PortfolioEngine
    capture: PortfolioCapture
    turns: list[CapturedPortfolioTurn] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def ledger(self) -> PortfolioLedger:
        return self.engine.ledger


def universe_configs(universe: Universe, options: SessionOptions) -> dict[str, EngineConfig]:
    """Each symbol's engine config: the options' with the symbol's multiplier, lot size and
    scaled default maxpos (`engine_config`)."""
    return {m.symbol: engine_config(options, m.data) for m in universe.members}


def pick_universe_sessions(universe: Universe, date: dt.date | None, days: int) -> list[SessionSpec]:
    """The `days` sessions of the universe ending at `date` (default: its last)."""
    sessions = list(universe.sessions)
    if not sessions:
        raise SessionError("the universe holds no session")
    if days < 1:
        raise SessionError(f"--days must be >= 1, got {days}")
    if date is None:
        end = len(sessions) - 1
    else:
        found = [i for i, s in enumerate(sessions) if s.date == date]
        if not found:
            raise SessionError(f"no session on {date.isoformat()} in the universe "
                               f"({sessions[0].date.isoformat()} to {sessions[-1].date.isoformat()})")
        end = found[0]
    start = end - days + 1
    if start < 0:
        raise SessionError(f"asked for {days} days ending {sessions[end].date.isoformat()}, but the universe "
                           f"holds only {end + 1} sessions up to it")
    return sessions[start: end + 1]


def run_portfolio(
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
) -> PortfolioResult:
    """Run `days` sessions of `universe` ending at `date` for `agent` on one account (the
    module docstring's steps), synchronously; each evidence record goes to `sink` as it is made.
    `agent_timeout` bounds each call of a blocking agent (`kestrel.session.calls`)."""
    sessions = pick_universe_sessions(universe, date, days)
    cfgs = universe_configs(universe, options) if configs is None else configs
    engine = PortfolioEngine(universe, cfgs, bounds)
    path: EnginePath = options.engine_path
    evidence: list[Evidence] = []
    turns = drive(engine, sessions, agent, options, bounds=bounds, configs=cfgs, briefing=briefing,
                  sink=_tee(evidence, sink), agent_timeout=agent_timeout)
    capture = PortfolioCapture(universe.symbols, tuple(s.date.isoformat() for s in sessions), bounds, cfgs,
                               tuple(options.checkpoints), options.guard_s, path, agent.agent_id, tuple(turns))
    return PortfolioResult(engine, capture, turns, evidence)


def _tee(into: list[Evidence], sink: EvidenceSink | None) -> EvidenceSink:
    def record(e: Evidence) -> None:
        into.append(e)
        if sink is not None:
            sink(e)

    return record


def drive(engine: PortfolioEngine, sessions: Sequence[SessionSpec], agent: Agent,
          options: SessionOptions = SessionOptions(), *, bounds: PortfolioBounds | None = None,
          configs: Mapping[str, EngineConfig] | None = None, briefing: Briefing | None = None,
          sink: EvidenceSink | None = None,
          agent_timeout: float | None = DEFAULT_AGENT_TIMEOUT_S) -> list[CapturedPortfolioTurn]:
    """Answer every `PortfolioDayDriver` step of `sessions` in process: the engine runs here,
    the agent is called through `author_turn` (a call past `agent_timeout` is abandoned; its
    late reply is `late-reply` evidence, one still running at the end `abandoned`)."""
    turns: list[CapturedPortfolioTurn] = []
    late = LateReplies()
    untold: tuple[Notice, ...] = ()
    read = len(engine.ledger.entries)
    for k, session in enumerate(sessions):
        engine.open_session(session)
        driver = PortfolioDayDriver(engine.universe, session, options, configs=configs, bounds=bounds,
                                    agent_id=agent.agent_id, model=agent.model, iterative=agent.iterative,
                                    sink=sink, briefing=briefing, notices=untold)
        path = options.engine_path
        while True:
            step = driver.next_step()
            if isinstance(step, RunTo):
                engine.run(step.until_ns, path)
                driver.ran()
            elif isinstance(step, ReadState):
                entries = engine.ledger.entries
                driver.state(engine.state(), entries[read:])
                read = len(entries)
            elif isinstance(step, RunAuthoring):
                driver.authored(author_turn(step.loop, agent, timeout=agent_timeout, late=late))
                for record in late.take():
                    driver.record(late_evidence(record, agent.model, options.profile))
            elif isinstance(step, Apply):
                driver.applied(apply_portfolio_turn(engine, step.turn, step.at_ns))
            elif isinstance(step, Close):
                engine.close_session(path)
                driver.closed()
            else:
                turns.extend(step.turns)
                break
        driver.heard(engine.ledger.entries[read:])  # after the last ordinal: told the next session
        read = len(engine.ledger.entries)
        untold = driver.untold
        if k == len(sessions) - 1:
            late.settle(late_grace(agent_timeout))
            for done in late.close():
                driver.record(late_evidence(done, agent.model, options.profile))
    return turns


class ReplayAgent:
    """Answers a capture's turns in order, each with its recorded text (the reply that decided
    it): a replay of a capture gives its ledger byte for byte."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, capture: PortfolioCapture) -> None:
        self._texts = [t.text for t in capture.turns]
        self._next = 0
        self._id = capture.agent_id

    @property
    def agent_id(self) -> str:
        return self._id

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        if self._next >= len(self._texts):
            return AgentReply("PASS")
        self._next += 1
        return AgentReply(self._texts[self._next - 1])


class ModuleAgent:
    """A fixed module of plans: its text at every OPEN (each session's engines start with no
    plan), PASS at checkpoints. The text must read as a turn of the universe it runs on."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, text: str, name: str = "module") -> None:
        self.text = text
        self._id = f"fixed:{name}"

    @property
    def agent_id(self) -> str:
        return self._id

    @property
    def model(self) -> str:
        return ""

    def author(self, request: AuthorRequest) -> AgentReply:
        return AgentReply(self.text if request.ordinal == "OPEN" else "PASS")


def replay(universe: Universe, capture: PortfolioCapture) -> PortfolioResult:
    """Re-run a capture: the same symbols, sessions, configs, bounds and schedule, each turn
    answered by its recorded text (a single-shot agent: each text is terminal)."""
    chosen = universe.select(list(capture.symbols))
    dates = set(capture.dates)
    sessions = [s for s in chosen.sessions if s.date.isoformat() in dates]
    engine = PortfolioEngine(chosen, dict(capture.configs), capture.bounds)
    options = SessionOptions(checkpoints=capture.checkpoints, guard_s=capture.guard_s,
                             engine_path=engine_path_of(capture.engine_path))
    evidence: list[Evidence] = []
    turns = drive(engine, sessions, ReplayAgent(capture), options, bounds=capture.bounds,
                  configs=capture.configs, sink=evidence.append, agent_timeout=None)
    return PortfolioResult(engine, msgspec.structs.replace(capture, turns=tuple(turns)), turns, evidence)


__all__ = [
    "DEFAULT_CAPITAL",
    "MAX_PLANS",
    "TURN_LIMITS",
    "Apply",
    "Briefing",
    "CapturedPortfolioTurn",
    "Close",
    "Finished",
    "ModuleAgent",
    "PortfolioCapture",
    "PortfolioDayDriver",
    "PortfolioResult",
    "PortfolioTurn",
    "ReadState",
    "ReplayAgent",
    "RunAuthoring",
    "RunTo",
    "Step",
    "account_briefing",
    "late_evidence",
    "standdown_text",
    "turn_of",
    "frame_briefing",
    "apply_portfolio_turn",
    "drive",
    "read_turn",
    "replay",
    "run_portfolio",
]

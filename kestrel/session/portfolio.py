"""A portfolio session: one agent trading a universe on one account, session after session.

Per session, per ordinal (OPEN and the checkpoints; for daily bars OPEN alone is the daily
cadence: a decision on a session's close takes effect at the next open, and the OPEN ordinal's
snapshot holds every bar up to that close), in order, as the sans-IO `PortfolioDayDriver` asks:
1. `RunTo(cutoff)`: the merged ticks up to the ordinal's cutoff (`time - guard`);
2. `ReadState`: the account (`PortfolioState`) at the cutoff;
3. `Ask`: the agent answers the briefing (the universe frozen at the cutoff and the account);
   a reply that does not read as a portfolio turn is sent back with its error, at most
   `max_repairs` times, then the ordinal stands everything down (fail closed);
4. `RunTo(time)`: the authoring window, under the incumbent plans;
5. `Apply`: the turn takes effect at the ordinal's time: each `PLAN ... ON SYM` supersedes only
   its symbol's incumbent, `STANDDOWN` stands every symbol down, `PASS` keeps all;
then `Close` (the rest of the session and each engine's end-of-day policy) and `Finished`.

The synchronous `run_portfolio` drives it in process; an actor shell answers the same steps.
A run's capture (`PortfolioCapture`: the universe's symbols and sessions, the options, each
turn's reply text by date and ordinal) replays byte for byte through `replay_agent`.
Deterministic: nothing here reads the wall clock.

The briefing is a `Briefing` function `(universe, ordinal, cutoff_ns, state, date) -> text`:
`frame_briefing` (the default) is the universe frozen at the cutoff in its default view
(`kestrel.frame`); `account_briefing` a minimal one (the clock, the account, a line per symbol).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import msgspec
import numpy as np

from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import EnginePath
from kestrel.engine.portfolio import PortfolioEngine, PortfolioLedger
from kestrel.engine.plans import PlanError
from kestrel.frame import Ordinal
from kestrel.lang import Limits, ast, check, parse
from kestrel.lang.errors import LangError
from kestrel.market.portfolio import PortfolioBounds, PortfolioState
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe
from kestrel.session.options import SessionError, SessionOptions, engine_config
from kestrel.session.protocol import Agent, AgentReply, AuthorRequest
from kestrel.session.schedule import cutoff_ns, ordinals

MAX_PLANS = 100  # plans in one turn (one per symbol)
DEFAULT_REPAIRS = 2
DEFAULT_CAPITAL = 100_000.0  # a universe session's starting cash when none is given


# ------------------------------------------------------------------------------------------
# the turn of a universe


class PortfolioTurn(msgspec.Struct, frozen=True):
    """What one reply does: `plans` (each ON its symbol, one per symbol, in the reply's order)
    supersede their symbols' incumbents; `stand_down` symbols stand down; `all_down` (a reason)
    stands every symbol down first. Nothing at all is a PASS."""

    plans: tuple[ast.Plan, ...] = ()
    stand_down: tuple[str, ...] = ()
    all_down: str | None = None


TURN_LIMITS = Limits(max_statements=MAX_PLANS + 1, max_document_chars=400_000)


def read_turn(text: str, symbols: Sequence[str], lots: Mapping[str, float] | None = None) -> PortfolioTurn | str:
    """`text` as a portfolio turn over `symbols`, or the error to send back (one line or the
    language's repair text). A plan without `ON` is an error unless the universe has one
    symbol; each plan's quantities are checked against its symbol's lot (`lots`, default 1)."""
    body = text.strip()
    if not body:
        return "empty reply: answer with PLANs (each ON a symbol), STANDDOWN or PASS"
    lot_of = dict(lots or {})
    try:
        node = parse(body, TURN_LIMITS, lot=min(lot_of.values(), default=1.0), symbols=tuple(symbols))
    except LangError as exc:
        return str(exc).strip() or "the reply does not parse"
    statements = node.statements if isinstance(node, ast.Module) else (node,)
    plans: list[ast.Plan] = []
    downs: list[str] = []
    seen: set[str] = set()
    all_down: str | None = None
    for st in statements:
        if isinstance(st, ast.Plan):
            sym = st.instrument
            if sym is None:
                if len(symbols) != 1:
                    return (f"plan {st.name} has no ON: in a universe each plan names its symbol, "
                            f"e.g. PLAN {st.name} ON {symbols[0]}")
                sym = symbols[0]
                st = msgspec.structs.replace(st, instrument=sym)
            if sym not in symbols:
                return f"plan {st.name} is ON {sym}, not a symbol of the universe ({', '.join(symbols)})"
            if sym in seen:
                return f"two plans ON {sym}: one plan per symbol"
            diags = check(st, TURN_LIMITS, lot=lot_of.get(sym, 1.0), symbols=tuple(symbols))
            if diags:
                return f"plan {st.name} ON {sym}: {diags[0].message}"
            seen.add(sym)
            plans.append(st)
        elif isinstance(st, ast.StandDown):
            if st.instrument is None:
                all_down = st.reason or "stand down requested by the agent"
            elif st.instrument not in symbols:
                return f"STANDDOWN ON {st.instrument}: not a symbol of the universe ({', '.join(symbols)})"
            else:
                downs.append(st.instrument)
        elif isinstance(st, ast.Pass):
            continue
        else:
            return "a VIEW is not answered in a portfolio session: answer with PLANs, STANDDOWN or PASS"
    if len(plans) > MAX_PLANS:
        return f"{len(plans)} plans: at most {MAX_PLANS} in one reply"
    return PortfolioTurn(tuple(plans), tuple(downs), all_down)


def apply_portfolio_turn(engine: PortfolioEngine, turn: PortfolioTurn, at_ns: int) -> str:
    """Apply `turn` at `at_ns`; returns what was done (a plan the engine refuses stands its
    symbol down with the engine's reason)."""
    done: list[str] = []
    if turn.all_down is not None:
        engine.stand_down(None, turn.all_down, at_ns)
        done.append(f"all stood down: {turn.all_down}")
    for sym in turn.stand_down:
        engine.stand_down(sym, "stand down requested by the agent", at_ns)
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
    """Read the account (`PortfolioEngine.state()`); then `state(s)`."""


@dataclass(frozen=True)
class Ask:
    """Ask the agent; then `replied(text)`."""

    request: AuthorRequest


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


Step = RunTo | ReadState | Ask | Apply | Close | Finished


class CapturedPortfolioTurn(msgspec.Struct, frozen=True):
    """One ordinal's answer: the reply text that decided it (the last one asked), what it
    did."""

    date: str
    ordinal: str
    text: str
    applied: str
    repairs: int = 0


class PortfolioDayDriver:
    """One session of a universe for one agent (the module docstring's steps): each step must
    be answered by its own method before the next is asked for (a wrong answer raises
    RuntimeError). Nothing here does I/O, runs the engine or calls the agent."""

    def __init__(self, universe: Universe, session: SessionSpec, checkpoints: Sequence[str] = (),
                 guard_s: int = 30, briefing: Briefing = frame_briefing,
                 max_repairs: int = DEFAULT_REPAIRS) -> None:
        self.universe = universe
        self.session = session
        self.ordinals: tuple[Ordinal, ...] = ordinals(session, checkpoints)
        self.guard_s = guard_s
        self.briefing = briefing
        self.max_repairs = max_repairs
        self.lots = {m.symbol: float(m.lot_size) for m in universe.members}
        self._script = self._steps()
        self._step: Step = next(self._script)

    def next_step(self) -> Step:
        return self._step

    def ran(self) -> None:
        self._answer(RunTo, None)

    def state(self, state: PortfolioState) -> None:
        self._answer(ReadState, state)

    def replied(self, text: str) -> None:
        self._answer(Ask, text)

    def applied(self, what: str) -> None:
        self._answer(Apply, what)

    def closed(self) -> None:
        self._answer(Close, None)

    def _answer(self, kind: type, reply: object) -> None:
        if not isinstance(self._step, kind):
            raise RuntimeError(f"PortfolioDayDriver: answered {kind.__name__} while the step is "
                               f"{type(self._step).__name__}")
        self._step = self._script.send(reply)

    def _steps(self) -> Generator[Step, object, None]:
        turns: list[CapturedPortfolioTurn] = []
        date = self.session.date
        symbols = self.universe.symbols
        for o in self.ordinals:
            cut = cutoff_ns(o, self.guard_s)
            yield RunTo(cut)
            state = yield ReadState()
            assert isinstance(state, PortfolioState)
            briefing = self.briefing(self.universe, o, cut, state, date)
            error: str | None = None
            turn: PortfolioTurn | str = "no reply"
            text = ""
            repairs = 0
            for attempt in range(self.max_repairs + 1):
                reply = yield Ask(AuthorRequest(ordinal=o.label, iteration=attempt + 1, briefing=briefing,
                                                repair_error=error))
                assert isinstance(reply, str)
                text = reply
                turn = read_turn(text, symbols, self.lots)
                if isinstance(turn, PortfolioTurn):
                    break
                error, repairs = turn, attempt + 1
            if not isinstance(turn, PortfolioTurn):
                turn = PortfolioTurn(all_down=f"no valid reply after {self.max_repairs} repairs: {turn}"[:300])
            yield RunTo(o.time_ns)
            what = yield Apply(turn, o.time_ns)
            assert isinstance(what, str)
            turns.append(CapturedPortfolioTurn(date.isoformat(), o.label, text, what, repairs))
        yield Close()
        yield Finished(tuple(turns))


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
    briefing: Briefing = frame_briefing,
    max_repairs: int = DEFAULT_REPAIRS,
    configs: dict[str, EngineConfig] | None = None,
) -> PortfolioResult:
    """Run `days` sessions of `universe` ending at `date` for `agent` on one account (the
    module docstring's steps), synchronously."""
    sessions = pick_universe_sessions(universe, date, days)
    cfgs = universe_configs(universe, options) if configs is None else configs
    engine = PortfolioEngine(universe, cfgs, bounds)
    path: EnginePath = options.engine_path
    turns = drive(engine, sessions, agent, tuple(options.checkpoints), options.guard_s, path, briefing, max_repairs)
    capture = PortfolioCapture(universe.symbols, tuple(s.date.isoformat() for s in sessions), bounds, cfgs,
                               tuple(options.checkpoints), options.guard_s, path, agent.agent_id, tuple(turns))
    return PortfolioResult(engine, capture, turns)


def drive(engine: PortfolioEngine, sessions: Sequence[SessionSpec], agent: Agent, checkpoints: tuple[str, ...],
          guard_s: int, path: str, briefing: Briefing = frame_briefing,
          max_repairs: int = DEFAULT_REPAIRS) -> list[CapturedPortfolioTurn]:
    """Answer every `PortfolioDayDriver` step of `sessions` in process: the engine runs here,
    the agent is called directly."""
    turns: list[CapturedPortfolioTurn] = []
    for session in sessions:
        engine.open_session(session)
        driver = PortfolioDayDriver(engine.universe, session, checkpoints, guard_s, briefing, max_repairs)
        while True:
            step = driver.next_step()
            if isinstance(step, RunTo):
                engine.run(step.until_ns, path)
                driver.ran()
            elif isinstance(step, ReadState):
                driver.state(engine.state())
            elif isinstance(step, Ask):
                driver.replied(_ask(agent, step.request))
            elif isinstance(step, Apply):
                driver.applied(apply_portfolio_turn(engine, step.turn, step.at_ns))
            elif isinstance(step, Close):
                engine.close_session(path)
                driver.closed()
            else:
                turns.extend(step.turns)
                break
    return turns


def _ask(agent: Agent, request: AuthorRequest) -> str:
    """The agent's reply text; an agent that raises or refuses stands the ordinal down."""
    try:
        reply: AgentReply = agent.author(request)
    except Exception as exc:  # an agent's failure is the agent's: the ordinal fails closed
        return f'STANDDOWN "the agent failed: {type(exc).__name__}"'
    if reply.refusal:
        return 'STANDDOWN "the model refused"'
    return reply.text


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
    answered by its recorded text."""
    chosen = universe.select(list(capture.symbols))
    dates = set(capture.dates)
    sessions = [s for s in chosen.sessions if s.date.isoformat() in dates]
    engine = PortfolioEngine(chosen, dict(capture.configs), capture.bounds)
    turns = drive(engine, sessions, ReplayAgent(capture), capture.checkpoints, capture.guard_s, capture.engine_path)
    return PortfolioResult(engine, msgspec.structs.replace(capture, turns=tuple(turns)), turns)


__all__ = [
    "Apply",
    "Ask",
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
    "RunTo",
    "account_briefing",
    "frame_briefing",
    "apply_portfolio_turn",
    "drive",
    "read_turn",
    "replay",
    "run_portfolio",
]

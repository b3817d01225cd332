"""The day of a portfolio session: the sans-IO `PortfolioDayDriver` of one session of a universe,
the turn of a universe and its briefing.

Per session, per ordinal, in order, the driver asks:
1. `RunTo(cutoff)`: the merged ticks up to the ordinal's cutoff (`time - guard`);
2. `ReadState`: the account (`PortfolioState`) at the cutoff;
3. `RunAuthoring(loop)`: the project's bounded authoring loop (`kestrel.session.loop`) over the
   universe frozen at the cutoff (`kestrel.session.ports.universe_ports`): VIEW requests
   answered from the same snapshot, invalid replies repaired with their error, plans assessed
   against their own symbol's bounds, all under the profile's view-request cap and token
   budget, every non-terminal step an `Evidence` record (to the sink); an exhausted budget,
   a refusal or a failed call stands every symbol down (fail closed);
4. `RunTo(at)`: the authoring window, under the incumbent plans, up to the instant the turn
   takes effect: the ordinal's time, or later by the arm latency (`SessionOptions.arm_latency`:
   SECONDS, or `measured`, the ordinal's model calls' latency; at most to the next ordinal's
   cutoff, or the close);
5. `Apply`: the turn takes effect at that instant: each `PLAN ... ON SYM` supersedes only its
   symbol's incumbent, `STANDDOWN` stands every symbol down, `STANDDOWN ON SYM` one, `PASS`
   keeps all;
then `Close` (the rest of the session and each engine's end-of-day policy) and `Finished`.

**Sessions of daily bars** (`daily_session`: every member holds none or a daily bar's five ticks,
`kestrel.data.daily`): the OPEN ordinal's cutoff is before the opening print even with no guard
(at most `open - 1 ns`), and its turn takes effect at the open *before* the session's first tick
(step 4 runs to `open - 1 ns`): a market order fires at the opening print and fills at the next
tick, the repeated open, so it fills at the day's open price. An arm latency that moves the turn
past the open applies it where it lands (after the ticks before it).

**The CLOSE cadence** (`SessionOptions.cadence == "close"`, for daily bars: one ordinal per
session, decide after the close, fill from the next open): the session's one ordinal is `CLOSE`
at the session's close, its cutoff the close itself (the day's whole bar is seen; the guard
does not apply: no tick of the session is left to run under the incumbents); its turn is
`decided` and takes effect at the next session's open, before that session's first tick (the
next driver's `carried`: its first step is `Apply(carried, open)`, so a market order fills at
the next session's open price, the daily bar's second tick); the last session's CLOSE
turn is recorded with no effect (`NOT_APPLIED`).

In blind mode (`SessionOptions.blind`) the universe is frozen with the run's `Blind` (aliases,
session numbers, prices rescaled per symbol, news masked) and the reply is read over the
aliases and mapped back to real symbols and values before it is checked or armed
(`kestrel.session.ports.universe_ports`). News (`SessionOptions.news`) is cut at each cutoff.
Nothing here does I/O or reads the wall clock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import msgspec
import numpy as np

from kestrel.data.daily import daily_tick_times, daily_ticks_at
from kestrel.engine.config import EngineConfig
from kestrel.engine.portfolio import PortfolioEngine
from kestrel.engine.ledger import Disarmed, OrderRejected
from kestrel.engine.plans import PlanError
from kestrel.frame import Ordinal, typed_universe
from kestrel.frame.blind import Blind
from kestrel.frame.universe import UniverseSnapshot, freeze_universe
from kestrel.lang import ast, format_ast
from kestrel.market.account import Notice
from kestrel.market.portfolio import PortfolioBounds, PortfolioState
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S
from kestrel.market.universe import Universe
from kestrel.session.blind import blind_of
from kestrel.session.calls import Abandoned, LateReply
from kestrel.session.loop import AuthoringLoop, Done, Evidence
from kestrel.session.options import EvidenceSink, SessionError, SessionOptions, engine_config
from kestrel.session.ports import interpret_module, universe_ports
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

AGENT_STANDDOWN = "stand down requested by the agent"  # the reason of a STANDDOWN ON SYM
REPAIR_KINDS = ("repair", "self-correction", "risk-review", "bound-check")
NOT_APPLIED = "decided at the close of the last session: recorded, not applied"
CLOSE_LABEL = "CLOSE"


def session_ordinals(session: SessionSpec, options: SessionOptions) -> tuple[Ordinal, ...]:
    """The ordinals of `session`: OPEN and the checkpoints, or at the CLOSE cadence the one
    `CLOSE` at the session's close."""
    if options.cadence == "close":
        return (Ordinal(index=0, label=CLOSE_LABEL, time_ns=session.close_ns),)
    return ordinals(session, options.checkpoints)


def ordinal_cutoff(o: Ordinal, options: SessionOptions) -> int:
    """The ordinal's cutoff: `time - guard`; at CLOSE the close itself (the whole bar seen)."""
    return o.time_ns if o.label == CLOSE_LABEL else cutoff_ns(o, options.guard_s)


REVIEW_PREFIXES = ("self-correction:", "risk review:", "bound check:")
"""How the loop's risk-assessment re-asks begin: their findings name the plan's real symbol and
real prices (the assessment reads the plans mapped back)."""


def blind_request(blind: Blind, request: AuthorRequest) -> AuthorRequest:
    """`request` as a blind agent may read it: a risk-assessment re-ask's text with the real
    symbols as aliases and its decimals (prices) as `[n]` (`Blind.mask_reason`); a checker's
    repair echoes the agent's own (blind) text and is left as written."""
    err = request.repair_error
    if err is None or not err.startswith(REVIEW_PREFIXES):
        return request
    return msgspec.structs.replace(request, repair_error=blind.mask_reason(err))


class BlindAgent:
    """An agent reading its requests through `blind_request` (a blind run's agent): everything
    else is the agent's own (`blind_agent` picks the class of its `iterative` and `blocking`)."""

    iterative: ClassVar[bool] = False
    blocking: ClassVar[bool] = False

    def __init__(self, agent: Agent, blind: Blind) -> None:
        self.agent, self.blind = agent, blind

    @property
    def agent_id(self) -> str:
        return self.agent.agent_id

    @property
    def model(self) -> str:
        return self.agent.model

    def author(self, request: AuthorRequest) -> AgentReply:
        return self.agent.author(blind_request(self.blind, request))


class _IterativeBlindAgent(BlindAgent):
    iterative: ClassVar[bool] = True


class _BlockingBlindAgent(BlindAgent):
    blocking: ClassVar[bool] = True


class _IterativeBlockingBlindAgent(BlindAgent):
    iterative: ClassVar[bool] = True
    blocking: ClassVar[bool] = True


_BLIND_AGENTS: dict[tuple[bool, bool], type[BlindAgent]] = {
    (False, False): BlindAgent, (True, False): _IterativeBlindAgent, (False, True): _BlockingBlindAgent,
    (True, True): _IterativeBlockingBlindAgent}


def blind_agent(agent: Agent, blind: Blind) -> Agent:
    """`agent` as a blind run asks it (`BlindAgent`), iterative and blocking as it is."""
    return _BLIND_AGENTS[(bool(agent.iterative), bool(agent.blocking))](agent, blind)


def run_blind(universe: Universe, options: SessionOptions, agent: Agent) -> tuple[Blind | None, Agent]:
    """A run's one blind mapping (None unless `options.blind`) and the agent as the run asks it
    (through `blind_agent` in blind mode): what every driver shell sets up once per run."""
    if not options.blind:
        return None, agent
    blind = blind_of(universe)
    return blind, blind_agent(agent, blind)


def arm_delay_ns(options: SessionOptions, evidence: Sequence[Evidence], key: str) -> int:
    """How long after its ordinal a turn takes effect (`SessionOptions.arm_latency`): 0 (the
    default), the given seconds, or the authoring time measured as the latency of the
    ordinal's model calls (0 for an agent that calls nothing); on a replay (`arm_delays`)
    the recorded delay of the turn `key` ("DATE ORDINAL")."""
    if options.arm_delays is not None:
        return options.arm_delays.get(key, 0)
    lat = options.arm_latency
    if lat is None:
        return 0
    if lat == "measured":
        return int(round(sum(r.latency_ms or 0.0 for r in evidence) * 1e6))
    return int(round(float(lat) * NS_PER_S))


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
            reason = " ".join(f"plan {p.name} ON {p.instrument} refused by the engine: {exc}".split())
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
    loop took before it; `arm_delay_ns`, under an arm latency, how long after its ordinal it took
    effect (a replay arms it after the same delay)."""

    date: str
    ordinal: str
    text: str
    applied: str
    repairs: int = 0
    arm_delay_ns: int | msgspec.UnsetType = msgspec.UNSET


class PortfolioDayDriver:
    """One session of a universe for one agent (the module docstring's steps): each step must
    be answered by its own method before the next is asked for (a wrong answer raises
    RuntimeError). Nothing here does I/O, runs the engine or calls the agent. `evidence` holds
    the loop's records so far (each also given to `sink` as it is made)."""

    def __init__(self, universe: Universe, session: SessionSpec, options: SessionOptions = SessionOptions(), *,
                 configs: Mapping[str, EngineConfig] | None = None, bounds: PortfolioBounds | None = None,
                 agent_id: str = "", model: str = "", iterative: bool = False, sink: EvidenceSink | None = None,
                 briefing: Briefing | None = None, notices: tuple[Notice, ...] = (), blind: Blind | None = None,
                 carried: PortfolioTurn | None = None) -> None:
        """`notices`: the broker's notices of the previous session not told yet (its driver's
        `untold` once it closed, with `heard` of the ledger's entries after its last ordinal).
        `blind`: the run's blind mapping (computed from the universe when the options ask for
        blind mode and none is given: pass the run's one to spare the work per session).
        `carried`: at the CLOSE cadence, the previous session's `decided` turn (applied at this
        session's open; what it did is `carried_applied`)."""
        self.universe = universe
        self.session = session
        self.options = options
        if briefing is not None and options.blind:
            raise SessionError("a custom briefing prints real symbols and prices: blind mode uses the frame's "
                               "briefing (drop the briefing function or blind mode)")
        self.blind = blind if blind is not None or not options.blind else blind_of(universe)
        self.carried = carried
        self.carried_applied: str | None = None
        self.decided: PortfolioTurn | None = None  # the CLOSE turn, for the next session's open
        self.ordinals: tuple[Ordinal, ...] = session_ordinals(session, options)
        self.daily_open = options.cadence != "close" and daily_session(universe, session)
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
        """Ledger entries read: their notices wait for the next briefing, each naming the
        symbol it concerns (its plan as `NAME ON SYM`)."""
        for sym, e in entries:
            if isinstance(e, (OrderRejected, Disarmed)):
                self.pending += tuple(msgspec.structs.replace(n, plan=f"{n.plan} ON {sym}") if sym else n
                                      for n in notices_of([e], self.own))

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
        opts = self.options
        snap = self.frozen(o, cut, state)
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

    def frozen(self, o: Ordinal, cut: int, state: PortfolioState) -> UniverseSnapshot:
        """The universe as ordinal `o`'s briefing reads it: frozen at `cut` with the account, the
        run's terms, bounds, notices not told yet, news and blind mapping (nothing is told)."""
        return freeze_universe(self.universe, cut, state, time_ns=o.time_ns, terms=self.terms, bounds=self.bounds,
                               notices=self.pending, news=self.options.news, blind=self.blind)

    def _steps(self) -> Generator[Step, object, None]:
        turns: list[CapturedPortfolioTurn] = []
        date = self.session.date
        if self.carried is not None:  # the previous CLOSE's turn, before this session's first tick
            what = yield Apply(self.carried, self.session.open_ns)
            assert isinstance(what, str)
            self.carried_applied = what
        for i, o in enumerate(self.ordinals):
            cut = self.cutoff(o)
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
            if o.label == CLOSE_LABEL:  # takes effect at the next session's open
                self.decided = turn
                turns.append(CapturedPortfolioTurn(date.isoformat(), o.label, text, NOT_APPLIED, repairs))
                continue
            at, delay = self.effect_time(i, loop)
            before_first = self.daily_open and at == self.session.open_ns
            yield RunTo(at - 1 if before_first else at)  # a daily OPEN turn precedes the opening print
            what = yield Apply(turn, at)
            assert isinstance(what, str)
            turns.append(CapturedPortfolioTurn(date.isoformat(), o.label, text, what, repairs,
                                               msgspec.UNSET if delay is None else delay))
        yield Close()
        yield Finished(tuple(turns))

    def cutoff(self, o: Ordinal) -> int:
        """The cutoff of ordinal `o` (`ordinal_cutoff`); in a session of daily bars the OPEN's
        is before the opening print even with no guard (its briefing never sees the day's open)."""
        cut = ordinal_cutoff(o, self.options)
        return min(cut, o.time_ns - 1) if self.daily_open and o.time_ns == self.session.open_ns else cut

    def effect_time(self, i: int, loop: AuthoringLoop) -> tuple[int, int | None]:
        """(when ordinal `i`'s turn takes effect, its delay after the ordinal or None without
        an arm latency): the ordinal's time plus the delay (`arm_delay_ns`), at most the next
        ordinal's cutoff (or the session's close)."""
        o = self.ordinals[i]
        if self.options.arm_latency is None and self.options.arm_delays is None:
            return o.time_ns, None
        want = arm_delay_ns(self.options, loop.evidence, f"{self.session.date.isoformat()} {o.label}")
        nxt = self.cutoff(self.ordinals[i + 1]) if i + 1 < len(self.ordinals) else self.session.close_ns
        at = max(o.time_ns, min(o.time_ns + max(want, 0), nxt))
        return at, at - o.time_ns


def settle_turns(turns: list[CapturedPortfolioTurn], driver: PortfolioDayDriver,
                 finished: Finished) -> None:
    """Append a finished session's turns to the run's `turns`; at the CLOSE cadence first record
    what the previous session's CLOSE turn did at this session's open (`carried_applied`) as
    that turn's `applied`. A driver shell (in process or actors) calls it at each `Finished`, then
    passes `driver.decided` as the next session's `carried`."""
    if driver.carried_applied is not None and turns and turns[-1].ordinal == CLOSE_LABEL:
        turns[-1] = msgspec.structs.replace(turns[-1], applied=f"at the next open: {driver.carried_applied}")
    turns.extend(finished.turns)


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


def daily_bars(universe: Universe) -> bool:
    """Whether `universe` is of daily bars: every member's ticks are daily bars' ticks in the
    universe's sessions (`kestrel.data.daily.daily_ticks_at`: none or a bar's five at their
    instants in each session) and some member has a tick."""
    opens = np.array([s.open_ns for s in universe.sessions], dtype=np.int64)
    closes = np.array([s.close_ns for s in universe.sessions], dtype=np.int64)
    return (any(len(m.data.ticks.ts) for m in universe.members)
            and all(daily_ticks_at(m.data.ticks.ts, opens, closes) for m in universe.members))


def daily_session(universe: Universe, session: SessionSpec) -> bool:
    """Whether `session` of `universe` is a session of daily bars: every member holds none or a
    daily bar's five ticks in it, at their instants (`kestrel.data.daily.daily_tick_times`), and
    some member a bar. A few microseconds a member: the driver asks it once per session."""
    open_ns, close_ns = session.open_ns, session.close_ns
    want = daily_tick_times(np.array([open_ns], dtype=np.int64), np.array([close_ns - open_ns], dtype=np.int64))
    wanted = want[0].tolist()
    span = np.array([open_ns, close_ns + 1], dtype=np.int64)  # the ticks in [open, close]
    seen = False
    for m in universe.members:
        ts = m.data.ticks.ts
        lo, hi = ts.searchsorted(span).tolist()
        if lo == hi:
            continue
        if ts[lo:hi].tolist() != wanted:
            return False
        seen = True
    return seen


def universe_configs(universe: Universe, options: SessionOptions) -> dict[str, EngineConfig]:
    """Each symbol's engine config: the options' with the symbol's multiplier, lot size and
    scaled default maxpos (`engine_config`), and the universe's end-of-day policy
    (`SessionOptions.universe_end_of_day`; by default `carry` for daily bars, so positions
    and protective orders hold from session to session, the engine config's otherwise)."""
    eod = options.universe_end_of_day
    if eod is None and options.engine.end_of_day != "carry" and daily_bars(universe):
        eod = "carry"
    configs = {m.symbol: engine_config(options, m.data) for m in universe.members}
    if eod is None:
        return configs
    return {s: msgspec.structs.replace(c, end_of_day=eod) for s, c in configs.items()}


__all__ = [
    "AGENT_STANDDOWN",
    "CLOSE_LABEL",
    "NOT_APPLIED",
    "REPAIR_KINDS",
    "REVIEW_PREFIXES",
    "Apply",
    "BlindAgent",
    "Briefing",
    "CapturedPortfolioTurn",
    "Close",
    "Finished",
    "PortfolioDayDriver",
    "ReadState",
    "RunAuthoring",
    "RunTo",
    "Step",
    "account_briefing",
    "apply_portfolio_turn",
    "arm_delay_ns",
    "blind_agent",
    "run_blind",
    "blind_request",
    "daily_bars",
    "frame_briefing",
    "late_evidence",
    "ordinal_cutoff",
    "read_turn",
    "session_ordinals",
    "settle_turns",
    "standdown_text",
    "turn_of",
    "universe_configs",
]

"""A portfolio session: one agent trading a universe on one account, session after session.

Each session is a `PortfolioDayDriver`'s (`kestrel.session.portfolio_day`: its steps, the
cadence, blind mode, news and the arm latency). The synchronous `run_portfolio` drives it in
process (`drive`: the agent called through `kestrel.session.drive.author_turn`, so calls time
out and late replies are evidence as in a single-symbol session); an actor shell answers the
same steps. A run's capture (`PortfolioCapture`: the universe's symbols and sessions, the
options that change the ledger or what the agent reads, each turn's terminal reply text by date
and ordinal) replays byte for byte through `replay`: a blind run's texts are the agent's (over
aliases, in the blind scale) and its replay is blind again, so they map back to the same plans;
an arm latency's recorded delays arm each turn at the same instant. Deterministic: nothing here
reads the wall clock.

The briefing is the frame's (`kestrel.frame.universe_view.universe_briefing`: CLOCK, RULES with
the per-symbol and the account's bounds, BUDGET, REPLY, then the view: the default universe
view or the one the agent asked for). A `Briefing` function `(universe, ordinal, cutoff_ns,
state, date) -> text` may replace the default view's text (`account_briefing`: the clock, the
account, a line per symbol); a VIEW the agent asks for is the frame's either way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import msgspec

from kestrel.engine.config import EngineConfig
from kestrel.engine.portfolio import PortfolioEngine, PortfolioLedger
from kestrel.market.account import Notice
from kestrel.market.news import NO_NEWS, NewsFeed
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S, LateReplies, late_grace
from kestrel.session.drive import author_turn
from kestrel.session.loop import Evidence
from kestrel.session.options import EvidenceSink, SessionError, SessionOptions, engine_path_of
from kestrel.session.portfolio_day import (
    AGENT_STANDDOWN,
    CLOSE_LABEL,
    NOT_APPLIED,
    REPAIR_KINDS,
    Apply,
    Briefing,
    CapturedPortfolioTurn,
    Close,
    Finished,
    PortfolioDayDriver,
    ReadState,
    RunAuthoring,
    RunTo,
    Step,
    account_briefing,
    apply_portfolio_turn,
    run_blind,
    frame_briefing,
    late_evidence,
    read_turn,
    settle_turns,
    standdown_text,
    turn_of,
    universe_configs,
)
from kestrel.session.ports import MAX_PLANS, TURN_LIMITS
from kestrel.session.protocol import Agent, AgentReply, AuthorRequest, PortfolioTurn

DEFAULT_CAPITAL = 100_000.0  # a universe session's starting cash when none is given


# ------------------------------------------------------------------------------------------
# the run, its capture and its replay


class PortfolioCapture(msgspec.Struct, frozen=True):
    """What a portfolio run needs to be replayed: its symbols, sessions (dates), the engine
    configs and bounds, the schedule and every turn's reply text; `blind`, `cadence`,
    `arm_latency` and `news_sha256` (the SHA-256 of the news file's bytes: the file itself is
    named in the capture file's header) only when the run set them (an unflagged run's capture
    has no such key)."""

    symbols: tuple[str, ...]
    dates: tuple[str, ...]
    bounds: PortfolioBounds
    configs: dict[str, EngineConfig]
    checkpoints: tuple[str, ...]
    guard_s: int
    engine_path: str
    agent_id: str
    turns: tuple[CapturedPortfolioTurn, ...]
    blind: bool | msgspec.UnsetType = msgspec.UNSET
    cadence: Literal["close"] | msgspec.UnsetType = msgspec.UNSET
    arm_latency: float | Literal["measured"] | msgspec.UnsetType = msgspec.UNSET
    news_sha256: str | msgspec.UnsetType = msgspec.UNSET

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
    news_sha256: str | None = None,
) -> PortfolioResult:
    """Run `days` sessions of `universe` ending at `date` for `agent` on one account (the
    module docstring's steps), synchronously; each evidence record goes to `sink` as it is made.
    `agent_timeout` bounds each call of a blocking agent (`kestrel.session.calls`);
    `news_sha256` is recorded in the capture (the digest of the file `options.news` was read
    from)."""
    sessions = pick_universe_sessions(universe, date, days)
    cfgs = universe_configs(universe, options) if configs is None else configs
    engine = PortfolioEngine(universe, cfgs, bounds)
    evidence: list[Evidence] = []
    turns = drive(engine, sessions, agent, options, bounds=bounds, configs=cfgs, briefing=briefing,
                  sink=_tee(evidence, sink), agent_timeout=agent_timeout)
    capture = capture_of(universe, sessions, bounds, cfgs, options, agent.agent_id, turns, news_sha256)
    return PortfolioResult(engine, capture, turns, evidence)


def capture_of(universe: Universe, sessions: Sequence[SessionSpec], bounds: PortfolioBounds,
               configs: Mapping[str, EngineConfig], options: SessionOptions, agent_id: str,
               turns: Sequence[CapturedPortfolioTurn], news_sha256: str | None = None) -> PortfolioCapture:
    """The capture of a universe run (every driver shell writes it so): the schedule, the
    configs and bounds, every turn, and the options that change what the agent saw or when a
    turn took effect (`blind`, `cadence`, `arm_latency`, the news file's digest), each absent
    when off."""
    unset = msgspec.UNSET
    return PortfolioCapture(
        universe.symbols, tuple(s.date.isoformat() for s in sessions), bounds, dict(configs),
        tuple(options.checkpoints), options.guard_s, options.engine_path, agent_id, tuple(turns),
        blind=True if options.blind else unset,
        cadence="close" if options.cadence == "close" else unset,
        arm_latency=unset if options.arm_latency is None else options.arm_latency,
        news_sha256=news_sha256 if news_sha256 is not None else unset)


def run_summary(result: PortfolioResult) -> dict[str, object]:
    """What a universe run's summary adds to its report: the session dates, the end cash, equity
    and holdings (each with its fill count), and every turn with what it did."""
    from kestrel.engine.ledger import Filled

    state = result.engine.state()
    fills: dict[str, int] = {s: 0 for s in result.engine.symbols}
    for s, e in result.ledger.entries:
        if isinstance(e, Filled) and s is not None:
            fills[s] += 1
    return {"dates": list(result.capture.dates), "cash": state.cash, "equity": state.equity,
            "open_positions": state.open_positions,
            "holdings": [{"symbol": h.symbol, "position": h.position, "value": h.value, "rpnl": h.rpnl,
                          "fills": fills[h.symbol]} for h in state.holdings],
            "turns": [{"date": t.date, "ordinal": t.ordinal, "applied": t.applied} for t in result.turns]}


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
    late reply is `late-reply` evidence, one still running at the end `abandoned`). At the CLOSE
    cadence each session's decided turn is the next session's `carried` one, and what it did at
    that open is its captured turn's `applied` (the last one's stays `NOT_APPLIED`)."""
    turns: list[CapturedPortfolioTurn] = []
    late = LateReplies()
    untold: tuple[Notice, ...] = ()
    read = len(engine.ledger)
    blind, asked = run_blind(engine.universe, options, agent)
    carried: PortfolioTurn | None = None
    for k, session in enumerate(sessions):
        engine.open_session(session)
        driver = PortfolioDayDriver(engine.universe, session, options, configs=configs, bounds=bounds,
                                    agent_id=agent.agent_id, model=agent.model, iterative=agent.iterative,
                                    sink=sink, briefing=briefing, notices=untold, blind=blind, carried=carried)
        path = options.engine_path
        while True:
            step = driver.next_step()
            if isinstance(step, RunTo):
                engine.run(step.until_ns, path)
                driver.ran()
            elif isinstance(step, ReadState):
                driver.state(engine.state(), engine.ledger.entries_since(read))
                read = len(engine.ledger)
            elif isinstance(step, RunAuthoring):
                driver.authored(author_turn(step.loop, asked, timeout=agent_timeout, late=late))
                for record in late.take():
                    driver.record(late_evidence(record, agent.model, options.profile))
            elif isinstance(step, Apply):
                driver.applied(apply_portfolio_turn(engine, step.turn, step.at_ns))
            elif isinstance(step, Close):
                engine.close_session(path)
                driver.closed()
            else:
                settle_turns(turns, driver, step)
                break
        carried = driver.decided
        driver.heard(engine.ledger.entries_since(read))  # after the last ordinal: told the next session
        read = len(engine.ledger)
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
    plan) or, at the CLOSE cadence, every CLOSE; PASS at checkpoints. The text must read as a turn of the universe it runs on."""

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
        return AgentReply(self.text if request.ordinal in ("OPEN", CLOSE_LABEL) else "PASS")


def replay(universe: Universe, capture: PortfolioCapture, news: NewsFeed = NO_NEWS) -> PortfolioResult:
    """Re-run a capture: the same symbols, sessions, configs, bounds, schedule, cadence and
    blind mode, each turn answered by its recorded text (a single-shot agent: each text is
    terminal) and armed after its recorded delay; `news` the run's news (its briefings'
    panes: what the agent read, not what the replay arms)."""
    chosen = universe.select(list(capture.symbols))
    dates = set(capture.dates)
    sessions = [s for s in chosen.sessions if s.date.isoformat() in dates]
    engine = PortfolioEngine(chosen, dict(capture.configs), capture.bounds)
    delays = None if isinstance(capture.arm_latency, msgspec.UnsetType) else {
        f"{t.date} {t.ordinal}": (0 if isinstance(t.arm_delay_ns, msgspec.UnsetType) else t.arm_delay_ns)
        for t in capture.turns}
    options = SessionOptions(checkpoints=capture.checkpoints, guard_s=capture.guard_s,
                             engine_path=engine_path_of(capture.engine_path), blind=capture.blind is True,
                             cadence="close" if capture.cadence == "close" else "open", news=news,
                             arm_latency=None if isinstance(capture.arm_latency, msgspec.UnsetType) else capture.arm_latency,
                             arm_delays=delays)
    evidence: list[Evidence] = []
    turns = drive(engine, sessions, ReplayAgent(capture), options, bounds=capture.bounds,
                  configs=capture.configs, sink=evidence.append, agent_timeout=None)
    return PortfolioResult(engine, msgspec.structs.replace(capture, turns=tuple(turns)), turns, evidence)


__all__ = [
    "run_summary",
    "capture_of",
    "AGENT_STANDDOWN",
    "CLOSE_LABEL",
    "DEFAULT_CAPITAL",
    "NOT_APPLIED",
    "REPAIR_KINDS",
    "settle_turns",
    "universe_configs",
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

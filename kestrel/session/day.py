"""The day driver: one session for one agent, as a sans-IO state machine (h11 style).

`DayDriver` says what to do next (`next_step()`): run a stretch of ticks, read the account,
author a turn, arm it, collect late replies, finish the engine's day; the caller does it and
feeds the result back (`ran`, `account`, `authored`, `armed`, `late`, `finished`). The
synchronous `run_day` (engine in process, blocking agent) and the actor driver
(`kestrel.service.actors.driver`: feed, engine and agent actors) both drive it, so the two cannot drift: the
same steps in the same order give the same ledger, capture and evidence.

Per ordinal i: `RunTicks(2i)` (up to the cutoff) -> `ReadAccount` (the account, and the ledger
events since the last read: the broker's notices for the briefing) -> `RunAuthoring` (the loop
over the snapshot frozen at the cutoff) -> `RunTicks(2i+1)` (the authoring window, under the
incumbent) -> `Arm` (the terminal turn takes effect at the ordinal's time, or with
`SessionOptions.arm_latency` that much later: the window runs on to it) -> `CollectLate`. Then
`RunTicks(2n)` (to the close), `FinishDay`, `CollectLate(end=True)`, and `Finished` carries the
`DayResult`. `DayRun` is the bookkeeping underneath (evidence, captured turns, outcomes, the
notices not yet told: those after the last ordinal go to the next day's first briefing).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from kestrel.engine.book import Carry
from kestrel.engine.config import EngineConfig
from kestrel.engine.engine import Engine, EnginePath
from kestrel.engine.ledger import Armed, Disarmed, Ledger, LedgerEvent
from kestrel.frame import freeze, typed_snapshot
from kestrel.market.account import AccountState, Notice
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.lang import ast
from kestrel.session.calls import Abandoned, LateReply
from kestrel.session.capture import CapturedTurn, turn_calls
from kestrel.session.days import SessionDay
from kestrel.session.loop import AuthoringLoop, Done, Evidence
from kestrel.session.options import EvidenceSink, SessionOptions, engine_config
from kestrel.session.ports import snapshot_ports
from kestrel.session.protocol import AgentTurn, StandDownTurn, Supersede, Usage, restates
from kestrel.session.results import DayResult, OrdinalOutcome
from kestrel.session.risk import RiskBounds
from kestrel.session.blind import blind_of, shown_instrument, shown_limits
from kestrel.session.rules import notices_of, superseded, terms_of


def new_engine(day: SessionDay, config: EngineConfig, carry: Carry | None) -> Engine:
    """The engine of one session, opening with `carry` (the previous session's, or None)."""
    return Engine(config, day.session, day.data.symbol, day.data.tick_size, carry)


def advance(engine: Engine, ticks: Ticks, path: EnginePath, tally: dict[str, int]) -> list[LedgerEvent]:
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
    plan and what was done. A plan that restates the incumbent (the same canonical text) is
    kept with its state, not re-armed, while the engine still holds it armed (one the engine
    disarmed, by its expiry or a loss bound, is armed afresh). A plan the engine refuses stands
    the session down (fail closed) with the engine's reason."""
    if not engine.armed:
        incumbent = None  # disarmed by the engine: no incumbent to keep
    if isinstance(turn, Supersede) and restates(turn.plan, incumbent):
        assert incumbent is not None
        return incumbent, f"kept {incumbent.name} (restated: the same plan, its state kept)"
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


def still_armed(incumbent: ast.Plan | None, events: Sequence[LedgerEvent]) -> ast.Plan | None:
    """The incumbent unless `events` (the ledger since the last read) end with it disarmed
    (its expiry, a loss bound, the close): a disarmed plan is no incumbent, so the next
    briefing shows none and a PLAN restating it arms it afresh."""
    if incumbent is None:
        return None
    armed = True
    for e in events:
        if isinstance(e, Armed):
            armed = e.plan == incumbent.name
        elif isinstance(e, Disarmed) and e.plan == incumbent.name:
            armed = False
    return incumbent if armed else None


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
        notices: tuple[Notice, ...] = (),
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
        # the broker's notices not yet told, the ledger read so far, the agent's own disarms
        self.pending: tuple[Notice, ...] = notices
        self.read = 0
        self.own: set[str] = set()
        self.blind = blind_of(day.data) if options.blind else None

    def heard(self, events: Sequence[LedgerEvent]) -> None:
        """The ledger events since the last read: their notices wait for the next briefing."""
        self.read += len(events)
        self.pending += notices_of(events, self.own)

    def open(self, i: int, account: AccountState, incumbent: ast.Plan | None) -> AuthoringLoop:
        """The authoring loop of ordinal `i`, over the snapshot frozen at its cutoff with the
        account, the incumbent, the run's terms and the notices since the last turn. Profile
        policies apply to iterative agents only (single-shot agents never enter the loop)."""
        day, options = self.day, self.options
        o = day.ordinals[i]
        cfg = engine_config(options, day.data)
        snap = freeze(day.data, o.time_ns, day.guard_s * NS_PER_S, account, incumbent,
                      terms=terms_of(cfg), notices=self.pending, news=options.news, blind=self.blind)
        self.pending = tuple(n for n in self.pending if n.ts > snap.cutoff_ns)  # told now
        bounds = RiskBounds.of(cfg, day.data.tick_size)
        ports = snapshot_ports(
            snap, o, catalog=options.catalog, allowed_panes=options.allowed_panes, bounds=bounds,
            blind=self.blind,
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
            instrument=day.data.instrument if self.blind is None else shown_instrument(self.blind, day.data.instrument),
            limits=bounds if self.blind is None else shown_limits(self.blind, bounds, day.data.symbol),
            incumbent=incumbent,
            snapshot=typed_snapshot(snap, o),
        )

    def close(self, i: int, loop: AuthoringLoop, done: Done) -> CapturedTurn:
        turn_ = done.turn
        if isinstance(turn_, StandDownTurn):
            self.own.add(turn_.reason)  # the agent's own disarm: no notice
        elif isinstance(turn_, Supersede):
            self.own.add(superseded(turn_.plan.name))
        for record in loop.evidence:
            self._record(record)
        delay = self.arm_delay_ns(i, loop)
        turn = CapturedTurn(self.day.date, self.day.ordinals[i].label, done.turn, self.agent_id,
                            msgspec.UNSET if delay is None else delay, turn_calls(loop.evidence))
        self.turns.append(turn)
        if self.options.on_turn is not None:
            self.options.on_turn(turn)
        self._closed = (i, loop, done)
        return turn

    def arm_delay_ns(self, i: int, loop: AuthoringLoop) -> int | None:
        """How long after its ordinal `i` the turn takes effect (`SessionOptions.arm_latency`):
        None (at the ordinal, the default), the given seconds, or the authoring time measured
        as the latency of the ordinal's model calls (0 for an agent that calls nothing); on a
        replay (`arm_delays`) the recorded delay of that turn (None: it had none)."""
        lat = self.options.arm_latency
        if self.options.arm_delays is not None:
            return self.options.arm_delays.get(f"{self.day.date} {self.day.ordinals[i].label}")
        if lat is None:
            return None
        if lat == "measured":
            ms = sum(r.latency_ms or 0.0 for r in loop.evidence)
            return int(round(ms * 1e6))
        return int(round(float(lat) * NS_PER_S))

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
            day.data.instrument.currency, carry, self.pending,
        )


# ------------------------------------------------------------------------------------------
# the steps a day driver asks for


@dataclass(frozen=True)
class RunTicks:
    """Run the engine over stretch `stretch` of the day (`SessionDay.stretch`), without ending
    its session; then `ran()`."""

    stretch: int


@dataclass(frozen=True)
class ReadAccount:
    """Read the engine's account and its ledger's events from index `since` on (those not yet
    read); then `account(state, events)`."""

    since: int = 0


@dataclass(frozen=True)
class RunAuthoring:
    """Run the authoring loop against the agent until it is done; then `authored(done)`."""

    loop: AuthoringLoop


@dataclass(frozen=True)
class Arm:
    """The terminal turn takes effect at `at_ns`, its ordinal's instant (publish it, arm it on
    the engine: `apply_turn`); then `armed(what, incumbent)`."""

    turn: CapturedTurn
    incumbent: ast.Plan | None
    at_ns: int
    delayed: bool = False  # at_ns is after the ordinal's time (`SessionOptions.arm_latency`)


@dataclass(frozen=True)
class CollectLate:
    """Hand over the late replies of abandoned calls; at the `end` of the run's last day the
    caller first waits for the ones still running (bounded) and hands over each call still
    abandoned, once (earlier days' ends only take what arrived); then `late(records)`."""

    end: bool


@dataclass(frozen=True)
class FinishDay:
    """End the engine's session (end-of-day policy); then `finished(ledger, ticks, carry)`."""


@dataclass(frozen=True)
class Finished:
    """The day is over: `result` is its outcome."""

    result: DayResult


Step = RunTicks | ReadAccount | RunAuthoring | Arm | CollectLate | FinishDay | Finished
_Reply = TypeVar("_Reply")


@dataclass(frozen=True)
class _Armed:
    what: str
    incumbent: ast.Plan | None


@dataclass(frozen=True)
class _Account:
    state: AccountState
    events: tuple[LedgerEvent, ...]


@dataclass(frozen=True)
class _Late:
    records: tuple[LateReply | Abandoned, ...]


@dataclass(frozen=True)
class _DayLedger:
    ledger: Ledger
    engine_ticks: dict[str, int]
    carry: Carry | None


class DayDriver:
    """One session for one agent as a sans-IO state machine (see the module docstring): the
    steps come out in a fixed order, and each must be answered by its own method before the
    next is asked for (a wrong answer raises RuntimeError). Nothing here does I/O, runs the
    engine or calls the agent."""

    def __init__(
        self,
        day: SessionDay,
        options: SessionOptions,
        *,
        agent_id: str,
        model: str,
        iterative: bool,
        sink: EvidenceSink | None = None,
        notices: tuple[Notice, ...] = (),
    ) -> None:
        """`notices`: the broker's notices of the previous day not told yet (its
        `DayDriver.untold` once it finished), for this day's first briefing."""
        self.day = day
        self.run = DayRun(day, options, agent_id=agent_id, model=model, iterative=iterative, sink=sink,
                          notices=notices)
        self._script = self._steps()
        self._step: Step = next(self._script)

    def next_step(self) -> Step:
        """What the caller must do now."""
        return self._step

    @property
    def untold(self) -> tuple[Notice, ...]:
        """The broker's notices no briefing has told yet (after the last ordinal's cutoff):
        the next day's `DayDriver(notices=...)`."""
        return self.run.pending

    def ran(self) -> None:
        self._answer(RunTicks, None)

    def account(self, state: AccountState, events: Sequence[LedgerEvent] = ()) -> None:
        """The account, and the ledger events since `ReadAccount.since` (the broker's notices
        for the briefing come from them; none given: no notices)."""
        self._answer(ReadAccount, _Account(state, tuple(events)))

    def authored(self, done: Done) -> None:
        self._answer(RunAuthoring, done)

    def armed(self, what: str, incumbent: ast.Plan | None) -> None:
        """`what` the engine did with the turn (`apply_turn`'s text) and the plan now armed."""
        self._answer(Arm, _Armed(what, incumbent))

    def late(self, records: Sequence[LateReply | Abandoned]) -> None:
        self._answer(CollectLate, _Late(tuple(records)))

    def finished(self, ledger: Ledger, engine_ticks: dict[str, int], carry: Carry | None) -> None:
        self._answer(FinishDay, _DayLedger(ledger, engine_ticks, carry))

    def _answer(self, kind: type, reply: object) -> None:
        if not isinstance(self._step, kind):
            raise RuntimeError(
                f"DayDriver: answered {kind.__name__} while the step is {type(self._step).__name__}")
        self._step = self._script.send(reply)

    @staticmethod
    def _reply(reply: object, kind: type[_Reply]) -> _Reply:
        if not isinstance(reply, kind):  # `_answer` checks the step, so this is a bug
            raise RuntimeError(f"DayDriver: expected {kind.__name__}, got {type(reply).__name__}")
        return reply

    def _steps(self) -> Generator[Step, object, None]:
        day, run = self.day, self.run
        incumbent: ast.Plan | None = None
        for i in range(len(day.ordinals)):
            yield RunTicks(2 * i)  # up to the cutoff: the snapshot's ticks
            read = self._reply((yield ReadAccount(run.read)), _Account)
            run.heard(read.events)
            incumbent = still_armed(incumbent, read.events)
            loop = run.open(i, read.state, incumbent)
            done = self._reply((yield RunAuthoring(loop)), Done)
            turn = run.close(i, loop, done)
            delay = None if isinstance(turn.arm_delay_ns, msgspec.UnsetType) else turn.arm_delay_ns
            at = day.ordinals[i].time_ns if delay is None else day.delay(i, delay)
            yield RunTicks(2 * i + 1)  # the authoring window runs under the incumbent
            armed = self._reply((yield Arm(turn, incumbent, at, delay is not None)), _Armed)
            incumbent = armed.incumbent
            run.settle(armed.what)
            self._record(self._reply((yield CollectLate(end=False)), _Late))
        yield RunTicks(2 * len(day.ordinals))  # to the close
        end = self._reply((yield FinishDay()), _DayLedger)
        run.heard(end.ledger.events[run.read:])  # after the last ordinal: told the next day
        self._record(self._reply((yield CollectLate(end=True)), _Late))
        yield Finished(run.result(end.ledger, end.engine_ticks, end.carry))

    def _record(self, late: _Late) -> None:
        for record in late.records:
            if isinstance(record, LateReply):
                self.run.record_late(record)
            else:
                self.run.record_abandoned(record)


__all__ = [
    "Arm",
    "RunAuthoring",
    "CollectLate",
    "DayDriver",
    "DayRun",
    "FinishDay",
    "Finished",
    "ReadAccount",
    "RunTicks",
    "Step",
    "advance",
    "apply_turn",
    "new_engine",
]

"""`SessionHost`: one actor owning many sessions at once, each a driver + engine + agent.

The host keeps every session's record (its event log, the request waiting for an external
agent, its result) and serializes what touches them: starting, submitting a reply, status,
result, close, and the events the sessions emit. Each session runs in a child `SessionActor`
on its own actor system (`kestrel.service.host.run`), so sessions are isolated; the host only moves
messages. Expected refusals (an unknown or finished session, a reply nobody waits for) are
answered with `Refused(reason)`, never raised, so the host is never restarted by its own
callers' mistakes; its state lives in a `HostState` its factory shares, so even a restart
after a bug keeps every session.

Every event is numbered (`seq`, from 1 per session), appended to the session's log, then
published on the host system's bus topic `session.<id>`; `HostClient` (kestrel.service.host.client)
subscribes there to wait for the next request or the end of a run, and to follow a run.
`observer`, when given, is awaited by each session for each event BEFORE the host sees it
(the daemon commits there: nothing is acknowledged that is not stored).

Sessions a client starts belong to it: `owner` names the client identity (an MCP client's
credential, its transport session), and every later message naming the session must carry the
same owner, else it is answered exactly like an unknown session (nothing says it exists).
Session ids carry 128 random bits. Client sessions are bounded (`ServiceLimits`): open ones per
owner and in all, and the text their logs keep (past `max_log_bytes`, an answered request or an
evidence record keeps its place in the log but not its text); sessions without an owner (the
daemon's runs, in-process agents) count against neither.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from kestrel_actors import Actor, ActorRef, ActorStopped, Stop
from kestrel_actors.errors import describe
from kestrel.service.actors.feed import Pace
from kestrel.service.host.events import (
    EvidenceEvent,
    HostedRequest,
    PortfolioTurnEvent,
    RequestEvent,
    RunEnded,
    SessionEvent,
    TurnEvent,
)
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits
from kestrel.service.host.port import PortRefused, ReplyPort
from kestrel.service.host.run import ExternalAgent, run_hosted
from kestrel.service.host.blind_requests import BlindRequests
from kestrel.service.host.universe import UniverseRun, run_hosted_universe, universe_capture, universe_summary
from kestrel.logs import get_logger
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S
from kestrel.session.capture import CapturedTurn
from kestrel.session.portfolio import CapturedPortfolioTurn, PortfolioResult
from kestrel.session.protocol import Agent, AgentReply, Usage
from kestrel.session.runner import SessionResult
from kestrel.session.spec import ResolvedRun, estimate_usage

Observer = Callable[[str, SessionEvent], Awaitable[None]]
DEFAULT_ABANDON_AFTER_S = 600.0
KEEP_FINISHED = DEFAULT_LIMITS.keep_finished
"""Finished sessions kept (oldest forgotten first) until their client closes them."""
DROPPED = "(dropped from the session log: over its text budget)"

STATES = ("waiting", "running", "done", "closed", "failed")


def topic(session_id: str) -> str:
    """The host bus topic a session's numbered events are published on."""
    return f"session.{session_id}"


# ------------------------------------------------------------------------------------------
# messages


class StartSession(msgspec.Struct, frozen=True, tag="host_start"):
    """Start `run` with `agent` (in process) or, when None, an external agent whose replies
    arrive by `Submit`. `committed` turns are re-applied without asking the agent (resume);
    `pace` releases the ticks by the wall clock (`kestrel.service.actors.feed.Pace`); `session_id`, when
    given, names the session (a store keying its records by it sees every event under it);
    `agent_timeout`, when given, bounds each agent call of this session instead of the host's
    default."""

    run: ResolvedRun | UniverseRun
    agent: Any = None
    agent_id: str = "external"
    model: str = ""
    committed: list[CapturedTurn | CapturedPortfolioTurn] = []
    pace: Pace | None = None
    session_id: str | None = None
    agent_timeout: float | None = None
    owner: str | None = None


class Submit(msgspec.Struct, frozen=True, tag="host_submit"):
    """An external agent's raw reply; token counts it did not report are estimated."""

    session_id: str
    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    owner: str | None = None


class Status(msgspec.Struct, frozen=True, tag="host_status"):
    session_id: str
    owner: str | None = None


class Result(msgspec.Struct, frozen=True, tag="host_result"):
    session_id: str
    owner: str | None = None


class UniverseCapture(msgspec.Struct, frozen=True, tag="host_universe_capture"):
    """A finished universe session's capture file (`universe_capture`: its universe, news file
    and ledger checksum in the header), or Refused."""

    session_id: str
    owner: str | None = None


class Close(msgspec.Struct, frozen=True, tag="host_close"):
    session_id: str
    owner: str | None = None


class ListSessions(msgspec.Struct, frozen=True, tag="host_list"):
    pass


class Backlog(msgspec.Struct, frozen=True, tag="host_backlog"):
    """The session's events with seq > `after` (for following a run without a gap)."""

    session_id: str
    after: int = 0
    owner: str | None = None


class LatestOutcome(msgspec.Struct, frozen=True, tag="host_outcome"):
    """The newest request or end event with seq > `after`, or None."""

    session_id: str
    after: int = 0
    owner: str | None = None


class Emitted(msgspec.Struct, frozen=True, tag="host_emitted"):
    session_id: str
    event: SessionEvent


class SessionFinished(msgspec.Struct, frozen=True, tag="host_finished"):
    session_id: str
    state: str
    reason: str | None = None
    result: Any = None


HostMessage = (
    StartSession | Submit | Status | Result | UniverseCapture | Close | ListSessions | Backlog | LatestOutcome
    | Emitted | SessionFinished
)

# ------------------------------------------------------------------------------------------
# replies


class Refused(msgspec.Struct, frozen=True):
    reason: str


class Opened(msgspec.Struct, frozen=True):
    session_id: str


class Accepted(msgspec.Struct, frozen=True):
    seq: int
    usage: Usage


class SessionStatus(msgspec.Struct, frozen=True):
    session_id: str
    state: str
    agent: str
    data: str
    symbol: str
    dates: list[str]
    schedule: list[str]
    turns: int
    events: int
    pending: HostedRequest | None = None
    reason: str | None = None


class Closed(msgspec.Struct, frozen=True):
    session_id: str
    state: str


# ------------------------------------------------------------------------------------------
# state


def shown_requests(run: ResolvedRun | UniverseRun) -> BlindRequests | None:
    """A blind run's asks as its agent reads them (None unless the run is blind): the run's
    one `Blind` (a universe's `UniverseRun.blind`) and its session dates' blind labels."""
    if isinstance(run, UniverseRun):
        return None if run.blind is None else BlindRequests.of(run.blind, run.sessions)
    if not run.options.blind:
        return None
    from kestrel.session.blind import blind_of

    return BlindRequests.of(blind_of(run.data), [d.session for d in run.schedule])


@dataclass
class HostedSession:
    session_id: str
    run: ResolvedRun | UniverseRun
    agent_id: str
    port: ReplyPort | None
    ref: ActorRef[Any] | None = None
    state: str = "running"
    reason: str | None = None
    log: list[SessionEvent] = field(default_factory=list)
    pending: HostedRequest | None = None
    turns: int = 0
    result: SessionResult | PortfolioResult | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    owner: str | None = None
    log_bytes: int = 0
    """Text (briefings, repair errors, evidence texts) the log holds; bounded for clients."""
    compacted: int = 0
    """Log entries before this index have given up their text."""
    shown: BlindRequests | None = None
    """A blind run's asks, status and dates as its agent reads them (`shown_requests`)."""

    def _shown(self, symbols: Sequence[str]) -> list[str]:
        """`symbols` as the agent reads them: in blind mode their aliases, in alias order."""
        if self.shown is None:
            return list(symbols)
        blind = self.shown.blind
        return [blind.alias(s) for s in blind.shown_order(symbols)]

    def _days(self, dates: Sequence[str]) -> list[str]:
        """The session dates as the agent reads them: in blind mode their session numbers."""
        return list(dates) if self.shown is None else [self.shown.days.get(d, "") for d in dates]

    def status(self) -> SessionStatus:
        """The session's state; in blind mode its symbols and dates as the agent reads them."""
        if isinstance(self.run, UniverseRun):
            run = self.run
            return SessionStatus(session_id=self.session_id, state=self.state, agent=self.agent_id,
                                 data=run.options.data_name, symbol=",".join(self._shown(run.universe.symbols)),
                                 dates=self._days([d.date.isoformat() for d in run.sessions]), schedule=run.schedule,
                                 turns=self.turns, events=len(self.log), pending=self.pending, reason=self.reason)
        header_dates = [d.date for d in self.run.schedule]
        schedule = [o.label for o in self.run.schedule[0].ordinals] if self.run.schedule else []
        return SessionStatus(
            session_id=self.session_id,
            state=self.state,
            agent=self.agent_id,
            data=self.run.options.data_name,
            symbol=",".join(self._shown([self.run.data.symbol])),
            dates=self._days(header_dates),
            schedule=schedule,
            turns=self.turns,
            events=len(self.log),
            pending=self.pending,
            reason=self.reason,
        )


@dataclass
class HostState:
    """Everything the host owns; shared with a restarted instance (see the module docstring)."""

    abandon_after: float = DEFAULT_ABANDON_AFTER_S
    observer: Observer | None = None
    keep_finished: int = KEEP_FINISHED
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S
    """Per call of a blocking in-process agent (a model adapter); see `kestrel.session.calls`."""
    sessions: dict[str, HostedSession] = field(default_factory=dict)
    limits: ServiceLimits = DEFAULT_LIMITS


def new_session_id() -> str:
    """`s` and 32 hex digits: 128 random bits (no counter, nothing to guess from)."""
    return f"s{secrets.token_hex(16)}"


OPEN_STATES = ("waiting", "running")


def _text_bytes(event: SessionEvent) -> int:
    if isinstance(event, RequestEvent):
        r = event.request
        return len(r.briefing) + len(r.repair_error or "")
    if isinstance(event, EvidenceEvent):
        return len(event.record.text or "") + len(event.record.view or "") + len(event.record.error or "")
    return 0


def _without_text(event: SessionEvent) -> SessionEvent:
    """`event` keeping its place and numbers in the log, not its text."""
    if isinstance(event, RequestEvent):
        r = event.request
        return msgspec.structs.replace(event, request=msgspec.structs.replace(
            r, briefing=DROPPED, repair_error=None if r.repair_error is None else DROPPED))
    if isinstance(event, EvidenceEvent):
        rec = event.record
        return msgspec.structs.replace(event, record=msgspec.structs.replace(
            rec, text=None if rec.text is None else DROPPED, view=None if rec.view is None else DROPPED,
            error=None if rec.error is None else DROPPED))
    return event


# ------------------------------------------------------------------------------------------
# actors


class RunHosted(msgspec.Struct, frozen=True, tag="run_hosted"):
    pass


class SessionActor(Actor[RunHosted]):
    """Runs one session to its end and reports it to the host (`SessionFinished`)."""

    def __init__(self, host: ActorRef[Any], session: HostedSession, agent: Agent | None,
                 identity: Agent, committed: list[CapturedTurn | CapturedPortfolioTurn], observer: Observer | None,
                 agent_timeout: float, pace: Pace | None = None) -> None:
        self._host = host
        self._session = session
        self._agent = agent
        self._identity = identity
        self._committed = committed
        self._observer = observer
        self._timeout = agent_timeout
        self._pace = pace

    async def _emit(self, event: SessionEvent) -> None:
        if self._observer is not None:
            await self._observer(self._session.session_id, event)
        await self._host.tell(Emitted(self._session.session_id, event))

    async def _report(self, finished: SessionFinished) -> None:
        try:
            await self._host.tell(finished)
        except ActorStopped:  # the host is shutting down: nobody is left to tell
            pass

    async def _run(self, s: HostedSession, source: Agent | ReplyPort) -> SessionFinished:
        if isinstance(s.run, UniverseRun):
            prefix = [t for t in self._committed if isinstance(t, CapturedPortfolioTurn)]
            done = await run_hosted_universe(s.run, source, self._identity, self._emit, agent_timeout=self._timeout,
                                             committed=prefix)
            return SessionFinished(s.session_id, "done", None, done)
        turns = [t for t in self._committed if isinstance(t, CapturedTurn)]
        shown = s.shown if isinstance(source, ReplyPort) else None  # a client reads the blind asks
        result = await run_hosted(s.run, source, self._identity, self._emit, committed=turns,
                                  agent_timeout=self._timeout, pace=self._pace, shown=shown)
        failure = result.failure  # the agent could not work (kestrel.session.failure)
        return (SessionFinished(s.session_id, "done", None, result) if failure is None
                else SessionFinished(s.session_id, "failed", failure.line(), result))

    async def receive(self, message: RunHosted) -> None:
        s = self._session
        source: Agent | ReplyPort = self._agent if self._agent is not None else s.port  # type: ignore[assignment]
        finished = SessionFinished(s.session_id, "closed", "closed before the run ended")
        with s.scope:
            try:
                finished = await self._run(s, source)
            except Exception as exc:  # a session's failure ends that session only
                get_logger("kestrel.host").error("session.failed", session=s.session_id, error=describe(exc))
                finished = SessionFinished(s.session_id, "failed", describe(exc))
            finally:
                if s.port is not None:
                    s.port.release()
        await self._report(finished)
        self.ctx.stop()


class SessionHost(Actor[HostMessage]):
    def __init__(self, state: HostState) -> None:
        self.state = state

    def _get(self, session_id: str, owner: str | None = None) -> HostedSession | Refused:
        s = self.state.sessions.get(session_id)
        if s is None or (s.owner is not None and s.owner != owner):  # another's: as if unknown
            shown = session_id if len(session_id) <= 40 and session_id.isprintable() else repr(session_id[:40]) + "..."
            return Refused(f"unknown session {shown!r} (start one with session_start; closed sessions are gone)")
        return s

    async def receive(self, message: HostMessage) -> object:
        if isinstance(message, Emitted):
            await self._record(message.session_id, message.event)
            return None
        if isinstance(message, SessionFinished):
            await self._finish(message)
            return None
        if isinstance(message, StartSession):
            return self._start(message)
        if isinstance(message, ListSessions):
            return [s.status() for s in self.state.sessions.values()]
        s = self._get(message.session_id, message.owner)
        if isinstance(s, Refused):
            return s
        if isinstance(message, Submit):
            return self._submit(s, message)
        if isinstance(message, Status):
            return s.status()
        if isinstance(message, Backlog):
            return [e for e in s.log if e.seq > message.after]
        if isinstance(message, LatestOutcome):
            for e in reversed(s.log):
                if e.seq <= message.after:
                    break
                if isinstance(e, RequestEvent | RunEnded):
                    return e
            return None
        if isinstance(message, UniverseCapture):
            if not isinstance(s.run, UniverseRun) or not isinstance(s.result, PortfolioResult):
                return Refused(f"session {s.session_id} has no universe capture: it ran one symbol or is not done")
            return universe_capture(s.run, s.result)
        if isinstance(message, Result):
            if s.result is None:
                return Refused(
                    f"session {s.session_id} is {s.state}: "
                    + ("submit replies until the run is done" if s.state in ("waiting", "running")
                       else f"it has no result ({s.reason})")
                )
            return s.result
        return await self._close(s)

    def _start(self, m: StartSession) -> Opened | Refused:
        st = self.state
        if m.owner is not None:
            lim = st.limits
            open_ = [v for v in st.sessions.values() if v.owner is not None and v.state in OPEN_STATES]
            mine = sum(1 for v in open_ if v.owner == m.owner)
            if mine >= lim.max_sessions_per_client:
                return Refused(f"you have {mine} sessions open, the most one client may: finish or "
                               "session_close one first")
            if len(open_) >= lim.max_open_sessions:
                return Refused(f"the server has {len(open_)} sessions open, its limit: try again when one ends")
        sid = m.session_id or new_session_id()
        if sid in st.sessions:
            return Refused(f"session id {sid!r} is already in use")
        port = None if m.agent is not None else ReplyPort(st.abandon_after)
        identity: Agent = m.agent if m.agent is not None else ExternalAgent(m.agent_id, m.model)
        s = HostedSession(sid, m.run, identity.agent_id, port, owner=m.owner, shown=shown_requests(m.run))
        st.sessions[sid] = s
        timeout = st.agent_timeout if m.agent_timeout is None else m.agent_timeout
        host = self.ctx.self_ref
        s.ref = self.ctx.spawn(
            lambda: SessionActor(host, s, m.agent, identity, list(m.committed), st.observer, timeout,
                                 m.pace),
            name=sid, policy=Stop(),
        )
        s.ref.tell_nowait(RunHosted())
        return Opened(sid)

    def _submit(self, s: HostedSession, m: Submit) -> Accepted | Refused:
        if s.port is None:
            return Refused(f"session {s.session_id} has an in-process agent ({s.agent_id}); it takes no replies")
        asked = s.port.waiting
        if s.state != "waiting" or asked is None:
            why = s.port.ended or f"the session is {s.state}"
            return Refused(f"session {s.session_id} is not waiting for a reply: {why}")
        estimate = estimate_usage(asked, m.text)
        usage = Usage(
            input=estimate.input if m.input_tokens is None else m.input_tokens,
            output=estimate.output if m.output_tokens is None else m.output_tokens,
        )
        try:
            s.port.offer(AgentReply(m.text, usage))
        except PortRefused as exc:
            return Refused(f"session {s.session_id}: {exc}")
        s.state, s.pending = "running", None
        return Accepted(len(s.log), usage)

    async def _record(self, session_id: str, event: SessionEvent) -> None:
        s = self.state.sessions.get(session_id)
        if s is None:  # closed meanwhile: its events go nowhere
            return
        event = msgspec.structs.replace(event, seq=len(s.log) + 1)
        if s.owner is not None:
            self._bound_log(s)
            s.log_bytes += _text_bytes(event)
        s.log.append(event)
        if isinstance(event, RequestEvent) and s.port is not None:
            s.state, s.pending = "waiting", event.request
        elif s.state == "waiting":  # the request was answered another way (abandoned, closed)
            s.state, s.pending = "running", None
        if isinstance(event, TurnEvent | PortfolioTurnEvent):
            s.turns += 1
        await self.ctx.system.bus.publish(topic(session_id), event)

    def _bound_log(self, s: HostedSession) -> None:
        """Past the log's text budget, the entries already answered (all but the newest) give
        up their text, oldest first, until the log is within budget again."""
        budget = self.state.limits.max_log_bytes
        while s.log_bytes > budget and s.compacted < len(s.log):
            e = s.log[s.compacted]
            s.log_bytes -= _text_bytes(e)
            s.log[s.compacted] = _without_text(e)
            s.compacted += 1

    async def _finish(self, m: SessionFinished) -> None:
        from kestrel.report.summary import summary

        s = self.state.sessions.get(m.session_id)
        if s is None:
            return
        s.result = m.result
        if s.state != "closed":
            s.state, s.reason = m.state, m.reason
        s.pending = None
        if s.port is not None and s.port.ended is not None and s.state == "done":
            s.reason = s.port.ended
        doc: dict[str, Any] | None
        if isinstance(m.result, PortfolioResult):
            doc = universe_summary(m.result)
        else:
            doc = summary(m.result, s.run.data) if m.result is not None and isinstance(s.run, ResolvedRun) else None
        await self._record(s.session_id, RunEnded(s.state, s.reason, doc))
        sessions = self.state.sessions
        if s.owner is not None:  # a client's own finished sessions go first: no client evicts another's
            keep = 2 * self.state.limits.max_sessions_per_client
            mine = [k for k, v in sessions.items() if v.owner == s.owner and v.state not in OPEN_STATES]
            for k in mine[: max(0, len(mine) - keep)]:
                del sessions[k]
        finished = [k for k, v in sessions.items() if v.state not in OPEN_STATES]
        for k in finished[: max(0, len(finished) - self.state.keep_finished)]:
            del sessions[k]

    async def _close(self, s: HostedSession) -> Closed:
        state = s.state
        if state in ("waiting", "running"):
            s.state, s.reason = "closed", "closed by the client"
            if s.port is not None:
                s.port.close("session closed by the client")
            s.scope.cancel()
        del self.state.sessions[s.session_id]
        await self.ctx.system.bus.publish(topic(s.session_id), RunEnded("closed", "closed by the client"))
        return Closed(s.session_id, state)


__all__ = [
    "DEFAULT_ABANDON_AFTER_S",
    "KEEP_FINISHED",
    "Accepted",
    "Backlog",
    "Close",
    "Closed",
    "Emitted",
    "SessionFinished",
    "HostMessage",
    "HostState",
    "HostedSession",
    "LatestOutcome",
    "ListSessions",
    "Observer",
    "OPEN_STATES",
    "Opened",
    "Refused",
    "Result",
    "UniverseCapture",
    "SessionActor",
    "SessionHost",
    "SessionStatus",
    "StartSession",
    "Status",
    "Submit",
    "new_session_id",
    "topic",
]

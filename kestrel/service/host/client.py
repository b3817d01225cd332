"""`HostClient`: the async API the transports (MCP server, daemon) use over a `SessionHost`.

    async with open_host(abandon_after=600) as host:
        started = await host.start(RunSpec(checkpoints=("11:00",)))       # external agent
        outcome = started.outcome                                           # RequestEvent
        while isinstance(outcome, RequestEvent):
            outcome = await host.submit(started.session_id, "PASS")
        result = await host.result(started.session_id)                      # SessionResult

Every refusal is a `HostError` with a one-line reason. Specs are resolved by the caller, never
in the host actor, and data is loaded on a worker thread, so a large file never stalls the
other sessions; loaded data is cached by name and file modification time.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec

from kestrel_actors import ActorRef, ActorSystem, SlowPolicy, StreamSubscription
from kestrel.service.actors.feed import Pace
from kestrel.service.host.events import RequestEvent, RunEnded, SessionEvent
from kestrel.service.host.host import (
    DEFAULT_ABANDON_AFTER_S,
    KEEP_FINISHED,
    Accepted,
    Backlog,
    Close,
    Closed,
    HostState,
    LatestOutcome,
    ListSessions,
    Observer,
    Opened,
    Refused,
    Result,
    SessionHost,
    SessionStatus,
    StartSession,
    Status,
    Submit,
    topic,
)
from kestrel.market import MarketData
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S
from kestrel.session.capture import CapturedTurn
from kestrel.session.protocol import Agent
from kestrel.session.runner import SessionResult
from kestrel.session.spec import ResolvedRun, RunSpec, data_name, load_named, resolve_run

Outcome = RequestEvent | RunEnded


class HostError(ValueError):
    """A host refusal (unknown or finished session, no request waiting, a bad spec, ...)."""


class Started(msgspec.Struct, frozen=True):
    session_id: str
    outcome: Any  # RequestEvent | RunEnded


class DataCache:
    """Loaded market data by canonical name (and file mtime), the newest `size` kept."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, float], MarketData] = OrderedDict()

    def key(self, name: str) -> tuple[str, float]:
        head = name.split("|", 1)[0]
        try:
            mtime = 0.0 if head == "sample" else os.stat(head).st_mtime
        except OSError:
            mtime = -1.0
        return name, mtime

    def get(self, name: str) -> MarketData | None:
        k = self.key(name)
        data = self._items.get(k)
        if data is not None:
            self._items.move_to_end(k)
        return data

    def put(self, name: str, data: MarketData) -> None:
        self._items[self.key(name)] = data
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    async def load(self, name: str) -> MarketData:
        data = self.get(name)
        if data is None:
            data = await anyio.to_thread.run_sync(load_named, name)
            self.put(name, data)
        return data


class HostClient:
    def __init__(self, system: ActorSystem, ref: ActorRef[Any]) -> None:
        self.system = system
        self.ref = ref
        self.data = DataCache()

    async def _ask(self, message: object) -> Any:
        reply = await self.ref.ask(message, timeout=None)
        if isinstance(reply, Refused):
            raise HostError(reply.reason)
        return reply

    async def resolve(self, spec: RunSpec) -> ResolvedRun:
        """`spec` resolved (raises `SpecError`): data not yet cached is loaded on a worker
        thread; the rest (options, schedule: binary searches on the loaded ticks) is cheap."""
        data = await self.data.load(data_name(spec.data))
        return resolve_run(spec, data)

    async def start(
        self,
        spec: RunSpec | ResolvedRun,
        agent: Agent | None = None,
        *,
        agent_id: str = "external",
        model: str = "",
        committed: list[CapturedTurn] | None = None,
        pace: Pace | None = None,
        session_id: str | None = None,
        agent_timeout: float | None = None,
    ) -> Started:
        """Start a session; with no `agent` the caller is the agent (answer with `submit`).
        Returns at the first request or, when nothing is asked, at the end of the run.
        `committed` turns are re-applied without asking the agent (resume); `pace` has the
        feed release ticks by the wall clock (`kestrel.service.actors.feed.Pace`, same ledger); `session_id`
        names the session (refused when in use); `agent_timeout` bounds each agent call
        (default: the host's)."""
        run = spec if isinstance(spec, ResolvedRun) else await self.resolve(spec)
        opened: Opened = await self._ask(
            StartSession(run, agent, agent_id, model, list(committed or []), pace, session_id, agent_timeout)
        )
        return Started(opened.session_id, await self.next_outcome(opened.session_id, 0))

    async def submit(self, session_id: str, text: str, input_tokens: int | None = None,
                     output_tokens: int | None = None) -> Outcome:
        """Answer the waiting request; returns the next request or the end of the run."""
        accepted: Accepted = await self._ask(Submit(session_id, text, input_tokens, output_tokens))
        return await self.next_outcome(session_id, accepted.seq)

    async def next_outcome(self, session_id: str, after: int) -> Outcome:
        """The first request or end event numbered after `after` (waits for it)."""
        stream: StreamSubscription = self.system.bus.subscribe_stream(
            topic(session_id), policy=SlowPolicy.DROP_OLDEST, capacity=8
        )
        try:
            found = await self._ask(LatestOutcome(session_id, after))
            if found is not None:
                return found  # type: ignore[no-any-return]
            async for event in stream:
                if isinstance(event, RequestEvent | RunEnded) and event.seq > after:
                    return event
                if isinstance(event, RunEnded):  # closed: published unnumbered
                    return event
        finally:
            self.system.bus.unsubscribe(stream)
        raise HostError(f"session {session_id}: the host stopped before the session answered")

    async def run(self, spec: RunSpec | ResolvedRun, agent: Agent) -> SessionResult:
        """Run `spec` with an in-process agent to its end; returns its result."""
        started = await self.start(spec, agent, agent_id=agent.agent_id)
        outcome = started.outcome
        while not isinstance(outcome, RunEnded):
            outcome = await self.next_outcome(started.session_id, outcome.seq)
        return await self.result(started.session_id)

    async def status(self, session_id: str) -> SessionStatus:
        return await self._ask(Status(session_id))  # type: ignore[no-any-return]

    async def sessions(self) -> list[SessionStatus]:
        return await self._ask(ListSessions())  # type: ignore[no-any-return]

    async def result(self, session_id: str) -> SessionResult:
        return await self._ask(Result(session_id))  # type: ignore[no-any-return]

    async def close(self, session_id: str) -> Closed:
        return await self._ask(Close(session_id))  # type: ignore[no-any-return]

    async def follow(self, session_id: str, after: int = 0) -> AsyncIterator[SessionEvent]:
        """Every event numbered after `after`, in order, as it happens, to the end of the run
        (a slow follower loses nothing: a gap is refilled from the host's log)."""
        stream = self.system.bus.subscribe_stream(
            topic(session_id), policy=SlowPolicy.DROP_OLDEST, capacity=256
        )
        try:
            last = after
            while True:
                backlog: list[SessionEvent] = await self._ask(Backlog(session_id, last))
                for event in backlog:
                    last = event.seq
                    yield event
                    if isinstance(event, RunEnded):
                        return
                async for event in stream:
                    if event.seq == 0:  # the close of the session: nothing follows
                        yield event
                        return
                    if event.seq <= last:
                        continue
                    if event.seq != last + 1:
                        break  # a gap (or an unnumbered close): refill from the log
                    last = event.seq
                    yield event
                    if isinstance(event, RunEnded):
                        return
                else:
                    return
        finally:
            self.system.bus.unsubscribe(stream)


@asynccontextmanager
async def open_host(
    *,
    abandon_after: float = DEFAULT_ABANDON_AFTER_S,
    observer: Observer | None = None,
    keep_finished: int = KEEP_FINISHED,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S,
) -> AsyncIterator[HostClient]:
    """A running session host on its own actor system; leaving the block ends every session.
    `abandon_after`: seconds an external agent may leave a request unanswered; `observer`: see
    `kestrel.service.host.host`; `keep_finished`: finished sessions kept until closed (oldest go first);
    `agent_timeout`: seconds per call of a blocking in-process agent (a model adapter)."""
    state = HostState(abandon_after=abandon_after, observer=observer, keep_finished=keep_finished,
                      agent_timeout=agent_timeout)
    async with ActorSystem() as system:
        ref = system.spawn(lambda: SessionHost(state), name="host")
        yield HostClient(system, ref)
        for s in list(state.sessions.values()):
            s.scope.cancel()


__all__ = ["DataCache", "HostClient", "HostError", "Outcome", "Started", "open_host"]

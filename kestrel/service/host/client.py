"""`HostClient`: the async API the transports (MCP server, daemon) use over a `SessionHost`.

    async with open_host(abandon_after=600) as host:
        started = await host.start(RunSpec(checkpoints=("11:00",)))       # external agent
        outcome = started.outcome                                           # RequestEvent
        while isinstance(outcome, RequestEvent):
            outcome = await host.submit(started.session_id, "PASS")
        result = await host.result(started.session_id)                      # SessionResult

Every refusal is a `HostError` with a one-line reason. Specs are resolved by the caller, never
in the host actor; data is loaded and resolved on the host's own load pool (threads of its own,
bounded: `kestrel.service.host.pool`), with the readers' bounds of `limits`, so a large file, a
file that blocks or a flood of loads never stalls the other sessions. Loaded data is cached by
the file's identity (device, inode, size, modification and change times) and checked against
the SHA-256 of the bytes it was loaded from each time it is used: a file rewritten in place,
even with its modification time kept, is loaded again, and the checksum a capture records is
always that of the data the run used.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from kestrel_actors import ActorRef, ActorSystem, SlowPolicy, StreamSubscription
from kestrel.service.actors.feed import Pace
from kestrel.service.host.events import RequestEvent, RunEnded, SessionEvent
from kestrel.service.host.host import (
    DEFAULT_ABANDON_AFTER_S,
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
    UniverseCapture,
    Submit,
    topic,
)
from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits
from kestrel.service.host.pool import Budget, PoolBusy, WorkPool
from kestrel.service.host.universe import UniverseRun, UniverseSpec, resolve_universe
from kestrel.data.readers import bounded_reads
from kestrel.market import MarketData
from kestrel.session.calls import DEFAULT_AGENT_TIMEOUT_S
from kestrel.session.capture import CapturedTurn
from kestrel.session.portfolio import CapturedPortfolioTurn, PortfolioResult
from kestrel.session.protocol import Agent
from kestrel.session.runner import SessionResult
from kestrel.session.spec import ResolvedRun, RunSpec, SpecError, data_name, load_named, resolve_run

Outcome = RequestEvent | RunEnded
FileIdentity = tuple[int, int, int, int, int]


class HostError(ValueError):
    """A host refusal (unknown or finished session, no request waiting, a bad spec, ...)."""


class Started(msgspec.Struct, frozen=True):
    session_id: str
    outcome: Any  # RequestEvent | RunEnded


def file_identity(path: str) -> FileIdentity | None:
    """(device, inode, size, mtime_ns, ctime_ns) of `path`, None when it cannot be read. The
    change time moves whenever the file is written, even when its modification time is set
    back."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclass(frozen=True)
class Cached:
    data: MarketData
    identity: FileIdentity | None
    sha256: str | None  # of the bytes the data was loaded from (None: the sample)


def _head(name: str) -> str:
    return name.split("|", 1)[0]


class DataCache:
    """Loaded market data by canonical name, each entry pinned to its file's identity and the
    SHA-256 of the bytes it was loaded from; the newest `size` kept."""

    def __init__(self, size: int = 4, limits: ServiceLimits = DEFAULT_LIMITS, pool: WorkPool | None = None) -> None:
        self._size = size
        self.limits = limits
        self.pool = pool or WorkPool("data loads", limits.load_workers, wait_seconds=limits.load_seconds)
        self._items: OrderedDict[str, Cached] = OrderedDict()
        self.loads = 0
        """Files loaded (not answered from the cache) since the start: for tests and figures."""

    def get(self, name: str) -> Cached | None:
        hit = self._items.get(name)
        if hit is None:
            return None
        if _head(name) != "sample" and file_identity(_head(name)) != hit.identity:
            del self._items[name]  # the file changed (or went): load it again
            return None
        self._items.move_to_end(name)
        return hit

    def put(self, name: str, entry: Cached) -> None:
        self._items[name] = entry
        self._items.move_to_end(name)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def forget(self, name: str) -> None:
        self._items.pop(name, None)

    def _load(self, name: str, budget: Budget) -> Cached:
        """On a load thread: the data and the checksum of the very bytes it came from (the file
        is hashed before and after; one that changes while loading is refused)."""
        from kestrel.data.source import file_sha256

        with bounded_reads(self.limits.reads()):
            if _head(name) == "sample":
                return Cached(load_named(name), None, None)
            head = _head(name)
            before = file_identity(head)
            try:
                digest = file_sha256(head) if before is not None else None
            except OSError:
                digest = None
            data = load_named(name)
            if file_identity(head) != before:
                raise SpecError(f"{head}: the file changed while it was loaded: try again once it is written")
            return Cached(data, before, digest)

    async def entry(self, name: str) -> Cached:
        hit = self.get(name)
        if hit is None:
            self.loads += 1
            with anyio.fail_after(self.limits.load_seconds):
                hit = await self.pool.run(lambda b: self._load(name, b))
            self.put(name, hit)
        return hit

    async def load(self, name: str) -> MarketData:
        return (await self.entry(name)).data

    async def resolve(self, spec: RunSpec) -> ResolvedRun:
        """`spec` resolved on the load pool (raises `SpecError`): its data from the cache when
        the file is the one cached, the checksum the run records checked against the bytes the
        data came from (a mismatch loads the file again)."""
        name = data_name(spec.data)
        for _ in range(2):
            hit = await self.entry(name)
            with anyio.fail_after(self.limits.load_seconds):
                run = await self.pool.run(lambda b: self._resolve(spec, hit))
            recorded = run.options.source.sha256 if run.options.source is not None else None
            if hit.sha256 is None or recorded == hit.sha256:
                return run
            self.forget(name)  # the bytes changed under the same identity: load them again
        raise SpecError(f"{_head(name)}: the file keeps changing while it is loaded: try again once it is written")

    def _resolve(self, spec: RunSpec, hit: Cached) -> ResolvedRun:
        with bounded_reads(self.limits.reads()):
            return resolve_run(spec, hit.data)


def _resolve_universe(spec: UniverseSpec, limits: ServiceLimits) -> UniverseRun:
    with bounded_reads(limits.reads()):
        return resolve_universe(spec)


class HostClient:
    def __init__(self, system: ActorSystem, ref: ActorRef[Any], limits: ServiceLimits = DEFAULT_LIMITS) -> None:
        self.system = system
        self.ref = ref
        self.limits = limits
        self.data = DataCache(limits.cached_data, limits)
        self.compute = WorkPool("computations", limits.compute_workers, wait_seconds=limits.call_seconds)

    async def _ask(self, message: object) -> Any:
        reply = await self.ref.ask(message, timeout=None)
        if isinstance(reply, Refused):
            raise HostError(reply.reason)
        return reply

    async def resolve(self, spec: RunSpec) -> ResolvedRun:
        """`spec` resolved (raises `SpecError`, or `HostError` when the load pool stays busy):
        see `DataCache.resolve`."""
        try:
            return await self.data.resolve(spec)
        except PoolBusy as exc:
            raise HostError(str(exc)) from None
        except TimeoutError:
            raise HostError(f"loading the data took over {self.limits.load_seconds:g} s: try a smaller file") from None

    async def start(
        self,
        spec: RunSpec | ResolvedRun | UniverseRun,
        agent: Agent | None = None,
        *,
        agent_id: str = "external",
        model: str = "",
        committed: Sequence[CapturedTurn | CapturedPortfolioTurn] | None = None,
        pace: Pace | None = None,
        session_id: str | None = None,
        agent_timeout: float | None = None,
        owner: str | None = None,
    ) -> Started:
        """Start a session; with no `agent` the caller is the agent (answer with `submit`).
        Returns at the first request or, when nothing is asked, at the end of the run.
        `committed` turns are re-applied without asking the agent (resume); `pace` has the
        feed release ticks by the wall clock (`kestrel.service.actors.feed.Pace`, same ledger); `session_id`
        names the session (refused when in use); `agent_timeout` bounds each agent call
        (default: the host's); `owner` is the client identity the session belongs to (every
        later call naming it must give the same owner)."""
        sid = await self.open(spec, agent, agent_id=agent_id, model=model, committed=committed, pace=pace,
                              session_id=session_id, agent_timeout=agent_timeout, owner=owner)
        return Started(sid, await self.next_outcome(sid, 0, owner=owner))

    async def open(
        self,
        spec: RunSpec | ResolvedRun | UniverseRun,
        agent: Agent | None = None,
        *,
        agent_id: str = "external",
        model: str = "",
        committed: Sequence[CapturedTurn | CapturedPortfolioTurn] | None = None,
        pace: Pace | None = None,
        session_id: str | None = None,
        agent_timeout: float | None = None,
        owner: str | None = None,
    ) -> str:
        """`start` without waiting for the first request: the new session's id (a caller that
        may be cancelled learns the id first, so it can close what it started)."""
        run = spec if isinstance(spec, ResolvedRun | UniverseRun) else await self.resolve(spec)
        opened: Opened = await self._ask(
            StartSession(run, agent, agent_id, model, list(committed or []), pace, session_id, agent_timeout,
                         owner)
        )
        return opened.session_id

    async def submit(self, session_id: str, text: str, input_tokens: int | None = None,
                     output_tokens: int | None = None, *, owner: str | None = None) -> Outcome:
        """Answer the waiting request; returns the next request or the end of the run."""
        accepted: Accepted = await self._ask(Submit(session_id, text, input_tokens, output_tokens, owner))
        return await self.next_outcome(session_id, accepted.seq, owner=owner)

    async def next_outcome(self, session_id: str, after: int, *, owner: str | None = None) -> Outcome:
        """The first request or end event numbered after `after` (waits for it)."""
        stream: StreamSubscription = self.system.bus.subscribe_stream(
            topic(session_id), policy=SlowPolicy.DROP_OLDEST, capacity=8
        )
        try:
            found = await self._ask(LatestOutcome(session_id, after, owner))
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

    async def status(self, session_id: str, *, owner: str | None = None) -> SessionStatus:
        return await self._ask(Status(session_id, owner))  # type: ignore[no-any-return]

    async def sessions(self) -> list[SessionStatus]:
        return await self._ask(ListSessions())  # type: ignore[no-any-return]

    async def result(self, session_id: str, *, owner: str | None = None) -> SessionResult:
        """A finished single-symbol session's result (`HostError` for a universe session's:
        see `universe_result`)."""
        result = await self._ask(Result(session_id, owner))
        if not isinstance(result, SessionResult):
            raise HostError(f"session {session_id} ran a universe: read its result with universe_result")
        return result

    async def any_result(self, session_id: str, *, owner: str | None = None) -> SessionResult | PortfolioResult:
        """A finished session's result, of one symbol or of a universe."""
        return await self._ask(Result(session_id, owner))  # type: ignore[no-any-return]

    async def universe_result(self, session_id: str, *, owner: str | None = None) -> PortfolioResult:
        """A finished universe session's result (`HostError` for a single-symbol session's)."""
        result = await self._ask(Result(session_id, owner))
        if not isinstance(result, PortfolioResult):
            raise HostError(f"session {session_id} ran one symbol: read its result with result")
        return result

    async def universe_capture(self, session_id: str, *, owner: str | None = None) -> bytes:
        """A finished universe session's capture file (its universe source, news file and
        ledger checksum in the header: `kestrel replay` verifies it)."""
        return await self._ask(UniverseCapture(session_id, owner))  # type: ignore[no-any-return]

    async def resolve_universe(self, spec: UniverseSpec) -> UniverseRun:
        """`spec` resolved on the load pool (raises `SpecError`, or `HostError` when the pool
        stays busy or the load takes too long)."""
        limits = self.limits
        try:
            with anyio.fail_after(limits.load_seconds):
                return await self.data.pool.run(lambda b: _resolve_universe(spec, limits))
        except PoolBusy as exc:
            raise HostError(str(exc)) from None
        except TimeoutError:
            raise HostError(f"loading the universe took over {limits.load_seconds:g} s: try fewer symbols") from None

    async def close(self, session_id: str, *, owner: str | None = None) -> Closed:
        return await self._ask(Close(session_id, owner))  # type: ignore[no-any-return]

    async def follow(self, session_id: str, after: int = 0, *, owner: str | None = None) -> AsyncIterator[SessionEvent]:
        """Every event numbered after `after`, in order, as it happens, to the end of the run
        (a slow follower loses nothing: a gap is refilled from the host's log)."""
        stream = self.system.bus.subscribe_stream(
            topic(session_id), policy=SlowPolicy.DROP_OLDEST, capacity=256
        )
        try:
            last = after
            while True:
                backlog: list[SessionEvent] = await self._ask(Backlog(session_id, last, owner))
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
    keep_finished: int | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT_S,
    limits: ServiceLimits | None = None,
) -> AsyncIterator[HostClient]:
    """A running session host on its own actor system; leaving the block ends every session.
    `abandon_after`: seconds an external agent may leave a request unanswered; `observer`: see
    `kestrel.service.host.host`; `keep_finished`: finished sessions kept until closed (oldest go
    first; default: the limits'); `agent_timeout`: seconds per call of a blocking in-process
    agent (a model adapter); `limits`: the server's bounds (`ServiceLimits`; the daemon's runs
    are the owner's own and pass `unbounded_sessions()`)."""
    lim = limits or DEFAULT_LIMITS
    state = HostState(abandon_after=abandon_after, observer=observer,
                      keep_finished=lim.keep_finished if keep_finished is None else keep_finished,
                      agent_timeout=agent_timeout, limits=lim)
    async with ActorSystem() as system:
        ref = system.spawn(lambda: SessionHost(state), name="host")
        yield HostClient(system, ref, lim)
        for s in list(state.sessions.values()):
            s.scope.cancel()


__all__ = ["Cached", "DataCache", "HostClient", "HostError", "Outcome", "Started", "file_identity", "open_host"]

"""Isolated author calls: one agent call per request, a timed-out call abandoned, never queued.

Invariants:
- every call to a `blocking` agent runs on its own worker thread; the caller waits at most the
  timeout for it, then ABANDONS it: the call's outcome becomes `TimedOut` and the caller moves
  on at once (the next request starts its own call, whatever the abandoned one is doing);
- an abandoned call that finishes later is never used: its reply (or error) is a `LateReply`
  in the `LateReplies` box, which the session records as `late-reply` evidence;
- every abandoned call is recorded EXACTLY ONCE, and only at the end of the RUN is one given
  up on: a call that answers while the run goes on is a `late-reply` (whatever day it is);
  at the end of the run the runner waits for the calls still running, at most
  `late_grace(timeout)` seconds (`settle`), then `close`s the box: each call still running
  then is `abandoned` (its tokens and cost unknown), and its reply, if it ever comes, is
  dropped (never a second record). So a call's record depends only on whether it answered
  before the end of the run plus the grace, the same on every path;
- worker threads are daemon threads (`start_call`): an abandoned call never keeps the
  process alive after the run, on any path;
- a pure agent (`blocking = False`) is called inline: it cannot wait on I/O, so no timeout;
- an agent exception is a `Failed` outcome with `<type>: <text>` (fail-closed, never a plan),
  classed by `failure_kind`: "fatal" fails the run, "spending-cap" is a cap's refusal, any
  other exception an "error" (the ordinal stands down, the run goes on).

`call_agent` runs one call on a daemon thread and waits for it (the synchronous `run_session`
path); the actor shell (`kestrel.service.actors.agent`) starts the same daemon thread with `start_call` and
awaits the call's `on_done` signal, so both paths abandon, discard and record in the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal, get_args

import msgspec

from kestrel.session.protocol import Agent, AgentReply, AuthorRequest

DEFAULT_AGENT_TIMEOUT_S = 120.0


class Answered(msgspec.Struct, frozen=True, tag="answered"):
    reply: AgentReply


FailureKind = Literal["error", "fatal", "spending-cap"]
"""How an agent call failed: "error" (this call: the ordinal stands down, the run goes on),
"fatal" (the run cannot succeed as configured: a refused key, an unknown model; the run
fails), "spending-cap" (a spending cap refused the call before it was made: a stand-down)."""
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)


def failure_kind(exc: BaseException) -> FailureKind:
    """The kind an exception declares in its class attribute `failure_kind` (the model
    adapter's errors do), else "error"."""
    declared = getattr(exc, "failure_kind", "error")
    for kind in FAILURE_KINDS:
        if declared == kind:
            return kind
    return "error"


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    """The agent raised; `error` is `<exception type>: <text>`, `kind` its `failure_kind`."""

    error: str
    kind: FailureKind = "error"


class TimedOut(msgspec.Struct, frozen=True, tag="timed_out"):
    """The call did not answer within `timeout` seconds and was abandoned."""

    timeout: float

    @property
    def error(self) -> str:
        return f"timed out after {self.timeout:g}s"

    @property
    def kind(self) -> FailureKind:
        return "error"


CallOutcome = Answered | Failed | TimedOut


class LateReply(msgspec.Struct, frozen=True):
    """What an abandoned call produced once it finished (discarded; evidence only)."""

    ordinal: str
    iteration: int
    timeout: float
    elapsed_ms: float
    reply: AgentReply | None = None
    error: str | None = None
    date: str | None = None


LATE_GRACE_CAP_S = 10.0
"""The longest wait for abandoned calls at the end of a run."""


def late_grace(timeout: float | None) -> float:
    """How long the end of a run waits for abandoned calls: the agent timeout, capped."""
    return 0.0 if timeout is None else min(timeout, LATE_GRACE_CAP_S)


class Abandoned(msgspec.Struct, frozen=True):
    """An abandoned call that had not answered when the run's wait for it ended."""

    ordinal: str
    iteration: int
    timeout: float
    date: str | None = None


class LateReplies:
    """A thread-safe box of late replies: worker threads `add`, the session `take`s them; it
    also tracks the abandoned calls still running (`abandon` / `add`, `running`, `settle`),
    and `close` settles them once, at the end of the run: after it, `add` drops a reply (its
    call was recorded `abandoned`), so each abandoned call yields exactly one record."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._items: list[LateReply] = []
        self._running: dict[int, Abandoned] = {}
        self._closed = False

    def abandon(self, key: int, call: Abandoned) -> None:
        """A call was abandoned and is still running (`add` with the same key ends it)."""
        with self._lock:
            if not self._closed:
                self._running[key] = call

    def add(self, late: LateReply, key: int | None = None) -> None:
        with self._lock:
            if key is not None:
                self._running.pop(key, None)
            if not self._closed:
                self._items.append(late)
            self._lock.notify_all()

    def take(self) -> list[LateReply]:
        with self._lock:
            items, self._items = self._items, []
        return items

    def running(self) -> bool:
        """True while an abandoned call is still running."""
        with self._lock:
            return bool(self._running)

    def settle(self, timeout: float) -> None:
        """Wait until no abandoned call is running, at most `timeout` seconds."""
        with self._lock:
            self._lock.wait_for(lambda: not self._running, timeout)

    def close(self) -> list[LateReply | Abandoned]:
        """The end of the run: the late replies not yet taken, then an `Abandoned` for each call
        still running; later replies are dropped (each call is recorded once)."""
        with self._lock:
            self._closed = True
            items, self._items = self._items, []
            running, self._running = list(self._running.values()), {}
        return [*items, *running]


class AuthorCall:
    """One isolated call of `agent.author(request)`. `run()` performs it (on a worker thread
    for a blocking agent); `abandon()` gives up on it; `outcome()` is the result once run.
    If the call finishes after it was abandoned, its result goes to `late` instead."""

    def __init__(
        self,
        agent: Agent,
        request: AuthorRequest,
        *,
        timeout: float | None,
        late: LateReplies,
        date: str | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        """`on_done` is called on the worker thread once the call finished (its result stored,
        a late reply filed); it must not raise."""
        self.agent = agent
        self.request = request
        self.timeout = timeout
        self.date = date
        self._late = late
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._abandoned = False
        self._result: Answered | Failed | None = None
        self._on_done = on_done

    def run(self) -> None:
        start = time.perf_counter()
        result: Answered | Failed
        try:
            result = Answered(self.agent.author(self.request))
        except Exception as exc:  # any agent failure fails closed (the loop stands down)
            result = Failed(f"{type(exc).__name__}: {exc}", failure_kind(exc))
        with self._lock:
            self._result = result
            self._finished.set()
            abandoned = self._abandoned
        if abandoned:
            self._late.add(
                key=id(self),
                late=LateReply(
                    ordinal=self.request.ordinal,
                    iteration=self.request.iteration,
                    timeout=self.timeout or 0.0,
                    elapsed_ms=round((time.perf_counter() - start) * 1000.0, 3),
                    reply=result.reply if isinstance(result, Answered) else None,
                    error=result.error if isinstance(result, Failed) else None,
                    date=self.date,
                ),
            )
        if self._on_done is not None:
            self._on_done()

    def wait(self, timeout: float | None) -> bool:
        """Block until the call finished or `timeout` passed; True when it finished."""
        return self._finished.wait(timeout)

    def abandon(self) -> CallOutcome:
        """Give up on the call unless it finished meanwhile; returns the outcome to use."""
        with self._lock:
            if self._result is not None:
                return self._result
            self._abandoned = True
            # registered under the call's lock: `run` cannot report it before this
            self._late.abandon(id(self), Abandoned(self.request.ordinal, self.request.iteration,
                                                   self.timeout or 0.0, self.date))
        return TimedOut(self.timeout or 0.0)

    def outcome(self) -> CallOutcome:
        """The finished call's outcome (only after `run` returned)."""
        if self._result is None:
            raise RuntimeError("AuthorCall.outcome before the call finished")
        return self._result


def start_call(call: AuthorCall) -> None:
    """Run `call` on its own daemon thread: an abandoned call never blocks the process's exit."""
    threading.Thread(target=call.run, name=f"author-{call.request.ordinal}", daemon=True).start()


def call_agent(
    agent: Agent,
    request: AuthorRequest,
    *,
    timeout: float | None,
    late: LateReplies,
    date: str | None = None,
) -> CallOutcome:
    """One isolated call, synchronously: a pure agent inline; a blocking agent on a daemon
    thread, abandoned after `timeout` seconds (None = wait for it)."""
    call = AuthorCall(agent, request, timeout=timeout, late=late, date=date)
    if not agent.blocking or timeout is None:
        call.run()
        return call.outcome()
    start_call(call)
    call.wait(timeout)
    return call.abandon()


__all__ = [
    "DEFAULT_AGENT_TIMEOUT_S",
    "LATE_GRACE_CAP_S",
    "Abandoned",
    "late_grace",
    "Answered",
    "AuthorCall",
    "CallOutcome",
    "FAILURE_KINDS",
    "Failed",
    "FailureKind",
    "LateReplies",
    "LateReply",
    "TimedOut",
    "call_agent",
    "failure_kind",
    "start_call",
]

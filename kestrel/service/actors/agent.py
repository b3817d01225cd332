"""`AgentActor`: runs an `Agent` behind a mailbox; answers `AskAgent` calls with `CallOutcome`s.

Agents are synchronous (`Agent.author`). Every call is isolated (`kestrel.session.calls`): a
`blocking` agent (a model adapter waiting on I/O) is called on its own DAEMON thread
(`start_call`, never an anyio worker thread, which asyncio does not daemonize: a hung call
would keep the process alive after the run), whose end wakes the handler through the event
loop's token; a call that outlives its timeout is ABANDONED inside the handler, which answers
`TimedOut` at once. So the actor's mailbox never queues behind a hung call: the next ordinal's call starts
on a fresh thread immediately. An abandoned call that finishes later is discarded; its
`LateReply` waits in the actor until the driver collects it with `TakeLate` (evidence only);
the final `TakeLate` of the run settles every abandoned call once (`LateReplies.close`).
Pure agents (baseline, fixed, recorded, scripted) answer inline. The agent's own exceptions
are `Failed` outcomes (the loop stands down fail-closed), never a crash of this actor.
Determinism does not depend on any of this: the driver waits for each outcome before moving on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import msgspec

from kestrel_actors.actor import Actor
from kestrel_actors.errors import AskFailed, describe
from kestrel_actors.ref import ActorRef
from kestrel.session.calls import (Abandoned, Answered, AuthorCall, CallOutcome, Failed, LateReplies, LateReply,
                                   TimedOut, late_grace, start_call)
from kestrel.session.drive import give_outcome
from kestrel.session.loop import AuthoringLoop, Done
from kestrel.session.protocol import Agent, AuthorRequest


class AskAgent(msgspec.Struct, frozen=True, tag="ask_agent"):
    """Ask the agent once; a blocking agent's call is abandoned after `timeout` seconds (None:
    no limit). `date` labels a late reply's evidence."""

    request: AuthorRequest
    timeout: float | None = None
    date: str | None = None


class TakeLate(msgspec.Struct, frozen=True, tag="take_late"):
    """Collect the late replies of abandoned calls received so far (answers a list). When
    `final` (the end of the run) first wait up to `grace` seconds for abandoned calls still
    running, then close the box: an `Abandoned` for each one still running then."""

    final: bool = False
    grace: float = 0.0


AgentMessage = AskAgent | TakeLate


class AgentActor(Actor[AgentMessage]):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.late = LateReplies()
        self._changed: anyio.Event | None = None  # set when any call ends (`_settle` waits on it)

    async def receive(self, message: AgentMessage) -> CallOutcome | list[LateReply | Abandoned]:
        if isinstance(message, TakeLate):
            if not message.final:
                return list(self.late.take())
            with anyio.move_on_after(message.grace):  # real time: the calls run in threads
                await self._settle()
            return self.late.close()
        if not self.agent.blocking:
            call = AuthorCall(self.agent, message.request, timeout=message.timeout, late=self.late,
                              date=message.date)
            call.run()
            return call.outcome()
        done = anyio.Event()
        call = AuthorCall(self.agent, message.request, timeout=message.timeout, late=self.late,
                          date=message.date, on_done=self._signal(done))
        start_call(call)
        # real time, not the system's clock: the call runs in a worker thread at wall-clock
        # speed, and a virtual clock would jump past the timeout while the loop idles on it
        with anyio.move_on_after(message.timeout):
            await done.wait()
        return call.abandon()

    async def _settle(self) -> None:
        """Wait until no abandoned call is running (the caller bounds the wait)."""
        while True:
            self._changed = anyio.Event()  # before the check: a call ending after it sets this one
            if not self.late.running():
                return
            await self._changed.wait()

    def _signal(self, done: anyio.Event) -> Callable[[], None]:
        """A call's `on_done`: from its worker thread, wake the handler on the event loop."""
        token = anyio.lowlevel.current_token()

        def wake() -> None:  # on the event loop
            done.set()
            if self._changed is not None:
                self._changed.set()

        def on_done() -> None:  # on the worker thread
            try:
                anyio.from_thread.run_sync(wake, token=token)
            except RuntimeError:  # the run is over and its event loop gone: nobody waits
                pass

        return on_done


async def author_through(agent: ActorRef[Any], loop: AuthoringLoop, timeout: float | None) -> Done:
    """Drive `loop` to its end through the agent actor `agent`: ask, give the call's outcome to
    the loop, repeat until the loop is done. The agent actor enforces `timeout` per call (an
    abandoned call never delays the next one); a failure of the actor itself is the loop's
    failure."""
    request = loop.next_request()
    while True:
        try:
            outcome = await agent.ask(AskAgent(request, timeout, loop.date), timeout=None)
        except AskFailed as exc:  # the agent actor itself failed
            return loop.receive_failure(describe(exc.error))
        if not isinstance(outcome, (Answered, Failed, TimedOut)):
            raise TypeError(f"the agent actor answered {type(outcome).__name__}")
        out = give_outcome(loop, outcome)
        if isinstance(out, Done):
            return out
        request = out


async def take_late(agent: ActorRef[Any], final: bool, timeout: float | None) -> list[LateReply | Abandoned]:
    """The late replies of abandoned calls (evidence; their replies are discarded); at the end
    of the run (`final`) after waiting for the ones still running (bounded, `late_grace`), then
    each one still running as `abandoned`, once."""
    late: list[LateReply | Abandoned] = await agent.ask(TakeLate(final, late_grace(timeout) if final else 0.0),
                                                        timeout=None)
    return late


__all__ = ["AgentActor", "AgentMessage", "AskAgent", "TakeLate", "author_through", "take_late"]

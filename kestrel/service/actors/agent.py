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

import anyio
import anyio.from_thread
import anyio.lowlevel
import msgspec

from kestrel_actors.actor import Actor
from kestrel.session.calls import Abandoned, AuthorCall, CallOutcome, LateReplies, LateReply, start_call
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


__all__ = ["AgentActor", "AgentMessage", "AskAgent", "TakeLate"]

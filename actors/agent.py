"""`AgentActor`: runs an `Agent` behind a mailbox; answers `Author` calls with `CallOutcome`s.

Agents are synchronous (`Agent.author`). Every call is isolated (`kestrel.session.calls`): a
`blocking` agent (a model adapter waiting on I/O) is called on its own worker thread, and a
call that outlives its timeout is ABANDONED inside the handler, which answers `TimedOut` at
once. So the actor's mailbox never queues behind a hung call: the next ordinal's call starts
on a fresh thread immediately. An abandoned call that finishes later is discarded; its
`LateReply` waits in the actor until the driver collects it with `TakeLate` (evidence only).
Pure agents (baseline, fixed, recorded, scripted) answer inline. The agent's own exceptions
are `Failed` outcomes (the loop stands down fail-closed), never a crash of this actor.
Determinism does not depend on any of this: the driver waits for each outcome before moving on.
"""

from __future__ import annotations

import anyio
import msgspec

from actors.actor import Actor
from kestrel.session.calls import Abandoned, AuthorCall, CallOutcome, LateReplies, LateReply
from kestrel.session.protocol import Agent, AuthorRequest


class Author(msgspec.Struct, frozen=True, tag="author"):
    """Ask the agent once; a blocking agent's call is abandoned after `timeout` seconds (None:
    no limit). `date` labels a late reply's evidence."""

    request: AuthorRequest
    timeout: float | None = None
    date: str | None = None


class TakeLate(msgspec.Struct, frozen=True, tag="take_late"):
    """Collect the late replies of abandoned calls received so far (answers a list). With
    `grace` > 0 (the end of a day) first wait up to `grace` seconds for abandoned calls still
    running, and add an `Abandoned` for each one still running then."""

    grace: float = 0.0


AgentMessage = Author | TakeLate


class AgentActor(Actor[AgentMessage]):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.late = LateReplies()

    async def receive(self, message: AgentMessage) -> CallOutcome | list[LateReply | Abandoned]:
        if isinstance(message, TakeLate):
            if message.grace > 0:
                await anyio.to_thread.run_sync(self.late.settle, message.grace)
            pending = self.late.pending() if message.grace > 0 else []  # first: none is lost
            return [*pending, *self.late.take()]
        call = AuthorCall(
            self.agent, message.request, timeout=message.timeout, late=self.late, date=message.date
        )
        if not self.agent.blocking:
            call.run()
            return call.outcome()
        with anyio.move_on_after(message.timeout):
            await anyio.to_thread.run_sync(call.run, abandon_on_cancel=True)
        return call.abandon()


__all__ = ["AgentActor", "AgentMessage", "Author", "TakeLate"]

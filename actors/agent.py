"""`AgentActor`: runs an `Agent` behind a mailbox; answers `AuthorRequest`s with `AgentReply`s.

Agents are synchronous (`Agent.author`). A `blocking` agent (a model adapter waiting on I/O)
is called on a worker thread, so it never stalls the event loop and the driver's ask timeout
always fires; pure agents (baseline, fixed, recorded, scripted) answer inline. The agent's own failures surface to the asking driver as
`AskFailed` (the loop then stands down fail-closed); a slow agent surfaces as `AskTimeout`.
Determinism does not depend on this: the driver waits for each answer before moving on.
"""

from __future__ import annotations

import anyio

from actors.actor import Actor
from kestrel.session.protocol import Agent, AgentReply, AuthorRequest


class AgentActor(Actor[AuthorRequest]):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def receive(self, message: AuthorRequest) -> AgentReply:
        if self.agent.blocking:
            return await anyio.to_thread.run_sync(self.agent.author, message, abandon_on_cancel=True)
        return self.agent.author(message)


__all__ = ["AgentActor"]

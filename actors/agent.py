"""`AgentActor`: runs an `Agent` behind a mailbox; answers `AuthorRequest`s with `AgentReply`s.

Agents are synchronous (`Agent.author`); the actor calls them on a worker thread so that a
slow or hung agent (a model adapter blocking on I/O) never stalls the event loop and the
driver's ask timeout always fires. The agent's own failures surface to the asking driver as
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
        return await anyio.to_thread.run_sync(self.agent.author, message, abandon_on_cancel=True)


__all__ = ["AgentActor"]

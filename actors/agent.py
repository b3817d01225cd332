"""`AgentActor`: runs an `Agent` behind a mailbox; answers `AuthorRequest`s with `AgentReply`s.

The agent's own failures surface to the asking driver as `AskFailed` (the loop then stands
down fail-closed); a slow agent surfaces as `AskTimeout`. Model adapters that block on I/O
plug in here (a later issue) by answering from a worker thread or natively async.
"""

from __future__ import annotations

from actors.actor import Actor
from kestrel.session.protocol import Agent, AgentReply, AuthorRequest


class AgentActor(Actor[AuthorRequest]):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def receive(self, message: AuthorRequest) -> AgentReply:
        return self.agent.author(message)


__all__ = ["AgentActor"]

"""`ReplyPort`: where an external agent's replies enter a hosted session.

An external agent (an MCP client, a daemon client) is not called: the session's agent actor
publishes a request and waits on the port; the host hands the client's reply to the port.
Invariants:
- a reply is accepted only while a request waits for it, and only one per request;
- a wait that sees no reply within `abandon_after` seconds marks the port abandoned; an
  abandoned or closed port answers every later wait at once with None, so the session stands
  down fail-closed at each remaining ordinal without waiting again;
- the port outlives restarts of the agent actor (it belongs to the session, not the actor);
  the session's run releases it when it ends, however it ends.
"""

from __future__ import annotations

import math

import anyio

from kestrel.session.protocol import AgentReply, AuthorRequest


class PortRefused(ValueError):
    """A reply the port cannot take now (the text says why)."""


class ReplyPort:
    def __init__(self, abandon_after: float) -> None:
        if not abandon_after > 0:
            raise ValueError(f"abandon_after must be > 0 seconds, got {abandon_after!r}")
        self.abandon_after = abandon_after
        self.waiting: AuthorRequest | None = None
        self.ended: str | None = None
        """Why the port takes no more replies ("abandoned ...", "closed ..."), else None."""
        self._send, self._recv = anyio.create_memory_object_stream[AgentReply](1)

    def offer(self, reply: AgentReply) -> None:
        """Hand `reply` to the waiting request (raises `PortRefused` when none waits)."""
        if self.ended is not None:
            raise PortRefused(self.ended)
        if self.waiting is None:
            raise PortRefused("no request is waiting for a reply")
        self.waiting = None
        self._send.send_nowait(reply)

    def close(self, reason: str) -> None:
        """Take no more replies; a waiting request is answered with None at once."""
        if self.ended is None:
            self.ended = reason
        self.waiting = None
        self._send.close()

    def release(self) -> None:
        """The session's run is over: both ends of the reply stream closed (`ended` unchanged:
        it says why replies stopped, if they stopped before the run ended)."""
        self.waiting = None
        self._send.close()
        self._recv.close()

    def expect(self, request: AuthorRequest) -> None:
        """From now on a reply to `request` is accepted (call before announcing it)."""
        if self.ended is None:
            self.waiting = request

    async def wait(self) -> AgentReply | None:
        """The reply to the expected request, or None once the port is abandoned or closed."""
        if self.ended is not None:
            return None
        timeout = self.abandon_after if math.isfinite(self.abandon_after) else None
        with anyio.move_on_after(timeout):
            try:
                return await self._recv.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return None
        self.waiting = None
        self.ended = (
            f"session abandoned: no reply submitted within {self.abandon_after:g} s"
        )
        return None


__all__ = ["PortRefused", "ReplyPort"]

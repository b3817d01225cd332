"""`AskEnvelope`: the one-shot reply slot an `ask` sends through the mailbox."""

from __future__ import annotations

import anyio

from kestrel_actors._core.errors import ActorStopped


class AskEnvelope:
    """One-shot reply slot carried through the mailbox with an asked message.

    `settled` turns True exactly once (reply, failure, rejection or expiry); whatever comes
    after is ignored. The asker's `anyio.Event` is created only if it has to park (`park`): a
    quick handler has usually settled the slot before, so the common round trip creates no
    event at all.
    """

    __slots__ = ("message", "settled", "_event", "value", "error", "rejected", "expired")

    def __init__(self, message: object) -> None:
        self.message = message
        self.settled = False
        self._event: anyio.Event | None = None
        self.value: object = None
        self.error: BaseException | None = None
        self.rejected = False
        self.expired = False

    def _settle(self) -> None:
        self.settled = True
        event = self._event
        if event is not None:
            event.set()

    async def park(self) -> None:
        """Wait until the slot is settled."""
        if not self.settled:
            event = self._event = anyio.Event()
            await event.wait()

    def resolve(self, value: object) -> None:
        """The handler returned `value`."""
        if not self.settled:
            self.value = value
            self._settle()

    def fail(self, error: BaseException) -> None:
        """The handler raised `error`."""
        if not self.settled:
            self.error = error
            self._settle()

    def reject(self, error: ActorStopped) -> None:
        """The message was never handled (the actor stopped first)."""
        if not self.settled:
            self.error = error
            self.rejected = True
            self._settle()

    def expire(self) -> None:
        """The ask's deadline passed first; a later reply goes nowhere."""
        if not self.settled:
            self.expired = True
            self._settle()

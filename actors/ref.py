"""`ActorRef`: the handle others hold to send an actor messages.

`tell` is fire-and-forget with backpressure: it first tries `send_nowait` into the bounded
mailbox and only awaits (FIFO among blocked senders) when the mailbox is full, so the
common path costs no task switch. `ask` enqueues an `AskEnvelope`, a one-shot reply slot
(an `anyio.Event` plus the value), registers its deadline with the system's
`AskDeadlines` timer (no cancel scope per ask on the common path) and waits for the slot.

Ordering: one mailbox per actor, first in first out, and senders blocked on a full mailbox
are admitted in arrival order, so messages from one sender are handled in the order sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import anyio
from anyio import BrokenResourceError, ClosedResourceError, WouldBlock
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectSendStream

from actors.errors import (
    ActorStopped,
    AskFailed,
    AskTimeout,
    MailboxFull,
    UnexpectedReply,
    message_kind,
)

if TYPE_CHECKING:
    from actors.cell import Cell

M = TypeVar("M")
R = TypeVar("R")

DEFAULT_ASK_TIMEOUT = 5.0
"""Seconds an `ask` waits for its reply unless told otherwise."""


class AskEnvelope:
    """One-shot reply slot carried through the mailbox with an asked message."""

    __slots__ = ("message", "event", "value", "error", "rejected", "expired")

    def __init__(self, message: object) -> None:
        self.message = message
        self.event = anyio.Event()
        self.value: object = None
        self.error: BaseException | None = None
        self.rejected = False
        self.expired = False

    def resolve(self, value: object) -> None:
        if not self.event.is_set():
            self.value = value
            self.event.set()

    def fail(self, error: BaseException) -> None:
        """The handler raised `error`."""
        if not self.event.is_set():
            self.error = error
            self.event.set()

    def reject(self, error: ActorStopped) -> None:
        """The message was never handled (the actor stopped first)."""
        if not self.event.is_set():
            self.error = error
            self.rejected = True
            self.event.set()

    def expire(self) -> None:
        """The ask's deadline passed first; a later reply goes nowhere."""
        if not self.event.is_set():
            self.expired = True
            self.event.set()


class ActorRef(Generic[M]):
    """Address of a spawned actor. Cheap to copy around; all refs share the one mailbox."""

    __slots__ = ("_cell", "_send_nowait", "_send", "_deadlines", "name")

    def __init__(self, cell: Cell[M], send: MemoryObjectSendStream[Any]) -> None:
        self._cell = cell
        self._send_nowait: Callable[[object], None] = send.send_nowait
        self._send = send.send
        self._deadlines = cell.system._deadlines
        self.name: str = cell.name

    def __repr__(self) -> str:
        return f"ActorRef({self.name!r})"

    @property
    def alive(self) -> bool:
        """True until the actor stops accepting messages."""
        return self._cell.accepting

    @property
    def pending(self) -> int:
        """Messages waiting in the mailbox (not counting senders blocked on a full one)."""
        return self._cell.pending

    @property
    def capacity(self) -> int:
        """Mailbox capacity: a `tell` beyond it waits (backpressure)."""
        return self._cell.capacity

    async def tell(self, message: M) -> None:
        """Send `message` without waiting for it to be handled; waits only if the mailbox is full.

        Raises `ActorStopped` if the actor is stopped or stops while we wait for room.
        """
        try:
            self._send_nowait(message)
        except WouldBlock:
            try:
                await self._send(message)
            except (ClosedResourceError, BrokenResourceError):
                raise ActorStopped(self.name) from None
        except (ClosedResourceError, BrokenResourceError):
            raise ActorStopped(self.name) from None

    def tell_nowait(self, message: M) -> None:
        """Send `message` if the mailbox has room now; raise `MailboxFull` otherwise."""
        try:
            self._send_nowait(message)
        except WouldBlock:
            raise MailboxFull(self.name, self._cell.capacity) from None
        except (ClosedResourceError, BrokenResourceError):
            raise ActorStopped(self.name) from None

    @overload
    async def ask(self, message: M, *, timeout: float | None = ...) -> Any: ...

    @overload
    async def ask(self, message: M, *, expect: type[R], timeout: float | None = ...) -> R: ...

    async def ask(
        self,
        message: M,
        *,
        expect: type[Any] | None = None,
        timeout: float | None = DEFAULT_ASK_TIMEOUT,
    ) -> Any:
        """Send `message` and wait for the handler's return value.

        The timeout covers waiting for mailbox room and for the reply; on expiry raises
        `AskTimeout` naming the actor and the message kind. A failing handler raises
        `AskFailed` (the original error is its `__cause__`); a stopped actor `ActorStopped`.
        With `expect=T` the reply must be a `T` (else `UnexpectedReply`).
        """
        if timeout is None:
            deadline = math.inf
        elif timeout >= 0:
            deadline = anyio.current_time() + timeout
        else:
            raise ValueError(f"ask timeout must be >= 0 seconds or None, got {timeout!r}")
        envelope = AskEnvelope(message)
        try:
            self._send_nowait(envelope)
        except WouldBlock:
            with anyio.CancelScope(deadline=deadline) as scope:
                try:
                    await self._send(envelope)
                except (ClosedResourceError, BrokenResourceError):
                    raise ActorStopped(self.name) from None
            if scope.cancelled_caught:
                raise AskTimeout(self.name, message_kind(message), timeout or 0.0) from None
        except (ClosedResourceError, BrokenResourceError):
            raise ActorStopped(self.name) from None
        if timeout is not None:
            self._deadlines.add(deadline, envelope)
        # Yield once before parking: a quick handler has usually replied by then, and trio
        # (which shuffles each batch of ready tasks) then needs fewer scheduler batches per
        # round trip (measured 1.34 instead of 1.5).
        await checkpoint()
        if not envelope.event.is_set():
            await envelope.event.wait()
        if envelope.expired:
            # The actor may still handle the message later; its reply then goes nowhere.
            raise AskTimeout(self.name, message_kind(message), timeout or 0.0)
        error = envelope.error
        if error is not None:
            if envelope.rejected:
                raise error
            raise AskFailed(self.name, message_kind(message), error)
        value = envelope.value
        if expect is not None and not isinstance(value, expect):
            raise UnexpectedReply(self.name, message_kind(message), expect, value)
        return value

    async def stop(self, grace: float | None = None) -> None:
        """Stop the actor and wait for its task to end.

        Gracefully: its mailbox closes to new messages, what it already accepted is handled,
        its children stop (newest first), `on_stop` runs. If `grace` seconds pass first, it
        is aborted instead: its task is cancelled and what is left is rejected.
        """
        await self._cell.stop(grace)

    async def wait_stopped(self) -> None:
        """Wait until the actor's task has ended."""
        await self._cell.done.wait()

"""`ActorRef`: the handle others hold to send an actor messages.

`tell` is fire-and-forget with backpressure: it first tries `post_nowait` into the bounded
mailbox and only awaits (FIFO among blocked senders) when the mailbox is full, so the
common path costs no task switch. `ask` to an idle actor whose handler can never suspend
runs the handler in the asking task (the hand-off, see `actors.cell`); otherwise it enqueues
an `AskEnvelope`, a one-shot reply slot, registers its deadline with the system's
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

_SPIN = 2
"""Checkpoints an asker takes, looking at its reply slot after each, before it parks."""


class AskEnvelope:
    """One-shot reply slot carried through the mailbox with an asked message.

    `settled` turns True exactly once (reply, failure, rejection or expiry). The asker's
    `anyio.Event` is created only if it has to park (`park`): a quick handler has usually
    settled the slot before, so the common round trip creates no event at all.
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


class ActorRef(Generic[M]):
    """Address of a spawned actor. Cheap to copy around; all refs share the one mailbox."""

    __slots__ = ("_cell", "_enqueue", "_send_nowait", "_send", "_deadlines", "name")

    def __init__(self, cell: Cell[M]) -> None:
        self._cell = cell
        self._enqueue: Callable[[object], None] = cell._send_nowait  # `tell`: post inlined
        self._send_nowait: Callable[[object], None] = cell.post_nowait
        self._send = cell.post
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
            self._enqueue(message)
        except WouldBlock:
            try:
                await self._send(message)
            except (ClosedResourceError, BrokenResourceError):
                raise ActorStopped(self.name) from None
        except (ClosedResourceError, BrokenResourceError):
            raise ActorStopped(self.name) from None
        else:  # what `Cell.post_nowait` does after enqueueing, inlined on the hottest path
            cell = self._cell
            cell.idle = False
            if cell._bell is not None:
                cell._ring()

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
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"ask timeout must be >= 0 seconds or None, got {timeout!r}")
        cell = self._cell
        if cell.can_hand_off():
            try:
                value = cell.hand_off(message)
            except AskFailed:
                await checkpoint()  # the actor's task starts supervising meanwhile
                raise
            await checkpoint()
        else:
            value = await self._round_trip(message, timeout)
        if expect is not None and not isinstance(value, expect):
            raise UnexpectedReply(self.name, message_kind(message), expect, value)
        return value

    async def _round_trip(self, message: M, timeout: float | None) -> object:
        """Send `message` in an `AskEnvelope` through the mailbox and wait for the reply."""
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
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
        # Yield before parking: a quick handler has usually replied by then, and on trio
        # (which shuffles each batch of ready tasks) asker and actor then meet in the next
        # batch without a park and a wake-up (1.34 batches per round trip instead of 1.5).
        for _ in range(_SPIN):
            await checkpoint()
            if envelope.settled:
                break
        else:
            await envelope.park()
        if envelope.expired:
            # The actor may still handle the message later; its reply then goes nowhere.
            raise AskTimeout(self.name, message_kind(message), timeout or 0.0)
        error = envelope.error
        if error is not None:
            if envelope.rejected:
                raise error
            raise AskFailed(self.name, message_kind(message), error)
        return envelope.value

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

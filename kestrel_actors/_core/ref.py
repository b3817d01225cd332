"""`ActorRef`: the handle others hold to send an actor messages.

`tell` is fire-and-forget with backpressure: it first tries `enqueue` into the bounded
mailbox and only awaits (FIFO among blocked senders) when the mailbox is full, so the
common path costs no task switch. `ask` to an idle actor whose handler can never suspend
runs the handler in the asking task (the hand-off, see `kestrel_actors._core.cell`); otherwise it enqueues
an `AskEnvelope`, a one-shot reply slot, registers its deadline with the system's
`AskDeadlines` timer (no cancel scope per ask on the common path) and waits for the slot.
Deadlines are read on the system's `Clock`.

A ref talks to its cell through the cell's mailbox entry (`enqueue`, `post_nowait`, `post`)
and the wake-up rule of `kestrel_actors._core.cell`: after `enqueue`, `if cell.idle: cell.wake()`.

Ordering: one mailbox per actor, first in first out, and senders blocked on a full mailbox
are admitted in arrival order, so messages from one sender are handled in the order sent.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from anyio import BrokenResourceError, ClosedResourceError, WouldBlock
from anyio.lowlevel import checkpoint

from kestrel_actors._core.envelope import AskEnvelope
from kestrel_actors._core.errors import (
    ActorStopped,
    AskFailed,
    AskTimeout,
    MailboxFull,
    UnexpectedReply,
    message_kind,
)

if TYPE_CHECKING:
    from kestrel_actors._core.cell import Cell

M = TypeVar("M")
R = TypeVar("R")

DEFAULT_ASK_TIMEOUT = 5.0
"""Seconds an `ask` waits for its reply unless told otherwise."""

_SPIN = 2
"""Checkpoints an asker takes, looking at its reply slot after each, before it parks."""


class ActorRef(Generic[M]):
    """Address of a spawned actor. Cheap to copy around; all refs share the one mailbox."""

    __slots__ = ("_cell", "_enqueue", "_post_nowait", "_post", "_deadlines", "_now", "name")

    def __init__(self, cell: Cell[M]) -> None:
        self._cell = cell
        self._enqueue: Callable[[object], None] = cell.enqueue
        self._post_nowait: Callable[[object], None] = cell.post_nowait
        self._post: Callable[[object], Awaitable[None]] = cell.post
        self._deadlines = cell.host.deadlines
        self._now: Callable[[], float] = cell.clock.now
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
                await self._post(message)
            except (ClosedResourceError, BrokenResourceError):
                raise ActorStopped(self.name) from None
        except (ClosedResourceError, BrokenResourceError):
            raise ActorStopped(self.name) from None
        else:  # the wake-up rule; a busy actor (the hot path) costs one attribute read
            cell = self._cell
            if cell.idle:
                cell.wake()

    def tell_nowait(self, message: M) -> None:
        """Send `message` if the mailbox has room now; raise `MailboxFull` otherwise."""
        try:
            self._enqueue(message)
        except WouldBlock:
            raise MailboxFull(self.name, self._cell.capacity) from None
        except (ClosedResourceError, BrokenResourceError):
            raise ActorStopped(self.name) from None
        cell = self._cell
        if cell.idle:
            cell.wake()

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
        deadline = math.inf if timeout is None else self._now() + timeout
        envelope = AskEnvelope(message)
        try:
            self._post_nowait(envelope)
        except WouldBlock:
            with self._cell.clock.move_on_at(deadline) as scope:
                try:
                    await self._post(envelope)
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

"""The runtime side of one actor: its mailbox, its task, its supervision.

Mailbox: a bounded anyio memory object stream shared by every `ActorRef` of the actor.

Fairness rule: the actor's task drains its mailbox with `receive_nowait()` and handles up to
`batch` messages back to back; after a full batch it yields with a checkpoint even if more
messages are waiting, and whenever the mailbox is empty it waits for the next message. So a
busy actor never holds the event loop for more than `batch` handler calls, and a quiet one
costs nothing.

Waiting (the actor is *idle*): it yields `_SPIN` times with a checkpoint, looking at the mailbox
after each, then parks on a doorbell (`anyio.Event`). The wake-up rule: whoever puts a message
into the mailbox (`enqueue`, `post_nowait`, `post`) then calls `wake()` if `idle` is set, which
clears `idle` and rings the doorbell if the actor parked on it. The actor sets `idle` only
while it finds its mailbox empty, so `idle` is True exactly while the actor has handled
everything it was sent and waits for more, and a parked actor is always `idle` (a post always
reaches its doorbell). A busy actor costs its senders one attribute read.

Hand-off (`hand_off`): an `ask` to an idle actor whose `receive` can never suspend (its code
contains no `await`, `async for` or `async with`; checked once per class) runs the handler in
the asker's task instead of a round trip through the mailbox. Since that handler cannot yield,
no other task runs while it does: the actor still handles one message at a time, everything
sent before was already handled (per-sender FIFO holds), and neither the asker's timeout nor
its cancellation can interrupt it. A handler that raises there is supervised exactly as in the
actor's own task: the asker gets the error, and the actor's task, woken at once, applies the
policy before it handles anything else (no hand-off reaches the failed instance meanwhile).
The handler runs in a snapshot of the actor task's context variables taken after `on_start`.

Stop rule (graceful): the mailbox closes to new messages (senders get `ActorStopped`,
including those blocked on a full mailbox), the messages already accepted are handled, then
the actor's children are stopped newest first (each by this same rule), then `on_stop` runs
and the task ends. A supervision `Stop`/`Escalate` instead rejects what is left: each
pending `ask` gets `ActorStopped` and each pending `tell` is counted in the system's
`rejected`. An abort (a stop's grace period expired, or the system failed) cancels the task
and its descendants' tasks at once, without `on_stop`, and rejects what is left the same way.

Restart rule: a restart replaces the failed actor's whole subtree. Its children are aborted
(as above) and awaited, the failed instance's `on_stop` runs, then the factory builds a
fresh instance whose `on_start` spawns its own children; messages already in the mailbox
are kept for the fresh instance (the failing message is dropped; its `ask` gets the error).

Host: a cell sees its system only through the narrow `CellHost` protocol (the clock, the ask
deadline timer, and `forget`/`fail`/`count_rejected`), implemented by `Runtime`.
"""

from __future__ import annotations

import contextvars
import dis
import inspect
from collections.abc import Callable
from functools import lru_cache
from types import CodeType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio
import structlog
from anyio import CancelScope, EndOfStream, WouldBlock
from anyio.lowlevel import checkpoint

from kestrel_actors._core.clock import Clock
from kestrel_actors._core.deadlines import AskDeadlines
from kestrel_actors._core.envelope import AskEnvelope
from kestrel_actors._core.ref import ActorRef
from kestrel_actors._core.actor import Actor, ActorContext
from kestrel_actors._core.errors import ActorStopped, AskFailed, ChildFailed, describe, message_kind
from kestrel_actors._core.supervision import Escalate, Restart, RestartWindow, Stop, SupervisionPolicy

if TYPE_CHECKING:
    from kestrel_actors._core.system import ActorSystem

M = TypeVar("M")

_SPIN = 2
"""Checkpoints an idle actor takes, looking at its mailbox after each, before it parks.

On trio, which runs each batch of ready tasks in a random order, an asker and its actor
then meet in the next batch instead of paying a park and a wake-up (see docs/actors.md)."""

_SUSPENDING_OPS = frozenset({
    "GET_AWAITABLE", "SEND", "YIELD_VALUE", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH",
    "END_ASYNC_FOR", "ASYNC_GEN_WRAP",
})
"""Bytecode operations through which a coroutine can suspend (await, async for/with)."""


@lru_cache(maxsize=256)
def _never_suspends(code: CodeType) -> bool:
    """True if a coroutine with this code can only run to its end in one step."""
    if not code.co_flags & inspect.CO_COROUTINE:
        return False
    return not any(op.opname in _SUSPENDING_OPS for op in dis.get_instructions(code))



def _logger() -> Any:
    """The runtime's logger: structlog under whatever configuration the application set up
    (the runtime configures nothing), bound to `logger="kestrel_actors"`."""
    return structlog.get_logger().bind(logger="kestrel_actors")

def _handler_never_suspends(actor: Actor[Any]) -> bool:
    method = actor.receive
    function = getattr(method, "__func__", None)
    if function is None or getattr(method, "__self__", None) is not actor:
        return False
    code = getattr(function, "__code__", None)
    return isinstance(code, CodeType) and _never_suspends(code)


class CellHost(Protocol):
    """What a cell needs from the system hosting it, and nothing more."""

    @property
    def system(self) -> ActorSystem:
        """The public system, as `ActorContext.system` shows it to the actor."""
        ...

    @property
    def clock(self) -> Clock:
        """The system's clock: restart windows and grace periods are read on it."""
        ...

    @property
    def deadlines(self) -> AskDeadlines:
        """The system's ask-deadline timer, where an `ask` registers its reply slot."""
        ...

    def forget(self, cell: Cell[Any]) -> None:
        """`cell`'s task has ended: drop it from the registry and from its parent."""
        ...

    def fail(self, actor: str, error: BaseException) -> None:
        """A top-level actor escalated `error`: the whole system fails with it."""
        ...

    def count_rejected(self) -> None:
        """One pending `tell` was rejected (an abort or a supervision stop)."""
        ...


class HandlerFailed(Exception):
    """Internal: carries a handler's exception out of the serve loop."""

    def __init__(self, error: Exception, envelope: AskEnvelope | None) -> None:
        super().__init__(error)
        self.error = error
        self.envelope = envelope


class Cell(Generic[M]):
    """One actor's mailbox, task and supervision state."""

    def __init__(
        self,
        host: CellHost,
        name: str,
        factory: Callable[[], Actor[M]],
        policy: SupervisionPolicy,
        capacity: int,
        batch: int,
        parent: Cell[Any] | None,
    ) -> None:
        self.host = host
        self.system = host.system
        self.clock = host.clock
        self.name = name
        self.factory = factory
        self.policy = policy
        self.capacity = capacity
        self.batch = batch
        self.parent = parent
        self.children: list[Cell[Any]] = []
        self.accepting = True
        self.done = anyio.Event()
        self.actor: Actor[M] | None = None
        self._send, self._recv = anyio.create_memory_object_stream[Any](capacity)
        self.enqueue: Callable[[object], None] = self._send.send_nowait
        """Put an item in the mailbox now, raising `WouldBlock` when full; the caller then
        follows the wake-up rule (`if cell.idle: cell.wake()`)."""
        self.ctx: ActorContext[M] = ActorContext(self)
        self._window = RestartWindow(policy) if isinstance(policy, Restart) else None
        self._work: CancelScope | None = None
        self._life = CancelScope()
        self._escalated: ChildFailed | None = None
        self._aborted = False
        self._bell: anyio.Event | None = None
        self.idle = False
        self._can_hand_off = False
        self._context: contextvars.Context | None = None
        self._handed_failure: Exception | None = None
        self.ref: ActorRef[M] = ActorRef(self)

    @property
    def pending(self) -> int:
        return self._recv.statistics().current_buffer_used

    # -- the mailbox's entry, used by every sender ---------------------------------------

    def post_nowait(self, item: object) -> None:
        """Put `item` in the mailbox now (raises `WouldBlock` when full) and wake the actor."""
        self.enqueue(item)
        if self.idle:  # the common busy case pays no call
            self.wake()

    async def post(self, item: object) -> None:
        """Put `item` in the mailbox, waiting (FIFO among senders) while it is full."""
        await self._send.send(item)
        if self.idle:
            self.wake()

    def wake(self) -> None:
        """A message was put in the mailbox of the idle actor: it is no longer idle."""
        self.idle = False
        bell = self._bell
        if bell is not None:
            self._bell = None
            bell.set()

    def _ring(self) -> None:
        """Wake the actor if it is parked on its doorbell."""
        bell = self._bell
        if bell is not None:
            self._bell = None
            bell.set()

    def can_hand_off(self) -> bool:
        """True if an `ask` may run the handler in the caller's task now (see module doc)."""
        return (
            self.idle
            and self._can_hand_off
            and self.accepting
            and self._handed_failure is None
            and self._escalated is None
        )

    def hand_off(self, message: object) -> object:
        """Run the handler on `message` in the caller's task; precondition: `can_hand_off()`.

        Raises `AskFailed` if the handler raised; the actor's task then supervises.
        """
        actor = self.actor
        context = self._context
        assert actor is not None and context is not None
        coroutine = actor.receive(message)  # type: ignore[arg-type]
        try:
            context.run(coroutine.send, None)
        except StopIteration as done:
            return done.value
        except Exception as exc:
            self._handed_failure = exc
            self._ring()
            raise AskFailed(self.name, message_kind(message), exc) from exc
        # Unreachable: a handler without a suspending operation cannot yield.
        coroutine.close()
        raise RuntimeError(f"actor {self.name!r}: a never-suspending handler suspended")

    # -- control, callable from any task ------------------------------------------------

    def request_stop(self) -> None:
        """Close the mailbox to new messages; the task drains it and ends."""
        if self.accepting:
            self.accepting = False
            self._send.close()
            self._ring()

    async def stop(self, grace: float | None = None) -> None:
        """Graceful stop; after `grace` seconds (if given) abort instead. Waits for the end."""
        self.request_stop()
        if grace is not None:
            with self.clock.move_on_at(self.clock.now() + grace):
                await self.done.wait()
            if not self.done.is_set():
                self.abort()
        await self.done.wait()

    def abort(self) -> None:
        """Stop now, with every descendant: cancel the tasks; whatever is pending is rejected."""
        self._aborted = True
        self.request_stop()
        for child in list(self.children):
            child.abort()
        self._life.cancel()

    def child_escalated(self, failure: ChildFailed) -> None:
        """A child escalated: fail this actor with `failure`, handled by its own policy."""
        if not self.accepting or self._aborted:
            _logger().error(
                "actor.escalation_ignored", actor=self.name,
                reason="stopping", error=str(failure),
            )
            return
        self._escalated = failure
        if self._work is not None:
            self._work.cancel()

    # -- the task -----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            with self._life:
                await self._run()
        finally:
            self.request_stop()
            self._reject_pending()
            self._recv.close()
            self.done.set()
            self.host.forget(self)

    async def _run(self) -> None:
        while True:
            failure: Exception | None = None
            envelope: AskEnvelope | None = None
            with CancelScope() as work:
                self._work = work
                if self._escalated is not None:
                    work.cancel()  # a child escalated while we were between scopes
                try:
                    if self.actor is None:
                        await self._start()
                    await self._serve()
                except HandlerFailed as failed:
                    failure, envelope = failed.error, failed.envelope
                except Exception as exc:  # factory or on_start failed
                    failure = exc
            self._work = None
            if self._aborted:
                return  # aborted: no drain, no on_stop; `run` rejects what is left
            if failure is None and self._escalated is not None:
                failure, self._escalated = self._escalated, None
            if failure is None:
                # The mailbox closed and is drained: the graceful stop.
                for child in reversed(list(self.children)):
                    await child.stop()
                await self._stop_instance()
                return
            if envelope is not None:
                envelope.fail(failure)
            if not await self._supervise(failure):
                return

    async def _start(self) -> None:
        actor = self.factory()
        actor.ctx = self.ctx
        self.actor = actor
        self._can_hand_off = False
        await actor.on_start()
        self._context = contextvars.copy_context()
        self._can_hand_off = _handler_never_suspends(actor)

    async def _serve(self) -> None:
        actor = self.actor
        assert actor is not None
        handle = actor.receive
        receive_nowait = self._recv.receive_nowait
        batch = self.batch
        count = 0
        try:
            while True:
                try:
                    item = receive_nowait()
                except WouldBlock:
                    count = 0
                    item = await self._next()
                if type(item) is AskEnvelope:
                    try:
                        item.resolve(await handle(item.message))  # type: ignore[arg-type]
                    except Exception as exc:
                        raise HandlerFailed(exc, item) from exc
                    except BaseException:
                        failure = self._escalated
                        if failure is not None:
                            item.fail(failure)
                        else:
                            item.reject(
                                ActorStopped(self.name, "it stopped while handling this message")
                            )
                        raise
                else:
                    try:
                        await handle(item)
                    except Exception as exc:
                        raise HandlerFailed(exc, None) from exc
                count += 1
                if count >= batch:
                    count = 0
                    await checkpoint()
        except EndOfStream:
            return
        finally:
            self.idle = False
            self._bell = None

    async def _next(self) -> Any:
        """Wait for the next message while idle (spin, then park on the doorbell).

        Raises `HandlerFailed` if a handler run by a hand-off failed meanwhile, and
        `EndOfStream` once the mailbox is closed and empty.
        """
        self.idle = True
        receive_nowait = self._recv.receive_nowait
        spins = 0
        while True:
            if spins < _SPIN:
                spins += 1
                await checkpoint()
            else:
                bell = self._bell = anyio.Event()
                await bell.wait()
            failure = self._handed_failure
            if failure is not None:
                self._handed_failure = None
                raise HandlerFailed(failure, None)
            try:
                item = receive_nowait()
            except WouldBlock:
                # Still nothing: a `wake` meanwhile was stale (a sender that had waited for
                # room in a full mailbox returns after the actor took its message).
                self.idle = True
                continue
            self.idle = False
            return item

    # -- supervision --------------------------------------------------------------------

    async def _supervise(self, failure: Exception) -> bool:
        """Apply the policy to `failure`; True to keep serving (restarted), False to end."""
        policy = self.policy
        if isinstance(policy, Restart):
            assert self._window is not None
            if self._window.allow(self.clock.now()):
                _logger().warning(
                    "actor.restart", actor=self.name,
                    restart=self._window.count, max_restarts=policy.max_restarts,
                    error=describe(failure),
                )
                await self._end_children()
                await self._stop_instance()
                return True
            _logger().error(
                "actor.restart_limit", actor=self.name,
                max_restarts=policy.max_restarts, within=policy.within,
                error=describe(failure),
            )
            await self._fail_stop()
            self._escalate(failure)
            return False
        if isinstance(policy, Stop):
            _logger().error("actor.stop", actor=self.name, error=describe(failure))
            await self._fail_stop()
            return False
        assert isinstance(policy, Escalate)
        _logger().error("actor.escalate", actor=self.name, error=describe(failure))
        await self._fail_stop()
        self._escalate(failure)
        return False

    async def _fail_stop(self) -> None:
        self.request_stop()
        self._reject_pending()
        await self._end_children()
        await self._stop_instance()

    async def _end_children(self) -> None:
        """Abort the failed instance's children (newest first) and wait for their tasks."""
        children = list(reversed(self.children))
        for child in children:
            child.abort()
        for child in children:
            await child.done.wait()

    def _escalate(self, failure: Exception) -> None:
        if self.parent is not None:
            self.parent.child_escalated(ChildFailed(self.name, failure))
        else:
            self.host.fail(self.name, failure)

    async def _stop_instance(self) -> None:
        actor, self.actor = self.actor, None
        if actor is None:
            return
        try:
            await actor.on_stop()
        except Exception as exc:
            _logger().error(
                "actor.on_stop_failed", actor=self.name, error=describe(exc)
            )

    def _reject_pending(self) -> None:
        while True:
            try:
                item = self._recv.receive_nowait()
            except (WouldBlock, EndOfStream, anyio.ClosedResourceError):
                return
            if type(item) is AskEnvelope:
                item.reject(ActorStopped(self.name, "it stopped before handling this message"))
            else:
                self.host.count_rejected()

"""`ActorSystem`: actors as tasks of one anyio task group (structured concurrency).

    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        await ref.tell(Add(n=2))
        total = await ref.ask(Get(), expect=int)
    # leaving the block shuts the system down gracefully; no task outlives it

Shutdown rule: no new actor may be spawned; top-level actors stop newest first, each by the
graceful stop rule of `kestrel_actors._core.cell` (close the mailbox, handle what it already accepted,
stop its children newest first, run `on_stop`). If that takes longer than `grace` seconds,
every actor still running is aborted: its task is cancelled (no `on_stop`), its pending
`ask`s get `ActorStopped` and its pending `tell`s are counted in `rejected`. Bus streams are
closed last. Leaving the block with an exception aborts at once. A failure escalated by a
top-level actor aborts the system and `__aexit__` raises `EscalationError`.

Time: every timeout, grace period and restart window is read on the system's `clock`
(default: the event loop's monotonic clock; a test passes `kestrel_actors.testing.VirtualClock`).

The system is a facade over its `kestrel_actors._core.runtime.Runtime`, which hosts the actors' cells.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from kestrel_actors._core.clock import Clock, EventLoopClock
from kestrel_actors._core.runtime import Runtime
from kestrel_actors._core.actor import Actor
from kestrel_actors._core.errors import ActorStopped
from kestrel_actors._core.ref import ActorRef
from kestrel_actors._core.supervision import Restart, SupervisionPolicy

if TYPE_CHECKING:
    from kestrel_actors._core.bus import Bus

M = TypeVar("M")

DEFAULT_MAILBOX = 1024
DEFAULT_BATCH = 64
DEFAULT_GRACE = 5.0


class ActorSystem:
    """Owns every actor task; use as `async with ActorSystem() as system:`."""

    def __init__(
        self,
        *,
        mailbox: int = DEFAULT_MAILBOX,
        batch: int = DEFAULT_BATCH,
        grace: float = DEFAULT_GRACE,
        clock: Clock | None = None,
    ) -> None:
        if mailbox < 1:
            raise ValueError(f"mailbox capacity must be >= 1, got {mailbox}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        if not grace >= 0:
            raise ValueError(f"grace must be >= 0 seconds, got {grace}")
        self.mailbox = mailbox
        self.batch = batch
        self.grace = grace
        self._runtime = Runtime(self, EventLoopClock() if clock is None else clock)
        self._ids = itertools.count(1)
        self._bus: Bus | None = None

    @property
    def clock(self) -> Clock:
        """The clock every timeout, grace period and restart window is read on."""
        return self._runtime.clock

    @property
    def rejected(self) -> int:
        """Pending `tell`s rejected by aborts and supervision stops, over the system's life."""
        return self._runtime.rejected

    @property
    def pending_deadlines(self) -> int:
        """Entries of the ask-deadline timer: unsettled asks with a timeout, plus answered
        ones not dropped yet (the timer compacts itself, so this stays bounded)."""
        return len(self._runtime.deadlines)

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> ActorSystem:
        if self._runtime.entered:
            raise RuntimeError("an ActorSystem can be entered only once")
        await self._runtime.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._runtime.close(exc_type, exc, tb, self.grace)

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop every actor by the shutdown rule (see the module docstring)."""
        await self._runtime.shutdown(self.grace if grace is None else grace)

    # -- actors -------------------------------------------------------------------------

    def spawn(
        self,
        factory: Callable[[], Actor[M]],
        *,
        name: str | None = None,
        policy: SupervisionPolicy = Restart(),
        mailbox: int | None = None,
        parent: ActorRef[Any] | None = None,
    ) -> ActorRef[M]:
        """Start an actor built by `factory` (called again for each restart) and return its ref.

        `name` must be unique among live actors (a child's is `<parent>/<name>`); `mailbox` is
        its capacity (default: the system's); `policy` applies when its handler raises.
        """
        runtime = self._runtime
        if not runtime.entered:
            raise RuntimeError("spawn needs a running system: use `async with ActorSystem() as s:`")
        if runtime.closing:
            raise ActorStopped("system", "it is shutting down and spawns no new actor")
        capacity = self.mailbox if mailbox is None else mailbox
        if capacity < 1:
            raise ValueError(f"mailbox capacity must be >= 1, got {capacity}")
        parent_cell = None
        if parent is not None:
            parent_cell = runtime.cell_of(parent)
            if parent_cell is None or not parent_cell.accepting:
                raise ActorStopped(parent.name, "a stopping actor spawns no child")
        if name is None:
            name = f"{getattr(factory, '__name__', 'actor').lower()}-{next(self._ids)}"
        if not name or "/" in name:
            raise ValueError(f"actor name must be non-empty and without '/', got {name!r}")
        full = name if parent_cell is None else f"{parent_cell.name}/{name}"
        if full in runtime.live:
            raise ValueError(f"an actor named {full!r} is already running; choose another name")
        return runtime.start(factory, full, policy, capacity, self.batch, parent_cell).ref

    async def stop(self, ref: ActorRef[Any], grace: float | None = None) -> None:
        """Stop one actor (see `ActorRef.stop`) and wait for it."""
        await ref.stop(grace)

    def lookup(self, name: str) -> ActorRef[Any] | None:
        """The ref of the live actor called `name`, if any."""
        cell = self._runtime.live.get(name)
        return None if cell is None else cell.ref

    @property
    def actors(self) -> tuple[str, ...]:
        """Names of the live actors, in spawn order."""
        return tuple(self._runtime.live)

    # -- services -----------------------------------------------------------------------

    @property
    def bus(self) -> Bus:
        """The system's topic bus (created on first use)."""
        if self._bus is None:
            from kestrel_actors._core.bus import Bus

            bus = self._bus = Bus(self._runtime)
            self._runtime.at_abort(bus.close)
        return self._bus

    def start_task(self, func: Callable[[], Any], name: str) -> None:
        """Run a helper task (bus forwarders) in the system's task group."""
        self._runtime.start_task(func, name)

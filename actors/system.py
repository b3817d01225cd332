"""`ActorSystem`: actors as tasks of one anyio task group (structured concurrency).

    async with ActorSystem() as system:
        ref = system.spawn(Counter, name="counter")
        await ref.tell(Add(n=2))
        total = await ref.ask(Get(), expect=int)
    # leaving the block shuts the system down gracefully; no task outlives it

Shutdown rule: no new actor may be spawned; top-level actors stop newest first, each by the
graceful stop rule of `actors.cell` (close the mailbox, handle what it already accepted, stop
its children newest first, run `on_stop`). If that takes longer than `grace` seconds, every
actor still running is aborted: its task is cancelled (no `on_stop`), its pending `ask`s get
`ActorStopped` and its pending `tell`s are counted in `rejected`. Bus streams are closed
last. Leaving the block with an exception aborts at once. A failure escalated by a
top-level actor aborts the system and `__aexit__` raises `EscalationError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from actors.actor import Actor
from actors.cell import Cell
from actors.deadlines import AskDeadlines
from actors.errors import ActorStopped, EscalationError
from actors.ref import ActorRef
from actors.supervision import Restart, SupervisionPolicy

if TYPE_CHECKING:
    from actors.bus import Bus

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
        self.rejected = 0
        """Pending `tell`s rejected by aborts and supervision stops, over the system's life."""
        self._tg: TaskGroup | None = None
        self._top: list[Cell[Any]] = []
        self._live: dict[str, Cell[Any]] = {}
        self._ids = itertools.count(1)
        self._closing = False
        self._failure: EscalationError | None = None
        self._bus: Bus | None = None
        self._deadlines = AskDeadlines()
        self._timer = anyio.CancelScope()

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> ActorSystem:
        if self._tg is not None:
            raise RuntimeError("an ActorSystem can be entered only once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        tg.start_soon(self._run_timer, name="actors:ask-deadlines")
        return self

    async def _run_timer(self) -> None:
        with self._timer:
            await self._deadlines.run()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        assert tg is not None
        try:
            if exc is None and self._failure is None:
                with anyio.CancelScope(shield=True):
                    await self.shutdown()
            else:
                self._abort_all()
        finally:
            try:
                handled = await tg.__aexit__(exc_type, exc, tb)
            except BaseExceptionGroup as group:
                # The body's own exception comes back wrapped by the task group: unwrap it.
                if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                    return False
                raise
        if self._failure is not None:
            raise self._failure
        return handled

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop every actor by the shutdown rule (see the module docstring)."""
        self._closing = True
        with anyio.move_on_after(self.grace if grace is None else grace):
            for cell in list(reversed(self._top)):  # a snapshot: stopped cells leave _top
                await cell.stop()
        self._abort_all()
        for cell in list(self._live.values()):
            await cell.done.wait()

    def _abort_all(self) -> None:
        self._closing = True
        for cell in reversed(list(self._live.values())):
            cell.abort()
        if self._bus is not None:
            self._bus.close()
        self._timer.cancel()  # every pending ask settles: its actor rejects it as it ends

    def _fail(self, actor: str, error: BaseException) -> None:
        """A top-level actor escalated: abort everything; `__aexit__` raises."""
        if self._failure is None:
            self._failure = EscalationError(actor, error)
        self._abort_all()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

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
        tg = self._tg
        if tg is None:
            raise RuntimeError("spawn needs a running system: use `async with ActorSystem() as s:`")
        if self._closing:
            raise ActorStopped("system", "it is shutting down and spawns no new actor")
        capacity = self.mailbox if mailbox is None else mailbox
        if capacity < 1:
            raise ValueError(f"mailbox capacity must be >= 1, got {capacity}")
        parent_cell = None if parent is None else parent._cell
        if parent_cell is not None and not parent_cell.accepting:
            raise ActorStopped(parent_cell.name, "a stopping actor spawns no child")
        if name is None:
            name = f"{getattr(factory, '__name__', 'actor').lower()}-{next(self._ids)}"
        if not name or "/" in name:
            raise ValueError(f"actor name must be non-empty and without '/', got {name!r}")
        full = name if parent_cell is None else f"{parent_cell.name}/{name}"
        if full in self._live:
            raise ValueError(f"an actor named {full!r} is already running; choose another name")
        cell: Cell[M] = Cell(self, full, factory, policy, capacity, self.batch, parent_cell)
        self._live[full] = cell
        if parent_cell is None:
            self._top.append(cell)
        else:
            parent_cell.children.append(cell)
        tg.start_soon(cell.run, name=f"actor:{full}")
        return cell.ref

    async def stop(self, ref: ActorRef[Any], grace: float | None = None) -> None:
        """Stop one actor (see `ActorRef.stop`) and wait for it."""
        await ref.stop(grace)

    def lookup(self, name: str) -> ActorRef[Any] | None:
        """The ref of the live actor called `name`, if any."""
        cell = self._live.get(name)
        return None if cell is None else cell.ref

    @property
    def actors(self) -> tuple[str, ...]:
        """Names of the live actors, in spawn order."""
        return tuple(self._live)

    def _forget(self, cell: Cell[Any]) -> None:
        if self._live.get(cell.name) is cell:
            del self._live[cell.name]
        if cell.parent is None:
            if cell in self._top:
                self._top.remove(cell)
        elif cell in cell.parent.children:
            cell.parent.children.remove(cell)

    # -- services -----------------------------------------------------------------------

    @property
    def bus(self) -> Bus:
        """The system's topic bus (created on first use)."""
        if self._bus is None:
            from actors.bus import Bus

            self._bus = Bus(self)
        return self._bus

    def start_task(self, func: Callable[[], Any], name: str) -> None:
        """Run a helper task (bus forwarders) in the system's task group."""
        if self._tg is None:
            raise RuntimeError("the actor system is not running")
        self._tg.start_soon(func, name=name)

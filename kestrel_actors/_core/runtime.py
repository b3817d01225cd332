"""`Runtime`: the host of one actor system's cells (the `CellHost` of `kestrel_actors._core.cell`).

It owns what the cells share: the anyio task group every actor runs in (structured
concurrency: nothing outlives it), the registry of live cells, the clock, the ask-deadline
timer, the count of rejected tells and the escalation failure. `ActorSystem` is its public
facade; cells see it only through the `CellHost` protocol.

Shutdown rule: no new actor may be spawned; top-level actors stop newest first, each by the
graceful stop rule of `kestrel_actors._core.cell` (close the mailbox, handle what it already
accepted, stop its children newest first, run `on_stop`). If that takes longer than `grace`
seconds (on the clock), every actor still running is aborted: its task is cancelled (no
`on_stop`), its pending `ask`s get `ActorStopped` and its pending `tell`s are counted in
`rejected`. The abort hooks (the bus closing its streams) run last. Leaving the system's
block with an exception aborts at once. A failure escalated by a top-level actor aborts the
system and `close` raises `EscalationError`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from kestrel_actors._core.cell import Cell
from kestrel_actors._core.clock import Clock
from kestrel_actors._core.deadlines import AskDeadlines
from kestrel_actors._core.ref import ActorRef
from kestrel_actors._core.actor import Actor
from kestrel_actors._core.errors import EscalationError
from kestrel_actors._core.supervision import SupervisionPolicy

if TYPE_CHECKING:
    from kestrel_actors._core.system import ActorSystem

M = TypeVar("M")


class Runtime:
    """Cells, their task group, clock and ask timer for one `ActorSystem`."""

    def __init__(self, system: ActorSystem, clock: Clock) -> None:
        self.system = system
        self.clock = clock
        self.deadlines = AskDeadlines(clock)
        self.rejected = 0
        """Pending `tell`s rejected by aborts and supervision stops, over the system's life."""
        self.closing = False
        """Set once shutdown or an abort began: no new actor may be spawned."""
        self.failure: EscalationError | None = None
        self.live: dict[str, Cell[Any]] = {}
        """Every cell whose task has not ended, by full name, in spawn order."""
        self._top: list[Cell[Any]] = []
        self._tg: TaskGroup | None = None
        self._timer = anyio.CancelScope()
        self._abort_hooks: list[Callable[[], None]] = []

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def entered(self) -> bool:
        """True once `open` ran (a runtime is opened at most once)."""
        return self._tg is not None

    async def open(self) -> None:
        """Start the task group and the ask-deadline timer."""
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        tg.start_soon(self._run_timer, name="actors:ask-deadlines")

    async def _run_timer(self) -> None:
        with self._timer:
            await self.deadlines.run()

    async def close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        grace: float,
    ) -> bool | None:
        """Leave the task group: shut down within `grace` (or abort if the body raised)."""
        tg = self._tg
        assert tg is not None
        try:
            if exc is None and self.failure is None:
                with anyio.CancelScope(shield=True):
                    await self.shutdown(grace)
            else:
                self.abort_all()
        finally:
            try:
                handled = await tg.__aexit__(exc_type, exc, tb)
            except BaseExceptionGroup as group:
                # The body's own exception comes back wrapped by the task group: unwrap it.
                if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                    return False
                raise
        if self.failure is not None:
            raise self.failure
        return handled

    async def shutdown(self, grace: float) -> None:
        """Stop every actor by the shutdown rule (see the module docstring)."""
        self.closing = True
        clock = self.clock
        with clock.move_on_at(clock.now() + grace):
            for cell in list(reversed(self._top)):  # a snapshot: stopped cells leave _top
                await cell.stop()
        self.abort_all()
        for cell in list(self.live.values()):
            await cell.done.wait()

    def at_abort(self, hook: Callable[[], None]) -> None:
        """Run `hook` when the system aborts, after every actor was aborted."""
        self._abort_hooks.append(hook)

    def abort_all(self) -> None:
        """Abort every live actor (newest first), run the abort hooks, end the timer."""
        self.closing = True
        for cell in reversed(list(self.live.values())):
            cell.abort()
        for hook in self._abort_hooks:
            hook()
        self._timer.cancel()  # every pending ask settles: its actor rejects it as it ends

    # -- the cell host ------------------------------------------------------------------

    def fail(self, actor: str, error: BaseException) -> None:
        """A top-level actor escalated: abort everything; `close` raises."""
        if self.failure is None:
            self.failure = EscalationError(actor, error)
        self.abort_all()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def forget(self, cell: Cell[Any]) -> None:
        if self.live.get(cell.name) is cell:
            del self.live[cell.name]
        parent = cell.parent
        if parent is None:
            if cell in self._top:
                self._top.remove(cell)
        elif cell in parent.children:
            parent.children.remove(cell)

    def count_rejected(self) -> None:
        self.rejected += 1

    # -- cells --------------------------------------------------------------------------

    def cell_of(self, ref: ActorRef[Any]) -> Cell[Any] | None:
        """The live cell behind `ref`, or None once its task has ended."""
        cell = self.live.get(ref.name)
        return cell if cell is not None and cell.ref is ref else None

    def start(
        self,
        factory: Callable[[], Actor[M]],
        name: str,
        policy: SupervisionPolicy,
        capacity: int,
        batch: int,
        parent: Cell[Any] | None,
    ) -> Cell[M]:
        """Register a cell for a new actor (its full `name` is free) and start its task."""
        tg = self._tg
        assert tg is not None
        cell: Cell[M] = Cell(self, name, factory, policy, capacity, batch, parent)
        self.live[name] = cell
        if parent is None:
            self._top.append(cell)
        else:
            parent.children.append(cell)
        tg.start_soon(cell.run, name=f"actor:{name}")
        return cell

    def start_task(self, func: Callable[[], Any], name: str) -> None:
        """Run a helper task (bus forwarders) in the system's task group."""
        if self._tg is None:
            raise RuntimeError("the actor system is not running")
        self._tg.start_soon(func, name=name)

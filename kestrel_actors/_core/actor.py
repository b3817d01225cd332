"""`Actor`: owns its state and handles one message at a time.

Subclass it and implement `receive`; its return value is the reply to an `ask` (and is
discarded for a `tell`). The runtime never calls `receive` concurrently on one actor, so an
actor's attributes need no lock. `ctx` is set by the runtime before `on_start` runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kestrel_actors._core.supervision import Restart, SupervisionPolicy

if TYPE_CHECKING:
    from kestrel_actors._core.cell import Cell
    from kestrel_actors._core.ref import ActorRef
    from kestrel_actors._core.system import ActorSystem

M = TypeVar("M")
C = TypeVar("C")


class ActorContext(Generic[M]):
    """What an actor knows about its place in the system: its ref, its parent, its children."""

    __slots__ = ("_cell",)

    def __init__(self, cell: Cell[M]) -> None:
        self._cell = cell

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def self_ref(self) -> ActorRef[M]:
        return self._cell.ref

    @property
    def parent(self) -> ActorRef[Any] | None:
        parent = self._cell.parent
        return None if parent is None else parent.ref

    @property
    def system(self) -> ActorSystem:
        return self._cell.system

    def spawn(
        self,
        factory: Callable[[], Actor[C]],
        *,
        name: str,
        policy: SupervisionPolicy = Restart(),
        mailbox: int | None = None,
    ) -> ActorRef[C]:
        """Spawn a child actor supervised by this one (named `<parent>/<name>`)."""
        return self._cell.system.spawn(
            factory, name=name, policy=policy, mailbox=mailbox, parent=self._cell.ref
        )

    def stop(self) -> None:
        """Stop this actor once the messages already in its mailbox are handled."""
        self._cell.request_stop()


class Actor(ABC, Generic[M]):
    """Base class of actors; `M` is the type of message the actor accepts."""

    ctx: ActorContext[M]

    async def on_start(self) -> None:
        """Runs before the first message (and after each restart, on the fresh instance)."""

    async def on_stop(self) -> None:
        """Runs once the actor has stopped handling messages (also on a replaced instance)."""

    @abstractmethod
    async def receive(self, message: M) -> object:
        """Handle one message; the return value answers an `ask`."""

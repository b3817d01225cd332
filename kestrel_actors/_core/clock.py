"""`Clock`: the runtime's one source of time, injectable.

Every timing decision of the runtime goes through the `Clock` of its `ActorSystem`: ask
deadlines (the `AskDeadlines` timer and the wait for mailbox room), restart windows, a stop's
grace period and the shutdown grace. The default `EventLoopClock` is the event loop's own
monotonic clock (`anyio.current_time`, anyio sleeps and cancel-scope deadlines), so a system
built without a clock behaves exactly as one on the plain event loop. A test injects a virtual
clock instead (`kestrel_actors.testing.VirtualClock`) to run timing behaviour on virtual time.

Invariants a clock keeps:
- `now()` never goes backwards.
- `move_on_at(deadline)` is a cancel scope that is cancelled once `now()` reaches `deadline`
  (at once if it already has); its `cancelled_caught` says whether the deadline cut the body.
- `sleep_until(deadline)` returns once `now()` has reached `deadline`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

import anyio
from anyio import CancelScope


class Clock(Protocol):
    """Time as the actor runtime sees it (seconds, monotonic, arbitrary origin)."""

    def now(self) -> float:
        """The current time."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Wait until `now()` reaches `deadline`."""
        ...

    def move_on_at(self, deadline: float) -> AbstractContextManager[CancelScope]:
        """A cancel scope cancelled when `now()` reaches `deadline` (see the module doc)."""
        ...


class EventLoopClock:
    """The default clock: the event loop's monotonic time, anyio's sleeps and deadlines."""

    __slots__ = ()

    now = staticmethod(anyio.current_time)
    sleep = staticmethod(anyio.sleep)
    sleep_until = staticmethod(anyio.sleep_until)

    @staticmethod
    def move_on_at(deadline: float) -> CancelScope:
        return CancelScope(deadline=deadline)

    def __repr__(self) -> str:
        return "EventLoopClock()"

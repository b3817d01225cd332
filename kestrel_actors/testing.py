"""Test support for the actor runtime: `VirtualClock`, virtual time on asyncio and trio.

    async with VirtualClock() as clock, ActorSystem(clock=clock) as system:
        ref = system.spawn(Stuck, name="stuck")
        with pytest.raises(AskTimeout):
            await ref.ask(Hang(), timeout=30)   # returns at once, in real time
        assert clock.now() == 30.0

A `VirtualClock` is a `kestrel_actors.clock.Clock` whose time moves only when told: `advance(seconds)`
moves it by hand, and, inside `async with clock:`, the *autojump* moves it by itself. The
autojump rule (trio's `MockClock(autojump_threshold=0)`, portable through anyio): whenever
every task of the event loop is blocked (`anyio.wait_all_tasks_blocked`) and a timer of the
clock is pending, time jumps to the earliest timer and fires it (and every other timer due
then). So a test whose tasks wait on timeouts, grace periods or sleeps of the clock runs
without real waiting, and its timing is exact: a timer fires at its own deadline, never
late, and the tasks it wakes run before time moves again.

Invariants:
- `now()` never goes backwards; it changes only in `advance` and in an autojump.
- Timers fire in deadline order (ties in registration order), each at its own deadline.
- A task blocked outside the clock (an `anyio.Event`, a socket, a thread) counts as blocked:
  time may jump while it waits, as real time would pass. A task waiting in
  `wait_all_tasks_blocked` counts as blocked too, so a test that waits for the system to
  settle while a timer is pending may see that timer fire; wait for an event instead.
- Only the clock's own timers move it: anyio's `sleep`, `fail_after` and cancel-scope
  deadlines keep real time (a `fail_after` around a test is a real-time safety net).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from heapq import heappop, heappush
from types import TracebackType

import anyio
from anyio import CancelScope
from anyio.abc import TaskGroup
from anyio.lowlevel import checkpoint

__all__ = ["VirtualClock"]

_SETTLE = 4
"""Checkpoints the autojump takes before it asks whether every task is blocked: tasks that
only yield (an idle actor spins twice before it parks) settle first, so the check, which on
asyncio sleeps 0.1 s of real time whenever it finds a runnable task, rarely finds one."""


class _Timer:
    """One pending wake-up: `fire` runs once when time reaches its deadline, unless dropped."""

    __slots__ = ("fire", "live")

    def __init__(self, fire: Callable[[], object]) -> None:
        self.fire = fire
        self.live = True


class _MoveOnAt:
    """`VirtualClock.move_on_at`: a cancel scope cancelled when the clock reaches `deadline`."""

    __slots__ = ("_clock", "_deadline", "_scope", "_timer")

    def __init__(self, clock: VirtualClock, deadline: float) -> None:
        self._clock = clock
        self._deadline = deadline
        self._scope = CancelScope()
        self._timer: _Timer | None = None

    def __enter__(self) -> CancelScope:
        scope = self._scope.__enter__()
        self._timer = self._clock.call_at(self._deadline, scope.cancel)
        return scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._timer is not None:
            self._timer.live = False
        return bool(self._scope.__exit__(exc_type, exc, tb))


class VirtualClock:
    """A `Clock` on virtual time for tests (see the module docstring).

    `start` is the initial time. With `autojump=False`, `async with` runs no autojump and
    only `advance` moves time.
    """

    def __init__(self, start: float = 0.0, *, autojump: bool = True) -> None:
        self._now = float(start)
        self._timers: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()
        self._autojump = autojump
        self._added: anyio.Event | None = None
        self._tg: TaskGroup | None = None
        self.jumps = 0
        """How many times the autojump moved time (a test can check that time moved)."""

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now!r}, timers={self.pending_timers})"

    # -- the Clock protocol -------------------------------------------------------------

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + seconds)

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            await checkpoint()
            return
        event = anyio.Event()
        timer = self.call_at(deadline, event.set)
        try:
            await event.wait()
        finally:
            timer.live = False

    def move_on_at(self, deadline: float) -> _MoveOnAt:
        return _MoveOnAt(self, deadline)

    # -- timers -------------------------------------------------------------------------

    def call_at(self, deadline: float, fire: Callable[[], object]) -> _Timer:
        """Call `fire()` once time reaches `deadline` (now, if it already has).

        Returns the timer; setting its `live` to False drops it unfired.
        """
        timer = _Timer(fire)
        if not deadline > self._now:
            timer.live = False
            fire()
            return timer
        if math.isinf(deadline):
            return timer  # never due: nothing to wait for
        heappush(self._timers, (deadline, next(self._seq), timer))
        added = self._added
        if added is not None:
            self._added = None
            added.set()
        return timer

    @property
    def pending_timers(self) -> int:
        """Timers registered and not yet fired or dropped."""
        return sum(1 for _, _, timer in self._timers if timer.live)

    def next_deadline(self) -> float | None:
        """The earliest pending timer's deadline, if any."""
        timers = self._timers
        while timers and not timers[0][2].live:
            heappop(timers)
        return timers[0][0] if timers else None

    def _fire_next(self) -> None:
        """Move time to the earliest pending deadline and fire every timer due then."""
        deadline = self.next_deadline()
        if deadline is None:
            return
        self._now = max(self._now, deadline)
        timers = self._timers
        while timers and timers[0][0] <= self._now:
            timer = heappop(timers)[2]
            if timer.live:
                timer.live = False
                timer.fire()

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, firing each timer due meanwhile at its own deadline
        and letting the tasks it wakes run (until all are blocked) before the next one."""
        if not seconds >= 0:
            raise ValueError(f"a clock advances by >= 0 seconds, got {seconds!r}")
        target = self._now + seconds
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            self._fire_next()
            await anyio.wait_all_tasks_blocked()
        self._now = max(self._now, target)
        await checkpoint()

    # -- the autojump -------------------------------------------------------------------

    async def __aenter__(self) -> VirtualClock:
        if self._tg is not None:
            raise RuntimeError("a VirtualClock can be entered only once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        if self._autojump:
            tg.start_soon(self._run_autojump, name="kestrel_actors.testing:autojump")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        assert tg is not None
        tg.cancel_scope.cancel()  # the autojump task: the body's own tasks have ended
        try:
            return await tg.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The body's own exception comes back wrapped by the task group: unwrap it.
            if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                return False
            raise

    async def _run_autojump(self) -> None:
        while True:
            if self.next_deadline() is None:
                added = self._added = anyio.Event()
                await added.wait()
                continue
            for _ in range(_SETTLE):
                await checkpoint()
            await anyio.wait_all_tasks_blocked()
            if self.next_deadline() is not None:
                self.jumps += 1
                self._fire_next()

"""`AskDeadlines`: one timer task per system times out every pending `ask`.

Why not a cancel scope per `ask`: entering and leaving an anyio cancel scope costs about as
much as the whole round trip through the mailbox (measured: ~40% of an `ask` on both
asyncio and trio), so `ask` registers its reply slot here instead and simply waits for it.

Invariants:
- Every registered slot whose deadline passes while it is still unsettled is expired
  (`AskEnvelope.expire`), waking its asker, within one scheduler round of the deadline.
- Deadlines are read on the system's `Clock`, and the timer sleeps until the earliest
  registered deadline with that clock's `move_on_at`; a newly registered earlier deadline
  wakes it. With one timeout value deadlines arrive in order, so it wakes about once per
  timeout period, not once per ask.
- Memory is bounded by the number of unsettled asks: settled slots are dropped when they
  reach the top of the heap, and the heap is compacted whenever it doubles.
"""

from __future__ import annotations

import itertools
import math
from heapq import heapify, heappop, heappush

import anyio

from kestrel_actors._core.clock import Clock
from kestrel_actors._core.envelope import AskEnvelope

_MIN_COMPACT = 1024


class AskDeadlines:
    """Deadline heap of pending asks, served by `run` (a task of the actor system)."""

    __slots__ = ("_clock", "_heap", "_seq", "_armed", "_wake", "_limit")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, AskEnvelope]] = []
        self._seq = itertools.count()
        self._armed = -math.inf  # the deadline the timer sleeps towards (inf: idle)
        self._wake: anyio.Event | None = None
        self._limit = _MIN_COMPACT

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, deadline: float, envelope: AskEnvelope) -> None:
        """Expire `envelope` at `deadline` (on the clock) unless settled before."""
        heap = self._heap
        heappush(heap, (deadline, next(self._seq), envelope))
        if deadline < self._armed:
            self._armed = deadline
            assert self._wake is not None
            self._wake.set()
        if len(heap) > self._limit:
            heap[:] = [entry for entry in heap if not entry[2].settled]
            heapify(heap)
            self._limit = max(_MIN_COMPACT, 2 * len(heap))

    async def run(self) -> None:
        """Expire due slots, then sleep until the next deadline; runs until cancelled."""
        heap = self._heap
        clock = self._clock
        while True:
            now = clock.now()
            while heap and (heap[0][0] <= now or heap[0][2].settled):
                heappop(heap)[2].expire()  # a no-op on a settled slot
            wake = self._wake = anyio.Event()
            if heap:
                self._armed = heap[0][0]
                with clock.move_on_at(self._armed):
                    await wake.wait()
            else:
                self._armed = math.inf
                await wake.wait()

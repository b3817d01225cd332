"""`FeedActor`: replays a session's ticks to the engine in columnar batches, up to a barrier.

Simulated time is a barrier: the feed sends a day's stretches of ticks (`SessionDay.stretch`:
up to ordinal i's cutoff, then its authoring window up to the ordinal's time, ...) only when
the driver releases them (`AdvanceTo(k)`), and the driver releases ordinal `i`'s window only
once its turn is authored, and ordinal `i+1`'s ticks only after that turn is armed. So no result depends on scheduling or on how long
the agent takes. The reply to `AdvanceTo` comes after every batch is in the engine's mailbox
(ahead of anything the driver sends the engine next).

With a `Pace` the feed also releases ticks by the system's clock (`speed` times real time,
anchored at each day's open; ticks before `resume_ns` go at once, for a resumed run): it
sends the ticks already due, sleeps until the next one is, and answers `AdvanceTo(k)` once the
clock reaches the stretch's end (ordinal i's cutoff for 2i, its time for 2i+1), so agents
author at the real ordinals. The barrier is
unchanged, so the ledger never depends on the pace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from kestrel_actors.actor import Actor
from kestrel.service.actors.engine import TickBatch
from kestrel_actors.ref import ActorRef
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.session.runner import SessionDay

DEFAULT_BATCH_TICKS = 65536
"""Ticks per `TickBatch` (~2.6 MB of columns at most). Large on purpose: the engine's fast
path pays a fixed cost per batch, and the barrier is per ordinal, not per batch."""


PACE_TICK_S = 0.005
"""Shortest sleep of a paced feed: ticks due within it go out in one batch."""


class Pace(msgspec.Struct, frozen=True):
    """Release ticks at `speed` times real time; ticks at or before `resume_ns` at once."""

    speed: float
    resume_ns: int = 0


class LoadDay(msgspec.Struct, frozen=True, tag="load_day"):
    index: int


class AdvanceTo(msgspec.Struct, frozen=True, tag="advance"):
    """Send every stretch of the day up to and including stretch `stretch` (`SessionDay.stretch`:
    2i ends at ordinal i's cutoff, 2i+1 at its time, 2n is the tail to the close)."""

    stretch: int


class Advanced(msgspec.Struct, frozen=True):
    ticks: int


FeedMessage = LoadDay | AdvanceTo


class FeedActor(Actor[FeedMessage]):
    def __init__(self, days: Sequence[SessionDay], engine: ActorRef[Any], batch: int = DEFAULT_BATCH_TICKS,
                 pace: Pace | None = None) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1 tick, got {batch}")
        if pace is not None and not pace.speed > 0:
            raise ValueError(f"pace speed must be > 0, got {pace.speed}")
        self._days = list(days)
        self._engine = engine
        self._batch = batch
        self._pace = pace
        self._anchor: tuple[float, int] | None = None  # (wall clock, market ns) of the day
        self._day: SessionDay | None = None
        self._next = 0

    async def receive(self, message: FeedMessage) -> object:
        if isinstance(message, LoadDay):
            self._day = self._days[message.index]
            self._next = 0
            self._anchor = None
            return None
        day = self._day
        if day is None:
            raise RuntimeError("FeedActor: no day loaded (send LoadDay first)")
        if message.stretch < self._next:
            raise RuntimeError(
                f"FeedActor: stretch {message.stretch} is already behind the feed (at {self._next})"
            )
        sent = 0
        while self._next <= message.stretch:
            seg = day.stretch(self._next)
            if self._pace is None:
                sent += await self._send(seg)
            else:
                sent += await self._paced(day, seg, _stretch_end(day, self._next))
            self._next += 1
        return Advanced(sent)

    async def _send(self, seg: Ticks) -> int:
        for start in range(0, len(seg), self._batch):
            part = seg.slice(start, min(start + self._batch, len(seg)))
            await self._engine.tell(TickBatch.of(part))
        return len(seg)

    async def _paced(self, day: SessionDay, seg: Ticks, end_ns: int | None) -> int:
        """Send `seg` as its ticks fall due, then wait for `end_ns` (the cutoff) to be due."""
        assert self._pace is not None
        clock = self.ctx.system.clock  # the event loop's, or a test's virtual clock
        speed = self._pace.speed * NS_PER_S  # market ns per wall second
        if self._anchor is None:
            self._anchor = (clock.now(), max(day.session.open_ns, self._pace.resume_ns))
        wall0, market0 = self._anchor

        def due_at(ns: int) -> float:
            return wall0 + (ns - market0) / speed

        pos = 0
        while pos < len(seg):
            now_ns = market0 + (clock.now() - wall0) * speed
            due = int(np.searchsorted(seg.ts, now_ns, side="right"))
            if due > pos:
                await self._send(seg.slice(pos, due))
                pos = due
                continue
            await clock.sleep_until(max(due_at(int(seg.ts[pos])), clock.now() + PACE_TICK_S))
        if end_ns is not None and end_ns > market0:
            await clock.sleep_until(due_at(end_ns))
        return len(seg)


def _stretch_end(day: SessionDay, k: int) -> int | None:
    """Market time stretch `k` ends at: ordinal i's cutoff (2i), its time (2i+1); the tail none."""
    i, window = divmod(k, 2)
    if i >= len(day.ordinals):
        return None
    o = day.ordinals[i]
    return day.arm_time(i) if window else day.cutoff(o)


__all__ = [
    "DEFAULT_BATCH_TICKS",
    "PACE_TICK_S",
    "AdvanceTo",
    "Advanced",
    "FeedActor",
    "FeedMessage",
    "LoadDay",
    "Pace",
]

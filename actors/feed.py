"""`FeedActor`: replays a session's ticks to the engine in columnar batches, up to a barrier.

Simulated time is a barrier: the feed sends a day's stretches of ticks (`SessionDay.stretch`:
up to ordinal i's cutoff, then its authoring window up to the ordinal's time, ...) only when
the driver releases them (`AdvanceTo(k)`), and the driver releases ordinal `i`'s window only
once its turn is authored, and ordinal `i+1`'s ticks only after that turn is armed. So no result depends on scheduling or on how long
the agent takes. The reply to `AdvanceTo` comes after every batch is in the engine's mailbox
(ahead of anything the driver sends the engine next).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from actors.actor import Actor
from actors.engine import TickBatch
from actors.ref import ActorRef
from kestrel.session.runner import SessionDay

DEFAULT_BATCH_TICKS = 65536
"""Ticks per `TickBatch` (~2.6 MB of columns at most). Large on purpose: the engine's fast
path pays a fixed cost per batch, and the barrier is per ordinal, not per batch."""


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
    def __init__(self, days: Sequence[SessionDay], engine: ActorRef[Any], batch: int = DEFAULT_BATCH_TICKS) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1 tick, got {batch}")
        self._days = list(days)
        self._engine = engine
        self._batch = batch
        self._day: SessionDay | None = None
        self._next = 0

    async def receive(self, message: FeedMessage) -> object:
        if isinstance(message, LoadDay):
            self._day = self._days[message.index]
            self._next = 0
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
            for start in range(0, len(seg), self._batch):
                part = seg.slice(start, min(start + self._batch, len(seg)))
                await self._engine.tell(TickBatch.of(part))
                sent += len(part)
            self._next += 1
        return Advanced(sent)


__all__ = ["DEFAULT_BATCH_TICKS", "AdvanceTo", "Advanced", "FeedActor", "FeedMessage", "LoadDay"]

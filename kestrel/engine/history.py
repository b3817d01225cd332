"""A session's ticks: one tick as the engine processes it (`Tick`), and the history of the
session's ticks as one growing columnar buffer (`TickHistory`).

Invariants: `view()` is the concatenation of every batch appended so far, in order, as
`Ticks` views on the buffer (no copy); `append` copies the batch once into spare capacity
and doubles the capacity when full, so appending n ticks costs amortized O(n) whatever the
number of batches (the fast path and re-warming read the whole session without joining a
list of batches on every call). The first batch is held without a copy and never written.
Rows already appended are never written again, so a view taken earlier stays valid after
later appends.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec
import numpy as np

from kestrel.market.ticks import Ticks

_MIN_CAPACITY = 1024


class Tick(msgspec.Struct, frozen=True, gc=False):
    """One tick of the session: its index in the session (0 = the session's first tick), its
    time (ns UTC), touch and trade."""

    index: int
    ts: int
    bid: float
    ask: float
    last: float
    size: float


def rows(ticks: Ticks, first: int) -> Iterator[tuple[int, int, float, float, float, float]]:
    """`ticks` (session ticks first..) as (index, ts, bid, ask, last, size) of Python numbers,
    read through memoryviews (the values `tolist` would give, without building lists)."""
    return zip(range(first, first + len(ticks)), ticks.ts.data, ticks.bid.data, ticks.ask.data,
               ticks.last.data, ticks.size.data)


class Rows:
    """The ticks of `ticks` by row as `Tick`s (session tick first + row), read through
    memoryviews: Python numbers without a numpy scalar each."""

    __slots__ = ("first", "columns")

    def __init__(self, ticks: Ticks, first: int = 0) -> None:
        self.first = first
        self.columns = (ticks.ts.data, ticks.bid.data, ticks.ask.data, ticks.last.data,
                        ticks.size.data)

    def __getitem__(self, row: int) -> Tick:
        ts, bid, ask, last, size = self.columns
        return Tick(self.first + row, ts[row], bid[row], ask[row], last[row], size[row])


class TickHistory:
    """Append-only columnar buffer of a session's ticks."""

    __slots__ = ("_ts", "_bid", "_ask", "_last", "_size", "_n")

    def __init__(self) -> None:
        self._ts = np.empty(0, dtype=np.int64)
        self._bid = np.empty(0, dtype=np.float64)
        self._ask = np.empty(0, dtype=np.float64)
        self._last = np.empty(0, dtype=np.float64)
        self._size = np.empty(0, dtype=np.float64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, batch: Ticks) -> None:
        """Copy `batch` after the rows held (amortized O(len(batch)))."""
        k = len(batch)
        if k == 0:
            return
        n = self._n
        if n == 0:
            # the first batch is held as it is (no copy, like a list of batches would); its
            # arrays have no spare capacity, so the next append copies into a buffer of ours
            self._ts, self._bid, self._ask = batch.ts, batch.bid, batch.ask
            self._last, self._size = batch.last, batch.size
            self._n = k
            return
        if n + k > self._ts.shape[0]:
            cap = max(_MIN_CAPACITY, 2 * self._ts.shape[0], n + k)
            self._ts = self._grown(self._ts, cap)
            self._bid = self._grown(self._bid, cap)
            self._ask = self._grown(self._ask, cap)
            self._last = self._grown(self._last, cap)
            self._size = self._grown(self._size, cap)
        self._ts[n:n + k] = batch.ts
        self._bid[n:n + k] = batch.bid
        self._ask[n:n + k] = batch.ask
        self._last[n:n + k] = batch.last
        self._size[n:n + k] = batch.size
        self._n = n + k

    def _grown(self, column: np.ndarray, capacity: int) -> np.ndarray:
        out = np.empty(capacity, dtype=column.dtype)
        out[: self._n] = column[: self._n]
        return out

    def view(self) -> Ticks:
        """Every tick appended so far, as views (no copy)."""
        n = self._n
        return Ticks(self._ts[:n], self._bid[:n], self._ask[:n], self._last[:n], self._size[:n])


def accepted(batch: Ticks, clock: int | None) -> None:
    """Fail closed on a batch that breaks the `Ticks` invariants (timestamps going
    backwards; crossed quotes are allowed), has a non-finite bid, ask or last, or starts
    before the engine's clock (`clock`, None before the first tick)."""
    batch.validated(allow_crossed=True)
    bad = np.flatnonzero(~(np.isfinite(batch.bid) & np.isfinite(batch.ask) & np.isfinite(batch.last)))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"tick {k} of the batch has bid {batch.bid[k]} / ask {batch.ask[k]} / last "
            f"{batch.last[k]}: the engine needs finite prices on every tick (drop or fill those "
            "rows when loading)"
        )
    first = int(batch.ts[0])
    if clock is not None and first < clock:
        raise ValueError(
            f"ticks go back in time: batch starts at {first}, the engine is at {clock}; "
            "feed each session's ticks in timestamp order"
        )


def ticks_of(rows: Sequence[tuple[int, float, float]] | Sequence[tuple[int, float, float, float, float]]) -> Ticks:
    """Build `Ticks` from rows (ts, bid, ask[, last, size]) — a helper for tests and tools."""
    arr = list(zip(*rows))
    ts = np.asarray(arr[0], dtype=np.int64)
    if len(arr) >= 5:
        return Ticks.from_arrays(ts, arr[1], arr[2], arr[3], arr[4])
    return Ticks.from_arrays(ts, arr[1], arr[2])


__all__ = ["Rows", "Tick", "TickHistory", "accepted", "rows", "ticks_of"]

"""Columnar tick data: the one market-data representation every layer shares.

`Ticks` is the contract between the loaders and generator (`kestrel.data`), the frame
(snapshots, bars, panes) and the engine (which consumes batches of ticks).

Invariants (checked by `Ticks.validated`, assumed everywhere else):
- five numpy columns of equal length: `ts` int64 nanoseconds since the Unix epoch (UTC),
  `bid`, `ask`, `last`, `size` float64;
- `ts` is non-decreasing (equal timestamps keep their source order);
- `bid <= ask` for every row where both are finite, with one documented exception: data a
  loader was told to keep crossed quotes in (`crossed="keep"`) holds them as recorded, and its
  `MarketData.crossed_kept` is True. Consumers see such rows as they are: the quote pane marks a
  crossed touch, and the engine applies its fill rules to the recorded touch (a buy fills at
  the recorded ask even when it is below the bid). `validated(allow_crossed=True)` checks
  everything else;
- quote-only sources set `last` to the mid and `size` to 0; trade-only sources set
  `bid = ask = last`.
Slicing never copies: a slice is a view on the same arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

NS_PER_S = 1_000_000_000
# the columns' dtypes (native byte order), in field order: ts, bid, ask, last, size
_DTYPE = (np.dtype(np.int64), *(np.dtype(np.float64),) * 4)


@dataclass(frozen=True, slots=True)
class Ticks:
    """Columnar ticks; see the module docstring for invariants."""

    ts: I64
    bid: F64
    ask: F64
    last: F64
    size: F64

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    @classmethod
    def empty(cls) -> Ticks:
        f = np.empty(0, dtype=np.float64)
        return cls(np.empty(0, dtype=np.int64), f, f, f, f)

    @classmethod
    def from_arrays(
        cls,
        ts: npt.ArrayLike,
        bid: npt.ArrayLike,
        ask: npt.ArrayLike,
        last: npt.ArrayLike | None = None,
        size: npt.ArrayLike | None = None,
    ) -> Ticks:
        """Build from array-likes, coercing dtypes; `last` defaults to the mid and `size` to 0."""
        ts_a = np.ascontiguousarray(ts, dtype=np.int64)
        bid_a = np.ascontiguousarray(bid, dtype=np.float64)
        ask_a = np.ascontiguousarray(ask, dtype=np.float64)
        last_a = (
            (bid_a + ask_a) / 2.0 if last is None else np.ascontiguousarray(last, dtype=np.float64)
        )
        size_a = (
            np.zeros_like(bid_a) if size is None else np.ascontiguousarray(size, dtype=np.float64)
        )
        return cls(ts_a, bid_a, ask_a, last_a, size_a).validated()

    def canonical(self) -> Ticks:
        """These ticks in the layout the engine reads (int64 `ts`, float64 columns, native
        byte order, contiguous): `self` when they already are, else a converted copy (a float32
        or integer price converts exactly below 2**53). A `ts` that is not integer, or a column
        that is not numeric, raises ValueError: convert it when loading."""
        cols = (self.ts, self.bid, self.ask, self.last, self.size)
        if all(c.dtype == _DTYPE[k] and c.flags.c_contiguous for k, c in enumerate(cols)):
            return self
        names = ("ts", "bid", "ask", "last", "size")
        for k, (name, c) in enumerate(zip(names, cols)):
            kinds = "iu" if k == 0 else "iuf"
            if not isinstance(c, np.ndarray) or c.dtype.kind not in kinds:
                want = "int64 nanoseconds" if k == 0 else "float64"
                got = c.dtype if isinstance(c, np.ndarray) else type(c).__name__
                raise ValueError(f"column {name!r} has dtype {got}, expected {want}")
        f64 = np.float64
        return Ticks(np.ascontiguousarray(self.ts, dtype=np.int64),
                     np.ascontiguousarray(self.bid, dtype=f64), np.ascontiguousarray(self.ask, dtype=f64),
                     np.ascontiguousarray(self.last, dtype=f64), np.ascontiguousarray(self.size, dtype=f64))

    def validated(self, *, allow_crossed: bool = False) -> Ticks:
        """Check the invariants; raise ValueError naming the first offending row.
        `allow_crossed` skips the bid <= ask check (data loaded with crossed="keep")."""
        n = len(self)
        for name in ("bid", "ask", "last", "size"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"column {name!r} has length {getattr(self, name).shape}, expected {n}")
        if n > 1:
            back = np.flatnonzero(self.ts[1:] < self.ts[:-1])
            if back.size:
                i = int(back[0]) + 1
                raise ValueError(f"timestamps go backwards at row {i}: {self.ts[i]} < {self.ts[i - 1]}")
        crossed = np.flatnonzero(self.ask < self.bid) if not allow_crossed else np.empty(0, np.int64)
        if crossed.size:
            i = int(crossed[0])
            raise ValueError(
                f"crossed quote at row {i}: ask {self.ask[i]} < bid {self.bid[i]} "
                f"({crossed.size} crossed rows in all)"
            )
        return self

    def slice(self, start: int, stop: int) -> Ticks:
        """Rows [start, stop) as views on the same arrays."""
        return Ticks(
            self.ts[start:stop],
            self.bid[start:stop],
            self.ask[start:stop],
            self.last[start:stop],
            self.size[start:stop],
        )

    def index_at(self, t_ns: int, *, side: str = "right") -> int:
        """Number of rows with ts <= t_ns (side="right") or ts < t_ns (side="left")."""
        return int(np.searchsorted(self.ts, t_ns, side=side))  # type: ignore[call-overload]

    def until(self, t_ns: int) -> Ticks:
        """Rows with ts <= t_ns (no copy)."""
        return self.slice(0, self.index_at(t_ns))

    def between(self, start_ns: int, end_ns: int) -> Ticks:
        """Rows with start_ns <= ts < end_ns (no copy)."""
        return self.slice(self.index_at(start_ns, side="left"), self.index_at(end_ns, side="left"))

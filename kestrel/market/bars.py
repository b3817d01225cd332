"""OHLCV + VWAP bars derived from ticks with numpy (no Python loop per tick).

Invariants:
- a bar aggregates the ticks sharing one integer bucket key, keys non-decreasing in tick order;
- prices come from `last`, volume from `size`; `vwap` is sum(last*size)/sum(size), or the
  plain mean of `last` over the bar when its volume is 0 (same rule as the session `vwap`);
- time bars are aligned on the session's wall clock: bucket = (ts + utc_offset) // tf, where
  the offset may differ per tick (history spanning a DST switch: each session its own);
- `start_ns` is the bar's nominal start (bucket boundary, UTC ns), not its first tick's time;
  `local_ns` is the same instant on the wall clock it was aligned on (for labels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kestrel.market.ticks import F64, I64, NS_PER_S, Ticks

MIN_TF_S = 60
DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class Bars:
    """Columnar bars; every column has one row per non-empty bucket."""

    start_ns: I64
    open: F64
    high: F64
    low: F64
    close: F64
    volume: F64
    vwap: F64
    count: I64
    tf_s: int
    local_ns: I64

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    def slice(self, start: int, stop: int) -> Bars:
        """Bars [start, stop) (views)."""
        s = slice(start, stop)
        return Bars(
            self.start_ns[s], self.open[s], self.high[s], self.low[s], self.close[s],
            self.volume[s], self.vwap[s], self.count[s], self.tf_s, self.local_ns[s],
        )

    def tail(self, n: int) -> Bars:
        """The last `n` bars (views)."""
        return self.slice(max(0, len(self) - n), len(self))


def aggregate(ticks: Ticks, keys: I64, starts: I64, tf_s: int, local: I64) -> Bars:
    """Aggregate ticks by non-decreasing `keys`; `starts[i]` is tick i's bucket start (UTC ns)
    and `local[i]` the same on its wall clock."""
    n = len(ticks)
    if n == 0:
        e_i = np.empty(0, dtype=np.int64)
        e_f = np.empty(0, dtype=np.float64)
        return Bars(e_i, e_f, e_f, e_f, e_f, e_f, e_f, e_i, tf_s, e_i)
    brk = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    first = np.concatenate((np.zeros(1, dtype=np.int64), brk.astype(np.int64)))
    ends = np.concatenate((brk.astype(np.int64), np.array([n], dtype=np.int64)))
    last = ticks.last
    size = ticks.size
    vol = np.add.reduceat(size, first)
    pv = np.add.reduceat(last * size, first)
    total = np.add.reduceat(last, first)
    count = ends - first
    safe = np.where(vol > 0, vol, 1.0)
    vwap = np.where(vol > 0, pv / safe, total / count)
    return Bars(
        start_ns=np.ascontiguousarray(starts[first], dtype=np.int64),
        open=last[first],
        high=np.maximum.reduceat(last, first),
        low=np.minimum.reduceat(last, first),
        close=last[ends - 1],
        volume=vol,
        vwap=vwap,
        count=count,
        tf_s=tf_s,
        local_ns=np.ascontiguousarray(local[first], dtype=np.int64),
    )


def time_bars(ticks: Ticks, tf_s: int, utc_offset_ns: int | I64 = 0) -> Bars:
    """Bars of `tf_s` seconds aligned on the wall clock at `utc_offset_ns` from UTC (one
    offset, or one per tick)."""
    if tf_s <= 0:
        raise ValueError(f"timeframe must be positive, got {tf_s}s")
    tf_ns = tf_s * NS_PER_S
    keys = (ticks.ts + utc_offset_ns) // tf_ns
    local = keys * tf_ns
    return aggregate(ticks, keys, local - utc_offset_ns, tf_s, local)


def session_bars(ticks: Ticks, open_ns: I64, utc_offset_ns: I64 | None = None) -> Bars:
    """One bar per session: tick i belongs to the latest session with open <= ts (ticks
    before the first open are dropped). `utc_offset_ns[k]` is session k's offset (for
    `local_ns`; default 0)."""
    idx = np.searchsorted(open_ns, ticks.ts, side="right").astype(np.int64) - 1
    k = int(np.searchsorted(idx, 0, side="left"))
    view = ticks.slice(k, len(ticks))
    keys = idx[k:]
    starts = open_ns[keys] if len(keys) else keys
    local = starts + (utc_offset_ns[keys] if utc_offset_ns is not None and len(keys) else 0)
    return aggregate(view, keys, starts, DAY_S, local)

"""Multi-session market data for one instrument: ticks plus the sessions they belong to.

Invariants:
- `sessions` are ordered by open and do not overlap; `session_open_ns`/`session_close_ns`
  mirror them as int64 arrays (UTC ns) for vectorized lookups, `session_offset_ns` holds
  each session's wall-clock offset from UTC (at its open);
- `tick_size` > 0; prices render with `price_decimals` decimals (the tick's precision);
- slicing (`until`, `between`) never copies tick arrays: results are views;
- `crossed_kept` False means every row has bid <= ask; True means the loader was told to keep
  crossed quotes (`crossed="keep"`) and some rows have bid > ask (see `Ticks`);
- `instrument` describes what one unit is (tick size, contract multiplier, currency of prices
  and PnL, minimum quantity); its `symbol` and `tick_size` equal the data's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from kestrel.market.session import SessionSpec
from kestrel.market.ticks import I64, Ticks
from kestrel.market.instrument import Instrument, decimals_for


@dataclass(frozen=True, slots=True)
class MarketData:
    """One instrument's ticks over one or more sessions."""

    symbol: str
    tick_size: float
    ticks: Ticks
    sessions: tuple[SessionSpec, ...]
    crossed_kept: bool = False
    # None at construction means "derive from symbol and tick size"; always set afterwards.
    instrument: Instrument = field(default=cast(Instrument, None))
    price_decimals: int = field(init=False)
    session_open_ns: I64 = field(init=False, repr=False)
    session_close_ns: I64 = field(init=False, repr=False)
    session_offset_ns: I64 = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "price_decimals", decimals_for(self.tick_size))
        if cast(Instrument | None, self.instrument) is None:
            object.__setattr__(self, "instrument", Instrument(symbol=self.symbol, tick_size=self.tick_size))
        elif (self.instrument.symbol, self.instrument.tick_size) != (self.symbol, self.tick_size):
            raise ValueError("instrument must name the data's symbol and tick size")
        opens = np.array([s.open_ns for s in self.sessions], dtype=np.int64)
        closes = np.array([s.close_ns for s in self.sessions], dtype=np.int64)
        if opens.size > 1 and np.any(opens[1:] < closes[:-1]):
            raise ValueError("sessions must be ordered by open and must not overlap")
        offsets = np.array([s.utc_offset_ns for s in self.sessions], dtype=np.int64)
        for name, arr in (("session_open_ns", opens), ("session_close_ns", closes),
                          ("session_offset_ns", offsets)):
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    def format_price(self, price: float) -> str:
        """`price` at the instrument's tick precision."""
        if not math.isfinite(price):
            return "n/a"
        return f"{price:.{self.price_decimals}f}"

    def session_index_at(self, t_ns: int) -> int:
        """Index of the latest session whose open is at or before `t_ns`; -1 if none."""
        return int(np.searchsorted(self.session_open_ns, t_ns, side="right")) - 1

    def until(self, t_ns: int) -> MarketData:
        """Ticks with ts <= t_ns and sessions opened at or before t_ns (views, no copy)."""
        k = self.session_index_at(t_ns) + 1
        return MarketData(self.symbol, self.tick_size, self.ticks.until(t_ns), self.sessions[:k],
                          self.crossed_kept, self.instrument)

    def between(self, start_ns: int, end_ns: int) -> MarketData:
        """Ticks with start_ns <= ts < end_ns and the sessions overlapping that span."""
        keep = tuple(s for s in self.sessions if s.close_ns > start_ns and s.open_ns < end_ns)
        return MarketData(self.symbol, self.tick_size, self.ticks.between(start_ns, end_ns), keep,
                          self.crossed_kept, self.instrument)

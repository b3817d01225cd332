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

import msgspec
import numpy as np

from kestrel.frame.session import SessionSpec
from kestrel.frame.ticks import I64, Ticks


def decimals_for(tick_size: float) -> int:
    """Number of decimals needed to print multiples of `tick_size` exactly (0.01 → 2,
    0.25 → 2, 0.00001 → 5, 1 → 0)."""
    if not (tick_size > 0 and math.isfinite(tick_size)):
        raise ValueError(f"tick size must be a positive number, got {tick_size!r}")
    for d in range(0, 12):
        scaled = tick_size * 10**d
        if abs(scaled - round(scaled)) < 1e-9 * max(1.0, scaled):
            return d
    return 12


class Instrument(msgspec.Struct, frozen=True, kw_only=True):
    """What one unit of the traded instrument is.

    - `tick_size`: the price grid (> 0);
    - `multiplier`: money per price point per unit (1 for equities, spot FX and crypto; 125000
      for CME 6E futures), so PnL = price change x qty x multiplier;
    - `currency`: the currency prices and PnL are quoted in (the quote currency: USD for
      EUR/USD, ETH for XRP/ETH);
    - `min_qty`: the smallest tradable quantity and the lot sizes are multiples of (1 unit,
      1 contract, or a larger board lot).
    """

    symbol: str
    tick_size: float
    multiplier: float = 1.0
    currency: str = "USD"
    min_qty: int = 1

    def __post_init__(self) -> None:
        if not (self.tick_size > 0 and math.isfinite(self.tick_size)):
            raise ValueError(f"tick size must be a finite number > 0, got {self.tick_size!r}")
        if not (self.multiplier > 0 and math.isfinite(self.multiplier)):
            raise ValueError(f"multiplier must be a finite number > 0, got {self.multiplier!r}")
        if self.min_qty < 1:
            raise ValueError(f"minimum quantity must be >= 1, got {self.min_qty}")
        if not self.currency or not self.currency.isalnum():
            raise ValueError(f"currency must be a code such as USD or ETH, got {self.currency!r}")


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

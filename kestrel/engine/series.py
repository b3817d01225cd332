"""The language's series as the engine computes them, each in its two forms: its value at a
tick (`take`, on the reference path) and its column over a prefix of the session (`column`, on
the vectorized path), the same doubles bit for bit.

Each series has a `value` and an `exact` form (see `kestrel.lang.functions`): a series on the
half-tick grid is `exact` whole half ticks, `round(x x units)` (half to even, as `np.rint`),
`mid` is `round((bid + ask) x units/2)` and `spread` `round((ask - bid) x units)` half ticks,
each `value` that over `units`; `vol` and `vwap` are running sums from the session's first tick
(`vwap = Σ(last·size) / Σsize`, the mean of last while the volume is 0), `open` the first tick's
last, `time` whole seconds from the session's clock base. The account series (`pos`, `rpnl`,
`upnl`, `pnl`) read the broker at the tick; the vectorized path substitutes the account state
(pos and rpnl only) as scalars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.engine.history import Tick
from kestrel.frame.ticks import NS_PER_S, Ticks

NAN = float("nan")
Arr = npt.NDArray[Any]


class Series:
    """A market series: its value and exact value at the last tick taken."""

    value: float = NAN
    exact: float = NAN
    account = False  # the account series hold no state of their own

    def __init__(self, units: float, clock_base_ns: int) -> None:
        self.units = units
        self.base = clock_base_ns

    def take(self, tick: Tick) -> None:
        raise NotImplementedError

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        raise NotImplementedError

    def _on_grid(self, x: Arr) -> Arr:
        return np.rint(x * self.units).astype(np.int64)


class Last(Series):
    def take(self, tick: Tick) -> None:
        self.value = x = tick.last
        self.exact = round(x * self.units)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return ticks.last, self._on_grid(ticks.last)


class Bid(Series):
    def take(self, tick: Tick) -> None:
        self.value = x = tick.bid
        self.exact = round(x * self.units)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return ticks.bid, self._on_grid(ticks.bid)


class Ask(Series):
    def take(self, tick: Tick) -> None:
        self.value = x = tick.ask
        self.exact = round(x * self.units)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return ticks.ask, self._on_grid(ticks.ask)


class Mid(Series):
    def take(self, tick: Tick) -> None:
        self.exact = k = round((tick.bid + tick.ask) * (self.units / 2.0))
        self.value = k / self.units

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        k = np.rint((ticks.bid + ticks.ask) * (self.units / 2.0)).astype(np.int64)
        return k / self.units, k


class Spread(Series):
    def take(self, tick: Tick) -> None:
        self.exact = k = round((tick.ask - tick.bid) * self.units)
        self.value = k / self.units

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        k = np.rint((ticks.ask - ticks.bid) * self.units).astype(np.int64)
        return k / self.units, k


class Size(Series):
    def take(self, tick: Tick) -> None:
        self.value = self.exact = tick.size

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return ticks.size, ticks.size


class Vol(Series):
    def __init__(self, units: float, clock_base_ns: int) -> None:
        super().__init__(units, clock_base_ns)
        self.value = self.exact = 0.0

    def take(self, tick: Tick) -> None:
        self.value = self.exact = self.value + tick.size

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        vol = np.cumsum(ticks.size)
        return vol, vol


class Vwap(Series):
    def __init__(self, units: float, clock_base_ns: int) -> None:
        super().__init__(units, clock_base_ns)
        self.volume = self.notional = self.total = 0.0
        self.count = 0

    def take(self, tick: Tick) -> None:
        self.volume += tick.size
        self.notional += tick.last * tick.size
        self.total += tick.last
        self.count += 1
        self.value = self.exact = (self.notional / self.volume if self.volume > 0.0
                                   else self.total / self.count)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        volume = np.cumsum(ticks.size)
        notional = np.cumsum(ticks.last * ticks.size)
        total = np.cumsum(ticks.last)
        count = np.arange(1, len(ticks) + 1, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            vwap = np.where(volume > 0.0, notional / volume, total / count)
        return vwap, vwap


class Open(Series):
    def take(self, tick: Tick) -> None:
        if self.value != self.value:
            self.value = tick.last
            self.exact = round(tick.last * self.units)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        first = float(ticks.last[0]) if len(ticks) else NAN
        exact = round(first * self.units) if len(ticks) else 0
        return np.full(len(ticks), first), np.full(len(ticks), exact, dtype=np.int64)


class Time(Series):
    def take(self, tick: Tick) -> None:
        self.value = self.exact = (tick.ts - self.base) // NS_PER_S

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        seconds = (ticks.ts - self.base) // NS_PER_S
        return seconds, seconds


class Account(Series):
    """An account series: the broker's state at the tick (`read`)."""

    account = True

    def __init__(self, read: Callable[[Tick], float]) -> None:
        self.read = read

    def take(self, tick: Tick) -> None:
        self.value = self.exact = self.read(tick)


MARKET: dict[str, type[Series]] = {
    "last": Last, "bid": Bid, "ask": Ask, "mid": Mid, "spread": Spread, "size": Size,
    "vol": Vol, "vwap": Vwap, "open": Open, "time": Time,
}
"""The market series by name (the account series are the broker's: `Account`)."""

__all__ = ["MARKET", "Account", "Series"]

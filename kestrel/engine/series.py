"""The language's series as the engine computes them, each in its two forms: its value at a
tick (`take`, on the reference path) and its column over a prefix of the session (`column`, on
the vectorized path), the same doubles bit for bit.

Each series has a `value` and an `exact` form (see `kestrel.lang.functions`): a series on the
half-tick grid is `exact` whole half ticks, `round(x x half_ticks_per_point)` (half to even, as `np.rint`),
`mid` is `round((bid + ask) x half_ticks_per_point/2)` and `spread` `round((ask - bid) x half_ticks_per_point)` half ticks,
each `value` that over `half_ticks_per_point`; `vol` and `vwap` are running sums from the session's first tick
(`vwap = Σ(last·size) / Σsize`, the mean of last while the volume is 0), `open` the first tick's
last, `time` whole seconds from the session's clock base. The account series (`pos`, `rpnl`,
`upnl`, `pnl`) are the broker's (`reference.Evaluation` reads them there); the vectorized path
substitutes the account state (pos and rpnl only) as scalars.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.engine.history import Tick
from kestrel.market.ticks import NS_PER_S, Ticks

NAN = float("nan")
Arr = npt.NDArray[Any]


class Series(ABC):
    """A market series: its value and exact value at the last tick taken (`take`), and its
    column over a prefix (`column`). A series without state (`Stateless`) is also read straight
    off a tick (`read`)."""

    value: float = NAN
    exact: float = NAN
    stateless = False

    def __init__(self, half_ticks_per_point: float, clock_base_ns: int) -> None:
        self.half_ticks_per_point = half_ticks_per_point
        self.base = clock_base_ns

    @abstractmethod
    def take(self, tick: Tick) -> None:
        """Take `tick`: `value` and `exact` are the series' at it."""

    @abstractmethod
    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        """The values and exact values at every tick of a prefix."""


class Stateless(Series):
    """A series that is a function of the current tick alone."""

    stateless = True

    @abstractmethod
    def read(self, tick: Tick) -> float:
        """The value at `tick`."""

    def take(self, tick: Tick) -> None:
        self.value = x = self.read(tick)
        self.exact = round(x * self.half_ticks_per_point)


class _Grid(Stateless):
    """A series on the half-tick grid computed as whole half ticks (`exact_of`)."""

    @abstractmethod
    def exact_of(self, tick: Tick) -> float:
        """The exact value (whole half ticks) at `tick`."""

    def read(self, tick: Tick) -> float:
        return self.exact_of(tick) / self.half_ticks_per_point

    def take(self, tick: Tick) -> None:
        self.exact = k = self.exact_of(tick)
        self.value = k / self.half_ticks_per_point


class _Raw(Stateless):
    """A tick column as it is; exact: its whole half ticks."""

    def _columns(self, prices: Arr) -> tuple[Arr, Arr]:
        return prices, np.rint(prices * self.half_ticks_per_point).astype(np.int64)


class Last(_Raw):
    def read(self, tick: Tick) -> float:
        return tick.last

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return self._columns(ticks.last)


class Bid(_Raw):
    def read(self, tick: Tick) -> float:
        return tick.bid

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return self._columns(ticks.bid)


class Ask(_Raw):
    def read(self, tick: Tick) -> float:
        return tick.ask

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return self._columns(ticks.ask)


class Mid(_Grid):
    def exact_of(self, tick: Tick) -> float:
        return round((tick.bid + tick.ask) * (self.half_ticks_per_point / 2.0))

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        k = np.rint((ticks.bid + ticks.ask) * (self.half_ticks_per_point / 2.0)).astype(np.int64)
        return k / self.half_ticks_per_point, k


class Spread(_Grid):
    def exact_of(self, tick: Tick) -> float:
        return round((tick.ask - tick.bid) * self.half_ticks_per_point)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        k = np.rint((ticks.ask - ticks.bid) * self.half_ticks_per_point).astype(np.int64)
        return k / self.half_ticks_per_point, k


class Size(Stateless):
    def read(self, tick: Tick) -> float:
        return tick.size

    def take(self, tick: Tick) -> None:
        self.value = self.exact = tick.size

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        return ticks.size, ticks.size


class Time(Stateless):
    def read(self, tick: Tick) -> float:
        return (tick.ts - self.base) // NS_PER_S

    def take(self, tick: Tick) -> None:
        self.value = self.exact = self.read(tick)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        seconds = (ticks.ts - self.base) // NS_PER_S
        return seconds, seconds


class Vol(Series):
    def __init__(self, half_ticks_per_point: float, clock_base_ns: int) -> None:
        super().__init__(half_ticks_per_point, clock_base_ns)
        self.value = self.exact = 0.0

    def take(self, tick: Tick) -> None:
        self.value = self.exact = self.value + tick.size

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        vol = np.cumsum(ticks.size)
        return vol, vol


class Vwap(Series):
    def __init__(self, half_ticks_per_point: float, clock_base_ns: int) -> None:
        super().__init__(half_ticks_per_point, clock_base_ns)
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
            self.exact = round(tick.last * self.half_ticks_per_point)

    def column(self, ticks: Ticks) -> tuple[Arr, Arr]:
        first = float(ticks.last[0]) if len(ticks) else NAN
        exact = round(first * self.half_ticks_per_point) if len(ticks) else 0
        return np.full(len(ticks), first), np.full(len(ticks), exact, dtype=np.int64)


MARKET: dict[str, type[Series]] = {
    "last": Last, "bid": Bid, "ask": Ask, "mid": Mid, "spread": Spread, "size": Size,
    "vol": Vol, "vwap": Vwap, "open": Open, "time": Time,
}
"""The market series by name."""

__all__ = ["MARKET", "Series"]

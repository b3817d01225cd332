"""Functions of windows of the ticks: the highest and lowest last over a time window, their
range, the change over one, the average true range of bars."""

from __future__ import annotations

from collections import deque
from typing import ClassVar

import numpy as np

from kestrel.lang.functions import (
    COUNT,
    NAN,
    NO_BAR,
    WINDOW,
    Arguments,
    Arr,
    Context,
    F64,
    I64,
    Indicator,
    RunningMean,
    bars_of,
)
import kestrel.lang.ast as ast
from kestrel.lang.signature import FunctionSpec, Param


class Extreme(Indicator):
    """The highest (lowest) source value over ticks with ts in [t - d, t): ticks sharing the
    current timestamp are not in it; defined once it holds a tick and t - d reaches the first
    tick it was fed (the session's, or of the run's history it was warmed with). A monotonic deque of (ts, value) holds the candidates; the ticks of
    the current timestamp wait until a later timestamp arrives."""

    highest: ClassVar[bool]

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.span = args.duration("d")
        self.first = NO_BAR
        self.kept: deque[tuple[int, float]] = deque()
        self.waiting: list[float] = []
        self.waiting_ts = NO_BAR

    def update(self, ts: int, value: float, exact: float) -> float:
        if self.first == NO_BAR:
            self.first = ts
        kept = self.kept
        if ts != self.waiting_ts:
            waiting = self.waiting
            if waiting:  # the earlier timestamp's ticks join the candidates, in order
                at = self.waiting_ts
                for held in waiting:
                    if self.highest:
                        while kept and kept[-1][1] <= held:
                            kept.pop()
                    else:
                        while kept and kept[-1][1] >= held:
                            kept.pop()
                    kept.append((at, held))
                waiting.clear()
            self.waiting_ts = ts
        self.waiting.append(value)
        start = ts - self.span
        while kept and kept[0][0] < start:
            kept.popleft()
        return kept[0][1] if kept and start >= self.first else NAN

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        out = np.full(len(ts), NAN)
        if not len(ts):
            return out
        lo = np.searchsorted(ts, ts - self.span, side="left")
        hi = np.searchsorted(ts, ts, side="left")
        at = np.flatnonzero((hi > lo) & (ts - self.span >= ts[0]))
        lo, hi = lo[at], hi[at]
        # a range of length L, 2^k <= L < 2^(k+1), is the extreme of its first and its last
        # 2^k values; `table[i]` is the extreme of value[i : i + 2^k] (exact: max is exact)
        level = np.frexp((hi - lo).astype(np.float64))[1] - 1
        pick = np.maximum if self.highest else np.minimum
        table, k = value, 0
        while at.size:
            now = level == k
            out[at[now]] = pick(table[lo[now]], table[hi[now] - (1 << k)])
            at, lo, hi, level = at[~now], lo[~now], hi[~now], level[~now]
            table = pick(table[:-(1 << k)], table[1 << k:])
            k += 1
        return out


class High(Extreme):
    highest = True
    spec = FunctionSpec("high", WINDOW, "Price", "highest last over ticks in [t-d, t), before this tick")


class Low(Extreme):
    highest = False
    spec = FunctionSpec("low", WINDOW, "Price", "lowest last over ticks in [t-d, t), before this tick")


class Range(Indicator):
    spec = FunctionSpec("range", WINDOW, "Price", "high(d) - low(d)")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.high, self.low = High(args, context), Low(args, context)

    def update(self, ts: int, value: float, exact: float) -> float:
        return self.high.update(ts, value, exact) - self.low.update(ts, value, exact)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return self.high.column(ts, value, exact) - self.low.column(ts, value, exact)


class Chg(Indicator):
    """`100 (last / ref - 1)`, ref the last of the latest tick with ts <= t - d (NaN without
    one, or when it is 0)."""

    spec = FunctionSpec("chg", WINDOW, "Pct", "100 * (last / ref - 1), ref = last of the latest "
                        "tick at or before t-d")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.span = args.duration("d")
        self.reference = NAN
        self.times: deque[int] = deque()  # the later ticks, candidates for the reference
        self.values: deque[float] = deque()

    def update(self, ts: int, value: float, exact: float) -> float:
        times, start = self.times, ts - self.span
        if times and times[0] <= start:
            values = self.values
            while times and times[0] <= start:
                times.popleft()
                self.reference = values.popleft()
        ref = self.reference
        self.times.append(ts)
        self.values.append(value)
        return 100.0 * (value / ref - 1.0) if ref else NAN

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        reference_at = np.searchsorted(ts, ts - self.span, side="right") - 1
        ref = np.where(reference_at >= 0, value[np.maximum(reference_at, 0)], NAN)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: F64 = 100.0 * (value / ref - 1.0)
        out[ref == 0.0] = NAN
        return out


class Atr(Indicator):
    """The mean true range of `last` over the last n completed bars of tf (default 1m): a
    bar's true range is `max(high, pc) - min(low, pc)`, pc the previous bar's close (the first
    bar: high - low)."""

    on_bars = False  # its bars are its own (high, low and close)
    spec = FunctionSpec("atr", (COUNT, Param("tf", "Timeframe", False, ast.Duration(1, "m"))), "Price",
                        "simple mean of the true range over the last n completed tf bars (tf = 1m)")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.n, self.tf = args.count("n"), args.timeframe()
        self.origin = context.origin(self.tf)
        self.mean = RunningMean(self.n, 1.0)
        self.bar = NO_BAR
        self.high = self.low = self.close = self.previous = self.value = NAN

    def update(self, ts: int, value: float, exact: float) -> float:
        bar = (ts - self.origin) // self.tf
        if bar != self.bar:
            if self.bar != NO_BAR:
                pc = self.previous
                tr = self.high - self.low if pc != pc else max(self.high, pc) - min(self.low, pc)
                self.previous = self.close
                self.value = self.mean.push(tr)
            self.bar, self.high, self.low = bar, value, value
        else:
            if value > self.high:
                self.high = value
            if value < self.low:
                self.low = value
        self.close = value
        return self.value

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        if not len(ts):
            return np.zeros(0)
        ordinal, ends = bars_of(ts, self.tf, self.origin)
        starts = np.concatenate(([0], ends[:-1]))
        high = np.maximum.reduceat(value, starts)[:-1]  # the completed bars: all but the last
        low = np.minimum.reduceat(value, starts)[:-1]
        done = self.over_bars(high, low, value[ends[:-1] - 1], self.n)
        return np.concatenate(([NAN], done))[ordinal]

    @staticmethod
    def over_bars(high: F64, low: F64, close: F64, n: int) -> F64:
        """The atr after each of the completed bars (high, low, close), NaN until n bars."""
        tr = high - low
        tr[1:] = np.maximum(high[1:], close[:-1]) - np.minimum(low[1:], close[:-1])
        return RunningMean(n, 1.0).column(tr)

"""Functions of averages: simple and exponential means, the standard deviation, the z-score,
the Bollinger bands, macd and its signal line, Wilder's RSI."""

from __future__ import annotations

import math
from collections import deque
from typing import ClassVar

import numpy as np

from kestrel.lang.functions import (
    COUNT,
    INT_LIMIT,
    NAN,
    SOURCE,
    TIMEFRAME,
    Arguments,
    Arr,
    Context,
    F64,
    I64,
    Indicator,
    RunningMean,
    cumulative,
    ema,
    floats,
)
from kestrel.lang.signature import FunctionSpec, Param


class Sma(Indicator):
    spec = FunctionSpec("sma", (SOURCE, COUNT, TIMEFRAME), "Price", "simple mean of x over the last n ticks "
                        "(this one included), or with tf over the closes of the last n completed "
                        "tf bars; exact on the tick grid")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.mean = RunningMean(args.count("n"), context.half_ticks_per_point)

    def update(self, ts: int, value: float, exact: float) -> float:
        return self.mean.push(exact)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return self.mean.column(exact)


class Ema(Indicator):
    spec = FunctionSpec("ema", (SOURCE, COUNT, TIMEFRAME), "Price", "exponential mean of x, alpha = 2/(n+1), "
                        "seeded with the first value; ticks or completed tf bars like sma")

    def __init__(self, args: Arguments, context: Context, n: int = 0) -> None:
        super().__init__(args, context)
        self.n = n or args.count("n")
        self.alpha = 2.0 / (self.n + 1)
        self.value = NAN

    def update(self, ts: int, value: float, exact: float) -> float:
        mean = self.value
        self.value = mean = value if mean != mean else mean + self.alpha * (value - mean)
        return mean

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return ema(value.tolist(), self.n)


class Stdev(Indicator):
    """The population standard deviation of the last n values, NaN until n values are in. On
    an exact source (whole half ticks): `sqrt(n Σd² - (Σd)²) / (n x half_ticks_per_point)`
    from running sums of the deviations d from the session's first value, exact integers. On a binary source
    (vwap) such running sums cancel catastrophically late in a long session, so the window's
    mean and sum of squared deviations slide instead (Welford's update, adding the new value
    and removing the one leaving), computed afresh from the window every n steps so no drift
    builds up (O(1) amortised); the same scalar steps in both forms."""

    spec = FunctionSpec("stdev", (SOURCE, COUNT, TIMEFRAME), "Price", "population standard deviation of x "
                        "over the last n ticks or completed tf bars")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.n = n = args.count("n")
        self.divisor = float(n) * context.half_ticks_per_point
        self.first: float | None = None
        self.sums: tuple[float, float] = (0, 0)
        self.history: deque[tuple[float, float]] = deque([(NAN, NAN)] * n + [(0, 0)], maxlen=n + 1)
        self.binary = context.binary
        self.window: deque[float] = deque()
        self.mean = self.m2 = 0.0
        self.slid = 0  # sliding steps since the moments were last computed afresh

    def slide(self, entering: float) -> float:
        """The binary form: `entering` enters the window (the oldest value leaves a full one)."""
        window = self.window
        if len(window) == self.n:
            leaving = window.popleft()
            size = len(window)
            if size == 0:
                self.mean = self.m2 = 0.0
            else:
                delta = leaving - self.mean
                self.mean -= delta / size
                self.m2 -= delta * (leaving - self.mean)
        window.append(entering)
        size = len(window)
        self.slid += 1
        if self.slid >= self.n:  # every n steps, the window's moments afresh: no drift builds up
            self.slid = 0
            self.mean = mean = sum(window) / size
            self.m2 = sum((held - mean) * (held - mean) for held in window)
        else:
            delta = entering - self.mean
            self.mean += delta / size
            self.m2 += delta * (entering - self.mean)
        if size < self.n or self.m2 != self.m2:
            return NAN
        return math.sqrt(self.m2 / size) / self.context.half_ticks_per_point if self.m2 > 0 else 0.0

    def update(self, ts: int, value: float, exact: float) -> float:
        if self.binary:
            return self.slide(value)
        if self.first is None:
            self.first = exact
        deviation = exact - self.first
        s1, s2 = self.sums
        self.sums = s1, s2 = s1 + deviation, s2 + deviation * deviation
        self.history.append(self.sums)
        b1, b2 = self.history[0]
        w1 = s1 - b1
        spread = self.n * (s2 - b2) - w1 * w1
        if spread != spread:
            return NAN
        return math.sqrt(spread) / self.divisor if spread > 0 else 0.0

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        n, out = self.n, np.full(len(ts), NAN)
        if self.binary:
            fresh = Stdev(self.args, self.context)
            return np.array([fresh.slide(item) for item in value.tolist()], dtype=np.float64)
        if len(ts) < n:
            return out
        deviations = exact - exact[0]
        if deviations.dtype.kind != "f":  # Python ints where an int64 sum or product could overflow
            top = int(np.abs(deviations).max())
            if top * top * max(len(deviations), n * n) >= INT_LIMIT:
                deviations = deviations.astype(object)
        s1, s2 = cumulative(deviations), cumulative(deviations * deviations)
        w1 = s1[n:] - s1[:-n]
        spread = floats(n * (s2[n:] - s2[:-n]) - w1 * w1)
        out[n - 1:] = np.sqrt(np.maximum(spread, 0.0)) / self.divisor
        return out


class _Band(Indicator):
    """sma(x, n) + side x k x stdev(x, n)."""

    side: ClassVar[float]

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.sma, self.stdev = Sma(args, context), Stdev(args, context)
        self.width = self.side * args.number("k")

    def update(self, ts: int, value: float, exact: float) -> float:
        return self.sma.update(ts, value, exact) + self.width * self.stdev.update(ts, value, exact)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return self.sma.column(ts, value, exact) + self.width * self.stdev.column(ts, value, exact)


_BAND = (SOURCE, COUNT, Param("k", "Number"), TIMEFRAME)


class BbUpper(_Band):
    side = 1.0
    spec = FunctionSpec("bbupper", _BAND, "Price", "upper Bollinger band: sma(x, n) + k * stdev(x, n)")


class BbLower(_Band):
    side = -1.0
    spec = FunctionSpec("bblower", _BAND, "Price", "lower Bollinger band: sma(x, n) - k * stdev(x, n)")


class Zscore(Indicator):
    spec = FunctionSpec("zscore", (SOURCE, COUNT, TIMEFRAME), "Number", "(x - sma(x, n)) / stdev(x, n); "
                        "undefined while stdev is 0")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.sma, self.stdev = Sma(args, context), Stdev(args, context)

    def update(self, ts: int, value: float, exact: float) -> float:
        mean, spread = self.sma.update(ts, value, exact), self.stdev.update(ts, value, exact)
        return (value - mean) / spread if spread > 0 else NAN

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        mean, spread = self.sma.column(ts, value, exact), self.stdev.column(ts, value, exact)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(spread > 0, (value - mean) / spread, NAN)


_MACD = (SOURCE, Param("fast", "Count"), Param("slow", "Count"))


class Macd(Indicator):
    spec = FunctionSpec("macd", _MACD + (TIMEFRAME,), "Price", "ema(x, fast) - ema(x, slow)",
                        increasing=("fast", "slow"))

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.fast = Ema(args, context, args.count("fast"))
        self.slow = Ema(args, context, args.count("slow"))

    def update(self, ts: int, value: float, exact: float) -> float:
        return self.fast.update(ts, value, exact) - self.slow.update(ts, value, exact)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return self.fast.column(ts, value, exact) - self.slow.column(ts, value, exact)


class MacdSignal(Indicator):
    spec = FunctionSpec("macdsignal", _MACD + (Param("signal", "Count"), TIMEFRAME), "Price",
                        "ema of macd(x, fast, slow) over signal values", increasing=("fast", "slow"))

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.macd = Macd(args, context)
        self.signal = Ema(args, context, args.count("signal"))

    def update(self, ts: int, value: float, exact: float) -> float:
        line = self.macd.update(ts, value, exact)
        return self.signal.update(ts, line, line)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        line = self.macd.column(ts, value, exact)
        return self.signal.column(ts, line, line)


class Rsi(Indicator):
    """Wilder's RSI of `last`: per change c (in whole half ticks) a gain max(c, 0) and a loss
    max(-c, 0); the first averages are the means of the first n, then `(avg (n-1) + g) / n`,
    g the new change's gain (or loss); `100 gain / (gain + loss)`, undefined before n changes
    and while both are 0."""

    spec = FunctionSpec("rsi", (COUNT, TIMEFRAME), "Number", "Wilder's relative strength index of last "
                        "over n changes (ticks or completed tf bars)", bounds=(0.0, 100.0))

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.n = args.count("n")
        self.previous: float | None = None
        self.changes = 0
        self.gain: float = 0
        self.loss: float = 0

    def update(self, ts: int, value: float, exact: float) -> float:
        if self.previous is None:
            self.previous = exact
            return NAN
        change, self.previous = exact - self.previous, exact
        up = change if change > 0 else 0
        down = -change if change < 0 else 0
        n = self.n
        self.changes += 1
        if self.changes < n:
            self.gain += up
            self.loss += down
            return NAN
        if self.changes == n:
            self.gain, self.loss = (self.gain + up) / n, (self.loss + down) / n
        else:
            self.gain, self.loss = (self.gain * (n - 1) + up) / n, (self.loss * (n - 1) + down) / n
        total = self.gain + self.loss
        return 100.0 * self.gain / total if total > 0 else NAN

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        n, out = self.n, np.full(len(ts), NAN)
        change = np.diff(exact)
        if len(change) < n:
            return out
        ups, downs = np.where(change > 0, change, 0), np.where(change < 0, -change, 0)
        gain, loss = sum(ups[:n].tolist()) / n, sum(downs[:n].tolist()) / n  # (in order, as fed)
        rsi = [100.0 * gain / (gain + loss) if gain + loss > 0 else NAN]
        for up, down in zip(ups[n:].tolist(), downs[n:].tolist()):
            gain, loss = (gain * (n - 1) + up) / n, (loss * (n - 1) + down) / n
            rsi.append(100.0 * gain / (gain + loss) if gain + loss > 0 else NAN)
        out[n:] = rsi
        return out

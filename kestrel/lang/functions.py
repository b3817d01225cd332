"""The language's functions and operators, each one unit: its signature, its per-tick form and
its column form.

An indicator (`Indicator`) is a function of a session's ticks. It is fed, tick by tick, the
value of its source series (the `x` argument, else `last`) with its timestamp (`update`), or
the whole prefix of the session at once (`column`: index 0 is the session's first tick). The
two forms return the same doubles bit for bit: the column form performs the same
floating-point operations in the same order (running sums by `np.cumsum`, which accumulates
sequentially; window extremes, which are exact; recurrences as the same scalar loop).
Undefined values (not enough data) are NaN.

A source's value comes in two forms: `value`, the double the series is (`mid` is a whole
number of half ticks over the half ticks per price point), and `exact`, which for a series on
the tick grid (`last bid ask mid spread open`) is that whole number of half ticks (a Python int,
an int64 column) and for `vwap` the double itself; `Context.scale` is the half ticks per price
point (1.0 for vwap). Sums of exact values are exact integers: an sma of mid is the double
nearest to the exact mean, so a mid equal to its sma compares equal.

An operation (`Operation`: abs, min, max) is a pure function of its arguments' values, as are
the operators (`ARITHMETIC`, `COMPARISON`, `CROSSES`): one callable serves scalars and arrays
alike, except where a zero divisor or NaN needs a test (two forms, the same values).

docs/language.md defines every function; adding one is its unit here, its row in
`kestrel.lang.registry.UNITS`, its tests and its line in the docs.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import msgspec
import numpy as np
import numpy.typing as npt

from kestrel.lang import ast
from kestrel.lang.signature import FunctionSpec, Param

NAN = math.nan
NS_PER_S = 1_000_000_000
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]
NO_BAR = -(2**62)  # the bar before the first one
_INT_LIMIT = 2**62  # int64 sums below this magnitude cannot overflow

_D = (Param("d", "Duration"),)
_TF = Param("tf", "Timeframe", False)
_X = Param("x", "PriceSeries")
_N = Param("n", "Count")


class Context(NamedTuple):
    """What an indicator needs of its session and source: the half ticks per price point of
    its source's exact values (1.0 when the source is binary, vwap) and the session's open,
    where bars are aligned."""

    scale: float
    open_ns: int


class Arguments(msgspec.Struct, frozen=True):
    """A call's literal arguments by parameter name, resolved (durations and timeframes in
    ns, counts as ints, numbers as floats, series by name; a missing timeframe is its default,
    0 when tick-based). Hashable: equal calls share one indicator."""

    values: tuple[tuple[str, int | float | str], ...]

    def get(self, name: str) -> int | float | str:
        for key, value in self.values:
            if key == name:
                return value
        raise KeyError(name)

    def count(self, name: str) -> int:
        """A Count, or a Duration in ns."""
        value = self.get(name)
        assert isinstance(value, int)
        return value

    duration = count

    def number(self, name: str) -> float:
        value = self.get(name)
        assert isinstance(value, float)
        return value

    def timeframe(self) -> int:
        """The bar size in ns, 0 for a tick-based call."""
        return next((int(v) for k, v in self.values if k == "tf"), 0)

    def source(self) -> str:
        """The series the indicator reads: its `x`, else `last`."""
        return next((str(v) for k, v in self.values if k == "x"), "last")

    def lookback_ns(self) -> int:
        """How far back the call must see to be defined: its window, or its largest count of
        bars of its timeframe (0 for tick-count windows)."""
        windows = [int(v) for k, v in self.values if k == "d"]
        counts = [int(v) for k, v in self.values if k in ("n", "fast", "slow", "signal")]
        return max(windows + [max(counts, default=0) * self.timeframe()])


def arguments(spec: FunctionSpec, args: tuple[ast.Expr, ...]) -> Arguments:
    """`args` of a checked call resolved by `spec`; ValueError when they do not fit."""
    if not spec.min_args <= len(args) <= spec.max_args:
        raise ValueError(f"{spec.typed}: got {len(args)} arguments")
    out: list[tuple[str, int | float | str]] = []
    for k, param in enumerate(spec.params):
        if k >= len(args):
            if param.default is not None:
                out.append((param.name, param.default.seconds * NS_PER_S))
            continue
        arg = args[k]
        if param.type in ("Duration", "Timeframe") and isinstance(arg, ast.Duration) and arg.value > 0:
            out.append((param.name, arg.seconds * NS_PER_S))
        elif (param.type == "Count" and isinstance(arg, ast.Number) and arg.value >= 1
              and arg.value == int(arg.value)):
            out.append((param.name, int(arg.value)))
        elif param.type == "Number" and isinstance(arg, ast.Number) and 0 < arg.value < math.inf:
            out.append((param.name, float(arg.value)))
        elif param.type == "PriceSeries" and isinstance(arg, ast.Series):
            out.append((param.name, arg.name))
        else:
            raise ValueError(f"{spec.typed}: argument {param.name} does not fit")
    return Arguments(tuple(out))


class Indicator:
    """A stateful function of the session's ticks (see the module docstring). A fresh
    instance starts at the session's first tick; `column` reads no state."""

    spec: ClassVar[FunctionSpec]
    on_bars: ClassVar[bool] = True  # a `tf` argument runs it over completed bars (`OnBars`)

    def __init__(self, args: Arguments, context: Context) -> None:
        self.args = args
        self.context = context

    def update(self, ts: int, value: float, exact: float) -> float:
        """The value at a tick given its source's value and exact value."""
        raise NotImplementedError

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        """The values at every tick of a prefix."""
        raise NotImplementedError


def indicator(unit: type[Indicator], args: Arguments, context: Context) -> Indicator:
    """A fresh instance of `unit` for `args`, over completed bars when the call has a `tf`."""
    made = unit(args, context)
    tf = args.timeframe()
    return OnBars(made, tf, context.open_ns) if tf and unit.on_bars else made


class OnBars(Indicator):
    """An indicator over completed bars of `tf`: bars are aligned on the session open (bar
    k holds the ticks with `(ts - open) // tf == k`), a bar completes when the first tick of a
    later bar arrives and feeds its last tick's source values to `inner`; between
    completions the value is the last one (NaN before the first)."""

    def __init__(self, inner: Indicator, tf_ns: int, open_ns: int) -> None:
        self.inner, self.tf, self.open = inner, tf_ns, open_ns
        self.bar = NO_BAR
        self.value = NAN
        self.close: tuple[int, float, float] = (0, NAN, NAN)

    def update(self, ts: int, value: float, exact: float) -> float:
        bar = (ts - self.open) // self.tf
        if bar != self.bar:
            if self.bar != NO_BAR:
                self.value = self.inner.update(*self.close)
            self.bar = bar
        self.close = (ts, value, exact)
        return self.value

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        ordinal, ends = bars_of(ts, self.tf, self.open)
        last = ends[:-1] - 1  # the completed bars' last ticks
        done = self.inner.column(ts[last], value[last], exact[last])
        return np.concatenate(([NAN], done))[ordinal]


def bars_of(ts: I64, tf_ns: int, open_ns: int) -> tuple[I64, I64]:
    """Each tick's bar ordinal (bars aligned on the open, counted from the prefix's first)
    and each bar's end (the index past its last tick)."""
    if not len(ts):
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    bar = (ts - open_ns) // tf_ns
    new = np.flatnonzero(bar[1:] != bar[:-1]) + 1
    ordinal = np.zeros(len(ts), dtype=np.int64)
    ordinal[new] = 1
    return np.cumsum(ordinal), np.append(new, len(ts))


# --------------------------------------------------------------------------- sums
def cumulative(x: Arr) -> Arr:
    """The running sums of `x` with a leading 0, accumulated sequentially: doubles, or for
    integers int64 when no sum can reach 2**62, else Python ints (an object column), the
    per-tick form's sums."""
    if x.dtype.kind in "fO":
        return np.concatenate(([x.dtype.type(0) if x.dtype.kind == "f" else 0], np.cumsum(x)))
    if not len(x):
        return np.zeros(1, dtype=np.int64)
    if int(np.abs(x).max()) * len(x) < _INT_LIMIT:
        return np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(x, dtype=np.int64)))
    return cumulative(x.astype(object))


def floats(x: Arr) -> F64:
    """A column as doubles (Python ints each to the nearest double)."""
    return np.asarray(x, dtype=np.float64)


class RunningMean:
    """The mean of the last n values, `(S_i - S_{i-n}) / (n x scale)` on the running sum S
    (exact for integers), NaN until n values are in."""

    def __init__(self, n: int, scale: float) -> None:
        self.n, self.divisor = n, float(n) * scale
        self.total: float = 0
        self.sums: deque[float] = deque([NAN] * n + [0], maxlen=n + 1)

    def push(self, x: float) -> float:
        self.total += x
        self.sums.append(self.total)
        return (self.total - self.sums[0]) / self.divisor

    def column(self, x: Arr) -> F64:
        n, out = self.n, np.full(len(x), NAN)
        if len(x) >= n:
            sums = cumulative(x)
            out[n - 1:] = floats((sums[n:] - sums[:-n]) / self.divisor)
        return out


def ema(values: list[float], n: int) -> F64:
    """The ema recurrence over `values` (`Ema.update`): seeded with the first value (again
    after a NaN), `v + 2/(n+1) (x - v)`."""
    alpha, v = 2.0 / (n + 1), NAN
    out = []
    for x in values:
        v = x if v != v else v + alpha * (x - v)
        out.append(v)
    return np.asarray(out, dtype=np.float64)


# --------------------------------------------------------------------------- windows
class Extreme(Indicator):
    """The highest (lowest) source value over ticks with ts in [t - d, t): ticks sharing the
    current timestamp are not in it; defined once it holds a tick and t - d reaches the
    session's first tick. A monotonic deque of (ts, value) holds the candidates; the ticks of
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
                for v in waiting:
                    if self.highest:
                        while kept and kept[-1][1] <= v:
                            kept.pop()
                    else:
                        while kept and kept[-1][1] >= v:
                            kept.pop()
                    kept.append((at, v))
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
    spec = FunctionSpec("high", _D, "Price", "highest last over ticks in [t-d, t), before this tick")


class Low(Extreme):
    highest = False
    spec = FunctionSpec("low", _D, "Price", "lowest last over ticks in [t-d, t), before this tick")


class Range(Indicator):
    spec = FunctionSpec("range", _D, "Price", "high(d) - low(d)")

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

    spec = FunctionSpec("chg", _D, "Pct", "100 * (last / ref - 1), ref = last of the latest "
                        "tick with ts <= t-d")

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
        j = np.searchsorted(ts, ts - self.span, side="right") - 1
        ref = np.where(j >= 0, value[np.maximum(j, 0)], NAN)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: F64 = 100.0 * (value / ref - 1.0)
        out[ref == 0.0] = NAN
        return out


# --------------------------------------------------------------------------- means
class Sma(Indicator):
    spec = FunctionSpec("sma", (_X, _N, _TF), "Price", "simple mean of x over the last n ticks "
                        "(this one included), or with tf over the closes of the last n completed "
                        "tf bars; exact on the tick grid")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.mean = RunningMean(args.count("n"), context.scale)

    def update(self, ts: int, value: float, exact: float) -> float:
        return self.mean.push(exact)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return self.mean.column(exact)


class Ema(Indicator):
    spec = FunctionSpec("ema", (_X, _N, _TF), "Price", "exponential mean of x, alpha = 2/(n+1), "
                        "seeded with the first value; ticks or completed tf bars like sma")

    def __init__(self, args: Arguments, context: Context, n: int = 0) -> None:
        super().__init__(args, context)
        self.n = n or args.count("n")
        self.alpha = 2.0 / (self.n + 1)
        self.value = NAN

    def update(self, ts: int, value: float, exact: float) -> float:
        v = self.value
        self.value = v = value if v != v else v + self.alpha * (value - v)
        return v

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        return ema(value.tolist(), self.n)


class Stdev(Indicator):
    """The population standard deviation of the last n values: `sqrt(n Σd² - (Σd)²) / (n x
    scale)` on the deviations d from the session's first value (a shift that changes nothing
    on exact values, and keeps binary sums small), NaN until n values are in."""

    spec = FunctionSpec("stdev", (_X, _N, _TF), "Price", "population standard deviation of x "
                        "over the last n ticks or completed tf bars")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.n = n = args.count("n")
        self.divisor = float(n) * context.scale
        self.first: float | None = None
        self.sums: tuple[float, float] = (0, 0)
        self.history: deque[tuple[float, float]] = deque([(NAN, NAN)] * n + [(0, 0)], maxlen=n + 1)

    def update(self, ts: int, value: float, exact: float) -> float:
        if self.first is None:
            self.first = exact
        d = exact - self.first
        s1, s2 = self.sums
        self.sums = s1, s2 = s1 + d, s2 + d * d
        self.history.append(self.sums)
        b1, b2 = self.history[0]
        w1 = s1 - b1
        spread = self.n * (s2 - b2) - w1 * w1
        if spread != spread:
            return NAN
        return math.sqrt(spread) / self.divisor if spread > 0 else 0.0

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        n, out = self.n, np.full(len(ts), NAN)
        if len(ts) < n:
            return out
        d = exact - exact[0]
        if d.dtype.kind != "f":  # Python ints where an int64 sum or product could overflow
            top = int(np.abs(d).max())
            if top * top * max(len(d), n * n) >= _INT_LIMIT:
                d = d.astype(object)
        s1, s2 = cumulative(d), cumulative(d * d)
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


_BAND = (_X, _N, Param("k", "Number"), _TF)


class BbUpper(_Band):
    side = 1.0
    spec = FunctionSpec("bbupper", _BAND, "Price", "upper Bollinger band: sma(x, n) + k * stdev(x, n)")


class BbLower(_Band):
    side = -1.0
    spec = FunctionSpec("bblower", _BAND, "Price", "lower Bollinger band: sma(x, n) - k * stdev(x, n)")


class Zscore(Indicator):
    spec = FunctionSpec("zscore", (_X, _N, _TF), "Number", "(x - sma(x, n)) / stdev(x, n); "
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


_MACD = (_X, Param("fast", "Count"), Param("slow", "Count"))


class Macd(Indicator):
    spec = FunctionSpec("macd", _MACD + (_TF,), "Price", "ema(x, fast) - ema(x, slow)",
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
    spec = FunctionSpec("macdsignal", _MACD + (Param("signal", "Count"), _TF), "Price",
                        "ema of macd(x, fast, slow) over signal values", increasing=("fast", "slow"))

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.macd = Macd(args, context)
        self.signal = Ema(args, context, args.count("signal"))

    def update(self, ts: int, value: float, exact: float) -> float:
        m = self.macd.update(ts, value, exact)
        return self.signal.update(ts, m, m)

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        m = self.macd.column(ts, value, exact)
        return self.signal.column(ts, m, m)


# --------------------------------------------------------------------------- last's changes
class Rsi(Indicator):
    """Wilder's RSI of `last`: per change c (in whole half ticks) a gain max(c, 0) and a loss
    max(-c, 0); the first averages are the means of the first n, then `(avg (n-1) + x) / n`;
    `100 gain / (gain + loss)`, undefined before n changes and while both are 0."""

    spec = FunctionSpec("rsi", (_N, _TF), "Number", "Wilder's relative strength index of last "
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


class Atr(Indicator):
    """The mean true range of `last` over the last n completed bars of tf (default 1m): a
    bar's true range is `max(high, pc) - min(low, pc)`, pc the previous bar's close (the first
    bar: high - low)."""

    on_bars = False  # its bars are its own (high, low and close)
    spec = FunctionSpec("atr", (_N, Param("tf", "Timeframe", False, ast.Duration(1, "m"))), "Price",
                        "simple mean of the true range over the last n completed tf bars (tf = 1m)")

    def __init__(self, args: Arguments, context: Context) -> None:
        super().__init__(args, context)
        self.n, self.tf = args.count("n"), args.timeframe()
        self.mean = RunningMean(self.n, 1.0)
        self.bar = NO_BAR
        self.high = self.low = self.close = self.previous = self.value = NAN

    def update(self, ts: int, value: float, exact: float) -> float:
        bar = (ts - self.context.open_ns) // self.tf
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
        ordinal, ends = bars_of(ts, self.tf, self.context.open_ns)
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


# --------------------------------------------------------------------------- operations
class Operation:
    """A pure function of its arguments' values (undefined when one of them is)."""

    spec: ClassVar[FunctionSpec]
    scalar: ClassVar[Callable[..., float]]
    column: ClassVar[Callable[..., Any]]


def _smaller(a: float, b: float) -> float:
    return NAN if a != a or b != b else (a if a <= b else b)


def _larger(a: float, b: float) -> float:
    return NAN if a != a or b != b else (a if a >= b else b)


def _pick(smaller: bool) -> Callable[[Any, Any], Any]:
    def pick(a: Any, b: Any) -> Any:
        chosen = np.where(a <= b, a, b) if smaller else np.where(a >= b, a, b)
        return np.where((a == a) & (b == b), chosen, NAN)
    return pick


_AB = (Param("a", "Numeric"), Param("b", "Numeric"))


class Abs(Operation):
    spec = FunctionSpec("abs", (Param("a", "Numeric"),), None, "absolute value of a")
    scalar = staticmethod(abs)
    column = staticmethod(np.abs)


class Min(Operation):
    spec = FunctionSpec("min", _AB, None, "the smaller of a and b (of one type)")
    scalar = staticmethod(_smaller)
    column = staticmethod(_pick(True))


class Max(Operation):
    spec = FunctionSpec("max", _AB, None, "the larger of a and b (of one type)")
    scalar = staticmethod(_larger)
    column = staticmethod(_pick(False))


# --------------------------------------------------------------------------- operators
class Operator(NamedTuple):
    """An operator's per-tick and column forms (the same callable where it serves both)."""

    scalar: Callable[[Any, Any], Any]
    column: Callable[[Any, Any], Any]


def _divide(x: float, y: float) -> float:
    return x / y if y else NAN


def _divide_columns(x: Any, y: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y != 0, x / np.where(y != 0, y, 1.0), NAN)


def _not_equal(x: Any, y: Any) -> Any:
    """`!=`: false when either side is undefined (NaN), where IEEE says true."""
    return (x == x) & (y == y) & (x != y)


def _same(f: Callable[[Any, Any], Any]) -> Operator:
    return Operator(f, f)


ARITHMETIC: dict[str, Operator] = {
    "+": _same(operator.add), "-": _same(operator.sub), "*": _same(operator.mul),
    "/": Operator(_divide, _divide_columns),  # `/`: undefined on a zero divisor
}
COMPARISON: dict[str, Operator] = {
    "<": _same(operator.lt), "<=": _same(operator.le), ">": _same(operator.gt),
    ">=": _same(operator.ge), "==": _same(operator.eq), "!=": _same(_not_equal),
}


def _crossed_above(left_before: Any, right_before: Any, left: Any, right: Any) -> Any:
    return (left_before <= right_before) & (left > right)


def _crossed_below(left_before: Any, right_before: Any, left: Any, right: Any) -> Any:
    return (left_before >= right_before) & (left < right)


CROSSES: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "above": _crossed_above, "below": _crossed_below,
}
"""`left CROSSES ABOVE right`: `left <= right` at the previous evaluation and `left > right`
now (BELOW: `>=` then `<`), on scalars or elementwise: (left before, right before, left,
right) -> whether it crossed."""


__all__ = [
    "ARITHMETIC", "COMPARISON", "CROSSES", "Arguments", "Context", "Indicator", "OnBars",
    "Operation", "Operator", "arguments", "bars_of", "indicator",
]

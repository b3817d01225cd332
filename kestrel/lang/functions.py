"""The language's functions and operators, each one definition: its signature, its per-tick
form and its column form.

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
an int64 column) and for `vwap` the double itself; `Context.half_ticks_per_point` is the half
ticks per price point (1.0 for vwap). Sums of exact values are exact integers: an sma of mid
is the double nearest to the exact mean, so a mid equal to its sma compares equal.

An operation (`Operation`: abs, min, max) is a pure function of its arguments' values, as are
the operators (`ARITHMETIC`, `COMPARISON`, `CROSSES`): one callable serves scalars and arrays
alike, except where a zero divisor or NaN needs a test (two forms, the same values).

This module holds what every definition is built on: the resolved arguments of a call
(`Arguments`), the indicator's two forms (`Indicator`), bars (`OnBars`) and the exact running
sums the definitions share. docs/language.md defines every function; adding one is its
definition (a class in `kestrel.lang.windows`, `kestrel.lang.means` or
`kestrel.lang.operations`), its row in
`kestrel.lang.registry.DEFINITIONS`, its tests and its line in the docs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, ClassVar, NamedTuple

import msgspec
import numpy as np
import numpy.typing as npt

import kestrel.lang.ast as ast
from kestrel.lang.signature import FunctionSpec, Param

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Arr = npt.NDArray[Any]
NAN = math.nan
NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S
NO_BAR = -(2**62)  # the bar before the first one
INT_LIMIT = 2**62  # int64 sums below this magnitude cannot overflow

WINDOW = (Param("d", "Duration"),)
TIMEFRAME = Param("tf", "Timeframe", False)
SOURCE = Param("x", "PriceSeries")
COUNT = Param("n", "Count")


class Context(NamedTuple):
    """What an indicator needs of its session and source: the half ticks per price point of
    its source's exact values (1.0 when the source is binary, vwap), the session's open,
    where bars are aligned (`origin`), whether the source is `binary` (its exact values are
    doubles, not whole half ticks: sums of them are not exact), and the session's length
    (`span_ns`, 0 when unknown)."""

    half_ticks_per_point: float
    open_ns: int
    binary: bool = False
    span_ns: int = 0

    def origin(self, tf_ns: int) -> int:
        """Where bars of `tf_ns` are aligned: the session's open; bars of whole days in a
        session shorter than a day from the middle of the time between sessions (open minus
        half of a day less the session), so each earlier session is one bar whatever its
        offset from UTC (a daylight-saving change moves it by less than that margin)."""
        span = self.span_ns
        if 0 < span < NS_PER_DAY and tf_ns % NS_PER_DAY == 0:
            return self.open_ns - (NS_PER_DAY - span) // 2
        return self.open_ns


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
        return next((int(value) for key, value in self.values if key == "tf"), 0)

    def source(self) -> str:
        """The series the indicator reads: its `x`, else `last`."""
        return next((str(value) for key, value in self.values if key == "x"), "last")

    def lookback_ns(self) -> int:
        """How far back the call must see to be defined: its window, or its largest count of
        bars of its timeframe (0 for tick-count windows)."""
        windows = [int(value) for key, value in self.values if key == "d"]
        counts = [int(value) for key, value in self.values if key in ("n", "fast", "slow", "signal")]
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


class Indicator(ABC):
    """A stateful function of the session's ticks (see the module docstring). A fresh
    instance starts at the first tick it is fed (the session's first, or the first of the run's
    history a portfolio engine warms it with); `column` reads no state."""

    spec: ClassVar[FunctionSpec]
    on_bars: ClassVar[bool] = True  # a `tf` argument runs it over completed bars (`OnBars`)

    def __init__(self, args: Arguments, context: Context) -> None:
        self.args = args
        self.context = context

    @abstractmethod
    def update(self, ts: int, value: float, exact: float) -> float:
        """The value at a tick given its source's value and exact value."""

    @abstractmethod
    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        """The values at every tick of a prefix."""


def indicator(unit: type[Indicator], args: Arguments, context: Context) -> Indicator:
    """A fresh instance of `unit` for `args`, over completed bars when the call has a `tf`."""
    made = unit(args, context)
    tf = args.timeframe()
    return OnBars(made, tf, context.origin(tf)) if tf and unit.on_bars else made


class OnBars(Indicator):
    """An indicator over completed bars of `tf`: bars are aligned on `Context.origin` (bar
    k holds the ticks with `(ts - origin) // tf == k`), a bar completes when the first tick of a
    later bar arrives and feeds its last tick's source values to `inner`; between
    completions the value is the last one (NaN before the first)."""

    def __init__(self, inner: Indicator, tf_ns: int, origin_ns: int) -> None:
        self.inner, self.tf, self.origin = inner, tf_ns, origin_ns
        self.bar = NO_BAR
        self.value = NAN
        self.close: tuple[int, float, float] = (0, NAN, NAN)

    def update(self, ts: int, value: float, exact: float) -> float:
        bar = (ts - self.origin) // self.tf
        if bar != self.bar:
            if self.bar != NO_BAR:
                self.value = self.inner.update(*self.close)
            self.bar = bar
        self.close = (ts, value, exact)
        return self.value

    def column(self, ts: I64, value: F64, exact: Arr) -> F64:
        ordinal, ends = bars_of(ts, self.tf, self.origin)
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
def cumulative(values: Arr) -> Arr:
    """The running sums of `values` with a leading 0, accumulated sequentially: doubles, or for
    integers int64 when no sum can reach 2**62, else Python ints (an object column), the
    per-tick form's sums."""
    if values.dtype.kind in "fO":
        return np.concatenate(([values.dtype.type(0) if values.dtype.kind == "f" else 0], np.cumsum(values)))
    if not len(values):
        return np.zeros(1, dtype=np.int64)
    if int(np.abs(values).max()) * len(values) < INT_LIMIT:
        return np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(values, dtype=np.int64)))
    return cumulative(values.astype(object))


def floats(column: Arr) -> F64:
    """A column as doubles (Python ints each to the nearest double)."""
    return np.asarray(column, dtype=np.float64)


class RunningMean:
    """The mean of the last n values, `(S_i - S_{i-n}) / (n x half_ticks_per_point)` on the
    running sum S (exact for integers), NaN until n values are in."""

    def __init__(self, n: int, half_ticks_per_point: float) -> None:
        self.n, self.divisor = n, float(n) * half_ticks_per_point
        self.total: float = 0
        self.sums: deque[float] = deque([NAN] * n + [0], maxlen=n + 1)

    def push(self, value: float) -> float:
        self.total += value
        self.sums.append(self.total)
        return (self.total - self.sums[0]) / self.divisor

    def column(self, values: Arr) -> F64:
        n, out = self.n, np.full(len(values), NAN)
        if len(values) >= n:
            sums = cumulative(values)
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

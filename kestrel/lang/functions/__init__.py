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

docs/language.md defines every function; adding one is its unit (a class in `windows`,
`means` or `operations`), its row in `kestrel.lang.registry.UNITS`, its tests and its line in
the docs.
"""

from kestrel.lang.functions.base import Arguments, Context, Indicator, OnBars, arguments, indicator
from kestrel.lang.functions.operations import ARITHMETIC, COMPARISON, CROSSES, Operation

__all__ = ["ARITHMETIC", "COMPARISON", "CROSSES", "Arguments", "Context", "Indicator", "OnBars",
           "Operation", "arguments", "indicator"]

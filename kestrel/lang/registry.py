"""The one registry of Kestrel series and functions, with typed signatures.

The checker, the engine (evaluation) and the frame (panes that show indicators) all read
`SERIES` and `FUNCTIONS`; a name absent here does not exist in the language.

Invariants:
- every function is computable incrementally in O(1) amortised per tick (rolling windows,
  running sums, bar-close recurrences), so evaluation cost is bounded by the plan's size;
- parameters are positional; optional parameters come last and carry their default;
- `Param.type` is one of `ParamType`: `Duration` (a window, > 0), `Count` (a whole number of
  ticks or bars, > 0), `Timeframe` (a bar size, > 0) or `PriceSeries` (the bare name of a
  series of type Price).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from kestrel.lang.ast import Duration

ValueType: TypeAlias = Literal[
    "Price", "Qty", "Money", "Pct", "Duration", "TimeOfDay", "Count", "Bool", "Number"
]
"""Types of expressions. `Number` is a unit-less value: a plain literal (which takes the type
its context asks for: Price, Qty, Money or Count) or a ratio such as `last / vwap`."""

ParamType: TypeAlias = Literal["Duration", "Count", "Timeframe", "PriceSeries"]


class SeriesSpec(msgspec.Struct, frozen=True):
    """A per-tick series: its value at the current tick."""

    name: str
    type: ValueType
    doc: str


class Param(msgspec.Struct, frozen=True):
    """One positional parameter. `required` False means it may be omitted and `default`
    applies (None as a default means "no timeframe: tick-based")."""

    name: str
    type: ParamType
    required: bool = True
    default: Duration | None = None


class FunctionSpec(msgspec.Struct, frozen=True):
    """A window or indicator function with a typed signature."""

    name: str
    params: tuple[Param, ...]
    returns: ValueType
    doc: str

    @property
    def min_args(self) -> int:
        return sum(1 for p in self.params if p.required)

    @property
    def max_args(self) -> int:
        return len(self.params)

    @property
    def signature(self) -> str:
        """`sma(x: PriceSeries, n: Count[, tf: Timeframe]) -> Price`."""
        req = ", ".join(f"{p.name}: {p.type}" for p in self.params if p.required)
        opt = "".join(f"[, {p.name}: {p.type}]" for p in self.params if not p.required)
        return f"{self.name}({req}{opt}) -> {self.returns}"


def _series(*specs: tuple[str, ValueType, str]) -> dict[str, SeriesSpec]:
    return {name: SeriesSpec(name, typ, doc) for name, typ, doc in specs}


SERIES: dict[str, SeriesSpec] = _series(
    ("last", "Price", "price of the current tick's trade"),
    ("bid", "Price", "best bid at the current tick"),
    ("ask", "Price", "best ask at the current tick"),
    ("mid", "Price", "(bid + ask) / 2, exact to the half tick"),
    ("spread", "Price", "ask - bid, exact to the half tick"),
    ("size", "Qty", "size of the current tick's trade"),
    ("vol", "Qty", "session volume so far"),
    (
        "vwap",
        "Price",
        "session VWAP weighted by size (plain mean of last while the volume is 0)",
    ),
    ("open", "Price", "last of the session's first tick"),
    ("pos", "Qty", "signed position of the plan (long > 0, short < 0)"),
    ("upnl", "Money", "unrealised P&L of the open position"),
    ("rpnl", "Money", "realised P&L of the session"),
    ("pnl", "Money", "rpnl + upnl - fees (net of fees: what maxloss measures)"),
    ("time", "TimeOfDay", "session clock; hh:mm is its first occurrence in the session, as UNTIL"),
)

_WINDOW = (Param("d", "Duration"),)
_ONE_MINUTE = Duration(1, "m")

FUNCTIONS: dict[str, FunctionSpec] = {
    f.name: f
    for f in (
        FunctionSpec(
            "high", _WINDOW, "Price", "highest last over ticks in [t-d, t), before this tick"
        ),
        FunctionSpec(
            "low", _WINDOW, "Price", "lowest last over ticks in [t-d, t), before this tick"
        ),
        FunctionSpec("range", _WINDOW, "Price", "high(d) - low(d)"),
        FunctionSpec(
            "chg",
            _WINDOW,
            "Pct",
            "100 * (last / ref - 1), ref = last of the latest tick with ts <= t-d",
        ),
        FunctionSpec(
            "sma",
            (Param("x", "PriceSeries"), Param("n", "Count"), Param("tf", "Timeframe", False)),
            "Price",
            "simple mean of x over the last n ticks (this one included), or with tf over "
            "the closes of the last n completed tf bars",
        ),
        FunctionSpec(
            "ema",
            (Param("x", "PriceSeries"), Param("n", "Count"), Param("tf", "Timeframe", False)),
            "Price",
            "exponential mean of x, alpha = 2/(n+1), seeded with the first value; ticks or "
            "completed tf bars like sma",
        ),
        FunctionSpec(
            "atr",
            (Param("n", "Count"), Param("tf", "Timeframe", False, _ONE_MINUTE)),
            "Price",
            "simple mean of the true range over the last n completed tf bars (tf = 1m)",
        ),
    )
}

PRICE_SERIES: frozenset[str] = frozenset(n for n, s in SERIES.items() if s.type == "Price")

__all__ = [
    "FUNCTIONS",
    "PRICE_SERIES",
    "SERIES",
    "FunctionSpec",
    "Param",
    "ParamType",
    "SeriesSpec",
    "ValueType",
]

"""The language's value types and the typed signatures of its functions.

Invariants:
- parameters are positional; optional parameters come last and carry their default;
- `Param.type` is one of `ParamType`: `Duration` (a window literal, > 0), `Count` (a whole
  number of ticks or bars, > 0), `Timeframe` (a bar size literal, > 0), `PriceSeries` (the bare
  name of a series of type Price), `Number` (a number literal > 0, such as a band's width) or
  `Numeric` (any numeric expression; the function's result then has the type its numeric
  arguments share, a constant Number adapting, as in a comparison);
- `FunctionSpec.bounds` is the closed range every defined value of the function lies in (rsi:
  0..100), or None; `increasing` names Count parameters that must be strictly increasing in
  that order (macd's fast and slow).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from kestrel.lang.ast import Duration

ValueType: TypeAlias = Literal[
    "Price", "Qty", "Money", "Pct", "Duration", "TimeOfDay", "Count", "Bool", "Number"
]
"""Types of expressions. `Number` is a unit-less value: a constant (a literal or arithmetic of
literals, which takes the type its context asks for: Price, Qty, Money, Pct or Count) or a
computed value (rsi, zscore, a ratio such as `last / vwap`), which adds to and compares with
Numbers only."""

ParamType: TypeAlias = Literal["Duration", "Count", "Timeframe", "PriceSeries", "Number", "Numeric"]


class Param(msgspec.Struct, frozen=True):
    """One positional parameter. `required` False means it may be omitted and `default`
    applies (None as a default means "no timeframe: tick-based")."""

    name: str
    type: ParamType
    required: bool = True
    default: Duration | None = None


class FunctionSpec(msgspec.Struct, frozen=True):
    """A function's typed signature: its parameters, its result type (None: the type its
    `Numeric` arguments share), what it computes, the range of its values and the Count
    parameters that must increase."""

    name: str
    params: tuple[Param, ...]
    returns: ValueType | None
    doc: str
    bounds: tuple[float, float] | None = None
    increasing: tuple[str, ...] = ()

    @property
    def min_args(self) -> int:
        return sum(1 for param in self.params if param.required)

    @property
    def max_args(self) -> int:
        return len(self.params)

    @property
    def result(self) -> str:
        """The result as the card shows it: `Price`, `Number 0..100`, or `a` (the type of a)."""
        if self.returns is None:
            return "a"
        if self.bounds is None:
            return self.returns
        lo, hi = self.bounds
        return f"{self.returns} {lo:g}..{hi:g}"

    @property
    def signature(self) -> str:
        """`sma(x,n[,tf])->Price`, compact for the language card: parameter names, each
        standing for one kind (see `PARAMETER_KINDS`); `typed` spells the kinds out."""
        req = ",".join(param.name for param in self.params if param.required)
        opt = "".join(f"[,{param.name}]" for param in self.params if not param.required)
        return f"{self.name}({req}{opt})->{self.result}"

    @property
    def example(self) -> str:
        """A valid call with every parameter given: `sma(last, 14, 5m)`, `rsi(14, 5m)`."""
        return f"{self.name}({', '.join(EXAMPLE_ARGUMENTS[param.name] for param in self.params)})"

    @property
    def typed(self) -> str:
        """`sma(x: PriceSeries, n: Count[, tf: Timeframe]) -> Price`."""
        req = ", ".join(f"{param.name}: {param.type}" for param in self.params if param.required)
        opt = "".join(f"[, {param.name}: {param.type}]" for param in self.params if not param.required)
        return f"{self.name}({req}{opt}) -> {self.result}"


EXAMPLE_ARGUMENTS: dict[str, str] = {
    "d": "30m", "n": "14", "fast": "12", "slow": "26", "signal": "9", "tf": "5m", "x": "last",
    "k": "2", "a": "last", "b": "vwap",
}
"""A valid argument for each parameter name, so that a function's `example` call checks (the
counts of macd increase, fast below slow)."""

PARAMETER_KINDS: dict[str, ParamType] = {
    "d": "Duration", "n": "Count", "fast": "Count", "slow": "Count", "signal": "Count",
    "tf": "Timeframe", "x": "PriceSeries", "k": "Number", "a": "Numeric", "b": "Numeric",
}
"""Each parameter name of the language's functions stands for one kind, so a signature can
show names alone (`FunctionSpec.signature`); the registry checks every parameter against it."""

__all__ = ["EXAMPLE_ARGUMENTS", "PARAMETER_KINDS", "FunctionSpec", "Param", "ParamType", "ValueType"]

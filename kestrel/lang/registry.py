"""The one registry of Kestrel series and functions.

The checker, the engine (both execution paths), the frame (panes that show indicators) and the
language card all read `SERIES` and `DEFINITIONS`; a name absent here does not exist in the
language. `DEFINITIONS` is the table of functions, one row per definition (a class of
`kestrel.lang.windows`, `means` or `operations`: its signature, types and bounds, and its
per-tick and column forms); `FUNCTIONS` is their signatures by name.

Invariants:
- every function is computable incrementally in O(1) amortised per tick (rolling windows,
  running sums, bar-close recurrences), so evaluation cost is bounded by the plan's size;
- every parameter's name stands for its kind (`signature.PARAMETER_KINDS`);
- a series marked `exact` is a whole number of half ticks at every tick (`Context.half_ticks_per_point`).
"""

from __future__ import annotations

import msgspec

from kestrel.lang import means, operations, windows
from kestrel.lang.functions import Indicator
from kestrel.lang.operations import Operation
from kestrel.lang.signature import PARAMETER_KINDS, FunctionSpec, Param, ParamType, ValueType


class SeriesSpec(msgspec.Struct, frozen=True):
    """A per-tick series: its value at the current tick; `exact` when it is on the half-tick
    grid (the exact sums of sma, stdev and rsi work on its whole half ticks)."""

    name: str
    type: ValueType
    doc: str
    exact: bool = False


def _series(*specs: tuple[str, ValueType, str, bool]) -> dict[str, SeriesSpec]:
    return {name: SeriesSpec(name, typ, doc, exact) for name, typ, doc, exact in specs}


SERIES: dict[str, SeriesSpec] = _series(
    ("last", "Price", "price of the current tick's trade", True),
    ("bid", "Price", "best bid at the current tick", True),
    ("ask", "Price", "best ask at the current tick", True),
    ("mid", "Price", "(bid + ask) / 2, exact to the half tick", True),
    ("spread", "Price", "ask - bid, exact to the half tick", True),
    ("size", "Qty", "size of the current tick's trade", False),
    ("vol", "Qty", "session volume so far", False),
    ("vwap", "Price", "session VWAP weighted by size (plain mean of last while the volume is 0)",
     False),
    ("open", "Price", "last of the session's first tick", True),
    ("pos", "Qty", "signed position of the plan (long > 0, short < 0)", False),
    ("upnl", "Money", "unrealised P&L of the open position", False),
    ("rpnl", "Money", "realised P&L of the session", False),
    ("pnl", "Money", "rpnl + upnl - fees (net of fees: what maxloss measures)", False),
    ("time", "TimeOfDay", "session clock; hh:mm is its first occurrence in the session, as UNTIL",
     False),
)

Definition = type[Indicator] | type[Operation]

DEFINITIONS: dict[str, Definition] = {
    definition.spec.name: definition
    for definition in (
        windows.High, windows.Low, windows.Range, windows.Chg, means.Sma, means.Ema, windows.Atr,
        means.Rsi, means.Stdev, means.Zscore, means.BbUpper, means.BbLower, means.Macd,
        means.MacdSignal, operations.Abs, operations.Min, operations.Max,
    )
}

FUNCTIONS: dict[str, FunctionSpec] = {name: definition.spec for name, definition in DEFINITIONS.items()}

PRICE_SERIES: frozenset[str] = frozenset(name for name, spec in SERIES.items() if spec.type == "Price")

for _spec in FUNCTIONS.values():  # a parameter's name says its kind (the card relies on it)
    assert all(PARAMETER_KINDS.get(param.name) == param.type for param in _spec.params), _spec.name

__all__ = [
    "DEFINITIONS",
    "FUNCTIONS",
    "PRICE_SERIES",
    "SERIES",
    "FunctionSpec",
    "Param",
    "Definition",
    "ParamType",
    "SeriesSpec",
    "ValueType",
]

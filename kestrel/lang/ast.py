"""The Kestrel AST: frozen msgspec Structs, tagged by `kind`.

This module is the contract between the language (parser, checker, formatter),
the frame (VIEW resolution), the engine (plan compilation) and the session layer.
Nodes carry no source positions, so two parses of equivalent text compare equal
and `parse(format(ast)) == ast` holds; the parser keeps positions on the side
for error reporting.

Invariants:
- every node is immutable and hashable (frozen Structs, tuples, no lists);
- numbers are floats (prices, money) or ints (quantities, counts) as typed below;
- a literal keeps the unit the author wrote (`90m` stays 90 minutes, not 1.5h), so
  formatting is canonical but faithful.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, TypeAlias

import msgspec

from kestrel.market.orders import OrderType, Side

# --------------------------------------------------------------------------------------------
# Literals


class Number(msgspec.Struct, frozen=True, tag="num", tag_field="kind"):
    """A plain number (`182.40`, `100`, `0.05`); its type (Price, Qty, Count, Money, Number)
    comes from context during checking."""

    value: float


class Percent(msgspec.Struct, frozen=True, tag="pct", tag_field="kind"):
    """A percentage as written: `0.6%` is `Percent(0.6)` (i.e. a ratio of 0.006)."""

    value: float


DurationUnit: TypeAlias = Literal["s", "m", "h", "d"]


class Duration(msgspec.Struct, frozen=True, tag="dur", tag_field="kind"):
    """A duration as written: `30m` is `Duration(30, "m")`. `d` is a trading day
    (a session), not 24 hours."""

    value: int
    unit: DurationUnit

    @property
    def seconds(self) -> int:
        """Length in seconds (`d` counts as 86400 for ordering; windows in days are
        resolved against sessions by whoever evaluates them)."""
        return self.value * _UNIT_SECONDS[self.unit]


_UNIT_SECONDS: dict[str, int] = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TimeOfDay(msgspec.Struct, frozen=True, tag="tod", tag_field="kind"):
    """A wall-clock time in the session's timezone: `15:45` is `TimeOfDay(15, 45)`."""

    hour: int
    minute: int
    second: int = 0

    @property
    def seconds(self) -> int:
        return self.hour * 3600 + self.minute * 60 + self.second


# --------------------------------------------------------------------------------------------
# Expressions


class Series(msgspec.Struct, frozen=True, tag="series", tag_field="kind"):
    """A per-tick series by name: last bid ask mid spread size vol vwap open pos upnl rpnl pnl
    time (see the language reference for each one's type)."""

    name: str


class Call(msgspec.Struct, frozen=True, tag="call", tag_field="kind"):
    """A window or indicator function: `high(30m)`, `sma(mid, 20)`, `atr(14)`.
    Arguments are positional, after defaults are NOT filled in (the checker knows defaults)."""

    name: str
    args: tuple[Expr, ...] = ()


class SymbolRead(msgspec.Struct, frozen=True, tag="xsym", tag_field="kind"):
    """A read of another member of the universe: `SPY.last` is `SymbolRead("SPY",
    Series("last"))`, `SPY.chg(1d)` is `SymbolRead("SPY", Call("chg", (Duration(1, "d"),)))`.
    At a tick of the plan's symbol it is the read over `symbol`'s ticks strictly before that
    tick in the merged order (undefined until `symbol` has ticked). A Price of another symbol
    is a type of its own: it never meets the plan's own prices in `+ -` or a comparison."""

    symbol: str
    read: Series | Call


class Neg(msgspec.Struct, frozen=True, tag="neg", tag_field="kind"):
    """Arithmetic negation: `-x`."""

    operand: Expr


ArithOp: TypeAlias = Literal["+", "-", "*", "/"]


class Arith(msgspec.Struct, frozen=True, tag="arith", tag_field="kind"):
    op: ArithOp
    left: Expr
    right: Expr


CompareOp: TypeAlias = Literal["<", "<=", ">", ">=", "==", "!="]


class Compare(msgspec.Struct, frozen=True, tag="cmp", tag_field="kind"):
    op: CompareOp
    left: Expr
    right: Expr


class Crosses(msgspec.Struct, frozen=True, tag="cross", tag_field="kind"):
    """`left CROSSES ABOVE right`: true at a tick where left > right and at the previous
    evaluation left <= right. Never true on the first observation."""

    direction: Literal["above", "below"]
    left: Expr
    right: Expr


class And(msgspec.Struct, frozen=True, tag="and", tag_field="kind"):
    operands: tuple[Expr, ...]


class Or(msgspec.Struct, frozen=True, tag="or", tag_field="kind"):
    operands: tuple[Expr, ...]


class Not(msgspec.Struct, frozen=True, tag="not", tag_field="kind"):
    operand: Expr


Expr: TypeAlias = (
    Number
    | Percent
    | Duration
    | TimeOfDay
    | Series
    | Call
    | SymbolRead
    | Neg
    | Arith
    | Compare
    | Crosses
    | And
    | Or
    | Not
)

# --------------------------------------------------------------------------------------------
# Actions


class Offset(msgspec.Struct, frozen=True):
    """A bracket price relative to the entry fill or absolute.

    - `pct`: `-0.6%` is `Offset("pct", -0.6)`: entry * (1 + value/100)
    - `abs`: `-0.50` is `Offset("abs", -0.5)`: entry + value
    - `at`:  `@182.40` is `Offset("at", 182.4)`: exactly that price
    For TRAIL, the magnitude is the trailing distance (pct of, or absolute from, the best
    price since entry); the sign is ignored by the engine and normalized by the formatter.
    """

    mode: Literal["pct", "abs", "at"]
    value: float


class Size(msgspec.Struct, frozen=True, tag="size", tag_field="kind"):
    """An order sized by money, not by quantity: `$5000` is `Size("cash", 5000.0)` (an amount
    in the account's currency), `10%EQ` is `Size("equity", 10.0)` (a percentage of the
    account's equity). The engine works the quantity out at placement (docs/engine.md)."""

    basis: Literal["cash", "equity"]
    value: float


class Order(msgspec.Struct, frozen=True, tag="order", tag_field="kind"):
    """`BUY 100 LMT ask+0.02 STOP -0.6% TARGET +1.2% TTL 20m`.

    `price` is required for LMT and STP, absent for MKT. Brackets become OCO children of
    the entry once it fills, sized to the filled quantity. `qty` is in units of the
    instrument: an `int` when whole, else a decimal read at its shortest form (0.0005 BTC); the
    checker, told the instrument's lot size, accepts only a positive whole number of lots.
    With `size` (`BUY $5000 MKT`, `BUY 10%EQ MKT`) `qty` is 0: the quantity is worked out when
    the order is placed."""

    side: Side
    qty: int | float
    order_type: OrderType
    price: Expr | None = None
    stop: Offset | None = None
    target: Offset | None = None
    trail: Offset | None = None
    ttl: Duration | None = None
    size: Size | None = None


class Flat(msgspec.Struct, frozen=True, tag="flat", tag_field="kind"):
    """Close the whole position at market."""


class Cancel(msgspec.Struct, frozen=True, tag="cancel", tag_field="kind"):
    """Cancel the plan's working entry orders."""


Action: TypeAlias = Order | Flat | Cancel


class Rule(msgspec.Struct, frozen=True):
    """`WHEN cond: action [; action]* [xN]` — fires at the first tick where `cond` holds,
    then is spent; `repeat` > 1 lets it fire up to that many times (each firing needs the
    condition to become true again, i.e. it re-arms on a false evaluation)."""

    cond: Expr
    actions: tuple[Action, ...]
    repeat: int = 1


# --------------------------------------------------------------------------------------------
# Statements


class Until(msgspec.Struct, frozen=True, tag="until", tag_field="kind"):
    at: TimeOfDay


class For(msgspec.Struct, frozen=True, tag="for", tag_field="kind"):
    span: Duration


Expiry: TypeAlias = Until | For


class Risk(msgspec.Struct, frozen=True):
    """Risk bounds; None means the configured default applies."""

    maxpos: int | float | None = None  # units, a whole number of lots (as an order's qty)
    maxloss: float | None = None
    maxorders: int | None = None


class Plan(msgspec.Struct, frozen=True, tag="plan", tag_field="kind"):
    """`PLAN name [ON SYMBOL] [UNTIL hh:mm | FOR dur] [RISK ...]` followed by rules.
    Supersedes the incumbent plan when armed. `instrument` None means the session's."""

    name: str
    rules: tuple[Rule, ...]
    instrument: str | None = None
    expiry: Expiry | None = None
    risk: Risk = Risk()


class Ident(msgspec.Struct, frozen=True, tag="ident", tag_field="kind"):
    """A bare word as a pane argument (e.g. a mode name)."""

    name: str


PaneArgValue: TypeAlias = Number | Percent | Duration | TimeOfDay | Ident


class PaneArg(msgspec.Struct, frozen=True):
    """One pane argument, positional (`name` None) or named (`n=24`)."""

    value: PaneArgValue
    name: str | None = None


class PaneRef(msgspec.Struct, frozen=True):
    """`bars(5m, 24)` in a VIEW."""

    name: str
    args: tuple[PaneArg, ...] = ()


class View(msgspec.Struct, frozen=True, tag="view", tag_field="kind"):
    """`VIEW name: pane, pane(args), ... [BUDGET tokens]`."""

    name: str
    panes: tuple[PaneRef, ...]
    budget: int | None = None


class StandDown(msgspec.Struct, frozen=True, tag="standdown", tag_field="kind"):
    """`STANDDOWN [ON SYMBOL] ["reason"]`: disarm entries and cancel working entry orders;
    protective exits of open positions stay live. `instrument` None: every plan (in a
    universe, every symbol's); else that symbol's plan only."""

    reason: str | None = None
    instrument: str | None = None


class Pass(msgspec.Struct, frozen=True, tag="pass", tag_field="kind"):
    """`PASS`: keep the incumbent plan as it is."""


Statement: TypeAlias = Plan | View | StandDown | Pass


class Module(msgspec.Struct, frozen=True, tag="module", tag_field="kind"):
    """Several statements in one file."""

    statements: tuple[Statement, ...]


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct subexpressions of `expr` (a call's arguments included)."""
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, SymbolRead):
        return (expr.read,)
    if isinstance(expr, Neg | Not):
        return (expr.operand,)
    if isinstance(expr, Arith | Compare | Crosses):
        return (expr.left, expr.right)
    if isinstance(expr, And | Or):
        return expr.operands
    return ()


def walk(*roots: Expr | None) -> Iterator[Expr]:
    """Every expression under `roots` (themselves included), each once per occurrence."""
    stack = [root for root in roots if root is not None]
    while stack:
        expr = stack.pop()
        yield expr
        stack.extend(children(expr))


__all__ = [
    "Action",
    "And",
    "Arith",
    "ArithOp",
    "Call",
    "Cancel",
    "Compare",
    "CompareOp",
    "Crosses",
    "Duration",
    "DurationUnit",
    "Expiry",
    "Expr",
    "Flat",
    "For",
    "Ident",
    "Module",
    "Neg",
    "Not",
    "Number",
    "Offset",
    "Or",
    "Order",
    "PaneArg",
    "PaneArgValue",
    "PaneRef",
    "Pass",
    "Percent",
    "Plan",
    "Risk",
    "Rule",
    "Size",
    "Series",
    "StandDown",
    "Statement",
    "SymbolRead",
    "TimeOfDay",
    "Until",
    "View",
    "children",
    "walk",
]

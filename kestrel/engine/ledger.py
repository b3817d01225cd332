"""The ledger: every order, fill, cancel, position change, arm/disarm and PnL mark.

Events are msgspec Structs in one tagged union (`event` field), untracked by the garbage
collector (`gc=False`: they hold only numbers, strings and None, so they cannot be in a
cycle, and a long ledger adds nothing to every collection's work). Each carries `tick` (the
engine's global tick index since the session started) and `ts` (ns UTC). The canonical
serialization is JSON lines, one event per line in emission order, fields in declaration
order, floats in shortest round-trip form: two runs are compared by bytes. Quantities (`qty`,
`pos`) are in units of the instrument: integers for a whole lot (1 share, 100 shares), the
shortest decimal otherwise (0.0003 BTC), exactly the whole lots the engine counted.

The PnL series is the `Mark` events, emitted after every fill and at the session close
(or end of data); drawdown is measured on that series.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal, TypeAlias

import msgspec

from kestrel.market.orders import OrderType, Side

Role: TypeAlias = Literal["entry", "stop", "target", "trail", "flat", "exit"]
"""An order's role: a plan's entry, a bracket child (stop, target, trail), a FLAT, or the
exit the engine sends (maxloss, the session close)."""
WorkingType: TypeAlias = OrderType | Literal["trail"]
"""A working order's type: an entry's (mkt, lmt, stp) or a trailing stop."""


class Armed(msgspec.Struct, frozen=True, gc=False, tag="armed", tag_field="event"):
    tick: int
    ts: int
    plan: str
    rules: int
    expiry_ts: int


class Carried(msgspec.Struct, frozen=True, gc=False, tag="carry", tag_field="event"):
    """The session opened with a position carried from the previous one (`end_of_day =
    "carry"`): its size, average price and how many protective orders came with it (they
    follow as `order` events of plan `carried`)."""

    tick: int
    ts: int
    pos: int | float
    avg_price: float
    orders: int


class Disarmed(msgspec.Struct, frozen=True, gc=False, tag="disarmed", tag_field="event"):
    tick: int
    ts: int
    plan: str
    reason: str


class Fired(msgspec.Struct, frozen=True, gc=False, tag="fired", tag_field="event"):
    tick: int
    ts: int
    plan: str
    rule: int


class OrderPlaced(msgspec.Struct, frozen=True, gc=False, tag="order", tag_field="event"):
    tick: int
    ts: int
    id: int
    plan: str
    role: Role
    side: Side
    qty: int | float
    type: WorkingType
    price: float | None
    parent: int | None


class OrderRejected(msgspec.Struct, frozen=True, gc=False, tag="reject", tag_field="event"):
    tick: int
    ts: int
    plan: str
    rule: int
    reason: str


class Filled(msgspec.Struct, frozen=True, gc=False, tag="fill", tag_field="event"):
    tick: int
    ts: int
    id: int
    side: Side
    qty: int | float
    price: float
    fee: float


class Cancelled(msgspec.Struct, frozen=True, gc=False, tag="cancel", tag_field="event"):
    tick: int
    ts: int
    id: int
    reason: str


class PositionChanged(msgspec.Struct, frozen=True, gc=False, tag="position", tag_field="event"):
    tick: int
    ts: int
    pos: int | float
    avg_price: float | None
    rpnl: float


class Mark(msgspec.Struct, frozen=True, gc=False, tag="mark", tag_field="event"):
    """Equity = rpnl + upnl - fees, upnl marked at the touch (bid for longs, ask for shorts)."""

    tick: int
    ts: int
    pos: int | float
    rpnl: float
    upnl: float
    fees: float
    equity: float


LedgerEvent: TypeAlias = (
    Armed | Carried | Disarmed | Fired | OrderPlaced | OrderRejected | Filled | Cancelled
    | PositionChanged | Mark
)

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(LedgerEvent)
_ZERO = Decimal(0)


def _dec(amount: float) -> Decimal:
    """A money amount at its shortest decimal form (the engine keeps money on a decimal
    quantum, so this is the exact amount it meant)."""
    return Decimal(repr(amount))


class LedgerSummary(msgspec.Struct, frozen=True):
    """Figures over a ledger. A trade is a round trip from flat back to flat; it wins when
    its realized PnL net of the fees paid during it is > 0. `max_drawdown` is the largest
    peak-to-trough fall of `Mark.equity`, the peak starting at 0 (the equity before any
    trade); `exposure_ns` the time spent with a position. `carried_in` is the position the
    session opened with (carried from the previous session), `carried_out` the position it
    ended with (non-zero only under `end_of_day="carry"`); a carried position's trade counts
    in the session that closes it, its realized PnL measured from the carried average. Money figures are computed in
    decimal from the ledger's amounts, so they are exact to the engine's money quantum
    (`-96.0`, not `-95.99999999999795`)."""

    trades: int
    wins: int
    win_rate: float
    realized_pnl: float
    fees: float
    net_pnl: float
    max_drawdown: float
    exposure_ns: int
    orders: int
    fills: int
    carried_in: int | float = 0
    carried_out: int | float = 0


class Ledger:
    """An append-only list of ledger events with canonical serialization."""

    __slots__ = ("events",)

    def __init__(self, events: list[LedgerEvent] | None = None) -> None:
        self.events: list[LedgerEvent] = [] if events is None else events

    def __len__(self) -> int:
        return len(self.events)

    def to_jsonl(self) -> bytes:
        """Canonical JSON lines (byte-comparable between runs)."""
        return _ENCODER.encode_lines(self.events)  # each event's JSON, then "\n"

    @classmethod
    def from_jsonl(cls, data: bytes) -> Ledger:
        return cls([_DECODER.decode(line) for line in data.splitlines() if line.strip()])

    def summary(self) -> LedgerSummary:
        trades = wins = orders = fills = 0
        rpnl = fees = trade_start_rpnl = trade_start_fees = _ZERO
        pos: int | float = 0
        open_since: int | None = None
        exposure = 0
        last_ts = 0
        peak = _ZERO  # equity starts at 0: a first trade that only loses is a drawdown
        max_dd = _ZERO
        last_fee = _ZERO
        carried_in: int | float = 0
        for e in self.events:
            last_ts = max(last_ts, e.ts)
            if isinstance(e, Carried):
                carried_in = pos = e.pos
                open_since = e.ts
            elif isinstance(e, OrderPlaced):
                orders += 1
            elif isinstance(e, Filled):
                fills += 1
                last_fee = _dec(e.fee)
                fees += last_fee
            elif isinstance(e, PositionChanged):
                if pos == 0 and e.pos != 0:
                    open_since = e.ts
                    trade_start_rpnl, trade_start_fees = rpnl, fees - last_fee
                rpnl = _dec(e.rpnl)
                if pos != 0 and (e.pos == 0 or (pos > 0) != (e.pos > 0)):
                    trades += 1
                    if (rpnl - trade_start_rpnl) - (fees - trade_start_fees) > 0:
                        wins += 1
                    if e.pos == 0:
                        if open_since is not None:
                            exposure += e.ts - open_since
                        open_since = None
                    else:  # a reversal closes one trade and opens the next
                        trade_start_rpnl, trade_start_fees = rpnl, fees
                pos = e.pos
            elif isinstance(e, Mark):
                eq = _dec(e.equity)
                peak = max(peak, eq)
                max_dd = max(max_dd, peak - eq)
        if open_since is not None:
            exposure += last_ts - open_since
        return LedgerSummary(
            trades=trades,
            wins=wins,
            win_rate=(wins / trades) if trades else 0.0,
            realized_pnl=float(rpnl),
            fees=float(fees),
            net_pnl=float(rpnl - fees),
            max_drawdown=float(max_dd),
            exposure_ns=exposure,
            orders=orders,
            fills=fills,
            carried_in=carried_in,
            carried_out=pos,
        )


__all__ = [
    "Role",
    "Side",
    "WorkingType",
    "Armed",
    "Cancelled",
    "Carried",
    "Disarmed",
    "Filled",
    "Fired",
    "Ledger",
    "LedgerEvent",
    "LedgerSummary",
    "Mark",
    "OrderPlaced",
    "OrderRejected",
    "PositionChanged",
]

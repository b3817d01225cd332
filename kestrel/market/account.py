"""Account state shown by the `position` pane (filled by the session layer from the engine)."""

from __future__ import annotations

import msgspec

from kestrel.market.orders import OrderType, Side


class WorkingOrder(msgspec.Struct, frozen=True):
    """A working (unfilled) order: `qty` in units of the instrument; `price` is None for MKT."""

    id: str
    side: Side
    qty: int | float
    type: OrderType
    price: float | None = None


class AccountState(msgspec.Struct, frozen=True):
    """Position and PnL as of the snapshot cutoff. `position` is signed (negative = short);
    `avg_entry` is None when flat; money values are in the instrument's currency; quantities
    are in units (an `int` for an instrument whose lot is whole)."""

    position: int | float = 0
    avg_entry: float | None = None
    upnl: float = 0.0
    rpnl: float = 0.0
    fees: float = 0.0
    orders: tuple[WorkingOrder, ...] = ()


FLAT = AccountState()

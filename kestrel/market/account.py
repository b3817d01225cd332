"""Account state shown by the `position` pane and the broker's notices shown by the RULES
kernel pane (both filled by the session layer from the engine)."""

from __future__ import annotations

from typing import Literal

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


class Notice(msgspec.Struct, frozen=True):
    """What the broker did to the agent's plan that the agent did not ask for: an order
    `rejected` (by a bound, or a price undefined at the tick) or the plan `disarmed` (a loss
    bound, its expiry, the close). `ts` is the instant (ns UTC), `rule` the plan's rule
    counted from 1 as written (None for a disarm), `reason` the broker's own words."""

    kind: Literal["rejected", "disarmed"]
    ts: int
    plan: str
    reason: str
    rule: int | None = None

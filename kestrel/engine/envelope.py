"""The broker's envelope: the price band and deadlines outside which a tick needs the broker.

Invariant: the broker must see tick k when bid <= lo_bid or bid >= hi_bid or ask <= lo_ask or
ask >= hi_ask or ts >= t_next or k >= i_next; anywhere else `Broker.step` would change
nothing. The envelope is conservative (the loss line carries a small margin); a trailing
stop's side of the band is just past its best touch so far, so the broker sees every tick
that ratchets it.
"""

from __future__ import annotations

import math
from typing import TypeAlias

from kestrel.engine.orders import BrokerOrder, TickGrid

INF = math.inf
NEVER = 2**62

# The band and deadlines of the invariant above: (lo_bid, hi_bid, lo_ask, hi_ask, t_next,
# i_next), a plain tuple the loops unpack once per change.
Envelope: TypeAlias = tuple[float, float, float, float, int, int]

IDLE: Envelope = (-INF, INF, -INF, INF, NEVER, NEVER)


def envelope(orders: dict[int, BrokerOrder], index: int, now: int, t_next: int, pos: int,
             loss_line: float | None, grid: TickGrid) -> Envelope:
    """The envelope after tick `index` at time `now` for the working `orders` (by id):
    `t_next` is the next plan deadline (close or expiry), `loss_line` the touch at which the
    loss floor would be reached for the open position `pos` (None: no running loss check)."""
    lo_b = lo_a = -INF
    hi_b = hi_a = INF
    i_next = NEVER
    k = index + 1  # the next tick
    for o in orders.values():
        if k < o.eligible_index or now < o.eligible_ts:
            if k < o.eligible_index < i_next:
                i_next = o.eligible_index
            if now < o.eligible_ts < t_next:
                t_next = o.eligible_ts
            continue
        if o.expire_ts is not None and o.expire_ts < t_next:
            t_next = o.expire_ts
        if o.type == "mkt":
            i_next = min(i_next, k)
        elif o.type == "trail":  # its level, and past its best touch (a ratchet)
            level = o.trail_level(grid)
            if o.side < 0:
                lo_b, hi_b = max(lo_b, level), min(hi_b, math.nextafter(o.best, INF))
            else:
                hi_a, lo_a = min(hi_a, level), max(lo_a, math.nextafter(o.best, -INF))
        else:
            assert o.price is not None
            if o.type == "lmt":  # a buy fills at an ask at or below it, a sell at a bid above
                if o.side > 0:
                    lo_a = max(lo_a, o.price)
                else:
                    hi_b = min(hi_b, o.price)
            elif o.side > 0:  # a stop triggers at an ask at or above it, a bid at or below
                hi_a = min(hi_a, o.price)
            else:
                lo_b = max(lo_b, o.price)
    if loss_line is not None:
        margin = 1e-6 * (1.0 + abs(loss_line))
        if pos > 0:
            lo_b = max(lo_b, loss_line + margin)
        else:
            hi_a = min(hi_a, loss_line - margin)
    return (lo_b, hi_b, lo_a, hi_a, t_next, i_next)


__all__ = ["IDLE", "NEVER", "Envelope", "envelope"]

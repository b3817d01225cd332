"""The broker's envelope: the price band and deadlines outside which a tick needs the broker.

Invariant: the broker must see tick k when bid <= lo_b or bid >= hi_b or ask <= lo_a or
ask >= hi_a or ts >= t_next or k >= i_next; anywhere else `Broker.step` would change nothing
but the trailing stops' best price (an idempotent max). The envelope is conservative (the
loss line carries a small margin). `core` leaves the trailing stops out (listed apart) for
the fast path, which follows them with a running max instead of stepping on every new best.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from kestrel.engine.orders import BrokerOrder, TickGrid

INF = math.inf
NEVER = 2**62


class Envelope(NamedTuple):
    """The band and deadlines of the invariant above (a tuple: unpacks as fast as one)."""

    lo_bid: float
    hi_bid: float
    lo_ask: float
    hi_ask: float
    t_next: int
    i_next: int


IDLE_ENV = Envelope(-INF, INF, -INF, INF, NEVER, NEVER)
_new = tuple.__new__  # builds an Envelope from its six values without NamedTuple's Python-level __new__


def envelope(orders: Iterable[BrokerOrder], i: int, now: int, t_next: int, pos: int,
             loss_line: float | None, grid: TickGrid) -> tuple[Envelope, Envelope, list[BrokerOrder]]:
    """(env, core, trails) after tick i at time `now`: `t_next` is the next plan deadline
    (close or expiry), `loss_line` the touch at which the loss floor would be reached for the
    open position `pos` (None: no running loss check)."""
    trails: list[BrokerOrder] = []
    lo_b, hi_b, lo_a, hi_a = -INF, INF, -INF, INF
    i_next = NEVER
    for o in orders:
        if i + 1 < o.el_idx or now < o.el_ts:
            if i + 1 < o.el_idx:
                i_next = min(i_next, o.el_idx)
            if now < o.el_ts:
                t_next = min(t_next, o.el_ts)
            continue
        if o.expire_ts is not None:
            t_next = min(t_next, o.expire_ts)
        ty = o.type
        if ty == "mkt":
            i_next = min(i_next, i + 1)
        elif ty == "lmt":
            assert o.price is not None
            if o.side > 0:
                lo_a = max(lo_a, o.price)
            else:
                hi_b = min(hi_b, o.price)
        elif ty == "stp":
            assert o.price is not None
            if o.side > 0:
                hi_a = min(hi_a, o.price)
            else:
                lo_b = max(lo_b, o.price)
        else:
            trails.append(o)
    if loss_line is not None:
        margin = 1e-6 * (1.0 + abs(loss_line))
        if pos > 0:
            lo_b = max(lo_b, loss_line + margin)
        else:
            hi_a = min(hi_a, loss_line - margin)
    core: Envelope = _new(Envelope, (lo_b, hi_b, lo_a, hi_a, t_next, i_next))
    for o in trails:
        lvl = o.trail_level(grid)
        if o.side < 0:
            lo_b = max(lo_b, lvl)
            hi_b = min(hi_b, o.best)
        else:
            hi_a = min(hi_a, lvl)
            lo_a = max(lo_a, o.best)
    env: Envelope = _new(Envelope, (lo_b, hi_b, lo_a, hi_a, t_next, i_next))
    return env, core, trails


__all__ = ["IDLE_ENV", "NEVER", "Envelope", "envelope"]

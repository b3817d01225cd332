"""The broker's envelope: the price band and deadlines outside which a tick needs the broker.

Invariant: the broker must see tick k when bid <= lo_b or bid >= hi_b or ask <= lo_a or
ask >= hi_a or ts >= t_next or k >= i_next; anywhere else `Broker.step` would change nothing
but the trailing stops' best price (an idempotent max). The envelope is conservative (the
loss line carries a small margin). `core` leaves the trailing stops out (listed apart) for
the fast path, which follows them with a running max instead of stepping on every new best.
"""

from __future__ import annotations

import math
from typing import Final, TypeAlias

from kestrel.engine.orders import LMT, MKT, STP, BrokerOrder, TickGrid

INF: Final = math.inf
NEVER: Final = 2**62


# The band and deadlines of the invariant above, (lo_bid, hi_bid, lo_ask, hi_ask, t_next,
# i_next): a plain tuple, which compiled code builds and unpacks without a Python call.
Envelope: TypeAlias = tuple[float, float, float, float, int, int]

IDLE_ENV: Final[Envelope] = (-INF, INF, -INF, INF, NEVER, NEVER)


def envelope(orders: dict[int, BrokerOrder], i: int, now: int, t_next: int, pos: int,
             loss_line: float | None, grid: TickGrid) -> tuple[Envelope, Envelope, list[BrokerOrder]]:
    """(env, core, trails) after tick i at time `now` for the working `orders` (by id):
    `t_next` is the next plan deadline
    (close or expiry), `loss_line` the touch at which the loss floor would be reached for the
    open position `pos` (None: no running loss check). `env` is `core` itself when there is
    no trailing stop. (Comparisons, not min/max calls: this runs at every broker event; they
    pick the same values.)"""
    trails: list[BrokerOrder] = []
    lo_b = lo_a = -INF
    hi_b = hi_a = INF
    i_next = NEVER
    k = i + 1  # the next tick
    for o in orders.values():
        el = o.el_idx
        el_ts = o.el_ts
        if k < el or now < el_ts:
            if k < el < i_next:
                i_next = el
            if now < el_ts < t_next:
                t_next = el_ts
            continue
        expire = o.exp
        if expire < t_next:
            t_next = expire
        kind = o.kind
        if kind == MKT:
            if k < i_next:
                i_next = k
        elif kind == LMT:
            p = o.px
            if o.side > 0:
                if p > lo_a:
                    lo_a = p
            elif p < hi_b:
                hi_b = p
        elif kind == STP:
            p = o.px
            if o.side > 0:
                if p < hi_a:
                    hi_a = p
            elif p > lo_b:
                lo_b = p
        else:
            trails.append(o)
    if loss_line is not None:
        margin = 1e-6 * (1.0 + abs(loss_line))
        if pos > 0:
            x = loss_line + margin
            if x > lo_b:
                lo_b = x
        else:
            x = loss_line - margin
            if x < hi_a:
                hi_a = x
    core: Envelope = (lo_b, hi_b, lo_a, hi_a, t_next, i_next)
    if not trails:
        return core, core, trails
    for o in trails:
        lvl = o.trail_level(grid)
        if o.side < 0:
            if lvl > lo_b:
                lo_b = lvl
            if o.best < hi_b:
                hi_b = o.best
        else:
            if lvl < hi_a:
                hi_a = lvl
            if o.best > lo_a:
                lo_a = o.best
    env: Envelope = (lo_b, hi_b, lo_a, hi_a, t_next, i_next)
    return env, core, trails


__all__ = ["IDLE_ENV", "NEVER", "Envelope", "envelope"]

"""Working orders of the simulated broker and their fill rules.

Fill rules at a tick whose touch is (bid b, ask a), for an eligible order:
- MKT: fills at the touch (a for buys, b for sells) with adverse slippage;
- LMT: a buy fills when a <= limit at min(limit, a); a sell when b >= limit at max(limit, b)
  (at the limit, or better when the market gaps through); no slippage;
- STP: a buy triggers when a >= stop, a sell when b <= stop, and fills at that touch with
  adverse slippage (the gap is the trader's);
- TRAIL (a protective stop): its level follows the best touch since the entry fill (the
  highest bid for a long, the lowest ask for a short) at the trailing distance; at each tick
  the level is checked first, then ratchets.

Every computed order price (an entry's LMT/STP expression, a bracket's STOP/TARGET, a
trailing level) is snapped to the instrument's tick grid (`TickGrid`), so a stop at 189.89
triggers when the ask prints 189.89 (189.11 + 0.78 is 189.89000000000001 in binary).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from kestrel.lang import ast

OrderType = Literal["mkt", "lmt", "stp", "trail"]
F64 = npt.NDArray[np.float64]


class TickGrid:
    """Rounds prices to the nearest multiple of the tick size (half to even).

    When 1/tick is a whole number (0.01, 0.25, 0.0001 ...) the result is k / (1/tick),
    the double nearest to the decimal price, i.e. the same double a data file's "189.89"
    parses to; otherwise k * tick. `snap` and `snap_array` perform the same IEEE
    operations (the fast path relies on it)."""

    __slots__ = ("tick", "inv")

    def __init__(self, tick: float) -> None:
        inv = float(round(1.0 / tick))
        self.tick = tick
        self.inv = inv if inv >= 1.0 and abs(inv * tick - 1.0) <= 1e-9 else 0.0

    def snap(self, p: float) -> float:
        k = round(p / self.tick)
        return k / self.inv if self.inv else k * self.tick

    def snap_array(self, p: F64) -> F64:
        k = np.rint(p / self.tick)
        out: F64 = k / self.inv if self.inv else k * self.tick
        return out


class WorkingOrder:
    """A working order. `side` is +1 buy / -1 sell; eligible at global tick index k when
    k >= el_idx and ts >= el_ts. `oco` groups protective siblings of one entry fill."""

    __slots__ = (
        "id", "plan", "rule", "role", "side", "qty", "filled", "type", "price", "parent",
        "el_idx", "el_ts", "expire_ts", "trail", "best", "bracket", "oco", "risk",
    )

    def __init__(
        self,
        id: int,
        plan: str,
        rule: int,
        role: str,
        side: int,
        qty: int,
        type: OrderType,
        price: float | None,
        parent: int | None,
        el_idx: int,
        el_ts: int,
        expire_ts: int | None = None,
        trail: ast.Offset | None = None,
        best: float = 0.0,
        bracket: ast.Order | None = None,
        oco: int | None = None,
    ) -> None:
        self.id = id
        self.plan = plan
        self.rule = rule
        self.role = role
        self.side = side
        self.qty = qty
        self.filled = 0
        self.type: OrderType = type
        self.price = price
        self.parent = parent
        self.el_idx = el_idx
        self.el_ts = el_ts
        self.expire_ts = expire_ts
        self.trail = trail
        self.best = best
        self.bracket = bracket
        self.oco = oco
        self.risk = 0.0  # an entry's worst-case loss per unit (money), 0 when unbounded

    @property
    def remaining(self) -> int:
        return self.qty - self.filled

    def trail_level(self, grid: TickGrid) -> float:
        """The trailing stop's level from the best touch so far, on the tick grid."""
        assert self.trail is not None
        return trail_level(self.best, self.trail, self.side, grid)


def trail_level(best: float, trail: ast.Offset, side: int, grid: TickGrid) -> float:
    """A trailing stop's level at its distance from `best`: below it for a sell stop
    (`side` -1, protecting a long), above it for a buy stop; on the tick grid."""
    dist = abs(trail.value)
    if side < 0:
        raw = best * (1.0 - dist / 100.0) if trail.mode == "pct" else best - dist
    else:
        raw = best * (1.0 + dist / 100.0) if trail.mode == "pct" else best + dist
    return grid.snap(raw)


def stop_distance(order: ast.Order, entry: float, grid: TickGrid) -> float | None:
    """Per-unit distance from an entry filled at `entry` to its tightest protective stop
    (the STOP level or the TRAIL's initial level, as the broker would place them; a trail
    only ratchets towards the market), or None when the entry has neither."""
    levels = []
    if order.stop is not None:
        levels.append(bracket_price(entry, order.stop, grid))
    if order.trail is not None:
        levels.append(trail_level(entry, order.trail, 1 if order.side == "sell" else -1, grid))
    return min(abs(entry - lv) for lv in levels) if levels else None


def bracket_price(entry: float, off: ast.Offset, grid: TickGrid) -> float:
    """A STOP/TARGET price from the entry fill price, on the tick grid."""
    if off.mode == "pct":
        return grid.snap(entry * (1.0 + off.value / 100.0))
    if off.mode == "abs":
        return grid.snap(entry + off.value)
    return grid.snap(off.value)

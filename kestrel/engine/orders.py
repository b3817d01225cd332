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
"""

from __future__ import annotations

from typing import Literal

from kestrel.lang import ast

OrderType = Literal["mkt", "lmt", "stp", "trail"]


class WorkingOrder:
    """A working order. `side` is +1 buy / -1 sell; eligible at global tick index k when
    k >= el_idx and ts >= el_ts. `oco` groups protective siblings of one entry fill."""

    __slots__ = (
        "id", "plan", "rule", "role", "side", "qty", "filled", "type", "price", "parent",
        "el_idx", "el_ts", "expire_ts", "trail", "best", "bracket", "oco",
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

    @property
    def remaining(self) -> int:
        return self.qty - self.filled

    def trail_level(self) -> float:
        """The trailing stop's level from the best touch so far."""
        assert self.trail is not None
        dist = abs(self.trail.value)
        if self.side < 0:  # protects a long: below the best bid
            return self.best * (1.0 - dist / 100.0) if self.trail.mode == "pct" else self.best - dist
        return self.best * (1.0 + dist / 100.0) if self.trail.mode == "pct" else self.best + dist


def bracket_price(entry: float, off: ast.Offset) -> float:
    """A STOP/TARGET price from the entry fill price."""
    if off.mode == "pct":
        return entry * (1.0 + off.value / 100.0)
    if off.mode == "abs":
        return entry + off.value
    return off.value

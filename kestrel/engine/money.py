"""Money on a decimal quantum: exact to the cent (or finer when the instrument needs it).

Invariants:
- every money amount the engine stores or reports (a fill's fee, each realized PnL
  increment, the unrealized PnL at a mark, equity) is a whole number of quanta `k`, where
  the quantum is `10**-decimals`; the engine accumulates the integers `k` and shows `k / 10**d`,
  which is the double nearest to the decimal amount (`-96.0`, never `-95.99999999999795`);
- `decimals` = `EngineConfig.money_decimals` when set, else the most decimals of 0.01 (a cent),
  of `tick_size x multiplier x lot` (one tick's worth of one lot), of `slippage_ticks x
  tick_size x multiplier x lot`, of the order fee and of the unit fee x lot, counted on their shortest decimal form, capped at 9;
- an amount is rounded to the quantum half to even (`round(x * 10**d)`), once, where it is
  created; sums and differences are then exact integer arithmetic.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import lru_cache

MAX_DECIMALS = 9


def decimals_of(amount: float) -> int:
    """Digits after the decimal point in the shortest decimal form of `amount` (0 for integers)."""
    if not math.isfinite(amount):
        raise ValueError(f"money amounts must be finite, got {amount}")
    return _product_decimals(amount)


def _product_decimals(*xs: float) -> int:
    """Decimals of the exact decimal product of the shortest forms of `xs`."""
    p = Decimal(1)
    for x in xs:
        p *= Decimal(repr(float(x)))
    exp = p.normalize().as_tuple().exponent
    assert isinstance(exp, int)
    return max(0, -exp)


class Money:
    """The money quantum of one engine: converts amounts to and from whole quanta."""

    __slots__ = ("decimals", "scale")

    def __init__(self, decimals: int) -> None:
        if not (0 <= decimals <= MAX_DECIMALS):
            raise ValueError(f"money decimals must be in 0..{MAX_DECIMALS}, got {decimals}")
        self.decimals = decimals
        self.scale: int = int(10**decimals)  # k / scale (int / int) is correctly rounded

    @classmethod
    @lru_cache(maxsize=256)
    def derive(cls, tick_size: float, multiplier: float, slippage_ticks: float,
               fee_per_unit: float, fee_per_order: float,
               decimals: int | None = None, lot: float = 1.0) -> Money:
        """The quantum for an instrument and config (see the module docstring); one `Money`
        per quantum, shared (it holds no state)."""
        if decimals is not None:
            return cls(decimals)
        d = max(
            2,
            _product_decimals(tick_size, multiplier, lot),
            _product_decimals(slippage_ticks, tick_size, multiplier, lot),
            _product_decimals(fee_per_unit, lot),
            decimals_of(fee_per_order),
        )
        return cls(min(d, MAX_DECIMALS))

    def quanta(self, amount: float) -> int:
        """`amount` in whole quanta, rounded half to even."""
        return round(amount * self.scale)

    def amount(self, quanta: int) -> float:
        """The double nearest to `quanta` quanta."""
        return quanta / self.scale

    def at_least(self, bound: float) -> int:
        """The smallest whole number of quanta >= the decimal value of `bound` (exact, for bounds
        such as maxloss that need not sit on the quantum)."""
        return math.ceil(Decimal(repr(float(bound))) * self.scale)


__all__ = ["MAX_DECIMALS", "Money", "decimals_of"]

"""Instruments: what one unit of a traded symbol is (its price grid, contract multiplier,
currency and smallest tradable quantity)."""

from __future__ import annotations

import math

import msgspec


def decimals_for(tick_size: float) -> int:
    """Number of decimals needed to print multiples of `tick_size` exactly (0.01 → 2,
    0.25 → 2, 0.00001 → 5, 1 → 0)."""
    if not (tick_size > 0 and math.isfinite(tick_size)):
        raise ValueError(f"tick size must be a positive number, got {tick_size!r}")
    for d in range(0, 12):
        scaled = tick_size * 10**d
        if abs(scaled - round(scaled)) < 1e-9 * max(1.0, scaled):
            return d
    return 12


class Instrument(msgspec.Struct, frozen=True, kw_only=True):
    """What one unit of the traded instrument is.

    - `tick_size`: the price grid (> 0);
    - `multiplier`: money per price point per unit (1 for equities, spot FX and crypto; 125000
      for CME 6E futures), so PnL = price change x qty x multiplier;
    - `currency`: the currency prices and PnL are quoted in (the quote currency: USD for
      EUR/USD, ETH for XRP/ETH);
    - `min_qty`: the smallest tradable quantity and the lot sizes are multiples of (1 unit,
      1 contract, or a larger board lot).
    """

    symbol: str
    tick_size: float
    multiplier: float = 1.0
    currency: str = "USD"
    min_qty: int = 1

    def __post_init__(self) -> None:
        if not (self.tick_size > 0 and math.isfinite(self.tick_size)):
            raise ValueError(f"tick size must be a finite number > 0, got {self.tick_size!r}")
        if not (self.multiplier > 0 and math.isfinite(self.multiplier)):
            raise ValueError(f"multiplier must be a finite number > 0, got {self.multiplier!r}")
        if self.min_qty < 1:
            raise ValueError(f"minimum quantity must be >= 1, got {self.min_qty}")
        if not self.currency or not self.currency.isalnum():
            raise ValueError(f"currency must be a code such as USD or ETH, got {self.currency!r}")

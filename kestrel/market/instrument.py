"""Instruments: what one unit of a traded symbol is (its price grid, contract multiplier,
currency and smallest tradable quantity)."""

from __future__ import annotations

import math
import re

import msgspec

MAX_SYMBOL_CHARS = 32
_SYMBOL = re.compile(r"[!-~]{1,%d}" % MAX_SYMBOL_CHARS)  # printable ASCII, no blank


def check_symbol(symbol: str) -> str:
    """`symbol` when it is 1 to 32 printable ASCII characters without blanks (AAPL, EUR/USD,
    BTC-PERP.BINANCE), else ValueError: a symbol is printed in briefings, captures and reports,
    so it can never carry a control character or a terminal escape."""
    if not isinstance(symbol, str) or _SYMBOL.fullmatch(symbol) is None:
        shown = repr(symbol[:40]) + ("..." if len(symbol) > 40 else "") if isinstance(symbol, str) else repr(symbol)
        raise ValueError(f"symbol must be 1 to {MAX_SYMBOL_CHARS} printable characters without blanks "
                         f"(e.g. AAPL or EUR/USD), got {shown}")
    return symbol


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
        check_symbol(self.symbol)
        if not (self.tick_size > 0 and math.isfinite(self.tick_size)):
            raise ValueError(f"tick size must be a finite number > 0, got {self.tick_size!r}")
        if not (self.multiplier > 0 and math.isfinite(self.multiplier)):
            raise ValueError(f"multiplier must be a finite number > 0, got {self.multiplier!r}")
        if self.min_qty < 1:
            raise ValueError(f"minimum quantity must be >= 1, got {self.min_qty}")
        if not self.currency or not self.currency.isalnum():
            raise ValueError(f"currency must be a code such as USD or ETH, got {self.currency!r}")

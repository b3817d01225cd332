"""Instruments: what one unit of a traded symbol is (its price grid, contract multiplier,
currency and the lot its quantities are whole numbers of).

Invariants:
- a quantity is valid for an instrument when it is a positive whole number of its lots, both
  read at their shortest decimal forms (`lots_in`): 0.0003 BTC is 3 lots of 0.0001, 0.00015
  is no whole number of them;
- quantities are counted in lots, exactly (integers), wherever money is computed; shown in
  units (`units_of`) they are `int` for an instrument whose lot is a whole number (1, 100) and
  the double nearest to the decimal quantity otherwise, printed at the lot's decimals
  (`qty_text`);
- money prints at its currency's precision (`money_decimals`: 2 for USD, 0 for JPY, 8 for
  BTC); ledgers keep the engine's own, finer, exact quantum.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import msgspec

MAX_LOT_DECIMALS = 9
"""A lot size has at most this many decimals (0.000000001), so quantities stay exact."""

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


def exact_qty(qty: float) -> Fraction:
    """A quantity (or lot size) at its shortest decimal form, exactly."""
    if not math.isfinite(qty):
        raise ValueError(f"a quantity must be a finite number, got {qty!r}")
    return Fraction(qty) if isinstance(qty, int) else Fraction(Decimal(repr(float(qty))))


def lot_decimals(lot: float) -> int:
    """Decimals of the lot's shortest decimal form (0.0001 → 4, 1 → 0, 100 → 0)."""
    exp = Decimal(repr(float(lot))).normalize().as_tuple().exponent
    assert isinstance(exp, int)
    return max(0, -exp)


def lots_in(qty: float, lot: float) -> int | None:
    """`qty` as a whole number of lots of `lot`, or None when it is not one (exact decimal
    arithmetic on the shortest forms: `lots_in(0.0003, 0.0001) == 3`)."""
    n = exact_qty(qty) / exact_qty(lot)
    return int(n) if n.denominator == 1 else None


def lots_floor(qty: float, lot: float) -> int:
    """The whole lots within `qty` (rounded towards zero)."""
    n = exact_qty(qty) / exact_qty(lot)
    return int(n)  # int(Fraction) truncates towards zero


def whole_lot(lot: float) -> bool:
    """Whether quantities of this lot are whole units (shown as `int`)."""
    return exact_qty(lot).denominator == 1


def units_of(lots: int, lot: float) -> int | float:
    """`lots` lots in units: an `int` for a whole lot, else the double nearest to the exact
    decimal quantity (whose shortest form is that decimal)."""
    if isinstance(lot, int) or float(lot).is_integer():
        return lots * int(lot)
    q = lots * exact_qty(lot)
    return q.numerator / q.denominator  # int / int: correctly rounded


def qty_text(qty: float, lot: float = 1) -> str:
    """A quantity at its lot's precision, never in exponent form (0.0003, 1000, 2.5)."""
    d = lot_decimals(lot)
    if d == 0:
        return str(int(qty)) if float(qty).is_integer() else _plain(qty)
    text = f"{float(qty):.{d}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _plain(x: float) -> str:
    text = repr(float(x))
    return f"{Decimal(text):f}" if "e" in text or "E" in text else text


# ISO 4217 minor units where they are not 2, and the crypto assets quoted to satoshi-like
# precision; every other currency prints in hundredths.
_CURRENCY_DECIMALS: dict[str, int] = {
    **dict.fromkeys(("JPY", "KRW", "CLP", "ISK", "VND", "PYG", "UGX", "XAF", "XOF", "HUF"), 0),
    **dict.fromkeys(("BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD"), 3),
    **dict.fromkeys(("BTC", "ETH", "XBT", "LTC", "BNB", "SOL", "XRP"), 8),
}


def money_decimals(currency: str) -> int:
    """Decimals money prints at in `currency` (its minor unit: USD 2, JPY 0, KWD 3; crypto
    quote assets such as BTC and ETH 8; 2 for any other code)."""
    return _CURRENCY_DECIMALS.get(currency.upper(), 2)


def money_text(amount: float, currency: str = "USD", signed: bool = False) -> str:
    """`amount` at its currency's precision, rounded half to even from its shortest decimal
    form (`-4.58`, `+120.00`, `-1235` for JPY; never `-0.00`)."""
    d = money_decimals(currency)
    q = Decimal(repr(float(amount))).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_EVEN)
    if q == 0:
        q = abs(q)
    return f"{q:+f}" if signed else f"{q:f}"


class Instrument(msgspec.Struct, frozen=True, kw_only=True):
    """What one unit of the traded instrument is.

    - `tick_size`: the price grid (> 0);
    - `multiplier`: money per price point per unit (1 for equities, spot FX and crypto; 125000
      for CME 6E futures), so PnL = price change x qty x multiplier;
    - `currency`: the currency prices and PnL are quoted in (the quote currency: USD for
      EUR/USD, ETH for XRP/ETH);
    - `lot_size`: every quantity is a whole number of lots (0.0001 BTC, 1 EUR, 1 share, 0.001
      of a share where fractional shares are allowed; at most `MAX_LOT_DECIMALS` decimals);
    - `min_qty`: the smallest order, in lots (a board lot of 100 shares: `lot_size` 1,
      `min_qty` 100).
    """

    symbol: str
    tick_size: float
    multiplier: float = 1.0
    currency: str = "USD"
    min_qty: int = 1
    lot_size: float = 1.0

    def __post_init__(self) -> None:
        check_symbol(self.symbol)
        if not (self.tick_size > 0 and math.isfinite(self.tick_size)):
            raise ValueError(f"tick size must be a finite number > 0, got {self.tick_size!r}")
        if not (self.multiplier > 0 and math.isfinite(self.multiplier)):
            raise ValueError(f"multiplier must be a finite number > 0, got {self.multiplier!r}")
        if self.min_qty < 1:
            raise ValueError(f"minimum quantity must be >= 1, got {self.min_qty}")
        check_lot(self.lot_size)
        if not self.currency or not self.currency.isalnum():
            raise ValueError(f"currency must be a code such as USD or ETH, got {self.currency!r}")

    @property
    def min_units(self) -> int | float:
        """The smallest order in units (`min_qty` lots)."""
        return units_of(self.min_qty, self.lot_size)


def check_lot(lot: float) -> None:
    """Raise ValueError unless `lot` is a finite number > 0 with at most `MAX_LOT_DECIMALS`
    decimals."""
    if not (isinstance(lot, (int, float)) and lot > 0 and math.isfinite(lot)):
        raise ValueError(f"lot size must be a finite number > 0, got {lot!r}")
    if lot_decimals(lot) > MAX_LOT_DECIMALS:
        raise ValueError(f"lot size must have at most {MAX_LOT_DECIMALS} decimals, got {lot!r}")


__all__ = [
    "MAX_LOT_DECIMALS",
    "Instrument",
    "check_lot",
    "decimals_for",
    "exact_qty",
    "lot_decimals",
    "lots_floor",
    "lots_in",
    "money_decimals",
    "money_text",
    "qty_text",
    "units_of",
    "whole_lot",
]

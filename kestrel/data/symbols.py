"""A symbols table: each symbol's instrument terms (tick size, multiplier, currency, lot size)
for a universe, from a CSV file or given in code, and the defaults for symbols it does not name.

The table is a CSV with a header holding `symbol` and any of `tick_size`, `multiplier`,
`currency`, `lot_size`; an empty field takes the default. Defaults (`SymbolTerms()`): the tick
size inferred from the symbol's prices, multiplier 1, currency USD, lot size 1. A lot size is a
positive decimal (`0.0001` for crypto, `1` for a whole share) kept exact. Every bad field is a
`DataError` naming its line and column; a symbol given twice too.
"""

from __future__ import annotations

import csv
from decimal import Decimal, InvalidOperation
from pathlib import Path

import msgspec

from kestrel.data.errors import DataError

_FIELDS = ("symbol", "tick_size", "multiplier", "currency", "lot_size")


class SymbolTerms(msgspec.Struct, frozen=True, kw_only=True):
    """A symbol's terms; None fields take the loader's: the inferred tick size, the spec's
    multiplier and currency."""

    tick_size: float | None = None
    multiplier: float | None = None
    currency: str | None = None
    lot_size: Decimal = Decimal(1)


def _positive(path: Path, text: str, line: int, column: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not (x > 0 and x < float("inf")):
        raise DataError(path, f"expected a number > 0, got {text[:20]!r}", line=line, column=column)
    return x


def read_symbols(path: str | Path) -> dict[str, SymbolTerms]:
    """Symbol -> terms from a symbols table CSV (see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(p, "no such symbols table")
    try:
        rows = list(csv.reader(p.read_text(encoding="utf-8-sig").splitlines()))
    except UnicodeDecodeError:
        raise DataError(p, "the symbols table is not UTF-8 text") from None
    if not rows:
        raise DataError(p, "the symbols table is empty: expected a header with symbol and terms")
    head = [h.strip().lower() for h in rows[0]]
    unknown = [h for h in head if h not in _FIELDS]
    if "symbol" not in head or unknown:
        raise DataError(p, f"symbols table header {', '.join(head)[:120]!r}: expected symbol and any of "
                        f"{', '.join(_FIELDS[1:])}")
    out: dict[str, SymbolTerms] = {}
    for i, row in enumerate(rows[1:]):
        line = i + 2
        if not "".join(row).strip():
            continue
        if len(row) != len(head):
            raise DataError(p, f"expected {len(head)} fields, found {len(row)}", line=line)
        f = {h: v.strip() for h, v in zip(head, row)}
        symbol = f["symbol"]
        if not symbol:
            raise DataError(p, "empty symbol", line=line, column="symbol")
        if symbol in out:
            raise DataError(p, f"symbol {symbol!r} is given twice", line=line, column="symbol")
        lot = Decimal(1)
        if f.get("lot_size"):
            try:
                lot = Decimal(f["lot_size"])
            except InvalidOperation:
                lot = Decimal(-1)
            if not (lot.is_finite() and lot > 0):
                raise DataError(p, f"lot size must be a decimal > 0 like 1 or 0.0001, got {f['lot_size'][:20]!r}",
                                line=line, column="lot_size")
        currency = f.get("currency") or None
        if currency is not None and not currency.isalnum():
            raise DataError(p, f"currency must be a code like USD, got {currency[:20]!r}", line=line, column="currency")
        out[symbol] = SymbolTerms(
            tick_size=_positive(p, f["tick_size"], line, "tick_size") if f.get("tick_size") else None,
            multiplier=_positive(p, f["multiplier"], line, "multiplier") if f.get("multiplier") else None,
            currency=currency.upper() if currency else None, lot_size=lot)
    return out


__all__ = ["SymbolTerms", "read_symbols"]

"""Number literals both ways (a leaf module): the parser's bounded conversions and the
formatter's shortest round-tripping text, shared by the parser, checker and formatter."""

from __future__ import annotations

import math
from decimal import Decimal

# A whole-number literal longer than this is clamped (and then rejected by the range check)
# instead of being converted, so no input can make int() do quadratic work or fail.
MAX_DIGITS = 18
BIG: int = 10**MAX_DIGITS


def whole_literal(text: str) -> int:
    """The value of a digits-only literal; over `MAX_DIGITS` digits, the clamped `BIG`."""
    return BIG if len(text) > MAX_DIGITS else int(text)


def float_literal(text: str) -> float:
    """Linear in the (size-bounded) text; huge values become inf -> a range error later."""
    return float(text)


def whole(value: float) -> int:
    """`int(value)` for finite values below 1e18, else a clamped value the range check rejects."""
    if math.isfinite(value) and abs(value) < 1e18:
        return int(value)
    return -BIG if value < 0 else BIG


def is_whole(value: float) -> bool:
    return not math.isfinite(value) or value == whole(value)


def quantity_value(value: float) -> int | float:
    """A quantity's value: an `int` when it is whole (`100.0` is 100), else the float itself
    (read at its shortest decimal form wherever it is counted)."""
    return whole(value) if is_whole(value) else value


def quantity_literal(text: str) -> int | float:
    """An order quantity or maxpos literal: digits only is an int, a decimal its value."""
    if "." not in text:
        return whole_literal(text)
    return quantity_value(float_literal(text))


def num(value: float) -> str:
    """Shortest decimal text that reads back as the same float, never in exponent form."""
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    text = repr(number)
    if "e" in text or "E" in text:
        text = f"{Decimal(text):f}"
    return text


__all__ = ["BIG", "MAX_DIGITS", "float_literal", "is_whole", "num", "quantity_literal", "quantity_value",
           "whole", "whole_literal"]

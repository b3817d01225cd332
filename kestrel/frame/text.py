"""Compact fixed-width text helpers shared by the panes, and the token estimator.

Token estimator (deterministic, documented in docs/panes.md): the text is scanned with the
regex `[A-Za-z]+|[0-9]+|\\S` plus newlines; a run of letters counts ceil(len/6) tokens, a run
of digits ceil(len/3), any other non-space character 1, each newline 1; other whitespace 0.
It approximates BPE tokenizers on this kind of text and never depends on anything else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from kestrel.market.instrument import money_text

_LETTERS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_OTHER = re.compile(r"[^\sA-Za-z0-9]|\n")


def _runs(pattern: re.Pattern[str], text: str, per: int) -> int:
    lengths = np.fromiter(map(len, pattern.findall(text)), dtype=np.int64)
    return int(((lengths + (per - 1)) // per).sum())


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate of `text` (see module docstring)."""
    return _runs(_LETTERS, text, 6) + _runs(_DIGITS, text, 3) + len(_OTHER.findall(text))


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Fixed-width columns separated by one space: the first column left-aligned, the
    others right-aligned; trailing spaces stripped."""
    cols = len(header)
    widths = [len(h) for h in header]
    for r in rows:
        for i in range(cols):
            widths[i] = max(widths[i], len(r[i]))

    def line(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])]
        parts += [cells[i].rjust(widths[i]) for i in range(1, cols)]
        return " ".join(parts).rstrip()

    return [line(header)] + [line(r) for r in rows]


def fmt_qty(x: float) -> str:
    """A quantity: whole numbers without decimals, otherwise up to 4 decimals."""
    if not math.isfinite(x):
        return "n/a"
    if abs(x - round(x)) < 1e-9:
        return str(int(round(x)))
    return f"{x:.4f}".rstrip("0").rstrip(".")


def fmt_money(x: float, currency: str = "USD") -> str:
    """Signed money at its currency's precision (`+12.50`, `-3.00` in USD, `-1235` in JPY);
    anything that rounds to zero, negative zero included, prints `+0.00`."""
    return money_text(x, currency, signed=True)


def fmt_duration(seconds: int) -> str:
    """`5m`, `1h`, `1d`, `90s`: the largest unit that divides exactly."""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"

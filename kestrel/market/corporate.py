"""Corporate actions: factor rows (Lean's factor-file format), the split and dividend events they
imply, and the adjustment factor of each date.

A factor row (date D, price factor p, split factor s, reference price r) says: raw prices dated
on or before D, and after the previous row's date, are multiplied by p x s to give adjusted
prices (s carries splits, p dividends); dates after the last row take factor 1. So between two
rows (D1, p1, s1, r1) and (D2, p2, s2, ...) a change of s is a split whose ex-date is the first
session after D1, with s2 / s1 new shares per old (AAPL: 0.25 / 0.0357143 = 7 on 2014-06-09),
and a change of p is a cash dividend going ex on that session of r1 x (1 - p1 / p2) per share
(r1 is the raw close on D1).

Invariants: rows of one symbol are ordered by date, dates unique, factors > 0; a split's ratio
is a fraction `numerator / denominator` in lowest terms (a reverse split has numerator <
denominator); events are ordered by date.
"""

from __future__ import annotations

import datetime as dt
from fractions import Fraction
from typing import Literal

import msgspec
import numpy as np

from kestrel.market.ticks import F64, I64

_EPOCH = dt.date(1970, 1, 1)
MAX_RATIO_DENOMINATOR = 1000  # factor files carry 6-8 digits: 0.25 / 0.0357143 is 7 within this


class FactorRow(msgspec.Struct, frozen=True):
    """One row of a factor file (see the module docstring)."""

    date: dt.date
    price_factor: float
    split_factor: float
    reference_price: float


class Split(msgspec.Struct, frozen=True):
    """A split: from `date` (the ex-date, the first session at the new count) one share held
    becomes `numerator / denominator` shares, and prices divide by that ratio."""

    symbol: str
    date: dt.date
    numerator: int
    denominator: int

    @property
    def ratio(self) -> float:
        return self.numerator / self.denominator


class Dividend(msgspec.Struct, frozen=True):
    """A cash dividend of `amount` per share (raw, in the instrument's currency) going ex on
    `date`."""

    symbol: str
    date: dt.date
    amount: float


class ProbableSplit(msgspec.Struct, frozen=True):
    """A jump between one session's last price and the next session's first of a split's size
    (`numerator / denominator`: previous close over open) that no factor row explains, with the
    volume evidence that tells a split from a market move; `adjusted`: found in a series already
    adjusted by factor rows (the rows lack it).

    `volume_ratio`: the median session volume over the sessions after the jump session over the
    median over the sessions before it (a split of r new shares per old moves it towards r);
    `volume_spike`: the jump session's volume over the median of the sessions after it (near 1
    for a split, which moves the volume to a new level, far above 1 for a crash or a rally); both
    None when the data have no volume there (then the price alone decided). `verdict`: "split"
    when the evidence reads as a split, "gap" when the volume reads as a market move."""

    symbol: str
    date: dt.date  # the session that opens at the jumped price
    numerator: int
    denominator: int
    previous_close: float
    open: float
    adjusted: bool = False
    volume_ratio: float | None = None
    volume_spike: float | None = None
    verdict: Literal["split", "gap"] = "split"


def _days(dates: list[dt.date]) -> I64:
    return np.array([(d - _EPOCH).days for d in dates], dtype=np.int64)


def factors_on(rows: tuple[FactorRow, ...], days: I64) -> tuple[F64, F64]:
    """(price factor, split factor) of each date (days since 1970-01-01): the first row dated on
    or after it, else 1."""
    if not rows:
        one = np.ones(len(days), dtype=np.float64)
        return one, one.copy()
    row_days = _days([r.date for r in rows])
    k = np.searchsorted(row_days, days, side="left")
    pf = np.append(np.array([r.price_factor for r in rows], dtype=np.float64), 1.0)
    sf = np.append(np.array([r.split_factor for r in rows], dtype=np.float64), 1.0)
    return pf[k], sf[k]


def split_ratio(before: float, after: float) -> Fraction:
    """New shares per old share of a split factor change `before` -> `after`, as a small
    fraction (7, 2, 3/2, 1/10)."""
    return Fraction(after / before).limit_denominator(MAX_RATIO_DENOMINATOR)


def actions(symbol: str, rows: tuple[FactorRow, ...], sessions: list[dt.date]) -> tuple[list[Split], list[Dividend]]:
    """The splits and dividends the rows imply whose ex-date (the first of `sessions` after a
    row's date) is one of `sessions` after the first (ordered dates of the symbol's data)."""
    splits: list[Split] = []
    dividends: list[Dividend] = []
    if len(sessions) < 2:
        return splits, dividends
    session_days = _days(sessions)
    for a, b in zip(rows, rows[1:]):
        k = int(np.searchsorted(session_days, (a.date - _EPOCH).days, side="right"))
        if k == 0 or k >= len(sessions):
            continue  # the ex-date falls outside the data
        ex = sessions[k]
        if a.split_factor != b.split_factor:
            r = split_ratio(a.split_factor, b.split_factor)
            if r != 1:
                splits.append(Split(symbol, ex, r.numerator, r.denominator))
        if a.price_factor != b.price_factor and a.reference_price > 0:
            amount = a.reference_price * (1.0 - a.price_factor / b.price_factor)
            if amount > 0:
                dividends.append(Dividend(symbol, ex, round(amount, 6)))
    return splits, dividends


__all__ = ["Dividend", "FactorRow", "ProbableSplit", "Split", "actions", "factors_on", "split_ratio"]

"""A universe: the market data of several instruments over one exchange calendar, with the
corporate actions that change their share counts.

Invariants:
- `members` are ordered by symbol, symbols unique; `symbols` lists them in that order;
- each member's `data` holds its raw ticks (the prices it traded at, what an engine fills on)
  and `adjusted` the same ticks with prices times the adjustment factor of their date and
  sizes divided by the split factor (the series indicators and panes read); without factor
  rows `adjusted` is `data` itself;
- `sessions` are every session of the calendar from the first session any member has data in
  to the last, in order; a member's own `data.sessions` are those it has ticks in, so
  `missing` (the sessions between its first and last without a tick) is explicit: nothing is
  filled in;
- `splits` and `dividends` are ordered by (date, symbol), each dated on a session of the
  member's data.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from kestrel.market.corporate import Dividend, FactorRow, Split
from kestrel.market.data import MarketData
from kestrel.market.instrument import Instrument
from kestrel.market.session import SessionSpec


@dataclass(frozen=True, slots=True)
class Member:
    """One instrument of a universe: raw and adjusted data, its instrument, lot size (the step
    of a valid quantity, exact), factor rows and the universe sessions it has no tick in."""

    symbol: str
    data: MarketData
    adjusted: MarketData
    lot_size: Decimal
    factor_rows: tuple[FactorRow, ...] = ()
    missing: tuple[dt.date, ...] = ()

    @property
    def instrument(self) -> Instrument:
        return self.data.instrument


@dataclass(frozen=True, slots=True)
class Universe:
    """Instruments over one calendar (see the module docstring)."""

    members: tuple[Member, ...]
    sessions: tuple[SessionSpec, ...]
    calendar: str
    splits: tuple[Split, ...] = ()
    dividends: tuple[Dividend, ...] = ()

    def __post_init__(self) -> None:
        names = [m.symbol for m in self.members]
        if names != sorted(set(names)):
            raise ValueError("universe members must be ordered by symbol, each symbol once")

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(m.symbol for m in self.members)

    def __getitem__(self, symbol: str) -> Member:
        for m in self.members:
            if m.symbol == symbol:
                return m
        raise KeyError(f"no symbol {symbol!r} in the universe ({', '.join(self.symbols)})")

    def __len__(self) -> int:
        return len(self.members)

    def select(self, symbols: tuple[str, ...] | list[str]) -> Universe:
        """The universe of `symbols` only (each must be a member; KeyError names the first
        that is not), with their events."""
        keep = {self[s].symbol for s in symbols}
        return Universe(tuple(m for m in self.members if m.symbol in keep), self.sessions, self.calendar,
                        tuple(e for e in self.splits if e.symbol in keep),
                        tuple(e for e in self.dividends if e.symbol in keep))


__all__ = ["Member", "Universe"]

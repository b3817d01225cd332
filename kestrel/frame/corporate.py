"""Corporate events as a snapshot holds them: splits and dividends, each known from the start
(00:00) of its ex-date on the wall clock of the exchange session held on it; a snapshot cut at
`cutoff` keeps the events with `ts < cutoff` (see `kestrel.frame.events` for the pane)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import msgspec

from kestrel.market.corporate import Dividend, Split
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S


class CorporateEvent(msgspec.Struct, frozen=True):
    """One split or dividend, known from `ts` (ns UTC: its ex-date's 00:00 in the exchange's
    zone)."""

    ts: int
    event: Split | Dividend

    @property
    def symbol(self) -> str:
        return self.event.symbol

    @property
    def date(self) -> dt.date:
        return self.event.date


def _midnight(date: dt.date, tz: str) -> int:
    start = dt.datetime.combine(date, dt.time(0, 0), tzinfo=ZoneInfo(tz))
    return int(start.timestamp()) * NS_PER_S


@dataclass(frozen=True, slots=True)
class CorporateEvents:
    """Events ordered by (ts, symbol, split before dividend); immutable."""

    items: tuple[CorporateEvent, ...] = ()

    @classmethod
    def of(cls, splits: Iterable[Split], dividends: Iterable[Dividend],
           sessions: Sequence[SessionSpec], tz: str | None = None) -> CorporateEvents:
        """The events of `splits` and `dividends`, each known from the start of its date in the
        zone of `sessions` (the exchange's; `tz` when no session is given, else UTC)."""
        zone = sessions[0].tz if sessions else (tz or "UTC")
        by_date = {s.date: s.tz for s in sessions}
        both: list[Split | Dividend] = [*splits, *dividends]
        out = [CorporateEvent(_midnight(e.date, by_date.get(e.date, zone)), e) for e in both]
        out.sort(key=lambda c: (c.ts, c.symbol, isinstance(c.event, Dividend)))
        return cls(tuple(out))

    def before(self, cutoff_ns: int) -> CorporateEvents:
        """The events known strictly before `cutoff_ns`."""
        return CorporateEvents(tuple(e for e in self.items if e.ts < cutoff_ns))

    def newest_first(self) -> list[CorporateEvent]:
        """The events newest first; at one instant in symbol order, a split before a dividend."""
        return sorted(self.items, key=lambda c: (-c.ts, c.symbol, isinstance(c.event, Dividend)))

    def of_symbols(self, symbols: Iterable[str]) -> CorporateEvents:
        keep = set(symbols)
        return CorporateEvents(tuple(e for e in self.items if e.symbol in keep))

    def __len__(self) -> int:
        return len(self.items)


NO_EVENTS = CorporateEvents()



__all__ = ["NO_EVENTS", "CorporateEvent", "CorporateEvents"]

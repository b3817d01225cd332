"""Trading sessions: a date, an open, a close and a timezone.

Invariants:
- a session's clock is its timezone's wall clock on `date`; the UTC offset is taken once,
  at the open (no DST change happens inside a regular trading session);
- `close` earlier than or equal to `open` means the session ends on the next calendar day
  (e.g. a 24h FX session 17:00 → 17:00 New York time);
- all instants are int64 nanoseconds since the Unix epoch (UTC), like `Ticks.ts`.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from zoneinfo import ZoneInfo

import msgspec

from kestrel.market.ticks import NS_PER_S as NS_PER_S  # re-exported: session clocks count in it

NS_PER_DAY = 86_400 * NS_PER_S


def zone_offset_s(zone: ZoneInfo, utc_s: int) -> int:
    """`zone`'s UTC offset in seconds at the instant `utc_s` (seconds since the epoch)."""
    off = dt.datetime.fromtimestamp(utc_s, tz=zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


class SessionSpec(msgspec.Struct, frozen=True):
    """One trading session. `open`/`close` are wall-clock times in `tz`."""

    date: dt.date
    open: dt.time = dt.time(9, 30)
    close: dt.time = dt.time(16, 0)
    tz: str = "America/New_York"

    @classmethod
    def us_equity(cls, date: dt.date) -> SessionSpec:
        """The US equity regular session, 09:30–16:00 New York time."""
        return cls(date=date)

    @classmethod
    def around_the_clock(cls, date: dt.date, tz: str = "UTC") -> SessionSpec:
        """A 24h session (FX, crypto) starting at midnight of `date` in `tz`."""
        return cls(date=date, open=dt.time(0, 0), close=dt.time(0, 0), tz=tz)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    @property
    def open_ns(self) -> int:
        return _instants(self)[0]

    @property
    def close_ns(self) -> int:
        return _instants(self)[1]

    @property
    def length_ns(self) -> int:
        """The session's span, close minus open, in ns (24h for an around-the-clock one)."""
        return self.close_ns - self.open_ns

    @property
    def utc_offset_ns(self) -> int:
        """Offset of the session's wall clock from UTC at the open, in ns (e.g. -4h in EDT)."""
        start = dt.datetime.combine(self.date, self.open, tzinfo=self.zone)
        off = start.utcoffset()
        assert off is not None
        return int(off.total_seconds()) * NS_PER_S

    def wall_clock_ns(self, hour: int, minute: int, second: int = 0) -> int:
        """The instant (UTC ns) at which the session's wall clock reads hh:mm:ss, taken on
        the session's own calendar span (times before the open belong to the next day for
        sessions that cross midnight)."""
        tod = dt.time(hour, minute, second)
        day = self.date
        if self.close <= self.open and tod < self.open:
            day = self.date + dt.timedelta(days=1)
        return _to_ns(dt.datetime.combine(day, tod, tzinfo=self.zone))

    def seconds_of_day(self, ts_ns: int) -> int:
        """Wall-clock seconds since local midnight at instant `ts_ns`."""
        return int(((ts_ns + self.utc_offset_ns) % NS_PER_DAY) // NS_PER_S)


@lru_cache(maxsize=8192)
def _instants(spec: SessionSpec) -> tuple[int, int]:
    """(open, close) of `spec` in UTC ns: a function of its four fields alone, remembered for
    the sessions of a long run (the engine reads them at every open and plan)."""
    open_ns = _to_ns(dt.datetime.combine(spec.date, spec.open, tzinfo=spec.zone))
    day = spec.date if spec.close > spec.open else spec.date + dt.timedelta(days=1)
    return open_ns, _to_ns(dt.datetime.combine(day, spec.close, tzinfo=spec.zone))


def _to_ns(moment: dt.datetime) -> int:
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * NS_PER_S + delta.microseconds * 1000

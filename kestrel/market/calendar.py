"""The exchange calendar: the trading sessions of each session kind (FX, US equities, CME,
around the clock, or an exchange's own calendar) that hold at least one tick.

An exchange's calendar (`exchange_sessions`) comes from the maintained `exchange-calendars`
package (holidays, half days, early closes, by exchange code: XNYS, XNAS, XLON, CMES, ...): each
session's open and close are its wall clock in the exchange's zone, so a 13:00 half day is a
shorter `SessionSpec` and a holiday has none.
"""

from __future__ import annotations

import datetime as dt
import bisect
import warnings
from typing import Any, Literal

import numpy as np

from kestrel.market.session import NS_PER_DAY, SessionSpec
from kestrel.market.ticks import I64


SessionKind = Literal["utc", "fx", "us_equity", "cme", "exchange"]
"""The exchange calendars: around the clock (UTC days), FX (17:00 New York to 17:00), US
equities (09:30-16:00 New York), CME (17:00-16:00 Chicago), or `exchange`: the sessions of an
exchange calendar by code (`exchange_sessions`)."""


class CalendarError(ValueError):
    """An unknown exchange calendar code, or dates outside what the calendar covers."""


def _xcals() -> Any:
    import exchange_calendars  # imported when a calendar is first asked for (it loads pandas)

    return exchange_calendars


# code -> (first, last, the sessions dated first..last): one fetch serves every span inside it
_FETCHED: dict[str, tuple[dt.date, dt.date, tuple[SessionSpec, ...]]] = {}


def _fetch(code: str, first: dt.date, last: dt.date) -> tuple[SessionSpec, ...]:
    xc = check_calendar(code)
    # the package's own deprecation warnings (from pandas) are not the caller's to act on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # the package needs start < end: ask a day wider on each side and keep first..last
            cal = xc.get_calendar(code, start=(first - dt.timedelta(days=1)).isoformat(),
                                  end=(last + dt.timedelta(days=1)).isoformat())
        except ValueError as e:  # dates before or after the calendar's bounds
            raise CalendarError(f"calendar {code}: {' '.join(str(e).split())[:200]}") from None
        tz = str(cal.tz)
        sched = cal.schedule
        opens = sched["open"].dt.tz_convert(tz)
        closes = sched["close"].dt.tz_convert(tz)
    out = []
    for label, o, c in zip(sched.index, opens, closes):
        if first <= label.date() <= last:
            out.append(SessionSpec(label.date(), o.time(), c.time(), tz))
    return tuple(out)


def exchange_sessions(code: str, first: dt.date, last: dt.date) -> tuple[SessionSpec, ...]:
    """The sessions of exchange calendar `code` (e.g. XNYS) dated `first` .. `last`
    inclusive, in order, as wall-clock sessions in the exchange's zone (half days close
    early; holidays and weekends have none). Raises `CalendarError` for an unknown code or
    dates outside the calendar's bounds."""
    if first > last:
        return ()
    have = _FETCHED.get(code)
    if have is None or first < have[0] or last > have[1]:
        lo = first if have is None else min(first, have[0])
        hi = last if have is None else max(last, have[1])
        have = (lo, hi, _fetch(code, lo, hi))
        _FETCHED[code] = have
    days = [x.date for x in have[2]]
    return have[2][bisect.bisect_left(days, first):bisect.bisect_right(days, last)]


def check_calendar(code: str) -> Any:
    """The `exchange_calendars` module when `code` names one of its calendars, else
    `CalendarError` naming a few codes."""
    with warnings.catch_warnings():  # the package's import warnings (pandas) are not the caller's
        warnings.simplefilter("ignore")
        xc = _xcals()
    if code not in xc.get_calendar_names():
        raise CalendarError(f"unknown exchange calendar {code!r}; e.g. XNYS (New York), XNAS, XLON, "
                            "XTKS, CMES (see exchange_calendars.get_calendar_names())")
    return xc


def build_sessions(ts: I64, kind: SessionKind, calendar: str = "XNYS") -> tuple[SessionSpec, ...]:
    """Sessions of `kind` that contain at least one tick, in order (`calendar`: the exchange
    calendar code of kind `exchange`)."""
    if len(ts) == 0:
        return ()
    if kind == "exchange":
        first_day = dt.date(1970, 1, 1) + dt.timedelta(days=int(ts[0] // NS_PER_DAY) - 1)
        last_day = dt.date(1970, 1, 1) + dt.timedelta(days=int(ts[-1] // NS_PER_DAY) + 1)
        keep = []
        for s in exchange_sessions(calendar, first_day, last_day):
            lo = int(np.searchsorted(ts, s.open_ns, side="left"))
            hi = int(np.searchsorted(ts, s.close_ns, side="left"))
            if hi > lo:
                keep.append(s)
        return tuple(keep)

    def make(d: dt.date) -> SessionSpec:
        if kind == "fx":
            return SessionSpec(d, dt.time(17, 0), dt.time(17, 0), "America/New_York")
        if kind == "us_equity":
            return SessionSpec.us_equity(d)
        if kind == "cme":
            return SessionSpec(d, dt.time(17, 0), dt.time(16, 0), "America/Chicago")
        return SessionSpec.around_the_clock(d, "UTC")

    first = dt.date(1970, 1, 1) + dt.timedelta(days=int(ts[0] // NS_PER_DAY) - 2)
    last = dt.date(1970, 1, 1) + dt.timedelta(days=int(ts[-1] // NS_PER_DAY) + 1)
    out: list[SessionSpec] = []
    d = first
    while d <= last:
        s = make(d)
        lo = int(np.searchsorted(ts, s.open_ns, side="left"))
        hi = int(np.searchsorted(ts, s.close_ns, side="left"))
        if hi > lo:
            out.append(s)
        d += dt.timedelta(days=1)
    return tuple(out)


__all__ = ["CalendarError", "SessionKind", "build_sessions", "check_calendar", "exchange_sessions"]

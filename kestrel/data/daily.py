"""Daily bars on an exchange calendar: a bar dated D is the session of D on the calendar, and its
ticks lie inside that session's hours.

A file's bars are daily when every timestamp is midnight UTC (a `date` column, a Parquet
`date32`, or ISO text without a time of day). Each daily bar becomes 5 synthetic trade ticks
(`DAILY_TICKS`): the open twice (the opening print at the session's open and again at 1/8 of its
span), then low then high when close >= open, else high then low, then the close, at 1/4, 1/2 and
3/4 of the span (`DAILY_OFFSETS`, eighths of the span, floored to the nanosecond); a fifth of the
volume each; bid = ask = last. Every tick lies inside the session, so a 13:00 half day's ticks
end before 13:00. The repeated open makes a market order that fires at the opening print fill
at the open: the broker fills an order at the tick after the one it fires on, so a decision
taken before the session (after the previous close, or at the open on data before it) fills at
the day's open price, not at a point of the synthetic intraday path. A bar dated on a day the
calendar has no session (a holiday, a weekend) and two bars on one date are errors naming the
row. `daily_ticks_at` tells whether ticks sit exactly where daily bars put them.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from kestrel.data.errors import DataError
from kestrel.data.readers import Table
from kestrel.market.calendar import CalendarError, exchange_sessions
from kestrel.market.session import NS_PER_DAY, SessionSpec
from kestrel.market.ticks import F64, I64

_EPOCH = dt.date(1970, 1, 1)

DAILY_TICKS = 5
"""How many ticks a daily bar becomes."""
DAILY_OFFSETS = (0, 1, 2, 4, 6)
"""Where they lie in the session, in eighths of its span: open, open, low/high, high/low, close."""
_EIGHTHS = np.array(DAILY_OFFSETS, dtype=np.int64)


def is_daily(ts: I64) -> bool:
    """True when every timestamp is a midnight UTC (the bars are dated, not timed)."""
    return bool(len(ts)) and not bool(np.any(ts % NS_PER_DAY))


def day_of(ts_ns: int) -> dt.date:
    """The UTC calendar date of an instant."""
    return _EPOCH + dt.timedelta(days=int(ts_ns // NS_PER_DAY))


def calendar_sessions(path: object, calendar: str, first: dt.date, last: dt.date) -> tuple[SessionSpec, ...]:
    """`exchange_sessions` with its error as a `DataError` on `path`."""
    try:
        return exchange_sessions(calendar, first, last)
    except CalendarError as e:
        raise DataError(str(path), str(e)) from None


def daily_bar_ticks(t: Table, calendar: str) -> tuple[I64, F64, F64, tuple[SessionSpec, ...]]:
    """(ts, last, size, sessions) of the daily bars of `t` (checked high/low and signs) placed in
    their sessions of `calendar`."""
    o, h, lo, c = (t.values[k] for k in ("open", "high", "low", "close"))
    v = t.values.get("volume", np.zeros_like(o))
    dup = np.flatnonzero(t.ts[1:] == t.ts[:-1])
    if dup.size:
        i = int(dup[0]) + 1
        raise DataError(t.path, f"two bars dated {day_of(int(t.ts[i]))}: a daily file holds one bar per date",
                        column=t.columns["ts"], **t.where(i))
    days = (t.ts // NS_PER_DAY).astype(np.int64)
    sessions = calendar_sessions(t.path, calendar, day_of(int(t.ts[0])), day_of(int(t.ts[-1])))
    session_days = np.array([(s.date - _EPOCH).days for s in sessions], dtype=np.int64)
    k = np.searchsorted(session_days, days)
    found = (k < len(session_days)) & (session_days[np.minimum(k, max(len(session_days) - 1, 0))] == days) \
        if len(session_days) else np.zeros(len(days), dtype=bool)
    missing = np.flatnonzero(~found)
    if missing.size:
        i = int(missing[0])
        raise DataError(t.path, f"a bar dated {day_of(int(t.ts[i]))}, a day with no {calendar} session (a holiday or "
                        f"weekend); {missing.size} such row{'s' if missing.size != 1 else ''}: drop them or pass "
                        "the instrument's exchange calendar", column=t.columns["ts"], **t.where(i))
    mine = tuple(sessions[int(j)] for j in k)
    opens = np.array([s.open_ns for s in mine], dtype=np.int64)
    spans = np.array([s.length_ns for s in mine], dtype=np.int64)
    bull = c >= o
    px = np.stack([o, o, np.where(bull, lo, h), np.where(bull, h, lo), c], axis=1).reshape(-1)
    ts = daily_tick_times(opens, spans).reshape(-1)
    return ts, px, np.repeat(v / float(DAILY_TICKS), DAILY_TICKS), mine


def daily_tick_times(opens: I64, spans: I64) -> I64:
    """(sessions, 5): the instants of the ticks of a daily bar in each session (`DAILY_OFFSETS`)."""
    return opens[:, None] + (spans[:, None] * _EIGHTHS[None, :]) // 8


def daily_ticks_at(ts: I64, opens: I64, closes: I64) -> bool:
    """Whether the ticks `ts` (sorted) in the sessions [opens, closes] are daily bars' ticks:
    each session holds none or exactly `DAILY_TICKS` at the instants a daily bar's ticks take
    (`daily_tick_times`), and no tick lies outside the sessions. Intraday ticks (bars of a
    minute or an hour, quotes, trades) fail it."""
    lo = np.searchsorted(ts, opens, side="left")
    hi = np.searchsorted(ts, closes, side="right")
    counts = hi - lo
    if int(counts.sum()) != len(ts) or np.any((counts != 0) & (counts != DAILY_TICKS)):
        return False
    full = np.flatnonzero(counts)
    if not full.size:
        return True
    want = daily_tick_times(opens[full], closes[full] - opens[full])
    got = ts[lo[full][:, None] + np.arange(DAILY_TICKS, dtype=np.int64)[None, :]]
    return bool(np.array_equal(want, got))


__all__ = ["DAILY_OFFSETS", "DAILY_TICKS", "calendar_sessions", "daily_bar_ticks", "daily_tick_times", "daily_ticks_at",
           "day_of", "is_daily"]

"""How much of a session the data covers, and which sessions are complete.

A session is COMPLETE when its ticks span it: the first tick is within `COMPLETE_EDGE` of the
session's length after the open and the last tick within `COMPLETE_EDGE` before the close
(10%: 2.4 h of a 24 h FX session, 39 minutes of a 6.5 h equity session). Anything else is
PARTIAL: a file that starts or stops mid-session (OANDA's EUR/USD file ends 3 hours into the
2014-05-15 session with 1,450 ticks; it starts 3 hours into 2014-04-30's). Gaps inside the
session are not judged (a thin market is still a whole session).

By default a run takes the last complete session (`default_session_index`); when the data holds
no complete session it takes the MOST COVERED one (the largest share of its session spanned by
ticks, the later on a tie; a one-UTC-day FX file spans 21 h of one session and 3 h of the next:
it takes the 21 h one), and the result marks it partial.
"""

from __future__ import annotations

import datetime as dt

import msgspec

from kestrel.market import MarketData, SessionSpec

COMPLETE_EDGE = 0.10
"""The share of a session's length the data may miss at each end and still be complete."""


class Coverage(msgspec.Struct, frozen=True):
    """The ticks of one session: how many, the first and last instants (UTC ns), and whether
    they span the session (see the module docstring)."""

    date: str
    ticks: int
    first_ns: int | None
    last_ns: int | None
    open_ns: int
    close_ns: int
    tz: str
    complete: bool

    @property
    def share(self) -> float:
        """The share of the session its ticks span (0 without ticks)."""
        if self.first_ns is None or self.last_ns is None:
            return 0.0
        return (self.last_ns - self.first_ns) / (self.close_ns - self.open_ns)

    def describe(self) -> str:
        """One line, e.g. `partial session 2014-05-15: ticks 17:02:09-20:00:00 America/New_York
        span 3.0 h of its 24.0 h (1,450 ticks)`."""
        hours = (self.close_ns - self.open_ns) / 3.6e12
        state = "complete" if self.complete else "partial"
        if self.first_ns is None or self.last_ns is None:
            return f"{state} session {self.date}: no ticks in its {hours:.1f} h"
        span = (self.last_ns - self.first_ns) / 3.6e12
        return (
            f"{state} session {self.date}: ticks {self._clock(self.first_ns)}-"
            f"{self._clock(self.last_ns)} {self.tz} span {span:.1f} h of its {hours:.1f} h "
            f"({self.ticks:,} ticks)"
        )

    def _clock(self, ns: int) -> str:
        moment = dt.datetime.fromtimestamp(ns / 1e9, tz=SessionSpec(dt.date(2000, 1, 1), tz=self.tz).zone)
        return moment.strftime("%H:%M:%S")


def coverage(data: MarketData, session: SessionSpec, edge: float = COMPLETE_EDGE) -> Coverage:
    """How `data` covers `session` (see the module docstring for the rule)."""
    t = data.ticks
    lo = t.index_at(session.open_ns, side="left")
    hi = t.index_at(session.close_ns, side="right")
    open_ns, close_ns = session.open_ns, session.close_ns
    if hi <= lo:
        return Coverage(session.date.isoformat(), 0, None, None, open_ns, close_ns, session.tz, False)
    first, last = int(t.ts[lo]), int(t.ts[hi - 1])
    slack = edge * (close_ns - open_ns)
    complete = first - open_ns <= slack and close_ns - last <= slack
    return Coverage(session.date.isoformat(), hi - lo, first, last, open_ns, close_ns, session.tz, complete)


def default_session_index(data: MarketData) -> int:
    """The index in `data.sessions` a run takes without `--date`: the last complete session,
    else the most covered session (largest `share`, the later on a tie). `data` must hold a
    session."""
    cover = [coverage(data, s) for s in data.sessions]
    for i in range(len(cover) - 1, -1, -1):
        if cover[i].complete:
            return i
    return max(range(len(cover)), key=lambda i: (cover[i].share, i))


__all__ = ["COMPLETE_EDGE", "Coverage", "coverage", "default_session_index"]

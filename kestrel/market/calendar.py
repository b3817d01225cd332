"""The exchange calendar: the trading sessions of each session kind (FX, US equities, CME,
around the clock) that hold at least one tick."""

from __future__ import annotations

import datetime as dt
from typing import Literal

import numpy as np

from kestrel.market.session import NS_PER_DAY, SessionSpec
from kestrel.market.ticks import I64


SessionKind = Literal["utc", "fx", "us_equity", "cme"]
"""The exchange calendars: around the clock (UTC days), FX (17:00 New York to 17:00), US
equities (09:30-16:00 New York), CME (17:00-16:00 Chicago)."""


def build_sessions(ts: I64, kind: SessionKind) -> tuple[SessionSpec, ...]:
    """Sessions of `kind` that contain at least one tick, in order."""
    if len(ts) == 0:
        return ()

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


__all__ = ["build_sessions"]

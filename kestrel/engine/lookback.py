"""Run-wide lookback: the run's earlier ticks of a symbol a session's engine holds as history,
and how much of it a plan's indicators read.

In a portfolio run whose lookback is the run's (`PortfolioBounds.lookback = "run"`), each
session's engine holds its symbol's ticks of the run's earlier sessions (`RunHistory`: the
ticks of each session the run took, open to close; ticks between sessions are not the run's).
The broker never sees them: they only warm the plan's indicators, so a window (`high(5d)`,
`chg(1d)`) or an indicator (`sma(last, 20, 1d)`) looks back across sessions.

Which series look back: the quote and trade series `last bid ask mid spread size` (`RUN_WIDE`)
and every indicator of them. `open`, `vol`, `vwap` and `time` are the session's (an indicator of
`vwap` starts at the session's first tick), as are the account series.

How much history a plan is warmed with (`warm_start`): for each indicator of a run-wide series,
the ticks its values at the session's ticks depend on: a time window `d` the ticks from the
latest one at or before open - d (with the ticks sharing its time); n ticks the last n; n bars of
a timeframe the last n + 1 bars; a recurrence seeded at its first value (`ema`, `macd`,
`macdsignal`, `rsi`) `WARMUP` times as many ticks or bars, so its seed weighs nothing a
comparison can see. A window's values then equal those over every earlier tick of the run, and
both engine paths warm from the same tick (the earliest any indicator needs).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kestrel.engine.history import TickHistory
from kestrel.lang.functions import Arguments, Context
from kestrel.market.ticks import I64, Ticks

RUN_WIDE: frozenset[str] = frozenset({"last", "bid", "ask", "mid", "spread", "size"})
"""The series that look back across the run's sessions (the rest are the session's)."""

RECURRENCES: frozenset[str] = frozenset({"ema", "macd", "macdsignal", "rsi"})
"""Indicators seeded at their first value: warmed over `WARMUP` times their count."""

WARMUP = 10
"""How many times its count of ticks or bars a recurrence is warmed over."""


class RunHistory:
    """One symbol's ticks of the run's sessions so far: ranges [a, b) of its data's ticks,
    adjacent ranges merged. `ticks()` is them in order: a view of the data while they are one
    range (daily bars: no tick between sessions), else a view of a buffer the ranges are
    appended to once each (`TickHistory`: amortized O(1) a tick over the run)."""

    __slots__ = ("data", "ranges", "_buffer", "_appended")

    def __init__(self, data: Ticks) -> None:
        self.data = data
        self.ranges: list[tuple[int, int]] = []
        self._buffer = TickHistory()
        self._appended = 0  # the ranges in the buffer

    def add(self, start: int, stop: int) -> None:
        """The run took the data's ticks [start, stop) as a session."""
        if stop <= start:
            return
        if self.ranges and self.ranges[-1][1] == start and self._appended < len(self.ranges):
            self.ranges[-1] = (self.ranges[-1][0], stop)
        else:
            self.ranges.append((start, stop))

    def ticks(self) -> Ticks:
        ranges = self.ranges
        if not ranges:
            return Ticks.empty()
        if len(ranges) == 1 and not self._appended:
            return self.data.slice(*ranges[0])
        for a, b in ranges[self._appended:]:
            self._buffer.append(self.data.slice(a, b))
        self._appended = len(ranges)
        return self._buffer.view()


def _need(name: str, args: Arguments) -> tuple[int, int, int]:
    """(window ns, ticks, bars) call `name(args)` needs before a tick to be as over all history."""
    values = dict(args.values)
    counts = [int(v) for k, v in values.items() if k in ("n", "fast", "slow", "signal")]
    count = max(counts, default=0)
    if name == "macdsignal":
        count = int(values["slow"]) + int(values["signal"])
    if name in RECURRENCES:
        count *= WARMUP
    window = int(values.get("d", 0))
    if args.timeframe():
        return window, 0, count + 1
    return window, count, 0


def warm_start(calls: Iterable[tuple[str, Arguments]], history: Ticks, open_ns: int, context: Context) -> int:
    """The first tick of `history` (the run's ticks before a session opening at `open_ns`) the
    indicator calls `calls` (name, arguments) of run-wide series read; len(history) when none."""
    ts: I64 = history.ts
    n = len(history)
    start = n
    for name, args in calls:
        if args.source() not in RUN_WIDE or not n:
            continue
        window, ticks, bars = _need(name, args)
        if window:
            j = int(np.searchsorted(ts, open_ns - window, side="right")) - 1
            start = min(start, 0 if j < 0 else int(np.searchsorted(ts, ts[j], side="left")))
        if ticks:
            start = min(start, max(0, n - ticks))
        if bars:
            tf = args.timeframe()
            bar = (ts - context.origin(tf)) // tf
            firsts = np.concatenate(([0], np.flatnonzero(bar[1:] != bar[:-1]) + 1))
            start = min(start, 0 if len(firsts) <= bars else int(firsts[-bars]))
    return start


__all__ = ["RECURRENCES", "RUN_WIDE", "WARMUP", "RunHistory", "warm_start"]

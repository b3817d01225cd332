"""Equity marked to market at every tick, from a ledger and the ticks it ran on.

The ledger's `Mark` events sample equity only after fills and at the close; between them the
position is constant, so equity at any tick follows from the last position change before it:
equity_k = rpnl - fees + upnl_k, with upnl_k = pos x (touch_k - avg) x multiplier, the touch
being the bid for a long and the ask for a short (the engine's own convention), rounded to the
money quantum. Invariants:
- the state at tick k is the one after every ledger event of tick k (a fill at tick k is marked
  at tick k's touch), so at each `Mark` event the series equals the mark's equity;
- ticks before the first event are flat (equity 0), unless the session opens with a carried
  position (a `carry` event), which is marked from its carried average; one value per tick;
- a session's realized PnL starts at 0 (the engine's per-session ledger), so days chain on
  their realized net (`settled`), never on their marked equity: a position carried overnight
  is marked on the next day from its carried average, and its unrealized PnL counts once;
- `per_minute` samples the series at the end of each minute of the session (the last tick at
  or before it), which is the basis of the return metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kestrel.engine.ledger import Filled, LedgerEvent, PositionChanged
from kestrel.report.trips import carried_in

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
NS_PER_MIN = 60 * 1_000_000_000


@dataclass(frozen=True)
class EquityCurve:
    """Marked equity at every tick (`ts`, `equity`, `pos`), ns UTC and money; `settled` is the
    realized PnL net of fees after the last event (what the next session of a run builds on)."""

    ts: I64
    equity: F64
    pos: I64
    settled: float = 0.0

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    @property
    def final(self) -> float:
        return float(self.equity[-1]) if len(self) else 0.0

    def per_minute(self, start_ns: int, end_ns: int) -> tuple[I64, F64]:
        """Equity at the end of each minute from `start_ns` to `end_ns` (minute ends
        start+1m, start+2m, ..., up to and including the first end >= `end_ns`); 0 before the
        first tick. Returns (minute end times, equity)."""
        n = max(1, -(-(end_ns - start_ns) // NS_PER_MIN))
        ends = start_ns + NS_PER_MIN * np.arange(1, n + 1, dtype=np.int64)
        idx = np.searchsorted(self.ts, ends, side="right") - 1
        eq = np.where(idx >= 0, self.equity[np.maximum(idx, 0)], 0.0) if len(self) else np.zeros(n)
        return ends, eq.astype(np.float64)

    def shifted(self, offset: float) -> EquityCurve:
        """The same curve with `offset` added (to chain the days of a multi-day run)."""
        return EquityCurve(self.ts, self.equity + offset, self.pos, self.settled + offset)

    @staticmethod
    def offsets(curves: Sequence[EquityCurve]) -> list[float]:
        """Where each day of a run starts: the realized net of the days before it (a carried
        position's unrealized PnL is in the next day's own marks, so it is not added here)."""
        out: list[float] = []
        base = 0.0
        for c in curves:
            out.append(base)
            base += c.settled
        return out

    @staticmethod
    def concat(curves: Sequence[EquityCurve]) -> EquityCurve:
        """Days one after another, each on top of the realized net of the days before it."""
        parts = [c.shifted(b) for c, b in zip(curves, EquityCurve.offsets(curves))]
        if not parts:
            return EquityCurve(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.int64))
        return EquityCurve(np.concatenate([p.ts for p in parts]),
                           np.concatenate([p.equity for p in parts]),
                           np.concatenate([p.pos for p in parts]), parts[-1].settled)


def mark_equity(events: Sequence[LedgerEvent], ts: I64, bid: F64, ask: F64, *,
                multiplier: float = 1.0, money_decimals: int = 2) -> EquityCurve:
    """Equity at every tick of `ts`/`bid`/`ask` (the ticks the engine ran, in order, so that
    an event's `tick` indexes them). See the module docstring."""
    n = int(ts.shape[0])
    scale = 10**money_decimals
    at: list[int] = []
    pos_s: list[int | float] = []
    avg_s: list[float] = []
    cash_s: list[float] = []  # rpnl - fees, in money
    fees = rpnl = 0.0
    pos: int | float = 0
    avg = 0.0
    for e in events:
        carry = carried_in(e)
        if carry is not None:
            pos, avg = carry
        elif isinstance(e, Filled):
            fees = round((fees + e.fee) * scale) / scale
        elif isinstance(e, PositionChanged):
            pos, avg, rpnl = e.pos, e.avg_price or 0.0, e.rpnl
        else:
            continue
        cash = round((rpnl - fees) * scale) / scale
        if at and at[-1] == e.tick:
            pos_s[-1], avg_s[-1], cash_s[-1] = pos, avg, cash
        else:
            at.append(e.tick)
            pos_s.append(pos)
            avg_s.append(avg)
            cash_s.append(cash)
    settled = cash_s[-1] if cash_s else 0.0
    if n == 0:
        return EquityCurve(ts.astype(np.int64), np.empty(0, np.float64), np.empty(0, np.int64), settled)
    k = np.searchsorted(np.asarray(at, dtype=np.int64), np.arange(n, dtype=np.int64), side="right") - 1
    have = k >= 0
    kk = np.maximum(k, 0)
    pos_a = np.where(have, np.asarray(pos_s or [0], dtype=np.int64)[kk], 0)
    avg_a = np.where(have, np.asarray(avg_s or [0.0], dtype=np.float64)[kk], 0.0)
    cash_a = np.where(have, np.asarray(cash_s or [0.0], dtype=np.float64)[kk], 0.0)
    touch = np.where(pos_a > 0, bid, ask)
    upnl = np.where(pos_a != 0, np.round(pos_a * (touch - avg_a) * multiplier * scale) / scale, 0.0)
    equity = np.round((cash_a + upnl) * scale) / scale
    return EquityCurve(ts.astype(np.int64), equity.astype(np.float64), pos_a.astype(np.int64), settled)


__all__ = ["EquityCurve", "NS_PER_MIN", "mark_equity"]

"""Run metrics, computed from marked equity and the ledger's facts (defined once in
docs/report.md; this module is that definition in code).

- net PnL: the final marked equity (realized - fees + unrealized; 0 unrealized when flat);
  over several sessions, the days' realized nets plus the last day's unrealized (a carried
  position is marked from its carried average, once);
- return on risk capital: net PnL / risk capital (the plans' `maxloss`, see docs);
- Sharpe, Sortino: per-minute returns r_m = (E_m - E_{m-1}) / risk capital of the equity
  sampled at each minute's end, annualized by sqrt(252 x minutes per session); Sharpe =
  mean(r) / stdev(r, ddof=1) x sqrt(P), Sortino = mean(r) / sqrt(mean(min(r, 0)^2)) x sqrt(P);
  None when undefined (fewer than 2 minutes, or no variation / no downside);
- max drawdown: the largest fall of the tick-marked equity from its running peak (the peak
  starting at 0), with the time of its trough;
- win rate, profit factor (gross profit / gross loss of closed round trips, a carried trip on
  the day it closes; None without a loss), average win and loss; exposure: the fraction of
  the session's time with a position; turnover: the money traded (sum of |qty x price x
  multiplier| over fills, the run's multiplier); fees; counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from kestrel.report.equity import EquityCurve
from kestrel.report.trips import LedgerFacts

TRADING_DAYS_PER_YEAR = 252


class Metrics(msgspec.Struct, frozen=True):
    net_pnl: float
    risk_capital: float
    return_on_risk: float
    sharpe: float | None
    sortino: float | None
    periods_per_year: int
    max_drawdown: float
    max_drawdown_ts: int | None
    trades: int
    wins: int
    losses: int
    win_rate: float
    profit_factor: float | None
    avg_win: float
    avg_loss: float
    exposure: float
    turnover: float
    fees: float
    orders: int
    fills: int
    rejections: int
    disarms: int
    tokens: int | None = None
    cost_usd: float | None = None


def max_drawdown(ts: np.ndarray, equity: np.ndarray) -> tuple[float, int | None]:
    """The largest peak-to-trough fall of `equity` (peak starting at 0) and the trough's time."""
    if equity.shape[0] == 0:
        return 0.0, None
    peak = np.maximum.accumulate(np.maximum(equity, 0.0))
    dd = peak - equity
    k = int(np.argmax(dd))
    if dd[k] <= 0:
        return 0.0, None
    return float(dd[k]), int(ts[k])


def _ratio(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def sharpe_sortino(minute_equity: np.ndarray, capital: float, periods_per_year: int) -> tuple[float | None, float | None]:
    """Annualized Sharpe and Sortino of per-minute returns (see the module docstring)."""
    if minute_equity.shape[0] < 2 or capital <= 0:
        return None, None
    r = np.diff(np.concatenate(([0.0], minute_equity))) / capital
    mean = float(np.mean(r))
    sd = float(np.std(r, ddof=1))
    down = float(np.sqrt(np.mean(np.minimum(r, 0.0) ** 2)))
    scale = math.sqrt(periods_per_year)
    sharpe = _ratio(mean / sd * scale) if sd > 0 else None
    sortino = _ratio(mean / down * scale) if down > 0 else None
    return sharpe, sortino


def compute(curve: EquityCurve, minute_equity: np.ndarray, facts: Sequence[LedgerFacts], *,
            risk_capital: float, span_ns: int, minutes_per_session: int, multiplier: float = 1.0,
            tokens: int | None = None, cost_usd: float | None = None) -> Metrics:
    """Metrics of one run (one or more sessions: `curve` chained over them, `facts` per day,
    `span_ns` the sessions' total length)."""
    trips = [t for f in facts for t in f.trips if t.exit_ts is not None]  # closed (not open, not carried)
    wins = [t.pnl for t in trips if t.pnl > 0]
    losses = [t.pnl for t in trips if t.pnl <= 0]
    gross_loss = -sum(losses)
    ppy = TRADING_DAYS_PER_YEAR * max(1, minutes_per_session)
    sharpe, sortino = sharpe_sortino(minute_equity, risk_capital, ppy)
    dd, dd_ts = max_drawdown(curve.ts, curve.equity)
    if len(curve):
        gaps = np.diff(curve.ts, append=curve.ts[-1])
        held = int(np.sum(gaps[curve.pos != 0]))
    else:
        held = 0
    fills = [r for f in facts for r in f.fills]
    net = curve.final
    return Metrics(
        net_pnl=round(net, 9),
        risk_capital=risk_capital,
        return_on_risk=round(net / risk_capital, 9) if risk_capital > 0 else 0.0,
        sharpe=sharpe,
        sortino=sortino,
        periods_per_year=ppy,
        max_drawdown=round(dd, 9),
        max_drawdown_ts=dd_ts,
        trades=len(trips),
        wins=len(wins),
        losses=len(losses),
        win_rate=round(len(wins) / len(trips), 6) if trips else 0.0,
        profit_factor=round(sum(wins) / gross_loss, 6) if gross_loss > 0 else None,
        avg_win=round(sum(wins) / len(wins), 9) if wins else 0.0,
        avg_loss=round(sum(losses) / len(losses), 9) if losses else 0.0,
        exposure=round(min(1.0, held / span_ns), 6) if span_ns > 0 else 0.0,
        turnover=round(sum((abs(r.qty * r.price * multiplier) for r in fills), 0.0), 9),
        fees=round(sum((r.fee for r in fills), 0.0), 9),
        orders=sum(f.orders for f in facts),
        fills=len(fills),
        rejections=sum(f.rejections for f in facts),
        disarms=sum(f.disarms for f in facts),
        tokens=tokens,
        cost_usd=cost_usd,
    )


__all__ = ["Metrics", "TRADING_DAYS_PER_YEAR", "compute", "max_drawdown", "sharpe_sortino"]

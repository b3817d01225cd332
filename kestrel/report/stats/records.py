"""Per-session results: the unit every sweep statistic is computed from.

A `SessionRecord` is one agent x profile x session x repeat: the session's net PnL and return
on risk capital, its per-period returns as `ReturnMoments`, and what it traded and spent. A
session is named by (data, date); records of different cells on the same (data, date) are
paired. `session_records` cuts a run's report into its sessions:

- session k's net PnL is the change of the run's chained equity over it: E_k - E_{k-1}, E_k the
  realized net of the sessions before k plus session k's final marked equity (E_{-1} = 0), so the
  sessions' PnLs add up to the run's net PnL, and a position carried overnight counts once;
- its returns are the run's per-minute returns r_m = (E_m - E_{m-1}) / risk capital that fall
  in it (its first minute's from the previous session's last minute), so the sessions' returns
  are the run's return series, cut where sessions begin;
- return on risk is net PnL / the run's risk capital (0 when there is none, as in the run's
  metrics); round trips, wins, fees, tokens and dollars are the session's own (a round trip on
  the day it closes; tokens and dollars None when the run's are).
"""

from __future__ import annotations

import msgspec
import numpy as np

from kestrel.report.equity import EquityCurve
from kestrel.report.run import RunReport
from kestrel.report.stats.moments import ReturnMoments


class SessionRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One agent x profile x session x repeat (see the module docstring)."""

    agent: str
    profile: str
    data: str
    date: str  # the session's date, ISO
    net_pnl: float
    return_on_risk: float
    returns: ReturnMoments = ReturnMoments()
    model: str | None = None
    repeat: int = 0
    trades: int = 0  # closed round trips
    wins: int = 0
    fees: float = 0.0
    tokens: int | None = None
    cost_usd: float | None = None
    currency: str = "USD"

    @property
    def session(self) -> tuple[str, str]:
        return (self.data, self.date)


def session_records(report: RunReport, *, profile: str, repeat: int = 0, data: str | None = None,
                    agent: str | None = None) -> list[SessionRecord]:
    """The run's sessions as records (see the module docstring); `data` and `agent` default to
    the report header's."""
    h = report.header
    capital = report.metrics.risk_capital
    offsets = EquityCurve.offsets([d.curve for d in report.days])
    out: list[SessionRecord] = []
    before = 0.0  # chained equity at the end of the previous session
    last_minute = 0.0  # chained equity at the end of the previous session's last minute
    for d, base in zip(report.days, offsets):
        end = base + d.curve.final
        minutes = d.minute_equity + base
        r = (np.diff(np.concatenate(([last_minute], minutes))) / capital if capital > 0
             else np.zeros(0, dtype=np.float64))
        if minutes.shape[0]:
            last_minute = float(minutes[-1])
        closed = [t for t in d.facts.trips if t.exit_ts is not None]
        tokens = [t.tokens for t in d.turns]
        costs = [t.cost_usd for t in d.turns]
        net = round(end - before, 9)
        out.append(SessionRecord(
            agent=agent if agent is not None else h.agent, profile=profile,
            data=data if data is not None else h.data, date=d.date, net_pnl=net,
            return_on_risk=round(net / capital, 9) if capital > 0 else 0.0,
            returns=ReturnMoments.of(r), model=h.model, repeat=repeat, trades=len(closed),
            wins=sum(1 for t in closed if t.pnl > 0),
            fees=round(sum((f.fee for f in d.facts.fills), 0.0), 9),
            tokens=None if report.metrics.tokens is None else sum(t for t in tokens if t is not None),
            cost_usd=None if report.metrics.cost_usd is None else round(sum(c for c in costs if c is not None), 9),
            currency=h.currency))
        before = end
    return out


__all__ = ["SessionRecord", "session_records"]

"""The reference agents of a sweep's statistics as per-session records, computed from the data
and the execution model alone (never from the agents a sweep holds).

- **buy-and-hold** buys at each session's first ask and sells at its last bid, in the
  execution model's `maxpos` (the largest position the operator allows any agent), without fees;
  each session on its own (flat overnight), so a session's record is the same whichever run,
  agent or sweep it is computed for;
- **flat** never trades (every session 0).

Their return on risk is over the execution model's `maxloss` (the risk capital of a run that
arms no plan), their per-period returns the per-minute changes of their marked equity over it,
as for any run (`kestrel.report.stats.session_records`).

A universe run's reference agents are its reference portfolios (`kestrel.report.universe_baselines`):
**equal-weight buy-and-hold** and **cash**, over the run's sessions with the run's starting
capital, marked at every merged tick; a session's record holds the change of the portfolio's
equity over it (from the previous session's close, the capital first), its return on the
capital, and the per-minute changes of its equity over the capital (the equity at each minute's
end from the open to the close, the last merged tick at or before it). They depend on the
universe, the sessions and the capital alone. Pure and deterministic.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from kestrel.engine.config import EngineConfig
from kestrel.market.data import MarketData
from kestrel.market.universe import Universe
from kestrel.report.equity import NS_PER_MIN
from kestrel.report.portfolio_marks import run_sessions
from kestrel.report.universe_baselines import reference_portfolios
from kestrel.report.run import DayInput, RunHeader, baseline_events, build, run_config, session_ticks
from kestrel.report.stats.moments import ReturnMoments
from kestrel.report.stats.records import SessionRecord, session_records

BASELINE_PROFILE = "-"
"""The profile of the reference agents' records (they have no authoring loop)."""
REFERENCE_AGENTS = ("buy-and-hold", "flat")
UNIVERSE_REFERENCE_AGENTS = ("equal-weight buy-and-hold", "cash")


_MEMO: dict[tuple[int, str, str, str, bytes], tuple[weakref.ref[Any], SessionRecord]] = {}
_MEMO_LOCK = threading.Lock()


def session_record(data: MarketData, date: str, kind: str, *, data_name: str, config: EngineConfig) -> SessionRecord:
    """Reference agent `kind`'s record of the session on `date` (remembered per data, name,
    date and execution model while the data lives: it depends on nothing else)."""
    arr = data.ticks.ts
    key = (id(arr), data_name, date, kind, msgspec.json.encode(config))
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
    if hit is not None and hit[0]() is arr:  # the same data still (an id is reused only once it is gone)
        return hit[1]
    s = next(x for x in data.sessions if x.date.isoformat() == date)
    t = session_ticks(data, s)
    events = baseline_events(kind, t, config.operator_maxpos, data, config)
    header = RunHeader(data.symbol, data_name, None, kind, None, (date,), ())
    rep = build(header, [DayInput(s, events, [])], data, config=config, risk_capital=config.maxloss, baselines=False)
    (rec,) = session_records(rep, profile=BASELINE_PROFILE, data=data_name, agent=kind)
    rec = msgspec.structs.replace(rec, tokens=0, cost_usd=0.0)  # no model: nothing spent
    with _MEMO_LOCK:
        if len(_MEMO) > 100_000:
            _MEMO.clear()
        _MEMO[key] = (weakref.ref(arr), rec)
    return rec


def baseline_records(data: MarketData, dates: Sequence[str], *, data_name: str,
                     config: EngineConfig = EngineConfig()) -> list[SessionRecord]:
    """The buy-and-hold and flat records of the sessions on `dates` of `data` (see the module
    docstring), buy-and-hold's first, each in date order."""
    config = run_config(config, data)
    return [session_record(data, date, kind, data_name=data_name, config=config)
            for kind in REFERENCE_AGENTS for date in dates]


def curve_session_records(curve: Any, universe: Universe, dates: Sequence[str], capital: float, *, agent: str,
                          profile: str, data: str, repeat: int = 0, model: str | None = None,
                          currency: str = "USD", tokens: int | None = None,
                          cost_usd: float | None = None) -> list[SessionRecord]:
    """An account curve (`AccountCurve`: equity marked at every merged tick) over the universe's
    sessions on `dates` as one record per session: net PnL close to close (from `capital`), its
    return on `capital`, and the per-minute returns of the equity's last mark in each minute."""
    out: list[SessionRecord] = []
    before = last_minute = capital
    for s in run_sessions(universe, list(dates)):
        n = max(1, -(-(s.close_ns - s.open_ns) // NS_PER_MIN))
        ends = s.open_ns + NS_PER_MIN * np.arange(1, n + 1, dtype=np.int64)
        k = np.searchsorted(curve.ts, ends, side="right") - 1
        minutes = np.where(k >= 0, curve.equity[np.maximum(k, 0)] if len(curve) else capital, capital)
        r = np.diff(np.concatenate(([last_minute], minutes))) / capital
        last_minute = float(minutes[-1])
        j = int(np.searchsorted(curve.ts, s.close_ns, side="right")) - 1
        end = float(curve.equity[j]) if j >= 0 else capital
        net = round(end - before, 9)
        out.append(SessionRecord(agent=agent, profile=profile, data=data, date=s.date.isoformat(), net_pnl=net,
                                 return_on_risk=round(net / capital, 9), returns=ReturnMoments.of(r.astype(np.float64)),
                                 model=model, repeat=repeat, tokens=tokens, cost_usd=cost_usd, currency=currency))
        before = end
    return out


def universe_baseline_records(universe: Universe, dates: Sequence[str], *, data_name: str,
                              capital: float) -> list[SessionRecord]:
    """The equal-weight buy-and-hold and cash records of a universe run over the sessions on
    `dates` with starting `capital` (see the module docstring), equal-weight's first, each in
    date order."""
    refs = reference_portfolios(universe, capital, list(dates))
    currency = universe.members[0].instrument.currency if len(universe) else "USD"
    return [record for kind in UNIVERSE_REFERENCE_AGENTS
            for record in curve_session_records(refs[kind].curve, universe, dates, capital, agent=kind,
                                                profile=BASELINE_PROFILE, data=data_name, currency=currency,
                                                tokens=0, cost_usd=0.0)]


__all__ = ["BASELINE_PROFILE", "REFERENCE_AGENTS", "UNIVERSE_REFERENCE_AGENTS", "baseline_records",
           "curve_session_records", "universe_baseline_records"]

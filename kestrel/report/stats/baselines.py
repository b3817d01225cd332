"""The reference agents of a sweep's statistics as per-session records, computed from the data
and the execution model alone (never from the agents a sweep holds).

- **buy-and-hold** buys at each session's first ask and sells at its last bid, in the
  execution model's `maxpos` (the largest position the operator allows any agent), without fees;
  each session on its own (flat overnight), so a session's record is the same whichever run,
  agent or sweep it is computed for;
- **flat** never trades (every session 0).

Their return on risk is over the execution model's `maxloss` (the risk capital of a run that
arms no plan), their per-period returns the per-minute changes of their marked equity over it,
as for any run (`kestrel.report.stats.session_records`). Pure and deterministic.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import msgspec

from kestrel.engine.config import EngineConfig
from kestrel.market.data import MarketData
from kestrel.report.run import DayInput, RunHeader, baseline_events, build, run_config, session_ticks
from kestrel.report.stats.records import SessionRecord, session_records

BASELINE_PROFILE = "-"
"""The profile of the reference agents' records (they have no authoring loop)."""
REFERENCE_AGENTS = ("buy-and-hold", "flat")


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


__all__ = ["BASELINE_PROFILE", "REFERENCE_AGENTS", "baseline_records"]

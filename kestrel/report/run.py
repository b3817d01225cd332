"""A run's report model: per session the marked equity, the ledger's facts and the turns, and
the run's metrics next to the buy-and-hold and flat baselines.

Built from a `SessionResult` (`from_result`) or from a capture's turns and a ledger
(`from_ledger`); both go through `build`, so a report reads the same whichever way the run
reached it. Pure and deterministic: nothing here reads the clock or the network.

Money is valued with the run's execution model on the data's instrument (`run_config`: the
instrument's contract multiplier unless the config sets one) and shown at the engine's money
quantum (`RunReport.money_decimals`). Days chain on their realized net (`EquityCurve.offsets`):
a position carried overnight is marked on the next day from its carried average, once.

Baselines (same sessions, same marking, no fees): `buy-and-hold` buys at each session's first
ask and sells at its last bid, in the run's largest absolute position (1 unit when the run never
traded); `flat` never trades.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import (
    Armed,
    Disarmed,
    Filled,
    Ledger,
    LedgerEvent,
    OrderPlaced,
    PositionChanged,
)
from kestrel.engine.money import Money
from kestrel.market.instrument import Instrument, money_decimals
from kestrel.market.data import MarketData
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.report.equity import NS_PER_MIN, EquityCurve, mark_equity
from kestrel.report.metrics import Metrics, compute
from kestrel.report.trips import LedgerFacts, RoundTrip, carried_in, local_time, read_ledger

BASELINES = ("buy-and-hold", "flat")


class TurnRow(msgspec.Struct, frozen=True):
    """One ordinal's terminal turn and what became of it. Loop figures are None when the
    source does not know them (a report from a capture and a ledger)."""

    date: str
    ordinal: str
    kind: str  # PLAN | STANDDOWN | PASS
    plan: str | None = None
    plan_text: str | None = None
    reason: str | None = None
    iterations: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    armed: str | None = None  # what the runtime did with the turn
    fate: str | None = None  # how the armed plan ended, from the ledger


class RunHeader(msgspec.Struct, frozen=True):
    symbol: str
    data: str
    data_sha256: str | None
    agent: str
    model: str | None
    dates: tuple[str, ...]
    schedule: tuple[str, ...]
    currency: str = "USD"
    multiplier: float = 1.0
    instrument: Instrument | None = None  # set by `build`: the data's, at the run's multiplier


@dataclass(frozen=True)
class DayInput:
    session: SessionSpec
    events: Sequence[LedgerEvent]
    turns: Sequence[TurnRow]
    note: str | None = None  # e.g. a partial session's coverage


@dataclass(frozen=True)
class DayReport:
    date: str
    tz: str
    decimals: int
    open_ns: int
    close_ns: int
    facts: LedgerFacts
    turns: list[TurnRow]
    curve: EquityCurve  # this session alone, starting at 0
    minute_ts: np.ndarray
    minute_equity: np.ndarray
    minute_mid: np.ndarray
    note: str | None = None


@dataclass(frozen=True)
class RunReport:
    header: RunHeader
    days: list[DayReport]
    curve: EquityCurve  # the sessions chained
    metrics: Metrics
    baselines: dict[str, Metrics] = field(default_factory=dict)
    money_decimals: int = 2  # the engine's money quantum: equity is computed on it
    shown_decimals: int = 2  # the currency's precision: money is printed at it


def session_ticks(data: MarketData, session: SessionSpec) -> Ticks:
    """The ticks the engine ran for `session` (open to close inclusive, as the runner feeds)."""
    t = data.ticks
    return t.slice(t.index_at(session.open_ns, side="left"), t.index_at(session.close_ns, side="right"))


def run_config(config: EngineConfig, data: MarketData) -> EngineConfig:
    """The run's execution model on `data`: `config` with the instrument's contract multiplier
    when `config` leaves it at 1, as the runner does (`kestrel.session.runner.engine_config`;
    captures record the config before that). Every money figure of a report uses it."""
    mult = data.instrument.multiplier
    if config.multiplier == mult or config.multiplier != 1.0:
        return config
    return msgspec.structs.replace(config, multiplier=mult)


def _money_decimals(data: MarketData, cfg: EngineConfig) -> int:
    return Money.derive(data.tick_size, cfg.multiplier, cfg.slippage_ticks, cfg.fee_per_unit,
                        cfg.fee_per_order, cfg.money_decimals, cfg.lot_size).decimals


def _fates(events: Sequence[LedgerEvent], tz: str) -> list[tuple[str, str]]:
    """(plan, how it ended) for each `Armed` event in order."""
    out: list[tuple[str, str]] = []
    open_idx: dict[str, int] = {}
    for e in events:
        if isinstance(e, Armed):
            open_idx[e.plan] = len(out)
            out.append((e.plan, "armed to the end"))
        elif isinstance(e, Disarmed) and e.plan in open_idx:
            k = open_idx.pop(e.plan)
            out[k] = (e.plan, f"disarmed {local_time(e.ts, tz)}: {e.reason}")
    return out


def _with_fates(turns: Sequence[TurnRow], events: Sequence[LedgerEvent], tz: str) -> list[TurnRow]:
    fates = _fates(events, tz)
    out: list[TurnRow] = []
    for t in turns:
        fate = None
        if t.plan is not None and (t.armed is None or t.armed.startswith("armed")):
            for k, (plan, how) in enumerate(fates):
                if plan == t.plan:
                    fate = how
                    del fates[k]
                    break
        out.append(msgspec.structs.replace(t, fate=fate))
    return out


def _baseline_events(kind: str, n: int, bid: np.ndarray, ask: np.ndarray, ts: np.ndarray,
                     qty: int | float, multiplier: float, decimals: int) -> list[LedgerEvent]:
    if kind == "flat" or n == 0:
        return []
    buy, sell = float(ask[0]), float(bid[n - 1])
    scale = 10**decimals
    rpnl = round(qty * (sell - buy) * multiplier * scale) / scale
    t0, t1 = int(ts[0]), int(ts[n - 1])
    return [
        OrderPlaced(0, t0, 1, kind, "entry", "buy", qty, "mkt", None, None),
        Filled(0, t0, 1, "buy", qty, buy, 0.0),
        PositionChanged(0, t0, qty, buy, 0.0),
        Disarmed(n - 1, t1, kind, "session close"),
        OrderPlaced(n - 1, t1, 2, kind, "exit", "sell", qty, "mkt", None, None),
        Filled(n - 1, t1, 2, "sell", qty, sell, 0.0),
        PositionChanged(n - 1, t1, 0, None, rpnl),
    ]


def baseline_events(kind: str, ticks: Ticks, qty: int | float, data: MarketData, config: EngineConfig) -> list[LedgerEvent]:
    """The ledger of baseline `kind` (`buy-and-hold`: buy `qty` at the first ask, sell at the
    last bid; `flat`: nothing) over one session's `ticks`, under `config` (its multiplier and
    money quantum), without fees."""
    return _baseline_events(kind, len(ticks), ticks.bid, ticks.ask, ticks.ts, qty, config.multiplier,
                            _money_decimals(data, config))


def build(header: RunHeader, days: Sequence[DayInput], data: MarketData, *,
          config: EngineConfig = EngineConfig(), risk_capital: float | None = None,
          baselines: bool = True) -> RunReport:
    """The report of a run over `days` (see the module docstring). `risk_capital` is the
    plans' largest `maxloss` (the adapters take it from the armed plans), else the engine's.
    `baselines=False` leaves the baselines out (a report of a baseline itself)."""
    config = run_config(config, data)
    mult = config.multiplier
    dec = _money_decimals(data, config)
    lot = config.lot_size if config.lot_size != 1 else data.instrument.lot_size  # the run's lot
    inst = msgspec.structs.replace(data.instrument, multiplier=mult, lot_size=lot)
    header = msgspec.structs.replace(header, currency=inst.currency, multiplier=mult, instrument=inst)
    reports: list[DayReport] = []
    ticks_of: list[Ticks] = []
    opens_carried = [any(carried_in(e) is not None for e in d.events) for d in days]
    held: RoundTrip | None = None  # the trip the previous day carried out, if any
    for k, d in enumerate(days):
        s = d.session
        carry_out = config.end_of_day == "carry" or (k + 1 < len(days) and opens_carried[k + 1])
        facts = read_ledger(d.events, carried_from=held if opens_carried[k] else None, carry_out=carry_out)
        last = facts.trips[-1] if facts.trips else None
        held = last if last is not None and last.exit_ts is None else None
        t = session_ticks(data, s)
        ticks_of.append(t)
        curve = mark_equity(d.events, t.ts, t.bid, t.ask, multiplier=mult, money_decimals=dec)
        mts, meq = curve.per_minute(s.open_ns, s.close_ns)
        idx = np.searchsorted(t.ts, mts, side="right") - 1
        mid = (t.bid + t.ask) / 2.0
        mmid = np.where(idx >= 0, mid[np.maximum(idx, 0)] if len(t) else 0.0, np.nan)
        reports.append(DayReport(s.date.isoformat(), s.tz, data.price_decimals, s.open_ns, s.close_ns,
                                 facts, _with_fates(d.turns, d.events, s.tz), curve,
                                 mts, meq, mmid.astype(np.float64), d.note))
    capital = risk_capital if risk_capital is not None else config.maxloss
    tokens = [t.tokens for r in reports for t in r.turns]
    costs = [t.cost_usd for r in reports for t in r.turns]
    metrics = _metrics(reports, capital, mult, tokens=None if any(x is None for x in tokens) else sum(
        x for x in tokens if x is not None),
        cost=None if not costs or any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 9))
    peak = max((abs(f.pos) for r in reports for f in r.facts.fills), default=0) or data.instrument.min_units
    refs: dict[str, Metrics] = {}
    for kind in BASELINES if baselines else ():
        parts: list[DayReport] = []
        for r, t in zip(reports, ticks_of):
            ev = _baseline_events(kind, len(t), t.bid, t.ask, t.ts, peak, mult, dec)
            c = mark_equity(ev, t.ts, t.bid, t.ask, multiplier=mult, money_decimals=dec)
            mts, meq = c.per_minute(r.open_ns, r.close_ns)
            parts.append(DayReport(r.date, r.tz, r.decimals, r.open_ns, r.close_ns, read_ledger(ev), [], c,
                                   mts, meq, r.minute_mid))
        refs[kind] = _metrics(parts, capital, mult, tokens=None, cost=None)
    return RunReport(header, reports, EquityCurve.concat([r.curve for r in reports]), metrics, refs, dec,
                     money_decimals(inst.currency))


def chained_minutes(days: Sequence[DayReport]) -> np.ndarray:
    """The run's equity at the end of each minute of its sessions, days chained on their
    realized net (see `EquityCurve.offsets`)."""
    bases = EquityCurve.offsets([d.curve for d in days])
    parts = [d.minute_equity + b for d, b in zip(days, bases)]
    return np.concatenate(parts) if parts else np.zeros(0)


def _metrics(days: Sequence[DayReport], capital: float, mult: float, *, tokens: int | None,
             cost: float | None) -> Metrics:
    curve = EquityCurve.concat([d.curve for d in days])
    meq = chained_minutes(days)
    span = sum(d.close_ns - d.open_ns for d in days)
    per_session = max(1, round(span / max(1, len(days)) / NS_PER_MIN))
    return compute(curve, meq, [d.facts for d in days], risk_capital=capital, span_ns=span,
                   minutes_per_session=per_session, multiplier=mult, tokens=tokens, cost_usd=cost)


# ------------------------------------------------------------------------------------------
# adapters


def _engine_of(header: Any) -> EngineConfig:
    """The execution model a header records (captures that carry one), else the default."""
    engine = getattr(header, "engine", None)
    return engine if isinstance(engine, EngineConfig) else EngineConfig()


def turn_row(date: str, ordinal: str, turn: Any, *, iterations: int | None = None,
             tokens: int | None = None, cost_usd: float | None = None, armed: str | None = None) -> TurnRow:
    """A `TurnRow` from a terminal turn (Supersede, StandDownTurn or PassTurn)."""
    from kestrel import lang
    from kestrel.session.protocol import StandDownTurn, Supersede

    if isinstance(turn, Supersede):
        return TurnRow(date, ordinal, "PLAN", turn.plan.name, lang.format(turn.plan).rstrip("\n"), None,
                       iterations, tokens, cost_usd, armed)
    if isinstance(turn, StandDownTurn):
        return TurnRow(date, ordinal, "STANDDOWN", None, None, turn.reason, iterations, tokens, cost_usd, armed)
    return TurnRow(date, ordinal, "PASS", None, None, None, iterations, tokens, cost_usd, armed)


def _plan_caps(turns: Sequence[Any], config: EngineConfig) -> float | None:
    from kestrel.session.protocol import Supersede

    caps = [t.plan.risk.maxloss if t.plan.risk.maxloss is not None else config.maxloss
            for t in turns if isinstance(t, Supersede)]
    return max(caps) if caps else None


CALL_KINDS = frozenset({"reply", "view-request", "repair", "self-correction", "risk-review", "single-shot-refusal",
                        "late-reply", "agent-error", "abandoned"})
"""Evidence kinds that record a model call (the tokens and dollars of an ordinal)."""


def recorded_model(agent_id: str) -> str | None:
    """The model a capture's agent id names (`openai:gpt-4o` -> `gpt-4o`), None for an agent
    that is not a provider's model."""
    from kestrel.providers import lookup

    kind, sep, model = agent_id.partition(":")
    return model.strip() or None if sep and lookup(kind) is not None else None


def _calls(agent_id: str, evidence: Sequence[Any], outcomes: Sequence[Any]
           ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], float | None]]:
    """(tokens, dollars) per (date, ordinal) of a run's model calls as its evidence records them;
    an ordinal without a call spent 0 (dollars None when the agent is not a priced model)."""
    from collections import defaultdict

    from kestrel.models.cost import run_cost
    from kestrel.providers import lookup

    row = lookup(agent_id.partition(":")[0])
    priced = row is not None and bool(row.prices)
    cost = run_cost(agent_id, evidence, outcomes)
    usd: dict[tuple[str, str], float | None] = defaultdict(lambda: 0.0 if priced else None)
    usd.update({(c["date"] or "", c["ordinal"]): c["usd"] for c in cost["ordinals"]})
    spent: dict[tuple[str, str], int] = {}
    for e in evidence:
        if e.kind in CALL_KINDS:
            spent[(e.date or "", e.ordinal)] = spent.get((e.date or "", e.ordinal), 0) + e.usage.spend
    return spent, usd


def from_result(result: Any, data: MarketData, *, config: EngineConfig | None = None,
                data_sha256: str | None = None, model: str | None = None,
                evidence: Sequence[Any] | None = None, calls_unknown: bool = False,
                baselines: bool = True) -> RunReport:
    """The report of a `SessionResult` run on `data`. Dollars per ordinal and per run come from
    `kestrel.models.cost.run_cost` (None for agents that are not priced models); the execution
    model is `config`, else the one the capture header records, else the default. A replay
    makes no calls of its own: `evidence` is the recorded run's (its tokens and dollars are
    shown), and without it `calls_unknown` shows a model's as unknown, never as zero (any other
    agent calls nothing: 0).
    `baselines=False` leaves the page's baselines out (a sweep's come from the data alone). The model is
    `model`, else the one the evidence records, else the one the capture's agent id names."""
    config = run_config(config or _engine_of(result.header), data)
    sessions = {s.date.isoformat(): s for s in data.sessions}
    days: list[DayInput] = []
    turns: list[Any] = []
    outcomes = [o for d in result.days for o in d.outcomes]
    recorded = evidence is not None
    calls_unknown = calls_unknown and recorded_model(result.header.agent) is not None  # other agents call nothing
    ev = list(evidence) if evidence is not None else result.evidence
    spent, usd = _calls(result.header.agent, ev, [] if recorded else outcomes)
    for d in result.days:
        rows = []
        for o in d.outcomes:
            slot = (d.date, o.ordinal)
            tokens: int | None = spent.get(slot, 0) if recorded else o.tokens_spent
            dollars = usd[slot]
            if calls_unknown and not recorded:
                tokens = dollars = None
            rows.append(turn_row(d.date, o.ordinal, o.turn, iterations=o.iterations, tokens=tokens, cost_usd=dollars,
                                 armed=o.armed))
        turns += [o.turn for o in d.outcomes]
        note = str(getattr(d, "coverage", "")) if getattr(d, "partial", False) else None
        days.append(DayInput(sessions[d.date], d.ledger.events, rows, note))
    h = result.header
    if model is None:  # the model the authoring loop recorded, else the capture's agent id names
        model = next((e.model for e in ev if getattr(e, "model", "")), None) or recorded_model(h.agent)
    header = RunHeader(h.symbol, h.data, data_sha256, h.agent, model, tuple(h.dates), tuple(h.schedule),
                       data.instrument.currency, config.multiplier)
    return build(header, days, data, config=config, risk_capital=_plan_caps(turns, config), baselines=baselines)


def split_ledger(ledger: Ledger, sessions: Sequence[SessionSpec]) -> list[list[LedgerEvent]]:
    """A multi-session ledger file (days one after another, each engine counting ticks from
    0) split back into its sessions: a new session starts where the tick index falls back, the
    time passes the previous session's close, or the time reaches the next session's open from
    before it (a session without ticks)."""
    out: list[list[LedgerEvent]] = [[] for _ in sessions]
    k = 0
    last_tick, last_ts = -1, -1
    for e in ledger.events:
        while k + 1 < len(sessions) and (
                e.ts > sessions[k].close_ns or e.tick < last_tick
                or (e.ts >= sessions[k + 1].open_ns > last_ts and out[k])):
            k += 1
            last_tick, last_ts = -1, -1
        out[k].append(e)
        last_tick, last_ts = e.tick, e.ts
    return out


def from_ledger(header: Any, turns: Sequence[Any], ledger: Ledger, data: MarketData, *,
                config: EngineConfig | None = None, data_sha256: str | None = None,
                evidence: Sequence[Any] | None = None) -> RunReport:
    """The report of a capture's turns (`header`, `turns` as read by `read_capture`) and the
    run's ledger, without re-running anything; with the run's `evidence`, its model calls'
    tokens and dollars per ordinal (else unknown)."""
    config = run_config(config or _engine_of(header), data)
    sessions = {s.date.isoformat(): s for s in data.sessions}
    specs = [sessions[d] for d in header.dates]
    per_day = split_ledger(ledger, specs)
    spent, usd = _calls(header.agent, evidence, []) if evidence is not None else ({}, {})
    calls = recorded_model(header.agent) is not None

    def row(t: Any) -> TurnRow:
        if evidence is None:  # unknown for a model's turns; no other agent calls anything
            return turn_row(t.date, t.ordinal, t.turn, tokens=None if calls else 0)
        slot = (t.date, t.ordinal)
        return turn_row(t.date, t.ordinal, t.turn, tokens=spent.get(slot, 0), cost_usd=usd[slot])

    days = [DayInput(s, ev, [row(t) for t in turns if t.date == s.date.isoformat()])
            for s, ev in zip(specs, per_day)]
    model = next((e.model for e in evidence or () if getattr(e, "model", "")), None) or recorded_model(header.agent)
    rh = RunHeader(header.symbol, header.data, data_sha256, header.agent, model, tuple(header.dates),
                   tuple(header.schedule), data.instrument.currency, config.multiplier)
    return build(rh, days, data, config=config, risk_capital=_plan_caps([t.turn for t in turns], config))


__all__ = ["BASELINES", "CALL_KINDS", "DayInput", "baseline_events", "recorded_model", "DayReport", "RunHeader", "RunReport", "TurnRow", "build", "chained_minutes",
           "from_ledger", "from_result", "run_config", "session_ticks", "split_ledger", "turn_row"]

"""The report of a portfolio run: from its ledger (`kestrel.report.portfolio_ledger`) and the
universe it ran on, the account marked at every merged tick, drawdown, exposure over time,
per-symbol attribution, per-session lines, and the reference portfolios of the same sessions
(`kestrel.report.universe_baselines`).

Definitions (docs/report.md, "Portfolio runs"):
- positions follow the ledger's `position` events (and `carry`), `split` events at the symbol's
  next tick; cash = capital - the sum over fills of signed qty x price x multiplier - fees + the
  `dividend` amounts + cash in lieu of a split's fraction of a lot (that fraction at the last
  touch before the split divided by the ratio: pos_before x ratio - pos_after units); equity, gross and net are marked at every merged tick
  (`kestrel.report.portfolio_marks`). Each `account` line is checked against the account
  recomputed from the ledger lines before it (`_Replay`; `account_mismatches` counts the lines
  that differ);
- max drawdown: the largest fall of marked equity from its running peak, the peak starting at
  the capital;
- a symbol's attribution: P&L = its cash flows (fills, fees, dividends) + its value at the end,
  so the symbols' P&L add up to the run's net PnL; trades = round trips closed (flat to flat, a
  reversal closes one); fills, fees, turnover (the money traded); time in market = the share
  of the run's session time it held a position; mean exposure = the time-weighted mean of
  |value| / equity;
- exposure over time: gross and net after every merged tick, and as multiples of equity.
Pure and deterministic.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Carried, Filled, OrderRejected, PositionChanged
from kestrel.engine.portfolio.ledger import AccountMark, DividendPaid, SplitApplied
from kestrel.market.instrument import money_decimals
from kestrel.market.universe import Universe
from kestrel.report.portfolio_ledger import PortfolioLine, read_portfolio_ledger
from kestrel.report.portfolio_marks import (
    F64,
    I64,
    AccountCurve,
    MergedTicks,
    PositionPath,
    mark_account,
    max_drawdown,
    merge_ticks,
    money_quantum,
    run_sessions,
)
from kestrel.report.universe_baselines import REFERENCE_PORTFOLIOS, ReferencePortfolio, cash, equal_weight


@dataclass(frozen=True)
class Attribution:
    """One symbol's share of the run (module docstring)."""

    symbol: str
    pnl: float
    realized_cash: float  # its cash flows: fills, fees, dividends
    final_value: float
    final_position: float
    trades: int
    fills: int
    fees: float
    dividends: float
    turnover: float
    time_in_market: float
    mean_exposure: float
    rejections: int


@dataclass(frozen=True)
class SessionLine:
    date: str
    equity: float  # after the session's last merged tick
    pnl: float  # change over the session (from the previous session's close, the capital first)
    gross: float
    net: float
    open_positions: int
    max_drawdown: float  # within the session, from the running peak of the run


@dataclass(frozen=True)
class Figures:
    """A portfolio's headline figures."""

    final_equity: float
    net_pnl: float
    return_on_capital: float
    max_drawdown: float
    max_drawdown_ts: int | None
    peak_gross: float
    peak_gross_share: float  # the largest gross / equity


@dataclass(frozen=True)
class PortfolioReport:
    symbols: tuple[str, ...]
    currency: str
    capital: float
    decimals: int  # the money quantum the account is kept at
    shown_decimals: int  # the currency's precision, for text
    ticks: MergedTicks
    curve: AccountCurve
    figures: Figures
    attribution: tuple[Attribution, ...]
    sessions: tuple[SessionLine, ...]
    references: dict[str, tuple[Figures, ReferencePortfolio]] = field(default_factory=dict)
    account_lines: int = 0
    account_mismatches: int = 0
    first_mismatch: str | None = None
    fills: int = 0
    rejections: int = 0


def _sign(side: str) -> int:
    return 1 if side == "buy" else -1


def _figures(curve: AccountCurve, capital: float) -> Figures:
    final = float(curve.equity[-1]) if len(curve) else capital
    dd, at = max_drawdown(curve.ts, curve.equity, capital)
    eq = np.where(curve.equity > 0, curve.equity, np.nan)
    share = np.abs(curve.gross) / eq if len(curve) else np.zeros(0)
    return Figures(final, round(final - capital, 9), round((final - capital) / capital, 9), round(dd, 9), at,
                   round(float(np.max(curve.gross)), 9) if len(curve) else 0.0,
                   round(float(np.nanmax(share)), 6) if share.size and np.any(np.isfinite(share)) else 0.0)


def _durations(ticks: MergedTicks) -> F64:
    """How long each merged tick's state lasts: to the next merged tick of its session, the
    session's last to the close."""
    n = len(ticks)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    closes = np.array([s.close_ns for s in ticks.sessions], dtype=np.int64)[ticks.session_of]
    nxt = np.concatenate((ticks.ts[1:], [closes[-1]]))
    same = np.concatenate((ticks.session_of[1:] == ticks.session_of[:-1], [False]))
    end = np.where(same, nxt, np.maximum(closes, ticks.ts))
    return (end - ticks.ts).astype(np.float64)


def _trips(pos_seq: Sequence[float]) -> int:
    trips = 0
    prev = 0.0
    for p in pos_seq:
        if prev != 0 and (p == 0 or (p > 0) != (prev > 0)):
            trips += 1
        prev = p
    return trips


def portfolio_report(universe: Universe, ledger: bytes | Sequence[PortfolioLine], capital: float,
                     dates: Sequence[str | dt.date] | None = None, *, configs: Mapping[str, EngineConfig] | None = None,
                     decimals: int | None = None, references: bool = True) -> PortfolioReport:
    """The report of a portfolio run over the sessions on `dates` (all the universe's when None)
    with starting `capital`, each symbol under its execution model in `configs` (the default
    when None: its multiplier and money quantum; module docstring). Raises
    `PortfolioLedgerError` on an unreadable ledger, ValueError on a line naming a symbol or tick
    the run does not have."""
    lines = read_portfolio_ledger(ledger) if isinstance(ledger, bytes) else list(ledger)
    sessions = run_sessions(universe, dates)
    ticks = merge_ticks(universe, sessions, configs)
    decimals = money_quantum(universe, configs) if decimals is None else decimals
    index = {s: k for k, s in enumerate(universe.symbols)}
    changes: dict[int, list[tuple[int, float]]] = {}
    flows: list[tuple[int, float]] = []
    per_flow: dict[int, float] = {}
    fees: dict[int, float] = {}
    fills: dict[int, int] = {}
    turnover: dict[int, float] = {}
    divs: dict[int, float] = {}
    rejects: dict[int, int] = {}
    scale = 10.0**decimals
    replay = _Replay(ticks, capital, decimals)
    for n, line in enumerate(lines, 1):
        e = line.event
        if isinstance(e, AccountMark):
            replay.check(e)
            continue
        sym = line.symbol
        if sym not in index:
            raise ValueError(f"ledger line {n}: symbol {sym!r} is not in the universe ({', '.join(universe.symbols)})")
        m = index[sym]
        mult = float(ticks.multipliers[m])
        if isinstance(e, Filled):
            k = ticks.merged_index(m, e.tick)
            traded = e.qty * e.price * mult
            amount = round((-_sign(e.side) * traded - e.fee) * scale) / scale
            flows.append((k, amount))
            replay.flow(amount)
            per_flow[m] = per_flow.get(m, 0.0) + amount
            fees[m] = fees.get(m, 0.0) + e.fee
            fills[m] = fills.get(m, 0) + 1
            turnover[m] = turnover.get(m, 0.0) + abs(traded)
        elif isinstance(e, (PositionChanged, Carried)):
            if not (isinstance(e, Carried) and e.tick == ticks.own_count(m)):  # a carry into no more ticks
                ticks.merged_index(m, e.tick)  # the tick must be the run's
            changes.setdefault(m, []).append((e.tick, float(e.pos)))
            replay.position(m, float(e.pos))
        elif isinstance(e, SplitApplied):
            own = ticks.first_at_or_after(m, e.ts)
            replay.split(m, float(e.pos_after), e.ratio, ticks.own_count(m) if own is None else own)
            if own is not None:
                changes.setdefault(m, []).append((own, float(e.pos_after)))
                rest = float(e.pos_before) * e.ratio - float(e.pos_after)
                if rest and own > 0:  # cash in lieu of a fraction of a lot: the last touch / ratio
                    j = ticks.merged_index(m, own - 1)
                    mark = float(ticks.bid[j] if e.pos_before > 0 else ticks.ask[j])
                    amount = round(rest * mark / e.ratio * mult * scale) / scale
                    k = ticks.merged_index(m, own)
                    flows.append((k, amount))
                    replay.flow(amount)
                    per_flow[m] = per_flow.get(m, 0.0) + amount
        elif isinstance(e, DividendPaid):
            k = int(np.searchsorted(ticks.ts, e.ts, side="left"))
            replay.flow(e.amount)
            if k < len(ticks):
                flows.append((k, e.amount))
                per_flow[m] = per_flow.get(m, 0.0) + e.amount
                divs[m] = divs.get(m, 0.0) + e.amount
        elif isinstance(e, OrderRejected):
            rejects[m] = rejects.get(m, 0) + 1
    paths: dict[int, PositionPath] = {}
    for m, ch in changes.items():
        ch.sort(key=lambda c: c[0])  # stable: ledger order within a tick, the last one holds
        at = np.array([c[0] for c in ch], dtype=np.int64)
        pos = np.array([c[1] for c in ch], dtype=np.float64)
        last = np.concatenate((at[1:] != at[:-1], [True])) if at.size else np.zeros(0, dtype=bool)
        paths[m] = PositionPath(at[last], pos[last])
    curve = mark_account(ticks, capital, paths, flows, decimals=decimals)
    mismatches, first = replay.mismatches, replay.first
    durations = _durations(ticks)
    total_time = float(sum(s.close_ns - s.open_ns for s in sessions)) or 1.0
    attribution = []
    for m, sym in enumerate(universe.symbols):
        idx = ticks.own_merged(m)
        pos_m = curve.positions[m]
        value = curve.values[m]
        final_value = float(value[-1]) if value.size else 0.0
        # a member's value holds from each of its ticks until its next one
        held_time = float(np.sum(_member_durations(ticks, idx, durations) * (pos_m != 0))) if idx.size else 0.0
        exposure = _mean_exposure(ticks, idx, value, curve.equity, durations, total_time)
        flow = round(per_flow.get(m, 0.0), decimals)
        path = paths.get(m)
        attribution.append(Attribution(
            sym, round(flow + final_value, decimals), flow, final_value, float(pos_m[-1]) if pos_m.size else 0.0,
            _trips(path.pos.tolist()) if path is not None else 0, fills.get(m, 0), round(fees.get(m, 0.0), 9),
            round(divs.get(m, 0.0), decimals), round(turnover.get(m, 0.0), decimals),
            round(held_time / total_time, 6), round(exposure, 6), rejects.get(m, 0)))
    figures = _figures(curve, capital)
    refs: dict[str, tuple[Figures, ReferencePortfolio]] = {}
    if references:
        for kind, make in zip(REFERENCE_PORTFOLIOS, (equal_weight, cash)):
            p = make(universe, capital, [s.date for s in sessions], decimals=decimals, ticks=ticks)
            refs[kind] = (_figures(p.curve, capital), p)
    currencies = {m.instrument.currency for m in universe.members}
    currency = currencies.pop() if len(currencies) == 1 else "/".join(sorted(currencies))
    return PortfolioReport(universe.symbols, currency, capital, decimals, money_decimals(currency.split("/")[0]),
                           ticks, curve, figures, tuple(attribution), _session_lines(ticks, curve, capital), refs,
                           replay.lines, mismatches, first, sum(fills.values()), sum(rejects.values()))


def from_portfolio_run(engine: Any, dates: Sequence[str | dt.date]) -> PortfolioReport:
    """The report of a finished portfolio run: `engine` the run's `PortfolioEngine` (its
    universe, its symbols' configs, the operator's capital and its ledger), `dates` the run's
    sessions (a `PortfolioResult`'s `capture.dates`)."""
    return portfolio_report(engine.universe, engine.ledger.to_jsonl(), engine.bounds.capital, dates,
                            configs=engine.configs)


def _member_durations(ticks: MergedTicks, idx: I64, durations: F64) -> F64:
    """How long each of a member's ticks' states last: until its next tick in the same
    session, its session's last tick until the close."""
    if idx.size == 0:
        return np.zeros(0, dtype=np.float64)
    ts = ticks.ts[idx]
    ses = ticks.session_of[idx]
    closes = np.array([s.close_ns for s in ticks.sessions], dtype=np.int64)[ses]
    nxt = np.concatenate((ts[1:], [closes[-1]]))
    same = np.concatenate((ses[1:] == ses[:-1], [False]))
    return (np.where(same, nxt, np.maximum(closes, ts)) - ts).astype(np.float64)


def _mean_exposure(ticks: MergedTicks, idx: I64, value: F64, equity: F64, durations: F64, total: float) -> float:
    if idx.size == 0 or not np.any(value):
        return 0.0
    n = len(ticks)
    v = np.zeros(n, dtype=np.float64)
    v[idx] = np.abs(value) - np.abs(np.concatenate(([0.0], value[:-1])))
    held = np.cumsum(v)  # |value| after every merged tick
    share = np.where(equity > 0, held / np.where(equity > 0, equity, 1.0), 0.0)
    return float(np.sum(share * durations) / total)


class _Replay:
    """The account at each `account` line, recomputed from the ledger lines before it: cash the
    running sum of the cash flows so far, each held symbol's value its position so far x the
    touch of its latest tick at or before the line's merged tick (divided by a split's ratio
    until the symbol's first tick after the split) x its multiplier. A line written after a
    session's ticks (its end-of-day exits, the close of a session without a tick) may name the
    next merged index: it is read at the merged tick before it."""

    def __init__(self, ticks: MergedTicks, capital: float, decimals: int) -> None:
        self.ticks = ticks
        self.scale = 10.0**decimals
        self.tol = 0.5 * 10.0**-decimals + 1e-9
        self.cash = capital
        self.pos: dict[int, float] = {}
        self.splits: dict[int, tuple[int, float]] = {}  # member -> (own tick it applies from, ratio)
        self.lines = 0
        self.mismatches = 0
        self.first: str | None = None

    def flow(self, amount: float) -> None:
        self.cash = round((self.cash + amount) * self.scale) / self.scale

    def position(self, m: int, pos: float) -> None:
        self.pos[m] = pos

    def split(self, m: int, pos_after: float, ratio: float, own: int) -> None:
        self.pos[m] = pos_after
        self.splits[m] = (own, ratio)

    def check(self, a: AccountMark) -> None:
        t = self.ticks
        self.lines += 1
        k = a.tick
        if not 0 <= k < len(t) or int(t.ts[k]) > a.ts:
            k = min(k, len(t)) - 1
        net = gross = 0.0
        n_open = 0
        for m, pos in self.pos.items():
            if not pos:
                continue
            n_open += 1
            idx = t.own_merged(m)
            j = int(np.searchsorted(idx, k, side="right")) - 1 if k >= 0 else -1
            if j < 0:
                continue
            touch = float(t.bid[idx[j]] if pos > 0 else t.ask[idx[j]])
            split = self.splits.get(m)
            if split is not None and j < split[0]:
                touch /= split[1]
            value = round(pos * touch * float(t.multipliers[m]) * self.scale) / self.scale
            net += value
            gross += abs(value)
        got = (self.cash, round((self.cash + net) * self.scale) / self.scale, round(gross * self.scale) / self.scale,
               round(net * self.scale) / self.scale)
        want = (a.cash, a.equity, a.gross, a.net)
        if any(abs(g - w) > self.tol for g, w in zip(got, want)) or n_open != a.open:
            self.mismatches += 1
            self.first = self.first or (
                f"account line at merged tick {a.tick}: the ledger says cash {a.cash}, equity {a.equity}, gross "
                f"{a.gross}, net {a.net}, open {a.open}; marked: cash {got[0]}, equity {got[1]}, gross {got[2]}, "
                f"net {got[3]}, open {n_open}")


def _session_lines(ticks: MergedTicks, curve: AccountCurve, capital: float) -> tuple[SessionLine, ...]:
    out: list[SessionLine] = []
    before = capital
    peak = capital
    for k, s in enumerate(ticks.sessions):
        idx = np.flatnonzero(ticks.session_of == k)
        if idx.size == 0:
            continue
        eq = curve.equity[idx]
        run_peak = np.maximum.accumulate(np.maximum(eq, peak))
        dd = float(np.max(run_peak - eq))
        peak = float(run_peak[-1])
        j = int(idx[-1])
        end = float(curve.equity[j])
        out.append(SessionLine(s.date.isoformat(), end, round(end - before, 9), round(float(curve.gross[j]), 9),
                               round(float(curve.net[j]), 9), int(curve.open_positions[j]), round(dd, 9)))
        before = end
    return tuple(out)


def sampled(rep: PortfolioReport, per_session: int | None = None) -> tuple[F64, F64, F64, F64, list[tuple[float, str]]]:
    """(x, equity, gross, net, x labels) sampled at evenly spaced times of each session (the
    state after the last merged tick at or before each; the capital and no exposure before the
    first), sessions side by side on the x axis: what the charts draw."""
    sessions = rep.ticks.sessions
    n = per_session or max(2, min(390, 800 // max(1, len(sessions))))
    xs, eq, gr, nt = [], [], [], []
    labels: list[tuple[float, str]] = []
    c = rep.curve
    for k, s in enumerate(sessions):
        at = s.open_ns + (np.arange(1, n + 1, dtype=np.int64) * (s.close_ns - s.open_ns)) // n
        j = np.searchsorted(c.ts, at, side="right") - 1
        have = j >= 0
        jj = np.maximum(j, 0)
        xs.append(k * n + np.arange(n, dtype=np.float64))
        eq.append(np.where(have, c.equity[jj] if len(c) else rep.capital, rep.capital))
        gr.append(np.where(have, c.gross[jj] if len(c) else 0.0, 0.0))
        nt.append(np.where(have, c.net[jj] if len(c) else 0.0, 0.0))
        labels.append((float(k * n), s.date.isoformat()))
    step = max(1, len(labels) // 6)
    labels = labels[::step]

    def cat(parts: list[F64]) -> F64:
        return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0, dtype=np.float64)

    return cat(xs), cat(eq), cat(gr), cat(nt), labels


def to_json(rep: PortfolioReport) -> dict[str, Any]:
    """The report for `--json`: the figures, per-symbol attribution, per-session lines, the
    reference portfolios' figures, the account check."""
    def figures(f: Figures) -> dict[str, Any]:
        return {"final_equity": f.final_equity, "net_pnl": f.net_pnl, "return_on_capital": f.return_on_capital,
                "max_drawdown": f.max_drawdown, "max_drawdown_ts": f.max_drawdown_ts, "peak_gross": f.peak_gross,
                "peak_gross_share": f.peak_gross_share}

    return {
        "symbols": list(rep.symbols), "currency": rep.currency, "capital": rep.capital,
        "sessions": len(rep.ticks.sessions), "ticks": len(rep.ticks), "fills": rep.fills,
        "rejections": rep.rejections, "metrics": figures(rep.figures),
        "attribution": [{"symbol": a.symbol, "pnl": a.pnl, "final_position": a.final_position,
                         "final_value": a.final_value, "trades": a.trades, "fills": a.fills, "fees": a.fees,
                         "dividends": a.dividends, "turnover": a.turnover, "time_in_market": a.time_in_market,
                         "mean_exposure": a.mean_exposure, "rejections": a.rejections} for a in rep.attribution],
        "per_session": [{"date": s.date, "equity": s.equity, "pnl": s.pnl, "gross": s.gross, "net": s.net,
                         "open": s.open_positions, "max_drawdown": s.max_drawdown} for s in rep.sessions],
        "baselines": {k: figures(f) for k, (f, _) in rep.references.items()},
        "account_check": {"lines": rep.account_lines, "mismatches": rep.account_mismatches,
                          "first_mismatch": rep.first_mismatch},
    }


__all__ = ["Attribution", "Figures", "PortfolioReport", "SessionLine", "from_portfolio_run", "portfolio_report", "sampled",
           "to_json"]

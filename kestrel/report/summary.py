"""The readable report and the `--json` summary of a simulated run (terminal output only).

Both read the run through `kestrel.report` (equity marked at every tick, the ledger's facts),
so they state what the ledger says: how each armed plan ended (disarmed, with its reason),
every rejected order and disarm with its reason, each round trip with its exit reason, fill
times with the session's calendar date and zone, and the max drawdown of marked equity.
Money is valued with the run's instrument (named in the header and in `--json` `instrument`)
and shown at the engine's money quantum; positions carried across sessions are marked.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from kestrel.lang.numbers import num
from kestrel.report import RunReport, from_result, local_time
from kestrel.report.trips import carried_label
from kestrel.report.metrics import Metrics
from kestrel.report.evidence import Recorded
from kestrel.report.text import instrument_line, metric_rows, money, qty, sparkline


WIDTH = 160  # columns when the output is not a terminal: the round trips' zoned times fit on one line

if TYPE_CHECKING:  # imported lazily at run time (start-up cost)
    from rich.console import Console
    from rich.table import Table

    from kestrel.engine.config import EngineConfig
    from kestrel.market import MarketData
    from kestrel.report.run import DayReport
    from kestrel.session.protocol import AgentTurn
    from kestrel.session.results import DayResult, SessionResult


def _turn_kind(turn: AgentTurn) -> str:
    from kestrel.session.protocol import StandDownTurn, Supersede

    if isinstance(turn, Supersede):
        return f"PLAN {turn.plan.name}"
    if isinstance(turn, StandDownTurn):
        return "STANDDOWN"
    return "PASS"


def _execution(result: SessionResult) -> dict[str, Any]:
    from kestrel.engine.config import EngineConfig

    return describe(result.header.engine or EngineConfig())


def _run_report(result: SessionResult, data: MarketData, recorded: Recorded | None = None) -> RunReport:
    if recorded is None:
        return from_result(result, data)
    return from_result(result, data, evidence=recorded.evidence, calls_unknown=recorded.evidence is None)


def _evidence(result: SessionResult, recorded: Recorded | None) -> list[Any]:
    """The run's call records: its own, or a replay's recorded run's (none when not given)."""
    if recorded is None:
        return result.evidence
    return list(recorded.evidence or ())


def _metrics_json(m: Metrics) -> dict[str, Any]:
    import msgspec

    out: dict[str, Any] = msgspec.to_builtins(m)
    return out


def _day_facts(d: DayResult, r: DayReport) -> dict[str, Any]:
    """Per day: the fill log (zoned), round trips, rejections, disarms, the marked drawdown."""
    from kestrel.report.metrics import max_drawdown

    tz = r.tz
    dd, dd_ts = max_drawdown(r.curve.ts, r.curve.equity)
    return {
        "fill_log": [{"time": local_time(f.ts, tz), "ts": f.ts, "order": f.role, "side": f.side, "qty": f.qty,
                   "price": f.price, "fee": f.fee, "position": f.pos, "realized": f.rpnl}
                  for f in r.facts.fills],
        "round_trips": [{"side": t.side, "qty": t.qty, "entry": local_time(t.entry_ts, tz),
                         "entry_price": t.entry_price,
                         "exit": local_time(t.exit_ts, tz) if t.exit_ts is not None else None,
                         "exit_price": t.exit_price, "pnl": t.pnl, "fees": t.fees,
                         "exit_reason": t.exit_reason, "carried": t.carried} for t in r.facts.trips],
        "rejections": [{"time": local_time(n.ts, tz), "plan": n.plan, "rule": n.rule, "reason": n.reason}
                       for n in r.facts.notices if n.kind == "rejected"],
        "disarms": [{"time": local_time(n.ts, tz), "plan": n.plan, "reason": n.reason}
                    for n in r.facts.notices if n.kind == "disarmed"],
        "max_drawdown": round(dd, 6),
        "max_drawdown_at": local_time(dd_ts, tz) if dd_ts is not None else None,
    }


def summary(result: SessionResult, data: MarketData, *, recorded: Recorded | None = None) -> dict[str, Any]:
    """The machine-readable summary (`--json`): per day and in total. A replay's `recorded`
    calls give its tokens, dollars and evidence counts (unknown without the evidence)."""
    rep = _run_report(result, data, recorded)
    days = []
    totals: Counter[str] = Counter()
    net = 0.0
    evidence: Counter[str] = Counter()
    ticks: Counter[str] = Counter(fast=0, reference=0)
    for d, r in zip(result.days, rep.days):
        s = d.summary
        days.append({
            "date": d.date,
            "partial": d.partial,
            "coverage": d.coverage,
            "currency": d.currency,
            "timezone": r.tz,
            "turns": [
                {"ordinal": o.ordinal, "turn": _turn_kind(o.turn), "armed": o.armed, "fate": row.fate,
                 "iterations": o.iterations, "tokens": o.tokens_spent if recorded is None else row.tokens,
                 "escalations": o.escalations}
                for o, row in zip(d.outcomes, r.turns)
            ],
            "trades": s.trades, "wins": s.wins, "realized_pnl": round(s.realized_pnl, 6),
            "fees": round(s.fees, 6), "net_pnl": round(s.net_pnl, 6),
            "orders": s.orders, "fills": s.fills,
            "carried_in": s.carried_in, "carried_out": s.carried_out,
            **_day_facts(d, r),
            "engine_ticks": dict(sorted(d.engine_ticks.items())),
        })
        totals.update(trades=s.trades, wins=s.wins, orders=s.orders, fills=s.fills)
        ticks.update(d.engine_ticks)
        net += s.net_pnl
        evidence.update(e.kind for e in (d.evidence if recorded is None else ()))
    currencies = sorted({d.currency for d in result.days})
    inst = rep.header.instrument
    return {
        "data": result.header.data,
        "symbol": result.header.symbol,
        "currency": currencies[0] if len(currencies) == 1 else currencies,
        "instrument": None if inst is None else {
            "symbol": inst.symbol, "tick_size": inst.tick_size, "multiplier": inst.multiplier,
            "currency": inst.currency, "min_qty": inst.min_qty, "lot_size": inst.lot_size},
        "agent": result.header.agent,
        "dates": list(result.header.dates),
        "schedule": list(result.header.schedule),
        "engine_path": result.engine_path,
        "engine_ticks": dict(sorted(ticks.items())),
        "execution": _execution(result),
        "days": days,
        # net_pnl is realized net of fees (the ledgers'); metrics.net_pnl adds the open position's
        # unrealized PnL at the end (unrealized_pnl)
        "total": {**dict(sorted(totals.items())), "net_pnl": round(net, 6),
                  "unrealized_pnl": round(rep.curve.final - rep.curve.settled, 9)},
        "metrics": _metrics_json(rep.metrics),
        "baselines": {k: _metrics_json(v) for k, v in rep.baselines.items()},
        "evidence": dict(sorted(evidence.items())),
        "cost": _cost(result, latency=False, recorded=recorded),  # latencies are in the evidence: deterministic
        "failure": None if (f := result.failure) is None else {"kind": f.kind, "reason": f.reason},
    }


def _cost(result: SessionResult, *, latency: bool = True, recorded: Recorded | None = None) -> dict[str, Any] | None:
    """The run's model calls (`run_cost`); a replay's are the recorded run's, None when unknown."""
    from kestrel.models.cost import run_cost

    if recorded is not None and recorded.evidence is None:
        return None
    outcomes = [o for d in result.days for o in d.outcomes] if recorded is None else []
    return run_cost(result.header.agent, _evidence(result, recorded), outcomes, latency=latency)


def _cost_section(con: Console, result: SessionResult, recorded: Recorded | None = None) -> None:
    """Model calls with their tokens, latency and dollars; per ordinal; for the run."""
    from rich.table import Table

    cost = _cost(result, recorded=recorded)
    if cost is None:  # a replay of a model's run without its evidence
        if recorded is not None and (model := from_result_model(result)) is not None:
            con.print(f"Model calls: recorded by {model}; their tokens and dollars are in the run's evidence file "
                      "(pass --evidence FILE to show them)", markup=False)
        return
    if not cost["calls"]:
        return

    def usd(x: float | None) -> str:
        return "n/a" if x is None else f"${x:.4f}"

    calls = Table(title=f"Model calls ({cost['agent']})", title_justify="left")
    for col in ("date", "ordinal", "iter", "kind", "input", "cache read", "cache write", "output", "thinking",
                "ms", "cost"):
        calls.add_column(col, justify="left" if col in ("date", "ordinal", "kind") else "right")
    for c in cost["calls"]:
        calls.add_row(c["date"] or "", c["ordinal"], str(c["iteration"]), c["kind"], str(c["input"]),
                      str(c["cache_read"]), str(c["cache_write"]), str(c["output"]), str(c["thinking"]),
                      "" if c["latency_ms"] is None else f"{c['latency_ms']:.0f}", usd(c["usd"]))
    con.print(calls)
    per = ", ".join(f"{o['date']} {o['ordinal']} {o['tokens']} tok {usd(o['usd'])}" for o in cost["ordinals"])
    t = cost["total"]
    con.print(f"Cost per ordinal: {per}")
    con.print(f"Cost of the run: {t['calls']} calls, {t['tokens']} tokens (input {t['input']}, "
              f"output {t['output']}, thinking {t['thinking']}), {usd(t['usd'])}"
              + (f" + {t['abandoned']} abandoned calls of unknown cost" if t["abandoned"] else ""))


def printable_text(text: str) -> str:
    from kestrel.terminal import printable

    return printable(text)


def _shown(text: str) -> str:
    """Text from a capture or an agent for the console: control characters escaped, rich markup
    taken literally."""
    from rich.markup import escape

    from kestrel.terminal import printable

    return escape(printable(str(text), one_line=True))


def from_result_model(result: SessionResult) -> str | None:
    from kestrel.report.run import recorded_model

    return recorded_model(result.header.agent)


def report(result: SessionResult, data: MarketData, command: str = "simulate", *,
           recorded: Recorded | None = None) -> None:
    """The readable report: turns per ordinal and how each plan ended, armed plans, fills,
    round trips, rejections and disarms, PnL, key metrics and evidence counts (a replay's
    model calls are its `recorded` run's)."""
    from rich.console import Console

    rep = _run_report(result, data, recorded)
    con = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else WIDTH)
    h = result.header
    model = f"  model {_shown(rep.header.model)}" if rep.header.model and rep.header.model not in h.agent else ""
    con.print(f"[bold]kestrel {command}[/bold]  {_shown(h.symbol)}  data {_shown(h.data)}  agent {_shown(h.agent)}{model}  "
              f"sessions {_shown(', '.join(h.dates))}  schedule {_shown(' '.join(h.schedule))}")
    if rep.header.instrument is not None:
        con.print(f"Instrument: {instrument_line(rep.header.instrument)}", markup=False)
    for d in result.days:
        if d.partial:
            con.print(f"[bold]{d.coverage}[/bold]: the results cover only that span")
    _turns(con, result, rep, recorded is not None)
    _fills(con, rep)
    _trips(con, rep)
    _notices(con, rep)
    _pnl(con, result, rep)
    _summary_lines(con, rep)
    ticks: Counter[str] = Counter()
    for d in result.days:
        ticks.update(d.engine_ticks)
    con.print(f"Engine ({result.engine_path}): fast path {ticks['fast']} ticks, "
              f"reference path {ticks['reference']} ticks")
    from kestrel.engine.config import EngineConfig

    con.print(describe_line(result.header.engine or EngineConfig()), markup=False)
    _cost_section(con, result, recorded)
    counts = Counter(e.kind for e in _evidence(result, recorded))
    shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none (single-shot or first-reply turns)"
    con.print(f"Evidence records: {shown}")
    failure = result.failure
    if failure is not None:
        con.print(f"FAILED: {failure.line()}", markup=False, style="bold red")


def html_table(title: str, cols: tuple[str, ...], left: tuple[str, ...]) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in cols:
        t.add_column(col, justify="left" if col in left else "right")
    return t


def _turns(con: Console, result: SessionResult, rep: RunReport, replayed: bool = False) -> None:
    from kestrel.session.protocol import StandDownTurn

    turns = html_table("Turns per ordinal", ("date", "ordinal", "turn", "armed", "iterations", "tokens"),
                   ("date", "ordinal", "turn", "armed"))
    plans: dict[str, str] = {}
    for d, r in zip(result.days, rep.days):
        for o, row in zip(d.outcomes, r.turns):
            kind = _turn_kind(o.turn)
            if isinstance(o.turn, StandDownTurn):
                kind += f": {o.turn.reason}"
            if row.plan_text is not None:
                plans.setdefault(row.plan_text, f"{d.date} {o.ordinal}")
            armed = o.armed if row.fate is None else f"{o.armed}; {row.fate}"
            tokens = o.tokens_spent if not replayed else row.tokens
            turns.add_row(d.date, o.ordinal, _shown(kind), _shown(armed), str(o.iterations),
                          "n/a" if tokens is None else str(tokens))
    con.print(turns)
    for text, where in plans.items():
        con.print(f"[bold]Armed plan[/bold] ({_shown(where)}):")
        con.print(printable_text(text), markup=False)


def _fills(con: Console, rep: RunReport) -> None:
    # fill times in the session's zone with their own calendar date: an overnight session's
    # fill after midnight shows the next day's date
    fills = html_table("Fills", ("date", "time", "side", "qty", "price", "position", "realized", "order"),
                   ("date", "time", "side", "order"))
    for r in rep.days:
        for f in r.facts.fills:
            fills.add_row(r.date, local_time(f.ts, r.tz), f.side, qty(f.qty, rep.header.instrument), f"{f.price:.{r.decimals}f}",
                          qty(f.pos, rep.header.instrument), money(f.rpnl, rep.shown_decimals, sign=True), f.role)
    if fills.row_count:
        con.print(fills)
    else:
        con.print("No fills.")


def _trips(con: Console, rep: RunReport) -> None:
    carried = any(t.carried for r in rep.days for t in r.facts.trips)  # a column only when it says something
    trips = html_table("Round trips", ("date", "side", "qty", "entry", "entry price", "exit", "exit price",
                                   "pnl", "exit reason") + (("carried",) if carried else ()),
                   ("date", "side", "entry", "exit", "exit reason", "carried"))
    for r in rep.days:
        for t in r.facts.trips:
            row = [r.date, t.side, qty(t.qty, rep.header.instrument), local_time(t.entry_ts, r.tz), f"{t.entry_price:.{r.decimals}f}",
                   local_time(t.exit_ts, r.tz) if t.exit_ts is not None else "",
                   f"{t.exit_price:.{r.decimals}f}" if t.exit_price is not None else "",
                   money(t.pnl, rep.shown_decimals, sign=True), t.exit_reason]
            trips.add_row(*row, *((carried_label(t, r.open_ns),) if carried else ()))
    if trips.row_count:
        con.print(trips)


def _notices(con: Console, rep: RunReport) -> None:
    notes = html_table("Rejections and disarms", ("date", "time", "event", "plan", "reason"),
                   ("date", "time", "event", "plan", "reason"))
    for r in rep.days:
        for n in r.facts.notices:
            what = n.kind if n.rule is None else f"{n.kind} (rule {n.rule})"
            notes.add_row(r.date, local_time(n.ts, r.tz), what, n.plan, n.reason)
    if notes.row_count:
        con.print(notes)


def _pnl(con: Console, result: SessionResult, rep: RunReport) -> None:
    from kestrel.report.metrics import max_drawdown

    currencies = sorted({d.currency for d in result.days})
    carry = any(d.summary.carried_in or d.summary.carried_out for d in result.days)
    pnl = html_table(f"PnL ({', '.join(currencies)})", ("date", "trades", "wins", "realized", "fees", "net",
                                                     "max drawdown (marked)", "orders", "fills")
                 + (("carried",) if carry else ()), ("date", "carried"))
    dec = rep.shown_decimals
    for d, r in zip(result.days, rep.days):
        s = d.summary
        dd, _ = max_drawdown(r.curve.ts, r.curve.equity)
        carried = ", ".join(x for x in (f"carried in {qty(s.carried_in, rep.header.instrument)}" if s.carried_in else "",
                                        f"carried out {qty(s.carried_out, rep.header.instrument)}" if s.carried_out else "") if x)
        pnl.add_row(d.date, str(s.trades), str(s.wins), money(s.realized_pnl, dec, sign=True), money(s.fees, dec),
                    money(s.net_pnl, dec, sign=True), money(dd, dec), str(s.orders), str(s.fills),
                    *((carried,) if carry else ()))
    con.print(pnl)


def _summary_lines(con: Console, rep: RunReport) -> None:
    dec = rep.shown_decimals
    line = f"Equity {sparkline(rep.curve)}  {money(rep.metrics.net_pnl, dec, sign=True)} {rep.header.currency}"
    held = rep.curve.final - rep.curve.settled
    if len(rep.curve) and rep.curve.pos[-1] != 0:  # the run ends holding a position
        line += (f" (realized net {money(rep.curve.settled, dec, sign=True)}, open position "
                 f"{money(held, dec, sign=True)} unrealized)")
    con.print(line, markup=False)
    con.print("  ".join(f"{k} {v}" for k, v in metric_rows(rep.metrics, rep.days, dec)), markup=False)


__all__ = ["report", "summary"]


def describe(cfg: EngineConfig) -> dict[str, Any]:
    """The execution model and bounds, for the report and `--json`."""
    frictionless = not (cfg.latency_ns or cfg.latency_ticks or cfg.slippage_ticks
                        or cfg.fee_per_unit or cfg.fee_per_order)
    return {
        "frictionless": frictionless,
        "latency_ms": cfg.latency_ns / 1_000_000,
        "slippage_ticks": cfg.slippage_ticks,
        "fee_per_unit": cfg.fee_per_unit,
        "fee_per_order": cfg.fee_per_order,
        "maxpos": cfg.operator_maxpos,
        "maxloss": cfg.maxloss,
        "session_maxloss": cfg.session_maxloss,
        "end_of_day": cfg.end_of_day,
    }


def describe_line(cfg: EngineConfig) -> str:
    """One line: `Execution: frictionless ...` or the frictions (and `end of day: carry` when
    positions carry over), then the operator's bounds."""
    d = describe(cfg)
    if d["frictionless"]:
        model = "frictionless (no latency, slippage or fees: an optimistic fill model)"
    else:
        model = (f"latency {d['latency_ms']:g} ms, slippage {d['slippage_ticks']:g} ticks, "
                 f"fees {d['fee_per_unit']:g}/unit + {d['fee_per_order']:g}/order")
    session = "none" if d["session_maxloss"] is None else f"{d['session_maxloss']:g}"
    carry = "; end of day: carry (positions and their protective orders go into the next session)" \
        if d["end_of_day"] == "carry" else ""
    return (f"Execution: {model}{carry}. Operator bounds: maxpos {num(d['maxpos'])}, maxloss {d['maxloss']:g} "
            f"per plan, session maxloss {session} (a plan's RISK can only tighten them)")

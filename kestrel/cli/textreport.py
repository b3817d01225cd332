"""The readable report and the `--json` summary of a simulated run (terminal output only)."""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from typing import Any
from zoneinfo import ZoneInfo

def _turn_kind(turn: Any) -> str:
    from kestrel.session.protocol import StandDownTurn, Supersede

    if isinstance(turn, Supersede):
        return f"PLAN {turn.plan.name}"
    if isinstance(turn, StandDownTurn):
        return "STANDDOWN"
    return "PASS"


def _execution(result: Any) -> dict[str, Any]:
    from kestrel.cli.execution import describe
    from kestrel.engine.config import EngineConfig

    return describe(result.header.engine or EngineConfig())


def summary(result: Any) -> dict[str, Any]:
    """The machine-readable summary (`--json`): per day and in total."""
    days = []
    totals: Counter[str] = Counter()
    net = 0.0
    evidence: Counter[str] = Counter()
    ticks: Counter[str] = Counter(fast=0, reference=0)
    for d in result.days:
        s = d.summary
        days.append({
            "date": d.date,
            "partial": d.partial,
            "coverage": d.coverage,
            "currency": d.currency,
            "turns": [
                {"ordinal": o.ordinal, "turn": _turn_kind(o.turn), "armed": o.armed,
                 "iterations": o.iterations, "tokens": o.tokens_spent, "escalations": o.escalations}
                for o in d.outcomes
            ],
            "trades": s.trades, "wins": s.wins, "realized_pnl": round(s.realized_pnl, 6),
            "fees": round(s.fees, 6), "net_pnl": round(s.net_pnl, 6),
            "max_drawdown": round(s.max_drawdown, 6), "orders": s.orders, "fills": s.fills,
            "carried_in": s.carried_in, "carried_out": s.carried_out,
            "engine_ticks": dict(sorted(d.engine_ticks.items())),
        })
        totals.update(trades=s.trades, wins=s.wins, orders=s.orders, fills=s.fills)
        ticks.update(d.engine_ticks)
        net += s.net_pnl
        evidence.update(e.kind for e in d.evidence)
    currencies = sorted({d.currency for d in result.days})
    return {
        "data": result.header.data,
        "symbol": result.header.symbol,
        "currency": currencies[0] if len(currencies) == 1 else currencies,
        "agent": result.header.agent,
        "dates": list(result.header.dates),
        "schedule": list(result.header.schedule),
        "engine_path": result.engine_path,
        "engine_ticks": dict(sorted(ticks.items())),
        "execution": _execution(result),
        "days": days,
        "total": {**dict(sorted(totals.items())), "net_pnl": round(net, 6)},
        "evidence": dict(sorted(evidence.items())),
        "cost": _cost(result, latency=False),  # latencies are in the evidence: --json is deterministic
    }


def _cost(result: Any, *, latency: bool = True) -> dict[str, Any]:
    from kestrel.models.cost import run_cost

    return run_cost(result.header.agent, result.evidence, [o for d in result.days for o in d.outcomes],
                    latency=latency)


def _cost_section(con: Any, result: Any) -> None:
    """Model calls with their tokens, latency and dollars; per ordinal; for the run."""
    from rich.table import Table

    cost = _cost(result)
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


def report(result: Any, command: str = "simulate") -> None:
    """The readable report: turns per ordinal, armed plans, trades, PnL and evidence counts."""
    from rich.console import Console
    from rich.table import Table

    from kestrel import lang
    from kestrel.engine.ledger import Filled, PositionChanged
    from kestrel.session.protocol import StandDownTurn, Supersede

    con = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    h = result.header
    con.print(f"[bold]kestrel {command}[/bold]  {h.symbol}  data {h.data}  agent {h.agent}  "
              f"sessions {', '.join(h.dates)}  schedule {' '.join(h.schedule)}")
    for d in result.days:
        if d.partial:
            con.print(f"[bold]{d.coverage}[/bold]: the results cover only that span")
    turns = Table(title="Turns per ordinal", title_justify="left")
    for col in ("date", "ordinal", "turn", "armed", "iterations", "tokens"):
        turns.add_column(col, justify="right" if col in ("iterations", "tokens") else "left")
    plans: dict[str, str] = {}
    for d in result.days:
        for o in d.outcomes:
            kind = _turn_kind(o.turn)
            if isinstance(o.turn, StandDownTurn):
                kind += f": {o.turn.reason}"
            if isinstance(o.turn, Supersede):
                plans.setdefault(lang.format(o.turn.plan).rstrip("\n"), f"{d.date} {o.ordinal}")
            turns.add_row(d.date, o.ordinal, kind, o.armed, str(o.iterations), str(o.tokens_spent))
    con.print(turns)
    for text, where in plans.items():
        con.print(f"[bold]Armed plan[/bold] ({where}):")
        con.print(text, markup=False)
    trades = Table(title="Fills", title_justify="left")
    for col in ("date", "time", "side", "qty", "price", "position", "realized"):
        trades.add_column(col, justify="left" if col in ("date", "time", "side") else "right")
    for d in result.days:
        # the engine emits each fill's PositionChanged right after it (several fills may share
        # a tick), so a fill's position is the next event's
        events = d.ledger.events
        for k, e in enumerate(events):
            if not isinstance(e, Filled):
                continue
            nxt = events[k + 1] if k + 1 < len(events) else None
            p = nxt if isinstance(nxt, PositionChanged) else None
            clock = dt.datetime.fromtimestamp(e.ts // 10**9, ZoneInfo(d.tz)).strftime("%H:%M:%S")
            trades.add_row(d.date, clock, e.side, str(e.qty), f"{e.price:.{d.decimals}f}",
                           str(p.pos) if p else "", f"{p.rpnl:+.2f}" if p else "")
    if trades.row_count:
        con.print(trades)
    else:
        con.print("No fills.")
    currencies = sorted({d.currency for d in result.days})
    pnl = Table(title=f"PnL ({', '.join(currencies)})", title_justify="left")
    for col in ("date", "trades", "wins", "realized", "fees", "net", "max drawdown", "orders", "fills"):
        pnl.add_column(col, justify="left" if col == "date" else "right")
    for d in result.days:
        s = d.summary
        pnl.add_row(d.date, str(s.trades), str(s.wins), f"{s.realized_pnl:+.2f}", f"{s.fees:.2f}",
                    f"{s.net_pnl:+.2f}", f"{s.max_drawdown:.2f}", str(s.orders), str(s.fills))
    con.print(pnl)
    ticks: Counter[str] = Counter()
    for d in result.days:
        ticks.update(d.engine_ticks)
    con.print(f"Engine ({result.engine_path}): fast path {ticks['fast']} ticks, "
              f"reference path {ticks['reference']} ticks")
    from kestrel.cli.execution import describe_line
    from kestrel.engine.config import EngineConfig

    con.print(describe_line(result.header.engine or EngineConfig()), markup=False)
    _cost_section(con, result)
    counts = Counter(e.kind for e in result.evidence)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none (single-shot or first-reply turns)"
    con.print(f"Evidence records: {shown}")


__all__ = ["report", "summary"]

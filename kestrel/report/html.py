"""One self-contained HTML page per run (a sweep's leaderboard page: `kestrel.report.stats.board`).

Invariants: the page holds inline CSS and inline SVG only: no script, no external stylesheet,
image, font or link (it names no URL at all), so it reads offline and in a headless browser;
it holds no wall-clock time or random id, so the same run gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from kestrel.report.equity import EquityCurve
from kestrel.report.metrics import Metrics
from kestrel.report.run import BASELINES, RunReport
from kestrel.report.svg import ChartMark, Segment, clock_ticks, equity_chart, price_chart
from kestrel.report.text import instrument_line, money, plain, qty
from kestrel.report.trips import carried_label, local_time

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1d2430;max-width:960px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d8dde6}
h3{font-size:14px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #d8dde6;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f1f4f8}td.l,th.l{text-align:left}
pre{margin:0;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;text-align:left}
.meta td{text-align:left}.note{color:#5b6575;font-size:12px}.bad{color:#a4262c}.good{color:#1e7a3c}
svg.chart{display:block;margin:6px 0;background:#fff}
.plot{fill:#fbfcfe;stroke:#c9d0da}.grid{stroke:#e6e9ef}.zero{stroke:#9aa4b2;stroke-dasharray:3 3}
.yl{font-size:10px;text-anchor:end;fill:#5b6575}.xl{font-size:10px;text-anchor:middle;fill:#5b6575}
.eq{fill:none;stroke:#1f5fbf;stroke-width:1.5}.dd{fill:#d9534f;fill-opacity:.22;stroke:none}
.trough{fill:#d9534f}.px{fill:none;stroke:#44505f;stroke-width:1.2}
.fill.buy{fill:#1e7a3c}.fill.sell{fill:#a4262c}
.lv{stroke-width:1.4;stroke-dasharray:5 3}.lv.stop,.lv.trail{stroke:#a4262c}.lv.target{stroke:#1e7a3c}
""".strip()

# (field, label, format) in display order; "money"/"+money": at the run's money quantum
METRIC_ROWS: tuple[tuple[str, str, str], ...] = (
    ("net_pnl", "net PnL", "+money"),
    ("return_on_risk", "return on risk capital", "{:+.2%}"),
    ("risk_capital", "risk capital (maxloss)", "money"),
    ("sharpe", "Sharpe (annualized)", "{:.2f}"),
    ("sortino", "Sortino (annualized)", "{:.2f}"),
    ("max_drawdown", "max drawdown (marked per tick)", "money"),
    ("max_drawdown_ts", "max drawdown at", "time"),
    ("trades", "round trips", "{}"),
    ("win_rate", "win rate", "{:.0%}"),
    ("profit_factor", "profit factor", "{:.2f}"),
    ("avg_win", "average win", "+money"),
    ("avg_loss", "average loss", "+money"),
    ("exposure", "exposure (time in a position)", "{:.1%}"),
    ("turnover", "turnover", "money"),
    ("fees", "fees", "money"),
    ("orders", "orders", "{}"),
    ("fills", "fills", "{}"),
    ("rejections", "rejections", "{}"),
    ("disarms", "disarms", "{}"),
    ("tokens", "tokens", "{}"),
    ("cost_usd", "cost (USD)", "{:.4f}"),
)


def _fmt(value: Any, fmt: str, tz: str, decimals: int = 2) -> str:
    if value is None:
        return "n/a"
    if fmt == "time":
        return local_time(int(value), tz)
    if fmt in ("money", "+money"):
        return money(float(value), decimals, sign=fmt == "+money")
    return fmt.format(value)


def html_table(head: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = (0,),
           raw: Sequence[int] = ()) -> str:
    """A table; cells are escaped except columns in `raw` (already HTML)."""
    if not rows:
        return '<p class="note">none</p>'
    cls = ["l" if k in left else "" for k in range(len(head))]
    h = "".join(f'<th class="{c}">{escape(x)}</th>' if c else f"<th>{escape(x)}</th>" for c, x in zip(cls, head))
    body = []
    for r in rows:
        cells = []
        for k, x in enumerate(r):
            text = x if k in raw else escape(x)
            cells.append(f'<td class="{cls[k]}">{text}</td>' if cls[k] else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def _page(title: str, body: Sequence[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _clock(ts: int, tz: str) -> str:
    return dt.datetime.fromtimestamp(ts // 10**9, dt.timezone.utc).astimezone(ZoneInfo(tz)).strftime("%H:%M")


def _metrics_table(rep: RunReport, tz: str) -> str:
    cols: list[tuple[str, Metrics]] = [("this run", rep.metrics)] + [(k, rep.baselines[k]) for k in BASELINES
                                                                    if k in rep.baselines]
    rows = [[label] + [_fmt(_shown(m, field, name), fmt, tz, rep.shown_decimals) for name, m in cols]
            for field, label, fmt in METRIC_ROWS]
    note = (f'<p class="note">Metrics are defined in docs/report.md. Sharpe and Sortino use per-minute '
            f'returns of marked equity over the risk capital, annualized by sqrt({rep.metrics.periods_per_year}) '
            f'(252 sessions a year of {rep.metrics.periods_per_year // 252} minutes). Baselines: buy-and-hold buys at '
            'each session\'s first ask and sells at its last bid, in the run\'s largest position; flat never '
            f'trades; both without fees. Money in {escape(rep.header.currency)}.</p>')
    return html_table(["metric"] + [c for c, _ in cols], rows) + note


def _shown(m: Metrics, field: str, column: str) -> Any:
    """The value a metrics cell shows: None (n/a) for an average win or loss without a win or a
    loss, and for the plan counts (rejections, disarms) of a baseline, which has no plan."""
    if (field == "avg_win" and not m.wins) or (field == "avg_loss" and not m.losses):
        return None
    if column in BASELINES and field in ("rejections", "disarms"):
        return None
    return getattr(m, field)


def _equity(rep: RunReport) -> str:
    xs_parts, eq_parts, ticks = [], [], []
    offset = 0
    trough: tuple[float, float] | None = None
    dd_ts = rep.metrics.max_drawdown_ts
    for d, base in zip(rep.days, EquityCurve.offsets([d.curve for d in rep.days])):
        n = d.minute_equity.shape[0]
        xs_parts.append(np.arange(offset, offset + n, dtype=np.float64))
        eq_parts.append(d.minute_equity + base)
        label = d.date if len(rep.days) > 1 else _clock(d.open_ns, d.tz)
        ticks.append((float(offset), label))
        if dd_ts is not None and d.open_ns <= dd_ts <= d.close_ns and trough is None:
            k = int(np.searchsorted(d.curve.ts, dd_ts, side="right")) - 1
            m = int(np.searchsorted(d.minute_ts, dd_ts, side="left"))
            trough = (float(offset + min(m, n - 1)), float(d.curve.equity[max(k, 0)] + base))
        offset += n
    xs = np.concatenate(xs_parts) if xs_parts else np.zeros(0)
    eq = np.concatenate(eq_parts) if eq_parts else np.zeros(0)
    if len(rep.days) == 1:  # on the price chart's x scale (time), with its time labels
        d = rep.days[0]
        ticks = clock_ticks(d.open_ns, d.close_ns, d.tz)
        if trough is not None:
            trough = (float(d.minute_ts[int(trough[0])]), trough[1])
        xs = np.concatenate(([float(d.open_ns)], d.minute_ts.astype(np.float64)))
        eq = np.concatenate(([0.0], eq))
    return equity_chart(xs, eq, ticks, trough)


def _day(rep: RunReport, k: int) -> list[str]:
    d = rep.days[k]
    tz, dec, mdec = d.tz, d.decimals, rep.shown_decimals
    out = [f"<h2>Session {escape(d.date)} <span class=\"note\">({escape(tz)})</span></h2>"]
    if d.note:
        out.append(f'<p class="bad">{escape(d.note)}: the results cover only that span.</p>')
    xs = d.minute_ts.astype(np.float64)
    n = xs.shape[0]
    ticks = clock_ticks(d.open_ns, d.close_ns, tz)
    fills = [ChartMark(float(f.ts), f.price, f.side, f"{f.side} {qty(f.qty, rep.header.instrument)} @ {f.price:.{dec}f} ({f.role}) "
                  f"{local_time(f.ts, tz)}") for f in d.facts.fills]
    levels = [Segment(float(lv.start_ts), float(lv.end_ts if lv.end_ts is not None else d.close_ns), lv.price,
                      lv.role, f"{lv.role} {lv.price:.{dec}f}") for lv in d.facts.levels]
    out.append("<h3>Price (mid per minute) with fills and stop/target levels</h3>")
    out.append(price_chart(np.concatenate(([float(d.open_ns)], xs)),
                           np.concatenate(([d.minute_mid[0] if n else np.nan], d.minute_mid)),
                           ticks, fills, levels))
    out.append("<h3>Turns per ordinal</h3>")
    rows = []
    for t in d.turns:
        plan = f"<pre>{escape(t.plan_text)}</pre>" if t.plan_text else ""
        rows.append([t.ordinal, t.kind + (f" {t.plan}" if t.plan else ""), plan, t.reason or "",
                     _opt(t.iterations), _opt(t.tokens), _opt(t.cost_usd, "{:.4f}"),
                     "; ".join(x for x in (t.armed, t.fate) if x)])
    out.append(html_table(["ordinal", "turn", "plan", "stand-down reason", "iterations", "tokens", "cost (USD)",
                       "outcome"], rows, left=(0, 1, 2, 3, 7), raw=(2,)))
    out.append("<h3>Round trips</h3>")
    carried = any(t.carried for day in rep.days for t in day.facts.trips)  # a column only for carry runs
    out.append(html_table(["side", "qty", "entry", "entry price", "exit", "exit price", "pnl", "fees", "exit reason"]
                      + (["carried"] if carried else []),
                      [[t.side, qty(t.qty, rep.header.instrument), local_time(t.entry_ts, tz), f"{t.entry_price:.{dec}f}",
                        local_time(t.exit_ts, tz) if t.exit_ts is not None else "",
                        f"{t.exit_price:.{dec}f}" if t.exit_price is not None else "",
                        money(t.pnl, mdec, sign=True), money(t.fees, mdec), t.exit_reason]
                       + ([carried_label(t, d.open_ns)] if carried else []) for t in d.facts.trips],
                      left=(0, 2, 4, 8, 9)))
    out.append("<h3>Rejections and disarms</h3>")
    out.append(html_table(["time", "event", "plan", "rule", "reason"],
                      [[local_time(x.ts, tz), x.kind, x.plan, "" if x.rule is None else str(x.rule), x.reason]
                       for x in d.facts.notices], left=(0, 1, 2, 4)))
    out.append("<h3>Fills</h3>")
    out.append(html_table(["time", "order", "side", "qty", "price", "fee", "position", "realized"],
                      [[local_time(f.ts, tz), f.role, f.side, qty(f.qty, rep.header.instrument), f"{f.price:.{dec}f}", money(f.fee, mdec),
                        qty(f.pos, rep.header.instrument), money(f.rpnl, mdec, sign=True)] for f in d.facts.fills], left=(0, 1, 2)))
    return out


def _opt(x: float | int | None, fmt: str = "{}") -> str:
    return "" if x is None else fmt.format(x)


def render_run(rep: RunReport) -> str:
    """The run's page (see the module docstring)."""
    h = rep.header
    tz = rep.days[0].tz if rep.days else "UTC"
    meta = [["symbol", h.symbol], ["agent", h.agent], ["model", h.model or "-"],
            ["sessions", ", ".join(h.dates)], ["schedule", " ".join(h.schedule)],
            ["data", h.data], ["data SHA-256", h.data_sha256 or "unknown"],
            ["currency / multiplier", f"{h.currency} / {plain(h.multiplier)}"]]
    body = [f"<h1>Kestrel run: {escape(h.agent)} on {escape(h.symbol)}</h1>",
            html_table(["", ""], meta, left=(0, 1)).replace("<table>", '<table class="meta">', 1),
            "<h2>Metrics</h2>", _metrics_table(rep, tz),
            "<h2>Equity marked to market (per minute), drawdown shaded</h2>", _equity(rep)]
    for k in range(len(rep.days)):
        body += _day(rep, k)
    body.append("<h2>Data source</h2>")
    inst = "" if h.instrument is None else f"<br>instrument {escape(instrument_line(h.instrument))}"
    body.append(f"<p>{escape(h.data)}<br>SHA-256 <code>{escape(h.data_sha256 or 'unknown')}</code>{inst}</p>")
    return _page(f"Kestrel run {h.agent} {h.symbol} {' '.join(h.dates)}", body)


__all__ = ["CSS", "render_run"]

"""A portfolio run's report as terminal lines and as one self-contained HTML page (inline CSS
and SVG, no script, no URL, no clock: the same report gives the same bytes).

The page: the headline figures against the reference portfolios (equal-weight buy-and-hold,
cash), equity over the capital with the drawdown from the running peak shaded, gross and net
exposure over time, per-symbol attribution, per-session lines and the account check.
"""

from __future__ import annotations

from html import escape

import numpy as np

from kestrel.report.html import CSS, html_table
from kestrel.report.portfolio import Figures, PortfolioReport, sampled
from kestrel.report.svg import equity_chart, exposure_chart
from kestrel.report.text import money
from kestrel.report.trips import local_time


PORTFOLIO_CSS = ".gross{fill:none;stroke:#7a4fbf;stroke-width:1.5}.netx{fill:none;stroke:#bf7a1f;stroke-width:1.3;" \
                "stroke-dasharray:4 2}"


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}\n{PORTFOLIO_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _when(rep: PortfolioReport, ts: int | None) -> str:
    if ts is None:
        return "n/a"
    tz = rep.ticks.sessions[0].tz if rep.ticks.sessions else "UTC"
    return local_time(ts, tz)


def _figure_rows(rep: PortfolioReport) -> list[tuple[str, list[str]]]:
    d = rep.shown_decimals
    cols: list[Figures] = [rep.figures] + [f for f, _ in rep.references.values()]
    return [
        ("final equity", [money(f.final_equity, d) for f in cols]),
        ("net PnL", [money(f.net_pnl, d, sign=True) for f in cols]),
        ("return on capital", [f"{f.return_on_capital:+.2%}" for f in cols]),
        ("max drawdown (marked per tick)", [money(f.max_drawdown, d) for f in cols]),
        ("max drawdown at", [_when(rep, f.max_drawdown_ts) for f in cols]),
        ("peak gross exposure", [money(f.peak_gross, d) for f in cols]),
        ("peak gross / equity", [f"{f.peak_gross_share:.2f}x" for f in cols]),
    ]


def portfolio_text(rep: PortfolioReport) -> list[str]:
    """The report as terminal lines: the headline figures (this run, then each reference
    portfolio), per-symbol attribution, per-session lines and the account check."""
    d = rep.shown_decimals
    f = rep.figures
    sessions = rep.ticks.sessions
    span = f"{sessions[0].date} .. {sessions[-1].date}" if sessions else "no sessions"
    out = [f"Portfolio: {len(rep.symbols)} symbols over {len(sessions)} sessions ({span}), capital "
           f"{money(rep.capital, d)} {rep.currency}",
           f"net PnL {money(f.net_pnl, d, sign=True)} ({f.return_on_capital:+.2%}), final equity {money(f.final_equity, d)}, "
           f"max drawdown {money(f.max_drawdown, d)} at {_when(rep, f.max_drawdown_ts)}, peak gross "
           f"{money(f.peak_gross, d)} ({f.peak_gross_share:.2f}x equity); {rep.fills} fills, {rep.rejections} rejections"]
    for name, (g, _) in rep.references.items():
        out.append(f"  {name}: net PnL {money(g.net_pnl, d, sign=True)} ({g.return_on_capital:+.2%}), max drawdown "
                   f"{money(g.max_drawdown, d)}")
    out.append("")
    out.append(f"{'symbol':<8} {'PnL':>12} {'trades':>6} {'fills':>5} {'fees':>9} {'position':>10} {'in market':>9} "
               f"{'exposure':>8}")
    for a in rep.attribution:
        out.append(f"{a.symbol:<8} {money(a.pnl, d, sign=True):>12} {a.trades:>6} {a.fills:>5} {money(a.fees, d):>9} "
                   f"{a.final_position:>10g} {a.time_in_market:>9.1%} {a.mean_exposure:>8.1%}")
    out.append("")
    out.append(f"{'session':<10} {'equity':>12} {'PnL':>11} {'gross':>12} {'net':>12} {'open':>4} {'drawdown':>10}")
    for s in rep.sessions:
        out.append(f"{s.date:<10} {money(s.equity, d):>12} {money(s.pnl, d, sign=True):>11} {money(s.gross, d):>12} "
                   f"{money(s.net, d, sign=True):>12} {s.open_positions:>4} {money(s.max_drawdown, d):>10}")
    if rep.account_lines:
        out.append("")
        out.append(f"account check: {rep.account_lines - rep.account_mismatches} of {rep.account_lines} account lines "
                   "agree with the marked account" + (f"; first mismatch: {rep.first_mismatch}"
                                                      if rep.first_mismatch else ""))
    return out


def render_portfolio(rep: PortfolioReport, title: str = "Kestrel portfolio run") -> str:
    """The report as one self-contained HTML page (module docstring)."""
    d = rep.shown_decimals
    sessions = rep.ticks.sessions
    xs, eq, gross, net, labels = sampled(rep)
    pnl = eq - rep.capital
    trough = None
    if rep.figures.max_drawdown_ts is not None and xs.size:
        c = rep.curve
        k = int(np.searchsorted(c.ts, rep.figures.max_drawdown_ts, side="left"))
        low = float(c.equity[min(k, len(c) - 1)]) - rep.capital
        trough = (float(xs[int(np.argmin(np.abs(pnl - low)))]), low)
    head = ["", "this run"] + list(rep.references)
    figures = html_table(head, [[label] + cells for label, cells in _figure_rows(rep)])
    attribution = html_table(
        ["symbol", "PnL", "trades", "fills", "fees", "dividends", "turnover", "final position", "time in market",
         "mean exposure", "rejections"],
        [[a.symbol, money(a.pnl, d, sign=True), str(a.trades), str(a.fills), money(a.fees, d), money(a.dividends, d),
          money(a.turnover, d), f"{a.final_position:g}", f"{a.time_in_market:.1%}", f"{a.mean_exposure:.1%}",
          str(a.rejections)] for a in rep.attribution])
    per_session = html_table(
        ["session", "equity", "PnL", "gross", "net", "open", "max drawdown"],
        [[s.date, money(s.equity, d), money(s.pnl, d, sign=True), money(s.gross, d), money(s.net, d, sign=True),
          str(s.open_positions), money(s.max_drawdown, d)] for s in rep.sessions])
    span = f"{sessions[0].date} .. {sessions[-1].date}" if sessions else "no sessions"
    check = (f'<p class="note">Account check: {rep.account_lines - rep.account_mismatches} of {rep.account_lines} '
             f'account lines of the ledger agree with the marked account.'
             + (f' <span class="bad">First mismatch: {escape(rep.first_mismatch)}</span>' if rep.first_mismatch else "")
             + "</p>") if rep.account_lines else ""
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="note">{len(rep.symbols)} symbols ({escape(", ".join(rep.symbols))}) over {len(sessions)} sessions '
        f'({escape(span)}); capital {money(rep.capital, d)} {escape(rep.currency)}; {len(rep.ticks)} merged ticks.</p>',
        "<h2>Figures</h2>", figures,
        '<p class="note">Marked at every tick of every symbol (bid for a long, ask for a short). Equal-weight '
        "buy-and-hold splits the capital equally across the symbols, each bought in whole lots at its first open "
        "of the run and held; cash never trades. Both without fees. Definitions in docs/report.md.</p>",
        "<h2>Equity over the capital</h2>", equity_chart(xs, pnl, labels, trough),
        "<h2>Exposure</h2>", '<p class="note">gross (solid) and net (dashed), in money</p>',
        exposure_chart(xs, gross, net, labels),
        "<h2>Attribution</h2>", attribution,
        "<h2>Sessions</h2>", per_session, check,
    ]
    return _page(title, [b for b in body if b])


__all__ = ["portfolio_text", "render_portfolio"]

"""A sweep's leaderboard: one line per cell (agent x model x profile) with the statistics of
docs/report.md ("Statistics") computed from the per-session records of its finished runs, the
reference agents (buy-and-hold, flat: from the data alone, the same whichever agents a sweep
holds), one verdict per paired comparison, the deflated Sharpe of the best cell, the warnings,
and every failed run with its reason: as terminal lines, a page, `--json` and tables.

Rules (also in docs/report.md, "The leaderboard"):
- a failed run (its agent could not work, or the run broke) ranks nowhere: its cell is listed
  after the ranked ones, unranked, with `k of n` runs failed, its figures over its finished
  runs only, and it takes part in no comparison (a cell cannot climb by failing);
- the ranked cells are those whose runs all finished, in the statistics' order (mean net PnL
  per session, best first), the reference agents among them;
- `net of model cost` is the mean per-session net PnL minus the mean per-session model
  dollars, in the PnL's currency: dollars subtract as they are from USD PnL, are converted at a
  rate the caller gives (stated on the board) for another currency, and are refused (n/a, with
  the reason) without one;
- a cell with a run on data before its model's training cutoff is labelled "in-sample for
  MODEL" (`kestrel.models.cutoff`), one whose model's cutoff is unknown "cutoff unknown".

Invariants: pure; the same rows and records give the same bytes; the page is the run page's
kind (inline CSS and SVG, no script, no URL); every figure shown is one `GridStats` holds or a
count of the rows.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import msgspec

from kestrel.report.html import CSS
from kestrel.report.stats import (
    DEFAULT_BASELINES,
    DEFAULT_SEED,
    CellStats,
    Comparison,
    GridStats,
    SessionRecord,
    Estimate,
    grid_stats,
)

Row = Mapping[str, Any]

BOARD_CSS = """
.board,.runs{width:100%}.runs,.board{font-size:12px}.runs td,.runs th,.board td,.board th{padding:2px 5px}
td.n,.nw{white-space:nowrap}td.w{overflow-wrap:break-word}.runs code{font-size:11px}
tr.base td{background:#f7f8fa;font-style:italic}tr.failed td{background:#fdf1f1}.warn{color:#a4262c;font-weight:600}
ul.verdicts{font-size:13px}ul.verdicts li.better{color:#0b6a0b}ul.verdicts li.worse{color:#a4262c}
svg.forest text{font:11px sans-serif;fill:#333}svg.forest .ci{stroke:#1f5fa8;stroke-width:2}
svg.forest .mean{fill:#1f5fa8}svg.forest .base .mean{fill:#777}svg.forest .base .ci{stroke:#777}
svg.forest .zero{stroke:#999;stroke-dasharray:3 3}svg.forest .ax{stroke:#ccc}
""".strip()


class CellLine(msgspec.Struct, frozen=True):
    """One line of the board: a cell's statistics and what the rows add (runs, failures,
    leakage, net of model cost)."""

    stats: CellStats
    ranked: bool
    runs: int
    failed: int
    net_of_cost: float | None
    net_of_cost_note: str | None
    leakage: str | None  # "in-sample for MODEL", "cutoff unknown for MODEL", or None

    @property
    def rank(self) -> int | None:
        return self.stats.rank if self.ranked else None


def _key(agent: Any, profile: Any) -> tuple[str, str]:
    return (str(agent), str(profile))


def _leakage(rows: Sequence[Row]) -> str | None:
    notes = [r for r in rows if r.get("leakage") in ("in-sample", "unknown")]
    inside = next((r for r in notes if r.get("leakage") == "in-sample"), None)
    if inside is not None:
        return f"in-sample for {inside.get('model')}"
    return f"cutoff unknown for {notes[0].get('model')}" if notes else None


def _net_of_cost(c: CellStats, rates: Mapping[str, float]) -> tuple[float | None, str | None]:
    if not c.sessions:
        return None, None
    if c.cost_usd is None and c.cell.model is not None:
        return None, "n/a: the model is not priced"
    per_session_usd = (c.cost_usd or 0.0) / max(c.records, 1)  # an agent without a model spends nothing
    if c.currency == "USD" or per_session_usd == 0.0:
        return round(c.net_pnl.mean - per_session_usd, 9), None
    rate = rates.get(c.currency)
    if rate is None:
        return None, (f"refused: the PnL is in {c.currency}, the model's cost in USD; give a rate "
                      f"(--usd-rate {c.currency}=RATE) to convert")
    return (round(c.net_pnl.mean - per_session_usd / rate, 9),
            f"cost converted at 1 {c.currency} = {rate:g} USD (given)")


class Board:
    """The leaderboard of `rows` (one per run, `kestrel.sweep.results.COLUMNS`) and `records`
    (the finished runs' per-session records and the reference agents')."""

    def __init__(self, rows: Sequence[Row], records: Sequence[SessionRecord], *,
                 usd_rates: Mapping[str, float] | None = None, seed: int = DEFAULT_SEED,
                 baselines: Sequence[str] = DEFAULT_BASELINES) -> None:
        self.rows = list(rows)
        self.usd_rates = dict(usd_rates or {})
        by_cell: dict[tuple[str, str], list[Row]] = {}
        for r in self.rows:
            by_cell.setdefault(_key(r.get("agent"), r.get("profile")), []).append(r)
        broken = {k for k, rs in by_cell.items() if any(r.get("error") for r in rs)}
        complete = [r for r in records if _key(r.agent, r.profile) not in broken]
        partial = [r for r in records if _key(r.agent, r.profile) in broken]
        self.stats: GridStats = grid_stats(complete, seed=seed, baselines=baselines)
        # cells with a failed run: their figures alone (each cell's interval is seeded by its name,
        # so it is the one it would have in any grid), compared with nothing
        extra = grid_stats(partial, seed=seed, baselines=baselines).cells if partial else ()
        lines: list[CellLine] = []
        for c, ranked in [(c, True) for c in self.stats.cells] + [(c, False) for c in extra]:
            rs = by_cell.get(_key(c.cell.agent, c.cell.profile), [])
            net, note = _net_of_cost(c, self.usd_rates)
            lines.append(CellLine(c, ranked, len(rs), sum(1 for r in rs if r.get("error")), net, note,
                                  _leakage([r for r in rs if not r.get("error")])))
        shown = {_key(ln.stats.cell.agent, ln.stats.cell.profile) for ln in lines}
        for k in sorted(broken - shown):  # every run of the cell failed: no figure at all
            rs = by_cell[k]
            lines.append(CellLine(_empty(k, rs), False, len(rs), len(rs), None, None, None))
        self.lines = lines
        self.failed = [r for r in self.rows if r.get("error")]
        self.warnings = self._warnings()

    def _warnings(self) -> list[str]:
        out: list[str] = []
        few = [ln for ln in self.lines if ln.stats.sessions and ln.stats.few_sessions]
        if few:
            out.append(f"{len(few)} cell{'s' if len(few) != 1 else ''} with fewer than {self.stats.min_sessions} "
                       "sessions: their intervals mean little (docs/report.md, Statistics)")
        if self.failed:
            cells = sum(1 for ln in self.lines if ln.failed)
            out.append(f"{len(self.failed)} of {len(self.rows)} runs failed, in {cells} cell{'s' if cells != 1 else ''}: "
                       "those cells rank nowhere and take part in no comparison; their runs are listed with the reason")
        inside = [ln for ln in self.lines if ln.leakage and ln.leakage.startswith("in-sample")]
        if inside:
            out.append(f"{len(inside)} cell{'s' if len(inside) != 1 else ''} ran on data from before the model's "
                       "training cutoff (in-sample): their results may reflect memory, not skill")
        return out

    # -- output -----------------------------------------------------------------------------

    def json(self) -> dict[str, Any]:
        """The board for `--json`: cells (with `rank` None for unranked ones), comparisons with
        their verdicts, the deflated Sharpe, the warnings and the failed runs' reasons."""
        cells = []
        for ln in self.lines:
            d: dict[str, Any] = msgspec.to_builtins(ln.stats)
            d.update(rank=ln.rank, ranked=ln.ranked, runs=ln.runs, failed=ln.failed, net_of_cost=ln.net_of_cost,
                     net_of_cost_note=ln.net_of_cost_note, leakage=ln.leakage)
            cells.append(d)
        s = self.stats
        return {"cells": cells, "comparisons": msgspec.to_builtins(list(s.comparisons)),
                "deflated_sharpe": msgspec.to_builtins(s.deflated), "warnings": self.warnings,
                "failed_runs": [{"key": r.get("key"), "agent": r.get("agent"), "profile": r.get("profile"),
                                 "dates": r.get("dates"), "failure": r.get("failure"), "error": r.get("error")}
                                for r in self.failed],
                "seed": s.seed, "draws": s.draws, "level": s.level, "alpha": s.alpha, "min_sessions": s.min_sessions,
                "usd_rates": self.usd_rates}

    def text_lines(self) -> list[str]:
        """The board as aligned terminal lines: the cells, then the verdicts, the deflated
        Sharpe, the warnings and the failed runs."""
        cols = _columns(self.stats.level)
        lines = _aligned([h for h, _ in cols], [[f(ln) for _, f in cols] for ln in self.lines])
        tested = sum(1 for c in self.stats.comparisons if c.p_holm is not None)
        if self.stats.comparisons:
            lines += ["", f"Paired comparisons (net PnL per session; p: Wilcoxon signed-rank, Holm-adjusted over "
                          f"{tested} comparison{'s' if tested != 1 else ''}):"]
            lines += [f"  {c.verdict}" for c in self.stats.comparisons]
        d = self.stats.deflated
        if d is not None:
            prob = "n/a" if d.probability is None else f"{d.probability:.2f}"
            lines += ["", f"Deflated Sharpe of the best cell, {d.cell.label} (Sharpe {d.sharpe:.2f}): {prob} "
                          f"(the probability its true Sharpe beats the best of {d.trials} unskilled trials)"]
        notes = sorted({ln.net_of_cost_note for ln in self.lines if ln.net_of_cost_note and ln.net_of_cost_note[0] != "n"})
        lines += [f"Net of model cost: {n}" for n in notes]
        if self.warnings:
            lines += [""] + [f"Warning: {w}." for w in self.warnings]
        for r in self.failed:
            lines.append(f"  failed {r.get('key')} ({r.get('agent')}, {r.get('profile')}, {r.get('dates')}): "
                         f"{r.get('error')}")
        return lines

    def tables(self) -> dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]]:
        """`cells`, `comparisons` and `sessions` as (columns, rows) for CSV and Parquet."""
        cells = []
        for ln in self.lines:
            c = ln.stats
            cells.append({"rank": ln.rank, "agent": c.cell.agent, "model": c.cell.model, "profile": c.cell.profile,
                          "baseline": c.baseline, "runs": ln.runs, "failed": ln.failed, "sessions": c.sessions,
                          "records": c.records, "repeats": c.repeats, "currency": c.currency,
                          **_summary("net_pnl", c.net_pnl), **_summary("return_on_risk", c.return_on_risk),
                          "repeat_sd": c.repeat_sd, "sharpe": c.sharpe, "sortino": c.sortino,
                          "win_rate": c.win_rate, "trades": c.trades, "fees": c.fees, "tokens": c.tokens,
                          "cost_usd": c.cost_usd, "net_of_cost": ln.net_of_cost, "leakage": ln.leakage,
                          "few_sessions": c.few_sessions})
        comps = [{"agent": c.cell.agent, "model": c.cell.model, "profile": c.cell.profile,
                  "other_agent": c.other.agent, "other_model": c.other.model, "other_profile": c.other.profile,
                  "against": c.against, "sessions": c.sessions, "unpaired": c.unpaired,
                  "mean_difference": c.mean_difference, "low": c.low, "high": c.high, "block_length": c.block_length,
                  "p_value": c.p_value, "p_holm": c.p_holm, "evidence": c.evidence, "verdict": c.verdict}
                 for c in self.stats.comparisons]
        return {"cells": (CELL_COLUMNS, cells), "comparisons": (COMPARISON_COLUMNS, comps)}

    def html(self, title: str = "Kestrel sweep") -> str:
        """The sweep's page (see the module docstring)."""
        cols = _columns(self.stats.level)
        kinds = ["l" if h in ("agent", "model", "profile", "note") else "n" for h, _ in cols]
        head = _tr([escape(h) for h, _ in cols], kinds, tag="th")
        body = [_tr([escape(f(ln)) for _, f in cols], kinds,
                    "base" if ln.stats.baseline else "failed" if ln.failed else "") for ln in self.lines]
        verdicts = "".join(f'<li class="{c.evidence}">{escape(c.verdict)}</li>' for c in self.stats.comparisons)
        d = self.stats.deflated
        deflated = "" if d is None else (
            f'<p>Deflated Sharpe of the best cell, {escape(d.cell.label)} (Sharpe {d.sharpe:.2f}): '
            f'{"n/a" if d.probability is None else f"{d.probability:.2f}"}, the probability that its true Sharpe beats '
            f'the best of {d.trials} unskilled trials.</p>')
        warn = "".join(f'<p class="warn">{escape(w)}.</p>' for w in self.warnings)
        rule = ('<p class="note">Per-session statistics (docs/report.md, "Statistics"): the mean of each cell\'s '
                'net PnL per session with its 95% stationary-bootstrap interval, Sharpe and Sortino of its pooled '
                'per-minute returns, paired Wilcoxon tests Holm-adjusted across the grid. Ranked: cells whose runs all '
                'finished, by mean net PnL per session; a cell with a failed run is listed unranked and compared with '
                'nothing. Reference lines (italic): buy-and-hold holds the execution model\'s maxpos through each '
                'session without fees; flat never trades; both are computed from the data alone.</p>')
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{escape(title)}</title><style>{CSS}\n{BOARD_CSS}</style></head><body>\n"
                + "\n".join(x for x in [
                    f"<h1>{escape(title)}: leaderboard</h1>",
                    f'<p class="note">{len(self.rows)} runs, {len(self.lines)} cells (agent x model x profile).</p>',
                    warn, f'<table class="board">{head}{"".join(body)}</table>', rule,
                    forest(self.lines, self.stats.level),
                    f"<h2>Paired comparisons</h2><ul class=\"verdicts\">{verdicts}</ul>" if verdicts else "",
                    deflated, *self._notes_html(), "<h2>Runs</h2>", runs_table(self.rows)] if x)
                + "\n</body></html>\n")

    def _notes_html(self) -> list[str]:
        notes = sorted({ln.net_of_cost_note for ln in self.lines if ln.net_of_cost_note and ln.net_of_cost_note[0] != "n"})
        return [f'<p class="note">Net of model cost: {escape(n)}.</p>' for n in notes]


def _empty(key: tuple[str, str], rows: Sequence[Row]) -> CellStats:
    """A cell none of whose runs finished (no figure)."""
    from kestrel.report.stats import CellKey

    none = Estimate(0.0, None, None, None, None, 0)
    model = next((r.get("model") for r in rows if r.get("model")), None)
    return CellStats(CellKey(key[0], key[1], model), 0, False, 0, 0, 0, str(rows[0].get("currency") or "USD"),
                     none, none, None, None, None, 0, 0, None, 0, 0, 0.0, None, None, False)


def _summary(name: str, s: Estimate) -> dict[str, Any]:
    return {f"{name}_mean": s.mean if s.sessions else None, f"{name}_sd": s.sd, f"{name}_low": s.low,
            f"{name}_high": s.high}


CELL_COLUMNS = ("rank", "agent", "model", "profile", "baseline", "runs", "failed", "sessions", "records", "repeats",
                "currency", "net_pnl_mean", "net_pnl_sd", "net_pnl_low", "net_pnl_high", "return_on_risk_mean",
                "return_on_risk_sd", "return_on_risk_low", "return_on_risk_high", "repeat_sd", "sharpe", "sortino",
                "win_rate", "trades", "fees", "tokens", "cost_usd", "net_of_cost", "leakage", "few_sessions")
COMPARISON_COLUMNS = ("agent", "model", "profile", "other_agent", "other_model", "other_profile", "against",
                      "sessions", "unpaired", "mean_difference", "low", "high", "block_length", "p_value", "p_holm",
                      "evidence", "verdict")
SESSION_COLUMNS = ("agent", "model", "profile", "data", "date", "repeat", "net_pnl", "return_on_risk", "trades",
                   "wins", "fees", "tokens", "cost_usd", "currency", "periods", "returns_mean", "returns_m2",
                   "returns_m3", "returns_m4", "returns_downside")


def session_rows(records: Sequence[SessionRecord]) -> list[dict[str, Any]]:
    """The per-session records as flat rows (`sessions.csv`): what anyone's own bootstrap reads."""
    return [{"agent": r.agent, "model": r.model, "profile": r.profile, "data": r.data, "date": r.date,
             "repeat": r.repeat, "net_pnl": r.net_pnl, "return_on_risk": r.return_on_risk, "trades": r.trades,
             "wins": r.wins, "fees": r.fees, "tokens": r.tokens, "cost_usd": r.cost_usd, "currency": r.currency,
             "periods": r.returns.count, "returns_mean": r.returns.mean, "returns_m2": r.returns.m2,
             "returns_m3": r.returns.m3, "returns_m4": r.returns.m4, "returns_downside": r.returns.downside}
            for r in sorted(records, key=lambda r: (r.agent, r.model or "", r.profile, r.data, r.date, r.repeat))]


def to_csv(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
    return buf.getvalue().encode()


# ------------------------------------------------------------------------------------------
# formatting


def _na(fmt: str) -> Callable[[Any], str]:
    return lambda x: "n/a" if x is None else fmt.format(x)


_money = _na("{:+.2f}")
_ratio = _na("{:.2f}")


def _with_interval(s: Estimate, fmt: Callable[[Any], str]) -> str:
    if not s.sessions:
        return "n/a"
    if s.low is None or s.high is None:
        return fmt(s.mean)
    return f"{fmt(s.mean)} [{fmt(s.low)}, {fmt(s.high)}]"


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x:+.2%}"


def _note(ln: CellLine) -> str:
    notes = ["baseline"] if ln.stats.baseline else []
    if ln.failed:
        notes.append("unranked: failed runs")
    elif ln.stats.few_sessions:
        notes.append("few sessions")
    if ln.leakage:
        notes.append(ln.leakage)
    return ", ".join(notes)


def _columns(level: float) -> tuple[tuple[str, Callable[[CellLine], str]], ...]:
    ci = f"{level:.0%} CI"
    return (
        ("#", lambda ln: "-" if ln.rank is None else str(ln.rank)),
        ("agent", lambda ln: short_agent(ln.stats.cell.agent)),
        ("model", lambda ln: ln.stats.cell.model or "-"),
        ("profile", lambda ln: ln.stats.cell.profile),
        ("runs", lambda ln: str(ln.runs) if ln.runs else "-"),
        ("failed", lambda ln: f"{ln.failed} of {ln.runs}" if ln.failed else "0"),
        ("sessions", lambda ln: str(ln.stats.sessions)),
        ("repeats", lambda ln: str(ln.stats.repeats)),
        (f"net PnL per session, mean [{ci}]", lambda ln: _with_interval(ln.stats.net_pnl, _money)
         + (f" {ln.stats.currency}" if ln.stats.sessions else "")),
        ("sd", lambda ln: _ratio(ln.stats.net_pnl.sd)),
        (f"return on risk [{ci}]", lambda ln: _with_interval(ln.stats.return_on_risk, _pct)),
        ("Sharpe", lambda ln: _ratio(ln.stats.sharpe)),
        ("Sortino", lambda ln: _ratio(ln.stats.sortino)),
        ("win rate", lambda ln: "n/a" if ln.stats.win_rate is None else f"{ln.stats.win_rate:.0%}"),
        ("trades", lambda ln: str(ln.stats.trades)),
        ("fees", lambda ln: f"{ln.stats.fees:.2f}"),
        ("tokens", lambda ln: _na("{}")(ln.stats.tokens)),
        ("cost (USD)", lambda ln: _na("{:.4f}")(ln.stats.cost_usd)),
        ("net of model cost per session", lambda ln: _money(ln.net_of_cost) if ln.net_of_cost is not None
         else ("n/a" if ln.net_of_cost_note is None or not ln.stats.sessions else
               "refused" if ln.net_of_cost_note.startswith("refused") else "n/a")),
        ("note", _note),
    )


def _aligned(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *rows]]


def _tr(cells: Sequence[str], kinds: Sequence[str], cls: str = "", tag: str = "td") -> str:
    """One table row; `kinds` per cell: "n" numeric (right, no wrap), "l" text, "w" text that
    may break anywhere (paths, checksums, errors)."""
    row = "".join(f'<{tag} class="{"l w" if k == "w" else k}">{c}</{tag}>' if tag == "td" or k != "n"
                  else f"<{tag}>{c}</{tag}>" for c, k in zip(cells, kinds))
    return f'<tr class="{cls}">{row}</tr>' if cls else f"<tr>{row}</tr>"


def breakable(text: str) -> str:
    """`text` escaped, with a line-break opportunity after each `_ / | . , @` (long names wrap
    at their separators instead of widening the table)."""
    out = escape(text)
    for ch in "_/|.,@":
        out = out.replace(ch, ch + "<wbr>")
    return out


def short_agent(agent: str) -> str:
    """An agent with a file (`fixed:/a/b/orb.kes`) shown by the file's name (`fixed:orb.kes`)."""
    kind, sep, arg = agent.partition(":")
    if sep and "/" in arg and not arg.startswith(("http", "/" + "/")) and "@http" not in arg:
        return f"{kind}{sep}{Path(arg).name}"
    return agent


RUN_COLS: tuple[tuple[str, str], ...] = (
    ("key", "run"), ("agent", "agent"), ("profile", "profile"), ("data", "data"), ("dates", "sessions"),
    ("repeat", "repeat"), ("seed", "seed"), ("net_pnl", "net PnL"), ("cost_usd", "cost (USD)"),
    ("sharpe", "Sharpe"), ("max_drawdown", "max drawdown"), ("trades", "round trips"), ("tokens", "tokens"),
    ("leakage", "leakage"), ("ledger_sha256", "ledger SHA-256"), ("error", "error"),
)
_NUMERIC = {"net_pnl", "sharpe", "max_drawdown", "trades", "tokens", "repeat", "seed", "cost_usd"}


def _run_cell(name: str, v: Any) -> str:
    if v is None:
        return ""
    if name in ("key", "ledger_sha256"):  # shortened; the whole value in the title
        return f'<code title="{escape(str(v))}">{escape(str(v)[:10])}…</code>'
    if name == "agent":
        return f'<span title="{escape(str(v))}">{breakable(short_agent(str(v)))}</span>'
    if name == "data":
        head, sep, opts = str(v).partition("|")
        return f'<span title="{escape(str(v))}">{breakable(Path(head).name + sep + opts)}</span>'
    if name == "dates":
        return ", ".join(f'<span class="nw">{escape(d)}</span>' for d in str(v).split(","))
    if name == "net_pnl":
        return f"{float(v):+.2f}"
    if name == "cost_usd":
        return f"{float(v):.4f}"
    if isinstance(v, float):
        return f"{v:.2f}"
    return escape(str(v))


def runs_table(rows: Sequence[Row]) -> str:
    """Every run, failed ones with their reason."""
    runs = sorted(rows, key=lambda r: (str(r.get("agent")), str(r.get("profile")), str(r.get("data")),
                                       str(r.get("dates")), int(r.get("repeat") or 0), str(r.get("key"))))
    kinds = ["n" if k in _NUMERIC else "w" if k in ("data", "error", "agent") else "l" for k, _ in RUN_COLS]
    out = [_tr([escape(label) for _, label in RUN_COLS], kinds, tag="th")]
    for r in runs:
        out.append(_tr([_run_cell(k, r.get(k)) for k, _ in RUN_COLS], kinds, "failed" if r.get("error") else ""))
    return f'<table class="runs">{"".join(out)}</table>'


def forest(lines: Sequence[CellLine], level: float) -> str:
    """Each cell's mean net PnL per session and its interval as a horizontal forest plot (inline
    SVG; labels on the left measured so none is cut, the value axis labelled at both ends)."""
    from kestrel.report.svg import label_width, nice_step

    shown = [ln for ln in lines if ln.stats.sessions]
    if not shown:
        return ""
    labels = [ln.stats.cell.label for ln in shown]
    lows = [ln.stats.net_pnl.low if ln.stats.net_pnl.low is not None else ln.stats.net_pnl.mean for ln in shown]
    highs = [ln.stats.net_pnl.high if ln.stats.net_pnl.high is not None else ln.stats.net_pnl.mean for ln in shown]
    lo, hi = min(min(lows), 0.0), max(max(highs), 0.0)
    if hi <= lo:
        lo, hi = lo - 1.0, hi + 1.0
    step = nice_step(hi - lo)
    lo, hi = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    ticks = [k * step for k in range(round(lo / step), round(hi / step) + 1)]
    texts = [_tick_text(t, step) for t in ticks]
    left = 8 + max(label_width(t) for t in labels)
    width = max(880, int(left) + 420)
    right = 16 + label_width(texts[-1]) / 2
    row_h, top = 18, 8
    height = top + row_h * len(shown) + 24

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - right)

    out = [f'<svg class="forest" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'aria-label="{escape(f"net PnL per session, mean and {level:.0%} interval")}">']
    base = top + row_h * len(shown)
    for t, text in zip(ticks, texts):
        out.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{base}" class="ax"/>')
        out.append(f'<text x="{x(t):.1f}" y="{base + 14}" text-anchor="middle">{escape(text)}</text>')
    out.append(f'<line x1="{x(0.0):.1f}" y1="{top}" x2="{x(0.0):.1f}" y2="{base}" class="zero"/>')
    for k, (ln, label, a, b) in enumerate(zip(shown, labels, lows, highs)):
        y = top + row_h * k + row_h / 2
        cls = ' class="base"' if ln.stats.baseline else ""
        out.append(f"<g{cls}><text x=\"{left - 6:.1f}\" y=\"{y + 4:.1f}\" text-anchor=\"end\">{escape(label)}</text>"
                   f'<line x1="{x(a):.1f}" y1="{y:.1f}" x2="{x(b):.1f}" y2="{y:.1f}" class="ci"/>'
                   f'<circle cx="{x(ln.stats.net_pnl.mean):.1f}" cy="{y:.1f}" r="3.5" class="mean"/></g>')
    out.append("</svg>")
    return "<h2>Net PnL per session</h2>" + "".join(out)


def _tick_text(v: float, step: float) -> str:
    d = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    text = f"{v + 0.0:.{d}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


__all__ = ["BOARD_CSS", "Board", "CELL_COLUMNS", "COMPARISON_COLUMNS", "CellLine", "SESSION_COLUMNS", "breakable",
           "forest", "runs_table", "session_rows", "short_agent", "to_csv"]

"""A sweep's leaderboard: one line per (agent, model, profile) over its runs, with reference
lines for the buy-and-hold and flat baselines, as a page and as terminal lines.

Ranking rule (also in docs/report.md):
- complete groups (every run finished) rank before groups with failed runs; a failed run is
  missing, never a zero, so a group cannot climb by failing;
- within each tier, by mean net PnL per finished run, best first (a group with no finished run
  last); ties by agent, model and profile;
- the baseline lines rank among the complete groups: "buy-and-hold" is the mean over every
  finished run of that run's own buy-and-hold baseline (its sessions, in its largest position, as
  on its page), "flat" never trades (0). They show which groups beat holding.

Invariants: the page is the run page's kind (inline CSS only, no script, no URL); the same rows
give the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from kestrel.report.html import CSS

Row = Mapping[str, Any]

BOARD_CSS = """
.board,.runs{width:100%}.runs{font-size:12px}.runs td,.runs th{padding:2px 5px}
td.n,.nw{white-space:nowrap}td.w{overflow-wrap:break-word}.runs code{font-size:11px}
tr.base td{background:#f7f8fa;font-style:italic}tr.failed td{background:#fdf1f1}.warn{color:#a4262c;font-weight:600}
""".strip()

BASELINE_AGENTS = ("buy-and-hold", "flat")


def _money(x: Any) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def _opt(fmt: str) -> Callable[[Any], str]:
    return lambda x: "n/a" if x is None else fmt.format(x)


# (field, label, format) in display order
LEADER_COLS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("rank", "#", str),
    ("agent", "agent", str), ("model", "model", str), ("profile", "profile", str),
    ("runs", "runs", str), ("failed", "failed", str),
    ("net_pnl_mean", "net PnL per run (mean)", _money),
    ("net_pnl", "net PnL (sum)", _money),
    ("return_on_risk", "return on risk (mean)", _opt("{:+.2%}")),
    ("sharpe", "Sharpe (mean)", _opt("{:.2f}")),
    ("max_drawdown", "max drawdown (worst)", _opt("{:.2f}")),
    ("win_rate", "win rate", _opt("{:.0%}")),
    ("tokens", "tokens", _opt("{}")),
    ("cost_usd", "cost (USD)", _opt("{:.4f}")),
)


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 9) if xs else None


def _group(agent: str, model: str, profile: str, rs: Sequence[Row]) -> dict[str, Any]:
    ok = [r for r in rs if not r.get("error")]
    nets = [float(r.get("net_pnl") or 0.0) for r in ok]
    sharpes = [float(r["sharpe"]) for r in ok if r.get("sharpe") is not None]
    trades = sum(int(r.get("trades") or 0) for r in ok)
    wins = sum(int(r.get("wins") or 0) for r in ok)
    tokens = [r.get("tokens") for r in ok]
    costs = [r.get("cost_usd") for r in ok]
    return {
        "kind": "group", "agent": agent, "model": model, "profile": profile, "runs": len(rs),
        "failed": len(rs) - len(ok),
        "net_pnl_mean": _mean(nets),
        "net_pnl": round(sum(nets), 9) if ok else None,
        "return_on_risk": _mean([float(r.get("return_on_risk") or 0.0) for r in ok]),
        "sharpe": round(sum(sharpes) / len(sharpes), 6) if sharpes else None,
        "max_drawdown": max((float(r.get("max_drawdown") or 0.0) for r in ok), default=None),
        "win_rate": round(wins / trades, 6) if trades else None,
        "tokens": None if not ok or any(t is None for t in tokens) else sum(int(t) for t in tokens if t is not None),
        "cost_usd": None if not ok or any(c is None for c in costs) else round(
            sum(float(c) for c in costs if c is not None), 9),
    }


def _baselines(rows: Sequence[Row]) -> list[dict[str, Any]]:
    ok = [r for r in rows if not r.get("error")]
    held = [r for r in ok if r.get("buy_and_hold_net_pnl") is not None]
    out: list[dict[str, Any]] = []
    if held:
        nets = [float(r["buy_and_hold_net_pnl"]) for r in held]
        sharpes = [float(r["buy_and_hold_sharpe"]) for r in held if r.get("buy_and_hold_sharpe") is not None]
        out.append({
            "kind": "baseline", "agent": "buy-and-hold", "model": "-", "profile": "(each run's)",
            "runs": len(held), "failed": 0, "net_pnl_mean": _mean(nets), "net_pnl": None,  # sizes differ
            "return_on_risk": _mean([float(r.get("buy_and_hold_return_on_risk") or 0.0) for r in held]),
            "sharpe": round(sum(sharpes) / len(sharpes), 6) if sharpes else None,
            "max_drawdown": max(float(r.get("buy_and_hold_max_drawdown") or 0.0) for r in held),
            "win_rate": None, "tokens": None, "cost_usd": None,
        })
    if ok:
        out.append({
            "kind": "baseline", "agent": "flat", "model": "-", "profile": "-", "runs": len(ok), "failed": 0,
            "net_pnl_mean": 0.0, "net_pnl": 0.0, "return_on_risk": 0.0, "sharpe": None, "max_drawdown": 0.0,
            "win_rate": None, "tokens": None, "cost_usd": None,
        })
    return out


def leaderboard(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The board's lines in rank order (see the module docstring), each with its `rank`."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((str(r.get("agent")), str(r.get("model") or "-"), str(r.get("profile"))), []).append(r)
    lines = [_group(a, m, p, rs) for (a, m, p), rs in groups.items()] + _baselines(rows)

    def rank(g: dict[str, Any]) -> tuple[int, int, float, int, str, str, str]:
        mean = g["net_pnl_mean"]
        return (1 if g["failed"] else 0, 1 if mean is None else 0, -float(mean or 0.0),
                1 if g["kind"] == "baseline" else 0, str(g["agent"]), str(g["model"]), str(g["profile"]))

    lines.sort(key=rank)
    for k, g in enumerate(lines, 1):
        g["rank"] = k
    return lines


def text_lines(rows: Sequence[Row]) -> list[str]:
    """The board as aligned terminal lines (header first)."""
    board = leaderboard(rows)
    head = [label for _, label, _ in LEADER_COLS]
    cells = [[fmt(g[k]) if k != "failed" else _failed(g) for k, _, fmt in LEADER_COLS] for g in board]
    widths = [max(len(h), *(len(x[i]) for x in cells)) if cells else len(h) for i, h in enumerate(head)]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *cells]]


def _failed(g: Mapping[str, Any]) -> str:
    return f"{g['failed']} of {g['runs']}" if g["failed"] else "0"


RUN_COLS: tuple[tuple[str, str], ...] = (
    ("key", "run"), ("agent", "agent"), ("profile", "profile"), ("data", "data"), ("dates", "sessions"),
    ("net_pnl", "net PnL"), ("sharpe", "Sharpe"), ("max_drawdown", "max drawdown"), ("trades", "round trips"),
    ("tokens", "tokens"), ("ledger_sha256", "ledger SHA-256"), ("error", "error"),
)
_NUMERIC = {"net_pnl", "sharpe", "max_drawdown", "trades", "tokens"}


def _run_cell(field: str, v: Any) -> str:
    if v is None:
        return ""
    if field in ("key", "ledger_sha256"):  # shortened; the whole value in the title
        return f'<code title="{escape(str(v))}">{escape(str(v)[:10])}…</code>'
    if field == "agent":
        return f'<span title="{escape(str(v))}">{breakable(short_agent(str(v)))}</span>'
    if field == "data":
        head, sep, opts = str(v).partition("|")
        return f'<span title="{escape(str(v))}">{breakable(Path(head).name + sep + opts)}</span>'
    if field == "dates":
        return ", ".join(f'<span class="nw">{escape(d)}</span>' for d in str(v).split(","))
    if field == "net_pnl":
        return f"{float(v):+.2f}"
    if isinstance(v, float):
        return f"{v:.2f}"
    return escape(str(v))


def _tr(cells: Sequence[str], kinds: Sequence[str], cls: str = "", tag: str = "td") -> str:
    """One table row; `kinds` per cell: "n" numeric (right, no wrap), "l" text, "w" text that
    may break anywhere (paths, checksums, errors)."""
    row = "".join(f'<{tag} class="{"l w" if k == "w" else k}">{c}</{tag}>' if tag == "td" or k != "n"
                  else f"<{tag}>{c}</{tag}>" for c, k in zip(cells, kinds))
    return f'<tr class="{cls}">{row}</tr>' if cls else f"<tr>{row}</tr>"


def breakable(text: str) -> str:
    """`text` escaped, with a line-break opportunity after each `_ / | . ,` (long names wrap at
    their separators instead of widening the table)."""
    out = escape(text)
    for ch in "_/|.,":
        out = out.replace(ch, ch + "<wbr>")
    return out


def short_agent(agent: str) -> str:
    """An agent with a file (`fixed:/a/b/orb.kes`) shown by the file's name (`fixed:orb.kes`)."""
    kind, sep, arg = agent.partition(":")
    return f"{kind}{sep}{Path(arg).name}" if sep and "/" in arg else agent


def render_leaderboard(rows: Sequence[Row], title: str = "Kestrel sweep") -> str:
    """The sweep's page: the ranked board (baselines as reference lines) and every run, failed
    runs with their error."""
    board = leaderboard(rows)
    kinds = ["w" if k == "agent" else "l" if k in ("model", "profile") else "n" for k, _, _ in LEADER_COLS]
    lines = [_tr([escape(label) for _, label, _ in LEADER_COLS], kinds, tag="th")]
    for g in board:
        cells = []
        for k, _, fmt in LEADER_COLS:
            if k == "failed":
                cells.append(f'<span class="warn">{_failed(g)}</span>' if g["failed"] else "0")
            elif k == "agent":
                cells.append(f'<span title="{escape(str(g[k]))}">{breakable(short_agent(str(g[k])))}</span>')
            else:
                cells.append(escape(fmt(g[k])))
        lines.append(_tr(cells, kinds, "base" if g["kind"] == "baseline" else "failed" if g["failed"] else ""))
    broken = [g for g in board if g["failed"]]
    n_failed = sum(1 for r in rows if r.get("error"))
    warn = (f'<p class="warn">{n_failed} of {len(rows)} runs failed, in {len(broken)} group'
            f'{"s" if len(broken) != 1 else ""}: those groups rank after the complete ones and their '
            'figures cover their finished runs only (the failed runs and their errors are listed below).</p>'
            if broken else "")
    rule = ('<p class="note">Ranking: groups whose runs all finished first, then groups with failed runs '
            '(a failed run counts as missing, never as zero); within each, by mean net PnL per finished run. '
            'Reference lines (italic): buy-and-hold is the mean of each finished run\'s own buy-and-hold baseline '
            '(its sessions, in its largest position, without fees, as on its page); flat never trades. '
            'Metrics are defined in docs/report.md.</p>')
    runs = sorted(rows, key=lambda r: (str(r.get("agent")), str(r.get("profile")), str(r.get("data")),
                                       str(r.get("dates")), str(r.get("key"))))
    rkinds = ["n" if k in _NUMERIC else "w" if k in ("data", "error", "agent") else "l" for k, _ in RUN_COLS]
    run_lines = [_tr([escape(label) for _, label in RUN_COLS], rkinds, tag="th")]
    for r in runs:
        run_lines.append(_tr([_run_cell(k, r.get(k)) for k, _ in RUN_COLS], rkinds, "failed" if r.get("error") else ""))
    body = [f"<h1>{escape(title)}: leaderboard</h1>",
            f'<p class="note">{len(rows)} runs, grouped by agent, model and profile.</p>', warn,
            f'<table class="board">{"".join(lines)}</table>', rule,
            "<h2>Runs</h2>", f'<table class="runs">{"".join(run_lines)}</table>']
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}\n{BOARD_CSS}</style></head><body>\n"
            + "\n".join(x for x in body if x) + "\n</body></html>\n")


__all__ = ["LEADER_COLS", "leaderboard", "render_leaderboard", "text_lines"]

"""A sweep's statistics as aligned terminal lines: the ranked cells with their intervals, then
one verdict per paired comparison, the deflated Sharpe of the best cell and the warnings.

Invariants: pure; the same `GridStats` gives the same lines; a figure that is undefined reads
`n/a`; every number shown is one `GridStats` holds (nothing is computed here but formatting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kestrel.report.stats.grid import CellStats, GridStats, Estimate


def _na(fmt: str) -> Callable[[float | int | None], str]:
    return lambda x: "n/a" if x is None else fmt.format(x)


_money = _na("{:+.2f}")
_ratio = _na("{:.2f}")
_count = _na("{}")


def _with_interval(s: Estimate, fmt: Callable[[float | int | None], str]) -> str:
    if s.low is None or s.high is None:
        return fmt(s.mean)
    return f"{fmt(s.mean)} [{fmt(s.low)}, {fmt(s.high)}]"


def _pct(x: float | int | None) -> str:
    return "n/a" if x is None else f"{x:+.2%}"


def _note(c: CellStats) -> str:
    notes = ["baseline"] if c.baseline else []
    if c.few_sessions:
        notes.append("few sessions")
    return ", ".join(notes)


def _columns(level: float) -> tuple[tuple[str, Callable[[CellStats], str]], ...]:
    ci = f"{level:.0%} CI"
    return (
        ("#", lambda c: str(c.rank)),
        ("agent", lambda c: c.cell.agent),
        ("model", lambda c: c.cell.model or "-"),
        ("profile", lambda c: c.cell.profile),
        ("sessions", lambda c: str(c.sessions)),
        ("repeats", lambda c: str(c.repeats)),
        (f"net PnL per session, mean [{ci}]", lambda c: f"{_with_interval(c.net_pnl, _money)} {c.currency}"),
        ("sd", lambda c: _ratio(c.net_pnl.sd)),
        (f"return on risk, mean [{ci}]", lambda c: _with_interval(c.return_on_risk, _pct)),
        ("Sharpe", lambda c: _ratio(c.sharpe)),
        ("Sortino", lambda c: _ratio(c.sortino)),
        ("win rate", lambda c: "n/a" if c.win_rate is None else f"{c.win_rate:.0%}"),
        ("trades", lambda c: str(c.trades)),
        ("fees", lambda c: f"{c.fees:.2f}"),
        ("tokens", lambda c: _count(c.tokens)),
        ("cost (USD)", lambda c: _na("{:.4f}")(c.cost_usd)),
        ("note", _note),
    )


def _aligned(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *rows]]


def text_table(stats: GridStats) -> list[str]:
    """The statistics as terminal lines (see the module docstring)."""
    cols = _columns(stats.level)
    lines = _aligned([h for h, _ in cols], [[f(c) for _, f in cols] for c in stats.cells])
    tested = sum(1 for c in stats.comparisons if c.p_holm is not None)
    if stats.comparisons:
        lines += ["", f"Paired comparisons (net PnL per session; p: Wilcoxon signed-rank, Holm-adjusted over "
                      f"{tested} comparison{'s' if tested != 1 else ''}; evidence at p <= {stats.alpha:g}):"]
        lines += [f"  {c.verdict}" for c in stats.comparisons]
    d = stats.deflated
    if d is not None:
        prob = "n/a" if d.probability is None else f"{d.probability:.2f}"
        lines += ["", f"Deflated Sharpe of the best cell, {d.cell.label} (Sharpe {d.sharpe:.2f}): {prob}, the "
                      f"probability that its true Sharpe beats the best of {d.trials} unskilled trial"
                      f"{'s' if d.trials != 1 else ''} (expected {d.expected_max:.4f} per period against its "
                      f"{d.sharpe_per_period:.4f}, {d.periods} periods)"]
    few = [c for c in stats.cells if c.few_sessions]
    if few:
        lines += ["", f"Warning: {len(few)} cell{'s' if len(few) != 1 else ''} with fewer than {stats.min_sessions} "
                      "sessions: their intervals mean little (docs/report.md, Statistics)."]
    return lines


__all__ = ["text_table"]

"""The terminal summary: an equity sparkline and the key metrics as short labelled values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kestrel.report.equity import EquityCurve
from kestrel.report.metrics import Metrics
from kestrel.report.trips import local_time

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(curve: EquityCurve, width: int = 48) -> str:
    """`width` blocks, each the equity at the end of its slice of ticks, scaled min to max
    (all lowest blocks for a constant curve)."""
    n = len(curve)
    if n == 0:
        return ""
    k = min(width, n)
    idx = np.minimum(n - 1, ((np.arange(1, k + 1) * n) // k) - 1)
    v = curve.equity[idx]
    lo, hi = float(v.min()), float(v.max())
    if hi - lo <= 0:
        return BLOCKS[0] * k
    levels = np.rint((v - lo) / (hi - lo) * (len(BLOCKS) - 1)).astype(int)
    return "".join(BLOCKS[i] for i in levels)


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def metric_rows(m: Metrics, days: Sequence[object] = ()) -> list[tuple[str, str]]:
    """(label, value) of the key metrics, in display order."""
    tz = getattr(days[0], "tz", "UTC") if days else "UTC"
    dd_at = local_time(m.max_drawdown_ts, tz) if m.max_drawdown_ts is not None else "-"
    rows = [
        ("net", f"{m.net_pnl:+.2f}"),
        ("return/risk", f"{m.return_on_risk:+.2%}"),
        ("sharpe", _num(m.sharpe)),
        ("sortino", _num(m.sortino)),
        ("max dd", f"{m.max_drawdown:.2f} at {dd_at}"),
        ("win rate", f"{m.win_rate:.0%} of {m.trades}"),
        ("profit factor", _num(m.profit_factor)),
        ("exposure", f"{m.exposure:.0%}"),
        ("fees", f"{m.fees:.2f}"),
        ("orders/fills/rejections/disarms", f"{m.orders}/{m.fills}/{m.rejections}/{m.disarms}"),
    ]
    if m.tokens is not None:
        rows.append(("tokens", str(m.tokens)))
    if m.cost_usd is not None:
        rows.append(("cost", f"${m.cost_usd:.4f}"))
    return rows


__all__ = ["BLOCKS", "metric_rows", "sparkline"]

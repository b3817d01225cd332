"""The terminal summary: an equity sparkline and the key metrics as short labelled values."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from kestrel.market.instrument import Instrument, qty_text
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


def plain(x: float) -> str:
    """`x` in its shortest decimal form, without exponent (0.00005, 125000, 0.01)."""
    return format(Decimal(repr(float(x))).normalize(), "f")


def money(x: float, decimals: int, sign: bool = False) -> str:
    """A money amount at the run's quantum (`decimals` places), signed when `sign`."""
    return f"{x:+.{decimals}f}" if sign else f"{x:.{decimals}f}"


def instrument_line(inst: Instrument) -> str:
    """`SYMBOL, tick size T, multiplier M, currency C, min qty Q` (and `, lot size L` when the
    lot is not 1)."""
    lot = "" if inst.lot_size == 1 else f", lot size {plain(inst.lot_size)}"
    return (f"{inst.symbol}, tick size {plain(inst.tick_size)}, multiplier {plain(inst.multiplier)}, "
            f"currency {inst.currency}, min qty {inst.min_qty}{lot}")


def qty(x: float, inst: Instrument | None) -> str:
    """A quantity of `inst` at its lot's precision (whole units when None)."""
    return qty_text(x, inst.lot_size if inst is not None else 1)


def metric_rows(m: Metrics, days: Sequence[object] = (), decimals: int = 2) -> list[tuple[str, str]]:
    """(label, value) of the key metrics, in display order; money at `decimals` places."""
    tz = getattr(days[0], "tz", "UTC") if days else "UTC"
    dd_at = local_time(m.max_drawdown_ts, tz) if m.max_drawdown_ts is not None else "-"
    rows = [
        ("net", money(m.net_pnl, decimals, sign=True)),
        ("return/risk", f"{m.return_on_risk:+.2%}"),
        ("sharpe", _num(m.sharpe)),
        ("sortino", _num(m.sortino)),
        ("max dd", f"{money(m.max_drawdown, decimals)} at {dd_at}"),
        ("win rate", f"{m.win_rate:.0%} of {m.trades}"),
        ("profit factor", _num(m.profit_factor)),
        ("exposure", f"{m.exposure:.0%}"),
        ("fees", money(m.fees, decimals)),
        ("orders/fills/rejections/disarms", f"{m.orders}/{m.fills}/{m.rejections}/{m.disarms}"),
    ]
    if m.tokens is not None:
        rows.append(("tokens", str(m.tokens)))
    if m.cost_usd is not None:
        rows.append(("cost", f"${m.cost_usd:.4f}"))
    return rows


__all__ = ["BLOCKS", "instrument_line", "metric_rows", "money", "plain", "qty", "sparkline"]

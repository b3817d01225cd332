"""Optional PNG export of a run's equity (drawdown shaded) and price, through matplotlib's Agg
backend (`pip install 'kestrel[plot]'`). Deterministic: no software/date metadata is written."""

from __future__ import annotations

import io

import numpy as np

from kestrel.outputs import atomic_write
from kestrel.report.run import RunReport, chained_minutes


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def write_png(rep: RunReport, path: str) -> None:
    """Equity per minute (drawdown shaded) over the sessions, and each session's mid price with
    its fills, as one PNG at `path`."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailable("PNG export needs matplotlib: pip install 'kestrel[plot]'") from None
    fig = Figure(figsize=(10, 6), dpi=100)
    ax_eq, ax_px = fig.subplots(2, 1)
    eq = chained_minutes(rep.days)
    px = np.concatenate([d.minute_mid for d in rep.days]) if rep.days else np.zeros(0)
    x = np.arange(eq.shape[0])
    peak = np.maximum.accumulate(np.maximum(eq, 0.0)) if eq.size else eq
    ax_eq.plot(x, eq, color="#1f5fbf", linewidth=1.2)
    ax_eq.fill_between(x, eq, peak, color="#d9534f", alpha=0.25, linewidth=0)
    ax_eq.axhline(0.0, color="#9aa4b2", linewidth=0.8, linestyle="--")
    ax_eq.set_title(f"{rep.header.agent} on {rep.header.symbol}: equity marked to market, drawdown shaded")
    ax_eq.set_ylabel(rep.header.currency)
    ax_px.plot(x, px, color="#44505f", linewidth=1.0)
    offset = 0
    for d in rep.days:
        for f in d.facts.fills:
            k = offset + int(np.searchsorted(d.minute_ts, f.ts, side="left"))
            ax_px.plot([k], [f.price], marker="^" if f.side == "buy" else "v",
                       color="#1e7a3c" if f.side == "buy" else "#a4262c", markersize=7)
        offset += d.minute_equity.shape[0]
    ax_px.set_title("mid price per minute with fills")
    ax_px.set_xlabel("minutes into the run")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    atomic_write(path, buf.getvalue())


__all__ = ["PlotUnavailable", "write_png"]

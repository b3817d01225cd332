"""Inline SVG charts (no script, no external reference): deterministic text, coordinates at
one decimal, so the same series always gives the same bytes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

W, H = 880, 220
PAD_L, PAD_R, PAD_T, PAD_B = 64, 12, 12, 24


@dataclass(frozen=True)
class Frame:
    """Maps data (x, y) into the plot area."""

    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, v: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return PAD_L + (v - self.x0) / span * (W - PAD_L - PAD_R)

    def y(self, v: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return H - PAD_B - (v - self.y0) / span * (H - PAD_T - PAD_B)


def frame(xs: np.ndarray, ys: Sequence[np.ndarray]) -> Frame:
    vals = np.concatenate([y[np.isfinite(y)] for y in ys]) if ys else np.zeros(0)
    lo = float(vals.min()) if vals.size else 0.0
    hi = float(vals.max()) if vals.size else 1.0
    if hi <= lo:
        lo, hi = lo - 1.0, hi + 1.0
    pad = (hi - lo) * 0.05
    x0 = float(xs[0]) if xs.size else 0.0
    x1 = float(xs[-1]) if xs.size else 1.0
    return Frame(x0, x1 if x1 > x0 else x0 + 1.0, lo - pad, hi + pad)


def _pts(f: Frame, xs: np.ndarray, ys: np.ndarray) -> str:
    return " ".join(f"{f.x(float(x)):.1f},{f.y(float(y)):.1f}" for x, y in zip(xs, ys) if math.isfinite(float(y)))


def open_svg(label: str) -> str:
    return (f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-label="{escape(label)}">')


def axes(f: Frame, fmt: str, ticks: Sequence[tuple[float, str]]) -> str:
    """The frame, three horizontal grid lines with labels, and x labels at `ticks`."""
    out = [f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" '
           'class="plot"/>']
    for k in range(3):
        v = f.y0 + (f.y1 - f.y0) * (k + 0.5) / 3
        y = f.y(v)
        out.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" class="yl">{escape(fmt.format(v))}</text>')
    for x, text in ticks:
        out.append(f'<text x="{f.x(x):.1f}" y="{H - 6}" class="xl">{escape(text)}</text>')
    return "".join(out)


def equity_chart(xs: np.ndarray, equity: np.ndarray, ticks: Sequence[tuple[float, str]],
                 trough: tuple[float, float] | None, fmt: str = "{:.2f}") -> str:
    """Equity (a line) with its drawdown from the running peak shaded; `fmt` the money format
    of the axis labels."""
    peak = np.maximum.accumulate(np.maximum(equity, 0.0)) if equity.size else equity
    f = frame(xs, [equity, peak, np.zeros(1)])
    out = [open_svg("equity marked to market, drawdown shaded"), axes(f, fmt, ticks)]
    if xs.size:
        zero = f.y(0.0)
        out.append(f'<line x1="{PAD_L}" y1="{zero:.1f}" x2="{W - PAD_R}" y2="{zero:.1f}" class="zero"/>')
        shade = _pts(f, xs, peak) + " " + _pts(f, xs[::-1], equity[::-1])
        out.append(f'<polygon points="{shade}" class="dd"/>')
        out.append(f'<polyline points="{_pts(f, xs, equity)}" class="eq"/>')
        if trough is not None:
            out.append(f'<circle cx="{f.x(trough[0]):.1f}" cy="{f.y(trough[1]):.1f}" r="4" class="trough">'
                       '<title>max drawdown</title></circle>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    kind: str  # buy | sell
    title: str


@dataclass(frozen=True)
class Segment:
    x0: float
    x1: float
    y: float
    kind: str  # stop | target | trail
    title: str


def price_chart(xs: np.ndarray, mid: np.ndarray, ticks: Sequence[tuple[float, str]], fmt: str,
                fills: Sequence[Mark], levels: Sequence[Segment]) -> str:
    """The mid price per minute, fills as triangles, stop/target levels as dashed segments."""
    ys = [mid] + [np.array([m.y for m in fills])] + [np.array([s.y for s in levels])]
    f = frame(xs, [y for y in ys if y.size])
    out = [open_svg("price with fills and stop/target levels"), axes(f, fmt, ticks)]
    if xs.size:
        out.append(f'<polyline points="{_pts(f, xs, mid)}" class="px"/>')
    for s in levels:
        y = f.y(s.y)
        out.append(f'<line x1="{f.x(s.x0):.1f}" y1="{y:.1f}" x2="{f.x(s.x1):.1f}" y2="{y:.1f}" '
                   f'class="lv {s.kind}"><title>{escape(s.title)}</title></line>')
    for m in fills:
        x, y = f.x(m.x), f.y(m.y)
        d = 6 if m.kind == "buy" else -6
        out.append(f'<polygon points="{x:.1f},{y:.1f} {x - 5:.1f},{y + d:.1f} {x + 5:.1f},{y + d:.1f}" '
                   f'class="fill {m.kind}"><title>{escape(m.title)}</title></polygon>')
    out.append("</svg>")
    return "".join(out)


__all__ = ["Mark", "Segment", "equity_chart", "price_chart"]

"""Inline SVG charts (no script, no external reference): deterministic text, coordinates at
one decimal, so the same series always gives the same bytes.

Axis labels never clip: a y label shows as many decimals as its grid step needs (not the
money quantum: a 500-unit step reads `-1000`, not `-1000.00000`), values of a million and more
are scaled (`2.5M`, `1.2B`, `3T`), and the plot's left margin grows to the widest label
(`label_width`, a conservative estimate of the text's width at the axis font), so the
longest label still starts inside the chart.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

W, H = 880, 220
PAD_L, PAD_R, PAD_T, PAD_B = 64, 12, 12, 24
AXIS_FONT_PX = 10.0  # the .yl / .xl labels' font size (kestrel.report.html CSS)
_NARROW = set(".,:;'|!il1 ")
_WIDE = set("MWmw@%")


def label_width(text: str, font_px: float = AXIS_FONT_PX) -> float:
    """A conservative width of `text` in a proportional sans-serif font of `font_px`: 0.62 em a
    character (digits, letters and the minus are at most that in the system UI fonts), 0.34 em
    for narrow ones, 0.9 em for wide ones."""
    em = sum(0.34 if ch in _NARROW else 0.9 if ch in _WIDE else 0.62 for ch in text)
    return em * font_px


SCALES = ((1e12, "T"), (1e9, "B"), (1e6, "M"))


def tick_texts(values: Sequence[float], step: float) -> list[str]:
    """The labels of grid `values` a `step` apart: scaled by the largest power whose suffix
    keeps them short when a value reaches a million, with just enough decimals to tell the
    steps apart; no "-0"."""
    top = max((abs(v) for v in values), default=0.0)
    scale, suffix = next(((f, s) for f, s in SCALES if top >= f), (1.0, ""))
    unit = step / scale if step > 0 else 1.0
    d = max(0, -math.floor(math.log10(unit) + 1e-9)) if unit < 1 else 0
    out = []
    for v in values:
        text = f"{v / scale + 0.0:.{d}f}"
        if text.startswith("-") and not text.strip("-0."):
            text = text[1:]
        out.append(text + (suffix if text.strip("-0.") else ""))
    return out


@dataclass(frozen=True)
class Frame:
    """Maps data (x, y) into the plot area (`left`: the plot's left edge, room for the labels)."""

    x0: float
    x1: float
    y0: float
    y1: float
    step: float = 0.0  # the y grid's 1-2-5 step (0: one from the span)
    left: float = PAD_L

    def x(self, v: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return self.left + (v - self.x0) / span * (W - self.left - PAD_R)

    def y(self, v: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return H - PAD_B - (v - self.y0) / span * (H - PAD_T - PAD_B)


def nice_step(span: float, target: int = 4) -> float:
    """The 1-2-5 step (…, 0.1, 0.2, 0.5, 1, 2, 5, 10, …) that cuts `span` into at most about
    `target` intervals."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / target
    base = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * base * (1 + 1e-9):
            return m * base
    return 10.0 * base


def frame(xs: np.ndarray, ys: Sequence[np.ndarray]) -> Frame:
    """The plot's frame: x over `xs`, y over every series widened to whole 1-2-5 steps, so the
    bottom and top grid lines sit on round values and carry labels."""
    vals = np.concatenate([y[np.isfinite(y)] for y in ys]) if ys else np.zeros(0)
    lo = float(vals.min()) if vals.size else 0.0
    hi = float(vals.max()) if vals.size else 1.0
    if hi <= lo:
        lo, hi = lo - 1.0, hi + 1.0
    step = nice_step(hi - lo)
    lo, hi = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    x0 = float(xs[0]) if xs.size else 0.0
    x1 = float(xs[-1]) if xs.size else 1.0
    texts = tick_texts(y_ticks(Frame(0.0, 1.0, lo, hi, step)), step)
    left = max(float(PAD_L), math.ceil(max(label_width(t) for t in texts)) + 8.0)
    return Frame(x0, x1 if x1 > x0 else x0 + 1.0, lo, hi, step, left)


def y_ticks(f: Frame) -> list[float]:
    """Grid values: every 1-2-5 step from the frame's bottom to its top, both included."""
    step = f.step or nice_step(f.y1 - f.y0)
    return [k * step for k in range(round(f.y0 / step), round(f.y1 / step) + 1)]  # as `frame` made them


def clock_ticks(open_ns: int, close_ns: int, tz: str) -> list[tuple[float, str]]:
    """Time labels for a session's x axis (in nanoseconds): the open, the close and the whole
    hours between them every 1, 2, 3, 4 or 6 hours (at most about 7 labels), without a label too
    close to an end. The equity and price charts of a session use the same labels."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(tz)

    def label(ns: int) -> str:
        return dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc).astimezone(zone).strftime("%H:%M")

    span = close_ns - open_ns
    hour = 3600 * 10**9
    every = next((h for h in (1, 2, 3, 4, 6) if span / (h * hour) <= 7), 12)
    start = dt.datetime.fromtimestamp(open_ns // 10**9, dt.timezone.utc).astimezone(zone)
    first = start.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    ticks = [(float(open_ns), label(open_ns))]
    t = first
    while (ns := int(t.timestamp()) * 10**9) < close_ns:
        if ns - open_ns >= span * 0.06 and close_ns - ns >= span * 0.06 and t.hour % every == 0:
            ticks.append((float(ns), label(ns)))
        t += dt.timedelta(hours=1)
    ticks.append((float(close_ns), label(close_ns)))
    return ticks


def _pts(f: Frame, xs: np.ndarray, ys: np.ndarray) -> str:
    return " ".join(f"{f.x(float(x)):.1f},{f.y(float(y)):.1f}" for x, y in zip(xs, ys) if math.isfinite(float(y)))


def open_svg(label: str) -> str:
    return (f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-label="{escape(label)}">')


def axes(f: Frame, ticks: Sequence[tuple[float, str]]) -> str:
    """The frame, a labelled grid line at every 1-2-5 value (bottom and top included), and x
    labels at `ticks`; a label at an end of the axis is anchored inside the chart, not clipped."""
    left = f.left
    out = [f'<rect x="{left:g}" y="{PAD_T}" width="{W - left - PAD_R:g}" height="{H - PAD_T - PAD_B}" '
           'class="plot"/>']
    values = y_ticks(f)
    texts = tick_texts(values, f.step or nice_step(f.y1 - f.y0))
    for v, text in zip(values, texts):
        y = f.y(v)
        out.append(f'<line x1="{left:g}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{left - 4:g}" y="{y + 4:.1f}" class="yl">{escape(text)}</text>')
    for x, text in ticks:
        px = f.x(x)
        anchor = ' style="text-anchor:start"' if px < left + 24 else ' style="text-anchor:end"' if px > W - PAD_R - 24 else ""
        out.append(f'<text x="{px:.1f}" y="{H - 6}" class="xl"{anchor}>{escape(text)}</text>')
    return "".join(out)


def equity_chart(xs: np.ndarray, equity: np.ndarray, ticks: Sequence[tuple[float, str]],
                 trough: tuple[float, float] | None) -> str:
    """Equity (a line) with its drawdown from the running peak shaded."""
    peak = np.maximum.accumulate(np.maximum(equity, 0.0)) if equity.size else equity
    f = frame(xs, [equity, peak, np.zeros(1)])
    out = [open_svg("equity marked to market, drawdown shaded"), axes(f, ticks)]
    if xs.size:
        zero = f.y(0.0)
        out.append(f'<line x1="{f.left:g}" y1="{zero:.1f}" x2="{W - PAD_R}" y2="{zero:.1f}" class="zero"/>')
        shade = _pts(f, xs, peak) + " " + _pts(f, xs[::-1], equity[::-1])
        out.append(f'<polygon points="{shade}" class="dd"/>')
        out.append(f'<polyline points="{_pts(f, xs, equity)}" class="eq"/>')
        if trough is not None:
            out.append(f'<circle cx="{f.x(trough[0]):.1f}" cy="{f.y(trough[1]):.1f}" r="4" class="trough">'
                       '<title>max drawdown</title></circle>')
    out.append("</svg>")
    return "".join(out)


def exposure_chart(xs: np.ndarray, gross: np.ndarray, net: np.ndarray, ticks: Sequence[tuple[float, str]]) -> str:
    """Gross exposure (a line) and net exposure (a dashed line) over time, zero marked."""
    f = frame(xs, [gross, net, np.zeros(1)])
    out = [open_svg("gross and net exposure"), axes(f, ticks)]
    if xs.size:
        zero = f.y(0.0)
        out.append(f'<line x1="{f.left:g}" y1="{zero:.1f}" x2="{W - PAD_R}" y2="{zero:.1f}" class="zero"/>')
        out.append(f'<polyline points="{_pts(f, xs, gross)}" class="gross"><title>gross</title></polyline>')
        out.append(f'<polyline points="{_pts(f, xs, net)}" class="netx"><title>net</title></polyline>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class ChartMark:
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


def price_chart(xs: np.ndarray, mid: np.ndarray, ticks: Sequence[tuple[float, str]],
                fills: Sequence[ChartMark], levels: Sequence[Segment]) -> str:
    """The mid price per minute, fills as triangles, stop/target levels as dashed segments."""
    ys = [mid] + [np.array([m.y for m in fills])] + [np.array([s.y for s in levels])]
    f = frame(xs, [y for y in ys if y.size])
    out = [open_svg("price with fills and stop/target levels"), axes(f, ticks)]
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


__all__ = ["AXIS_FONT_PX", "ChartMark", "Segment", "clock_ticks", "equity_chart", "exposure_chart", "label_width",
           "nice_step",
           "price_chart", "tick_texts", "y_ticks"]

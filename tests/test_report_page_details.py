"""Page details: y grid on 1-2-5 values with the top labelled, x labels never clipped and the
same on the equity and price charts, n/a where a metric has nothing to average or a baseline
has no plan."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kestrel.cli import main
from kestrel.report.svg import PAD_R, W, clock_ticks, frame, nice_step, y_ticks

ROOT = Path(__file__).resolve().parents[1]
ORB = str(ROOT / "examples" / "orb_breakout.kes")


@given(st.floats(-1e6, 1e6), st.floats(1e-4, 1e6))
def test_the_y_grid_is_on_1_2_5_steps_and_spans_the_series(lo: float, span: float) -> None:
    ys = np.array([lo, lo + span / 3, lo + span])
    f = frame(np.array([0.0, 1.0]), [ys])
    step = f.step
    assert step == nice_step(span) or step == nice_step(ys.max() - ys.min())
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9
    ticks = y_ticks(f)
    assert 2 <= len(ticks) <= 6
    slack = 1e-8 * step + 1e-9 * max(1.0, abs(lo))  # the frame ignores float noise below 1e-9 of a step
    assert ticks[0] <= ys.min() + slack and ticks[-1] >= ys.max() - slack
    assert ticks[-1] == f.y1 and ticks[0] == f.y0  # the top and the bottom carry labels
    for a, b in zip(ticks, ticks[1:]):
        assert math.isclose(b - a, step, rel_tol=1e-6, abs_tol=1e-9 * max(1.0, abs(lo)))


def test_session_clock_ticks_are_round_hours_between_the_open_and_the_close() -> None:
    open_ns = 1713187800 * 10**9  # 2024-04-15 09:30 EDT
    close_ns = open_ns + 390 * 60 * 10**9
    assert [t for _, t in clock_ticks(open_ns, close_ns, "America/New_York")] == [
        "09:30", "10:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00"]


def _xlabels(svg: str) -> list[tuple[float, str, str]]:
    return [(float(x), style, text) for x, style, text in
            re.findall(r'<text x="([\d.]+)" y="[\d.]+" class="xl"(?: style="([^"]*)")?>([^<]*)</text>', svg)]


def test_the_page_labels_shared_times_unclipped_and_na_where_nothing_applies(tmp_path: Path) -> None:
    html_path = tmp_path / "r.html"
    assert main(["simulate", "--agent", f"fixed:{ORB}", "--report", str(html_path), "--json"]) == 0
    html = html_path.read_text()
    charts = re.findall(r"<svg .*?</svg>", html)
    assert len(charts) == 2
    equity, price = (_xlabels(c) for c in charts)
    assert equity == price and [t for _, _, t in equity][::7] == ["09:30", "16:00"]
    last_x, last_style, _ = equity[-1]
    assert last_x > W - PAD_R - 24 and last_style == "text-anchor:end"  # drawn inside the chart
    assert equity[0][1] == "text-anchor:start"
    for chart in charts:
        ys = [float(v) for v in re.findall(r'class="yl">(-?[\d.]+)</text>', chart)]
        step = ys[1] - ys[0]
        assert all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in zip(ys, ys[1:]))
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-6
    table = html.split("<h2>Metrics</h2>")[1].split("</table>")[0]

    def row(label: str) -> list[str]:
        m = re.search(rf"<tr><td class=\"l\">{label}</td>(.*?)</tr>", table)
        assert m is not None, label
        return re.findall(r"<td>([^<]*)</td>", m.group(1))

    assert row("average loss") == ["n/a", "n/a", "n/a"]  # one winning trip; the baselines: a win, none
    assert row("average win")[0] != "n/a" and row("average win")[2] == "n/a"
    assert row("disarms")[1:] == ["n/a", "n/a"] and row("rejections")[1:] == ["n/a", "n/a"]

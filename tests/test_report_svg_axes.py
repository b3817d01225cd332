"""Equity axes that cannot mislead: for negative, tiny, huge and mixed ranges the chart's y
labels, read back from the SVG text, start inside the chart, are distinct, increase with the
grid, sit within half a grid step of the value their line is drawn at, and span the data."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.report.svg import H, PAD_B, PAD_T, equity_chart, label_width

SUFFIX = {"": 1.0, "M": 1e6, "B": 1e9, "T": 1e12}


def _value(label: str) -> float:
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([MBT]?)", label)
    assert m is not None, f"not a number label: {label!r}"
    return float(m.group(1)) * SUFFIX[m.group(2)]


def _labels(equity: np.ndarray) -> list[tuple[float, float, str]]:
    """(x, y, text) of every y label of the equity chart of `equity`, read from the SVG."""
    xs = np.arange(equity.size, dtype=float)
    svg = equity_chart(xs, equity, [(0.0, "09:30"), (float(equity.size - 1), "16:00")], None)
    root = ET.fromstring(svg)
    out = []
    for t in root.iter("{http://www.w3.org/2000/svg}text") if root.tag.startswith("{") else root.iter("text"):
        if t.get("class") == "yl":
            out.append((float(t.get("x", "nan")), float(t.get("y", "nan")), t.text or ""))
    return out


def _check(equity: np.ndarray) -> list[str]:
    labels = _labels(equity)
    assert len(labels) >= 2
    texts = [t for _, _, t in labels]
    values = [_value(t) for t in texts]
    assert len(set(texts)) == len(texts), texts  # each grid line says something different
    ys = [y for _, y, _ in labels]
    # drawn bottom-up: the higher the line (smaller y), the larger the value it says
    order = sorted(range(len(ys)), key=lambda k: -ys[k])
    assert [values[k] for k in order] == sorted(values), texts
    for x, y, text in labels:  # anchored at its end: the text starts at x - width, inside the chart
        assert x - label_width(text) >= 0.0, (text, x)
        assert PAD_T - 1 <= y - 4 <= H - PAD_B + 1
    # the line a label sits on is at the value it reads (the plot maps y linearly)
    (y_a, v_a), (y_b, v_b) = (ys[order[0]], values[order[0]]), (ys[order[-1]], values[order[-1]])
    step = (v_b - v_a) / (len(values) - 1)
    for y, v in zip(ys, values):
        drawn = v_a + (y_a - y) / (y_a - y_b) * (v_b - v_a)
        assert abs(drawn - v) <= step / 2 + 1e-9 * max(1.0, abs(v)), (texts, y, v, drawn)
    lo, hi = min(values), max(values)
    assert lo <= min(float(equity.min()), 0.0) + step / 2 and hi >= max(float(equity.max()), 0.0) - step / 2
    return texts


def test_a_negative_range_reads_as_negative_with_no_padding_digits() -> None:
    texts = _check(np.linspace(-1000.0, -20.0, 50))
    assert "-1000" in texts and not any(t.endswith(".00000") for t in texts)
    assert all(t.startswith("-") or t == "0" for t in texts)


def test_a_tiny_range_shows_the_decimals_it_needs() -> None:
    texts = _check(np.linspace(0.0, 0.0004, 50))
    assert "0.0004" in texts or "0.0005" in texts


def test_huge_ranges_are_scaled() -> None:
    texts = _check(np.linspace(-2.5e12, 3.7e12, 50))
    assert any(t.endswith("T") for t in texts) and max(len(t) for t in texts) <= 6
    texts = _check(np.linspace(1e6, 9.9e9, 50))
    assert any(t.endswith("B") for t in texts)


@pytest.mark.parametrize("series", [np.zeros(5), np.full(5, -3.5), np.array([-0.001, 0.001])])
def test_flat_and_near_zero_series(series: np.ndarray) -> None:
    texts = _check(series)
    assert "-0" not in texts


@settings(max_examples=150, deadline=None)
@given(st.floats(-1e13, 1e13), st.floats(1e-5, 1e13), st.integers(2, 40))
def test_every_range_labels_its_axis_readably(low: float, span: float, n: int) -> None:
    if not math.isfinite(low + span):
        return
    _check(np.linspace(low, low + span, n))

"""The compiled column kernels (`kestrel.engine.feed`: ema, search, chg) give the
numpy formulas' values bit for bit: on random inputs with NaN, infinities, signed zeros,
irregular and duplicated timestamps. The kernels run interpreted too (slowly: librt's
functions called from Python), so this holds for both builds; `Columns` itself is compared
with the kernels on and off."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.engine import feed
from kestrel.engine.indicators import IndicatorSpec
from kestrel.engine.vector import Columns
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks

SESSION = SessionSpec(dt.date(2024, 1, 2), tz="UTC")
S = 10**9
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
special = st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e308,
                           -1e308, 5e-324, -113.0])  # -113: mypyc's error marker
values = st.lists(st.one_of(finite, finite, finite, special), min_size=0, max_size=120)
# non-decreasing timestamps: gaps of 0 (duplicates) to 40 s, from an arbitrary start
gaps = st.lists(st.sampled_from([0, 0, 1, 1, 1, 2, 3, 7, 40]), min_size=0, max_size=120)


def _ts(start: int, steps: list[int]) -> I64:
    return (start + np.cumsum(np.asarray([0] + steps, dtype=np.int64))[:-1] * S
            if steps else np.zeros(0, dtype=np.int64))


def _pair(start: int, steps: list[int], xs: list[float]) -> tuple[I64, F64]:
    n = min(len(steps), len(xs))
    return _ts(start, steps[:n]), np.asarray(xs[:n], dtype=np.float64)


def _ema_reference(x: F64, n: int) -> F64:
    return np.asarray(Columns._ema_list(x.tolist(), n), dtype=np.float64)


def _chg_reference(ts: I64, last: F64, d: int) -> F64:
    """`Columns._chg`'s numpy formula."""
    j = np.searchsorted(ts, ts - d, side="right") - 1
    ref = np.where(j >= 0, last[np.maximum(j, 0)], np.nan)
    with np.errstate(all="ignore"):
        out = 100.0 * (last / ref - 1.0)
    out[ref == 0.0] = np.nan
    return np.asarray(out, dtype=np.float64)


def _same(a: Any, b: Any) -> bool:
    return bool(np.asarray(a).tobytes() == np.asarray(b).tobytes())


@settings(max_examples=300, deadline=None)
@given(values, st.integers(1, 60))
def test_ema_kernel_is_the_recurrence(xs: list[float], n: int) -> None:
    x = np.asarray(xs, dtype=np.float64)
    got = feed.floats(feed.ema_kernel(x, 2.0 / (n + 1)))
    assert _same(got, _ema_reference(x, n))


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**3), 10**3), gaps, gaps, st.integers(-3, 60), st.booleans())
def test_search_kernel_is_searchsorted(start: int, a: list[int], b: list[int], d: int,
                                       right: bool) -> None:
    hay, ts = _ts(start, a), _ts(start + 5, b)
    got = np.asarray(feed.search_kernel(hay, ts, d * S, right))
    want = np.searchsorted(hay, ts - d * S, side="right" if right else "left")
    assert got.tolist() == want.tolist()
    self_ = np.asarray(feed.search_kernel(ts, ts, d * S, right))
    assert self_.tolist() == np.searchsorted(ts, ts - d * S,
                                             side="right" if right else "left").tolist()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6), gaps, values, st.integers(0, 60))
def test_chg_kernel_is_the_formula(start: int, steps: list[int], xs: list[float],
                                   d: int) -> None:
    ts, x = _pair(start, steps, xs)
    got = feed.floats(feed.chg_kernel(ts, x, ts, x, d * S))
    assert _same(got, _chg_reference(ts, x, d * S))
    # a haystack of earlier ticks first (the reference path's carried deque, a sentinel)
    k = len(ts) // 2
    hay = np.concatenate([np.asarray([-(2**62)], dtype=np.int64), ts])
    hx = np.concatenate([np.asarray([float("nan")]), x])
    got = feed.floats(feed.chg_kernel(hay, hx, ts[k:], x[k:], d * S))
    j = np.searchsorted(hay, ts[k:] - d * S, side="right") - 1
    ref = hx[j]
    with np.errstate(all="ignore"):
        want = 100.0 * (x[k:] / ref - 1.0)
    want[ref == 0.0] = np.nan
    assert _same(got, want)


def _columns(ts: I64, x: F64) -> Columns:
    n = len(ts)
    return Columns(Ticks(ts, x, x, x, np.ones(n)), SESSION, 0, 200.0)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), gaps, values, st.integers(1, 60), st.integers(1, 40))
def test_columns_equal_with_the_kernels_on_and_off(start: int, steps: list[int],
                                                   xs: list[float], d: int, n: int) -> None:
    """The windows' sparse table on the kernel's searches and one run of queries, the chg
    and the ema equal the numpy formulas (NaN, zeros, duplicated timestamps included)."""
    ts, x = _pair(start, steps, xs)
    specs = [IndicatorSpec("high", window_ns=d * S), IndicatorSpec("low", window_ns=d * S),
             IndicatorSpec("chg", window_ns=d * S), IndicatorSpec("ema", x="last", n=n)]
    old = feed.NATIVE
    try:
        out = {}
        for native in (False, True):
            feed.NATIVE = native
            c = _columns(ts, x)
            out[native] = [c.indicator(s) for s in specs]
    finally:
        feed.NATIVE = old
    for a, b in zip(out[False], out[True]):
        assert _same(a, b)

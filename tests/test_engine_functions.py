"""The language's function units (kestrel/lang/functions.py and the windows, means and operations modules): each indicator's per-tick form
and its column form give the same doubles, bit for bit, on hypothesis-generated series (ties
of timestamps, gaps, constant stretches, prices on a tick grid, values whose int64 sums would
overflow, binary sources such as vwap), tick-based and over bars; the operations' scalar and
column forms agree; and the indicators agree with independent implementations (TA-Lib, the
field's reference; talipp's incremental forms) within the tolerances docs/language.md states,
where the definitions coincide."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.lang.functions import Arguments, Context, Indicator, indicator
from kestrel.lang.means import Stdev
from kestrel.lang.operations import Operation
from kestrel.lang.windows import Atr
from kestrel.lang.registry import DEFINITIONS

S = 1_000_000_000
HALF_TICKS_PER_POINT = 200.0  # half ticks of a 0.01 tick
OPEN = 1_700_000_000 * S
INDICATORS = {name: unit for name, unit in DEFINITIONS.items() if issubclass(unit, Indicator)}
OPERATIONS = {name: unit for name, unit in DEFINITIONS.items() if issubclass(unit, Operation)}
F64 = npt.NDArray[np.float64]


def same(a: F64, b: F64) -> bool:
    """Equal doubles bit for bit, NaN where the other is NaN."""
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b))
                and np.array_equal(a[~nan].view(np.int64), b[~nan].view(np.int64)))


def per_tick(unit: Indicator, ts: npt.NDArray[np.int64], value: F64, exact: Any) -> F64:
    return np.array([unit.update(int(t), float(v), e if isinstance(e, float) else int(e))
                     for t, v, e in zip(ts, value, exact.tolist())], dtype=np.float64)


@st.composite
def series(draw: st.DrawFn) -> tuple[npt.NDArray[np.int64], F64, Any, float]:
    """Timestamps (ties, gaps), a source's values and exact values, and its scale: whole half
    ticks on a grid (sometimes so large that int64 sums would overflow) or binary floats."""
    n = draw(st.integers(1, 260))
    gaps = draw(st.lists(st.sampled_from([0, 0, 1, 1, 1, 2, 7, 61, 600]), min_size=n, max_size=n))
    ts = OPEN + draw(st.integers(0, 90)) * S + np.cumsum(np.array(gaps, dtype=np.int64)) * S
    steps = draw(st.lists(st.sampled_from([-3, -1, 0, 0, 0, 1, 2]), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["grid", "grid", "huge", "binary"]))
    base = {"grid": 20_000, "huge": 12_000_000_000_000, "binary": 0}[kind]
    k = base + np.cumsum(np.array(steps, dtype=np.int64))
    if kind == "binary":  # a vwap-like double: the exact value is the value itself
        value = 100.0 + np.cumsum(np.array(steps, dtype=np.float64)) * 0.0137
        return ts, value, value, 1.0
    return ts, k / HALF_TICKS_PER_POINT, k, HALF_TICKS_PER_POINT


@st.composite
def arguments(draw: st.DrawFn, name: str) -> Arguments:
    spec = DEFINITIONS[name].spec
    values: list[tuple[str, int | float | str]] = []
    fast = draw(st.integers(1, 12))
    for p in spec.params:
        if p.type == "Duration":
            values.append((p.name, draw(st.sampled_from([1, 2, 5, 30, 300])) * S))
        elif p.type == "Count":
            values.append((p.name, {"fast": fast, "slow": fast + draw(st.integers(1, 15))}.get(
                p.name, draw(st.integers(1, 30)))))
        elif p.type == "Number":
            values.append((p.name, draw(st.sampled_from([0.5, 1.0, 2.0, 2.5]))))
        elif p.type == "PriceSeries":
            values.append((p.name, "mid"))
        elif p.type == "Timeframe":
            tf = draw(st.sampled_from([0, 5, 30, 60])) if p.required or p.default is None else draw(
                st.sampled_from([5, 30, 60]))
            if tf:
                values.append((p.name, tf * S))
    return Arguments(tuple(values))


@pytest.mark.parametrize("name", sorted(INDICATORS))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_per_tick_and_column_forms_agree_bit_for_bit(name: str, data: st.DataObject) -> None:
    ts, value, exact, scale = data.draw(series())
    args = data.draw(arguments(name))
    context = Context(scale, OPEN, binary=exact is value)  # a binary source's exact is its value
    unit = INDICATORS[name]
    column = indicator(unit, args, context).column(ts, value, exact)
    ticks = per_tick(indicator(unit, args, context), ts, value, exact)
    assert column.shape == ts.shape and same(ticks, column), (name, args)


def test_stdev_of_a_binary_source_stays_accurate_late_in_a_long_session() -> None:
    """A vwap-like double series of 400,000 ticks: stdev over 50 values late in the session
    agrees with the window's standard deviation computed directly (numpy, two passes), where
    running sums from the session's first tick would have cancelled to noise; zscore and the
    bands read it."""
    rng = np.random.default_rng(7)
    n, window = 400_000, 50
    last = 4000.0 + np.cumsum(rng.normal(0, 0.25, n))
    vwap = np.cumsum(last) / np.arange(1, n + 1)  # moves ever more slowly: a tiny spread
    ts = OPEN + np.arange(n, dtype=np.int64) * S
    args = Arguments((("x", "vwap"), ("n", window), ("tf", 0)))
    got = indicator(Stdev, args, Context(1.0, OPEN, binary=True)).column(ts, vwap, vwap)
    tail = np.lib.stride_tricks.sliding_window_view(vwap[-5000:], window)
    want = tail.std(axis=1)
    assert np.allclose(got[-len(want):], want, rtol=1e-6, atol=0)


def test_the_overflowing_sums_really_run() -> None:
    """Exact values whose int64 sums would overflow: the column forms sum Python ints (the
    per-tick forms' own integers), and still agree."""
    n = 400
    ts = OPEN + np.arange(n, dtype=np.int64) * S
    k = 12_000_000_000_000 + np.cumsum(np.random.default_rng(3).integers(-50, 51, n))
    for name in ("sma", "stdev", "zscore", "bbupper"):
        args = Arguments((("x", "mid"), ("n", 40)) + ((("k", 2.0),) if name == "bbupper" else ()))
        unit = INDICATORS[name]
        column = indicator(unit, args, Context(HALF_TICKS_PER_POINT, OPEN)).column(ts, k / HALF_TICKS_PER_POINT, k)
        ticks = per_tick(indicator(unit, args, Context(HALF_TICKS_PER_POINT, OPEN)), ts, k / HALF_TICKS_PER_POINT, k)
        assert same(ticks, column) and np.isfinite(column[40:]).all(), name


@pytest.mark.parametrize("name", ["abs", "min", "max"])
@given(xs=st.lists(st.floats(allow_infinity=False) | st.just(float("nan")), min_size=2, max_size=40))
def test_the_operations_scalar_and_column_forms_agree(name: str, xs: list[float]) -> None:
    unit = OPERATIONS[name]
    a, b = np.array(xs), np.array(xs[::-1])
    args = (a,) if name == "abs" else (a, b)
    column = np.asarray(unit.column(*args), dtype=np.float64)
    scalar = np.array([unit.scalar(*(float(x[i]) for x in args)) for i in range(len(a))])
    assert same(scalar, column)
    if name != "abs":  # undefined when either is
        assert np.array_equal(np.isnan(column), np.isnan(a) | np.isnan(b))


def test_min_and_max_on_a_number_and_a_column_broadcast() -> None:
    col = np.array([1.0, 5.0, float("nan")])
    assert same(np.asarray(OPERATIONS["min"].column(col, 3.0)), np.array([1.0, 3.0, float("nan")]))
    assert same(np.asarray(OPERATIONS["max"].column(3.0, col)), np.array([3.0, 5.0, float("nan")]))


# ------------------------------------------------------------------ independent references
talib = pytest.importorskip("talib")
talipp = pytest.importorskip("talipp.indicators")


def _walk(n: int, seed: int) -> tuple[npt.NDArray[np.int64], F64, npt.NDArray[np.int64]]:
    """n one-second ticks of a random walk on a 0.01 grid around 100 (whole half ticks)."""
    rng = np.random.default_rng(seed)
    k = 20_000 + 2 * np.cumsum(rng.choice([-2, -1, 0, 0, 1, 2], n))
    return OPEN + np.arange(n, dtype=np.int64) * S, k / HALF_TICKS_PER_POINT, k


def _ours(name: str, ticks: int = 1000, seed: int = 1, **args: int | float | str) -> tuple[F64, F64]:
    ts, value, k = _walk(ticks, seed)
    unit = indicator(INDICATORS[name], Arguments(tuple(args.items())), Context(HALF_TICKS_PER_POINT, OPEN))
    return value, unit.column(ts, value, k)


def close(ours: F64, theirs: F64, start: int, rel: float, abs_: float = 0.0) -> None:
    """Agreement from index `start` on, both defined there."""
    a, b = ours[start:], np.asarray(theirs, dtype=np.float64)[start:]
    assert not np.isnan(a).any() and not np.isnan(b).any()
    np.testing.assert_allclose(a, b, rtol=rel, atol=abs_)


def _talipp(values: list[float | None], n: int) -> F64:
    return np.array([np.nan] * (n - len(values)) + [np.nan if v is None else v for v in values])


def test_sma_stdev_and_the_bands_agree_with_ta_lib_and_talipp() -> None:
    x, sma = _ours("sma", x="mid", n=20)
    close(sma, talib.SMA(x, 20), 19, 1e-12)
    close(sma, _talipp(talipp.SMA(20, x.tolist()).output_values, len(x)), 19, 1e-12)
    _, stdev = _ours("stdev", x="mid", n=20)
    close(stdev, talipp_stdev(x, 20), 19, 1e-9, 1e-12)
    close(stdev, talib.STDDEV(x, 20, 1.0), 19, 1e-6, 1e-9)  # TA-Lib: binary running sums
    _, upper = _ours("bbupper", x="mid", n=20, k=2.0)
    _, lower = _ours("bblower", x="mid", n=20, k=2.0)
    up, mid, low = talib.BBANDS(x, 20, 2.0, 2.0, 0)
    close(upper, up, 19, 1e-9, 1e-9)
    close(lower, low, 19, 1e-9, 1e-9)
    bands = talipp.BB(20, 2.0, x.tolist()).output_values
    close(upper, _talipp([None if b is None else b.ub for b in bands], len(x)), 19, 1e-12)
    close(lower, _talipp([None if b is None else b.lb for b in bands], len(x)), 19, 1e-12)
    _, z = _ours("zscore", x="mid", n=20)
    defined = np.isfinite(z)
    reference = (x - talib.SMA(x, 20)) / talipp_stdev(x, 20)
    close(np.where(defined, z, 0.0), np.where(defined, reference, 0.0), 19, 1e-9, 1e-9)


def talipp_stdev(x: F64, n: int) -> F64:
    return _talipp(talipp.StdDev(n, x.tolist()).output_values, len(x))


def test_ema_and_macd_agree_with_ta_lib_once_the_seeds_are_forgotten() -> None:
    """TA-Lib and talipp seed an ema with the mean of its first n values, Kestrel with the
    first value: the difference decays as (1 - 2/(n+1))^t, below 1e-9 after 30 n values."""
    x, e = _ours("ema", 2000, 1, x="mid", n=20)
    close(e, talib.EMA(x, 20), 600, 1e-9)
    close(e, _talipp(talipp.EMA(20, x.tolist()).output_values, len(x)), 600, 1e-9)
    x, m = _ours("macd", 3000, 1, x="mid", fast=12, slow=26)
    _, s = _ours("macdsignal", 3000, 1, x="mid", fast=12, slow=26, signal=9)
    macd, signal, _hist = talib.MACD(x, 12, 26, 9)
    close(m, macd, 1500, 1e-6, 1e-9)
    close(s, signal, 1500, 1e-6, 1e-9)


def test_rsi_agrees_with_ta_lib_exactly_where_both_are_defined() -> None:
    """Both are Wilder's, seeded with the mean of the first n changes; talipp seeds with n - 1
    changes and one Wilder step, so it agrees once that is forgotten."""
    x, r = _ours("rsi", 2000, 4, n=14)
    close(r, talib.RSI(x, 14), 14, 1e-9)
    close(r, _talipp(talipp.RSI(14, x.tolist()).output_values, len(x)), 400, 1e-9)
    assert np.nanmin(r) >= 0.0 and np.nanmax(r) <= 100.0


def test_windows_and_chg_agree_with_ta_lib_on_one_second_ticks() -> None:
    """On ticks one second apart, high(30s) is the max of the 30 ticks before this one
    (TA-Lib's MAX one tick back) and chg(30s) TA-Lib's ROC over 30 ticks."""
    x, high = _ours("high", d=30 * S)
    _, low = _ours("low", d=30 * S)
    _, chg = _ours("chg", d=30 * S)
    close(high[1:], talib.MAX(x, 30)[:-1], 29, 0.0)
    close(low[1:], talib.MIN(x, 30)[:-1], 29, 0.0)
    close(chg, talib.ROC(x, 30), 30, 1e-9)


def test_atr_is_the_mean_of_ta_lib_true_ranges() -> None:
    """TA-Lib's ATR smooths the true range Wilder's way; Kestrel's atr is its simple mean: the
    mean of TA-Lib's TRANGE over the same bars."""
    ts, x, k = _walk(3000, 5)
    n = 14
    col = indicator(Atr, Arguments((("n", n), ("tf", 60 * S))), Context(1.0, OPEN)).column(ts, x, k)
    bars = x.reshape(-1, 60)
    high, low, last = bars.max(axis=1), bars.min(axis=1), bars[:, -1]
    mean_tr = talib.SMA(talib.TRANGE(high, low, last), n)
    done = col[60::60][: len(bars) - 1]  # after each completed bar: its first tick's value
    close(done, mean_tr[: len(done)], n, 1e-9)
    close(Atr.over_bars(high, low, last, n), mean_tr, n, 1e-9)

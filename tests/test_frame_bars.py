"""Bars from ticks (hand-computed), MarketData slicing and price precision."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from kestrel.market import MarketData, SessionSpec, Ticks, session_bars, time_bars
from kestrel.market.instrument import decimals_for

S = 1_000_000_000


def _ticks(rows: list[tuple[int, float, float]]) -> Ticks:
    ts, last, size = zip(*rows)
    return Ticks.from_arrays([t * S for t in ts], last, last, last, size)


def test_time_bars_ohlcv_vwap() -> None:
    t = _ticks([(0, 10.0, 1), (30, 12.0, 3), (59, 11.0, 0), (60, 9.0, 2), (185, 8.0, 0), (190, 10.0, 0)])
    b = time_bars(t, 60)
    assert b.start_ns.tolist() == [0, 60 * S, 180 * S]
    assert b.open.tolist() == [10.0, 9.0, 8.0]
    assert b.high.tolist() == [12.0, 9.0, 10.0]
    assert b.low.tolist() == [10.0, 9.0, 8.0]
    assert b.close.tolist() == [11.0, 9.0, 10.0]
    assert b.volume.tolist() == [4.0, 2.0, 0.0]
    assert b.vwap.tolist() == [(10 * 1 + 12 * 3) / 4, 9.0, 9.0]  # zero volume: plain mean of last
    assert b.count.tolist() == [3, 1, 2]
    assert len(b.tail(2)) == 2 and b.tail(2).open.tolist() == [9.0, 8.0]


def test_time_bars_align_on_wall_clock_offset() -> None:
    # offset -4h: a 1h bar starting at 13:00 UTC is 09:00 local; a tick at 13:30Z falls in it
    t = _ticks([(13 * 3600 + 1800, 5.0, 1)])
    b = time_bars(t, 3600, -4 * 3600 * S)
    assert b.start_ns.tolist() == [13 * 3600 * S]
    with pytest.raises(ValueError, match="timeframe must be positive"):
        time_bars(t, 0)


def test_session_bars() -> None:
    opens = np.array([100 * S, 200 * S], dtype=np.int64)
    t = _ticks([(50, 1.0, 1), (100, 2.0, 1), (150, 3.0, 1), (210, 4.0, 2)])
    b = session_bars(t, opens)
    assert b.start_ns.tolist() == [100 * S, 200 * S]  # the tick before the first open is dropped
    assert b.open.tolist() == [2.0, 4.0] and b.close.tolist() == [3.0, 4.0]
    assert b.volume.tolist() == [2.0, 2.0]


def test_market_data_slicing_and_precision() -> None:
    s1, s2 = SessionSpec(dt.date(2024, 1, 2), tz="UTC"), SessionSpec(dt.date(2024, 1, 3), tz="UTC")
    ts = [s1.open_ns, s1.open_ns + S, s2.open_ns]
    d = MarketData("X", 0.25, Ticks.from_arrays(ts, [1, 1, 1], [2, 2, 2]), (s1, s2))
    assert d.price_decimals == 2 and d.format_price(1.5) == "1.50" and d.format_price(float("nan")) == "n/a"
    u = d.until(s1.open_ns + S)
    assert len(u.ticks) == 2 and u.sessions == (s1,)
    assert np.shares_memory(u.ticks.ts, d.ticks.ts)
    assert len(d.between(s1.open_ns + 1, s2.open_ns + 1).ticks) == 2
    assert d.session_index_at(s1.open_ns - 1) == -1 and d.session_index_at(s2.open_ns) == 1
    assert [decimals_for(x) for x in (1.0, 0.01, 0.00001, 0.5, 0.0025)] == [0, 2, 5, 1, 4]
    with pytest.raises(ValueError, match="tick size must be a positive number"):
        decimals_for(0.0)
    with pytest.raises(ValueError, match="must not overlap"):
        MarketData("X", 0.01, Ticks.empty(), (s2, s1))

"""Frozen snapshots: cutoff semantics, immutability, no copies, and the no-look-ahead property."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data import load
from kestrel.data.sample import load_sample
from kestrel.frame import (
    DEFAULT_CATALOG,
    AccountState,
    MarketData,
    Ordinal,
    ResolvedPane,
    ResolvedView,
    SessionSpec,
    Ticks,
    briefing,
    freeze,
    materialize,
)
from kestrel.frame.ticks import NS_PER_S


def _tiny() -> MarketData:
    s = SessionSpec(dt.date(2024, 1, 2))
    o = s.open_ns
    ts = [o + k * NS_PER_S for k in range(10)]
    px = [10.0 + 0.01 * k for k in range(10)]
    return MarketData("T", 0.01, Ticks.from_arrays(ts, px, [p + 0.01 for p in px], px, [1] * 10), (s,))


def test_cutoff_is_ordinal_time_minus_guard_inclusive() -> None:
    d = _tiny()
    o = d.sessions[0].open_ns
    snap = freeze(d, o + 8 * NS_PER_S, guard_ns=3 * NS_PER_S)
    assert snap.cutoff_ns == o + 5 * NS_PER_S
    assert len(snap.ticks) == 6  # ticks at +0..+5 s, the one at the cutoff included
    assert snap.time_ns == o + 8 * NS_PER_S


def test_default_guard_is_five_minutes() -> None:
    d = _tiny()
    snap = freeze(d, d.sessions[0].open_ns + 301 * NS_PER_S)
    assert snap.cutoff_ns == d.sessions[0].open_ns + NS_PER_S
    assert len(snap.ticks) == 2


def test_snapshot_is_read_only_views_without_copy() -> None:
    d = _tiny()
    snap = freeze(d, d.sessions[0].open_ns + 305 * NS_PER_S)
    for name in ("ts", "bid", "ask", "last", "size"):
        arr = getattr(snap.ticks, name)
        assert np.shares_memory(arr, getattr(d.ticks, name))
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 0
    with pytest.raises(AttributeError):
        snap.cutoff_ns = 0  # type: ignore[misc]


def test_sessions_after_the_ordinal_are_hidden() -> None:
    d = load_sample()
    day3 = d.sessions[2]
    snap = freeze(d, day3.wall_clock_ns(11, 0))
    assert snap.data.sessions == d.sessions[:3]
    assert int(snap.ticks.ts[-1]) <= snap.cutoff_ns
    assert snap.account == AccountState()


def _truncated(d: MarketData, cutoff: int) -> MarketData:
    t = d.ticks.until(cutoff)
    copy = Ticks(t.ts.copy(), t.bid.copy(), t.ask.copy(), t.last.copy(), t.size.copy())
    return MarketData(d.symbol, d.tick_size, copy, d.sessions)


ALL_PANES = ResolvedView(
    "all",
    (
        ResolvedPane("quote"),
        ResolvedPane("bars", (("tf", 300), ("n", 12))),
        ResolvedPane("bars", (("tf", 60), ("n", 30))),
        ResolvedPane("bars", (("tf", 86_400), ("n", 5))),
        ResolvedPane("levels", (("or", 1800),)),
        ResolvedPane("stats", (("tf", 300), ("n", 14))),
        ResolvedPane("tape", (("n", 10),)),
        ResolvedPane("position"),
        ResolvedPane("plan"),
    ),
    4000,
)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=6 * 86_400 - 1), st.integers(min_value=0, max_value=900))
def test_no_look_ahead(offset_s: int, guard_s: int) -> None:
    """Rendering every pane on the full data and on data truncated at the cutoff gives
    identical text: nothing after the cutoff influences the snapshot."""
    d = load_sample()
    t = d.sessions[0].open_ns - 3600 * NS_PER_S + offset_s * NS_PER_S
    full = freeze(d, t, guard_s * NS_PER_S)
    cut = freeze(_truncated(d, t - guard_s * NS_PER_S), t, guard_s * NS_PER_S)
    assert materialize(ALL_PANES, full) == materialize(ALL_PANES, cut)
    o = Ordinal(1, "X", t)
    assert briefing(full, o) == briefing(cut, o)


def test_materialize_is_deterministic() -> None:
    d = load_sample()
    t = d.sessions[-1].wall_clock_ns(10, 30)
    a = materialize(ALL_PANES, freeze(d, t))
    b = materialize(ALL_PANES, freeze(d, t))
    assert a == b and len(a) > 100
    assert set(DEFAULT_CATALOG.names()) >= {"quote", "bars", "levels", "stats", "tape", "position", "plan"}


def test_no_look_ahead_on_real_data(shared_data: Path) -> None:
    """The same property on real, irregular data (bars expanded to ticks, FX quotes)."""
    base = shared_data
    rng = np.random.default_rng(5)
    for rel, preset in [("bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv", "cme_bars"),
                        ("fx_quote_ticks/nautilus_truefx_usdjpy_ticks_20130101.csv", "truefx")]:
        d = load(base / rel, preset).data
        lo, hi = int(d.ticks.ts[0]), int(d.ticks.ts[-1])
        for t in rng.integers(lo, hi, size=8).tolist():
            full = freeze(d, t)
            cut = freeze(_truncated(d, t - 300 * NS_PER_S), t)
            assert materialize(ALL_PANES, full) == materialize(ALL_PANES, cut)

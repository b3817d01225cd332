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
    ArgSpec,
    Ordinal,
    ResolvedPane,
    ResolvedView,
    briefing,
    freeze,
    materialize,
)
from kestrel.market import AccountState, MarketData, SessionSpec, Ticks
from kestrel.frame.corporate import CorporateEvent, CorporateEvents
from kestrel.market.corporate import Dividend, Split
from kestrel.market.news import NewsFeed, NewsItem
from kestrel.market.ticks import NS_PER_S


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
    return MarketData(d.symbol, d.tick_size, copy, d.sessions, d.crossed_kept, d.instrument)  # same instrument


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


def _arg_values(a: ArgSpec) -> st.SearchStrategy[int | str]:
    """Every legal value of one pane argument (the catalog's schema, not a sample of it)."""
    if a.type == "duration":
        assert a.min is not None and a.max is not None
        step = a.step or 1
        return st.integers(-(-a.min // step), a.max // step).map(lambda k: k * step)
    if a.type == "count":
        assert a.min is not None and a.max is not None
        return st.integers(a.min, a.max)
    if a.type == "symbol":  # a per-symbol pane's instrument (another one: the pane refuses)
        return st.sampled_from(["self", "SAMPLE", "sample", "XYZ"])
    if not a.choices:  # a free word: the news and events panes' symbol
        return st.sampled_from(["self", "all", "SAMPLE", "sample", "XYZ"])
    return st.sampled_from(a.choices)


@st.composite
def _every_pane(draw: st.DrawFn) -> tuple[ResolvedPane, ...]:
    """One request of every catalog pane with arguments drawn across their whole range."""
    return tuple(
        ResolvedPane(spec.name, tuple((a.name, draw(_arg_values(a))) for a in spec.args))
        for spec in DEFAULT_CATALOG
    )


def _boundary_cutoffs(d: MarketData) -> list[int]:
    """Cutoffs where look-ahead bugs hide: before the first tick; around every session's open
    (1 ns before, at, 1 ns after, 1 ns before and at its first tick, in its first minutes)
    and close."""
    ts = d.ticks.ts
    first = int(ts[0])
    out = [first - 86_400 * NS_PER_S, first - 1, first]
    for s in d.sessions:
        o, c = s.open_ns, s.close_ns
        t0 = int(ts[min(d.ticks.index_at(o, side="left"), len(ts) - 1)])
        out += [o - 1, o, o + 1, t0 - 1, t0, o + 59 * NS_PER_S, o + 61 * NS_PER_S, o + 299 * NS_PER_S,
                o + 1801 * NS_PER_S, c - 1, c, c + 1]
    return out


def _news_around(d: MarketData, every_s: int = 2_221) -> NewsFeed:
    """Headlines about the data's symbol and another one, every `every_s` seconds from a day
    before its first tick to a day after its last, some repeated (the same title twice)."""
    lo, hi = int(d.ticks.ts[0]) - 86_400 * NS_PER_S, int(d.ticks.ts[-1]) + 86_400 * NS_PER_S
    items = [NewsItem(ts, (d.symbol,) if k % 3 else (d.symbol, "OTHER"), "Wire" if k % 2 else "",
                      f"headline {k // 2} about {d.symbol}", "" if k % 4 else f"summary of {k}")
             for k, ts in enumerate(range(lo, hi, every_s * NS_PER_S))]
    return NewsFeed.of(items)


def _future_edited(feed: NewsFeed, cutoff: int) -> NewsFeed:
    """`feed` with every item published at or after `cutoff` edited or deleted."""
    out = []
    for k, it in enumerate(feed):
        if it.ts < cutoff:
            out.append(it)
        elif k % 2:
            out.append(NewsItem(it.ts - (it.ts - cutoff) // 2, it.symbols, "Edited", "EDITED " + it.title))
    return NewsFeed.of(out)


def _events_around(d: MarketData) -> CorporateEvents:
    """A split and a dividend of the data's symbol on every other session."""
    splits = [Split(d.symbol, s.date, 2 + k, 1) for k, s in enumerate(d.sessions) if k % 2 == 0]
    dividends = [Dividend(d.symbol, s.date, 0.25 * (k + 1)) for k, s in enumerate(d.sessions) if k % 2 == 1]
    return CorporateEvents.of(splits, dividends, d.sessions)


def _events_edited(events: CorporateEvents, cutoff: int) -> CorporateEvents:
    """`events` with every event known at or after the cutoff deleted, or replaced by another."""
    out = [e for e in events.items if e.ts < cutoff]
    out += [CorporateEvent(e.ts, Split(e.symbol, e.date, 9, 1)) for k, e in enumerate(events.items) if e.ts >= cutoff and k % 2]
    return CorporateEvents(tuple(sorted(out, key=lambda e: e.ts)))


def _same_panes(d: MarketData, cutoff: int, guard_ns: int, panes: tuple[ResolvedPane, ...]) -> None:
    t = cutoff + guard_ns
    news = _news_around(d)
    events = _events_around(d)
    full = freeze(d, t, guard_ns, news=news, events=events)
    cut = freeze(_truncated(d, cutoff), t, guard_ns, news=_future_edited(news, cutoff),
                 events=_events_edited(events, cutoff))
    assert all(e.ts < cutoff for e in full.events.items)
    assert full.cutoff_ns == cutoff
    for p in panes:
        spec = DEFAULT_CATALOG.get(p.name)
        assert spec is not None
        # pane by pane (no budget cut can hide a difference)
        assert spec.builder(full, dict(p.args)) == spec.builder(cut, dict(p.args)), (p, cutoff)


def _random_panes(rng: np.random.Generator) -> tuple[ResolvedPane, ...]:
    """Like `_every_pane`, drawn from a seeded generator (deterministic, outside @given)."""
    out = []
    for spec in DEFAULT_CATALOG:
        args: list[tuple[str, int | str]] = []
        for a in spec.args:
            if a.type in ("ident", "symbol"):
                args.append((a.name, ["self", "all", "XYZ"][int(rng.integers(0, 3))]))
                continue
            assert a.min is not None and a.max is not None
            step = a.step or 1
            args.append((a.name, int(rng.integers(-(-a.min // step), a.max // step + 1)) * step))
        out.append(ResolvedPane(spec.name, tuple(args)))
    return tuple(out)


_SAMPLE = load_sample()
_WEEK_START = _SAMPLE.sessions[0].open_ns - 2 * 3600 * NS_PER_S
_CUTOFFS = (
    st.sampled_from(_boundary_cutoffs(_SAMPLE))
    | st.integers(0, 7 * 86_400 * NS_PER_S).map(lambda x: _WEEK_START + x)
    | st.integers(0, len(_SAMPLE.ticks) - 1).map(lambda k: int(_SAMPLE.ticks.ts[k]) - 1)  # 1 ns short
)
_GUARDS = st.sampled_from([0, 1, 300 * NS_PER_S, 900 * NS_PER_S]) | st.integers(0, 3600 * NS_PER_S)


@settings(max_examples=60, deadline=None)
@given(_every_pane(), _CUTOFFS, _GUARDS)
def test_no_look_ahead_every_pane_any_args(panes: tuple[ResolvedPane, ...], cutoff: int, guard_ns: int) -> None:
    """Every pane, arguments anywhere in their schema, cutoffs at session boundaries, in the
    first minutes of a session, before the first tick, or anywhere in the week."""
    _same_panes(_SAMPLE, cutoff, guard_ns, panes)


def test_no_look_ahead_on_real_data(shared_data: Path) -> None:
    """The same property on real, irregular data (bars expanded to ticks with overnight
    sessions, FX quotes), at every session boundary and random instants, random arguments."""
    base = shared_data
    rng = np.random.default_rng(5)
    for rel, preset in [("bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv", "cme_bars"),
                        ("fx_quote_ticks/nautilus_truefx_usdjpy_ticks_20130101.csv", "truefx")]:
        d = load(base / rel, preset).data
        lo, hi = int(d.ticks.ts[0]), int(d.ticks.ts[-1])
        cutoffs = _boundary_cutoffs(d)[:60] + rng.integers(lo, hi, size=8).tolist()
        for k, cutoff in enumerate(cutoffs):
            panes = _random_panes(rng) if k % 2 else ALL_PANES.panes
            _same_panes(d, int(cutoff), 300 * NS_PER_S, panes)


def test_session_length() -> None:
    h = 3600 * NS_PER_S
    assert SessionSpec.us_equity(dt.date(2024, 4, 15)).length_ns == 6 * h + h // 2
    assert SessionSpec.around_the_clock(dt.date(2024, 4, 15)).length_ns == 24 * h
    # FX 17:00 New York on Sat 2024-03-09 to 17:00 on Sun 03-10: clocks went forward, 23 h
    fx = SessionSpec(dt.date(2024, 3, 9), dt.time(17, 0), dt.time(17, 0), "America/New_York")
    assert fx.length_ns == 23 * h


def test_times_between_sessions_read_on_the_clock_of_their_instant() -> None:
    """US clocks moved forward on Sunday 2024-03-10: Friday's session is on EST (UTC-5), Monday's
    pre-market and open on EDT (UTC-4). A Monday 08:47 print and the 09:25 cutoff read as such,
    not an hour early on Friday's clock; Friday's 17:00 post-market print stays on EST."""
    fri, mon = SessionSpec(dt.date(2024, 3, 8)), SessionSpec(dt.date(2024, 3, 11))
    utc = dt.timezone.utc
    post = int(dt.datetime(2024, 3, 8, 22, 0, tzinfo=utc).timestamp()) * NS_PER_S  # 17:00 EST
    pre = int(dt.datetime(2024, 3, 11, 12, 47, tzinfo=utc).timestamp()) * NS_PER_S  # 08:47 EDT
    ts = [fri.open_ns, fri.open_ns + 60 * NS_PER_S, post, pre, mon.open_ns + 60 * NS_PER_S]
    px = [10.0, 10.1, 10.2, 10.3, 10.4]
    d = MarketData("T", 0.01, Ticks.from_arrays(ts, px, [p + 0.01 for p in px], px, [1] * 5), (fri, mon))
    snap = freeze(d, mon.open_ns, guard_ns=300 * NS_PER_S)
    assert (snap.clock(pre), snap.clock(post), snap.clock(snap.cutoff_ns)) == ("08:47:00", "17:00:00", "09:25:00")
    assert snap.stamp(pre) == "03-11 08:47:00" and snap.stamp(post) == "03-08 17:00:00"
    assert snap.clock(fri.open_ns) == "09:30:00" and snap.clock(mon.open_ns) == "09:30:00"
    # the vectorized offsets (bars bucket by them) agree with the zone at every instant
    every = np.arange(fri.open_ns, mon.open_ns + 3600 * NS_PER_S, 1800 * NS_PER_S, dtype=np.int64)
    zone = fri.zone
    want = [int(dt.datetime.fromtimestamp(int(t) // NS_PER_S, tz=zone).utcoffset().total_seconds())  # type: ignore[union-attr]
            * NS_PER_S for t in every]
    assert snap.offsets_at(every).tolist() == want

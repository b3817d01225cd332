"""The frozen universe and its panes: freezing every member at one cutoff (views, the universe's
sessions, missing sessions said and never filled), point-in-time adjusted prices, the watchlist,
portfolio and events panes against hand computations, per-symbol pane arguments, universe view
resolution, and the look-ahead property: a briefing at a cutoff is the same whatever the data,
the factor rows, the news and the corporate events after it say (edited or deleted)."""

from __future__ import annotations

import csv
import datetime as dt
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel import lang
from kestrel.data.corporate import adjust
from kestrel.data.symbols import SymbolTerms
from kestrel.data.universe import load_universe
from kestrel.frame import DEFAULT_CATALOG, Ordinal, ResolvedPane, ResolvedView, ViewError, freeze, materialize
from kestrel.frame.universe import UniverseSnapshot, freeze_universe
from kestrel.frame.universe_view import (
    default_universe_view,
    materialize_universe,
    render_pane,
    resolve_universe_view,
    universe_briefing,
)
from kestrel.lang import ast
from kestrel.market.corporate import FactorRow, actions
from kestrel.market.data import MarketData
from kestrel.market.news import NewsFeed, NewsItem
from kestrel.market.portfolio import Holding, PortfolioBounds, PortfolioState
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.market.universe import Member, Universe

DAYS = [dt.date(2024, 1, d) for d in (2, 3, 4, 5, 8, 9, 10, 11, 12)]  # XNYS sessions, index 0..8
BBB_MISSING = (dt.date(2024, 1, 5), dt.date(2024, 1, 8))
SPLIT_DAY = dt.date(2024, 1, 9)  # CCC splits 2:1: raw prices halve, volumes double


def _rows() -> list[dict[str, object]]:
    """AAA closes 100+i (volume 1000+100i); BBB 50+i (volume 500+50i) without bars on 01-05 and
    01-08; CCC raw 200+2i before its 2:1 split on 01-09 and 100+i from it (volume 2000, then
    4000). Opens half a point under the close, highs and lows a point either side."""
    out: list[dict[str, object]] = []
    for i, d in enumerate(DAYS):
        for sym, close, vol in (("AAA", 100 + i, 1000 + 100 * i), ("BBB", 50 + i, 500 + 50 * i),
                                ("CCC", (200 + 2 * i) if d < SPLIT_DAY else 100 + i, 2000 if d < SPLIT_DAY else 4000)):
            if sym == "BBB" and d in BBB_MISSING:
                continue
            out.append({"date": d.isoformat(), "symbol": sym, "open": close - 0.5, "high": close + 1,
                        "low": close - 1, "close": close, "volume": vol})
    return out


FACTOR_ROWS = {"CCC": (FactorRow(dt.date(2024, 1, 8), 1.0, 0.5, 216.0), FactorRow(dt.date(2050, 1, 3), 1.0, 1.0, 0.0))}


def _load(tmp: Path) -> Universe:
    path = tmp / "tiny.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, ["date", "symbol", "open", "high", "low", "close", "volume"])
        w.writeheader()
        w.writerows(_rows())
    terms = {sym: SymbolTerms(tick_size=0.01) for sym in ("AAA", "BBB", "CCC")}
    return load_universe(path, factors=FACTOR_ROWS, instruments=terms).universe


TINY = _load(Path(tempfile.mkdtemp(prefix="kestrel-universe-")))


def _open(i: int) -> int:
    return TINY.sessions[i].open_ns


def _state(aaa: int = 100) -> PortfolioState:
    return PortfolioState("USD", 100_000.0, 100_000.0 - aaa * 100.0, 100_000.0 + aaa * 5.0, aaa * 105.0,
                          aaa * 105.0, 1 if aaa else 0,
                          (Holding("AAA", aaa, 100.0 if aaa else None, 105.0 if aaa else None, aaa * 105.0,
                                   aaa * 5.0), Holding("BBB"), Holding("CCC")))


def _snap(i: int, guard_s: int = 300, **kw: object) -> UniverseSnapshot:
    t = _open(i)
    return freeze_universe(TINY, t - guard_s * NS_PER_S, kw.pop("state", _state()),  # type: ignore[arg-type]
                           time_ns=t, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# freezing


def test_members_are_frozen_at_the_cutoff_over_the_universes_sessions() -> None:
    snap = _snap(6)
    assert snap.symbols == ("AAA", "BBB", "CCC")
    assert snap.cutoff_ns == _open(6) - 300 * NS_PER_S and snap.time_ns == _open(6)
    for m in snap.members:
        assert [s.date for s in m.data.sessions] == DAYS[:7]  # today's session, still without ticks
        assert len(m.ticks) and int(m.ticks.ts[-1]) <= snap.cutoff_ns
        assert not m.ticks.last.flags.writeable
    aaa = snap.members[0]
    assert np.shares_memory(aaa.ticks.last, TINY["AAA"].adjusted.ticks.last)  # no factor rows: views
    assert len(aaa.ticks) == 5 * 6  # five ticks a daily bar, six sessions before the cutoff
    assert snap.missing == ((), BBB_MISSING, ())
    assert len(snap.members[1].session_ticks(3)) == 0  # an empty session, not a filled one


def test_missing_sessions_are_those_closed_by_the_cutoff() -> None:
    assert _snap(4).missing[1] == (dt.date(2024, 1, 5),)  # 01-08 has not closed at its OPEN
    assert _snap(3).missing[1] == ()
    late = freeze_universe(TINY, TINY.sessions[4].close_ns, None)
    assert late.missing[1] == BBB_MISSING


def test_prices_are_adjusted_point_in_time() -> None:
    """Before the split the cutoff date's factor (0.5) re-bases the adjusted series to the raw
    prices; from the ex-date's start on, the prior days read halved and the split is an event."""
    before = _snap(5, guard_s=17 * 3600)  # 01-08 16:30: the split is tomorrow
    ccc = before.members[2]
    assert float(ccc.ticks.last[-1]) == 208.0 and float(ccc.ticks.size[-1]) == 400.0  # raw: 2000 / 5
    assert len(before.events) == 0
    at_open = _snap(5)  # 01-09 09:25: the ex-date has begun
    ccc = at_open.members[2]
    assert float(ccc.ticks.last[-1]) == 104.0 and float(ccc.ticks.size[-1]) == 800.0  # (2000 / 5) / 0.5
    assert [(e.symbol, e.date) for e in at_open.events.items] == [("CCC", SPLIT_DAY)]


def test_freeze_refuses_an_ordinal_before_its_cutoff_and_an_empty_universe() -> None:
    with pytest.raises(ValueError, match="before the cutoff"):
        freeze_universe(TINY, _open(3), None, time_ns=_open(3) - 1)
    with pytest.raises(ValueError, match="at least one member"):
        freeze_universe(Universe((), TINY.sessions, "XNYS"), _open(3), None)


# ------------------------------------------------------------------------------------------
# the panes, against hand computations


def test_watchlist_lines_by_hand() -> None:
    """At OPEN of 01-10 the reference session is 01-09 (index 5). AAA: 105 vs 104 and 100, volume
    1500 over the mean 1200 of sessions 0-4. BBB: no bar on 01-08, so chg1 n/a; 55 vs 50; 750 over
    (500+550+600)/3. CCC (split-adjusted): 105 vs 104 and 100, 4000 over 4000."""
    text = materialize_universe(default_universe_view(), _snap(6))
    watch = text.split("\n\n")[0]
    assert watch == (
        "WATCHLIST 3 at 01-09\n"
        "sym   last chg1%  chg5% rvol pos\n"
        "AAA 105.00 +0.96  +5.00 1.25 100\n"
        "BBB  55.00   n/a +10.00 1.36   0\n"
        "CCC 105.00 +0.96  +5.00 1.00   0\n"
        "gaps: no bars 01-05..01-08 (2 sessions): BBB"
    )
    rows = {line.split()[0]: line.split() for line in watch.splitlines()[2:5]}
    assert rows["AAA"] == ["AAA", "105.00", "+0.96", "+5.00", "1.25", "100"]
    assert rows["BBB"] == ["BBB", "55.00", "n/a", "+10.00", "1.36", "0"]
    assert rows["CCC"] == ["CCC", "105.00", "+0.96", "+5.00", "1.00", "0"]
    assert watch.endswith("gaps: no bars 01-05..01-08 (2 sessions): BBB")


def test_a_member_without_a_bar_in_the_reference_session_says_so() -> None:
    watch = materialize_universe(default_universe_view(), _snap(5)).split("\n\n")[0]  # reference 01-08
    bbb = next(line for line in watch.splitlines() if line.startswith("BBB"))
    assert bbb.split()[1:6] == ["n/a", "n/a", "n/a", "n/a", "0"]
    assert bbb.endswith("no bar; last 01-04 52.00")  # its last bar, dated: nothing carried forward


def test_portfolio_pane_by_hand() -> None:
    text = materialize_universe(default_universe_view(), _snap(6))
    port = text.split("\n\n")[1]
    assert port == (
        "PORTFOLIO USD cash 90000.00 equity 100500.00 gross 10500.00 0.10x net 10500.00 open 1\n"
        "sym pos    avg   mark    value    upnl\n"
        "AAA 100 100.00 105.00 10500.00 +500.00"
    )
    flat = materialize_universe(default_universe_view(), _snap(6, state=_state(0))).split("\n\n")[1]
    assert flat == "PORTFOLIO USD cash 100000.00 equity 100000.00 gross 0.00 0.00x net 0.00 open 0"


def test_portfolio_lists_the_largest_positions_first_and_counts_the_rest() -> None:
    state = PortfolioState("USD", 1000.0, 0.0, 1000.0, 700.0, -100.0, 3,
                           (Holding("AAA", 2, 100.0, 105.0, 210.0), Holding("BBB", -5, 60.0, 58.0, -290.0),
                            Holding("CCC", 1, 100.0, 200.0, 200.0)))
    snap = _snap(6, state=state)
    text = DEFAULT_CATALOG.get("portfolio").universe(snap, {"n": 2})  # type: ignore[union-attr,misc]
    assert [line.split()[0] for line in text.splitlines()[2:]] == ["BBB", "AAA", "..."]
    assert text.splitlines()[-1] == "... 1 more"


def test_events_pane_newest_first_and_by_symbol() -> None:
    snap = _snap(8)
    spec = DEFAULT_CATALOG.get("events")
    assert spec is not None and spec.universe is not None
    assert spec.universe(snap, {"n": 5, "symbol": "self"}) == "EVENTS all 1\n2024-01-09 CCC split 2:1"
    assert spec.universe(snap, {"n": 5, "symbol": "ccc"}) == "EVENTS CCC 1\n2024-01-09 CCC split 2:1"
    assert spec.universe(snap, {"n": 5, "symbol": "AAA"}) == "EVENTS AAA none"
    assert spec.universe(snap, {"n": 5, "symbol": "ZZZ"}).startswith("EVENTS ZZZ: no such symbol here")
    assert spec.universe(_snap(5, guard_s=17 * 3600), {"n": 5, "symbol": "all"}) == "EVENTS all none"


def test_events_pane_with_dividends_on_a_single_symbol_snapshot() -> None:
    from kestrel.frame.corporate import CorporateEvents
    from kestrel.market.corporate import Dividend, Split

    d = TINY["CCC"].data
    events = CorporateEvents.of([Split("CCC", DAYS[5], 2, 1)], [Dividend("CCC", DAYS[2], 0.47), Dividend("CCC", DAYS[7], 0.5)],
                                TINY.sessions)
    snap = freeze(d, _open(8), events=events)
    spec = DEFAULT_CATALOG.get("events")
    assert spec is not None
    assert spec.builder(snap, {"n": 5, "symbol": "self"}) == (
        "EVENTS CCC 3\n2024-01-11 CCC dividend 0.50\n2024-01-09 CCC split 2:1\n2024-01-04 CCC dividend 0.47")
    assert spec.builder(snap, {"n": 1, "symbol": "self"}) == "EVENTS CCC 1 of 3\n2024-01-11 CCC dividend 0.50"
    early = freeze(d, TINY.sessions[6].close_ns, events=events)  # 01-10's close: 01-11 not begun
    assert spec.builder(early, {"n": 5, "symbol": "self"}) == (
        "EVENTS CCC 2\n2024-01-09 CCC split 2:1\n2024-01-04 CCC dividend 0.47")


def test_per_symbol_panes_read_their_member() -> None:
    snap = _snap(6)
    view = lang.parse("VIEW v: quote(BBB), bars(CCC, 1d, 3), position(AAA)")
    assert isinstance(view, ast.View)
    text = materialize_universe(resolve_universe_view(view, snap), snap)
    quote, bars, position = text.split("\n\n")
    assert quote.startswith("QUOTE BBB 01-09 ") and "last 55.00" in quote
    assert bars.splitlines()[0] == "BARS CCC 1d last 3" and bars.splitlines()[-1].split()[:5] == [
        "01-09", "104.50", "106.00", "104.00", "105.00"]
    assert position.startswith("POSITION AAA long 100 @ 100.00")


def test_universe_view_resolution_fails_closed() -> None:
    snap = _snap(6)
    view = lang.parse("VIEW v: quote, bars(XYZ, 1d, 3), tape(AAA), tape(aaa), quote(BB), watchlist")
    assert isinstance(view, ast.View)
    with pytest.raises(ViewError) as info:
        resolve_universe_view(view, snap)
    assert info.value.problems == (
        "quote: name the symbol in a universe session: quote(AAA)",
        "bars: no symbol 'XYZ' in this session; symbols: AAA, BBB, CCC",
        "duplicate pane tape(AAA): request each pane once",
        "quote: no symbol 'BB' in this session (did you mean 'BBB'?); symbols: AAA, BBB, CCC",
    )
    ok = lang.parse("VIEW v: quote(AAA), quote(BBB), bars(5m, 3)")  # bars without a symbol: refused
    assert isinstance(ok, ast.View)
    with pytest.raises(ViewError, match="bars: name the symbol"):
        resolve_universe_view(ok, snap)


def test_a_leading_word_is_the_symbol_in_a_one_symbol_session() -> None:
    from kestrel.data.sample import load_sample
    from kestrel.frame import briefing, resolve_view

    d = load_sample()
    snap = freeze(d, d.sessions[-1].wall_clock_ns(10, 30))
    with_symbol = lang.parse("VIEW v: bars(SAMPLE, 5m, 3), tape(sample, 2)")
    without = lang.parse("VIEW v: bars(5m, 3), tape(2)")
    assert isinstance(with_symbol, ast.View) and isinstance(without, ast.View)
    o = Ordinal(1, "10:30", d.sessions[-1].wall_clock_ns(10, 30))
    named = resolve_view(with_symbol, symbols=("SAMPLE",))
    assert [p.call() for p in named.panes] == ["bars(SAMPLE, tf=5m, n=3)", "tape(sample, n=2)"]
    assert [p.call() for p in resolve_view(without).panes] == ["bars(tf=5m, n=3)", "tape(n=2)"]
    assert briefing(snap, o, with_symbol) == briefing(snap, o, without)
    other = lang.parse("VIEW v: quote(AAPL)")
    assert isinstance(other, ast.View)
    with pytest.raises(ViewError, match="no symbol 'AAPL' in this session"):
        briefing(snap, o, other)
    # resolved without the session's symbols, the pane itself refuses
    text = materialize(resolve_view(other), snap)
    assert text == "QUOTE AAPL: no such symbol here; this session trades SAMPLE"


# ------------------------------------------------------------------------------------------
# look-ahead: the future, edited or deleted, never changes a briefing


def _cutoff_day(cutoff: int) -> dt.date:
    """The cutoff's exchange date (the zone of the first session closing after it)."""
    closes = [s.close_ns for s in TINY.sessions]
    k = min(int(np.searchsorted(closes, cutoff, side="right")), len(TINY.sessions) - 1)
    s = TINY.sessions[k]
    return dt.date(1970, 1, 1) + dt.timedelta(days=(cutoff + s.utc_offset_ns) // (86_400 * NS_PER_S))


def _future_rows(rows: tuple[FactorRow, ...], day: dt.date, k: float, seed: int) -> tuple[FactorRow, ...]:
    """Factor rows as another future would write them: every row dated before `day` times `k`
    (a power of two: the factors of the later events, exact in binary), the first row on or
    after it the same, then made-up rows (a split and a dividend that never happened)."""
    before = tuple(FactorRow(r.date, r.price_factor, r.split_factor * k, r.reference_price) for r in rows if r.date < day)
    after = [r for r in rows if r.date >= day]
    first = after[0] if after else FactorRow(dt.date(2050, 1, 3), 1.0, 1.0, 0.0)
    pinned = FactorRow(max(first.date, day), first.price_factor, first.split_factor * k, first.reference_price)
    rng = np.random.default_rng(seed)
    extra = [FactorRow(pinned.date + dt.timedelta(days=int(j)), float(rng.uniform(0.9, 1.0)), float(rng.choice([0.5, 1.0])),
                       float(rng.uniform(10, 300))) for j in sorted(set(rng.integers(1, 30, size=3).tolist()))]
    return (*before, pinned, *extra)


def _edited_ticks(t: Ticks, cutoff: int, seed: int) -> Ticks:
    """Ticks at or before the cutoff kept; later ones deleted or their prices and sizes changed."""
    keep = t.ts <= cutoff
    rng = np.random.default_rng(seed)
    later = np.flatnonzero(~keep)
    drop = later[rng.random(later.size) < 0.5]
    mask = np.ones(len(t), dtype=bool)
    mask[drop] = False
    scale = np.where(keep, 1.0, rng.uniform(0.5, 2.0, size=len(t)))
    last = np.where(keep, t.last, np.round(t.last * scale, 2))
    return Ticks(t.ts[mask].copy(), last[mask], last[mask], last[mask], (t.size * scale)[mask])


def _other_future(u: Universe, cutoff: int, time_ns: int, seed: int) -> Universe:
    """`u` as another future would have it: data after the cutoff edited or deleted, factor rows
    of later events rewritten, the events recomputed from them over the public schedule."""
    day = _cutoff_day(cutoff - 1)  # the last date begun strictly before the cutoff
    members = []
    splits, dividends = [], []
    public = [s.date for s in u.sessions if s.date <= day]  # the calendar is public
    for j, m in enumerate(u.members):
        d = m.data
        raw = MarketData(d.symbol, d.tick_size, _edited_ticks(d.ticks, cutoff, seed + j), d.sessions, d.crossed_kept,
                         d.instrument)
        rows = _future_rows(m.factor_rows, day, 2.0 ** ((seed + j) % 3 - 1), seed + j) if m.factor_rows else ()
        members.append(Member(m.symbol, raw, adjust(raw, rows), m.lot_size, rows, ()))
        s, dv = actions(m.symbol, rows, public)
        splits += s
        dividends += dv
    return Universe(tuple(members), u.sessions, u.calendar, tuple(splits), tuple(dividends))


def _news(u: Universe) -> NewsFeed:
    items = []
    for k, s in enumerate(u.sessions):
        for j, sym in enumerate(u.symbols):
            items.append(NewsItem(s.open_ns + (j * 3 - 4) * 3600 * NS_PER_S, (sym,), "Wire", f"{sym} item {k}"))
    return NewsFeed.of(sorted(items, key=lambda it: it.ts))


def _edited_news(feed: NewsFeed, cutoff: int) -> NewsFeed:
    return NewsFeed.of([it for k, it in enumerate(feed) if it.ts < cutoff or k % 2]
                       + [NewsItem(cutoff, ("AAA",), "Late", "published at the cutoff")])


ALL_UNIVERSE_PANES = ResolvedView("all", (
    ResolvedPane("watchlist"), ResolvedPane("portfolio", (("n", 20),)),
    ResolvedPane("events", (("n", 20), ("symbol", "all"))), ResolvedPane("news", (("n", 20), ("symbol", "all"), ("since", 60))),
    *(ResolvedPane(name, (("symbol", sym), *args)) for sym in ("AAA", "BBB", "CCC") for name, args in (
        ("quote", ()), ("bars", (("tf", 86_400), ("n", 10))), ("bars", (("tf", 3600), ("n", 5))),
        ("levels", (("or", 1800),)), ("stats", (("tf", 86_400), ("n", 3))), ("tape", (("n", 50),)),
        ("position", ()), ("plan", ())))), 4000)


def _texts(snap: UniverseSnapshot) -> list[str]:
    return [render_pane(p, snap) for p in ALL_UNIVERSE_PANES.panes]


_T0 = TINY.sessions[0].open_ns - 86_400 * NS_PER_S
_SPAN = TINY.sessions[-1].close_ns + 86_400 * NS_PER_S - _T0
_BOUNDARIES = [x for s in TINY.sessions for x in (s.open_ns - 1, s.open_ns, s.open_ns + 1, s.close_ns - 1, s.close_ns)] + [
    int(ts) + d for m in TINY.members for ts in m.data.ticks.ts[::3] for d in (-1, 0)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_BOUNDARIES) | st.integers(0, _SPAN).map(lambda x: _T0 + x),
       st.sampled_from([0, 1, 300 * NS_PER_S, 6 * 3600 * NS_PER_S]), st.integers(0, 10**6))
def test_no_look_ahead_universe(cutoff: int, guard_ns: int, seed: int) -> None:
    """Every universe pane and every per-symbol pane of every member, and the whole briefing, are
    the same text on the data and on another future: later ticks edited or deleted, later
    factor rows (splits, dividends) rewritten, later news edited, deleted or added at the cutoff."""
    time_ns = cutoff + guard_ns
    plans = {"AAA": lang.parse("PLAN p\nWHEN last > 1: BUY 1 MKT")}
    news = _news(TINY)
    full = freeze_universe(TINY, cutoff, _state(), time_ns=time_ns, news=news, plans=plans,  # type: ignore[arg-type]
                           bounds=PortfolioBounds(100_000.0))
    other = freeze_universe(_other_future(TINY, cutoff, time_ns, seed), cutoff, _state(), time_ns=time_ns,
                            news=_edited_news(news, cutoff), plans=plans, bounds=PortfolioBounds(100_000.0))  # type: ignore[arg-type]
    assert _texts(full) == _texts(other)
    o = Ordinal(1, "X", time_ns)
    assert universe_briefing(full, o) == universe_briefing(other, o)
    for m in full.members:  # nothing rendered from after the cutoff
        assert len(m.ticks) == 0 or int(m.ticks.ts[-1]) <= cutoff
        assert all(e.ts < cutoff for e in m.events.items)
    assert all(it.ts < cutoff for it in full.news)


def test_no_look_ahead_on_the_stockbench_universe(shared_data: Path) -> None:
    """The real 20-symbol universe (with its gap) at every session's OPEN and CLOSE cutoff of a
    window around the gap and the last weeks, against another future of the same data."""
    u = load_universe(shared_data / "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet").universe
    picks = [k for k, s in enumerate(u.sessions) if dt.date(2025, 2, 5) <= s.date <= dt.date(2025, 2, 25)]
    picks += list(range(len(u.sessions) - 6, len(u.sessions)))
    state = PortfolioState("USD", 100_000.0, 100_000.0, 100_000.0, 0.0, 0.0, 0, tuple(Holding(s) for s in u.symbols))
    for j, k in enumerate(picks):
        s = u.sessions[k]
        for time_ns in (s.open_ns, s.close_ns):
            cutoff = time_ns - 300 * NS_PER_S
            full = freeze_universe(u, cutoff, state, time_ns=time_ns)
            other = freeze_universe(_other_future(u, cutoff, time_ns, j), cutoff, state, time_ns=time_ns)
            o = Ordinal(0, "OPEN", time_ns)
            assert universe_briefing(full, o) == universe_briefing(other, o), (s.date, time_ns)
            view = ResolvedView("v", tuple(ResolvedPane("bars", (("symbol", sym), ("tf", 86_400), ("n", 30)))
                                           for sym in u.symbols), 4000)
            assert materialize_universe(view, full) == materialize_universe(view, other)


def test_no_look_ahead_through_a_real_split(shared_data: Path) -> None:
    """AAPL's 7:1 split of 2014-06-09 on Lean's raw bars and factor file: before the ex-date the
    panes read the raw prices (near 645) and no event, from it the adjusted ones (near 92)."""
    u = load_universe(shared_data / "equities_daily/lean_us_equities_daily_bars.parquet", symbols=["AAPL", "SPY"],
                      factors=shared_data / "equities_daily/lean_us_equities_factor_files.csv", spikes="keep").universe
    day = next(k for k, s in enumerate(u.sessions) if s.date == dt.date(2014, 6, 9))
    before = freeze_universe(u, u.sessions[day - 1].close_ns, None)
    at = freeze_universe(u, u.sessions[day].open_ns - 300 * NS_PER_S, None, time_ns=u.sessions[day].open_ns)
    assert abs(float(before.members[0].ticks.last[-1]) - 645.57) < 0.01
    assert abs(float(at.members[0].ticks.last[-1]) - 645.57 / 7) < 0.01
    spec = DEFAULT_CATALOG.get("events")
    assert spec is not None and spec.universe is not None
    assert "2014-06-09 AAPL split 7:1" not in spec.universe(before, {"n": 20, "symbol": "AAPL"})
    assert spec.universe(at, {"n": 1, "symbol": "AAPL"}).splitlines()[1] == "2014-06-09 AAPL split 7:1"
    other = _other_future(u, before.cutoff_ns, before.time_ns, 3)
    again = freeze_universe(other, before.cutoff_ns, None)
    o = Ordinal(1, "X", before.time_ns)
    assert universe_briefing(before, o) == universe_briefing(again, o)


def test_the_stockbench_briefing_stays_within_1500_tokens(shared_data: Path) -> None:
    """The default briefing of the 20-symbol universe, every symbol held, at every session's
    OPEN and CLOSE, in o200k_base tokens (the bench's figure, `bench/panes.py`)."""
    pytest.importorskip("quicktok")
    from bench.panes import universe_figures

    figures = universe_figures(1, quick=False)
    assert figures["universe_tokenizer"] == "o200k_base (quicktok, exact)"
    assert figures["universe_sessions_scanned"] == 156
    worst, flat = figures["universe_briefing_tokens_max"], figures["universe_briefing_tokens"]
    assert isinstance(worst, int) and isinstance(flat, int)
    assert flat < worst <= 1500


def test_the_typed_universe_holds_the_watchlists_values() -> None:
    from kestrel.frame.typed import typed_universe

    o = Ordinal(0, "OPEN", _open(6))
    typed = typed_universe(_snap(6), o)
    assert typed.reference == "2024-01-09" and typed.clock.date == "2024-01-10"
    aaa, bbb, ccc = typed.members
    assert (aaa.symbol, aaa.last, aaa.has_bar, aaa.position) == ("AAA", 105.0, True, 100)
    assert aaa.chg1 == pytest.approx(100 * (105 / 104 - 1)) and aaa.chg5 == pytest.approx(5.0)
    assert aaa.rvol == pytest.approx(1500 / 1200)
    assert bbb.chg1 is None and bbb.chg5 == pytest.approx(10.0) and bbb.missing == ("01-05", "01-08")
    assert ccc.last == 105.0 and ccc.rvol == pytest.approx(1.0)
    assert typed.account is not None and typed.account.cash == 90_000.0 and typed.account.gross_x == pytest.approx(0.1045, abs=1e-4)
    assert [(h.symbol, h.position, h.mark) for h in typed.account.holdings] == [("AAA", 100, 105.0)]
    assert [(e.symbol, e.date, e.kind, e.ratio) for e in typed.events] == [("CCC", "2024-01-09", "split", "2:1")]
    gap = typed_universe(_snap(5), Ordinal(0, "OPEN", _open(5)))
    assert gap.members[1].has_bar is False and gap.members[1].last == 52.0 and gap.members[1].last_time.startswith("01-04")  # type: ignore[union-attr]


def test_no_look_ahead_on_the_minute_universe(shared_data: Path) -> None:
    """Lean's four symbols in minute bars (pre- and post-market included) at boundary and random
    instants: every pane of every member the same against another future of the data."""
    u = load_universe(shared_data / "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet").universe
    rng = np.random.default_rng(11)
    lo, hi = u.sessions[0].open_ns - 6 * 3600 * NS_PER_S, u.sessions[-1].close_ns + 4 * 3600 * NS_PER_S
    cutoffs = [x for s in u.sessions for x in (s.open_ns - 1, s.open_ns, s.open_ns + 60 * NS_PER_S, s.close_ns)]
    cutoffs += rng.integers(lo, hi, size=12).tolist()
    panes = ResolvedView("all", (
        ResolvedPane("watchlist"), ResolvedPane("events", (("n", 5), ("symbol", "all"))),
        *(ResolvedPane(name, (("symbol", sym), *args)) for sym in u.symbols for name, args in (
            ("quote", ()), ("bars", (("tf", 300), ("n", 12))), ("bars", (("tf", 86_400), ("n", 5))),
            ("levels", (("or", 1800),)), ("stats", (("tf", 300), ("n", 14))), ("tape", (("n", 10),))))), 4000)
    for j, cutoff in enumerate(cutoffs):
        time_ns = int(cutoff) + 300 * NS_PER_S
        full = freeze_universe(u, int(cutoff), None, time_ns=time_ns)
        other = freeze_universe(_other_future(u, int(cutoff), time_ns, j), int(cutoff), None, time_ns=time_ns)
        assert [render_pane(p, full) for p in panes.panes] == [render_pane(p, other) for p in panes.panes], cutoff

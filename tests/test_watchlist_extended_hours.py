"""The watchlist on intraday data with pre- and post-market prints, and the CLOCK line of a
cutoff a long guard puts on the evening before.

A member's `last` is a print of the session it belongs to (a pre-market print: the session it
precedes); its changes are against the closes of the sessions before that one, and the pane
says so (`pre hh:mm` / `post hh:mm`, the header names the session pre-market prints precede).
Values are computed by hand from the generated rows, and a property over cutoffs checks the
change's base against the session held on the print's New York date, read from the rows alone.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data.universe import load_universe
from kestrel.frame import Ordinal, ResolvedPane, ResolvedView, briefing, freeze
from kestrel.frame.blind import Blind
from kestrel.frame.typed import typed_universe
from kestrel.frame.universe import UniverseSnapshot, freeze_universe
from kestrel.frame.universe_view import render_pane, universe_briefing
from kestrel.market.ticks import NS_PER_S
from kestrel.market.universe import Universe

from cli_helpers import run_cli

NY = ZoneInfo("America/New_York")
DAYS = [dt.date(2024, 1, d) for d in (2, 3, 4, 5, 8, 9, 10)]  # XNYS sessions 0..6, EST (UTC-5)
H = 3600 * NS_PER_S


@dataclass(frozen=True)
class Row:
    symbol: str
    day: int  # index into DAYS
    hhmm: str  # New York wall clock of the bar's open
    price: float  # a flat bar: open = high = low = close
    volume: int

    @property
    def ts_ns(self) -> int:
        h, m = map(int, self.hhmm.split(":"))
        local = dt.datetime.combine(DAYS[self.day], dt.time(h, m), NY)
        return int(local.timestamp()) * NS_PER_S


def rows() -> list[Row]:
    """AAA trades pre-market (08:00 at 100+i+0.10, 09:00 at 100+i+0.25, volume 10000), in session
    (09:30 at 100+i-0.5, 12:00 at 100+i-0.25, 15:59 closing at 100+i, volume 400(i+1) a bar) and
    post-market (17:00 at 100+i+0.5, volume 10000); BBB only in session (50+i-0.5, 50+i-0.25,
    50+i, volume 300 a bar)."""
    out: list[Row] = []
    for i in range(len(DAYS)):
        a = 100 + i
        out += [Row("AAA", i, "08:00", a + 0.10, 10_000), Row("AAA", i, "09:00", a + 0.25, 10_000),
                Row("AAA", i, "09:30", a - 0.5, 400 * (i + 1)), Row("AAA", i, "12:00", a - 0.25, 400 * (i + 1)),
                Row("AAA", i, "15:59", a, 400 * (i + 1)), Row("AAA", i, "17:00", a + 0.5, 10_000)]
        b = 50 + i
        out += [Row("BBB", i, "09:30", b - 0.5, 300), Row("BBB", i, "12:00", b - 0.25, 300), Row("BBB", i, "15:59", b, 300)]
    return sorted(out, key=lambda r: (r.symbol, r.ts_ns))


def _stamp(ts_ns: int) -> str:
    return dt.datetime.fromtimestamp(ts_ns / NS_PER_S, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_csv(path: Path, symbols: tuple[str, ...] = ("AAA", "BBB")) -> Path:
    one = len(symbols) == 1
    head = "ts_utc,open,high,low,close,volume" if one else "ts_utc,symbol,open,high,low,close,volume"
    lines = [head]
    for r in rows():
        if r.symbol in symbols:
            p = f"{r.price:.2f}"
            sym = "" if one else f"{r.symbol},"
            lines.append(f"{_stamp(r.ts_ns)},{sym}{p},{p},{p},{p},{r.volume}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_csv(tmp_path_factory.mktemp("extended") / "u.csv")


@pytest.fixture(scope="module")
def universe(data: Path) -> Universe:
    return load_universe(data).universe


def _open(u: Universe, i: int) -> int:
    return u.sessions[i].open_ns


def _snap(u: Universe, i: int, guard_ns: int, blind: bool = False) -> UniverseSnapshot:
    t = _open(u, i)
    return freeze_universe(u, t - guard_ns, None, time_ns=t, blind=Blind.of_universe(u) if blind else None)


WATCH = ResolvedPane("watchlist")


def test_at_open_a_premarket_last_changes_against_the_prior_close(universe: Universe) -> None:
    """OPEN of 01-10, cutoff 09:25: AAA's last is its 09:00 pre-market print 106.25, a print of
    01-10: +1.19 against the 01-09 close 105 (not +2.16 against 01-08's 104, labelled 01-09),
    +5.20 against 01-03's 101; rvol is 01-09's session volume 3*2400 over the mean 3*400*3 of
    the five before (extended-hours volume counts in no session). BBB has no pre-market: its
    last is 01-09's close 55, +1.85 against 54, +10.00 against 50."""
    snap = _snap(universe, 6, 300 * NS_PER_S)
    assert render_pane(WATCH, snap) == (
        "WATCHLIST 2 at 01-09, pre-market 01-10\n"
        "sym   last chg1%  chg5% rvol pos\n"
        "AAA 106.25 +1.19  +5.20 2.00   0 pre 09:00\n"
        "BBB  55.00 +1.85 +10.00 1.00   0"
    )
    typed = typed_universe(snap, Ordinal(0, "OPEN", _open(universe, 6)))
    aaa, bbb = typed.members
    assert typed.reference == "2024-01-09"
    assert (aaa.last, aaa.last_time, aaa.session, aaa.has_bar) == (106.25, "01-10 09:00:45", "2024-01-10", True)
    assert aaa.chg1 == pytest.approx(100 * (106.25 / 105 - 1)) and aaa.chg5 == pytest.approx(100 * (106.25 / 101 - 1))
    assert aaa.rvol == pytest.approx(7200 / 3600)
    assert (bbb.last, bbb.session) == (55.0, "2024-01-09")
    assert bbb.chg1 == pytest.approx(100 * (55 / 54 - 1)) and bbb.chg5 == pytest.approx(10.0)


def test_blind_the_premarket_session_is_a_session_number(universe: Universe) -> None:
    snap = _snap(universe, 6, 300 * NS_PER_S, blind=True)
    lines = render_pane(WATCH, snap).splitlines()
    assert lines[0] == "WATCHLIST 2 at d6, pre-market d7"
    aaa = next(m for m in typed_universe(snap, Ordinal(0, "OPEN", _open(universe, 6))).members
               if m.symbol == snap.clock.blind.alias("AAA"))  # type: ignore[union-attr]
    assert aaa.session == "d7" and aaa.last_time == "d7 09:00:45"
    assert aaa.chg1 == pytest.approx(100 * (106.25 / 105 - 1))  # a percent change: the same in any scale
    row = next(ln for ln in lines if ln.startswith(aaa.symbol))
    assert row.split()[2:] == ["+1.19", "+5.20", "2.00", "0", "pre", "09:00"]


def test_a_guard_into_the_evening_reads_a_post_market_last_and_dates_the_cutoff(universe: Universe) -> None:
    """OPEN of 01-10 with a 14h guard: cutoff 01-09 19:30. AAA's last is its 17:00 post-market
    print 105.50, a print of 01-09: +1.44 against 01-08's 104, +5.50 against 01-02's 100."""
    snap = _snap(universe, 6, 14 * H)
    assert render_pane(WATCH, snap) == (
        "WATCHLIST 2 at 01-09\n"
        "sym   last chg1%  chg5% rvol pos\n"
        "AAA 105.50 +1.44  +5.50 2.00   0 post 17:00\n"
        "BBB  55.00 +1.85 +10.00 1.00   0"
    )
    o = Ordinal(0, "OPEN", _open(universe, 6))
    view = ResolvedView("w", (WATCH,), 400)
    clock = universe_briefing(snap, o, view).splitlines()[0]
    assert clock == ("CLOCK 2 symbols #0 OPEN cutoff 01-09 19:30:00 session 2024-01-10 09:30-16:00 "
                     "America/New_York; now 09:30, close in 6h30m")
    blind = universe_briefing(_snap(universe, 6, 14 * H, blind=True), o, view).splitlines()[0]
    assert blind.startswith("CLOCK 2 symbols #0 OPEN cutoff d6 19:30:00 session d7 09:30-16:00 ")
    same_day = universe_briefing(_snap(universe, 6, 300 * NS_PER_S), o, view).splitlines()[0]
    assert " cutoff 09:25:00 session 2024-01-10 " in same_day  # on the ordinal's date: no date


def test_a_monday_open_guard_reaching_the_weekend_dates_it(universe: Universe) -> None:
    """OPEN of Monday 01-08 with a 40h guard: cutoff Saturday 01-06 17:30, a date without a
    session (`d4+1` blind: a day after Friday's session `d4`); the last prints are Friday's
    post-market ones (AAA 103.50, +1.47 against 102)."""
    o = Ordinal(0, "OPEN", _open(universe, 4))
    view = ResolvedView("w", (WATCH,), 400)
    plain = universe_briefing(_snap(universe, 4, 40 * H), o, view)
    assert plain.startswith("CLOCK 2 symbols #0 OPEN cutoff 01-06 17:30:00 session 2024-01-08 ")
    assert "\nWATCHLIST 2 at 01-05\n" in plain and "\nAAA 103.50 +1.47   n/a 2.00   0 post 17:00\n" in plain
    blind = universe_briefing(_snap(universe, 4, 40 * H, blind=True), o, view)
    assert blind.startswith("CLOCK 2 symbols #0 OPEN cutoff d4+1 17:30:00 session d5 ")


def test_the_universe_cli_dates_a_long_guards_cutoff(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--guard 18h` at OPEN of 01-10: cutoff 01-09 15:30, in that session. AAA's last is its
    12:00 print 104.75: +0.72 against 104, +4.75 against 100; rvol the two bars so far (2*2400)
    over the same span's mean (2*400*3). Blind, no date leaks."""
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", "2024-01-10", "--guard", "18h",
                             "VIEW v: watchlist")
    assert code == 0, err
    assert out.startswith("CLOCK 2 symbols #0 OPEN cutoff 01-09 15:30:00 session 2024-01-10 09:30-16:00 ")
    assert ("\nWATCHLIST 2 at 01-09\nsym   last chg1% chg5% rvol pos\nAAA 104.75 +0.72 +4.75 2.00   0\n"
            "BBB  54.75 +1.39 +9.50 1.00   0\n") in out  # BBB: 54.75 against 54 and 50
    code, out, err = run_cli(capsys, "view", "--data", str(data), "--date", "2024-01-10", "--guard", "18h",
                             "--blind", "VIEW v: watchlist")
    assert code == 0, err
    assert out.startswith("CLOCK 2 symbols #0 OPEN cutoff d6 15:30:00 session d7 09:30-16:00 ")
    assert "01-09" not in out and "2024" not in out


def test_one_symbol_briefing_dates_a_long_guards_cutoff(universe: Universe) -> None:
    """The one-symbol briefing's CLOCK and watchlist, plain and blind: the 18h guard's cutoff
    01-09 15:30 dated (`d6` blind), the default guard's 09:25 not; at 09:25 the pre-market last
    106.25 is +1.19 against 01-09's close 105."""
    aaa = universe["AAA"].data
    t = _open(universe, 6)
    o = Ordinal(0, "OPEN", t)
    view = ResolvedView("w", (WATCH,), 400)
    for blind, cut in ((None, "01-09 15:30:00 session 2024-01-10"), (Blind.of([aaa]), "d6 15:30:00 session d7")):
        text = briefing(freeze(aaa, t, 18 * H, blind=blind), o, view)
        assert f" #0 OPEN cutoff {cut} 09:30-16:00 America/New_York;" in text.splitlines()[0], text
        if blind is None:
            assert "\nWATCHLIST 1 at 01-09\nsym   last chg1% chg5% rvol pos\nAAA 104.75 +0.72 +4.75 2.00   0\n" in text
        else:
            assert "01-09" not in text and "2024" not in text
    text = briefing(freeze(aaa, t, 300 * NS_PER_S), o, view)
    assert text.startswith("CLOCK AAA #0 OPEN cutoff 09:25:00 session 2024-01-10 ")
    assert "\nWATCHLIST 1 at 01-09, pre-market 01-10\nsym   last chg1% chg5% rvol pos\nAAA 106.25 +1.19 +5.20 2.00   0 pre 09:00\n" in text
    blind_text = briefing(freeze(aaa, t, 300 * NS_PER_S, blind=Blind.of([aaa])), o, view)
    assert "\nWATCHLIST 1 at d6, pre-market d7\n" in blind_text and " pre 09:00\n" in blind_text


# ------------------------------------------------------------------------------------------
# the property: the base close belongs to the session before the one `last` came from


def _expected(symbol: str, cutoff_ns: int) -> tuple[float, int, dt.date] | None:
    """(last price, index of the print's session, its date) from the rows alone: the latest
    bar opened at or before the cutoff (its four ticks share its price), its session the one
    held on its New York date (every row here is on a session date)."""
    mine = [r for r in rows() if r.symbol == symbol and r.ts_ns <= cutoff_ns]
    if not mine:
        return None
    r = mine[-1]
    return r.price, r.day, DAYS[r.day]


def _close(symbol: str, day: int) -> float:
    return next(r.price for r in rows() if r.symbol == symbol and r.day == day and r.hhmm == "15:59")


@settings(max_examples=120, deadline=None)
@given(offset=st.integers(0, 10**18), before_open=st.one_of(st.none(), st.tuples(st.integers(0, 6), st.integers(0, 1200))),
       guard_h=st.integers(0, 30), blind=st.booleans())
def test_the_change_base_is_the_close_before_the_prints_session(
        universe: Universe, offset: int, before_open: tuple[int, int] | None, guard_h: int, blind: bool) -> None:
    """At any cutoff (anywhere, or up to 20 hours before an open: pre-market, the night, the
    evening), a member's change is against the close of the session before the one held on its
    last print's New York date; a pre-market last is said on its row and in the header."""
    lo, hi = _open(universe, 0) - 7 * H, universe.sessions[-1].close_ns + 5 * H
    cutoff = lo + offset % (hi - lo)
    if before_open is not None:
        cutoff = _open(universe, before_open[0]) - before_open[1] * 60 * NS_PER_S
    snap = freeze_universe(universe, cutoff, None, time_ns=cutoff + guard_h * H,
                           blind=Blind.of_universe(universe) if blind else None)
    typed = typed_universe(snap, Ordinal(1, "T", cutoff + guard_h * H))
    text = render_pane(WATCH, snap)
    head = text.splitlines()[0]
    pre_days: set[str] = set()
    if typed.reference is None:  # before the first session: no reference, nothing to change against
        assert head == "WATCHLIST 2 no session yet"
        return
    for member, m in zip(snap.members, typed.members):
        real = member.data.symbol
        want = _expected(real, cutoff)
        if want is None:
            assert m.last is None
            continue
        price, day, date = want
        if not blind:
            assert m.last == price
        assert m.session == (f"d{day + 1}" if blind else date.isoformat())
        if not m.has_bar:
            assert m.chg1 is None and m.chg5 is None
            continue
        assert (m.chg1 is None) == (day < 1) and (m.chg5 is None) == (day < 5)
        if m.chg1 is not None:
            assert m.chg1 == pytest.approx(100 * (price / _close(real, day - 1) - 1))
        if m.chg5 is not None:
            assert m.chg5 == pytest.approx(100 * (price / _close(real, day - 5) - 1))
        row = next(ln for ln in text.splitlines()[2:] if ln.split()[0] == m.symbol)
        premarket = real == "AAA" and m.last_time is not None and m.last_time.split()[1] < "09:30"
        assert row.endswith(" pre " + m.last_time.split()[1][:5]) == premarket  # type: ignore[union-attr]
        if premarket:
            pre_days.add(f"d{day + 1}" if blind else date.strftime("%m-%d"))
    assert len(pre_days) <= 1
    assert head.endswith(f", pre-market {pre_days.pop()}") if pre_days else "pre-market" not in head


# ------------------------------------------------------------------------------------------
# real minute bars with extended hours


def test_lean_minute_bars_premarket_change_against_the_prior_close(shared_data: Path) -> None:
    """Lean's SPY/AIG/BAC/IBM minute bars (pre-market from 04:00 New York): at 10-08 09:25:45,
    each member's last is the close of its latest bar opened by 09:25 (its last tick at +45 s),
    a pre-market print of 10-08; its chg1 is against the close of 10-07's last bar opened
    before 16:00, computed from the raw rows with pandas alone."""
    import pandas as pd  # type: ignore[import-untyped]  # exchange-calendars' own dependency

    path = shared_data / "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
    u = load_universe(path).universe
    day = next(i for i, s in enumerate(u.sessions) if s.date == dt.date(2013, 10, 8))
    t = u.sessions[day].open_ns
    snap = freeze_universe(u, t - 255 * NS_PER_S, None, time_ns=t)
    df = pd.read_parquet(path)
    local = df["ts_utc"].dt.tz_convert("America/New_York")
    lines = render_pane(WATCH, snap).splitlines()
    assert lines[0] == "WATCHLIST 4 at 10-07, pre-market 10-08"
    typed = typed_universe(snap, Ordinal(0, "OPEN", t))
    for m in typed.members:
        mine = df[df["symbol"] == m.symbol]
        at = local[df["symbol"] == m.symbol]
        today = mine[(at.dt.date == dt.date(2013, 10, 8)) & (at.dt.strftime("%H:%M") <= "09:25")]
        prior = mine[(at.dt.date == dt.date(2013, 10, 7)) & (at.dt.strftime("%H:%M") < "16:00")]
        last, base = float(today.iloc[-1]["close"]), float(prior.iloc[-1]["close"])
        assert (m.last, m.session) == (last, "2013-10-08")
        assert m.chg1 == pytest.approx(100 * (last / base - 1))
        row = next(ln for ln in lines if ln.startswith(m.symbol)).split()
        clock = at[today.index[-1]].strftime("%H:%M")
        assert row[1:3] == [f"{last:.2f}", f"{100 * (last / base - 1):+.2f}"] and row[-2:] == ["pre", clock]

"""Each pane rendered on a tiny hand-written two-session fixture; expected text by hand."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.market import AccountState, MarketData, SessionSpec, Ticks, WorkingOrder
from kestrel.frame import ResolvedPane, freeze
from kestrel.frame.catalog import DEFAULT_CATALOG
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.market.instrument import Instrument
from kestrel.market.ticks import NS_PER_S
from kestrel.lang.ast import Compare, Duration, Offset, Order, Plan, Rule, Series, Call, TimeOfDay, Until

D1 = SessionSpec(dt.date(2024, 1, 1), tz="UTC")
D2 = SessionSpec(dt.date(2024, 1, 2), tz="UTC")


def _at(s: SessionSpec, h: int, m: int) -> int:
    return s.wall_clock_ns(h, m)


# (session, hh, mm, bid, ask, last, size)
ROWS = [
    (D1, 9, 30, 9.99, 10.01, 10.00, 100),
    (D1, 10, 0, 10.19, 10.21, 10.20, 200),
    (D1, 15, 59, 10.09, 10.11, 10.10, 100),
    (D2, 9, 30, 10.29, 10.31, 10.30, 100),
    (D2, 9, 31, 10.39, 10.41, 10.40, 100),
    (D2, 9, 44, 10.19, 10.21, 10.20, 100),
    (D2, 10, 1, 10.49, 10.51, 10.50, 100),
]


def fixture_data() -> MarketData:
    cols = list(zip(*[(_at(s, h, m), b, a, last, z) for s, h, m, b, a, last, z in ROWS]))
    return MarketData("T", 0.01, Ticks.from_arrays(*cols), (D1, D2))


def snap(account: AccountState | None = None, plan: Plan | None = None) -> FrozenSnapshot:
    # ordinal 10:06:30, guard 5m → cutoff 10:01:30: every day-2 tick is visible
    return freeze(fixture_data(), _at(D2, 10, 6) + 30 * NS_PER_S, account=account, plan=plan)


def render(s: FrozenSnapshot, name: str, **args: int | str) -> str:
    spec = DEFAULT_CATALOG.get(name)
    assert spec is not None
    full = {a.name: a.default for a in spec.args} | args
    return spec.builder(s, full)


def test_quote() -> None:
    assert render(snap(), "quote") == (
        "QUOTE T 10:01:00\n"
        "bid 10.49 ask 10.51 spr 0.02 last 10.50 sz 100\n"
        "open 10.30 vwap 10.35 vol 400 chg +0.40 +3.96% vs pC 10.10"
    )


def test_quote_before_any_tick() -> None:
    s = freeze(fixture_data(), _at(D1, 9, 30))
    assert render(s, "quote") == "QUOTE T no ticks yet"


def test_bars_across_sessions_with_forming_bar() -> None:
    assert render(snap(), "bars", tf=900, n=3) == (
        "BARS 15m last 3 (*forming)\n"
        "time          open  high   low close vol  vwap\n"
        "01-01 15:45  10.10 10.10 10.10 10.10 100 10.10\n"
        "01-02 09:30  10.30 10.40 10.20 10.20 300 10.30\n"
        "01-02 10:00* 10.50 10.50 10.50 10.50 100 10.50"
    )


def test_bars_same_day_show_time_only() -> None:
    assert render(snap(), "bars", tf=60, n=2) == (
        "BARS 1m last 2 (*forming)\n"
        "time    open  high   low close vol  vwap\n"
        "09:44  10.20 10.20 10.20 10.20 100 10.20\n"
        "10:01* 10.50 10.50 10.50 10.50 100 10.50"
    )


def test_daily_bars() -> None:
    assert render(snap(), "bars", tf=86_400, n=5) == (
        "BARS 1d last 2 (*forming)\n"
        "time    open  high   low close vol  vwap\n"
        "01-01  10.00 10.20 10.00 10.10 400 10.12\n"
        "01-02* 10.30 10.50 10.20 10.50 400 10.35"
    )


def test_levels() -> None:
    assert render(snap(), "levels") == (
        "LEVELS\n"
        "prior H 10.20 L 10.00 C 10.10\n"
        "today O 10.30 H 10.50 L 10.20\n"
        "or30m H 10.40 L 10.20\n"
        "vwap 10.35"
    )


def test_levels_before_the_open_and_forming_range() -> None:
    at_open = freeze(fixture_data(), _at(D2, 9, 30))
    assert render(at_open, "levels") == "LEVELS\nprior H 10.20 L 10.00 C 10.10\ntoday not open"
    early = freeze(fixture_data(), _at(D2, 9, 40))  # cutoff 09:35: the 30m range is forming
    assert render(early, "levels", **{"or": 1800}).splitlines()[3] == "or30m H 10.40 L 10.30 forming"


def test_stats() -> None:
    # completed 15m bars: d1 10:00 (C 10.20), d1 15:45 (10.10), d2 09:30 (H 10.40 L 10.20 C 10.20)
    # TR: 0.10, max(0.20, 0.30, 0.10) = 0.30 → atr 0.20
    # rv: returns ±ln(10.2/10.1) = ±0.0098522, sd = 0.0139331, × sqrt(252 × 26) = 80.944 → 112.8%
    # volume: prior day 400; by 10:01:30 it had 300 → relvol 400/300 = 1.33
    assert render(snap(), "stats", tf=900, n=2) == (
        "STATS 15m n=2\n"
        "atr 0.20 rv 112.8%\n"
        "avgvol 400 over 1d relvol 1.33"
    )


def test_stats_without_history() -> None:
    s = freeze(fixture_data(), _at(D1, 10, 6))
    assert render(s, "stats", tf=900, n=2) == (
        "STATS 15m n=2\natr n/a rv n/a (only 1 bar)\navgvol n/a (no prior session)"
    )


def test_tape() -> None:
    assert render(snap(), "tape", n=2) == (
        "TAPE last 2\n"
        "time       bid   ask  last  sz\n"
        "09:44:00 10.19 10.21 10.20 100\n"
        "10:01:00 10.49 10.51 10.50 100"
    )


def test_position_shows_lots_and_money_at_their_precision() -> None:
    """A position of 0.0003 in lots of 0.0001 (not `0.0003000` or `3e-04`), money of a JPY-quoted
    instrument in whole yen."""
    d = fixture_data()
    btc = MarketData(d.symbol, d.tick_size, d.ticks, d.sessions, d.crossed_kept,
                     Instrument(symbol=d.symbol, tick_size=d.tick_size, lot_size=0.0001))
    acct = AccountState(position=0.0003, avg_entry=10.4, upnl=0.0003, rpnl=-1.25, fees=0.004,
                        orders=(WorkingOrder("o1", "sell", 0.0003, "stp", 10.1),))
    s = freeze(btc, _at(D2, 10, 6) + 30 * NS_PER_S, account=acct)
    assert render(s, "position") == (
        "POSITION long 0.0003 @ 10.40 upnl +0.00 rpnl -1.25 fees 0.00\n"
        "orders 1\n"
        "id side    qty type price\n"
        "o1 sell 0.0003  stp 10.10"
    )
    yen = MarketData(d.symbol, d.tick_size, d.ticks, d.sessions, d.crossed_kept,
                     Instrument(symbol=d.symbol, tick_size=d.tick_size, currency="JPY"))
    s = freeze(yen, _at(D2, 10, 6) + 30 * NS_PER_S,
               account=AccountState(position=-100, avg_entry=10.5, upnl=-1234.5, rpnl=20.0))
    assert render(s, "position") == "POSITION short 100 @ 10.50 upnl -1234 rpnl +20 fees 0\norders none"


def test_position_flat_and_long_with_orders() -> None:
    assert render(snap(), "position") == "POSITION flat rpnl +0.00 fees 0.00\norders none"
    acct = AccountState(
        position=100, avg_entry=10.4, upnl=10.0, rpnl=-2.5, fees=1.0,
        orders=(WorkingOrder("o1", "sell", 100, "stp", 10.1), WorkingOrder("o2", "sell", 100, "lmt", 10.9)),
    )
    assert render(snap(acct), "position") == (
        "POSITION long 100 @ 10.40 upnl +10.00 rpnl -2.50 fees 1.00\n"
        "orders 2\n"
        "id side qty type price\n"
        "o1 sell 100  stp 10.10\n"
        "o2 sell 100  lmt 10.90"
    )
    short = AccountState(position=-5, avg_entry=10.5, upnl=-0.5,
                         orders=(WorkingOrder("o3", "buy", 5, "mkt"),))
    assert render(snap(short), "position").splitlines()[0] == (
        "POSITION short 5 @ 10.50 upnl -0.50 rpnl +0.00 fees 0.00"
    )
    assert render(snap(short), "position").splitlines()[-1] == "o3  buy   5  mkt     -"


def test_plan_pane() -> None:
    assert render(snap(), "plan") == "PLAN none"
    plan = Plan(
        name="orb",
        rules=(Rule(Compare(">", Series("last"), Call("high", (Duration(30, "m"),))),
                    (Order("buy", 100, "mkt", stop=Offset("pct", -0.6)),)),),
        instrument="T",
        expiry=Until(TimeOfDay(15, 45)),
    )
    assert render(snap(plan=plan), "plan") == (
        "INCUMBENT\n"
        "PLAN orb ON T UNTIL 15:45\n"
        "WHEN last > high(30m): BUY 100 MKT STOP -0.6%"
    )


@pytest.mark.parametrize("name", DEFAULT_CATALOG.names())
def test_every_pane_renders_on_empty_snapshot(name: str) -> None:
    s = freeze(fixture_data(), _at(D1, 9, 0))
    text = render(s, name)
    assert text and text.split()[0].isupper()


def test_history_across_a_dst_switch_keeps_each_session_clock() -> None:
    """Fri 2024-03-08 is EST (UTC-5), Mon 2024-03-11 EDT (UTC-4): Friday's bars and ticks
    show Friday's wall clock, not Monday's offset (which would read 16:30 for 15:30)."""
    fri, mon = SessionSpec.us_equity(dt.date(2024, 3, 8)), SessionSpec.us_equity(dt.date(2024, 3, 11))
    z = 1_709_856_000  # 2024-03-08T00:00Z
    ts = [(z + 20 * 3600 + 1800) * NS_PER_S,  # Fri 20:30Z = 15:30 EST
          (z + 3 * 86_400 + 13 * 3600 + 1800) * NS_PER_S,  # Mon 13:30Z = 09:30 EDT
          (z + 3 * 86_400 + 13 * 3600 + 2700) * NS_PER_S]  # Mon 13:45Z = 09:45 EDT
    px = [10.0, 10.5, 10.25]
    data = MarketData("T", 0.01, Ticks.from_arrays(ts, px, px, px, [1, 2, 3]), (fri, mon))
    s = freeze(data, mon.wall_clock_ns(10, 4))  # cutoff 09:59: the 09:30 bar is forming
    assert render(s, "bars", tf=1800, n=3) == (
        "BARS 30m last 2 (*forming)\n"
        "time          open  high   low close vol  vwap\n"
        "03-08 15:30  10.00 10.00 10.00 10.00   1 10.00\n"
        "03-11 09:30* 10.50 10.50 10.25 10.25   5 10.35"
    )
    # a print of an earlier session is dated, on its own wall clock
    assert render(s, "tape", n=3).splitlines()[2:] == [
        "03-08 15:30:00 10.00 10.00 10.00  1",
        "09:30:00       10.50 10.50 10.50  2",
        "09:45:00       10.25 10.25 10.25  3",
    ]
    assert render(s, "bars", tf=86_400, n=2).splitlines()[2:] == [
        "03-08  10.00 10.00 10.00 10.00   1 10.00",
        "03-11* 10.50 10.50 10.25 10.25   5 10.35",
    ]


def test_money_never_prints_negative_zero() -> None:
    from kestrel.frame.text import fmt_money

    assert [fmt_money(x) for x in (-0.0, -0.004, 0.004, -0.005001, 12.5, -3.0)] == [
        "+0.00", "+0.00", "+0.00", "-0.01", "+12.50", "-3.00"]
    flat = AccountState(rpnl=-0.0001)
    assert render(snap(flat), "position").splitlines()[0] == "POSITION flat rpnl +0.00 fees 0.00"


def test_levels_with_overnight_ticks() -> None:
    rows = [(D1, 10, 0, 10.00), (D1, 18, 0, 9.80), (D2, 8, 0, 10.60), (D2, 9, 30, 10.30)]
    ts = [int(dt.datetime(s.date.year, s.date.month, s.date.day, h, m, tzinfo=dt.timezone.utc).timestamp())
          * NS_PER_S for s, h, m, _ in rows]
    px = [p for *_, p in rows]
    data = MarketData("T", 0.01, Ticks.from_arrays(ts, px, px, px, [1] * 4), (D1, D2))
    s = freeze(data, _at(D2, 10, 5))  # cutoff 10:00: the 30m opening range is complete
    assert render(s, "levels") == (
        "LEVELS\n"
        "prior H 10.00 L 10.00 C 10.00\n"
        "onight H 10.60 L 9.80\n"
        "today O 10.30 H 10.30 L 10.30\n"
        "or30m H 10.30 L 10.30\n"
        "vwap 10.30"
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.sampled_from([0.0, 0.0, 1.0, 3.0, 7.5, 100.0, 1e6])),
                min_size=1, max_size=60))
def test_the_panes_vwap_is_the_languages_bit_for_bit(rows: list[tuple[int, float]]) -> None:
    """The quote and levels panes' vwap equals the engine's `vwap` series (its column and its tick
    by tick form) at the last tick, the same double, zero volumes included."""
    from kestrel.engine.history import Tick
    from kestrel.engine.series import Vwap
    from kestrel.frame.panes import session_vwap

    last = [p * 0.01 for p, _ in rows]
    size = [s for _, s in rows]
    ticks = Ticks.from_arrays(list(range(len(rows))), last, last, last, size)
    column = Vwap(100.0, 0).column(ticks)[0]
    assert session_vwap(ticks) == float(column[-1])
    series = Vwap(100.0, 0)
    for k in range(len(rows)):
        series.take(Tick(k, k, last[k], last[k], last[k], size[k]))
    assert session_vwap(ticks) == series.value

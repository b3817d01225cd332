"""Universes on the real data (skipped when it is absent) and on small files: the StockBench
gap reported and not filled, Lean's factor files against a hand computation, the splits they
hold, probable unadjusted splits, trade and quote bars joined by time, folders and globs
against the long file, symbols tables, and the one-line errors."""

from __future__ import annotations

import csv
import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data import DataError
from kestrel.data.corporate import probable_splits, read_factor_file
from kestrel.data.universe import load_universe
from kestrel.market.session import NS_PER_DAY

STOCKBENCH = "equities_daily/stockbench_dow20_daily_bars_20241213_20250731.parquet"
LEAN_DAILY = "equities_daily/lean_us_equities_daily_bars.parquet"
FACTORS = "equities_daily/lean_us_equities_factor_files.csv"
MINUTE_TRADES = "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
MINUTE_QUOTES = "equities_minute/lean_us_equities_minute_quote_bars_20131004_20131011.parquet"
GAP = [dt.date(2025, 2, d) for d in (11, 12, 13, 14, 18, 19)]  # 02-17 is Presidents' Day: no session


def _dates_of(table: pa.Table, symbol: str) -> list[dt.date]:
    rows = table.filter(pc.equal(table["symbol"], symbol))
    return sorted(rows["date"].to_pylist())


def _closes(table: pa.Table, symbol: str) -> dict[dt.date, float]:
    rows = table.filter(pc.equal(table["symbol"], symbol))
    return dict(zip(rows["date"].to_pylist(), rows["close"].to_pylist()))


def _bar_dates(ts: npt.NDArray[np.int64]) -> list[dt.date]:
    """The New York date of each daily bar's first tick (09:30 local: the same UTC date)."""
    return [dt.date(1970, 1, 1) + dt.timedelta(days=int(t // NS_PER_DAY)) for t in ts[0::5]]


def test_stockbench_universe_reports_its_gap_and_fills_nothing(shared_data: Path) -> None:
    raw = pq.read_table(shared_data / STOCKBENCH)
    r = load_universe(shared_data / STOCKBENCH)
    u, rep = r.universe, r.report
    symbols = sorted(set(raw["symbol"].to_pylist()))
    assert u.symbols == tuple(symbols) and len(symbols) == 20
    all_dates = sorted(set(raw["date"].to_pylist()))
    # every NYSE weekday session in the span the file has, by the file's own dates plus the gap
    assert [s.date for s in u.sessions][0] == all_dates[0] and u.sessions[-1].date == all_dates[-1]
    assert rep.empty_sessions == (dt.date(2025, 1, 10), dt.date(2025, 1, 13))  # no row of any symbol
    full = {"GS", "HD", "MSFT", "V"}
    for sym in symbols:
        mine = _dates_of(raw, sym)
        m = u[sym]
        assert len(m.data.ticks) == 5 * len(mine)  # one bar, five ticks: nothing added
        assert _bar_dates(m.data.ticks.ts) == mine
        gap = [d for d in GAP if d not in mine]
        assert gap == ([] if sym in full else GAP)
        assert set(gap) <= set(m.missing)
        report = next(x for x in rep.symbols if x.symbol == sym)
        assert report.missing == m.missing
        expect = {s.date for s in u.sessions} - set(mine)
        assert set(m.missing) == expect
        assert m.adjusted is m.data and m.lot_size == Decimal(1)
        assert m.instrument.symbol == sym and m.instrument.currency == "USD"
    lines = rep.notes()
    assert any(line.startswith("AAPL: no bars in 8 sessions (2025-01-10, 2025-01-13, 2025-02-11") for line in lines)
    assert not any(line.startswith("GS: no bars in 8") for line in lines)


def _factor_rows(path: Path, symbol: str) -> list[tuple[dt.date, float, float]]:
    with path.open() as f:
        return [(dt.datetime.strptime(r["date"], "%Y%m%d").date(), float(r["price_factor"]), float(r["split_factor"]))
                for r in csv.DictReader(f) if r["symbol"] == symbol]


def test_adjusted_closes_match_a_hand_computation_from_the_raw_file_and_factor_rows(shared_data: Path) -> None:
    raw = pq.read_table(shared_data / LEAN_DAILY)
    r = load_universe(shared_data / LEAN_DAILY, factors=shared_data / FACTORS, symbols=["AAPL", "SPY"],
                      spikes="keep")
    for sym in ("AAPL", "SPY"):
        rows = _factor_rows(shared_data / FACTORS, sym)
        closes = _closes(raw, sym)
        m = r.universe[sym]
        dates = _bar_dates(m.data.ticks.ts)
        got_raw = dict(zip(dates, m.data.ticks.last[4::5].tolist()))
        got_adj = dict(zip(dates, m.adjusted.ticks.last[4::5].tolist()))
        assert got_raw == closes  # raw kept as recorded, for trading
        for d, close in closes.items():
            row = next((x for x in rows if x[0] >= d), None)  # the first row dated on or after the bar
            pf, sf = (row[1], row[2]) if row else (1.0, 1.0)
            assert got_adj[d] == pytest.approx(close * pf * sf, rel=1e-12), (sym, d)
    aapl = r.universe["AAPL"]
    by_date = dict(zip(_bar_dates(aapl.data.ticks.ts), aapl.adjusted.ticks.last[4::5].tolist()))
    # across the 7:1 split the adjusted series is continuous: 645.57 x 0.9011818 x 0.0357143 vs 94.25-ish
    before, after = by_date[dt.date(2014, 6, 6)], by_date[dt.date(2014, 6, 9)]
    assert before == pytest.approx(645.57 * 0.9011818 * 0.0357143)
    assert abs(after / before - 1) < 0.05


def test_factor_file_splits_with_dates_and_ratios(shared_data: Path) -> None:
    r = load_universe(shared_data / LEAN_DAILY, factors=shared_data / FACTORS, symbols=["AAPL", "BAC"],
                      spikes="keep")
    got = [(s.symbol, s.date, s.numerator, s.denominator) for s in r.universe.splits]
    assert got == [("AAPL", dt.date(2000, 6, 21), 2, 1), ("BAC", dt.date(2004, 8, 30), 2, 1),
                   ("AAPL", dt.date(2005, 2, 28), 2, 1), ("AAPL", dt.date(2014, 6, 9), 7, 1),
                   ("AAPL", dt.date(2020, 8, 31), 4, 1)]
    assert r.report.splits == r.universe.splits
    divs = [d for d in r.universe.dividends if d.symbol == "AAPL"]
    assert divs and all(d.amount > 0 for d in divs)
    first_2012 = next(d for d in divs if d.date.year == 2012)  # AAPL's first dividend since 1995: $2.65
    assert first_2012.date == dt.date(2012, 8, 9) and first_2012.amount == pytest.approx(2.65, abs=0.01)
    assert not any(p.symbol == "AAPL" and p.date == dt.date(2014, 6, 9) for p in r.report.probable_splits)


def test_without_a_factor_file_the_split_jumps_are_flagged(shared_data: Path) -> None:
    r = load_universe(shared_data / LEAN_DAILY, symbols=["AAPL"], spikes="keep")
    flagged = {(p.date, p.numerator, p.denominator) for p in r.report.probable_splits}
    assert {(dt.date(2014, 6, 9), 7, 1), (dt.date(2020, 8, 31), 4, 1), (dt.date(2005, 2, 28), 2, 1),
            (dt.date(2000, 6, 21), 2, 1)} <= flagged
    p = next(p for p in r.report.probable_splits if p.date == dt.date(2014, 6, 9))
    assert (p.previous_close, p.open, p.adjusted) == (645.57, 92.69, False)
    # the line carries the volume evidence (the Lean raw volumes: x3.86 over the 20 sessions, x1.86 on the day)
    assert any(line.startswith("AAPL: probable unadjusted split 7:1 on 2014-06-09 (645.57 -> 92.69; volume after/before "
                               "x3.86, day/after x1.86); give a factor file (--factors)") for line in r.report.notes())
    assert r.universe.splits == ()


def test_trade_and_quote_bars_join_by_time(shared_data: Path) -> None:
    trades, quotes = pq.read_table(shared_data / MINUTE_TRADES), pq.read_table(shared_data / MINUTE_QUOTES)
    r = load_universe(shared_data / MINUTE_TRADES, quotes=shared_data / MINUTE_QUOTES)
    u = r.universe
    assert u.symbols == ("AIG", "BAC", "IBM", "SPY") and r.report.kind == "bars + quotes"
    assert [s.date.day for s in u.sessions] == [4, 7, 8, 9, 10, 11]
    for sym in u.symbols:
        t = u[sym].data.ticks
        n_t = trades.filter(pc.equal(trades["symbol"], sym)).num_rows
        q = quotes.filter(pc.equal(quotes["symbol"], sym))
        assert len(t) == 4 * n_t + 2 * q.num_rows
        assert np.all(np.diff(t.ts) >= 0) and np.all(t.bid <= t.ask)
    # an independent as-of join on SPY: each tick's bid is the latest quote tick at or before it
    q = quotes.filter(pc.equal(quotes["symbol"], "SPY"))
    q_ts = np.array(q["ts_utc"].cast(pa.int64()).to_pylist())
    events = sorted([(int(ts), 0, b) for ts, b in zip(q_ts, q["bid_open"].to_pylist())]
                    + [(int(ts) + 45 * 10**9, 0, b) for ts, b in zip(q_ts, q["bid_close"].to_pylist())])
    t = u["SPY"].data.ticks
    for i in range(0, len(t), 97):
        known = [b for ts, _, b in events if ts <= t.ts[i]]
        if known:
            assert t.bid[i] == known[-1]


def test_folder_and_glob_of_per_symbol_files_equal_the_long_file(shared_data: Path, tmp_path: Path) -> None:
    raw = pq.read_table(shared_data / STOCKBENCH)
    for sym in ("AAPL", "MSFT", "GS"):
        part = raw.filter(pc.equal(raw["symbol"], sym)).drop(["symbol"])
        pacsv.write_csv(part, tmp_path / f"{sym}.csv")
    long = load_universe(shared_data / STOCKBENCH, symbols=["AAPL", "MSFT", "GS"]).universe
    for source in (tmp_path, str(tmp_path / "*.csv"), [tmp_path / "AAPL.csv", tmp_path / "GS.csv", tmp_path / "MSFT.csv"]):
        u = load_universe(source).universe
        assert u.symbols == ("AAPL", "GS", "MSFT")
        for sym in u.symbols:
            a, b = u[sym].data.ticks, long[sym].data.ticks
            assert np.array_equal(a.ts, b.ts) and np.array_equal(a.last, b.last) and np.array_equal(a.size, b.size)
            assert u[sym].missing == long[sym].missing
    (tmp_path / "EURUSD.csv").write_text("ts,bid,ask\n2024-01-02T00:00:00Z,1.1,1.2\n")
    with pytest.raises(DataError) as info:
        load_universe(tmp_path)
    assert str(info.value) == (f"{tmp_path / 'EURUSD.csv'}: mixed files: this one has quotes (ask, bid), AAPL.csv has "
                               "bars (close, high, low, open, volume); the files of one universe share one layout, "
                               "or are the trades and quotes of the same symbols (the trades hold AAPL, GS, MSFT, "
                               "the quotes EURUSD)")


def test_symbols_table_sets_each_instrument(tmp_path: Path) -> None:
    (tmp_path / "bars.csv").write_text(
        "date,symbol,open,high,low,close,volume\n2024-01-02,AAA,10,11,9,10.5,100\n2024-01-02,BTC,40000,41000,"
        "39000,40500,2.5\n2024-01-03,AAA,10.5,11,10,10.75,200\n2024-01-03,BTC,40500,41500,40000,41000,1.5\n")
    (tmp_path / "symbols.csv").write_text("symbol,tick_size,currency,lot_size\nBTC,0.5,usdt,0.0001\nAAA,0.25,,\n")
    u = load_universe(tmp_path / "bars.csv", instruments=tmp_path / "symbols.csv").universe
    btc, aaa = u["BTC"], u["AAA"]
    assert (btc.instrument.tick_size, btc.instrument.currency, btc.lot_size) == (0.5, "USDT", Decimal("0.0001"))
    assert (aaa.instrument.tick_size, aaa.instrument.currency, aaa.lot_size) == (0.25, "USD", Decimal(1))
    (tmp_path / "bad.csv").write_text("symbol,lot_size\nBTC,-1\n")
    with pytest.raises(DataError) as info:
        load_universe(tmp_path / "bars.csv", instruments=tmp_path / "bad.csv")
    assert str(info.value) == (f"{tmp_path / 'bad.csv'}, line 2, column 'lot_size': lot size must be a decimal > 0 "
                               "like 1 or 0.0001, got '-1'")
    with pytest.raises(DataError) as info:
        load_universe(tmp_path / "bars.csv", symbols=["AAA", "ZZZ"])
    assert str(info.value) == (f"{tmp_path / 'bars.csv'}: no rows of symbol ZZZ in the data (it holds AAA, BTC; "
                               "a symbol is matched exactly, as the file spells it)")
    with pytest.raises(DataError, match=r"no rows of symbols aaa, btc in the data \(it holds AAA, BTC;"):
        load_universe(tmp_path / "bars.csv", symbols=["aaa", "btc"])
    with pytest.raises(DataError, match="unknown exchange calendar 'NOPE'"):
        load_universe(tmp_path / "bars.csv", calendar="NOPE")


def test_factor_file_forms_and_errors(tmp_path: Path) -> None:
    lean = tmp_path / "aapl.csv"  # Lean's own per-symbol form: headerless, the symbol from the name
    lean.write_text("20140606,0.9011818,0.0357143,645.57\n20140806,0.9011818,0.25,94.97\n20501231,1,1,0\n")
    rows = read_factor_file(lean)["AAPL"]
    assert [(x.date, x.split_factor) for x in rows] == [(dt.date(2014, 6, 6), 0.0357143),
                                                        (dt.date(2014, 8, 6), 0.25), (dt.date(2050, 12, 31), 1.0)]
    assert read_factor_file(tmp_path)["AAPL"] == rows  # a folder of them
    bad = tmp_path / "x.csv"
    bad.write_text("symbol,date,price_factor,split_factor,reference_price\nX,20200102,1,1,5\nX,20200101,1,1,5\n")
    with pytest.raises(DataError) as info:
        read_factor_file(bad)
    assert str(info.value) == (f"{bad}, line 3, column 'date': X rows out of date order: 2020-01-01 after 2020-01-02 "
                               "(line 2); sort the file by symbol and date")
    bad.write_text("symbol,date,price_factor,split_factor,reference_price\nX,20200102,0,1,5\n")
    with pytest.raises(DataError, match="line 2, column 'price_factor': a factor must be > 0, got 0.0"):
        read_factor_file(bad)


def _daily_file(tmp_path: Path, closes: list[float]) -> Path:
    days = [d for d in (dt.date(2024, 1, 2) + dt.timedelta(days=k) for k in range(3 * len(closes)))
            if d.weekday() < 5 and d not in (dt.date(2024, 1, 15), dt.date(2024, 2, 19))][:len(closes)]
    lines = ["date,open,high,low,close"] + [f"{d},{c},{c},{c},{c}" for d, c in zip(days, closes)]
    p = tmp_path / "ZZ.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_two_for_one_drop_is_flagged_and_a_small_move_is_not(tmp_path: Path) -> None:
    u = load_universe(_daily_file(tmp_path, [100.0, 101.0, 50.5, 51.0, 52.0])).universe
    assert [(p.numerator, p.denominator, p.previous_close, p.open) for p in probable_splits(u["ZZ"].data)] == [
        (2, 1, 101.0, 50.5)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=-0.25, max_value=0.25), min_size=2, max_size=30))
def test_moves_under_a_quarter_are_never_flagged(tmp_path_factory: pytest.TempPathFactory, moves: list[float]) -> None:
    # a session-to-session ratio stays within 0.8 .. 1.34, outside every split band (the
    # nearest are 3:2 from 1.425 and 2:3 up to 0.70)
    closes = [100.0]
    for m in moves:
        closes.append(closes[-1] * (1 + m))
    u = load_universe(_daily_file(tmp_path_factory.mktemp("moves"), closes)).universe
    assert probable_splits(u["ZZ"].data) == []

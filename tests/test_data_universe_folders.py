"""A source whose files are the trades and the quotes of the same symbols (a folder holding a
trade-bars and a quote-bars file) loads as those trades joined with those quotes, exactly as
`load_universe(trades, quotes=quotes)`; trades and quotes of different symbols stay an error
naming both sides; `kestrel simulate --data FOLDER` runs on the join and replays."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from kestrel.data import DataError
from kestrel.data.universe import load_universe

MINUTE = "equities_minute"
TRADES = f"{MINUTE}/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
QUOTES = f"{MINUTE}/lean_us_equities_minute_quote_bars_20131004_20131011.parquet"
FIELDS = ("ts", "bid", "ask", "last", "size", "bid_size", "ask_size")


def _same_ticks(a: object, b: object) -> None:
    for f in FIELDS:
        x, y = getattr(a, f, None), getattr(b, f, None)
        assert (x is None) == (y is None), f
        if x is not None and y is not None:
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f


def test_the_shared_minute_folder_is_its_trades_joined_with_its_quotes(shared_data: Path) -> None:
    folder = load_universe(shared_data / MINUTE)
    pair = load_universe(shared_data / TRADES, quotes=shared_data / QUOTES)
    assert folder.report.kind == pair.report.kind == "bars + quotes"
    assert folder.universe.symbols == pair.universe.symbols == ("AIG", "BAC", "IBM", "SPY")
    assert folder.report.notes() == pair.report.notes()
    for sym in folder.universe.symbols:
        _same_ticks(folder.universe[sym].data.ticks, pair.universe[sym].data.ticks)
    # a glob and a list of the two files are the same source
    for source in (str(shared_data / MINUTE / "*.parquet"), [shared_data / QUOTES, shared_data / TRADES]):
        again = load_universe(source)
        for sym in folder.universe.symbols:
            _same_ticks(again.universe[sym].data.ticks, folder.universe[sym].data.ticks)


def _write(tmp_path: Path, trade_symbols: tuple[str, ...], quote_symbols: tuple[str, ...]) -> Path:
    folder = tmp_path / "u"
    folder.mkdir()
    days = ("2024-03-04", "2024-03-05")
    trades = ["ts,symbol,open,high,low,close,volume"]
    quotes = ["ts,symbol,bid,ask"]
    for d in days:
        for i, s in enumerate(trade_symbols):
            p = 50 + 10 * i
            trades.append(f"{d}T14:31:00Z,{s},{p},{p + 1},{p - 1},{p + 0.5},{100 + i}")
        for i, s in enumerate(quote_symbols):
            p = 50 + 10 * i
            quotes.append(f"{d}T14:30:30Z,{s},{p - 0.02},{p + 0.02}")
    (folder / "trades.csv").write_text("\n".join(trades) + "\n")
    (folder / "quotes.csv").write_text("\n".join(quotes) + "\n")
    return folder


def test_a_generated_folder_of_trades_and_quotes_joins(tmp_path: Path) -> None:
    folder = _write(tmp_path, ("AAA", "BBB"), ("AAA", "BBB"))
    joined = load_universe(folder)
    pair = load_universe(folder / "trades.csv", quotes=folder / "quotes.csv")
    assert joined.report.kind == "bars + quotes" and joined.universe.symbols == ("AAA", "BBB")
    for sym in joined.universe.symbols:
        t = joined.universe[sym].data.ticks
        _same_ticks(t, pair.universe[sym].data.ticks)
        # the 14:30:30 quote comes before the 14:31 bar, whose ticks carry it
        first_bar = int(np.argmax(t.ts >= t.ts[0] + 30 * 10**9))
        assert t.bid[first_bar] == pytest.approx(t.ask[first_bar] - 0.04)


def test_trades_and_quotes_of_different_symbols_stay_an_error_naming_both(tmp_path: Path) -> None:
    folder = _write(tmp_path, ("AAA", "BBB"), ("AAA", "EURUSD"))
    with pytest.raises(DataError) as info:
        load_universe(folder)
    assert str(info.value) == (
        f"{folder / 'quotes.csv'}: mixed files: this one has quotes (ask, bid, symbol), trades.csv has bars (close, "
        "high, low, open, symbol, volume); the files of one universe share one layout, or are the trades and "
        "quotes of the same symbols (the trades hold AAA, BBB, the quotes AAA, EURUSD)")
    with pytest.raises(DataError) as info:
        load_universe(folder, symbols=["BBB"])  # no quotes of the one symbol picked
    assert str(info.value).endswith("(the trades hold BBB, the quotes none)")
    # given explicitly, the quotes join what they can and the report says the rest
    r = load_universe(folder / "trades.csv", quotes=folder / "quotes.csv")
    assert "trades without quotes: BBB" in r.report.notes() and "quotes without trades: EURUSD" in r.report.notes()


def test_simulate_on_the_shared_minute_folder_runs_on_the_join_and_replays(
        shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "minute"
    shutil.copytree(shared_data / MINUTE, folder)
    plans = tmp_path / "m.kes"
    plans.write_text("PLAN a ON SPY UNTIL 15:45\nWHEN pos == 0 AND ask - bid < 0.05: BUY 10 MKT\n"
                     "PLAN b ON IBM\nWHEN pos == 0: BUY 5 MKT\n")
    capture, ledger = tmp_path / "c.json", tmp_path / "l.jsonl"
    code, _, err = run_cli(capsys, "simulate", "--data", str(folder), "--agent", f"fixed:{plans}", "--days", "2",
                           "--capture", str(capture), "--ledger", str(ledger))
    assert code == 0, err
    assert "4 symbols (bars + quotes)" in err
    assert b'"event":"fill"' in ledger.read_bytes() and b'"SPY"' in ledger.read_bytes()
    code, _, err = run_cli(capsys, "replay", str(capture))
    assert code == 0 and "ledger identical to the captured run's" in err, err

"""No data file can crash Kestrel; standard timestamp forms; duplicates; spikes."""

from __future__ import annotations

import datetime as dt
import gzip
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.data import DataError, load
from kestrel.data.timestamps import BadValue, parse_iso

ROOT = Path(__file__).resolve().parent.parent


def _csv(tmp_path: Path, rows: list[str], name: str = "q.csv", header: str = "ts_utc,bid,ask") -> Path:
    p = tmp_path / name
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


def _iso(i: int) -> str:
    return f"2014-05-06T00:{i // 60 % 60:02d}:{i % 60:02d}.158"


def _rows(n: int, suffix: str = "Z", bad: int | None = None, quote: bool = False) -> list[str]:
    out = []
    for i in range(n):
        ts = "not-a-time" if i == bad else _iso(i) + suffix
        out.append(f'"{ts}",1.38000,1.38010' if quote else f"{ts},1.38000,1.38010")
    return out


def _kestrel(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kestrel", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("suffix", ["Z", "+00:00", "+0000", "+00", " UTC", "UTC"])
@pytest.mark.parametrize("quote", [False, True])
def test_standard_utc_forms_load_to_the_same_instants(tmp_path: Path, suffix: str, quote: bool) -> None:
    ts = load(_csv(tmp_path, _rows(1000, suffix, quote=quote)), "oanda").data.ticks.ts
    want = [int(dt.datetime.fromisoformat(_iso(i) + "+00:00").timestamp() * 1e3) * 1_000_000 for i in range(1000)]
    assert ts.tolist() == want


def test_a_bad_timestamp_in_a_big_file_names_the_line_and_value_in_a_subprocess(tmp_path: Path) -> None:
    """Was: exit 139 (numpy's datetime cast of a bytes array crashed the process)."""
    for quote in (False, True):
        p = _csv(tmp_path, _rows(5000, bad=3210, quote=quote), f"bad{quote}.csv")
        r = _kestrel("view", "VIEW v: quote", "--data", str(p), "--preset", "oanda")
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == (f"kestrel view: {p}, line 3212, column 'ts_utc': unparsable timestamp "
                                    "(expected ISO-8601 like 2024-01-02T09:30:00.123Z): 'not-a-time'")


def test_out_of_range_years_are_refused(tmp_path: Path) -> None:
    for year in ("9999", "1500", "2262"):
        rows = _rows(10)
        rows[5] = rows[5].replace("2014", year)
        with pytest.raises(DataError, match=rf"line 7, column 'ts_utc': year {year} out of range \(timestamps must fall in 1678..2261\)"):
            load(_csv(tmp_path, rows), "oanda")
    p = tmp_path / "e.csv"
    p.write_text("local_ts_ns,price,qty\n1,1.0,1\n99999999999999999999,1.0,1\n")
    with pytest.raises(DataError, match="line 3.*epoch timestamp"):
        load(p, "binance_trades")
    p.write_text("unix_s,price,amount\n1,1.0,1\n9300000000,1.0,1\n")
    with pytest.raises(DataError, match=r"line 3.*out of range"):
        load(p, "pyalgotrade_trades")


def test_offsets_give_no_numpy_warning(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ts = load(_csv(tmp_path, _rows(10, "+02:00")), "oanda").data.ticks.ts
    assert int(ts[0]) == int(dt.datetime.fromisoformat(_iso(0) + "+02:00").timestamp() * 1e3) * 1_000_000


@settings(max_examples=300, deadline=None)
@given(
    when=st.datetimes(min_value=dt.datetime(1678, 1, 1), max_value=dt.datetime(2261, 12, 31)),
    offset_min=st.integers(-14 * 60, 14 * 60),
    form=st.sampled_from(["+hh:mm", "+hhmm", "Z", "naive"]),
    sep=st.sampled_from(["T", " "]),
    digits=st.integers(0, 9),
)
def test_iso_parser_agrees_with_the_standard_library(
    when: dt.datetime, offset_min: int, form: str, sep: str, digits: int
) -> None:
    """Differential: every ISO text the parser reads gives Python's own instant."""
    frac = f"{when.microsecond:06d}000"[:digits]
    text = when.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + (f".{frac}" if digits else "")
    if form == "naive" or form == "Z":
        offset_min = 0
    sign = "-" if offset_min < 0 else "+"
    hh, mm = divmod(abs(offset_min), 60)
    text += {"+hh:mm": f"{sign}{hh:02d}:{mm:02d}", "+hhmm": f"{sign}{hh:02d}{mm:02d}", "Z": "Z", "naive": ""}[form]
    got = int(parse_iso(np.array([text]), "UTC")[0])
    base = dt.datetime(when.year, when.month, when.day, when.hour, when.minute, when.second, tzinfo=dt.UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    delta = base - epoch
    want = (delta.days * 86400 + delta.seconds) * 10**9 + int((frac or "0").ljust(9, "0")) - offset_min * 60 * 10**9
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_iso_parser_refuses_or_reads_any_text(text: str) -> None:
    try:
        out = parse_iso(np.array([text, "2024-01-02T00:00:00Z"]), "UTC")
    except BadValue as e:
        assert e.index in (0, 1)
    else:
        assert out.dtype == np.int64 and len(out) == 2


def test_fuzzed_files_load_cleanly_or_fail_with_a_data_error(tmp_path: Path) -> None:
    """1500 damaged CSV/Parquet files of 1..5000 rows in a subprocess (warnings are errors):
    a crash or any exception other than `DataError` fails the test."""
    r = subprocess.run(
        [sys.executable, "-W", "error", str(ROOT / "tests" / "fuzz_loaders.py"), "20261130", "1500", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert '"files": 1500' in r.stdout and '"refused": ' in r.stdout


def test_duplicate_columns_are_an_error(tmp_path: Path) -> None:
    p = _csv(tmp_path, ["2014-05-06T00:00:00Z,1.38,1.3801,1.3801"], header="ts_utc,bid,ask,ask")
    with pytest.raises(DataError, match=r"column 'ask': duplicate column 'ask' in the header \(columns 3 and 4\)"):
        load(p, "oanda")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.Table.from_arrays([pa.array(["2014-05-06T00:00:00Z"]), pa.array([1.38]), pa.array([1.39]), pa.array([1.4])],
                             names=["ts_event", "bid", "ask", "bid"])
    pq.write_table(t, tmp_path / "d.parquet")
    with pytest.raises(DataError, match="duplicate column 'bid'"):
        load(tmp_path / "d.parquet", "oanda")


def _spiky(tmp_path: Path) -> Path:
    rows = [f"{_iso(i)}Z,1.38000,1.38010" for i in range(20)]
    rows[7] = f"{_iso(7)}Z,1.38000,1380000.0"  # a fat finger: 1.38 -> 1,380,000
    return _csv(tmp_path, rows, "spike.csv")


def test_price_spikes_are_refused_dropped_or_kept_and_counted(tmp_path: Path) -> None:
    p = _spiky(tmp_path)
    with pytest.raises(DataError, match=r"line 9, column 'ask': price spike at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: 1380000.0 between 1.3801 and 1.3801 "
                                        r"\(more than 2x from both neighbours\); 1 such row; pass spikes='drop' or 'keep'"):
        load(p, "oanda")
    dropped = load(p, "oanda", spikes="drop")
    assert dropped.report.spikes == 1 and dropped.report.spikes_dropped == 1 and dropped.report.ticks == 19
    assert float(dropped.data.ticks.ask.max()) == 1.3801
    assert "1 price spikes (> 2x from both neighbours): dropped 1" in dropped.report.notes()
    kept = load(p, "oanda", spikes="keep")
    assert kept.report.spikes == 1 and kept.report.spikes_dropped == 0 and kept.report.ticks == 20
    # a configurable factor: at 1e7 the jump is not a spike
    assert load(p, "oanda", spike_factor=1e7).report.spikes == 0
    # a move that does not revert is a move, not a spike
    rows = [f"{_iso(i)}Z,{1.38 if i < 7 else 3.0:.5f},{1.3801 if i < 7 else 3.0001:.5f}" for i in range(20)]
    assert load(_csv(tmp_path, rows, "level.csv"), "oanda").report.spikes == 0


def test_spikes_on_the_cli(tmp_path: Path) -> None:
    p = _spiky(tmp_path)
    r = _kestrel("view", "VIEW v: quote", "--data", str(p), "--preset", "oanda")
    assert r.returncode == 2 and "price spike" in r.stderr and "--spikes drop|keep" in r.stderr
    r = _kestrel("view", "VIEW v: quote", "--data", str(p), "--preset", "oanda", "--spikes", "drop")
    assert r.returncode == 0, r.stderr
    assert "1 price spikes (> 2x from both neighbours): dropped 1" in r.stderr


def test_messages_for_files_that_are_not_csv_text(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty.csv: file is empty"):
        load(empty)
    semi = tmp_path / "semi.csv"
    semi.write_text("ts_utc;bid;ask\n2014-05-06T00:00:00Z;1.1;1.2\n")
    with pytest.raises(DataError, match=r"the header holds ';' but no ',': the file is not comma-separated; pass --delimiter ';' "
                       r"\(in Python: load\(\.\.\., delimiter=';'\)\)"):
        load(semi)
    assert load(semi, delimiter=";").data.ticks.ask.tolist() == [1.2]
    gz = tmp_path / "gz.csv"
    gz.write_bytes(gzip.compress(b"ts_utc,bid,ask\n"))
    with pytest.raises(DataError) as e:
        load(gz)
    assert str(e.value) == f"{gz}: not a CSV text file: gzip-compressed data: decompress it first (gunzip)"
    for preset in (None, "oanda"):
        junk = tmp_path / "junk.csv"
        junk.write_bytes(b"ts_utc,bid,ask\n" + bytes(range(256)))
        with pytest.raises(DataError) as e:
            load(junk, preset)
        assert str(e.value).isprintable() and "\\x" not in str(e.value)


def test_instrument_from_presets(tmp_path: Path) -> None:
    from kestrel.data import preset

    assert (preset("cme_bars").multiplier, preset("cme_bars").currency) == (125_000.0, "USD")
    assert preset("freqtrade_trades").currency == "ETH"
    assert preset("binance_trades").currency == preset("binance_bookticker").currency == "USDT"
    assert preset("truefx").currency == "JPY" and preset("oanda").currency == "USD"
    p = _csv(tmp_path, _rows(5))
    inst = load(p, "oanda", multiplier=100000, currency="EUR").data.instrument
    assert (inst.symbol, inst.multiplier, inst.currency) == ("EURUSD", 100000.0, "EUR")
    with pytest.raises(DataError, match="multiplier must be a finite number > 0"):
        load(p, "oanda", multiplier=-1)

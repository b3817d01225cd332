"""Loaders on small good and bad files written into tmp_path; every error message checked."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kestrel.data import DataError, LoadSpec, detect_preset, load, load_market_data
from kestrel.data.load import infer_tick_size

QUOTES = LoadSpec(kind="quotes", ts="time", bid="bid", ask="ask", symbol="X")


def _write(tmp_path: Path, text: str, name: str = "f.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _err(path: Path, **kw: Any) -> str:
    with pytest.raises(DataError) as info:
        load(path, **kw)
    return str(info.value)


def test_quotes_csv_iso_z(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T14:30:00.000Z,1.5,1.52\n2024-01-02T14:30:01.250Z,1.51,1.53\n")
    r = load(p, spec=QUOTES)
    t = r.data.ticks
    assert t.ts.tolist() == [1704205800_000_000_000, 1704205801_250_000_000]
    assert t.bid.tolist() == [1.5, 1.51] and t.ask.tolist() == [1.52, 1.53]
    assert t.last.tolist() == pytest.approx([1.51, 1.52]) and t.size.tolist() == [0.0, 0.0]
    assert r.data.tick_size == 0.01 and r.report.tick_size_inferred
    assert r.report.rows == 2 and r.report.ticks == 2
    assert [s.date.isoformat() for s in r.data.sessions] == ["2024-01-02"]


def test_iso_offsets_space_separator_and_naive_tz(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02 09:30:00-05:00,1,2\n2024-01-02 14:30:00.5+00:00,1,2\n")
    assert load(p, spec=QUOTES).data.ticks.ts.tolist() == [1704205800_000_000_000, 1704205800_500_000_000]
    naive = _write(tmp_path, "time,bid,ask\n2024-07-01 09:30:00,1,2\n", "n.csv")
    spec = LoadSpec(kind="quotes", ts="time", bid="bid", ask="ask", tz="America/New_York")
    assert load(naive, spec=spec).data.ticks.ts.tolist() == [1719840600_000_000_000]  # 13:30Z in EDT


def test_trades_unix_ms_and_headerless_histdata(tmp_path: Path) -> None:
    p = _write(tmp_path, "ms,px,qty\n1570752011620,0.5,2\n1570752011620,0.6,3\n")
    spec = LoadSpec(kind="trades", ts="ms", ts_format="unix_ms", price="px", size="qty")
    t = load(p, spec=spec).data.ticks
    assert t.ts.tolist() == [1570752011620_000_000] * 2
    assert t.bid.tolist() == t.ask.tolist() == t.last.tolist() == [0.5, 0.6]
    assert t.size.tolist() == [2.0, 3.0]
    h = _write(tmp_path, "20200101 170000065,1.121200,1.121720,0\n", "h.csv")
    r = load(h, "histdata")
    assert r.data.ticks.ts.tolist() == [1577916000_065_000_000]  # 17:00:00.065 EST = 22:00:00.065Z
    assert detect_preset(h) == "histdata"


def test_bars_become_four_ordered_ticks(tmp_path: Path) -> None:
    p = _write(tmp_path, "timestamp,open,high,low,close,volume\n"
                         "2024-01-02 00:00:00,10,12,9,11,40\n2024-01-02 00:01:00,11,11.5,8,9,8\n")
    r = load(p, "btc_bars")
    t = r.data.ticks
    s = 1_000_000_000
    base = 1704153600 * s
    assert t.ts.tolist() == [base + k * 15 * s for k in range(8)]
    # up bar: open, low, high, close; down bar: open, high, low, close
    assert t.last.tolist() == [10, 9, 12, 11, 11, 11.5, 8, 9]
    assert t.size.tolist() == [10] * 4 + [2] * 4
    assert t.bid.tolist() == t.last.tolist() == t.ask.tolist()
    assert r.report.rows == 2 and r.report.ticks == 8


def test_parquet_quotes(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    p = tmp_path / "q.parquet"
    ts = pa.array([1_000_000_000, 2_000_000_000], type=pa.timestamp("ns", tz="UTC"))
    pq.write_table(pa.table({"ts_event": ts, "bid": [1.0, 1.1], "ask": [1.2, 1.3]}), p)
    r = load(p, "oanda")
    assert r.data.ticks.ts.tolist() == [1_000_000_000, 2_000_000_000]
    assert r.data.ticks.ask.tolist() == [1.2, 1.3]
    assert detect_preset(p) == "oanda"
    pq.write_table(pa.table({"ts_event": ts, "bid": [1.0, None], "ask": [1.2, 1.3]}), p)
    assert _err(p, preset_name="oanda") == f"{p}, row 2, column 'bid': missing value (null)"


def test_parquet_timestamp_errors_name_the_row(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    p = tmp_path / "t.parquet"
    text = pa.array(["2024-01-02T00:00:00Z", "2024-13-02T00:00:01Z"])
    pq.write_table(pa.table({"ts_event": text, "bid": [1.0, 1.1], "ask": [1.2, 1.3]}), p)
    assert _err(p, preset_name="oanda") == (
        f"{p}, row 2, column 'ts_event': timestamp field out of range (no such date or "
        "time of day): '2024-13-02T00:00:01Z'"
    )
    naive = pa.array([1_000_000_000, 2_000_000_000], type=pa.timestamp("ns"))
    pq.write_table(pa.table({"ts_event": naive, "bid": [1.0, 1.1], "ask": [1.2, 1.3]}), p)
    bad_tz = LoadSpec(kind="quotes", ts="ts_event", bid="bid", ask="ask", tz="Mars/Olympus")
    assert _err(p, spec=bad_tz) == (
        f"{p}, column 'ts_event': unknown timezone 'Mars/Olympus' (use an IANA name like "
        "'America/New_York' or 'Etc/GMT+5')"
    )


def test_missing_pyarrow_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path, "x", "q.parquet")
    real = builtins.__import__

    def fake(name: str, *a: Any, **k: Any) -> Any:
        if name.startswith("pyarrow"):
            raise ImportError("no pyarrow")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    msg = _err(p, preset_name="oanda")
    assert msg == f"{p}: reading Parquet needs pyarrow, an optional extra: pip install 'kestrel[parquet]'"


def test_empty_file_and_header_only(tmp_path: Path) -> None:
    e = _write(tmp_path, "", "e.csv")
    assert _err(e, spec=QUOTES) == f"{e}: file is empty: expected a header line and data rows"
    h = _write(tmp_path, "time,bid,ask\n", "h.csv")
    assert _err(h, spec=QUOTES) == f"{h}: no data rows after the header"


def test_missing_column(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,offer\n2024-01-02T00:00:00Z,1,2\n")
    assert _err(p, spec=QUOTES) == (
        f"{p}, column 'ask': missing column 'ask' needed for ask; the file has time, bid, offer "
        "(map it in the LoadSpec or choose another preset)"
    )


def test_wrong_field_count(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,1,2\n2024-01-02T00:00:01Z,1\n")
    assert _err(p, spec=QUOTES) == f"{p}, line 3: expected 3 fields (time,bid,ask), found 2"


def test_unparsable_and_non_finite_numbers(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,1,2\n2024-01-02T00:00:01Z,1.o1,2\n")
    assert _err(p, spec=QUOTES) == f"{p}, line 3, column 'bid': unparsable number '1.o1'"
    q = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,1,nan\n", "n.csv")
    assert _err(q, spec=QUOTES) == f"{q}, line 2, column 'ask': not a finite number: 'nan'"


def test_unparsable_timestamp(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,1,2\n2024-13-02T00:00:01Z,1,2\n")
    assert _err(p, spec=QUOTES) == (
        f"{p}, line 3, column 'time': timestamp field out of range (no such date or "
        "time of day): '2024-13-02T00:00:01Z'"
    )
    u = _write(tmp_path, "ms,px\n123,1\n12x,1\n", "u.csv")
    spec = LoadSpec(kind="trades", ts="ms", ts_format="unix_ms", price="px")
    assert _err(u, spec=spec) == f"{u}, line 3, column 'ms': unparsable epoch timestamp (unix_ms): '12x'"
    h = _write(tmp_path, "20200101 170000065,1,2,0\n2020-01-01 17:00,1,2,0\n", "h.csv")
    assert _err(h, preset_name="histdata") == (
        f"{h}, line 2, column 'ts': unparsable HistData timestamp (expected YYYYMMDD HHMMSSfff): '2020-01-01 17:00'"
    )


def test_non_monotonic_timestamps(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:02Z,1,2\n2024-01-02T00:00:03Z,1,2\n"
                         "2024-01-02T00:00:01Z,1,2\n")
    assert _err(p, spec=QUOTES) == (
        f"{p}, line 4, column 'time': timestamp goes backwards: 2024-01-02T00:00:01.000Z is before "
        "the previous row's 2024-01-02T00:00:03.000Z (1 such rows); sort the file by time"
    )


CROSSED = "time,bid,ask\n2024-01-02T00:00:00Z,1.0,1.1\n2024-01-02T00:00:01Z,1.2,1.1\n" \
          "2024-01-02T00:00:02Z,1.0,1.1\n2024-01-02T00:00:03Z,1.3,1.2\n"


def test_crossed_quotes_error_by_default(tmp_path: Path) -> None:
    p = _write(tmp_path, CROSSED)
    assert _err(p, spec=QUOTES) == (
        f"{p}, line 3, column 'ask': crossed quote: ask 1.1 < bid 1.2; 2 of 4 rows are crossed (50.0%); "
        "pass crossed='drop' or 'keep' (CLI --crossed drop|keep)"
    )


def test_crossed_quotes_drop_and_keep(tmp_path: Path) -> None:
    p = _write(tmp_path, CROSSED)
    d = load(p, spec=QUOTES, crossed="drop")
    assert d.data.ticks.bid.tolist() == [1.0, 1.0]
    assert (d.report.crossed, d.report.dropped, d.report.ticks) == (2, 2, 2)
    assert d.report.notes()[1] == "2 crossed quotes (ask < bid): dropped 2"
    k = load(p, spec=QUOTES, crossed="keep")
    assert k.data.ticks.bid.tolist() == [1.0, 1.2, 1.0, 1.3]
    assert (k.report.crossed, k.report.dropped, k.report.ticks) == (2, 0, 4)
    assert k.report.notes()[1] == "2 crossed quotes (ask < bid): kept as is"


def test_inconsistent_bar(tmp_path: Path) -> None:
    p = _write(tmp_path, "timestamp,open,high,low,close,volume\n2024-01-02 00:00:00,10,9,8,9.5,1\n")
    assert _err(p, preset_name="btc_bars") == (
        f"{p}, line 2, column 'high': inconsistent bar: high 9.0 below open/close/low"
    )
    q = _write(tmp_path, "timestamp,open,high,low,close,volume\n2024-01-02 00:00:00,10,11,10.5,10.8,1\n", "q.csv")
    assert _err(q, preset_name="btc_bars") == f"{q}, line 2, column 'low': inconsistent bar: low 10.5 above open/close"


def test_unknown_preset_and_undetectable_file(tmp_path: Path) -> None:
    p = _write(tmp_path, "a,b\n1,2\n")
    assert _err(p, preset_name="nope").startswith(f"{p}: unknown preset 'nope'; presets: binance_bookticker, ")
    assert _err(p) == (
        f"{p}: no timestamp column (ts, timestamp, ts_utc, ts_event, timestamp_utc, datetime, date, time) among "
        "columns a, b; name it with --columns ts=COLUMN; or pass a preset (binance_bookticker, binance_trades, "
        "btc_bars, cme_bars, freqtrade_trades, fxcm, histdata, oanda, pyalgotrade_trades, truefx)"
    )
    with pytest.raises(DataError, match="no preset matches columns a, b"):
        detect_preset(p)
    assert _err(tmp_path / "absent.csv") == f"{tmp_path / 'absent.csv'}: no such file"
    assert _err(tmp_path) == f"{tmp_path}: is a directory, not a data file"


def test_overrides_and_helpers(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,1.25,1.5\n")
    d = load_market_data(p, spec=QUOTES, symbol="EURX", tick_size=0.25)
    assert (d.symbol, d.tick_size, d.price_decimals) == ("EURX", 0.25, 2)
    assert infer_tick_size(np.array([61837.63, 61837.6])) == 0.01
    assert infer_tick_size(np.array([1.38727, 1.3873])) == 1e-05
    assert infer_tick_size(np.array([46319.0, 46385.0])) == 1.0


def test_tick_size_is_the_greatest_common_step_of_the_grid() -> None:
    # 6E-like half-pip grid: every price a multiple of 0.00005, some not of 0.0001
    assert infer_tick_size(np.array([1.1045, 1.10455, 1.1046, 1.10475])) == 5e-05
    assert infer_tick_size(np.array([4500.25, 4500.5, 4501.0])) == 0.25
    assert infer_tick_size(np.array([10.0, 12.5, 15.0])) == 2.5
    # float noise from arithmetic does not make the grid finer
    assert infer_tick_size(np.array([0.1 + 0.2, 0.1, 0.7])) == 0.1
    assert infer_tick_size(np.array([0.99999999, 1.0])) == 1e-08
    # one distinct price shows no step: keep its decimal step
    assert infer_tick_size(np.array([101.5, 101.5])) == 0.1
    assert infer_tick_size(np.array([1.123456789])) == 1e-08


def test_given_tick_size_must_divide_every_price(tmp_path: Path) -> None:
    p = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,1.25,1.5\n2024-01-02T00:00:01Z,1.25,1.3\n")
    assert _err(p, spec=QUOTES, tick_size=0.25) == (
        f"{p}, line 3, column 'ask': price 1.3 is not a multiple of the tick size 0.25 (1 price off that grid); "
        "give the instrument's real tick size or omit it to infer it (inferred: 0.1)"
    )
    assert _err(p, spec=QUOTES, tick_size=0.0) == f"{p}: tick size must be a number >= 1e-12, got 0.0"
    assert _err(p, spec=QUOTES, tick_size=float("nan")) == f"{p}: tick size must be a number >= 1e-12, got nan"
    assert load(p, spec=QUOTES, tick_size=0.05).data.price_decimals == 2


def test_naive_times_across_real_dst_switches(tmp_path: Path) -> None:
    """New York 2024: clocks went forward at 02:00 EST on 10 March and back at 02:00 EDT on
    3 November. Expected UTC instants worked out by hand (EST = UTC-5, EDT = UTC-4)."""
    spec = LoadSpec(kind="quotes", ts="time", bid="bid", ask="ask", tz="America/New_York")
    fwd = _write(tmp_path, "time,bid,ask\n2024-03-10 01:59:59,1,2\n2024-03-10 03:00:00,1,2\n"
                           "2024-03-10 03:00:01,1,2\n2024-03-11 09:30:00,1,2\n", "fwd.csv")
    assert load(fwd, spec=spec).data.ticks.ts.tolist() == [
        1710053999_000_000_000,  # 06:59:59Z (EST)
        1710054000_000_000_000,  # 07:00:00Z (EDT): one second later, not an hour
        1710054001_000_000_000,
        1710163800_000_000_000,  # 13:30Z next day
    ]
    # the repeated hour: 01:30 and 01:59 first pass (EDT), the step back to 01:10 starts the
    # second pass (EST); 02:00 is EST only
    back = _write(tmp_path, "time,bid,ask\n2024-11-03 00:59:00,1,2\n2024-11-03 01:30:00,1,2\n"
                            "2024-11-03 01:59:00,1,2\n2024-11-03 01:10:00,1,2\n2024-11-03 01:40:00,1,2\n"
                            "2024-11-03 02:00:00,1,2\n", "back.csv")
    assert load(back, spec=spec).data.ticks.ts.tolist() == [
        1730609940_000_000_000,  # 04:59Z
        1730611800_000_000_000,  # 05:30Z
        1730613540_000_000_000,  # 05:59Z
        1730614200_000_000_000,  # 06:10Z
        1730616000_000_000_000,  # 06:40Z
        1730617200_000_000_000,  # 07:00Z
    ]
    gap = _write(tmp_path, "time,bid,ask\n2024-03-10 01:59:00,1,2\n2024-03-10 02:30:00,1,2\n", "gap.csv")
    assert _err(gap, spec=spec) == (
        f"{gap}, line 3, column 'time': wall-clock time skipped by the DST switch in America/New_York "
        "(no such local time): '2024-03-10 02:30:00'"
    )
    # explicit offsets are never re-localized, even inside the skipped hour
    mixed = _write(tmp_path, "time,bid,ask\n2024-03-10 02:30:00-05:00,1,2\n2024-03-10 03:30:00,1,2\n", "m.csv")
    assert load(mixed, spec=spec).data.ticks.ts.tolist() == [1710055800_000_000_000, 1710055800_000_000_000]
    # HistData digits go through the same rule
    hd = LoadSpec(kind="quotes", ts="ts", ts_format="histdata", tz="Europe/Berlin", bid="bid", ask="ask",
                  header=False, names=("ts", "bid", "ask", "v"))
    h = _write(tmp_path, "20240331 015959000,1,2,0\n20240331 030000000,1,2,0\n", "h.csv")
    assert load(h, spec=hd).data.ticks.ts.tolist() == [1711846799_000_000_000, 1711846800_000_000_000]


def test_crossed_keep_is_the_documented_exception_to_bid_le_ask(tmp_path: Path) -> None:
    import datetime as dt

    from kestrel.engine import Engine, EngineConfig
    from kestrel.engine.ledger import Filled
    from kestrel.market import SessionSpec
    from kestrel.frame import freeze, materialize
    from kestrel.frame.view import ResolvedPane, ResolvedView
    from kestrel.lang import Plan, parse

    p = _write(tmp_path, CROSSED)
    assert not load(p, spec=QUOTES, crossed="drop").data.crossed_kept
    data = load(p, spec=QUOTES, crossed="keep").data
    assert data.crossed_kept
    with pytest.raises(ValueError, match=r"crossed quote at row 1: ask 1.1 < bid 1.2 \(2 crossed rows in all\)"):
        data.ticks.validated()
    assert data.ticks.validated(allow_crossed=True) is data.ticks
    # the flag survives slicing and freezing; the quote pane marks a crossed touch
    at = int(data.ticks.ts[1])
    snap = freeze(data, at, 0)
    assert snap.data.crossed_kept and data.until(at).crossed_kept and data.between(0, at).crossed_kept
    quote = ResolvedView("q", (ResolvedPane("quote"),), 900)
    assert materialize(quote, snap).split("\n")[1] == "bid 1.2 ask 1.1 spr -0.1 last 1.1 sz 0 CROSSED"
    assert "CROSSED" not in materialize(quote, freeze(data, int(data.ticks.ts[2]), 0))
    # the engine fills at the recorded touch: the buy placed at tick 0 fills at tick 1's ask
    # 1.1 although that tick's bid is 1.2
    plan = parse("PLAN p\nWHEN last > 0: BUY 1 MKT")
    assert isinstance(plan, Plan)
    e = Engine(EngineConfig(), SessionSpec.around_the_clock(dt.date(2024, 1, 2)), "X", data.tick_size)
    e.arm(plan)
    e.run(data.ticks, path="reference", final=False)
    fill = next(f for f in e.ledger.events if isinstance(f, Filled))
    assert (fill.tick, fill.side, fill.price) == (1, "buy", 1.1)


def test_signs_and_delimiter_hint(tmp_path: Path) -> None:
    neg = _write(tmp_path, "timestamp_ms,id,side,price,amount,cost\n1570752011620,1,buy,0.5,2,1\n"
                           "1570752011621,2,buy,0.5,-2,1\n", "neg.csv")
    assert _err(neg, preset_name="freqtrade_trades") == (
        f"{neg}, line 3, column 'amount': negative size: -2.0 (1 such row)"
    )
    zero = _write(tmp_path, "time,bid,ask\n2024-01-02T00:00:00Z,0,0.1\n2024-01-02T00:00:01Z,-1,0.1\n", "z.csv")
    assert _err(zero, spec=QUOTES) == f"{zero}, line 2, column 'bid': price not positive: 0.0 (2 such rows)"
    semi = _write(tmp_path, "time;bid;ask\n2024-01-02T00:00:00Z;1.0;1.1\n", "semi.csv")
    assert _err(semi, spec=QUOTES) == (
        f"{semi}, column 'time': missing column 'time' needed for timestamps; the file has time;bid;ask "
        "(the header holds ';' but no separator of the spec: pass --delimiter ';' "
        "(in Python: load(..., delimiter=';')))"
    )
    ok = load(semi, spec=LoadSpec(kind="quotes", ts="time", bid="bid", ask="ask", delimiter=";"))
    assert ok.data.ticks.ask.tolist() == [1.1]

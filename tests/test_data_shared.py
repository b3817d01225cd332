"""Every file of the shared data folder loads through its preset (skips when absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kestrel.data import DataError, detect_preset, load
from kestrel.frame import Ordinal, briefing, freeze

# (file, preset, crossed policy, rows per README, first timestamp UTC, price decimals)
FILES = [
    ("fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet", "oanda", "error", 532_903,
     "2014-05-01T00:00:00.292", 5),
    ("fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140506.csv", "oanda", "error", 44_864,
     "2014-05-06T00:00:00.158", 5),
    ("fx_quote_ticks/lean_fxcm_eurusd_quote_ticks_20140501_20140515.parquet", "fxcm", "drop", 1_144_807,
     "2014-05-01T05:00:01.787", 5),
    ("fx_quote_ticks/nautilus_histdata_eurusd_quote_ticks_20200101.csv", "histdata", "error", 9_500,
     "2020-01-01T22:00:00.065", 5),
    ("fx_quote_ticks/nautilus_truefx_usdjpy_ticks_20130101.csv", "truefx", "error", 1_000,
     "2013-01-01T22:00:00.295", 3),
    ("crypto_hf/hftbacktest_binance_spot_btcusdt_bookticker_20240808T2354_20240809T0005.csv",
     "binance_bookticker", "error", 73_174, "2024-08-08T23:54:14.087", 2),
    ("crypto_hf/hftbacktest_binance_spot_btcusdt_trades_20240808T2354_20240809T0005.csv",
     "binance_trades", "error", 19_904, "2024-08-08T23:54:14.087", 2),
    ("bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv", "cme_bars", "error", 29_996,
     "2024-01-01T23:01:00.000", 5),
    ("bars_1min/nautilus_btc_perp_1min_bars_20211231_20220201.csv", "btc_bars", "error", 45_031,
     "2021-12-31T23:01:00.000", 3),  # grid step 0.125 (a few 1/8-dollar prices)
    ("trades/freqtrade_binance_xrpeth_trades_20191011_20191013.csv", "freqtrade_trades", "error", 12_477,
     "2019-10-11T00:00:11.620", 8),
    ("trades/pyalgotrade_bitstamp_btcusd_trades_20110913_20120531.csv", "pyalgotrade_trades", "error", 9_999,
     "2011-09-13T13:53:36.000", 2),
]


@pytest.mark.parametrize(("rel", "preset", "crossed", "rows", "first", "decimals"), FILES,
                         ids=[f[1] + ":" + Path(f[0]).suffix[1:] for f in FILES])
def test_shared_file_loads_with_preset(
    shared_data: Path, rel: str, preset: str, crossed: str, rows: int, first: str, decimals: int
) -> None:
    path = shared_data / rel
    r = load(path, preset, crossed=crossed)  # type: ignore[arg-type]
    t = r.data.ticks
    assert r.report.rows == rows
    assert len(t) == (4 * rows if r.report.kind == "bars" else rows - r.report.dropped)
    assert np.datetime_as_string(t.ts[:1].astype("datetime64[ns]"), unit="ms")[0] == first
    assert np.all(np.diff(t.ts) >= 0)
    assert r.data.price_decimals == decimals
    assert r.data.sessions and r.data.session_open_ns[0] <= t.ts[0]
    # detection names the preset itself: OANDA's and FXCM's files share their columns, their
    # names tell them apart (the FXCM parquet is recorded as fxcm, not oanda)
    assert detect_preset(path) == preset
    # and the frame renders it
    text = briefing(freeze(r.data, int(t.ts[-1]) + 1, 0), Ordinal(1, "END", int(t.ts[-1]) + 1))
    assert f"QUOTE {r.data.symbol}" in text


def test_fxcm_crossed_quotes_default_error_and_policies(shared_data: Path) -> None:
    path = shared_data / "fx_quote_ticks/lean_fxcm_eurusd_quote_ticks_20140501_20140515.parquet"
    with pytest.raises(DataError) as info:
        load(path, "fxcm")
    assert str(info.value) == (
        f"{path}, row 37, column 'ask': crossed quote: ask 1.38723 < bid 1.38724; 116871 of 1144807 rows "
        "are crossed (10.2%); pass crossed='drop' or 'keep' (CLI --crossed drop|keep)"
    )
    kept = load(path, "fxcm", crossed="keep")
    assert (kept.report.crossed, kept.report.dropped, len(kept.data.ticks)) == (116_871, 0, 1_144_807)
    dropped = load(path, "fxcm", crossed="drop")
    assert len(dropped.data.ticks) == 1_144_807 - 116_871
    assert bool(np.all(dropped.data.ticks.ask >= dropped.data.ticks.bid))


def test_histdata_is_est_not_utc(shared_data: Path) -> None:
    r = load(shared_data / "fx_quote_ticks/nautilus_histdata_eurusd_quote_ticks_20200101.csv", "histdata")
    last = np.datetime_as_string(r.data.ticks.ts[-1:].astype("datetime64[ns]"), unit="s")[0]
    assert last.startswith("2020-01-02T04:00")  # 23:00 EST → 04:00 UTC next day


def test_csv_and_parquet_paths_agree_on_the_same_day(shared_data: Path) -> None:
    """Differential: the OANDA one-day CSV equals the Parquet file's rows for that UTC day."""
    csv = load(shared_data / "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140506.csv", "oanda").data
    pq = load(shared_data / "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet", "oanda").data
    day = np.datetime64("2014-05-06", "ns").astype(np.int64)
    part = pq.ticks.between(int(day), int(day) + 86_400 * 1_000_000_000)
    assert len(part) == len(csv.ticks) == 44_864
    for name in ("ts", "bid", "ask", "last", "size"):
        assert np.array_equal(getattr(part, name), getattr(csv.ticks, name)), name


def test_cme_6e_tick_is_the_half_pip(shared_data: Path) -> None:
    r = load(shared_data / "bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv", "cme_bars")
    assert (r.data.tick_size, r.data.price_decimals, r.report.tick_size_inferred) == (5e-05, 5, True)
    with pytest.raises(DataError, match=r"line \d+, column 'open': price 1\.\d+ is not a multiple of the tick size 0\.0001"):
        load(shared_data / "bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv", "cme_bars",
             tick_size=0.0001)

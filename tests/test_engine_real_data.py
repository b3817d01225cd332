"""The engine on real recorded quotes (skips cleanly without the shared data): both paths
give the same ledger bytes, and plans that should trade do trade."""

from __future__ import annotations

from pathlib import Path

from kestrel.data.load import load_market_data
from kestrel.engine import Engine, EngineConfig, Filled, Fired

from engine_helpers import plan

FX_PLANS = [
    "PLAN cross RISK maxpos 100000 maxloss 500\n"
    "WHEN mid CROSSES ABOVE sma(mid, 200): BUY 10000 MKT STOP -0.05% TARGET +0.1% x5",
    "PLAN brk RISK maxpos 100000 maxloss 500\n"
    "WHEN last > high(30m) AND spread < 0.0002: BUY 10000 LMT bid STOP -0.03% TRAIL 0.02% TTL 5m x3",
    "PLAN fade RISK maxpos 100000\n"
    "WHEN chg(10m) < -0.05: SELL 10000 STP bid-0.0001 TARGET -0.05% x2",
    "PLAN vol RISK maxpos 100000\n"
    "WHEN atr(14, 5m) > 0.0002 AND last < vwap: SELL 10000 MKT STOP +0.04% x2",
]


def test_fx_quotes_both_paths_agree(shared_data: Path) -> None:
    data = load_market_data(shared_data / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet")
    # the operator allows FX sizes (the plans tighten maxloss where they set it)
    cfg = EngineConfig(maxpos=100_000, maxloss=5000, fee_per_unit=0.00002, slippage_ticks=1,
                       latency_ns=50_000_000)
    total_fills = 0
    for session in data.sessions[1:4]:
        day = data.ticks.between(session.open_ns, session.close_ns)
        if len(day) == 0:
            continue
        for text in FX_PLANS:
            out = []
            for path in ("reference", "fast"):
                e = Engine(cfg, session, data.symbol, data.tick_size)
                e.arm(plan(text))
                e.run(day, path=path)
                out.append(e.ledger.to_jsonl())
                assert e.pos == 0  # flattened at the close / end of data
            assert out[0] == out[1], f"{text.splitlines()[0]} on {session.date}"
            total_fills += out[0].count(b'"event":"fill"')
    assert total_fills > 20


def test_crypto_book_ticker_with_sizes(shared_data: Path) -> None:
    data = load_market_data(
        shared_data / "crypto_hf" / "hftbacktest_binance_spot_btcusdt_bookticker_20240808T2354_20240809T0005.csv")
    session = data.sessions[0]
    text = ("PLAN scalp RISK maxpos 5 maxloss 200\n"
            "WHEN mid CROSSES BELOW ema(mid, 100): BUY 1 LMT bid STOP -0.1% TARGET +0.05% TTL 30s x4")
    out = []
    for path in ("reference", "fast"):
        e = Engine(EngineConfig(partial_fills=True), session, data.symbol, data.tick_size)
        e.arm(plan(text))
        e.run(data.ticks, path=path)
        out.append(e.ledger.to_jsonl())
    assert out[0] == out[1]
    assert any(isinstance(x, Filled) for x in e.ledger.events)



def test_tick_sma_crosses_are_exact_on_quantized_crypto_ticks(shared_data: Path) -> None:
    """`mid CROSSES ABOVE sma(mid, 20)` on the Binance window fires exactly at the ticks where
    it holds in exact arithmetic (checked here in whole half cents), on both paths: a binary
    running sum used to fire at ties that are not crosses."""
    data = load_market_data(
        shared_data / "crypto_hf" / "hftbacktest_binance_spot_btcusdt_bookticker_20240808T2354_20240809T0005.csv")
    assert data.tick_size == 0.01
    # mid in half cents, exactly: the data's prices sit on the cent grid
    m2: list[int] = [round(b * 100) + round(a * 100) for b, a in zip(data.ticks.bid.tolist(), data.ticks.ask.tolist())]
    s20 = [sum(m2[i - 19:i + 1]) for i in range(19, len(m2))]  # 20 x sma, in half cents

    def above(i: int) -> bool:  # mid > sma(mid, 20)  <=>  20 mid > sum of the last 20
        return 20 * m2[i] > s20[i - 19]

    exact = [i for i in range(20, len(m2)) if not above(i - 1) and above(i)]
    text = "PLAN x\nWHEN mid CROSSES ABOVE sma(mid, 20): BUY 1 MKT x100"
    for path in ("reference", "fast"):
        e = Engine(EngineConfig(maxpos=1000, maxloss=1_000_000, maxorders=1000), data.sessions[0],
                   data.symbol, data.tick_size)
        e.arm(plan(text))
        e.run(data.ticks, path=path)
        fired = [f.tick for f in e.ledger.events if isinstance(f, Fired)]
        assert fired == exact[:100], path


def test_fx_time_conditions_are_session_relative(shared_data: Path) -> None:
    """On OANDA's 17:00-17:00 New York sessions `time >= 10:00` first holds at the first tick
    at or after 10:00 the next morning (like UNTIL), not at the 17:00 open."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    data = load_market_data(shared_data / "fx_quote_ticks" / "lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet")
    ny = ZoneInfo("America/New_York")
    for session in data.sessions[1:4]:
        day = data.ticks.between(session.open_ns, session.close_ns)
        ten = dt.datetime.combine(session.date + dt.timedelta(days=1), dt.time(10, 0), tzinfo=ny)
        ten_ns = int(ten.timestamp()) * 1_000_000_000
        expected = int((day.ts < ten_ns).sum())  # the first tick at or after 10:00 next morning
        for path in ("reference", "fast"):
            e = Engine(EngineConfig(maxpos=100_000), session, data.symbol, data.tick_size)
            e.arm(plan("PLAN ten\nWHEN time >= 10:00: BUY 10000 MKT"))
            e.run(day, path=path)
            assert [f.tick for f in e.ledger.events if isinstance(f, Fired)] == [expected], (session.date, path)

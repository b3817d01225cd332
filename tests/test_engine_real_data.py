"""The engine on real recorded quotes (skips cleanly without /work/shared/data): both paths
give the same ledger bytes, and plans that should trade do trade."""

from __future__ import annotations

from pathlib import Path

from kestrel.data.load import load_market_data
from kestrel.engine import Engine, EngineConfig, Filled

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
    cfg = EngineConfig(fee_per_unit=0.00002, slippage_ticks=1, latency_ns=50_000_000)
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


"""Portfolio runs: a universe of instruments in one account, against NautilusTrader on the same
real minute bars.

Prints one JSON line:
- `daily_*`: a generated universe of 500 symbols x 252 daily sessions (`--quick`: 100 x 63),
  written as one long-format Parquet file (`date, symbol, open, high, low, close, volume`,
  seeded random walks) and loaded with `kestrel.data.load_universe`; `minute_*`: 100 symbols x
  one session of minute bars (`--quick`: 20). Each is generated here, then loaded and run in a
  fresh subprocess: `*_load_s`,
  `*_data_mb` (the universe's tick columns), `*_sessions_per_s` (sessions a second with one
  agent turn per session: the turn's module of plans, one `ON SYM` plan per symbol, parsed
  and armed at the open, then the session's merged ticks run on the portfolio engine),
  `*_fills` and `*_ledger_events` (the run's ledger, held by the engine as its encoded lines),
  `*_ledger_sha256` (its bytes' SHA-256: two trees run the same workload to the same ledger),
  `*_peak_rss_mb` (the child's `ru_maxrss`, the interpreter and libraries included) and
  `*_rss_within_budget` (peak <= data + 300 MB);
  `*_kestrel` says why a figure is missing when the portfolio engine is not there;
- `equal_weight_*`: the equal-weight buy-and-hold of the 4-symbol minute universe
  (SPY, AIG, BAC, IBM: six sessions of Lean's minute trade bars; capital 100,000 split in four,
  each bought in whole shares at its first tick, held) computed by `kestrel.report` from the
  data (`equal_weight_wall_s`) and run on NautilusTrader (`nautilus_equal_weight_wall_s`): the
  buys matched by symbol, time, quantity and price (`equal_weight_trades_match`) and the final
  equity (`equal_weight_final_equity`, `nautilus_equal_weight_final_equity`);
- `sma_cross_*`: one SMA-cross strategy on each of the four symbols in one account: buy 100 on
  the tick after the mid crosses above its SMA(200) of the run's ticks while flat, sell on
  the tick after it crosses below while long, flat at each session's end (the plan
  `SMA_CROSS`); on Kestrel's portfolio engine and on NautilusTrader (a Python strategy
  mirroring the rules on the same ticks), the fills matched by symbol, time, side and price
  (`sma_cross_trades_match`, `sma_cross_mismatch`: what differs, '' when nothing);
- `vs_nautilus_portfolio`: NautilusTrader's wall time over Kestrel's on the SMA cross, both
  measured in this run (target >= 10); NautilusTrader figures are skipped with
  `nautilus: "not installed"` without the bench extra.
Every wall time is the best of `REPEATS` runs. The minute universe is read from the shared
data folder (`KESTREL_SHARED_DATA`, else ../shared/data); `minute_data: "absent"` without it.
Usage: python bench/portfolio.py [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peers import mid_half_cents  # noqa: E402
from kestrel.data.universe import load_universe  # noqa: E402
from kestrel.market.universe import Universe  # noqa: E402
from kestrel.report.portfolio_marks import merge_ticks, run_sessions  # noqa: E402
from kestrel.report.universe_baselines import equal_weight  # noqa: E402

REPEATS = 3
CAPITAL = 100_000.0
SMA_N = 200
QTY = 100
SMA_CROSS = (
    "PLAN cross{k} ON {sym} RISK maxpos 100\n"
    "WHEN mid CROSSES ABOVE sma(mid, {n}) AND pos <= 0: BUY 100 MKT x100\n"
    "WHEN mid CROSSES BELOW sma(mid, {n}) AND pos > 0: FLAT x100"
)
GENERATED_SMA = {"daily": 2, "minute": 50}  # the generated runs' SMA length (a daily session has 5 ticks)
MINUTE_BARS = "equities_minute/lean_us_equities_minute_trade_bars_20131004_20131011.parquet"
RSS_BUDGET_MB = 300.0
MAX_ORDERS = 10_000  # the operator's cap on orders per session: room for every cross


# -- generated universes ---------------------------------------------------------------------


def _walk(rng: np.random.Generator, n: int, start: float, vol: float) -> np.ndarray:
    steps = rng.normal(0.0, vol, n)
    return np.asarray(np.round(start * np.exp(np.cumsum(steps)), 2), dtype=np.float64)


def _bars(rng: np.random.Generator, closes: np.ndarray, vol: float) -> dict[str, np.ndarray]:
    """OHLC bars around `closes` (open: the previous close moved a little; high/low bracket
    open and close), on the 0.01 grid."""
    opens = np.round(np.concatenate(([closes[0]], closes[:-1])) * np.exp(rng.normal(0.0, vol / 4, closes.size)), 2)
    span = np.abs(rng.normal(0.0, vol / 2, closes.size)) * closes
    high = np.round(np.maximum(opens, closes) + span, 2)
    low = np.round(np.maximum(0.01, np.minimum(opens, closes) - span), 2)
    return {"open": opens, "high": high, "low": low, "close": closes,
            "volume": rng.integers(1_000, 100_000, closes.size).astype(np.float64)}


def symbols_named(n: int) -> list[str]:
    """`n` distinct plausible tickers: S0000, S0001, ..."""
    return [f"S{k:04d}" for k in range(n)]


def generate_daily(path: Path, n_symbols: int, n_sessions: int, seed: int = 7) -> Path:
    """A long-format daily-bar Parquet file of `n_symbols` x the first `n_sessions` XNYS
    sessions of 2024 (seeded random walks)."""
    import exchange_calendars as xcals
    import pyarrow as pa
    import pyarrow.parquet as pq

    days = xcals.get_calendar("XNYS").sessions_in_range("2024-01-02", "2025-12-31")[:n_sessions]
    dates = np.array([d.date() for d in days])
    rng = np.random.default_rng(seed)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("date", "symbol", "open", "high", "low", "close", "volume")}
    for sym in symbols_named(n_symbols):
        closes = _walk(rng, n_sessions, float(rng.uniform(20, 400)), 0.015)
        bars = _bars(rng, closes, 0.015)
        cols["date"].append(dates)
        cols["symbol"].append(np.full(n_sessions, sym))
        for k, v in bars.items():
            cols[k].append(v)
    table = pa.table({k: np.concatenate(v) for k, v in cols.items()})
    pq.write_table(table, path)
    return path


def generate_minute(path: Path, n_symbols: int, seed: int = 11) -> Path:
    """A long-format minute-bar Parquet file of `n_symbols` x the 390 minutes of one session
    (2024-01-02, 09:30-16:00 New York), bars stamped at their open (`ts_utc`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    start = np.datetime64("2024-01-02T14:30:00", "ns")
    ts = start + np.arange(390, dtype=np.int64) * np.timedelta64(60, "s")
    rng = np.random.default_rng(seed)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("ts_utc", "symbol", "open", "high", "low", "close", "volume")}
    for sym in symbols_named(n_symbols):
        closes = _walk(rng, 390, float(rng.uniform(20, 400)), 0.0008)
        bars = _bars(rng, closes, 0.0008)
        cols["ts_utc"].append(ts)
        cols["symbol"].append(np.full(390, sym))
        for k, v in bars.items():
            cols[k].append(v)
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    table = pa.table({"ts_utc": pa.array(arrays.pop("ts_utc"), pa.timestamp("ns", tz="UTC")), **arrays})
    pq.write_table(table, path)
    return path


def data_mb(universe: Universe) -> float:
    """The universe's tick columns (raw and, when distinct, adjusted), in MB."""
    total = 0
    for m in universe.members:
        for data in (m.data, m.adjusted) if m.adjusted is not m.data else (m.data,):
            t = data.ticks
            total += sum(a.nbytes for a in (t.ts, t.bid, t.ask, t.last, t.size))
    return total / 1e6


# -- Kestrel's portfolio engine ----------------------------------------------------------------


def portfolio_engine() -> tuple[Callable[..., Any] | None, str]:
    """The portfolio engine's entry point, or None and why it is not there."""
    try:
        from kestrel.engine.portfolio import PortfolioEngine
    except ImportError as e:
        return None, f"the portfolio engine is not in this tree ({e})"
    return PortfolioEngine, ""


def turn_limits(n_plans: int) -> Any:
    """The language's limits with room for a module of `n_plans` plans (one per symbol)."""
    from kestrel.lang.limits import DEFAULT_LIMITS

    return msgspec.structs.replace(DEFAULT_LIMITS, max_statements=max(DEFAULT_LIMITS.max_statements, n_plans),
                                   max_document_chars=max(DEFAULT_LIMITS.max_document_chars, 400 * n_plans))


def kestrel_run(universe: Universe, plan_texts: dict[str, str], sessions: Sequence[Any] | None = None,
                path: str = "auto") -> tuple[float, Any] | None:
    """One run of the universe on Kestrel's portfolio engine, each session opening with an
    agent turn: its reply, a module of one `ON SYM` plan per symbol, parsed and type-checked,
    each plan armed on its symbol; then the session's merged ticks to the close.
    (wall s, the engine: its `ledger` the run's); None without the engine."""
    engine_cls, _ = portfolio_engine()
    if engine_cls is None:
        return None
    from kestrel import lang
    from kestrel.engine.config import EngineConfig
    from kestrel.lang.ast import Module, Plan
    from kestrel.market.portfolio import PortfolioBounds

    configs = {s: EngineConfig(maxorders=MAX_ORDERS) for s in universe.symbols}
    bounds = PortfolioBounds(capital=10_000_000.0, max_gross=1.0)
    reply = "\n\n".join(plan_texts[s] for s in universe.symbols if s in plan_texts)
    limits = turn_limits(len(plan_texts))
    t0 = time.perf_counter()
    engine = engine_cls(universe, configs, bounds)
    for session in universe.sessions if sessions is None else sessions:
        engine.open_session(session)
        parsed = lang.parse(reply, limits)
        for p in parsed.statements if isinstance(parsed, Module) else (parsed,):
            assert isinstance(p, Plan) and p.instrument is not None
            engine.arm(p.instrument, p)
        engine.close_session(path)
    wall = time.perf_counter() - t0
    return wall, engine


def _cross_plans(symbols: Sequence[str], n: int = SMA_N) -> dict[str, str]:
    return {s: SMA_CROSS.format(k=k, sym=s, n=n) for k, s in enumerate(symbols)}


# -- a child process per generated workload ----------------------------------------------------


def child(kind: str, path: Path) -> dict[str, Any]:
    """Load the generated universe at `path` and run it (a fresh process: its peak memory is
    the load's and the run's, the interpreter and libraries included)."""
    t0 = time.perf_counter()
    universe = load_universe(path).universe
    load = time.perf_counter() - t0
    out: dict[str, Any] = {"symbols": len(universe), "sessions": len(universe.sessions),
                           "ticks": sum(len(m.data.ticks) for m in universe.members),
                           "load_s": round(load, 3), "data_mb": round(data_mb(universe), 2)}
    ran = kestrel_run(universe, _cross_plans(universe.symbols, GENERATED_SMA[kind]))
    if ran is None:
        out["kestrel"] = portfolio_engine()[1]
    else:
        from kestrel.engine.ledger import Filled

        wall, engine = ran
        out["sessions_per_s"] = round(len(universe.sessions) / wall, 3)
        out["run_s"] = round(wall, 3)
        out["ledger_events"] = len(engine.ledger)
        out["fills"] = sum(1 for _, e in engine.ledger if isinstance(e, Filled))
        digest = hashlib.sha256()
        for chunk in engine.ledger.chunks():  # (block by block: no copy of the whole ledger)
            digest.update(chunk)
        out["ledger_sha256"] = digest.hexdigest()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    out["peak_rss_mb"] = round(peak, 1)
    out["rss_within_budget"] = peak <= out["data_mb"] + RSS_BUDGET_MB
    return out


def run_child(kind: str, n_symbols: int, n_sessions: int) -> dict[str, Any]:
    """Generate the universe here, then load and run it in a fresh subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{kind}.parquet"
        if kind == "daily":
            generate_daily(path, n_symbols, n_sessions)
        else:
            generate_minute(path, n_symbols)
        proc = subprocess.run([sys.executable, __file__, "--child", kind, str(path)],
                              capture_output=True, text=True, check=False, timeout=3600)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


# -- the 4-symbol minute universe on NautilusTrader --------------------------------------------


@dataclass(frozen=True)
class PortfolioFill:
    symbol: str
    ts: int
    side: str
    qty: float
    price: float


def kestrel_fills(ledger: bytes) -> list[PortfolioFill]:
    from kestrel.engine.ledger import Filled
    from kestrel.report.portfolio_ledger import read_portfolio_ledger

    return [PortfolioFill(line.symbol or "", e.ts, e.side, float(e.qty), e.price)
            for line in read_portfolio_ledger(ledger) if isinstance((e := line.event), Filled)]


def match(ours: Sequence[PortfolioFill], theirs: Sequence[PortfolioFill], tick: float = 0.01) -> str:
    """'' when both hold the same fills (symbol, time, side, quantity; prices within half a
    tick), else what differs first."""
    a = sorted(ours, key=lambda f: (f.symbol, f.ts, f.side))
    b = sorted(theirs, key=lambda f: (f.symbol, f.ts, f.side))
    if len(a) != len(b):
        return f"{len(a)} fills against {len(b)}"
    for x, y in zip(a, b):
        if (x.symbol, x.ts, x.side, x.qty) != (y.symbol, y.ts, y.side, y.qty) or abs(x.price - y.price) > tick / 2:
            return f"first difference: {x} against {y}"
    return ""


def _session_bounds(universe: Universe) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Per symbol, the ts of its first and of its last tick of each session (the run's)."""
    ticks = merge_ticks(universe, universe.sessions)
    first: dict[str, set[int]] = {s: set() for s in universe.symbols}
    last: dict[str, set[int]] = {s: set() for s in universe.symbols}
    for m, sym in enumerate(universe.symbols):
        idx = ticks.own_merged(m)
        ses = ticks.session_of[idx]
        ts = ticks.ts[idx]
        if idx.size:
            starts = np.flatnonzero(np.concatenate(([True], ses[1:] != ses[:-1])))
            ends = np.flatnonzero(np.concatenate((ses[1:] != ses[:-1], [True])))
            first[sym] = {int(ts[k]) for k in starts}
            last[sym] = {int(ts[k]) for k in ends}
    return first, last


def nautilus_run(universe: Universe, strategy: str) -> tuple[float, list[PortfolioFill], float] | None:
    """NautilusTrader's BacktestEngine (when installed) over the universe's session ticks, fed
    as quote ticks (bid and ask as Kestrel's), one venue and one margin account in USD:
    `hold` (equal-weight buy-and-hold: each symbol buys floor(capital / N / ask) at its first
    tick) or `cross` (the SMA cross, see the module docstring). (wall s, fills, final equity
    marked at each symbol's last bid)."""
    try:
        from nautilus_trader.backtest.engine import BacktestEngine, BacktestEngineConfig
        from nautilus_trader.config import LoggingConfig
        from nautilus_trader.model.currencies import USD
        from nautilus_trader.model.data import QuoteTick
        from nautilus_trader.model.enums import AccountType, OmsType, OrderSide
        from nautilus_trader.model.events import OrderFilled
        from nautilus_trader.model.identifiers import TraderId, Venue
        from nautilus_trader.model.objects import Money, Quantity
        from nautilus_trader.test_kit.providers import TestInstrumentProvider
        from nautilus_trader.trading.strategy import Strategy
    except ImportError:
        return None
    ticks = merge_ticks(universe, universe.sessions)
    engine = BacktestEngine(BacktestEngineConfig(trader_id=TraderId("BENCH-001"),
                                                 logging=LoggingConfig(bypass_logging=True)))
    venue = Venue("XNAS")
    engine.add_venue(venue=venue, oms_type=OmsType.NETTING, account_type=AccountType.MARGIN, base_currency=USD,
                     starting_balances=[Money(10_000_000, USD)])
    instruments = {}
    by_id: dict[Any, str] = {}
    for m, sym in enumerate(universe.symbols):
        inst = TestInstrumentProvider.equity(sym, "XNAS")
        instruments[sym] = inst
        by_id[inst.id] = sym
        engine.add_instrument(inst)
        idx = ticks.own_merged(m)
        ts = ticks.ts[idx].astype(np.uint64)
        sizes = np.full(idx.size, 1_000_000.0)
        engine.add_data(QuoteTick.from_raw_arrays_to_list(inst.id, 2, 0, np.round(ticks.bid[idx], 2),
                                                          np.round(ticks.ask[idx], 2), sizes, sizes, ts, ts))
    first, last = _session_bounds(universe)
    fills: list[PortfolioFill] = []
    share = CAPITAL / len(universe)
    last_bid: dict[str, float] = {}
    held: dict[str, float] = {s: 0.0 for s in universe.symbols}

    class Portfolio(Strategy):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bought: set[str] = set()
            self.long: dict[str, bool] = {s: False for s in universe.symbols}
            self.pending: dict[str, str | None] = {s: None for s in universe.symbols}
            # the SMA runs over the run's ticks, as the portfolio engine's indicators look back
            self.window: dict[str, list[int]] = {s: [0] * SMA_N for s in universe.symbols}
            self.acc: dict[str, int] = {s: 0 for s in universe.symbols}
            self.count: dict[str, int] = {s: 0 for s in universe.symbols}
            self.prev: dict[str, int] = {s: 0 for s in universe.symbols}  # sign of prev mid - prev sma (x SMA_N)

        def on_start(self) -> None:
            for inst in instruments.values():
                self.subscribe_quote_ticks(inst.id)

        def on_order_filled(self, event: OrderFilled) -> None:
            sym = by_id[event.instrument_id]
            buy = event.order_side == OrderSide.BUY
            qty = float(event.last_qty.as_double())
            fills.append(PortfolioFill(sym, int(event.ts_event), "buy" if buy else "sell", qty,
                                       event.last_px.as_double()))
            held[sym] += qty if buy else -qty

        def order(self, sym: str, side: Any, qty: int) -> None:
            self.submit_order(self.order_factory.market(instruments[sym].id, side, Quantity.from_int(qty)))

        def on_quote_tick(self, tick: QuoteTick) -> None:
            sym = by_id[tick.instrument_id]
            bid, ask = tick.bid_price.as_double(), tick.ask_price.as_double()
            last_bid[sym] = bid
            t = tick.ts_event
            if strategy == "hold":
                if sym not in self.bought:
                    self.bought.add(sym)
                    qty = math.floor(share / ask)
                    if qty:
                        self.order(sym, OrderSide.BUY, qty)
                return
            fresh = t in first[sym]  # the plan is armed at each open: its crosses start there
            if fresh:
                self.pending[sym] = None
            side = self.pending[sym]
            if side is not None:  # the tick after the signal: fill at this tick's touch
                self.pending[sym] = None
                self.order(sym, OrderSide.BUY if side == "buy" else OrderSide.SELL, QTY)
                self.long[sym] = side == "buy"
            end = t in last[sym]
            if end and self.long[sym]:  # flat at the session's end
                self.order(sym, OrderSide.SELL, QTY)
                self.long[sym] = False
            m = mid_half_cents(bid, ask)  # the engine's quantized mid
            w = self.window[sym]
            j = self.count[sym] % SMA_N
            self.acc[sym] += m - w[j]
            w[j] = m
            self.count[sym] += 1
            if self.count[sym] < SMA_N:
                return
            diff = SMA_N * m - self.acc[sym]  # sign of mid - sma, exactly
            prev = self.prev[sym]
            self.prev[sym] = 1 if diff > 0 else -1 if diff < 0 else 0
            if self.count[sym] == SMA_N or end or fresh:
                return
            if prev <= 0 < diff and not self.long[sym]:
                self.pending[sym] = "buy"
            elif prev >= 0 > diff and self.long[sym]:
                self.pending[sym] = "sell"

    engine.add_strategy(Portfolio())
    t0 = time.perf_counter()
    engine.run()
    wall = time.perf_counter() - t0
    engine.dispose()
    spent = sum((f.qty if f.side == "buy" else -f.qty) * f.price for f in fills)
    final = CAPITAL - spent + sum(held[s] * last_bid.get(s, 0.0) for s in universe.symbols)
    return wall, fills, round(final, 2)


def best(run: Callable[[], Any]) -> Any:
    out = None
    for _ in range(REPEATS):
        r = run()
        if r is None:
            return None
        if out is None or r[0] < out[0]:
            out = r
    return out


def minute_universe() -> Universe | None:
    shared = Path(os.environ.get("KESTREL_SHARED_DATA", str(ROOT.parent / "shared" / "data")))
    path = shared / MINUTE_BARS
    if not path.is_file():
        return None
    return load_universe(path).universe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "PATH"))
    args = ap.parse_args()
    if args.child:
        kind, path = args.child
        print(json.dumps(child(kind, Path(path))))
        return
    result: dict[str, Any] = {"quick": args.quick}
    daily = (100, 63) if args.quick else (500, 252)
    minute = 20 if args.quick else 100
    for key, doc in (("daily", run_child("daily", *daily)), ("minute", run_child("minute", minute, 1))):
        for k, v in doc.items():
            result[f"{key}_{k}"] = v
    universe = minute_universe()
    if universe is None:
        result["minute_data"] = "absent"
        print(json.dumps(result))
        return
    result["minute_universe"] = ",".join(universe.symbols)
    result["minute_universe_ticks"] = len(merge_ticks(universe, universe.sessions))
    sessions = run_sessions(universe)
    t0 = time.perf_counter()
    ew = equal_weight(universe, CAPITAL, [s.date for s in sessions])
    result["equal_weight_wall_s"] = round(time.perf_counter() - t0, 4)
    result["equal_weight_final_equity"] = round(ew.final_equity, 2)
    ours_ew = [PortfolioFill(p.symbol, p.ts, "buy", float(p.qty), p.price) for p in ew.purchases
               if p.ts is not None and p.price is not None and p.qty]
    nt_ew = best(lambda: nautilus_run(universe, "hold"))
    if nt_ew is None:
        result["nautilus"] = "not installed (pip install -e '.[bench]')"
    else:
        result["nautilus_equal_weight_wall_s"] = round(nt_ew[0], 4)
        result["nautilus_equal_weight_final_equity"] = nt_ew[2]
        diff = match(ours_ew, nt_ew[1])
        result["equal_weight_trades_match"] = not diff
        result["equal_weight_mismatch"] = diff
    ran = best(lambda: kestrel_run(universe, _cross_plans(universe.symbols)))
    if ran is None:
        result["sma_cross_kestrel"] = portfolio_engine()[1]
    else:
        result["sma_cross_wall_s"] = round(ran[0], 4)
        ours = kestrel_fills(ran[1].ledger.to_jsonl())
        result["sma_cross_fills"] = len(ours)
    if nt_ew is not None:
        nt = best(lambda: nautilus_run(universe, "cross"))
        assert nt is not None
        result["nautilus_sma_cross_wall_s"] = round(nt[0], 4)
        result["nautilus_sma_cross_fills"] = len(nt[1])
        if ran is not None:
            diff = match(ours, nt[1])
            result["sma_cross_trades_match"] = not diff
            result["sma_cross_mismatch"] = diff
            result["vs_nautilus_portfolio"] = round(nt[0] / ran[0], 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""The peers of `bench/engine_throughput.py`: NautilusTrader and backtrader on the SMA-bracket
workload (`FLOOR_PLAN`), on the same quote ticks, with their trades checked against the
engine's so that a wall-time ratio compares equal work.

The workload, as the engine runs it (default `EngineConfig`, one fresh engine per session):
per session, the first tick i where the mid crosses above its SMA(50) over the session's ticks
(`prev_mid <= prev_sma and mid > sma`, exact: the engine sums whole half ticks) fires a market
buy of 100; it is eligible from tick i+1 and fills at that tick's ask. The fill places a sell
stop at fill x (1 - 0.5%) and a sell limit at fill x (1 + 1%), both snapped half-to-even onto
the 0.01 grid, eligible from the tick after the fill; the stop triggers when bid <= stop and
fills at the bid, the limit fills when bid >= target at max(target, bid); one fill cancels
the other (OCO). At the end of the session's data a position still open is sold at the last
tick's bid (`end_of_day="flatten"`). The engine's trades come from its ledger (`Filled`
events): `engine_trades`.

Each peer runs a Python strategy mirroring those rules on the same ticks (SMA in whole half
cents, so ties compare as the engine's do; bracket levels from the entry fill with
`bracket_levels`, the engine's rounding; the one-tick latency by submitting the entry on the
tick after the signal; the session's last tick known to the strategy for the flatten), records
its fills, and `diff_trades` compares them with the engine's: the same round trips, the same
entry and exit timestamps and sides, prices within half a tick.

backtrader has one price series per data feed, while the engine buys at the ask and sells at
the bid, so each tick is fed as one bar encoding both sides: open = high = low = bid, close =
ask (high < close: backtrader does not check a bar's shape). With cheat-on-close (`coc`) a
market buy fills at the close of the bar it was submitted on, i.e. the ask of that tick; the
strategy submits it on the tick after the signal (the engine's latency) together with its
stop and limit (levels from that close, which is the fill price: checked), which backtrader
first tries on the next bar, where a sell stop fills at the open (the bid) when open <= stop
and a sell limit at the open when open >= target: the engine's rules. The flatten is a market
sell (without coc) submitted on the session's second-to-last bar, with the stop and limit
cancelled: it fills at the open of the last bar, i.e. its bid, which is also the price the
engine's stop, limit or flatten would fill at on that tick. Not mirrored: an entry on the
session's very last tick (a signal on its second-to-last tick): the engine buys and flattens
on that tick, backtrader cannot (the buy's coc fill is processed on the next bar, the next
session's), so the strategy skips that trade and `compare` reports it (`backtrader_mismatch`).
On the bench's ticks the first cross of a session comes long before its end.

NautilusTrader's simulated venue fills a triggered stop-market at its trigger price and a
limit at its limit price when the bid gaps through them; the engine fills both at the bid.
The bench's ticks move the bid by at most one tick (0.01) at a time and the levels are on
the grid, so the first tick to reach a level has its bid exactly at it and the two rules
give the same price; ticks that gap would show as a price difference in `nautilus_mismatch`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np

from kestrel.engine import Engine, EngineConfig
from kestrel.engine.ledger import Filled, Fired
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import Plan

Days = list[tuple[SessionSpec, Ticks]]
TICK = Decimal("0.01")
SMA_N = 50
QTY = 100
STOP_FACTOR = Decimal("0.995")  # STOP -0.5%
TARGET_FACTOR = Decimal("1.01")  # TARGET +1%


class CrossSignal:
    """The engine's `mid CROSSES ABOVE sma(mid, 50)` for one session, as both peers compute
    it: the mid in whole half cents (`mid_half_cents`) summed exactly, so ties compare as the
    engine's quantized sums do; the first cross only (the plan fires once)."""

    def __init__(self) -> None:
        self.window = [0] * SMA_N
        self.acc = 0
        self.count = 0
        self.prev_ok = False  # prev_mid <= prev_sma
        self.fired = False

    def fires(self, m: int) -> bool:
        """Feed the tick's mid (half cents): True at the session's first cross above."""
        j = self.count % SMA_N
        self.acc += m - self.window[j]
        self.window[j] = m
        self.count += 1
        if self.count < SMA_N:
            return False
        above = SMA_N * m > self.acc  # mid > sma, exactly
        fire = not self.fired and self.prev_ok and above
        self.fired |= fire
        self.prev_ok = not above
        return fire


@dataclass(frozen=True)
class Fill:
    ts: int
    side: str  # "buy" | "sell"
    price: float


@dataclass(frozen=True)
class Trade:
    """One round trip: the entry fill and the exit fill (None while open)."""
    entry: Fill
    exit: Fill | None


@dataclass
class PeerRun:
    """A peer's run: the wall time of its backtest loop, the ticks fed, the signal ticks
    (ns), the fills in order, and the signals whose trade the peer cannot mirror (not
    traded; see the module docstring)."""
    wall: float
    ticks: int
    signals: list[int]
    fills: list[Fill]
    unmirrored: list[int] = field(default_factory=list)


def best_run(run: Callable[[Days], PeerRun | None], days: Days, repeats: int) -> PeerRun | None:
    """The fastest of `repeats` runs of a peer (None when it is not installed); every run's
    signals and fills must be the same."""
    best: PeerRun | None = None
    for _ in range(repeats):
        r = run(days)
        if r is None:
            return None
        if best is not None:
            assert (r.signals, r.fills) == (best.signals, best.fills), "a peer's runs differ"
        if best is None or r.wall < best.wall:
            best = r
    return best


def bracket_levels(fill: Decimal) -> tuple[Decimal, Decimal]:
    """The stop and target of an entry filled at `fill`: exact in decimal, rounded half to
    even onto the 0.01 grid (the engine's `bracket_price`)."""
    return ((fill * STOP_FACTOR).quantize(TICK, ROUND_HALF_EVEN),
            (fill * TARGET_FACTOR).quantize(TICK, ROUND_HALF_EVEN))


def mid_half_cents(bid: float, ask: float) -> int:
    """The mid of a 0.01-grid quote in whole half cents."""
    return round(bid * 100) + round(ask * 100)


def round_trips(fills: list[Fill]) -> list[Trade]:
    """Fills of a long-only, 100-at-a-time strategy paired into round trips (a buy opens, the
    next sell closes)."""
    out: list[Trade] = []
    entry: Fill | None = None
    for f in fills:
        if entry is None:
            entry = f
        else:
            out.append(Trade(entry, f))
            entry = None
    if entry is not None:
        out.append(Trade(entry, None))
    return out


def engine_fills(days: Days, plan: Plan, path: str = "auto") -> tuple[list[int], list[Fill]]:
    """The engine's signal ticks (`Fired`, ns) and fills (`Filled`) on the workload, one fresh
    engine per session (default `EngineConfig`)."""
    signals: list[int] = []
    fills: list[Fill] = []
    for session, ticks in days:
        e = Engine(EngineConfig(), session, "SYN", 0.01)
        e.arm(plan)
        e.run(ticks, path=path)
        for ev in e.ledger.events:
            if isinstance(ev, Fired):
                signals.append(ev.ts)
            elif isinstance(ev, Filled):
                assert ev.qty == QTY
                fills.append(Fill(ev.ts, ev.side, ev.price))
    return signals, fills


def engine_entries(days: Days, plan: Plan) -> list[int]:
    """The engine's entry signals of the SMA-bracket workload as timestamps (ns)."""
    return engine_fills(days, plan)[0]


def engine_trades(days: Days, plan: Plan) -> list[Trade]:
    """The engine's round trips on the workload."""
    return round_trips(engine_fills(days, plan)[1])


def _fill_diff(what: str, k: int, a: Fill | None, b: Fill | None, half_tick: float) -> str:
    if a is None or b is None:
        return "" if a is b else f"trade {k}: {what} {a} vs engine {b}"
    if a.ts != b.ts or a.side != b.side or abs(a.price - b.price) > half_tick:
        return (f"trade {k}: {what} {a.side}@{a.price:g} ts {a.ts} vs engine "
                f"{b.side}@{b.price:g} ts {b.ts}")
    return ""


def diff_trades(peer: list[Trade], ours: list[Trade], tick: float = 0.01) -> str:
    """'' when the peer's round trips are the engine's (same count, same entry and exit
    timestamps and sides, prices within half a tick), else a short account of the first
    difference."""
    if len(peer) != len(ours):
        first = next((k for k, (a, b) in enumerate(zip(peer, ours)) if a != b), min(len(peer), len(ours)))
        return f"{len(peer)} round trips vs engine {len(ours)} (first differing: {first})"
    for k, (a, b) in enumerate(zip(peer, ours)):
        d = (_fill_diff("entry", k, a.entry, b.entry, tick / 2)
             or _fill_diff("exit", k, a.exit, b.exit, tick / 2))
        if d:
            return d
    return ""


def session_bounds(days: Days) -> tuple[set[int], set[int]]:
    """The first and last tick timestamps of each non-empty session."""
    starts = {int(t.ts[0]) for _, t in days if len(t)}
    ends = {int(t.ts[-1]) for _, t in days if len(t)}
    return starts, ends


# -- backtrader ----------------------------------------------------------------------------


def backtrader_run(days: Days) -> PeerRun | None:
    """backtrader (when installed) on the workload over the same ticks, one bar per tick
    (open = high = low = bid, close = ask; see the module docstring). Session boundaries need
    at least 3 ticks per session."""
    try:
        import backtrader as bt
    except ImportError:
        return None
    epoch = dt.datetime(1970, 1, 1)
    ts_all: list[int] = []
    nums: list[float] = []
    bids: list[float] = []
    asks: list[float] = []
    first: list[bool] = []
    penult: list[bool] = []
    for _s, t in days:
        n = len(t)
        if n == 0:
            continue
        assert n >= 3, "each session needs at least 3 ticks"
        tl = t.ts.tolist()
        ts_all += tl
        nums += [bt.date2num(epoch + dt.timedelta(microseconds=x // 1000)) for x in tl]
        bids += t.bid.tolist()
        asks += t.ask.tolist()
        first += [True] + [False] * (n - 1)
        penult += [False] * (n - 2) + [True, False]
    ts_of = dict(zip(nums, ts_all))
    assert len(ts_of) == len(ts_all), "two ticks share a backtrader datetime"
    signals: list[int] = []
    fills: list[Fill] = []
    unmirrored: list[int] = []

    class TickBars(bt.feed.DataBase):  # type: ignore[misc]
        def start(self) -> None:
            super().start()
            self._k = 0

        def _load(self) -> bool:
            k = self._k
            if k >= len(nums):
                return False
            self._k = k + 1
            lines = self.lines
            b = bids[k]
            lines.datetime[0] = nums[k]
            lines.open[0] = lines.high[0] = lines.low[0] = b
            lines.close[0] = asks[k]
            lines.volume[0] = 0.0
            lines.openinterest[0] = 0.0
            return True

    class SmaBracket(bt.Strategy):  # type: ignore[misc]
        def __init__(self) -> None:
            self.k = -1
            self.reset()
            self.exits: list[Any] = []
            self.basis = Decimal(0)

        def reset(self) -> None:
            self.signal = CrossSignal()
            self.pending = False

        def notify_order(self, order: Any) -> None:
            if order.status == order.Completed:
                buy = order.isbuy()
                px = order.executed.price
                if buy:
                    assert Decimal(repr(px)) == self.basis, (px, self.basis)
                fills.append(Fill(ts_of[order.executed.dt], "buy" if buy else "sell", px))

        def next(self) -> None:
            k = self.k = self.k + 1
            data = self.data
            b = data.open[0]
            a = data.close[0]
            if first[k]:
                self.reset()
            if self.pending:  # the tick after the signal: buy at this tick's ask (coc)
                self.pending = False
                self.basis = Decimal(repr(a))
                self.buy(size=QTY, exectype=bt.Order.Market)
                if penult[k]:  # filled on this tick: the engine flattens on the next, the last
                    self.sell(size=QTY, exectype=bt.Order.Market, coc=False)
                else:
                    stop, target = bracket_levels(self.basis)
                    st = self.sell(size=QTY, exectype=bt.Order.Stop, price=float(stop))
                    lm = self.sell(size=QTY, exectype=bt.Order.Limit, price=float(target), oco=st)
                    self.exits = [st, lm]
            elif penult[k] and self.position:  # flatten at the last tick's bid
                for o in self.exits:
                    self.cancel(o)
                self.exits = []
                self.sell(size=QTY, exectype=bt.Order.Market, coc=False)
            if self.signal.fires(mid_half_cents(b, a)):
                signals.append(ts_of[data.datetime[0]])
                if penult[k]:  # the entry would fill on the last tick: see the docstring
                    unmirrored.append(signals[-1])
                else:  # a signal on the session's last tick never fills
                    self.pending = k + 1 < len(first) and not first[k + 1]

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.broker.set_coc(True)
    cerebro.broker.setcash(1e9)
    cerebro.adddata(TickBars())
    cerebro.addstrategy(SmaBracket)
    t0 = time.perf_counter()
    cerebro.run()
    return PeerRun(time.perf_counter() - t0, len(nums), signals, fills, unmirrored)


# -- NautilusTrader ------------------------------------------------------------------------


def nautilus_run(days: Days) -> PeerRun | None:
    """NautilusTrader's BacktestEngine (when installed) on the workload over the same quote
    ticks: SMA(50) of the mid computed in the strategy (whole half cents), first cross above
    per session -> market buy 100 submitted on the next tick; on its fill a sell stop-market
    and a sell limit from the fill price (`bracket_levels`), one cancelling the other; on the
    session's last tick a position still open is sold at market."""
    try:
        from nautilus_trader.backtest.engine import BacktestEngine, BacktestEngineConfig
        from nautilus_trader.config import LoggingConfig
        from nautilus_trader.model.currencies import USD
        from nautilus_trader.model.data import QuoteTick
        from nautilus_trader.model.enums import AccountType, OmsType, OrderSide
        from nautilus_trader.model.events import OrderFilled
        from nautilus_trader.model.identifiers import TraderId, Venue
        from nautilus_trader.model.objects import Money, Price, Quantity
        from nautilus_trader.test_kit.providers import TestInstrumentProvider
        from nautilus_trader.trading.strategy import Strategy
    except ImportError:
        return None
    instrument = TestInstrumentProvider.equity("SYN", "XNAS")
    ts = np.concatenate([t.ts for _, t in days]).astype(np.uint64)
    # this build's from_raw_arrays_to_list takes float64 prices and sizes
    bids = np.round(np.concatenate([t.bid for _, t in days]), 2)
    asks = np.round(np.concatenate([t.ask for _, t in days]), 2)
    sizes = np.full(len(ts), 100.0)
    ticks = QuoteTick.from_raw_arrays_to_list(instrument.id, 2, 0, bids, asks, sizes, sizes, ts, ts)
    engine = BacktestEngine(BacktestEngineConfig(
        trader_id=TraderId("BENCH-001"), logging=LoggingConfig(bypass_logging=True)))
    venue = Venue("XNAS")
    engine.add_venue(venue=venue, oms_type=OmsType.NETTING, account_type=AccountType.MARGIN,
                     base_currency=USD, starting_balances=[Money(100_000_000, USD)])
    engine.add_instrument(instrument)
    engine.add_data(ticks)
    starts, ends = session_bounds(days)
    signals: list[int] = []
    fills: list[Fill] = []
    qty = Quantity.from_int(QTY)

    class SmaBracket(Strategy):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.reset()
            self.entry: Any = None
            self.exits: list[Any] = []
            self.long = False

        def reset(self) -> None:
            self.signal = CrossSignal()
            self.pending = False

        def on_start(self) -> None:
            self.subscribe_quote_ticks(instrument.id)

        def on_order_filled(self, event: OrderFilled) -> None:
            px = event.last_px
            buy = event.order_side == OrderSide.BUY
            fills.append(Fill(int(event.ts_event), "buy" if buy else "sell", px.as_double()))
            if buy:
                self.long = True
                if int(event.ts_event) in ends:  # filled on the session's last tick
                    self.flatten()
                    return
                stop, target = bracket_levels(px.as_decimal())
                st = self.order_factory.stop_market(instrument.id, OrderSide.SELL, qty,
                                                    trigger_price=Price.from_str(str(stop)), reduce_only=True)
                lm = self.order_factory.limit(instrument.id, OrderSide.SELL, qty, Price.from_str(str(target)),
                                              reduce_only=True)
                self.exits = [st, lm]
                self.submit_order(st)
                self.submit_order(lm)
            else:
                self.long = False
                for o in self.exits:
                    if o.client_order_id != event.client_order_id and not o.is_closed:
                        self.cancel_order(o)
                self.exits = []

        def flatten(self) -> None:
            for o in self.exits:
                if not o.is_closed:
                    self.cancel_order(o)
            self.exits = []
            self.submit_order(self.order_factory.market(instrument.id, OrderSide.SELL, qty,
                                                        reduce_only=True))

        def on_quote_tick(self, tick: QuoteTick) -> None:
            t = tick.ts_event
            if t in starts:
                self.reset()
            if self.pending:  # the tick after the signal: buy at this tick's ask
                self.pending = False
                self.submit_order(self.order_factory.market(instrument.id, OrderSide.BUY, qty))
            elif self.long and t in ends:
                self.flatten()
            if self.signal.fires(mid_half_cents(tick.bid_price.as_double(), tick.ask_price.as_double())):
                signals.append(int(t))
                self.pending = t not in ends

    engine.add_strategy(SmaBracket())
    t0 = time.perf_counter()
    engine.run()
    wall = time.perf_counter() - t0
    engine.dispose()
    return PeerRun(wall, len(ts), signals, fills)


def compare(run: PeerRun, ours: list[Trade]) -> tuple[bool, int, str]:
    """(trades match, the peer's round trips, what differs: '' when nothing)."""
    peer = round_trips(run.fills)
    d = diff_trades(peer, ours)
    if run.unmirrored:
        d = (f"{len(run.unmirrored)} entries on a session's last tick not mirrored"
             + (f"; {d}" if d else ""))
    return not d, len(peer), d


def peer_keys(name: str, run: PeerRun | None, ours: list[Trade], ref_wall: float,
              fast_wall: float) -> dict[str, object]:
    """The bench's keys for one peer's run (nothing when it is not installed): its wall time,
    its ratios over the engine's reference and fast walls, and the trade check."""
    if run is None:
        return {}
    match, trips, diff = compare(run, ours)
    return {f"{name}_wall_s": round(run.wall, 3),
            f"{name}_ratio": round(run.wall / ref_wall, 3),
            f"{name}_ratio_fast": round(run.wall / fast_wall, 3),
            f"{name}_trades_match": match, f"{name}_round_trips": trips,
            f"{name}_mismatch": diff}

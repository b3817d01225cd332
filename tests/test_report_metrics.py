"""Report metrics against a hand-computed equity series (a drawdown and a losing streak of three
round trips), marked equity against the engine's own marks, and exit reasons."""

from __future__ import annotations

import math
from typing import Any
import statistics

import numpy as np
import pytest

from kestrel.agents.fixed import FixedAgent
from kestrel.data import load_sample
from kestrel.engine.ledger import (
    Cancelled,
    Disarmed,
    Filled,
    LedgerEvent,
    Mark,
    OrderPlaced,
    OrderRejected,
    PositionChanged,
)
from kestrel.report import compute, from_result, mark_equity, read_ledger
from kestrel.session import SessionOptions, run_session

MIN = 60 * 10**9
T0 = 1_700_000_000 * 10**9
TS = np.array([T0 + k * MIN + 30 * 10**9 for k in range(12)], dtype=np.int64)
BID = np.array([100.0, 100.0, 101.0, 99.0, 99.5, 99.5, 98.0, 100.9, 100.9, 101.0, 101.0, 102.0])
ASK = BID + 0.1


def _fill(i: int, oid: int, role: str, side: str, qty: int, price: float, fee: float, pos: int,
          avg: float | None, rpnl: float) -> list[LedgerEvent]:
    t = int(TS[i])
    return [OrderPlaced(i, t, oid, "p", role, side, qty, "mkt", None, None),  # type: ignore[arg-type]
            Filled(i, t, oid, side, qty, price, fee),  # type: ignore[arg-type]
            PositionChanged(i, t, pos, avg, rpnl)]


# long 10 stopped out (-6), short 5 stopped out (-7.5), long 2 flattened with 2.0 fees (-2.2)
EVENTS: list[LedgerEvent] = [
    *_fill(1, 1, "entry", "buy", 10, 100.1, 0.0, 10, 100.1, 0.0),
    *_fill(4, 2, "stop", "sell", 10, 99.5, 0.0, 0, None, -6.0),
    *_fill(5, 3, "entry", "sell", 5, 99.5, 0.0, -5, 99.5, -6.0),
    *_fill(8, 4, "stop", "buy", 5, 101.0, 0.0, 0, None, -13.5),
    *_fill(9, 5, "entry", "buy", 2, 101.1, 1.0, 2, 101.1, -13.5),
    *_fill(10, 6, "flat", "sell", 2, 101.0, 1.0, 0, None, -13.7),
]
# by hand: rpnl - fees + pos x (bid for a long, ask for a short - avg)
EQUITY = [0.0, -1.0, 9.0, -11.0, -6.0, -6.5, 1.0, -13.5, -13.5, -14.7, -15.7, -15.7]


def test_marked_equity_matches_the_hand_computed_series() -> None:
    curve = mark_equity(EVENTS, TS, BID, ASK)
    assert curve.equity.tolist() == EQUITY
    assert curve.pos.tolist() == [0, 10, 10, 10, 0, -5, -5, -5, 0, 2, 0, 0]


def test_metrics_of_the_hand_computed_series() -> None:
    curve = mark_equity(EVENTS, TS, BID, ASK)
    _, minute = curve.per_minute(T0, T0 + 12 * MIN)
    assert minute.tolist() == EQUITY
    facts = read_ledger(EVENTS)
    m = compute(curve, minute, [facts], risk_capital=100.0, span_ns=12 * MIN, minutes_per_session=390)
    assert m.net_pnl == -15.7
    assert m.return_on_risk == pytest.approx(-0.157)
    # peak 9.0 at t2, trough -15.7 first reached at t10
    assert m.max_drawdown == pytest.approx(24.7)
    assert m.max_drawdown_ts == int(TS[10])
    assert (m.trades, m.wins, m.losses, m.win_rate) == (3, 0, 3, 0.0)
    assert m.profit_factor == 0.0
    assert m.avg_loss == pytest.approx(-15.7 / 3)
    assert m.avg_win == 0.0
    assert m.fees == 2.0
    assert m.turnover == pytest.approx(1001 + 995 + 497.5 + 505 + 202.2 + 202)
    assert m.exposure == pytest.approx(7 / 12, abs=1e-6)  # 3 + 3 + 1 minutes with a position
    assert (m.orders, m.fills, m.rejections, m.disarms) == (6, 6, 0, 0)
    returns = [x / 100.0 for x in (0, -1, 10, -20, 5, -0.5, 7.5, -14.5, 0, -1.2, -1, 0)]
    ppy = 252 * 390
    assert m.periods_per_year == ppy
    mean = statistics.fmean(returns)
    assert m.sharpe == pytest.approx(mean / statistics.stdev(returns) * math.sqrt(ppy), rel=1e-5)
    downside = math.sqrt(sum(min(r, 0.0) ** 2 for r in returns) / len(returns))
    assert m.sortino == pytest.approx(mean / downside * math.sqrt(ppy), rel=1e-5)


def test_round_trips_carry_pnl_and_exit_reasons() -> None:
    trips = read_ledger(EVENTS).trips
    assert [(t.side, t.qty, t.pnl, t.exit_reason) for t in trips] == [
        ("long", 10, -6.0, "STOP"), ("short", 5, -7.5, "STOP"), ("long", 2, -2.2, "FLAT")]


def test_engine_exit_orders_take_their_cause() -> None:
    t = int(TS[3])
    ev: list[LedgerEvent] = [
        *_fill(1, 1, "entry", "sell", 10, 100.0, 0.0, -10, 100.0, 0.0),
        Disarmed(3, t, "p", "maxloss 5 breached"),
        Cancelled(3, t, 1, "maxloss"),
        *_fill(3, 2, "exit", "buy", 10, 99.1, 0.0, 0, None, 9.0),
        *_fill(5, 3, "entry", "buy", 1, 99.6, 0.0, 1, 99.6, 9.0),
        Disarmed(11, int(TS[11]), "p", "session close"),
        *_fill(11, 4, "exit", "sell", 1, 102.0, 0.0, 0, None, 11.4),
        OrderRejected(6, int(TS[6]), "p", 0, "position would reach 300, over maxpos 200"),
    ]
    facts = read_ledger(ev)
    assert [t.exit_reason for t in facts.trips] == ["maxloss", "end of day"]
    assert [(n.kind, n.reason) for n in facts.notices] == [
        ("disarmed", "maxloss 5 breached"), ("disarmed", "session close"),
        ("rejected", "position would reach 300, over maxpos 200")]
    assert (facts.rejections, facts.disarms) == (1, 2)


def test_a_trip_open_at_the_end_is_marked_open() -> None:
    ev = _fill(1, 1, "entry", "buy", 3, 100.1, 0.0, 3, 100.1, 0.0)
    (trip,) = read_ledger(ev).trips
    assert (trip.exit_reason, trip.exit_ts) == ("open", None)


@pytest.mark.parametrize("plan", [
    "PLAN orb UNTIL 15:45 RISK maxpos 200 maxloss 400\nWHEN last > high(30m): BUY 100 MKT STOP -0.6% TARGET +1.2%\nWHEN last < low(30m): SELL 100 MKT STOP +0.6% TARGET -1.2%",
    "PLAN s RISK maxloss 150\nWHEN time >= 10:00: SELL 200 MKT",
])
def test_marked_equity_agrees_with_every_engine_mark(plan: str) -> None:
    data = load_sample()
    agent = FixedAgent(plan)
    res = run_session(data, agent, SessionOptions())
    rep = from_result(res, data)
    marks = [e for e in res.days[0].ledger.events if isinstance(e, Mark)]
    assert marks
    for e in marks:
        assert rep.days[0].curve.equity[e.tick] == pytest.approx(e.equity, abs=1e-9)
    # the marked drawdown is at least the one sampled at the marks, never less
    assert rep.metrics.max_drawdown >= res.days[0].summary.max_drawdown


def test_flat_baseline_is_zero_and_buy_and_hold_is_first_ask_to_last_bid() -> None:
    data = load_sample()
    res = run_session(data, FixedAgent("PLAN n\nWHEN time >= 10:00: BUY 7 MKT"), SessionOptions())
    rep = from_result(res, data)
    flat = rep.baselines["flat"]
    assert (flat.net_pnl, flat.max_drawdown, flat.trades, flat.sharpe) == (0.0, 0.0, 0, None)
    day = data.sessions[-1]
    t = data.ticks.between(day.open_ns, day.close_ns + 1)
    assert rep.baselines["buy-and-hold"].net_pnl == pytest.approx(7 * (t.bid[-1] - t.ask[0]), abs=0.01)


# ------------------------------------------------------------------------------------------
# properties over random fill sequences (average-cost bookkeeping as the engine keeps it)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kestrel.report.metrics import max_drawdown  # noqa: E402


def _book(fills: list[tuple[int, int, int, int]]) -> tuple[list[LedgerEvent], int]:
    """Ledger events for fills (tick, signed qty, price in cents, fee in cents): average cost,
    realized PnL on the closed part; returns the events and the final position."""
    events: list[LedgerEvent] = []
    pos, avg, rpnl = 0, 0.0, 0.0
    for oid, (tick, q, cents, fee) in enumerate(fills, 1):
        price = cents / 100
        side = "buy" if q > 0 else "sell"
        t = int(T0 + tick * MIN)
        events.append(OrderPlaced(tick, t, oid, "p", "entry", side, abs(q), "mkt", None, None))  # type: ignore[arg-type]
        events.append(Filled(tick, t, oid, side, abs(q), price, fee / 100))  # type: ignore[arg-type]
        new = pos + q
        if pos and (pos > 0) != (q > 0):  # reduces, closes or reverses
            closed = min(abs(q), abs(pos))
            rpnl = round(rpnl + closed * (price - avg) * (1 if pos > 0 else -1), 2)
            if new == 0:
                avg = 0.0
            elif (new > 0) != (pos > 0):
                avg = price
        else:
            avg = (avg * abs(pos) + price * abs(q)) / abs(new)
        pos = new
        events.append(PositionChanged(tick, t, pos, avg if pos else None, rpnl))
    return events, pos


fill_lists = st.lists(st.tuples(st.integers(0, 11), st.integers(-5, 5).filter(bool),
                                st.integers(9_800, 10_300), st.integers(0, 50)), max_size=12).map(
    lambda xs: sorted(xs, key=lambda x: x[0]))


@settings(max_examples=150, deadline=None)
@given(fill_lists)
def test_round_trips_account_for_all_realized_pnl_and_fees(fills: list[tuple[int, int, int, int]]) -> None:
    events, pos = _book(fills)
    facts = read_ledger(events)
    closed = [t for t in facts.trips if t.exit_reason != "open"]
    if pos == 0:
        rpnl = events[-1].rpnl if events else 0.0  # type: ignore[union-attr]
        fees = sum(f[3] for f in fills) / 100
        assert sum(t.pnl for t in closed) == pytest.approx(rpnl - fees, abs=1e-6)
        curve = mark_equity(events, TS, BID, ASK)
        assert curve.equity[-1] == pytest.approx(rpnl - fees, abs=1e-6)
    assert all(t.exit_reason in ("opposite entry", "reversal", "open") for t in facts.trips)
    assert len(facts.fills) == len(fills)


@settings(max_examples=150, deadline=None)
@given(fill_lists, st.sets(st.integers(0, 11)))
def test_the_tick_marked_drawdown_bounds_any_sampled_one(fills: list[tuple[int, int, int, int]],
                                                         sample: set[int]) -> None:
    events, _ = _book(fills)
    curve = mark_equity(events, TS, BID, ASK)
    full, at = max_drawdown(curve.ts, curve.equity)
    idx = sorted(sample)
    part, _ = max_drawdown(curve.ts[idx], curve.equity[idx])
    assert full >= part - 1e-9 and full >= 0
    if full > 0:
        assert at is not None and at in curve.ts.tolist()


def test_a_multi_session_ledger_splits_back_into_its_sessions() -> None:
    from kestrel.agents.fixed import FixedAgent as Fixed
    from kestrel.engine.ledger import Ledger
    from kestrel.report.run import split_ledger

    data = load_sample()
    res = run_session(data, Fixed("PLAN b\nWHEN time >= 10:00: BUY 10 MKT STOP -0.5%"), SessionOptions(),
                      days=4)
    whole = Ledger.from_jsonl(res.ledger_jsonl())
    parts = split_ledger(whole, list(data.sessions[-4:]))
    assert [p for p in parts] == [d.ledger.events for d in res.days]


def test_a_session_opening_with_a_carried_position() -> None:
    import msgspec

    class Carried(msgspec.Struct, frozen=True, tag="carry", tag_field="event"):  # as the engine writes it
        tick: int
        ts: int
        pos: int
        avg_price: float
        orders: int

    ev: list[Any] = [
        Carried(0, int(TS[0]), 10, 99.0, 1),
        OrderPlaced(0, int(TS[0]), 1, "carried", "stop", "sell", 10, "stp", 98.0, None),
        *_fill(4, 1, "stop", "sell", 10, 99.5, 0.0, 0, None, 5.0),
    ]
    curve = mark_equity(ev, TS, BID, ASK)
    # marked from the carried average: 10 x (bid - 99.0) until the stop fills at 99.5
    assert curve.equity.tolist()[:5] == [10.0, 10.0, 20.0, 0.0, 5.0]
    (trip,) = read_ledger(ev).trips
    assert (trip.side, trip.qty, trip.entry_price, trip.pnl, trip.exit_reason) == ("long", 10, 99.0, 5.0, "STOP")

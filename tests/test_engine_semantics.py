"""Engine semantics a quant can trust: operator caps bind, a session loss limit,
session-relative time, exact money and prices, `pnl` = what maxloss measures, the TTL
boundary. Expected values are computed by hand (or in `decimal`/`fractions`), never by the
engine; every scenario runs on both paths."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.engine import Engine, EngineConfig, ticks_of
from kestrel.engine.book import Book
from kestrel.engine.ledger import Armed, Cancelled, Disarmed, Filled, Fired, OrderPlaced, OrderRejected, PositionChanged
from kestrel.engine.money import Money
from kestrel.market.session import SessionSpec

from engine_helpers import SESSION, S, T0, fills, plan, quotes

PATHS = ("reference", "fast")


def run_on(path: str, text: str, rows: list[tuple[int, float, float]], cfg: EngineConfig | None = None,
           *, tick: float = 0.01, session: SessionSpec = SESSION, final: bool = False) -> Engine:
    e = Engine(cfg or EngineConfig(), session, "TEST", tick)
    e.arm(plan(text))
    e.run(ticks_of(rows), path=path, final=final)
    assert e.last_path == path
    return e


def rejects(e: Engine) -> list[str]:
    return [r.reason for r in e.ledger.events if isinstance(r, OrderRejected)]


def disarm_reasons(e: Engine) -> list[str]:
    return [d.reason for d in e.ledger.events if isinstance(d, Disarmed)]


# --------------------------------------------------------------------- 1. operator caps bind
@pytest.mark.parametrize("path", PATHS)
def test_a_permissive_plan_cannot_loosen_the_operators_caps(path: str) -> None:
    # the case: operator maxloss 50 / maxpos 100, plan RISK maxpos 100000 maxloss 1000000
    cfg = EngineConfig(maxloss=50, maxpos=100)
    rows = quotes(*[(100.0, 100.0)] * 3, (99.0, 99.0), (98.0, 98.0), (97.0, 97.0), (96.0, 96.0))
    text = ("PLAN wide RISK maxpos 100000 maxloss 1000000\n"
            "WHEN last >= 100: BUY 1000 MKT\nWHEN last >= 100: BUY 100 MKT")
    e = run_on(path, text, rows, cfg)
    # 1000 is over the operator's maxpos 100: rejected, the plan stays armed; 100 goes out
    assert rejects(e) == ["maxpos 100: position would reach 1000"]
    assert e.maxpos == 100 and e.maxloss == 50
    # long 100 @100: at 99.5 it would be -50; at 99 (tick 3) -100 <= -50: breach, exit at 98
    assert disarm_reasons(e) == ["maxloss 50 breached"]
    assert fills(e.ledger) == [(1, "buy", 100, 100.0), (4, "sell", 100, 98.0)]
    assert e.rpnl == -200.0


def test_a_plan_may_tighten_the_operators_caps() -> None:
    e = Engine(EngineConfig(maxloss=500, maxpos=100, maxorders=9), SESSION, "TEST", 0.01)
    e.arm(plan("PLAN tight RISK maxpos 10 maxloss 20 maxorders 2\nWHEN last > 0: BUY 1 MKT"))
    assert (e.maxpos, e.maxloss, e.maxorders) == (10, 20, 2)


@pytest.mark.parametrize("path", PATHS)
def test_the_session_loss_limit_survives_a_supersede_and_stands_the_session_down(path: str) -> None:
    cfg = EngineConfig(maxloss=1000, session_maxloss=30)
    e = Engine(cfg, SESSION, "TEST", 0.01)
    e.arm(plan("PLAN a RISK maxloss 25\nWHEN last >= 100: BUY 10 MKT"))
    # long 10 @100, marked at 98: -20 (under a's 25, under the session's 30)
    e.run(ticks_of(quotes((100.0, 100.0), (100.0, 100.0), (98.0, 98.0))), path=path, final=False)
    assert e.pnl_now(98.0, 98.0) == -20.0 and disarm_reasons(e) == []
    # b's own maxloss (25) would count from -20 and allow down to -45; the session stops at -30
    e.arm(plan("PLAN b RISK maxloss 25\nWHEN last < 0: BUY 1 MKT"))
    rows = [(T0 + k * S, m, m) for k, m in ((3, 98.0), (4, 97.5), (5, 97.0), (6, 96.0))]
    e.run(ticks_of(rows), path=path, final=False)
    # tick 5: 10 x (97 - 100) = -30 <= -30: the session stands down; the exit fills at 96
    assert disarm_reasons(e) == ["superseded by b", "session maxloss 30 breached"]
    assert fills(e.ledger)[-1] == (6, "sell", 10, 96.0)
    assert e.session_down
    # a later plan is armed and disarmed at once: the session stays down
    events = e.arm(plan("PLAN c\nWHEN last > 0: BUY 1 MKT"))
    assert [type(x) for x in events] == [Armed, Disarmed]
    assert not e.armed and "session maxloss 30 breached" in events[-1].reason  # type: ignore[union-attr]


# ------------------------------------------------------------- 3. session-relative time of day
FX = SessionSpec(dt.date(2024, 5, 6), dt.time(17, 0), dt.time(17, 0), "America/New_York")


@pytest.mark.parametrize("path", PATHS)
def test_a_time_of_day_on_an_overnight_session_is_its_next_occurrence(path: str) -> None:
    o = FX.open_ns
    rows = [(o + 120 * S, 1.1, 1.1001),                       # 17:02 on the 6th
            (FX.wall_clock_ns(9, 59, 59), 1.1, 1.1001),       # 09:59:59 on the 7th
            (FX.wall_clock_ns(10, 0), 1.1002, 1.1003),        # 10:00 on the 7th
            (FX.wall_clock_ns(10, 0, 1), 1.1004, 1.1005)]
    e = run_on(path, "PLAN fx\nWHEN time >= 10:00: BUY 1000 MKT", rows, tick=0.00001,
               session=FX)
    # 17:02 is not "at or after 10:00": 10:00 means the morning of the 7th, as UNTIL does
    assert [f.tick for f in e.ledger.events if isinstance(f, Fired)] == [2]
    assert fills(e.ledger) == [(3, "buy", 1000, 1.1005)]
    e2 = run_on(path, "PLAN fx2\nWHEN time < 10:00 AND time >= 17:01: SELL 1000 MKT", rows,
                tick=0.00001, session=FX)
    assert [f.tick for f in e2.ledger.events if isinstance(f, Fired)] == [0]


def test_a_time_of_day_on_a_day_session_is_that_days() -> None:
    e = Engine(EngineConfig(), SESSION, "TEST", 0.01)
    e.arm(plan("PLAN d UNTIL 15:00\nWHEN time >= 09:00: BUY 1 MKT"))
    # 09:00 before a 09:30 open is that day's 09:00 (like UNTIL): true from the first tick
    e.run(ticks_of(quotes((100.0, 100.0), (100.0, 100.0))), path="reference", final=False)
    assert [f.tick for f in e.ledger.events if isinstance(f, Fired)] == [0]


# ---------------------------------------------------------------------- 5. exact money, prices
@pytest.mark.parametrize("path", PATHS)
def test_a_scaled_in_round_trip_realizes_its_exact_cash_flow(path: str) -> None:
    # buy 1 @ 100.00, buy 1 @ 100.01, sell 2 @ 100.05: +0.09 (a rounded float average says +0.10)
    text = ("PLAN s\nWHEN time >= 09:30:00: BUY 1 MKT\nWHEN time >= 09:30:01: BUY 1 MKT\n"
            "WHEN time >= 09:30:02: FLAT")
    rows = quotes((99.99, 100.0), (99.99, 100.0), (100.0, 100.01), (100.05, 100.06))
    e = run_on(path, text, rows)
    assert fills(e.ledger) == [(1, "buy", 1, 100.0), (2, "buy", 1, 100.01), (3, "sell", 2, 100.05)]
    pcs = [(p.pos, p.avg_price, p.rpnl) for p in e.ledger.events if isinstance(p, PositionChanged)]
    assert pcs == [(1, 100.0, 0.0), (2, 100.005, 0.0), (0, None, 0.09)]
    assert e.ledger.summary().realized_pnl == 0.09


FILLS = st.lists(st.tuples(st.sampled_from([1, -1]), st.integers(1, 7), st.integers(9_900, 10_100)),
                 min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(FILLS, st.sampled_from([1.0, 50.0, 0.5]))
def test_realized_pnl_is_the_cash_flow_once_flat(trades: list[tuple[int, int, int]], mult: float) -> None:
    book = Book(Money.derive(0.01, mult, 0, 0, 0), mult)
    cash = Decimal(0)
    for side, qty, cents in trades:
        book.fill(side * qty, cents / 100)
        cash -= side * qty * Decimal(cents) / 100
    if book.pos:  # close at 100.00
        cash += book.pos * Decimal(100)
        book.fill(-book.pos, 100.0)
    expected = cash * Decimal(repr(mult))
    assert Fraction(book.rpnl_k, book.money.scale) == Fraction(expected)
    assert book.cost == 0 and book.avg == 0.0


@pytest.mark.parametrize("path", PATHS)
def test_slipped_fills_are_on_the_tick_grid(path: str) -> None:
    cfg = EngineConfig(slippage_ticks=1, maxpos=100_000)
    rows = [(T0, 1.38769, 1.38779), (T0 + S, 1.38769, 1.38779), (T0 + 2 * S, 1.38769, 1.38779)]
    e = run_on(path, "PLAN fx\nWHEN time >= 09:30:00: BUY 10000 MKT\nWHEN time >= 09:30:01: FLAT",
               rows, cfg, tick=0.00001)
    # 1.38779 + 0.00001 is 1.3878000000000001 in binary; on the grid it is 1.3878
    assert fills(e.ledger) == [(1, "buy", 10000, 1.3878), (2, "sell", 10000, 1.38768)]
    assert [p.avg_price for p in e.ledger.events if isinstance(p, PositionChanged)][0] == 1.3878
    assert b"1.3878000000000001" not in e.ledger.to_jsonl()
    assert e.rpnl == -1.2  # 10000 x (1.38768 - 1.3878), exactly


@pytest.mark.parametrize("path", PATHS)
def test_percentage_target_is_exact_and_rounds_half_to_even(path: str) -> None:
    # 61830 x 1.0005 = 61860.915 exactly -> 61860.92 (half to even); the binary product gives .91
    rows = quotes((61829.99, 61830.0), (61829.99, 61830.0), (61829.99, 61830.0))
    e = run_on(path, "PLAN t\nWHEN time >= 09:30:00: BUY 1 MKT TARGET +0.05% STOP -0.05%", rows)
    prices = {o.role: o.price for o in e.ledger.events if isinstance(o, OrderPlaced)}
    assert prices["target"] == 61860.92
    assert prices["stop"] == 61799.08  # 61830 x 0.9995 = 61799.085 -> .08 (even)


@pytest.mark.parametrize("path", PATHS)
def test_a_mid_equal_to_its_tick_sma_compares_equal(path: str) -> None:
    # mids 100.55 100.77 100.97 100.98 100.00 100.49: at tick 5 the mean of the last three is
    # exactly 100.49; a float running sum gives 100.49000000000001
    mids = (100.55, 100.77, 100.97, 100.98, 100.0, 100.49, 100.49)
    e = run_on(path, "PLAN x\nWHEN mid == sma(mid, 3): BUY 1 MKT", quotes(*[(m, m) for m in mids]))
    assert [f.tick for f in e.ledger.events if isinstance(f, Fired)] == [5]


# --------------------------------------------------------------- 6. pnl = maxloss, TTL boundary
@pytest.mark.parametrize("path", ("reference",))  # pnl is per-tick account state: reference only
def test_the_pnl_series_is_net_of_fees_like_maxloss(path: str) -> None:
    cfg = EngineConfig(fee_per_order=5)
    rows = quotes(*[(100.0, 100.0)] * 4)
    e = run_on(path, "PLAN f\nWHEN pos == 0: BUY 1 MKT\nWHEN pnl <= -5: FLAT", rows, cfg)
    # filled at tick 1 with a 5.00 fee and no price move: pnl = -5 -> the FLAT fires at tick 1
    assert [(f.tick, f.rule) for f in e.ledger.events if isinstance(f, Fired)] == [(0, 0), (1, 1)]
    m = run_on(path, "PLAN g RISK maxloss 5\nWHEN pos == 0: BUY 1 MKT", rows, cfg)
    assert [(d.tick, d.reason) for d in m.ledger.events if isinstance(d, Disarmed)] == [
        (1, "maxloss 5 breached")]


@pytest.mark.parametrize("path", PATHS)
def test_an_order_whose_ttl_ends_at_a_tick_does_not_fill_there(path: str) -> None:
    text = "PLAN t\nWHEN time >= 09:30:00: BUY 1 LMT 99 TTL 2s"
    # placed at 09:30:00; the TTL ends at 09:30:02: a tick exactly then cancels it, unfilled
    at_end = run_on(path, text, [(T0, 100.0, 100.5), (T0 + S, 100.0, 100.5), (T0 + 2 * S, 98.5, 98.9)])
    assert fills(at_end.ledger) == []
    assert [(c.tick, c.reason) for c in at_end.ledger.events if isinstance(c, Cancelled)] == [(2, "ttl")]
    # one nanosecond before the end it may still fill
    before = run_on(path, text, [(T0, 100.0, 100.5), (T0 + S, 100.0, 100.5), (T0 + 2 * S - 1, 98.5, 98.9)])
    assert fills(before.ledger) == [(2, "buy", 1, 98.9)]


def test_filled_events_carry_exact_fees() -> None:
    e = run_on("reference", "PLAN f\nWHEN pos == 0: BUY 3 MKT", quotes(*[(100.0, 100.0)] * 2),
               EngineConfig(fee_per_unit=0.005, fee_per_order=0.35))
    assert [f.fee for f in e.ledger.events if isinstance(f, Filled)] == [0.365]


@pytest.mark.parametrize("path", PATHS)
def test_a_plan_exit_that_slips_past_the_session_limit_stands_the_session_down(path: str) -> None:
    e = Engine(EngineConfig(session_maxloss=30), SESSION, "TEST", 0.01)
    e.arm(plan("PLAN a RISK maxloss 25\nWHEN last >= 100: BUY 10 MKT"))
    # long 10 @100; 97.5 -> -25: a's maxloss disarms it; the exit fills at 96.5 -> -35
    e.run(ticks_of(quotes((100.0, 100.0), (100.0, 100.0), (97.5, 97.5), (96.5, 96.5))), path=path,
          final=False)
    assert disarm_reasons(e) == ["maxloss 25 breached"] and e.rpnl == -35.0
    events = e.arm(plan("PLAN b\nWHEN last > 0: BUY 1 MKT"))
    assert [type(x) for x in events] == [Armed, Disarmed] and not e.armed
    assert events[-1].reason == "session maxloss 30 breached: the session stands down"  # type: ignore[union-attr]


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 10_000_000), st.sampled_from([0.01, 0.25, 0.00001, 0.5]),
       st.sampled_from(["pct", "abs"]), st.sampled_from([0.005, 0.03, 0.05, 0.125, 0.5, 1.0]),
       st.sampled_from([1, -1]))
def test_trailing_levels_are_exact_and_half_to_even(k: int, tick: float, mode: str, dist: float, side: int) -> None:
    from decimal import ROUND_HALF_EVEN

    from kestrel.engine.orders import TickGrid, trail_level
    from kestrel.lang import ast

    t = Decimal(repr(tick))
    best = k * t
    d = Decimal(repr(dist))
    raw = (best * (1 - d / 100) if side < 0 else best * (1 + d / 100)) if mode == "pct" else (
        best - d if side < 0 else best + d)
    expected = float((raw / t).quantize(Decimal(1), rounding=ROUND_HALF_EVEN) * t)
    got = trail_level(float(best), ast.Offset(mode, dist), side, TickGrid(tick))  # type: ignore[arg-type]
    assert got == expected


def test_a_trailing_level_on_a_half_tick_rounds_to_even() -> None:
    from kestrel.engine.orders import TickGrid, trail_level
    from kestrel.lang import ast

    g = TickGrid(0.01)
    assert trail_level(61830.0, ast.Offset("pct", 0.05), -1, g) == 61799.08  # 61799.085
    assert trail_level(61830.0, ast.Offset("pct", 0.05), 1, g) == 61860.92   # 61860.915

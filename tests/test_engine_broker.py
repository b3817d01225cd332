"""Broker rules pinned on hand-written tick sequences with hand-computed fills.

Prices are multiples of 0.25 so every figure is exact in binary floating point. The
plan fires at tick i; its order is eligible from tick i+1.
"""

from __future__ import annotations

from kestrel.engine import EngineConfig
from kestrel.engine.ledger import Filled, Mark, PositionChanged

from kestrel.engine import ticks_of

from engine_helpers import S, T0, cancels, engine, fills, placed, plan, quotes, run


def test_mkt_buy_fills_at_next_ticks_ask() -> None:
    # mid: 99.75, 100.25 (> 100: fires at tick 1), fill at tick 2's ask 101.5
    rows = quotes((99.5, 100.0), (100.0, 100.5), (101.0, 101.5), (101.0, 101.5))
    e = run("PLAN p\nWHEN last > 100: BUY 10 MKT", rows)
    assert fills(e.ledger) == [(2, "buy", 10, 101.5)]
    assert e.pos == 10 and e.account().avg_entry == 101.5


def test_mkt_sell_fills_at_bid_with_slippage() -> None:
    rows = quotes((99.5, 100.0), (100.0, 100.5), (101.0, 101.5))
    e = run("PLAN p\nWHEN last > 100: SELL 10 MKT", rows, EngineConfig(slippage_ticks=2))
    # bid 101.0 minus 2 ticks of 0.25
    assert fills(e.ledger) == [(2, "sell", 10, 100.5)]


def test_latency_in_ticks_delays_the_fill() -> None:
    rows = quotes((100.0, 100.5), (101.0, 101.5), (102.0, 102.5), (103.0, 103.5))
    e = run("PLAN p\nWHEN last > 100: BUY 1 MKT", rows, EngineConfig(latency_ticks=1))
    # fired at tick 0 -> eligible from tick 0 + 1 + 1 = 2
    assert fills(e.ledger) == [(2, "buy", 1, 102.5)]


def test_latency_in_ns_waits_for_the_clock() -> None:
    rows = quotes((100.0, 100.5), (101.0, 101.5), (102.0, 102.5), (103.0, 103.5), step_s=0.5)
    e = run("PLAN p\nWHEN last > 100: BUY 1 MKT", rows, EngineConfig(latency_ns=S))
    # fired at t=0; the first tick with ts >= 1s is tick 2
    assert fills(e.ledger) == [(2, "buy", 1, 102.5)]


def test_buy_limit_fills_at_the_limit_when_the_ask_touches_it() -> None:
    rows = quotes((100.0, 100.5), (99.75, 100.25), (99.5, 100.0), (99.0, 99.5))
    e = run("PLAN p\nWHEN last > 100: BUY 5 LMT 100", rows)
    # placed at tick 0 (mid 100.25); tick 1 ask 100.25 > 100; tick 2 ask 100.0 <= 100
    assert fills(e.ledger) == [(2, "buy", 5, 100.0)]


def test_buy_limit_fills_better_when_the_market_gaps_through() -> None:
    rows = quotes((100.0, 100.5), (100.0, 100.5), (98.0, 98.5))
    e = run("PLAN p\nWHEN last > 100: BUY 5 LMT 100", rows)
    assert fills(e.ledger) == [(2, "buy", 5, 98.5)]


def test_sell_limit_uses_the_bid() -> None:
    rows = quotes((100.0, 100.5), (100.75, 101.25), (101.0, 101.5), (102.0, 102.5))
    e = run("PLAN p\nWHEN last > 100: SELL 5 LMT 101", rows)
    # tick 1 bid 100.75 < 101; tick 2 bid 101.0 >= 101 -> at 101; (tick 3 would gap)
    assert fills(e.ledger) == [(2, "sell", 5, 101.0)]


def test_limit_price_is_an_expression_of_the_firing_tick() -> None:
    rows = quotes((100.0, 100.5), (100.25, 100.75), (100.25, 100.75))
    e = run("PLAN p\nWHEN last > 100: BUY 5 LMT bid-0.25", rows)
    # limit = 100.0 - 0.25 = 99.75; never reached
    assert placed(e.ledger)[0].price == 99.75
    assert fills(e.ledger) == []


def test_buy_stop_triggers_on_the_ask_and_fills_as_market() -> None:
    rows = quotes((100.0, 100.5), (100.5, 101.0), (101.5, 102.0), (103.0, 103.5))
    e = run("PLAN p\nWHEN last > 100: BUY 5 STP 101.5", rows, EngineConfig(slippage_ticks=1))
    # tick 1 ask 101.0 < 101.5; tick 2 ask 102.0 >= 101.5 -> fills at 102.0 + 0.25
    assert fills(e.ledger) == [(2, "buy", 5, 102.25)]


def test_ttl_cancels_an_unfilled_entry() -> None:
    rows = quotes(*[(100.0, 100.5)] * 5)
    e = run("PLAN p\nWHEN last > 100: BUY 5 LMT 99 TTL 2s", rows)
    # fired at t=0 -> expires at ts >= 2s, i.e. tick 2
    assert fills(e.ledger) == []
    assert cancels(e.ledger) == [(2, 1, "ttl")]
    assert e.orders == {}


def test_bracket_children_after_entry_fill_and_oco() -> None:
    rows = quotes((100.0, 100.0), (99.75, 100.0), (101.0, 101.25), (102.0, 102.25), (103.0, 103.0))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -1% TARGET +2%", rows)
    orders = placed(e.ledger)
    # entry fills at tick 1 ask 100.0 -> stop 99.0, target 102.0, both sells of 10
    assert [(o.role, o.side, o.qty, o.price, o.parent, o.tick) for o in orders] == [
        ("entry", "buy", 10, None, None, 0),
        ("stop", "sell", 10, 99.0, 1, 1),
        ("target", "sell", 10, 102.0, 1, 1),
    ]
    # target: bid 102.0 >= 102 at tick 3 -> the stop is cancelled (OCO)
    assert fills(e.ledger) == [(1, "buy", 10, 100.0), (3, "sell", 10, 102.0)]
    assert cancels(e.ledger) == [(3, 2, "oco")]
    assert e.pos == 0 and e.rpnl == 20.0


def test_protective_stop_gaps_fill_at_the_bid() -> None:
    rows = quotes((100.0, 100.0), (99.75, 100.0), (99.5, 99.75), (97.0, 97.25))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -1%", rows)
    # stop 99.0; tick 3 bid 97.0 <= 99 -> fills at 97.0 (the gap is the trader's)
    assert fills(e.ledger)[-1] == (3, "sell", 10, 97.0)
    assert e.rpnl == -30.0


def test_trailing_stop_ratchets_with_the_best_bid() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.25), (101.0, 101.25), (102.0, 102.25),
                  (101.5, 101.75), (101.0, 101.25))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT TRAIL 1", rows)
    # fill at tick 1 ask 100.25 -> best 100.25, level 99.25; tick 2 best 101 (level 100);
    # tick 3 best 102 (level 101); tick 4 bid 101.5 > 101; tick 5 bid 101.0 <= 101 -> fill
    assert fills(e.ledger) == [(1, "buy", 10, 100.25), (5, "sell", 10, 101.0)]
    assert e.account().position == 0


def test_short_trailing_stop_uses_the_ask() -> None:
    rows = quotes((100.0, 100.0), (99.75, 100.0), (98.75, 99.0), (99.5, 99.75), (99.75, 100.0))
    e = run("PLAN p\nWHEN last >= 100: SELL 10 MKT TRAIL 1", rows)
    # fill at tick 1 bid 99.75 -> best 99.75 (level 100.75); tick 2 best ask 99.0 (level
    # 100.0); tick 3 ask 99.75 < 100; tick 4 ask 100.0 >= 100 -> buy at 100.0
    assert fills(e.ledger) == [(1, "sell", 10, 99.75), (4, "buy", 10, 100.0)]


def test_fees_per_unit_and_per_order() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT", rows,
            EngineConfig(fee_per_unit=0.25, fee_per_order=1.0))
    # 10 * 0.25 + 1.0
    assert e.fees == 3.5
    assert e.ledger.events[-1] == Mark(1, T0 + S, 10, 0.0, 0.0, 3.5, -3.5)


def test_partial_fills_follow_tick_sizes_and_size_the_brackets() -> None:
    rows = [(T0 + k * S, 100.0, 100.0, 100.0, sz) for k, sz in enumerate([1.0, 4.0, 4.0, 5.0])]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -1%", rows,
            EngineConfig(partial_fills=True))
    assert [f[:3] for f in fills(e.ledger)] == [(1, "buy", 4), (2, "buy", 4), (3, "buy", 2)]
    stops = [o for o in placed(e.ledger) if o.role == "stop"]
    assert [s.qty for s in stops] == [4, 4, 2]
    assert e.pos == 10


def test_without_the_option_a_fill_is_whole() -> None:
    rows = [(T0 + k * S, 100.0, 100.0, 100.0, 1.0) for k in range(3)]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT", rows)
    assert fills(e.ledger) == [(1, "buy", 10, 100.0)]


def test_position_changes_track_average_and_realized_pnl() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (101.0, 101.0), (102.0, 102.0), (102.0, 102.0))
    e = run("PLAN p RISK maxpos 100\nWHEN last >= 100: BUY 10 MKT\nWHEN last >= 101: BUY 10 MKT\n"
            "WHEN last >= 102: SELL 5 MKT", rows)
    changes = [(c.pos, c.avg_price, c.rpnl) for c in e.ledger.events if isinstance(c, PositionChanged)]
    # rule 0 fires t0 -> buy 10 @100 at t1; rule 1 fires t2 -> buy 10 @102 at t3 (avg 101);
    # rule 2 fires t3 -> sell 5 @102 at t4: realized 5 * (102 - 101)
    assert changes == [(10, 100.0, 0.0), (20, 101.0, 0.0), (15, 101.0, 5.0)]


def test_a_reversing_entry_cancels_the_old_sides_protection() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (101.0, 101.0), (101.0, 101.0), (90.0, 90.0))
    e = run("PLAN p RISK maxpos 100\nWHEN last >= 100: BUY 10 MKT STOP -5%\n"
            "WHEN last >= 101: SELL 20 MKT", rows)
    # long 10 @100 (stop 95 sells 10); the sell 20 @101 at t3 leaves a short of 10: the sell
    # stop would add to the short, so it is cancelled; nothing fills at t4
    assert fills(e.ledger) == [(1, "buy", 10, 100.0), (3, "sell", 20, 101.0)]
    assert cancels(e.ledger) == [(3, 2, "reversed")]
    assert e.pos == -10


def test_flat_is_not_sent_twice_while_one_is_working() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (99.0, 99.0), (98.0, 98.0), (98.0, 98.0))
    e = run("PLAN p RISK maxpos 100\nWHEN last >= 100: BUY 10 MKT\n"
            "WHEN last < 100: FLAT\nWHEN last < 99.5: FLAT", rows, EngineConfig(latency_ticks=1))
    # both FLAT rules fire at t2; only the first sends an order (fills t4 with latency 1)
    assert [o.role for o in placed(e.ledger)] == ["entry", "flat"]
    assert fills(e.ledger)[-1] == (4, "sell", 10, 98.0)


def test_ticks_going_back_in_time_fail_closed() -> None:
    import pytest

    from kestrel.engine import ticks_of

    e = run("PLAN p\nWHEN last > 1000: BUY 1 MKT", quotes((100.0, 100.0), (100.0, 100.0)))
    with pytest.raises(ValueError, match="back in time"):
        e.on_ticks(ticks_of([(T0, 100.0, 100.0)]))


# ------------------------------------------------------------------ tick grid


def test_bracket_prices_snap_to_the_tick_grid_so_a_touch_at_the_level_triggers() -> None:
    # tick 0.01: 189.11 + 0.78 is 189.89000000000001 in binary, above an ask printed 189.89;
    # on the grid the stop is 189.89 and the ask 189.89 at tick 3 triggers it
    rows = [(T0, 189.11, 189.12), (T0 + S, 189.11, 189.12), (T0 + 2 * S, 189.50, 189.51),
            (T0 + 3 * S, 189.88, 189.89), (T0 + 4 * S, 189.89, 189.90)]
    for path in ("reference", "fast"):
        e = engine(tick_size=0.01)
        e.arm(plan("PLAN p\nWHEN last >= 189.10: SELL 10 MKT STOP +0.78"))
        e.run(ticks_of(rows), path=path, final=False)
        # sold at tick 1's bid 189.11; stop 189.11 + 0.78 on the grid
        assert [o.price for o in placed(e.ledger) if o.role == "stop"] == [189.89]
        assert fills(e.ledger) == [(1, "sell", 10, 189.11), (3, "buy", 10, 189.89)]


def test_entry_limit_expressions_snap_to_the_grid() -> None:
    # ask+0.02 at tick 0 = 189.88 + 0.02 = 189.89999999999998; on the grid 189.90, which the
    # ask of tick 1 (189.90) reaches
    rows = [(T0, 189.87, 189.88), (T0 + S, 189.89, 189.90)]
    e = engine(tick_size=0.01)
    e.arm(plan("PLAN p\nWHEN last > 0: BUY 5 LMT ask+0.02"))
    e.run(ticks_of(rows), path="reference", final=False)
    assert placed(e.ledger)[0].price == 189.9
    assert fills(e.ledger) == [(1, "buy", 5, 189.9)]


def test_pct_trailing_level_is_on_the_grid() -> None:
    # long filled at 100.25 (tick 1 ask); TRAIL 1%: level 100.25 * 0.99 = 99.2475 -> 99.25;
    # tick 2 bid 101.0 -> level 99.99 -> 100.0; tick 3 bid 100.0 <= 100.0 triggers
    rows = quotes((100.0, 100.0), (100.0, 100.25), (101.0, 101.25), (100.0, 100.25))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT TRAIL 1%", rows)
    assert placed(e.ledger)[1].price == 99.25
    assert fills(e.ledger) == [(1, "buy", 10, 100.25), (3, "sell", 10, 100.0)]


# ------------------------------------------------------------ more hand-computed rules


def test_mkt_with_slippage_and_latency_in_ticks_and_ns_together() -> None:
    # ticks every 0.5s; fired at tick 0 (t=0). latency_ticks 2 -> eligible from tick 3
    # (t=1.5s); latency_ns 2s -> not before t=2s: tick 4. Buy at its ask 104.5 + 2 x 0.25
    rows = quotes(*[(100.0 + k, 100.5 + k) for k in range(6)], step_s=0.5)
    cfg = EngineConfig(slippage_ticks=2, latency_ticks=2, latency_ns=2 * S)
    for path in ("reference", "fast"):
        e = run("PLAN p\nWHEN last > 100: BUY 3 MKT", rows, cfg, path=path)
        assert fills(e.ledger) == [(4, "buy", 3, 105.0)]


def test_latency_applies_to_bracket_children_from_the_fill_tick() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (100.0, 100.0), (98.0, 98.0), (98.0, 98.0),
                  (97.0, 97.0))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -1.0", rows, EngineConfig(latency_ticks=1))
    # entry eligible from tick 2 -> fills @100; its stop (99) placed at tick 2 is eligible from
    # tick 2 + 1 + 1 = 4: tick 3's bid 98 does not reach it, tick 4 fills it at 98
    assert fills(e.ledger) == [(2, "buy", 10, 100.0), (4, "sell", 10, 98.0)]


def test_sell_limit_fills_better_when_the_market_gaps_through() -> None:
    rows = quotes((100.0, 100.5), (100.0, 100.5), (102.0, 102.5))
    e = run("PLAN p\nWHEN last > 100: SELL 5 LMT 101", rows)
    # tick 1 bid 100 < 101; tick 2 bid 102 >= 101: the gap is the trader's gain -> 102
    assert fills(e.ledger) == [(2, "sell", 5, 102.0)]


def test_sell_stop_entry_triggers_on_the_bid_and_its_bracket_follows_the_fill() -> None:
    rows = quotes((100.0, 100.5), (99.75, 100.25), (98.0, 98.5), (96.0, 96.5), (97.0, 97.5))
    e = run("PLAN p\nWHEN last > 100: SELL 10 STP 99.5 STOP +1.0", rows, EngineConfig(slippage_ticks=1))
    # tick 1 bid 99.75 > 99.5; tick 2 bid 98.0 <= 99.5 -> sells at 98.0 - 0.25 = 97.75;
    # its buy stop at 97.75 + 1.0 = 98.75 (eligible from tick 3); tick 4 ask 97.5 < 98.75 holds
    assert fills(e.ledger) == [(2, "sell", 10, 97.75)]
    assert [(o.role, o.side, o.price) for o in placed(e.ledger)] == [
        ("entry", "sell", 99.5), ("stop", "buy", 98.75)]


def test_fee_per_order_is_charged_once_across_partial_fills() -> None:
    rows = [(T0 + k * S, 100.0, 100.0, 100.0, sz) for k, sz in enumerate([1.0, 4.0, 6.0])]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT", rows,
            EngineConfig(partial_fills=True, fee_per_unit=0.25, fee_per_order=2.0))
    # fills of 4 (1 + 2 fee) and 6 (1.5): 4.5 in all
    assert [(f.qty, f.fee) for f in e.ledger.events if isinstance(f, Filled)] == [(4, 3.0), (6, 1.5)]
    assert e.fees == 4.5


def test_a_partial_child_fill_reduces_its_oco_sibling() -> None:
    # long 10 @100 with stop 99 and target 101; the target fills 4 at tick 2 (size 4): the
    # stop shrinks to 6; tick 3 bid 99 stops out the 6 left
    rows = [(T0, 100.0, 100.0, 100.0, 0.0), (T0 + S, 100.0, 100.0, 100.0, 0.0),
            (T0 + 2 * S, 101.0, 101.0, 101.0, 4.0), (T0 + 3 * S, 99.0, 99.0, 99.0, 50.0)]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -1.0 TARGET +1.0", rows,
            EngineConfig(partial_fills=True))
    assert fills(e.ledger) == [(1, "buy", 10, 100.0), (2, "sell", 4, 101.0), (3, "sell", 6, 99.0)]
    # +4 on the target, -6 on the stop; the target's 6 left is cancelled when flat
    assert e.rpnl == -2.0 and e.pos == 0
    assert cancels(e.ledger) == [(3, 3, "oco")]


def test_ttl_cancels_the_rest_of_a_partially_filled_entry_and_keeps_its_bracket() -> None:
    rows = [(T0 + k * S, 100.0, 100.0, 100.0, sz) for k, sz in enumerate([0.0, 3.0, 0.0, 0.0])]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 LMT 99 STOP -1.0 TTL 2s", rows,
            EngineConfig(partial_fills=True))
    # the limit 99 is not reached at ask 100: nothing fills; TTL cancels at t=2s
    assert fills(e.ledger) == [] and cancels(e.ledger) == [(2, 1, "ttl")]
    rows = [(T0, 100.0, 100.0, 100.0, 0.0), (T0 + S, 99.0, 99.0, 99.0, 3.0),
            (T0 + 2 * S, 99.0, 99.0, 99.0, 3.0), (T0 + 3 * S, 99.0, 99.0, 99.0, 3.0)]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 LMT 99 STOP -1.0 TTL 2s", rows,
            EngineConfig(partial_fills=True))
    # 3 fill at tick 1 (bracket of 3 at 98); at tick 2 (t = 2s) the TTL cancels the other 7
    assert fills(e.ledger) == [(1, "buy", 3, 99.0)]
    assert cancels(e.ledger) == [(2, 1, "ttl")]
    assert [(o.role, o.qty, o.price) for o in e.orders.values()] == [("stop", 3, 98.0)]


def test_a_reversing_entrys_bracket_covers_only_the_part_that_opened() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (101.0, 101.0), (101.0, 101.0),
                  (102.5, 102.5), (103.0, 103.0))
    e = run("PLAN p RISK maxpos 100\nWHEN last >= 100: BUY 10 MKT\n"
            "WHEN last >= 101: SELL 20 MKT STOP +1.0", rows)
    # long 10 @100; SELL 20 @101 at t3 closes 10 and opens a short of 10: its buy stop is for
    # 10 at 102, which the ask 102.5 at t4 triggers -> flat, not long 10
    assert [(o.role, o.qty, o.price) for o in placed(e.ledger) if o.role == "stop"] == [("stop", 10, 102.0)]
    assert fills(e.ledger)[-1] == (4, "buy", 10, 102.5)
    assert e.pos == 0


def test_an_entry_that_only_reduces_gets_no_bracket() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (101.0, 101.0), (101.0, 101.0))
    e = run("PLAN p RISK maxpos 100\nWHEN last >= 100: BUY 10 MKT\n"
            "WHEN last >= 101: SELL 4 MKT STOP +1.0", rows)
    assert [o.role for o in placed(e.ledger)] == ["entry", "entry"]
    assert e.pos == 6


def test_protective_stops_are_reduce_only() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (101.0, 101.0), (101.0, 101.0), (94.0, 94.0))
    e = run("PLAN p RISK maxpos 100\nWHEN last >= 100: BUY 10 MKT STOP -5.0\n"
            "WHEN last >= 101: SELL 4 MKT", rows)
    # long 10 with a sell stop for 10 at 95; selling 4 leaves 6; at t4 the stop sells only the
    # 6 held (never goes short 4) and the rest of it is cancelled
    assert fills(e.ledger) == [(1, "buy", 10, 100.0), (3, "sell", 4, 101.0), (4, "sell", 6, 94.0)]
    assert e.pos == 0 and cancels(e.ledger) == [(4, 2, "flat")]
    assert e.rpnl == 4.0 - 36.0

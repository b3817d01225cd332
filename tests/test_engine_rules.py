"""Per-tick rule semantics, plan expiry, end of day, risk breaches, supersede, stand-down."""

from __future__ import annotations

from kestrel.engine import Engine, EngineConfig, ticks_of
from kestrel.engine.ledger import Disarmed, Fired, Mark, OrderRejected

from engine_helpers import SESSION, S, T0, cancels, disarms, engine, fills, placed, plan, quotes, run


def fired(e: object) -> list[tuple[int, int]]:
    return [(f.rule, f.tick) for f in e.ledger.events if isinstance(f, Fired)]  # type: ignore[attr-defined]


def test_rule_fires_once_at_the_first_true_tick() -> None:
    rows = quotes((99.0, 99.0), (101.0, 101.0), (102.0, 102.0), (103.0, 103.0))
    e = run("PLAN p\nWHEN last > 100: BUY 1 MKT", rows)
    assert fired(e) == [(0, 1)]


def test_repeat_rearms_only_after_a_false_evaluation() -> None:
    mids = [101, 102, 99, 99, 101, 98, 101, 101]
    rows = quotes(*[(m, m) for m in mids])
    e = run("PLAN p\nWHEN last > 100: BUY 1 MKT x3", rows)
    # true at 0 (fire), 1 (still true: waits), false at 2 (re-arm), fire at 4, false 5, fire 6
    assert fired(e) == [(0, 0), (0, 4), (0, 6)]


def test_crosses_never_fires_on_the_first_observation() -> None:
    mids = [101, 102, 99, 101]
    rows = quotes(*[(m, m) for m in mids])
    e = run("PLAN p\nWHEN last CROSSES ABOVE 100: BUY 1 MKT", rows)
    # tick 0 is above but has no previous evaluation; the cross is 99 -> 101 at tick 3
    assert fired(e) == [(0, 3)]


def test_crosses_below_needs_a_defined_previous_value() -> None:
    # sma(last, 2) is undefined at tick 0; defined from tick 1
    mids = [100, 104, 96, 90]
    rows = quotes(*[(m, m) for m in mids])
    e = run("PLAN p\nWHEN last CROSSES BELOW sma(last, 2): SELL 1 MKT", rows)
    # t1: last 104 vs sma 102 (above); t2: 96 vs 100 -> crosses below
    assert fired(e) == [(0, 2)]


def test_high_window_excludes_the_current_tick() -> None:
    mids = [100, 101, 100.5, 101.5, 101.25]
    rows = quotes(*[(m, m) for m in mids])
    e = run("PLAN p\nWHEN last > high(3s): BUY 1 MKT", rows)
    # high(3s) is defined once t-3s >= first tick: from tick 3; window [0s,3s) -> 101;
    # tick 3 last 101.5 > 101 fires
    assert fired(e) == [(0, 3)]


def test_high_window_ignores_ticks_with_the_same_timestamp() -> None:
    rows = [(T0, 100.0, 100.0), (T0 + 2 * S, 101.0, 101.0), (T0 + 2 * S, 102.0, 102.0)]
    e = run("PLAN p\nWHEN last > high(2s): BUY 1 MKT", rows)
    # at ts 2s the window [0s, 2s) holds only tick 0 (100): tick 1 fires (101 > 100)
    assert fired(e) == [(0, 1)]


def test_vwap_is_the_mean_of_last_while_volume_is_zero() -> None:
    rows = [(T0 + k * S, m, m, m, 0.0) for k, m in enumerate([100.0, 102.0, 101.5])]
    # vwap: 100 (t0: not above), then (100 + 102) / 2 = 101 at t1: 102 > 101 fires
    e = run("PLAN p\nWHEN last > vwap: BUY 1 MKT", rows)
    assert fired(e) == [(0, 1)]


def test_vwap_weights_by_size() -> None:
    rows = [(T0, 100.0, 100.0, 100.0, 3.0), (T0 + S, 104.0, 104.0, 104.0, 1.0),
            (T0 + 2 * S, 100.5, 100.5, 100.5, 0.0)]
    # vwap after t1 = (300 + 104) / 4 = 101; at t2 still 101 (size 0): 100.5 < 101
    e = run("PLAN p\nWHEN last < vwap: SELL 1 MKT", rows)
    assert fired(e) == [(0, 2)]


def test_chg_uses_the_latest_tick_at_or_before_t_minus_d() -> None:
    mids = [100, 150, 100, 102]
    rows = quotes(*[(m, m) for m in mids])
    # chg(2s) at t2 = 100/100-1 = 0; at t3 = 102/150 - 1 < 0; at t1 undefined
    e = run("PLAN p\nWHEN chg(2s) >= 0: BUY 1 MKT\nWHEN chg(2s) < -30: SELL 1 MKT", rows)
    assert fired(e) == [(0, 2), (1, 3)]


def test_atr_over_completed_one_minute_bars() -> None:
    # bar 0 (0-59s): 100..102 -> TR 2; bar 1 (60-119s): 101..104 -> TR max(104,101)-min(101,101)=3
    rows = [(T0, 100.0, 100.0), (T0 + 30 * S, 102.0, 102.0), (T0 + 59 * S, 101.0, 101.0),
            (T0 + 60 * S, 104.0, 104.0), (T0 + 90 * S, 101.0, 101.0),
            (T0 + 120 * S, 103.0, 103.0), (T0 + 121 * S, 103.0, 103.0)]
    # atr(2) is defined once two bars completed: at t=120s it is (2 + 3) / 2 = 2.5
    e = run("PLAN p\nWHEN atr(2) > 2.4: BUY 1 MKT\nWHEN atr(1) >= 2: SELL 1 MKT", rows)
    assert fired(e) == [(1, 3), (0, 5)]


def test_sma_over_bar_closes() -> None:
    rows = [(T0, 100.0, 100.0), (T0 + 59 * S, 101.0, 101.0), (T0 + 60 * S, 110.0, 110.0),
            (T0 + 61 * S, 90.0, 90.0), (T0 + 120 * S, 95.0, 95.0)]
    # closes: bar0 101, bar1 90; sma(last, 2, 1m) defined at t=120s: 95.5
    e = run("PLAN p\nWHEN sma(last, 2, 1m) < 96: BUY 1 MKT", rows)
    assert fired(e) == [(0, 4)]


def test_expiry_until_disarms_entries() -> None:
    rows = quotes(*[(99.0, 99.0)] * 3 + [(101.0, 101.0)] * 2)
    e = run("PLAN p UNTIL 09:30:02\nWHEN last > 100: BUY 1 MKT", rows)
    assert fired(e) == []
    assert disarms(e.ledger) == [(2, "expired")]


def test_expiry_for_cancels_working_entries() -> None:
    rows = quotes(*[(100.0, 100.0)] * 4)
    e = run("PLAN p FOR 2s\nWHEN last >= 100: BUY 1 LMT 99", rows)
    # armed at the open: expires at ts >= 2s (tick 2); its resting entry is cancelled
    assert cancels(e.ledger) == [(2, 1, "expired")]
    assert disarms(e.ledger) == [(2, "expired")]


def test_session_close_flattens_by_default() -> None:
    close = SESSION.close_ns
    rows = [(T0, 100.0, 100.0), (T0 + S, 100.0, 100.5), (close - S, 99.0, 99.5),
            (close, 98.0, 98.5), (close + S, 97.0, 97.5)]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -5%", rows)
    # entry fills at tick 1 @100.5; at the close tick the stop is cancelled and the position
    # sold at that tick's bid 98.0; the later tick is ignored
    assert fills(e.ledger) == [(1, "buy", 10, 100.5), (3, "sell", 10, 98.0)]
    assert cancels(e.ledger) == [(3, 2, "session close")]
    assert disarms(e.ledger) == [(3, "session close")]
    assert e.rpnl == -25.0


def test_session_close_carry_keeps_the_position_and_its_stop() -> None:
    close = SESSION.close_ns
    rows = [(T0, 100.0, 100.0), (T0 + S, 100.0, 100.5), (close, 98.0, 98.5)]
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT STOP -5%", rows, EngineConfig(end_of_day="carry"))
    assert e.pos == 10 and len(e.orders) == 1
    assert isinstance(e.ledger.events[-1], Mark)


def test_end_of_data_applies_the_close_policy() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.5), (101.0, 101.5))
    e = run("PLAN p\nWHEN last >= 100: BUY 10 MKT", rows, final=True)
    assert fills(e.ledger) == [(1, "buy", 10, 100.5), (2, "sell", 10, 101.0)]
    assert disarms(e.ledger) == [(2, "end of data")]


# --------------------------------------------------------------------------- risk


def rejects(e: Engine) -> list[tuple[int, int, str]]:
    return [(r.tick, r.rule, r.reason) for r in e.ledger.events if isinstance(r, OrderRejected)]


def test_maxpos_breach_rejects_the_order_and_keeps_the_plan_armed() -> None:
    rows = quotes(*[(m, m) for m in (100.0, 99.0, 100.0, 99.0, 100.0, 98.0, 98.0)])
    e = run("PLAN p RISK maxpos 15\nWHEN last >= 100: BUY 10 MKT x3\nWHEN last < 99: FLAT", rows)
    # 10 ok; 20 would exceed 15 at ticks 2 and 4 -> rejected and recorded, the plan stays
    # armed, and its FLAT rule still closes the position at tick 5 (fills at 6)
    assert [o.qty for o in placed(e.ledger)] == [10, 10]
    assert [o.role for o in placed(e.ledger)] == ["entry", "flat"]
    assert rejects(e) == [(2, 0, "maxpos 15: position would reach 20"),
                          (4, 0, "maxpos 15: position would reach 20")]
    assert disarms(e.ledger) == []
    assert e.armed and e.pos == 0
    assert fills(e.ledger) == [(1, "buy", 10, 99.0), (6, "sell", 10, 98.0)]


def test_maxpos_counts_working_entries() -> None:
    rows = quotes((100.0, 100.0), (101.0, 101.0), (100.0, 100.0))
    e = run("PLAN p RISK maxpos 15\nWHEN last >= 100: BUY 10 LMT 90\nWHEN last > 100: BUY 10 LMT 90",
            rows)
    assert rejects(e) == [(1, 1, "maxpos 15: position would reach 20")]
    assert disarms(e.ledger) == [] and cancels(e.ledger) == []
    assert [o.id for o in placed(e.ledger)] == [1] and e.armed


def test_maxorders_breach_rejects_and_keeps_the_plan_armed() -> None:
    mids = [101, 99, 101, 99, 101]
    rows = quotes(*[(m, m) for m in mids])
    e = run("PLAN p RISK maxorders 2 maxpos 100\nWHEN last > 100: BUY 1 MKT x3", rows)
    assert len(placed(e.ledger)) == 2
    assert rejects(e) == [(4, 0, "maxorders 2 reached")]
    assert disarms(e.ledger) == [] and e.armed


def test_maxloss_breach_disarms_cancels_and_flattens() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (97.0, 97.0), (96.0, 96.5), (95.0, 95.5))
    e = run("PLAN p RISK maxloss 250\nWHEN last >= 100: BUY 100 MKT TARGET +5%\n"
            "WHEN last < 50: BUY 1 MKT", rows)
    # long 100 @100; at tick 2 upnl = 100 * (97 - 100) = -300 <= -250: breach -> the target is
    # cancelled, an exit is sent and fills at tick 3's bid 96.0
    assert disarms(e.ledger) == [(2, "maxloss 250 breached")]
    assert cancels(e.ledger) == [(2, 2, "maxloss")]
    assert fills(e.ledger) == [(1, "buy", 100, 100.0), (3, "sell", 100, 96.0)]
    assert e.rpnl == -400.0 and e.pos == 0


def test_maxloss_counts_fees() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (99.0, 99.0), (99.0, 99.0))
    e = run("PLAN p RISK maxloss 100\nWHEN last >= 100: BUY 50 MKT", rows,
            EngineConfig(fee_per_order=60.0))
    # tick 2: -50 upnl - 60 fees = -110 <= -100
    assert disarms(e.ledger) == [(2, "maxloss 100 breached")]


# ------------------------------------------------------------------ supersede / stand-down


def test_supersede_cancels_entries_and_carries_position_and_protection() -> None:
    e = engine()
    e.arm(plan("PLAN a\nWHEN last >= 100: BUY 10 MKT STOP -2%\nWHEN last >= 100: BUY 5 LMT 90"))
    e.on_ticks(ticks_of(quotes((100.0, 100.0), (100.0, 100.0))))
    assert e.pos == 10 and {o.role for o in e.orders.values()} == {"entry", "stop"}
    events = e.arm(plan("PLAN b\nWHEN last > 1000: SELL 1 MKT"))
    assert [type(x).__name__ for x in events] == ["Cancelled", "Disarmed", "Armed"]
    assert disarms(e.ledger) == [(2, "superseded by b")]
    assert [o.role for o in e.orders.values()] == ["stop"]
    # the carried stop (98) still protects the position
    rows = [(T0 + 2 * S, 97.0, 97.5)]
    e.on_ticks(ticks_of(rows))
    assert fills(e.ledger)[-1] == (2, "sell", 10, 97.0) and e.pos == 0


def test_stand_down_keeps_protective_exits() -> None:
    e = engine()
    e.arm(plan("PLAN a\nWHEN last >= 100: BUY 10 MKT TARGET +1%\nWHEN last >= 100: BUY 5 STP 110"))
    e.on_ticks(ticks_of(quotes((100.0, 100.0), (100.0, 100.0))))
    out = e.stand_down("spread too wide")
    assert [type(x).__name__ for x in out] == ["Cancelled", "Disarmed"]
    assert [o.role for o in e.orders.values()] == ["target"]
    e.on_ticks(ticks_of([(T0 + 2 * S, 101.0, 101.5), (T0 + 3 * S, 120.0, 120.0)]))
    assert fills(e.ledger)[-1] == (2, "sell", 10, 101.0)
    assert e.pos == 0
    assert not any(isinstance(x, Disarmed) and x.reason != "spread too wide" for x in e.ledger.events)


def test_plan_for_another_instrument_fails_closed() -> None:
    import pytest

    from kestrel.engine import PlanError

    e = engine()
    with pytest.raises(PlanError, match="trades AAPL"):
        e.arm(plan("PLAN a ON AAPL\nWHEN last > 1: BUY 1 MKT"))


def test_account_snapshot() -> None:
    e = engine()
    e.arm(plan("PLAN a\nWHEN last >= 100: BUY 10 MKT STOP -2%"))
    e.on_ticks(ticks_of(quotes((100.0, 100.0), (100.0, 100.5), (101.0, 101.5))))
    acc = e.account()
    assert (acc.position, acc.avg_entry, acc.upnl) == (10, 100.5, 5.0)
    # stop -2% of 100.5 = 98.49, snapped to the 0.25 tick grid: 98.5
    assert [(o.side, o.qty, o.type, o.price) for o in acc.orders] == [("sell", 10, "stp", 98.5)]



def test_ema_is_seeded_with_the_first_value() -> None:
    # alpha = 2 / (3 + 1) = 0.5: 100 -> 101 (after 102) -> 102.5 (after 104)
    rows = quotes(*[(m, m) for m in (100.0, 102.0, 104.0)])
    e = run("PLAN p\nWHEN ema(last, 3) > 101: BUY 1 MKT\nWHEN ema(last, 3) >= 100: SELL 1 MKT", rows)
    assert fired(e) == [(1, 0), (0, 2)]


def test_sma_counts_the_current_tick() -> None:
    rows = quotes(*[(m, m) for m in (100.0, 104.0, 96.0)])
    # sma(last, 2): undefined, 102, 100
    e = run("PLAN p\nWHEN sma(last, 2) == 102: BUY 1 MKT\nWHEN sma(last, 2) == 100: SELL 1 MKT", rows)
    assert fired(e) == [(0, 1), (1, 2)]


def test_range_is_high_minus_low_of_the_window() -> None:
    rows = quotes(*[(m, m) for m in (100.0, 103.0, 101.0, 101.0)])
    # at t=2s the window [0s, 2s) holds 100 and 103: range 3
    e = run("PLAN p\nWHEN range(2s) >= 3: BUY 1 MKT", rows)
    assert fired(e) == [(0, 2)]


def test_ema_over_bar_closes() -> None:
    rows = [(T0, 100.0, 100.0), (T0 + 60 * S, 104.0, 104.0), (T0 + 120 * S, 90.0, 90.0),
            (T0 + 121 * S, 90.0, 90.0)]
    # bar closes 100 (complete at 60s), 104 (complete at 120s): ema(·, 3, 1m) = 100 then 102
    e = run("PLAN p\nWHEN ema(last, 3, 1m) > 101: BUY 1 MKT", rows)
    assert fired(e) == [(0, 2)]


def test_time_compares_with_the_session_wall_clock() -> None:
    rows = [(T0 + 29 * 60 * S, 100.0, 100.0), (T0 + 30 * 60 * S, 100.0, 100.0)]
    e = run("PLAN p\nWHEN time >= 10:00: BUY 1 MKT", rows)
    assert fired(e) == [(0, 1)]


# ------------------------------------------------------- maxloss before the order goes out


def test_maxloss_refuses_an_entry_whose_stop_would_take_the_plan_past_it() -> None:
    mids = [100.0, 100.0, 99.0, 100.0, 100.0, 99.0, 100.0, 100.0]
    rows = quotes(*[(m, m) for m in mids])
    e = run("PLAN p RISK maxloss 25\nWHEN last >= 100: BUY 10 MKT STOP -1.0 x3", rows)
    # trade 1: fired t0, filled t1 @100, stop 99 fills t2: -10. Fired again t3: worst case
    # 10 * 1.0 = 10 -> -20 > -25, allowed; filled t4, stopped t5: -20. Fired t6: -20 - 10 =
    # -30 <= -25: refused before any order goes out, plan disarmed
    assert fills(e.ledger) == [(1, "buy", 10, 100.0), (2, "sell", 10, 99.0),
                               (4, "buy", 10, 100.0), (5, "sell", 10, 99.0)]
    assert [r.reason for r in e.ledger.events if isinstance(r, OrderRejected)] == [
        "worst-case loss 10.00 would take the plan's pnl to -30.00, past maxloss 25"]
    assert disarms(e.ledger) == [(6, "maxloss 25 would be breached")]
    assert e.rpnl == -20.0 and len(placed(e.ledger)) == 4  # two entries, two stops


def test_maxloss_worst_case_counts_slippage_and_round_trip_fees() -> None:
    # per unit: stop 1.0 + exit slippage 0.25 + fees 2 * 0.05 + 2 * 0.5 / 10 = 1.45 -> 14.5
    cfg = EngineConfig(slippage_ticks=1, fee_per_unit=0.05, fee_per_order=0.5)
    rows = quotes((100.0, 100.0), (100.0, 100.0))
    refused = run("PLAN p RISK maxloss 14.5\nWHEN last >= 100: BUY 10 MKT STOP -1.0", rows, cfg)
    assert placed(refused.ledger) == [] and disarms(refused.ledger) == [(0, "maxloss 14.5 would be breached")]
    allowed = run("PLAN p RISK maxloss 14.75\nWHEN last >= 100: BUY 10 MKT STOP -1.0", rows, cfg)
    assert [o.role for o in placed(allowed.ledger)] == ["entry", "stop"]


def test_maxloss_worst_case_uses_the_limit_and_counts_working_entries() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0))
    # BUY 10 LMT 90 STOP -10%: 10 * 90 * 0.1 = 90 per order; two working: 180
    text = ("PLAN p RISK maxpos 100 maxloss {}\nWHEN last >= 100: BUY 10 LMT 90 STOP -10%\n"
            "WHEN last >= 100: BUY 10 LMT 90 STOP -10%")
    e = run(text.format(180), rows)
    assert len(placed(e.ledger)) == 1 and disarms(e.ledger) == [(0, "maxloss 180 would be breached")]
    e = run(text.format(181), rows)
    assert len(placed(e.ledger)) == 2 and disarms(e.ledger) == []


def test_maxloss_worst_case_takes_the_tighter_of_stop_and_trail() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0))
    # STOP -3 and TRAIL 2: the trail's initial level is the tighter (2 per unit -> 20)
    e = run("PLAN p RISK maxloss 20\nWHEN last >= 100: BUY 10 MKT STOP -3 TRAIL 2", rows)
    assert disarms(e.ledger) == [(0, "maxloss 20 would be breached")]
    e = run("PLAN p RISK maxloss 20.5\nWHEN last >= 100: BUY 10 MKT STOP -3 TRAIL 2", rows)
    assert disarms(e.ledger) == []


def test_entries_without_a_stop_are_left_to_the_running_maxloss_check() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0))
    e = run("PLAN p RISK maxloss 1\nWHEN last >= 100: BUY 100 MKT", rows)
    assert fills(e.ledger) == [(1, "buy", 100, 100.0)]


def test_for_expiry_counts_from_the_arming_time() -> None:
    e = engine()
    e.on_ticks(ticks_of(quotes((100.0, 100.0), (100.0, 100.0), (100.0, 100.0))))
    # armed after the tick at 2s: FOR 2s expires at ts >= 4s
    events = e.arm(plan("PLAN p FOR 2s\nWHEN last > 1000: BUY 1 MKT"))
    assert events[0].expiry_ts == T0 + 4 * S  # type: ignore[union-attr]
    e.on_ticks(ticks_of([(T0 + 3 * S, 100.0, 100.0), (T0 + 4 * S, 100.0, 100.0)]))
    assert disarms(e.ledger) == [(4, "expired")]


def test_maxloss_marks_a_short_at_the_ask() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (100.0, 103.0), (101.0, 101.5))
    e = run("PLAN p RISK maxloss 25\nWHEN last >= 100: SELL 10 MKT", rows)
    # short 10 @100 (tick 1 bid); tick 2: marked at the ask 103 -> upnl -30 <= -25 (at the
    # mid 101.5 it would be -15): breach; the exit buys at tick 3's ask 101.5
    assert disarms(e.ledger) == [(2, "maxloss 25 breached")]
    assert fills(e.ledger) == [(1, "sell", 10, 100.0), (3, "buy", 10, 101.5)]
    assert e.rpnl == -15.0


def test_superseding_plans_maxloss_counts_from_its_own_baseline() -> None:
    e = engine()
    e.arm(plan("PLAN a\nWHEN last >= 100: BUY 10 MKT STOP -10.0"))
    e.on_ticks(ticks_of(quotes((100.0, 100.0), (100.0, 100.0), (98.0, 98.0))))
    # long 10 @100, marked at 98: pnl -20 is plan b's baseline
    e.arm(plan("PLAN b RISK maxloss 15\nWHEN last > 1000: SELL 1 MKT"))
    e.on_ticks(ticks_of([(T0 + 3 * S, 97.0, 97.0)]))
    assert disarms(e.ledger) == [(3, "superseded by b")]  # -30 - (-20) = -10: no breach
    e.on_ticks(ticks_of([(T0 + 4 * S, 96.0, 96.0), (T0 + 5 * S, 95.0, 95.0)]))
    # tick 4: -40 - (-20) = -20 <= -15: breach; the carried stop (90) is cancelled and the
    # position flattened at tick 5's bid 95
    assert disarms(e.ledger)[1:] == [(4, "maxloss 15 breached")]
    assert cancels(e.ledger) == [(4, 2, "maxloss")]
    assert fills(e.ledger)[-1] == (5, "sell", 10, 95.0) and e.pos == 0


def test_maxorders_counts_flat_orders_but_never_refuses_one() -> None:
    rows = quotes((100.0, 100.0), (100.0, 100.0), (99.0, 99.0), (99.0, 99.0), (100.0, 100.0),
                  (100.0, 100.0))
    e = run("PLAN p RISK maxorders 1\nWHEN last >= 100: BUY 10 MKT x2\nWHEN last < 100: FLAT", rows)
    # the FLAT only reduces: it goes out past the cap; the second entry is refused (2 >= 1)
    assert [o.role for o in placed(e.ledger)] == ["entry", "flat"]
    assert rejects(e) == [(4, 0, "maxorders 1 reached")]
    assert disarms(e.ledger) == [] and e.pos == 0


def test_a_plan_armed_after_its_until_is_disarmed_at_once() -> None:
    e = engine()
    e.on_ticks(ticks_of([(SESSION.wall_clock_ns(10, 0), 100.0, 100.0)]))
    events = e.arm(plan("PLAN p UNTIL 09:45\nWHEN last > 0: BUY 1 MKT"))
    assert [type(x).__name__ for x in events] == ["Armed", "Disarmed"]
    assert disarms(e.ledger) == [(1, "expired")]
    e.on_ticks(ticks_of([(SESSION.wall_clock_ns(10, 0, 1), 100.0, 100.0)]))
    assert fired(e) == []


def test_a_session_maxloss_refusal_quotes_the_sessions_pnl() -> None:
    """When the session's limit binds, the refusal quotes the session's pnl (-41 - 40 = -81)
    that the limit compares, not the plan's (-40.00, not past 60)."""
    e = engine(EngineConfig(maxpos=100, maxloss=50, session_maxloss=60), tick_size=0.01)
    e.arm(plan("PLAN a\nWHEN pos == 0 AND rpnl == 0: BUY 100 MKT STOP -0.40"))
    # buy 100 @ 100.01 (ask), stop 99.61, the bid gaps to 99.60: sold @ 99.60, -41.00
    e.on_ticks(ticks_of(quotes((100.0, 100.01), (100.0, 100.01), (99.6, 99.61), (99.5, 99.51))))
    assert e.rpnl == -41.0
    e.arm(plan("PLAN b\nWHEN pos == 0: BUY 100 MKT STOP -0.40"))
    later = [(T0 + (100 + k) * S, bid, ask) for k, (bid, ask) in enumerate([(100.0, 100.01), (100.0, 100.01)])]
    e.on_ticks(ticks_of(later))
    # plan b's floor: its baseline -41 - maxloss 50 = -91; the session's: -60 binds
    assert [r.reason for r in e.ledger.events if isinstance(r, OrderRejected)] == [
        "worst-case loss 40.00 would take the session's pnl to -81.00, past session maxloss 60"]
    assert disarms(e.ledger)[-1][1] == "session maxloss 60 would be breached"


def test_maxpos_nets_a_working_flat_as_docs_engine_md_states() -> None:
    """docs/engine.md: `working` counts the working FLATs too,
    so at pos 2 with a FLAT sell 2 working, a BUY 1 projects 1 and is accepted under maxpos 2."""
    text = "PLAN s RISK maxpos 2\nWHEN pos == 0 AND rpnl == 0: BUY 2 MKT\nWHEN pos >= 2: FLAT\nWHEN pos >= 2: BUY 1 MKT"
    e = run(text, quotes((100.0, 100.0), (100.0, 100.0), (100.0, 100.0), (100.0, 100.0)))
    assert not [r for r in e.ledger.events if isinstance(r, OrderRejected)]
    # the FLAT (lower id) fills first, then the BUY 1
    assert fills(e.ledger) == [(1, "buy", 2, 100.0), (2, "sell", 2, 100.0), (2, "buy", 1, 100.0)]
    assert [o.role for o in placed(e.ledger)] == ["entry", "flat", "entry"]

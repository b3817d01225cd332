"""Session runtime semantics on the engine side: a turn takes effect at its ordinal (the
incumbent runs the authoring window), carried positions cross sessions (`end_of_day="carry"`),
and money uses the instrument's multiplier. Direct, asyncio and trio runs agree byte for byte."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from kestrel.service.actors.driver import run_simulation
from kestrel.agents import FixedAgent, ScriptedAgent
from kestrel.data import load_sample
from kestrel.engine import EngineConfig
from kestrel.engine.ledger import Armed, Carried, Disarmed, Filled, Fired, OrderPlaced
from kestrel.market.instrument import Instrument
from kestrel.market.data import MarketData
from kestrel.market.session import NS_PER_S
from kestrel.session import SessionOptions, run_session
from kestrel.session.runner import SessionError, SessionResult, engine_config, session_days
from kestrel.session.schedule import ScheduleError

DATA = load_sample()


def all_backends(make_agent: object, options: SessionOptions, **kw: object) -> SessionResult:
    """Run direct, on asyncio and on trio; assert identical ledgers and captures; return one."""
    runs: list[SessionResult] = [run_session(  # type: ignore[call-overload]
        DATA if "data" not in kw else kw["data"], make_agent(), options,  # type: ignore[operator]
        **{k: v for k, v in kw.items() if k != "data"})]
    for backend in ("asyncio", "trio"):
        runs.append(run_simulation(DATA if "data" not in kw else kw["data"], make_agent(), options,  # type: ignore[operator,arg-type]
                                   backend=backend, **{k: v for k, v in kw.items() if k != "data"}))  # type: ignore[arg-type]
    for r in runs[1:]:
        assert r.ledger_jsonl() == runs[0].ledger_jsonl()
        assert r.capture_jsonl() == runs[0].capture_jsonl()
    return runs[0]


def test_a_turn_takes_effect_at_its_ordinal_and_the_incumbent_runs_the_window() -> None:
    day0 = DATA.sessions[0]
    options = SessionOptions(checkpoints=("11:00",), guard_s=300)
    script = ["PLAN a\nWHEN time >= 10:57: BUY 10 MKT", "PLAN b\nWHEN time >= 11:00: SELL 10 MKT"]
    result = all_backends(lambda: ScriptedAgent(script), options, date=day0.date)
    (day,) = session_days(DATA, options, day0.date)
    events = result.days[0].ledger.events
    eleven = day0.wall_clock_ns(11, 0)
    # a fires inside b's authoring window (10:55 - 11:00): the incumbent still trades there
    fired_a = [e for e in events if isinstance(e, Fired) and e.plan == "a"]
    assert len(fired_a) == 1 and day0.wall_clock_ns(10, 57) <= fired_a[0].ts < eleven
    # b is armed at the ordinal: before the first tick at or after 11:00, after every earlier one
    armed_b = next(e for e in events if isinstance(e, Armed) and e.plan == "b")
    assert armed_b.tick == day.ticks.index_at(eleven)
    assert armed_b.ts == eleven  # stamped with the ordinal's instant, not the last tick's
    superseded = next(e for e in events if isinstance(e, Disarmed) and e.plan == "a")
    assert superseded.ts == eleven and superseded.reason == "superseded by b"
    fills = [e for e in events if isinstance(e, Filled)]
    assert [f.side for f in fills][:2] == ["buy", "sell"] and fills[1].ts >= eleven


def test_a_for_plan_counts_from_its_ordinal_not_from_the_last_tick_before_it() -> None:
    """FOR 1m armed at the 11:00 checkpoint lives 11:00 to 11:01, whenever the last tick of
    the authoring window was (a quiet market could leave it minutes before the ordinal)."""
    day0 = DATA.sessions[0]
    options = SessionOptions(checkpoints=("11:00",), guard_s=300)
    script = ["PASS", "PLAN f FOR 1m\nWHEN time >= 11:00:50: BUY 10 MKT"]
    result = all_backends(lambda: ScriptedAgent(script), options, date=day0.date)
    events = result.days[0].ledger.events
    eleven = day0.wall_clock_ns(11, 0)
    armed = next(e for e in events if isinstance(e, Armed) and e.plan == "f")
    assert (armed.ts, armed.expiry_ts) == (eleven, eleven + 60 * NS_PER_S)
    fired = [e for e in events if isinstance(e, Fired) and e.plan == "f"]
    assert len(fired) == 1 and eleven + 50 * NS_PER_S <= fired[0].ts < eleven + 60 * NS_PER_S


def test_checkpoints_closer_than_the_guard_are_refused() -> None:
    with pytest.raises(ScheduleError, match="within the 300 s guard of 11:00"):
        session_days(DATA, SessionOptions(checkpoints=("11:00", "11:03"), guard_s=300))


HOLD = "PLAN hold\nWHEN pos == 0: BUY 100 MKT STOP -20%"


def test_a_carried_position_is_not_bought_again_the_next_day() -> None:
    # the operator allows the stop's worst case (100 x 20% of ~180 is over the default 1000)
    options = SessionOptions(engine=EngineConfig(end_of_day="carry", maxloss=10_000))
    result = all_backends(lambda: FixedAgent(HOLD), options, date=DATA.sessions[1].date, days=2)
    d1, d2 = result.days
    buys = [(d.date, e.qty) for d in (d1, d2) for e in d.ledger.events if isinstance(e, Filled)]
    assert buys == [(d1.date, 100)]  # once over two days: the `pos == 0` guard sees the carry
    (carried,) = [e for e in d2.ledger.events if isinstance(e, Carried)]
    first_fill = next(e for e in d1.ledger.events if isinstance(e, Filled))
    assert (carried.pos, carried.avg_price, carried.orders, carried.tick) == (100, first_fill.price, 1, 0)
    # its protective stop came with it (entries do not), at the same level
    stops = [(d.date, e.plan, e.price) for d in (d1, d2) for e in d.ledger.events
             if isinstance(e, OrderPlaced) and e.role == "stop"]
    assert [s[1] for s in stops] == ["hold", "carried"] and stops[0][2] == stops[1][2]
    assert (d1.summary.carried_in, d1.summary.carried_out) == (0, 100)
    assert (d2.summary.carried_in, d2.summary.carried_out) == (100, 100)
    assert d2.carry is not None and d2.carry.pos == 100


def test_flatten_days_carry_nothing() -> None:
    result = run_session(DATA, FixedAgent(HOLD), SessionOptions(engine=EngineConfig(maxloss=10_000)),
                         date=DATA.sessions[1].date, days=2)
    buys = [e for d in result.days for e in d.ledger.events if isinstance(e, Filled) and e.side == "buy"]
    assert len(buys) == 2 and all(d.carry is None for d in result.days)


TRADE = "PLAN m\nWHEN time >= 10:00: BUY 2 MKT\nWHEN time >= 10:30: FLAT"


def with_multiplier(m: float) -> MarketData:
    inst = Instrument(symbol=DATA.symbol, tick_size=DATA.tick_size, multiplier=m)
    return replace(DATA, instrument=inst)


def test_money_uses_the_instruments_multiplier() -> None:
    date = DATA.sessions[0].date
    result = all_backends(lambda: FixedAgent(TRADE), SessionOptions(), data=with_multiplier(50.0), date=date)
    fills = [e for e in result.days[0].ledger.events if isinstance(e, Filled)]
    buy, sell = fills[0], fills[1]
    expected = 2 * (Decimal(repr(sell.price)) - Decimal(repr(buy.price))) * 50
    assert Decimal(repr(result.days[0].summary.realized_pnl)) == expected
    one = run_session(DATA, FixedAgent(TRADE), SessionOptions(), date=date)
    assert Decimal(repr(one.days[0].summary.realized_pnl)) * 50 == expected


def test_a_conflicting_multiplier_is_refused() -> None:
    with pytest.raises(SessionError, match="multiplier 20 disagrees with the instrument's 50"):
        engine_config(SessionOptions(engine=EngineConfig(multiplier=20)), with_multiplier(50.0))
    assert engine_config(SessionOptions(), with_multiplier(50.0)).multiplier == 50.0

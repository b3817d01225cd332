"""The baseline agent sizes in the instrument's units (contract multiplier, minimum lot) and
keeps its stop and target outside the spread."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel import lang
from kestrel.agents.baseline import BaselineAgent, BaselineConfig
from kestrel.data import load
from kestrel.engine.config import EngineConfig
from kestrel.engine.ledger import Filled, OrderPlaced
from kestrel.market import Instrument, MarketData
from kestrel.lang import ast
from kestrel.session.protocol import AuthorRequest, Supersede
from kestrel.session.runner import SessionOptions, run_session, session_days

OANDA = "fx_quote_ticks/lean_oanda_eurusd_quote_ticks_20140501_20140515.parquet"
CME_6E = "bars_1min/nautilus_cme_6EH4_1min_bars_20240101_20240131.csv"


def briefing(last: str, spread: str, atr: str) -> str:
    return (
        "CLOCK X #0 OPEN cutoff 09:25:00 session 2024-04-15 09:30-16:00 America/New_York\n"
        f"bid {last} ask {last} spr {spread} last {last} sz 1\natr {atr} rv 10.0%\n"
    )


def buy_of(text: str) -> tuple[ast.Plan, ast.Order]:
    node = lang.parse(text)
    assert isinstance(node, ast.Plan), text
    order = node.rules[0].actions[0]
    assert isinstance(order, ast.Order)
    return node, order


def six_e() -> Instrument:
    return Instrument(symbol="6E", tick_size=0.00005, multiplier=125_000)


def test_futures_are_sized_in_contracts() -> None:
    # stop 2 x 0.00020 = 0.00040 (the spread floor 2 x 3 x 0.00005 = 0.00030 does not bind);
    # one contract risks 0.00040 x 125,000 = 50, so 0.5 x 400 = 200 buys 4 contracts
    plan, buy = buy_of(BaselineAgent().write(briefing("1.10450", "0.00005", "0.00020"), six_e()))
    assert buy.qty == 4 and plan.risk.maxpos == 4
    assert buy.stop == ast.Offset("abs", -0.0004) and buy.target == ast.Offset("abs", 0.0006)
    # the runtime's request carries the instrument; the agent's own is the fallback
    request = AuthorRequest("OPEN", 0, briefing("1.10450", "0.00005", "0.00020"), instrument=six_e())
    assert buy_of(BaselineAgent().author(request).text)[1].qty == 4
    fallback = AuthorRequest("OPEN", 0, briefing("1.10450", "0.00005", "0.00020"))
    assert buy_of(BaselineAgent(instrument=six_e()).author(fallback).text)[1].qty == 4
    # without an instrument it is one unit per price point: 200 / 0.0004 = 500,000 units
    assert buy_of(BaselineAgent().author(fallback).text)[1].qty == 500_000


def test_sizes_round_down_to_whole_lots() -> None:
    board = Instrument(symbol="X", tick_size=0.01, min_qty=100)
    # 200 / 0.78 = 256.4 units -> 2 lots of 100
    _, buy = buy_of(BaselineAgent().write(briefing("188.71", "0.01", "0.39"), board))
    assert buy.qty == 200
    huge = Instrument(symbol="X", tick_size=0.01, min_qty=1000)
    assert BaselineAgent().write(briefing("188.71", "0.01", "0.39"), huge) == (
        'STANDDOWN "a single lot of 1000 risks 780 at the stop, more than the per-trade budget 200"'
    )


def test_stop_and_target_sit_outside_the_spread_and_size_from_that_distance() -> None:
    # ATR 0.00008 would put the stop 0.00016 from the entry, inside a 0.00020 spread; the plan
    # may enter at up to 3 x 0.00020 = 0.00060, and both brackets sit 2 x that beyond the entry
    plan, buy = buy_of(BaselineAgent().write(briefing("1.37155", "0.00020", "0.00008")))
    assert "spread <= 0.0006 " in lang.format(plan)
    assert buy.stop == ast.Offset("abs", -0.0012) and buy.target == ast.Offset("abs", 0.0012)
    assert buy.qty == 166_666  # 200 / 0.0012 = 166,666.7: sized from the wider stop
    sell = plan.rules[1].actions[0]
    assert isinstance(sell, ast.Order)
    assert sell.stop == ast.Offset("abs", 0.0012) and sell.target == ast.Offset("abs", -0.0012)
    # the multiples are configurable
    cfg = BaselineConfig(max_entry_spreads=1.0, min_bracket_spreads=1.5)
    _, tight = buy_of(BaselineAgent(cfg).write(briefing("1.37155", "0.00020", "0.00008")))
    assert tight.stop == ast.Offset("abs", -0.0003)
    with pytest.raises(ValueError, match="min_bracket_spreads > 1"):
        BaselineConfig(min_bracket_spreads=1.0)


def test_no_stop_inside_the_spread_over_ten_days_of_eurusd(shared_data: Path) -> None:
    data = load(shared_data / OANDA).data
    options = SessionOptions()
    result = run_session(data, BaselineAgent(), options, days=10)
    days = session_days(data, options, None, 10)
    assert len(result.days) == 10
    entries = 0
    for day, res in zip(days, result.days, strict=True):
        events = res.ledger.events
        placed = {e.id: e for e in events if isinstance(e, OrderPlaced)}
        fills = {e.id: e for e in events if isinstance(e, Filled)}
        for stop in (e for e in placed.values() if e.role == "stop"):
            assert stop.parent is not None and stop.price is not None
            entry = fills[stop.parent]
            entries += 1
            t = day.ticks
            assert int(t.ts[entry.tick]) == entry.ts
            bid, ask = float(t.bid[entry.tick]), float(t.ask[entry.tick])
            spread = ask - bid
            if entry.side == "buy":  # a long's stop triggers on the bid: it sits a spread below it
                assert stop.price <= bid - spread + 1e-9, (res.date, entry, stop, bid, ask)
            else:  # a short's stop triggers on the ask: it sits a spread above it
                assert stop.price >= ask + spread - 1e-9, (res.date, entry, stop, bid, ask)
            stop_fill = fills.get(stop.id)
            assert stop_fill is None or stop_fill.tick > entry.tick
    assert entries >= 5  # the baseline traded on most of the ten days


def test_six_e_futures_with_a_multiplier_trade_contracts(shared_data: Path) -> None:
    raw = load(shared_data / CME_6E).data
    data = MarketData(raw.symbol, raw.tick_size, raw.ticks, raw.sessions, raw.crossed_kept,
                      Instrument(symbol=raw.symbol, tick_size=raw.tick_size, multiplier=125_000))
    # the scaled default: one contract (about 1.08 x 125,000 of notional, over 100 x maxloss)
    default = run_session(data, BaselineAgent()).days[0].outcomes[0].turn
    assert isinstance(default, Supersede) and default.plan.risk.maxpos == 1
    # an operator's maxpos of 1000 contracts: sized by risk
    result = run_session(data, BaselineAgent(), SessionOptions(engine=EngineConfig(maxpos=1000)))
    turn = result.days[0].outcomes[0].turn
    assert isinstance(turn, Supersede), turn
    _, buy = buy_of(lang.format(turn.plan))
    assert buy.stop is not None
    # contracts: one contract risks |stop| x 125,000; the trade risks at most 200
    assert 1 <= buy.qty <= 200 / (abs(buy.stop.value) * 125_000) < buy.qty + 1
    assert buy.qty < 100

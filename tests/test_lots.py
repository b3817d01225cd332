"""Quantities in lots: the checker accepts exactly the whole numbers of an instrument's lots, the
engine counts them in lots and keeps money exact, and the ledger shows them in units (checked
against independent decimal arithmetic)."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel import lang
from kestrel.engine import Engine, EngineConfig, PlanError
from kestrel.engine.book import Book
from kestrel.agents.replies import RepliesAgent
from kestrel.data.synthetic import SyntheticSpec, generate
from kestrel.engine.ledger import Carried, Filled, Mark, OrderPlaced, PositionChanged
from kestrel.engine.money import Money
from kestrel.lang import LangError
from kestrel.market import MarketData
from kestrel.market.instrument import Instrument, money_text, qty_text
from kestrel.session.options import SessionOptions
from kestrel.session.runner import run_session

from engine_cases import random_config, random_day, random_plan_text
from kestrel.engine import ticks_of
from engine_helpers import SESSION, plan, quotes

# lot sizes as decimal text, 0 to 6 decimals
lot_texts = st.builds(lambda n, d: f"{Decimal(n).scaleb(-d):f}", st.integers(1, 500), st.integers(0, 6))
qty_texts = st.builds(lambda n, d: f"{Decimal(n).scaleb(-d):f}", st.integers(1, 10**7), st.integers(0, 8))


@settings(max_examples=300, deadline=None)
@given(lot_texts, qty_texts)
def test_a_quantity_is_accepted_exactly_when_it_is_a_whole_number_of_lots(lot: str, qty: str) -> None:
    whole = Decimal(qty) % Decimal(lot) == 0  # independent: decimal arithmetic on the texts
    text = f"PLAN p WHEN last > 1: BUY {qty} MKT"
    try:
        node = lang.parse(text, lot=float(lot))
    except LangError as exc:
        assert not whole, (lot, qty, str(exc))
        d = exc.diagnostics[0]
        assert d.code == "bad-qty"
        assert d.message == (f"quantity {Decimal(qty).normalize():f} is not a whole number of lots "
                             f"(lot size {Decimal(lot).normalize():f})")
        return
    assert whole, (lot, qty)
    assert isinstance(node, lang.Plan)
    order = node.rules[0].actions[0]
    assert isinstance(order, lang.ast.Order)
    assert Decimal(repr(float(order.qty))) == Decimal(qty)  # read at its shortest form, exactly


def test_btc_takes_a_hundredth_and_names_the_lot_when_it_cannot() -> None:
    ok = lang.parse("PLAN p RISK maxpos 0.5 WHEN last > 1: BUY 0.01 MKT", lot=0.0001)
    assert lang.format(ok) == "PLAN p RISK maxpos 0.5\nWHEN last > 1: BUY 0.01 MKT\n"
    with pytest.raises(LangError) as err:
        lang.parse("PLAN p WHEN last > 1: BUY 0.00015 MKT", lot=0.0001)
    d = err.value.diagnostics[0]
    assert (d.code, d.message, d.hint) == (
        "bad-qty", "quantity 0.00015 is not a whole number of lots (lot size 0.0001)",
        "write 0.0001 or 0.0002")
    with pytest.raises(LangError) as err:
        lang.parse("PLAN p RISK maxpos 0.00005 WHEN last > 1: FLAT", lot=0.0001)
    d = err.value.diagnostics[0]
    assert (d.code, d.column, d.hint) == ("bad-risk", 20, "write maxpos 0.0001")
    # whole units by default: the equity case keeps its message and hint
    with pytest.raises(LangError) as err:
        lang.parse("PLAN p WHEN last > 1: BUY 0.01 MKT")
    assert err.value.diagnostics[0].message == "quantity 0.01 is not a whole number of lots (lot size 1)"


def test_the_engine_refuses_a_plan_off_its_lots() -> None:
    cfg = EngineConfig(lot_size=0.001, maxpos=5)
    engine = Engine(cfg, SESSION, "TEST", 0.01)
    engine.arm(plan("PLAN p WHEN last > 0: BUY 0.25 MKT", 0.001))  # 250 lots
    with pytest.raises(PlanError, match=r"0.0005 is not a whole number of lots \(lot size 0.001\)"):
        engine.arm(plan("PLAN q WHEN last > 0: BUY 0.0005 MKT", 0.0001))


def test_a_fractional_run_keeps_money_exact_and_shows_units() -> None:
    """Buy 0.0003 at 61,000.01 and 0.0002 at 61,000.02, sell 0.0005 at 61,003.37: the realized
    PnL is the cash flow, exactly: 0.0005 x 61003.37 - 0.0003 x 61000.01 - 0.0002 x 61000.02."""
    cfg = EngineConfig(lot_size=0.0001, maxpos=1)
    engine = Engine(cfg, SESSION, "BTC", 0.01)
    engine.arm(plan("PLAN p WHEN last > 0 AND pos == 0: BUY 0.0003 MKT\n"
                    "WHEN pos == 0.0003: BUY 0.0002 MKT\n"
                    "WHEN pos == 0.0005 AND bid > 61003: SELL 0.0005 MKT", 0.0001))
    # each order fires at one tick and fills at the next: 61000.01, then 61000.02, then 61003.37
    ticks = ticks_of(quotes((60999.99, 61000.00), (61000.00, 61000.01), (61000.01, 61000.02),
                            (61003.37, 61003.38), (61003.37, 61003.38), (61003.37, 61003.38)))
    ledger = engine.run(ticks, final=False)
    fills = [e for e in ledger.events if isinstance(e, Filled)]
    assert [(f.side, f.qty, f.price) for f in fills] == [
        ("buy", 0.0003, 61000.01), ("buy", 0.0002, 61000.02), ("sell", 0.0005, 61003.37)]
    want = (Decimal("0.0005") * Decimal("61003.37") - Decimal("0.0003") * Decimal("61000.01")
            - Decimal("0.0002") * Decimal("61000.02"))
    last = [e for e in ledger.events if isinstance(e, PositionChanged)][-1]
    assert last.pos == 0.0 and Decimal(repr(last.rpnl)) == want  # 0.001675, to the quantum
    assert engine.money.decimals == 6  # one tick of one lot: 0.01 x 0.0001
    assert b'"qty":0.0003' in ledger.to_jsonl()


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["0.0001", "0.001", "0.5", "1", "100"]),
       st.lists(st.tuples(st.integers(-40, 40), st.integers(9_000_000, 9_100_000)), min_size=1, max_size=12))
def test_a_round_trip_realizes_its_cash_flow_exactly(lot: str, fills: list[tuple[int, int]]) -> None:
    """Any sequence of fills (lots, price in cents), closed at the last price: the book's realized
    PnL is the decimal cash flow of the units traded, computed here with `Decimal`."""
    lot_d = Decimal(lot)
    money = Money.derive(0.01, 1.0, 0.0, 0.0, 0.0, None, float(lot))
    book = Book(money, 1.0, Fraction(lot))
    cash = Decimal(0)
    for lots, cents in fills:
        if lots == 0:
            continue
        price = Decimal(cents) / 100
        book.fill(lots, float(price))
        cash -= lots * lot_d * price
    close = Decimal(fills[-1][1]) / 100
    if book.pos:
        cash += book.pos * lot_d * close
        book.fill(-book.pos, float(close))
    assert book.pos == 0
    assert Decimal(book.rpnl_k) / money.scale == cash


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.0001, 0.01, 0.5]))
def test_random_fractional_plans_fill_whole_lots_and_sum_exactly(seed: int, lot: float) -> None:
    """Random plans and days in lots: every fill is a whole number of lots, each position event
    is the running sum of the fills (in decimal), and the final mark's equity is realized -
    fees + unrealized to the quantum."""
    rng = random.Random(seed)
    session, ticks = random_day(rng)
    cfg = random_config(rng, lot=lot)
    engine = Engine(cfg, session, "TEST", 0.01)
    engine.arm(plan(random_plan_text(rng, lot=lot), lot))
    events = engine.run(ticks).events
    pos = Decimal(0)
    scale = engine.money.scale
    for ev in events:
        if isinstance(ev, Filled):
            n = Decimal(repr(ev.qty)) / Decimal(repr(lot))
            assert n == n.to_integral_value() and n > 0
            pos += n * Decimal(repr(lot)) * (1 if ev.side == "buy" else -1)
        elif isinstance(ev, PositionChanged):
            assert Decimal(repr(float(ev.pos))) == pos
        elif isinstance(ev, Mark):
            k = [Decimal(repr(x)) * scale for x in (ev.rpnl, ev.upnl, ev.fees, ev.equity)]
            assert all(x == x.to_integral_value() for x in k)  # whole quanta
            assert k[3] == k[0] + k[1] - k[2]


def test_money_and_quantities_print_at_their_precision() -> None:
    assert money_text(-4.58) == "-4.58" and money_text(-0.004, signed=True) == "+0.00"
    assert money_text(-1234.5, "JPY") == "-1234" and money_text(0.00012345, "BTC") == "0.00012345"
    assert qty_text(0.0003, 0.0001) == "0.0003" and qty_text(1000, 1) == "1000"
    assert qty_text(1e-05, 0.00001) == "0.00001" and qty_text(2.5, 0.5) == "2.5"
    inst = Instrument(symbol="BTCUSDT", tick_size=0.01, lot_size=0.0001)
    assert inst.min_units == 0.0001
    with pytest.raises(ValueError, match="lot size must have at most 9 decimals"):
        Instrument(symbol="X", tick_size=0.01, lot_size=1e-10)
    with pytest.raises(ValueError, match=r"maxpos=0\.5 must be a whole number of lots"):
        EngineConfig(maxpos=0.5)


def _btc_like(lot: float = 0.0001) -> MarketData:
    """Two synthetic sessions of a symbol around 61,000 whose lot is `lot`."""
    md = generate(SyntheticSpec(sessions=2, start_price=61_000.0, daily_vol=0.01), 7)
    inst = Instrument(symbol=md.symbol, tick_size=md.tick_size, lot_size=lot)
    return MarketData(md.symbol, md.tick_size, md.ticks, md.sessions, md.crossed_kept, inst)


def test_a_session_checks_replies_against_the_lot_and_scales_its_default_maxpos() -> None:
    data = _btc_like()
    agent = RepliesAgent((
        "PLAN p WHEN time >= 10:00 AND pos == 0: BUY 0.00015 MKT STOP -1% TARGET +1%",
        "PLAN p WHEN time >= 10:00 AND pos == 0: BUY 0.0015 MKT STOP -1% TARGET +1%",
    ))
    res = run_session(data, agent, SessionOptions(checkpoints=()))
    cfg = res.header.engine
    assert cfg is not None and cfg.lot_size == 0.0001
    # 100,000 of notional at the first quote (about 61,000) is 16,393 lots: 16,000 at two figures
    first = data.ticks
    mid = (float(first.bid[0]) + float(first.ask[0])) / 2
    assert cfg.maxpos == float(Decimal(int(Decimal(100_000) / (Decimal(repr(mid)) * Decimal("0.0001")))
                                       // 1000 * 1000) * Decimal("0.0001"))
    repairs = [e for e in res.days[0].evidence if e.kind == "repair"]
    assert any("quantity 0.00015 is not a whole number of lots (lot size 0.0001)" in (e.error or "")
               for e in repairs), repairs
    fills = [e for e in res.days[0].ledger.events if isinstance(e, Filled)]
    assert fills and {f.qty for f in fills} == {0.0015}


def test_a_fractional_position_carries_in_lots_and_shows_in_units() -> None:
    cfg = EngineConfig(lot_size=0.0001, maxpos=1, end_of_day="carry")
    data = _btc_like()
    day1, day2 = data.sessions[0], data.sessions[1]
    first = Engine(cfg, day1, data.symbol, data.tick_size)
    first.arm(plan("PLAN p WHEN pos == 0: BUY 0.0007 MKT STOP -5%", 0.0001))
    first.run(data.ticks.between(day1.open_ns, day1.close_ns + 1))
    carry = first.carry_out()
    assert carry is not None and carry.pos == 7  # lots
    second = Engine(cfg, day2, data.symbol, data.tick_size, carry)
    assert second.pos == 0.0007 and second.account().position == 0.0007
    events = second.run(data.ticks.between(day2.open_ns, day2.close_ns + 1)).events
    assert isinstance(events[0], Carried) and events[0].pos == 0.0007
    assert [o.qty for o in events if isinstance(o, OrderPlaced)][:1] == [0.0007]  # its stop


def test_a_btc_preset_trades_in_lots_of_a_ten_thousandth(shared_data: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The BTC presets carry their lot: `BUY 0.01` on the Binance book ticker runs without
    `--lot-size` and fills 0.01 BTC (100 lots), and `--lot-size` still overrides it."""
    from kestrel.cli import main
    from kestrel.data import load

    data = shared_data / "crypto_hf/hftbacktest_binance_spot_btcusdt_bookticker_20240808T2354_20240809T0005.csv"
    assert load(data).data.instrument.lot_size == 0.0001
    plan = tmp_path / "btc.kes"
    plan.write_text("PLAN b\nWHEN pos == 0: BUY 0.01 MKT\n")
    ledger = tmp_path / "l.jsonl"
    assert main(["simulate", "--data", str(data), "--agent", f"fixed:{plan}", "--ledger", str(ledger)]) == 0
    fills = [json.loads(line) for line in ledger.read_text().splitlines() if '"event":"fill"' in line]
    assert fills and fills[0]["qty"] == 0.01
    ledger.unlink()
    main(["simulate", "--data", str(data), "--agent", f"fixed:{plan}", "--lot-size", "0.1", "--ledger", str(ledger)])
    assert "0.1" in "".join(capsys.readouterr())  # the refusal names the lot it was checked against
    assert not ledger.exists() or '"event":"fill"' not in ledger.read_text()


def test_a_universe_symbols_table_gives_fractional_lots(tmp_path: Path) -> None:
    """A universe's `--instruments` table: BTC in lots of 0.0001 takes `BUY 0.0123`, a whole
    share symbol refuses a fraction; the capture records the table and replays."""
    from kestrel.cli import main

    rows = ["date,symbol,open,high,low,close,volume"]
    for day, (b, a) in zip(("2024-03-04", "2024-03-05", "2024-03-06"), ((60000, 50), (61000, 51), (62000, 52))):
        rows += [f"{day},BTC,{b},{b + 500},{b - 500},{b + 100},10", f"{day},AAA,{a},{a + 1},{a - 1},{a},1000"]
    data = tmp_path / "u.csv"
    data.write_text("\n".join(rows) + "\n")
    table = tmp_path / "instruments.csv"
    table.write_text("symbol,lot_size\nBTC,0.0001\n")
    plans = tmp_path / "m.kes"
    plans.write_text("PLAN b ON BTC\nWHEN pos == 0: BUY 0.0123 MKT\n")
    ledger, capture = tmp_path / "l.jsonl", tmp_path / "c.json"
    assert main(["simulate", "--data", str(data), "--instruments", str(table), "--agent", f"fixed:{plans}",
                 "--days", "2", "--ledger", str(ledger), "--capture", str(capture)]) == 0
    fills = [json.loads(line) for line in ledger.read_text().splitlines() if '"event":"fill"' in line]
    assert fills and fills[0]["symbol"] == "BTC" and fills[0]["qty"] == 0.0123
    assert json.loads(capture.read_text())["universe"]["instruments"] == str(table)
    assert main(["replay", str(capture)]) == 0
    plans.write_text("PLAN a ON AAA\nWHEN pos == 0: BUY 0.5 MKT\n")
    ledger.unlink()
    assert main(["simulate", "--data", str(data), "--instruments", str(table), "--agent", f"fixed:{plans}",
                 "--days", "2", "--ledger", str(ledger)]) == 0
    assert '"event":"fill"' not in ledger.read_text()

"""Money is exact to the engine's decimal quantum: ledger fields, summary and risk checks.

Hand-computed: three round trips of 100 shares, 181.34 -> 181.11, 188.47 -> 188.16 and
187.64 -> 187.22, lose 23 + 31 + 42 = 96.00; summing the binary increments naively gives
-95.99999999999795.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kestrel.engine import Engine, EngineConfig, ticks_of
from kestrel.engine.ledger import Disarmed, Filled, Mark, PositionChanged
from kestrel.engine.book import Book
from kestrel.engine.money import Money
from kestrel.engine.orders import TickGrid, bracket_price
from kestrel.lang.ast import Offset

from engine_helpers import SESSION, S, T0, plan

THREE_TRADES = (
    "PLAN p\n"
    "WHEN time >= 09:30:01: BUY 100 MKT\n"
    "WHEN time >= 09:30:03: FLAT\n"
    "WHEN time >= 09:30:05: BUY 100 MKT\n"
    "WHEN time >= 09:30:07: FLAT\n"
    "WHEN time >= 09:30:09: BUY 100 MKT\n"
    "WHEN time >= 09:30:11: FLAT"
)
# (bid, ask) per second from the open; a rule firing at tick k fills at tick k+1
QUOTES = [(181.33, 181.34)] * 3 + [(181.11, 181.12)] * 2 + [(188.46, 188.47)] * 2 \
    + [(188.16, 188.17)] * 2 + [(187.63, 187.64)] * 2 + [(187.22, 187.23)] * 2


def _rows() -> list[tuple[int, float, float]]:
    return [(T0 + k * S, b, a) for k, (b, a) in enumerate(QUOTES)]


def _run(text: str, path: str, cfg: EngineConfig | None = None) -> Engine:
    e = Engine(cfg or EngineConfig(), SESSION, "TEST", 0.01)
    e.arm(plan(text))
    e.run(ticks_of(_rows()), path=path)
    return e


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_realized_pnl_is_the_decimal_sum_not_the_binary_one(path: str) -> None:
    trips = ((181.34, 181.11), (188.47, 188.16), (187.64, 187.22))
    exact = sum(100 * (Decimal(repr(sell)) - Decimal(repr(buy))) for buy, sell in trips)
    naive = 0.0
    for buy, sell in trips:
        naive += 100 * (sell - buy)
    e = _run(THREE_TRADES, path)
    assert exact == Decimal(-96)
    assert Decimal(repr(e.rpnl)) == exact
    assert e.rpnl != naive  # the engine does not accumulate binary increments


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_three_losing_trades_sum_to_exactly_minus_96(path: str) -> None:
    e = _run(THREE_TRADES, path)
    assert e.last_path == path
    fills = [(f.tick, f.side, f.price) for f in e.ledger.events if isinstance(f, Filled)]
    assert fills == [(2, "buy", 181.34), (4, "sell", 181.11), (6, "buy", 188.47),
                     (8, "sell", 188.16), (10, "buy", 187.64), (12, "sell", 187.22)]
    rpnls = [p.rpnl for p in e.ledger.events if isinstance(p, PositionChanged)]
    assert rpnls == [0.0, -23.0, -23.0, -54.0, -54.0, -96.0]
    marks = [(m.upnl, m.equity) for m in e.ledger.events if isinstance(m, Mark)]
    # each entry is marked at the bid one cent under its fill: upnl -1.00
    assert marks == [(-1.0, -1.0), (0.0, -23.0), (-1.0, -24.0), (0.0, -54.0), (-1.0, -55.0),
                     (0.0, -96.0), (0.0, -96.0)]
    s = e.ledger.summary()
    assert (s.trades, s.wins, s.realized_pnl, s.net_pnl, s.max_drawdown, s.fees) == (
        3, 0, -96.0, -96.0, 96.0, 0.0)
    assert e.rpnl == -96.0 and e.account().rpnl == -96.0
    assert b"95.99" not in e.ledger.to_jsonl() and b"96.00000" not in e.ledger.to_jsonl()


def test_both_paths_give_the_same_bytes() -> None:
    assert _run(THREE_TRADES, "reference").ledger.to_jsonl() == \
        _run(THREE_TRADES, "fast").ledger.to_jsonl()


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_maxloss_sees_the_exact_loss(path: str) -> None:
    # tick 11: long 100 @187.64 marked at the bid 187.22 (upnl -42.00) after -54.00 realized:
    # -96.00 <= -96 breaches; the noisy -54 + 100*(187.22-187.64) = -95.99999999999795 would not
    e = _run(THREE_TRADES.replace("PLAN p", "PLAN p RISK maxloss 96"), path)
    assert [(d.tick, d.reason) for d in e.ledger.events if isinstance(d, Disarmed)][0] == (
        11, "maxloss 96 breached")
    e = _run(THREE_TRADES.replace("PLAN p", "PLAN p RISK maxloss 96.01"), path)
    assert [d.reason for d in e.ledger.events if isinstance(d, Disarmed)] == ["end of data"]


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_fees_are_exact_to_their_own_precision(path: str) -> None:
    # 0.005 per share: the quantum becomes 0.001; 6 fills of 100 shares = 6 x 0.50 plus
    # 1.25 per order = 6 x 1.75 = 10.50 exactly
    cfg = EngineConfig(fee_per_unit=0.005, fee_per_order=1.25)
    e = _run(THREE_TRADES, path, cfg)
    fees = [f.fee for f in e.ledger.events if isinstance(f, Filled)]
    assert fees == [1.75] * 6
    s = e.ledger.summary()
    assert (s.realized_pnl, s.fees, s.net_pnl) == (-96.0, 10.5, -106.5)
    assert e.ledger.events[-1] == Mark(12, T0 + 12 * S, 0, -96.0, 0.0, 10.5, -106.5)


def test_a_fee_of_a_tenth_of_a_cent_accumulates_exactly() -> None:
    # 0.015 per fill of 3 shares at 0.005 (quantum 0.001); three such fees are 0.045
    e = Engine(EngineConfig(fee_per_unit=0.005), SESSION, "TEST", 0.01)
    e.arm(plan("PLAN p\nWHEN time >= 09:30:01: BUY 3 MKT\nWHEN time >= 09:30:03: SELL 3 MKT\n"
               "WHEN time >= 09:30:05: BUY 3 MKT"))
    e.run(ticks_of(_rows()[:7]), path="reference", final=False)
    assert [f.fee for f in e.ledger.events if isinstance(f, Filled)] == [0.015] * 3
    assert e.fees == 0.045 and e.account().fees == 0.045


@pytest.mark.parametrize(("tick", "mult", "slip", "fu", "fo", "decimals"), [
    (0.01, 1.0, 0.0, 0.0, 0.0, 2),        # equities: cents
    (0.25, 50.0, 1.0, 2.25, 0.0, 2),      # ES: 12.50 a tick, fees in cents
    (0.00001, 1.0, 0.0, 0.0, 0.0, 5),     # FX quoted to 1e-5, one unit
    (0.0001, 100000.0, 0.0, 0.0, 0.0, 2),  # FX in 100k lots: 10.00 a pip
    (0.01, 1.0, 0.5, 0.0, 0.0, 3),        # half-tick slippage: 0.005 a unit
    (0.01, 1.0, 0.0, 0.0035, 1.0, 4),     # a fee of 0.35 cents a share
])
def test_quantum_is_derived_from_tick_multiplier_slippage_and_fees(
        tick: float, mult: float, slip: float, fu: float, fo: float, decimals: int) -> None:
    assert Money.derive(tick, mult, slip, fu, fo).decimals == decimals


def test_quantum_override_and_validation() -> None:
    e = Engine(EngineConfig(money_decimals=0), SESSION, "TEST", 0.01)
    assert e.money.decimals == 0
    with pytest.raises(ValueError, match="money_decimals"):
        EngineConfig(money_decimals=10)
    with pytest.raises(ValueError, match="money_decimals"):
        EngineConfig(money_decimals=-1)


def test_whole_dollar_quantum_rounds_each_increment_half_to_even() -> None:
    # money_decimals=0: -23, -31, -42 are whole already; a 1-cent mark rounds to 0 (-1.00 -> -1)
    e = _run(THREE_TRADES, "reference", EngineConfig(money_decimals=0))
    assert e.ledger.summary().realized_pnl == -96.0
    m = Money(0)
    assert (m.quanta(0.5), m.quanta(1.5), m.quanta(-2.5)) == (0, 2, -2)


def test_rules_read_the_exact_pnl() -> None:
    # at tick 11 pnl = -54.00 realized + -42.00 unrealized = -96.00 exactly: the rule fires
    text = THREE_TRADES.replace("WHEN time >= 09:30:11: FLAT", "WHEN pnl <= -96: FLAT")
    e = _run(text, "reference")
    fills = [(f.tick, f.price) for f in e.ledger.events if isinstance(f, Filled)]
    assert fills[-1] == (12, 187.22)


@given(st.lists(st.tuples(st.integers(-300, 300).filter(bool),
                          st.integers(1, 2_000_000).map(lambda k: k / 100),
                          st.integers(1, 2_000_000).map(lambda k: k / 1000)), max_size=40),
       st.sampled_from([1.0, 50.0, 0.1, 125000.0]), st.integers(2, 6))
def test_book_keeps_the_exact_average_cost_arithmetic(
        fills: list[tuple[int, float, float]], multiplier: float, decimals: int) -> None:
    """The book's integer-pair arithmetic gives what `Fraction` arithmetic on the prices'
    decimal forms gives (average cost: a close takes its share of the cost; a reversal
    opens at the fill price): position, cost, realized PnL, average and marks."""
    book = Book(Money(decimals), multiplier)
    mult = Fraction(Decimal(repr(multiplier)))
    pos, cost, realized = 0, Fraction(0), Fraction(0)
    touches: list[float] = []
    for q, price, touch in fills:
        p = Fraction(Decimal(repr(price)))
        if pos == 0 or (pos > 0) == (q > 0):
            cost += q * p
        else:
            closed = min(abs(q), abs(pos))
            share = cost * closed / abs(pos)
            realized += (closed * p if pos > 0 else -closed * p) - share
            cost -= share
            if pos + q == 0:
                cost = Fraction(0)
            elif (pos + q > 0) != (pos > 0):
                cost = (pos + q) * p
        pos += q
        opened = book.fill(q, price)
        assert opened == (abs(q) if pos - q == 0 or (pos - q > 0) == (q > 0)
                          else max(0, abs(q) - abs(pos - q)))
        assert (book.pos, book.cost, book.realized) == (pos, cost, realized)
        assert book.avg == (float(cost / pos) if pos else 0.0)
        assert book.rpnl_k == round(realized * mult * 10**decimals)
        touches.append(touch)  # every touch so far, marked again (a cached mark must follow the fill)
        for x in touches[-5:] + touches[-5:]:
            t = Fraction(Decimal(repr(x)))
            assert book.upnl_k(x, x) == (round((pos * t - cost) * mult * 10**decimals) if pos else 0)


@given(st.integers(1, 10**9).map(lambda k: k / 10**4), st.sampled_from(["pct", "abs", "at"]),
       st.integers(-5000, 5000).map(lambda k: k / 100), st.sampled_from([0.01, 0.25, 0.00001, 0.5, 0.03]))
def test_bracket_levels_are_the_decimal_arithmetic_on_the_grid(
        entry: float, mode: str, value: float, tick: float) -> None:
    """A STOP/TARGET level computed in integers is the exact decimal level (entry x (1 +
    v/100), entry + v, or v) rounded half to even onto the grid, as `Fraction` computes it."""
    grid = TickGrid(tick)
    e, v = Fraction(Decimal(repr(entry))), Fraction(Decimal(repr(value)))
    x = e * (1 + v / 100) if mode == "pct" else e + v if mode == "abs" else v
    assert bracket_price(entry, Offset(mode, value), grid) == grid.snap_exact(x)  # type: ignore[arg-type]
    k = round(x / Fraction(Decimal(repr(tick))))
    assert grid.snap_exact(x) == (k / grid.inv if grid.inv else float(k * Fraction(Decimal(repr(tick)))))

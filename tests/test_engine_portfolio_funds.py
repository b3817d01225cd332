"""The account's integer money against plain `Fraction` arithmetic, and the ledger's encoded
store against encoding the events at the end."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.engine.ledger import Filled, PositionChanged
from kestrel.engine.portfolio.funds import Funds
from kestrel.engine.portfolio.ledger import AccountMark, PortfolioEvent, PortfolioLedger
from kestrel.market.portfolio import PortfolioBounds

SYMS = ("AAA", "BBB")


def _dec(x: float) -> Fraction:
    return Fraction(Decimal(repr(x)))


prices = st.integers(1, 10**7).flatmap(lambda n: st.integers(0, 6).map(lambda d: round(n / 10**d, d)))
fills = st.lists(st.tuples(st.sampled_from(SYMS), st.sampled_from(("buy", "sell")), st.integers(1, 500), prices,
                           st.sampled_from((0.0, 0.01, 0.095, 1.0, 0.0003))), min_size=1, max_size=30)
credits = st.lists(st.tuples(st.integers(-10**6, 10**6), st.sampled_from((1, 3, 7, 100, 1000))), max_size=4)


@settings(max_examples=200, deadline=None)
@given(fills, credits, st.sampled_from((1.0, 0.5, 100.0)), st.lists(st.tuples(prices, prices), min_size=2, max_size=2))
def test_cash_equity_gross_net_are_the_exact_rational_sums(fs: list[tuple[str, str, int, float, float]],
                                                           cs: list[tuple[int, int]], mult: float,
                                                           marks: list[tuple[float, float]]) -> None:
    """Whatever decimals the prices, fees and credits need (the common denominator grows and
    rescales every amount), the account equals the sums done in `Fraction`s."""
    f = Funds(SYMS, {s: _dec(mult) for s in SYMS}, PortfolioBounds(capital=100_000.0, max_gross=3.0), 2)
    cash = Fraction(100_000)
    pos = {s: 0 for s in SYMS}
    touch = {s: (min(b, a), max(b, a)) for s, (b, a) in zip(SYMS, marks)}
    for k, (s, side, q, p, fee) in enumerate(fs):
        signed = q if side == "buy" else -q
        pos[s] += signed
        cash -= signed * _dec(p) * _dec(mult) + _dec(fee)
        f.consume(s, Filled(k, 0, k + 1, side, q, p, fee), (0.0, 0.0))  # type: ignore[arg-type]
        f.consume(s, PositionChanged(k, 0, pos[s], None, 0.0), (0.0, 0.0))
        equity, gross, net, n_open = f.figures(lambda x: touch[x], set(SYMS))
        values = [pos[x] * _dec(touch[x][0] if pos[x] > 0 else touch[x][1]) * _dec(mult) for x in SYMS if pos[x]]
        assert f.cash == cash
        assert (equity, gross, net, n_open) == (cash + sum(values), sum(abs(v) for v in values), sum(values),
                                                len(values))
        assert f.shown(f.cash_n) == float(round(cash * 100)) / 100
    for n, d in cs:
        f.credit(Fraction(n, d))
        cash += Fraction(n, d)
        assert f.cash == cash
    copy = f.copy()
    f.credit(Fraction(1, 3))
    assert copy.cash == cash and f.cash == cash + Fraction(1, 3)


def test_the_ledger_store_gives_the_bytes_of_its_events_and_truncates_to_a_prefix() -> None:
    events: list[tuple[str | None, PortfolioEvent]] = [("AAA", Filled(1, 10, 1, "buy", 5, 100.01, 0.5)), (None, AccountMark(3, 10, 1.5, 2.0, 0.5, 0.5, 1)),
              ("BBB", PositionChanged(2, 11, -3, 42.5, 0.0))]
    ledger = PortfolioLedger()
    for s, e in events:
        ledger.append(s, e)
    data = ledger.to_jsonl()
    assert data.splitlines()[0] == b'{"symbol":"AAA","event":"fill","tick":1,"ts":10,"id":1,"side":"buy","qty":5,' \
                                   b'"price":100.01,"fee":0.5}'
    assert data.splitlines()[1] == b'{"event":"account","tick":3,"ts":10,"cash":1.5,"equity":2.0,"gross":0.5,' \
                                   b'"net":0.5,"open":1}'
    assert ledger.entries == events and len(ledger) == 3
    assert PortfolioLedger.from_jsonl(data).to_jsonl() == data
    ledger.truncate(1)
    assert ledger.to_jsonl() == data.splitlines(keepends=True)[0]
    ledger.append(*events[1])
    ledger.append(*events[2])
    assert ledger.to_jsonl() == data
    ledger.truncate(0)
    assert ledger.to_jsonl() == b"" and ledger.entries == []

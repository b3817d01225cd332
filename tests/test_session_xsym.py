"""A portfolio turn's plans are checked against the universe: a cross-symbol read of a member
is a plan, one of a symbol outside the universe the error naming the members."""

from __future__ import annotations

from kestrel.lang import ast
from kestrel.session.portfolio import PortfolioTurn, read_turn

SYMBOLS = ("AAPL", "MSFT", "SPY")


def test_a_turn_reading_a_member_holds_the_read() -> None:
    turn = read_turn("PLAN a ON AAPL\nWHEN SPY.chg(1d) > 0.5% AND chg(1d) < SPY.chg(1d): BUY 10 MKT", SYMBOLS)
    assert isinstance(turn, PortfolioTurn)
    cond = turn.plans[0].rules[0].cond
    assert isinstance(cond, ast.And)
    assert any(isinstance(x, ast.SymbolRead) and x.symbol == "SPY" for x in ast.walk(cond))


def test_a_turn_reading_a_symbol_outside_the_universe_is_refused_naming_the_members() -> None:
    out = read_turn("PLAN a ON AAPL\nWHEN QQQ.last > 400: BUY 10 MKT", SYMBOLS)
    assert isinstance(out, str)
    assert "QQQ is not in the universe (AAPL, MSFT, SPY)" in out


def test_a_turn_comparing_two_symbols_prices_is_refused_with_the_fix() -> None:
    out = read_turn("PLAN a ON AAPL\nWHEN MSFT.last > last: BUY 10 MKT", SYMBOLS)
    assert isinstance(out, str)
    assert "cannot compare a Price of MSFT and a Price of AAPL" in out
    assert "MSFT.chg(1d)" in out

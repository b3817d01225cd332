"""Cross-symbol reads in the language: `SYMBOL.series` and `SYMBOL.function(...)` parse to
`SymbolRead`, format back to the same AST, and are typed: a Price of another symbol never meets
the plan's own prices, the symbol must be a member of the session's universe, and another
symbol offers its market series and functions only."""

from __future__ import annotations

import pytest

from kestrel.lang import ast, format, parse
from kestrel.lang.checker import check
from kestrel.lang.errors import LangError

UNIVERSE = ("AAPL", "BRK.B", "BTC_USD", "SPY")


def _plan(cond: str, action: str = "BUY 1 MKT", symbols: tuple[str, ...] | None = UNIVERSE) -> ast.Plan:
    p = parse(f"PLAN p ON AAPL\nWHEN {cond}: {action}", symbols=symbols)
    assert isinstance(p, ast.Plan)
    return p


def _cond(cond: str) -> ast.Expr:
    return _plan(cond).rules[0].cond


def _error(cond: str, action: str = "BUY 1 MKT", symbols: tuple[str, ...] | None = UNIVERSE) -> str:
    with pytest.raises(LangError) as info:
        _plan(cond, action, symbols)
    return str(info.value)


def test_a_series_and_a_call_of_another_symbol_parse_to_symbol_reads() -> None:
    assert _cond("SPY.last > 500") == ast.Compare(">", ast.SymbolRead("SPY", ast.Series("last")), ast.Number(500.0))
    assert _cond("SPY.chg(1d) > 0.5%") == ast.Compare(
        ">", ast.SymbolRead("SPY", ast.Call("chg", (ast.Duration(1, "d"),))), ast.Percent(0.5))


@pytest.mark.parametrize("text,symbol,read", [
    ("BRK.B.last > 1", "BRK.B", ast.Series("last")),  # the symbol runs to the last dot before the name
    ("BRK.B.sma(mid,20) > 1", "BRK.B", ast.Call("sma", (ast.Series("mid"), ast.Number(20.0)))),
    ("BTC_USD.mid > 1", "BTC_USD", ast.Series("mid")),
])
def test_a_symbol_with_dots_reads_up_to_the_last_dot(text: str, symbol: str, read: ast.Expr) -> None:
    cond = _cond(text)
    assert isinstance(cond, ast.Compare)
    assert cond.left == ast.SymbolRead(symbol, read)  # type: ignore[arg-type]


@pytest.mark.parametrize("cond", [
    "SPY.last CROSSES ABOVE 500",
    "SPY.chg(1d) > 0.5% AND chg(1d) < SPY.chg(1d)",
    "rsi(14) < SPY.rsi(14) - 10",
    "last / SPY.last > 0.4",
    "BRK.B.sma(mid,20) > BRK.B.vwap * 1.01",
    "NOT SPY.zscore(last,20) > 2 OR -SPY.chg(5m) > 1%",
    "abs(SPY.chg(1d)) < 2% AND max(SPY.last, SPY.vwap) > 400",
    "AAPL.last > vwap",  # the plan's own symbol: its plain price
])
def test_cross_symbol_conditions_check_and_format_back_to_the_same_ast(cond: str) -> None:
    p = _plan(cond)
    text = format(p)
    assert parse(text, symbols=UNIVERSE) == p
    assert check(p, symbols=UNIVERSE) == []
    assert check(p) == []  # no universe named: any symbol may be read (the engine checks at arming)


def test_the_formatter_writes_symbol_dot_read() -> None:
    assert "WHEN BRK.B.sma(mid,20) > BRK.B.last/4" in format(_plan("BRK.B.sma(mid, 20) > BRK.B.last / 4"))


@pytest.mark.parametrize("cond,action,message,hint", [
    ("SPY.last > last", "BUY 1 MKT", "cannot compare a Price of SPY and a Price of AAPL", "SPY.chg(1d)"),
    ("SPY.last CROSSES ABOVE vwap", "BUY 1 MKT", "cannot compare a Price of SPY and a Price of AAPL", "ratio"),
    ("SPY.last - last > 0", "BUY 1 MKT", "cannot add or subtract a Price of SPY and a Price of AAPL", "ratio"),
    ("BRK.B.last > SPY.last", "BUY 1 MKT", "a Price of BRK.B and a Price of SPY", "compare each"),
    ("last > 1", "BUY 1 LMT SPY.bid", "an order price must be a Price of AAPL, not of SPY", "LMT bid"),
    ("QQQ.last > 1", "BUY 1 MKT", "QQQ is not in the universe (AAPL, BRK.B, BTC_USD, SPY)", "AAPL.chg(1d)"),
    ("SPYY.last > 1", "BUY 1 MKT", "SPYY is not in the universe", "SPY"),
    ("SPY.pos > 1", "BUY 1 MKT", "`SPY.pos` is not a market series of SPY", "SPY.chg(1d)"),
    ("SPY.time > 10:00", "BUY 1 MKT", "`SPY.time` is not a market series of SPY", "vwap"),
    ("SPY.abs(1) > 1", "BUY 1 MKT", "`abs` is an operation, not a series of SPY", "abs(SPY.chg(1d))"),
    ("SPY.sma(BRK.B.last,5) > 1", "BUY 1 MKT", "the arguments of `SPY.sma` are SPY's own", "SPY.sma(mid, 20)"),
    ("SPY.lst > 1", "BUY 1 MKT", "unknown series `lst`", "last"),
    ("max(last, SPY.last) > 1", "BUY 1 MKT", "cannot take max of a Price of AAPL and a Price of SPY", "ratio"),
])
def test_a_cross_symbol_mistake_is_one_error_with_its_fix(cond: str, action: str, message: str, hint: str) -> None:
    text = _error(cond, action)
    assert message in text
    assert hint in text.split("hint:")[1]
    assert text.startswith("1 error")


def test_a_single_symbol_session_reads_no_other_symbol_but_its_own_plainly() -> None:
    text = _error("SPY.last > 1", symbols=("AAPL",))
    assert "this session trades AAPL alone; SPY is not in it" in text
    assert "without a prefix" in text
    own = parse("PLAN p\nWHEN AAPL.last > vwap: BUY 1 MKT", symbols=("AAPL",))
    assert isinstance(own, ast.Plan)


def test_a_number_of_another_symbol_compares_with_the_plans_own_numbers() -> None:
    assert check(_plan("rsi(14) > SPY.rsi(14) AND chg(1d) - SPY.chg(1d) > 1%"), symbols=UNIVERSE) == []


def test_a_lowercase_name_after_a_dot_is_the_only_read_form() -> None:
    """`SPY.LAST` reads no series (names are case-sensitive, series lower case); `X-SPY.last`
    is X minus SPY's last (`-` is an operator, never part of a read's symbol)."""
    with pytest.raises(LangError):
        parse("PLAN p ON AAPL\nWHEN SPY.LAST > 1: BUY 1 MKT", symbols=UNIVERSE)
    with pytest.raises(LangError, match="unknown series `X`"):
        parse("PLAN p ON AAPL\nWHEN X-SPY.last > 1: BUY 1 MKT", symbols=UNIVERSE)


def test_on_a_dotted_symbol_is_still_a_symbol() -> None:
    p = parse("PLAN p ON BRK.B\nWHEN SPY.last > 1: BUY 1 MKT", symbols=UNIVERSE)
    assert isinstance(p, ast.Plan) and p.instrument == "BRK.B"
    s = parse("STANDDOWN ON BRK.B", symbols=UNIVERSE)
    assert isinstance(s, ast.StandDown) and s.instrument == "BRK.B"

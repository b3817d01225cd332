"""Sizing by money (`BUY $5000`) and by a share of equity (`BUY 10%EQ`), and `STANDDOWN ON
SYMBOL`: the AST they build, the canonical form's round trip, the checker's errors and the
hint for a `$` price."""

from __future__ import annotations

import pytest

from kestrel.lang import LangError, Order, Plan, Size, StandDown, format, parse


def _order(text: str) -> Order:
    plan = parse(f"PLAN a\nWHEN pos == 0: {text}")
    assert isinstance(plan, Plan)
    action = plan.rules[0].actions[0]
    assert isinstance(action, Order)
    return action


@pytest.mark.parametrize("text,size,canonical", [
    ("BUY $5000 MKT", Size("cash", 5000.0), "BUY $5000 MKT"),
    ("buy $2500.50 lmt bid STOP -1%", Size("cash", 2500.5), "BUY $2500.5 LMT bid STOP -1%"),
    ("BUY 10%EQ MKT", Size("equity", 10.0), "BUY 10%EQ MKT"),
    ("SELL 2.5% eq LMT ask", Size("equity", 2.5), "SELL 2.5%EQ LMT ask"),
])
def test_sizes_parse_to_the_ast_and_round_trip(text: str, size: Size, canonical: str) -> None:
    order = _order(text)
    assert order.size == size and order.qty == 0
    out = format(parse(f"PLAN a\nWHEN pos == 0: {text}"))
    assert out == f"PLAN a\nWHEN pos == 0: {canonical}\n"
    assert parse(out) == parse(f"PLAN a\nWHEN pos == 0: {text}")


@pytest.mark.parametrize("text,message", [
    ("BUY $0 MKT", "a size must be a positive amount, got 0"),
    ("BUY 150%EQ MKT", "a share of equity is at most 100%, got 150%"),
])
def test_bad_sizes_are_errors(text: str, message: str) -> None:
    with pytest.raises(LangError) as err:
        parse(f"PLAN a\nWHEN pos == 0: {text}")
    assert message in str(err.value)


def test_a_dollar_price_is_an_error_with_the_hint() -> None:
    with pytest.raises(LangError) as err:
        parse("PLAN a\nWHEN pos == 0: BUY 10 LMT $182.40")
    assert "hint: prices are plain numbers: write 182.40, not $182.40 ($5000 sizes an order: BUY $5000 MKT)" in str(err.value)


def test_standdown_on_a_symbol() -> None:
    node = parse('STANDDOWN ON AAPL "earnings"')
    assert node == StandDown("earnings", "AAPL")
    assert format(node) == 'STANDDOWN ON AAPL "earnings"\n'
    assert parse("STANDDOWN ON BRK.B") == StandDown(None, "BRK.B")
    assert parse('STANDDOWN "x"') == StandDown("x")

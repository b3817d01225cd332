"""Bounds: every limit is enforced, configurable, and over a bound is an error, never a
crash or unbounded work."""

from __future__ import annotations

import pytest

from kestrel.lang import (
    And,
    Compare,
    Diagnostic,
    Flat,
    LangError,
    Limits,
    Neg,
    Number,
    Plan,
    Rule,
    Series,
    check,
    format,
    parse,
)
from kestrel.lang.ast import Expr


def codes(text: str, limits: Limits | None = None) -> list[str]:
    with pytest.raises(LangError) as exc:
        parse(text, limits)
    return [d.code for d in exc.value.diagnostics]


def first(text: str, limits: Limits | None = None) -> Diagnostic:
    with pytest.raises(LangError) as exc:
        parse(text, limits)
    return exc.value.diagnostics[0]


def test_document_size_is_checked_before_parsing() -> None:
    lim = Limits(max_document_chars=100)
    d = first("@" * 101, lim)  # would be a syntax error if it were parsed
    assert d.code == "too-large" and d.message == "document is 101 characters; the limit is 100"
    assert Limits().max_document_chars == 20_000
    assert codes("PASS " * 5000) == ["too-large"]


def test_statement_rule_and_action_counts() -> None:
    assert codes("PASS\n" * 17) == ["too-many"]
    parse("PASS\n" * 16)
    rules = "".join(f"WHEN last > {i}: FLAT\n" for i in range(33))
    assert codes("PLAN a\n" + rules) == ["too-many"]
    parse("PLAN a\n" + rules, Limits(max_rules=40))
    assert codes("PLAN a WHEN last > 1: FLAT; FLAT; FLAT; FLAT; CANCEL") == ["too-many"]


def test_expression_depth_in_text_and_in_code() -> None:
    deep = "(" * 30 + "last > 1" + ")" * 30
    parse(f"PLAN a WHEN {deep}: FLAT")  # parentheses alone do not nest the AST
    d = first("PLAN a WHEN " + "last > 1 AND (" * 30 + "last > 1" + ")" * 30 + ": FLAT")
    # the 23rd AND sits at depth 23, its comparison at 24 and `last` at 25: the first node too deep
    assert (d.code, d.line, d.column) == ("too-deep", 1, 13 + 14 * 22)
    nested = "NOT " * 30 + "last > 1"
    assert codes(f"PLAN a WHEN {nested}: FLAT") == ["too-deep"]
    # a huge nesting built in code is reported, not recursed into
    e: Expr = Series("last")
    for _ in range(5000):
        e = Neg(e)
    plan = Plan("p", (Rule(Compare(">", e, Number(0)), (Flat(),)),))
    assert [d.code for d in check(plan)] == ["too-deep"]
    with pytest.raises(LangError):
        format(Plan("p", (Rule(Compare(">", _deep(100_000), Number(0)), (Flat(),)),)))


def _deep(n: int) -> Expr:
    e: Expr = Series("last")
    for _ in range(n):
        e = Neg(e)
    return e


def test_deep_text_nesting_never_crashes() -> None:
    text = "PLAN a WHEN " + "-" * 9000 + "last > 1: FLAT"
    assert codes(text) == ["too-deep"]
    assert codes("PLAN a WHEN " + "(" * 9000 + "last > 1: FLAT")[0] == "syntax"


def test_identifier_and_string_length() -> None:
    assert codes(f"PLAN {'a' * 33} WHEN last > 1: FLAT") == ["too-long"]
    parse(f"PLAN {'a' * 32} WHEN last > 1: FLAT")
    assert codes(f'STANDDOWN "{"x" * 201}"') == ["too-long"]
    assert codes('STANDDOWN "x"', Limits(max_string_chars=0)) == ["too-long"]


def test_number_range_and_huge_literals() -> None:
    assert codes("PLAN a WHEN last > 10000000000: FLAT") == ["out-of-range"]
    assert codes("PLAN a WHEN last > " + "9" * 5000 + ": FLAT") == ["out-of-range"]
    assert codes("PLAN a WHEN last > 1: BUY " + "9" * 5000 + " MKT") == ["out-of-range"]
    assert codes("PLAN a WHEN last > high(" + "9" * 5000 + "m): FLAT") == ["window-too-long"]
    assert codes("PLAN a WHEN last > 1: FLAT x" + "9" * 5000) == ["bad-repeat"]


def test_repeat_count_window_count_panes_budget() -> None:
    assert codes("PLAN a WHEN last > 1: FLAT x101") == ["bad-repeat"]
    assert codes("PLAN a WHEN last > 1: FLAT x0") == ["bad-repeat"]
    assert codes("PLAN a WHEN last > sma(last, 10001): FLAT") == ["window-too-long"]
    assert codes("VIEW v: " + ", ".join(["quote"] * 17)) == ["too-many"]
    assert codes("VIEW v: quote BUDGET 0") == ["bad-budget"]
    assert codes("VIEW v: quote BUDGET 20001") == ["bad-budget"]
    assert codes("VIEW v: bars(1, 2, 3, 4, 5, 6, 7, 8, 9)") == ["too-many"]


def test_default_limits_are_documented_values() -> None:
    lim = Limits()
    assert (lim.max_statements, lim.max_rules, lim.max_actions, lim.max_expr_depth) == (16, 32, 4, 24)
    assert (lim.max_identifier_chars, lim.max_string_chars, lim.max_number) == (32, 200, 1e9)
    assert lim.max_window_seconds == 5 * 86_400


def test_overflowing_literals_everywhere_are_range_errors() -> None:
    big = "9" * 400
    assert codes(f"PLAN a WHEN last > 1: BUY {big}.5 MKT") == ["out-of-range"]
    assert codes(f"PLAN a RISK maxpos {big}.5 WHEN last > 1: FLAT") == ["out-of-range"]
    assert codes(f"VIEW v: quote BUDGET {big}.5") == ["bad-budget"]
    assert codes(f"PLAN a WHEN last > {big}.5: FLAT") == ["out-of-range"]


def test_one_too_deep_report_per_expression_and_long_chains_parse() -> None:
    # a 9000-term sum is cut at the depth bound on both branches of the deepest node: one
    # report for the expression, still one per independent rule
    chain = "1+" * 9000 + "1"
    assert codes(f"PLAN a WHEN last > {chain}: FLAT") == ["too-deep"]
    half = "1+" * 4000 + "1"
    assert codes(f"PLAN a WHEN last > {half}: FLAT\nWHEN last > {half}: FLAT") == [
        "too-deep",
        "too-deep",
    ]
    # a flat chain is not deep: 1500 ANDed comparisons are one And node of depth 2
    wide = parse("PLAN a WHEN " + "last > 1 AND " * 1500 + "last > 1: FLAT")
    assert isinstance(wide, Plan)
    cond = wide.rules[0].cond
    assert isinstance(cond, And) and len(cond.operands) == 1501

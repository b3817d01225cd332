"""The parse of a document is remembered under its text, limits, lot and symbols, never across
them: the same reply parses to the same AST, and one differing in any of the four is checked
afresh (a limit, a lot or a universe that refuses it still refuses it)."""

from __future__ import annotations

import msgspec
import pytest

from kestrel import lang
from kestrel.lang import DEFAULT_LIMITS, LangError, Module, Plan
from kestrel.lang.parser import PARSE_CACHE_SIZE

TWO = ("PLAN a ON AAA\nWHEN last > 10: BUY 0.5 MKT\n\n"
       "PLAN b ON BBB\nWHEN AAA.chg(1d) > 0: BUY 0.5 MKT")


def test_the_same_text_parses_to_the_same_ast_and_equal_to_a_fresh_parse() -> None:
    first = lang.parse(TWO, lot=0.5)
    again = lang.parse(TWO, lot=0.5)
    assert again is first
    assert isinstance(first, Module) and [p.name for p in first.statements if isinstance(p, Plan)] == ["a", "b"]
    for k in range(PARSE_CACHE_SIZE + 1):  # push it out of the cache: parsed afresh, equal
        lang.parse(f"PLAN p{k}\nWHEN last > {k + 1}: BUY 1 MKT")
    fresh = lang.parse(TWO, lot=0.5)
    assert fresh is not first and fresh == first


def test_a_lot_that_refuses_the_quantities_still_refuses_them_after_a_parse_that_passed() -> None:
    lang.parse(TWO, lot=0.5)
    with pytest.raises(LangError, match="0.5"):
        lang.parse(TWO, lot=1)  # whole units: BUY 0.5 is refused
    with pytest.raises(LangError):
        lang.parse(TWO)


def test_tighter_limits_still_refuse_what_looser_ones_accepted() -> None:
    loose = msgspec.structs.replace(DEFAULT_LIMITS, max_statements=2)
    tight = msgspec.structs.replace(DEFAULT_LIMITS, max_statements=1)
    assert isinstance(lang.parse(TWO, loose, lot=0.5), Module)
    with pytest.raises(LangError):
        lang.parse(TWO, tight, lot=0.5)
    assert isinstance(lang.parse(TWO, loose, lot=0.5), Module)


def test_a_universe_without_a_symbol_read_refuses_it_after_one_with_it_accepted() -> None:
    assert isinstance(lang.parse(TWO, lot=0.5, symbols=("AAA", "BBB")), Module)
    with pytest.raises(LangError, match="AAA"):
        lang.parse(TWO, lot=0.5, symbols=("BBB", "CCC"))


def test_a_failing_document_fails_every_time_and_a_list_of_symbols_is_taken() -> None:
    for _ in range(2):
        with pytest.raises(LangError):
            lang.parse("PLAN x\nWHEN last >: BUY 1 MKT")
    got = lang.parse(TWO, lot=0.5, symbols=["AAA", "BBB"])  # type: ignore[arg-type]  # unhashable: parsed, not remembered
    assert got == lang.parse(TWO, lot=0.5, symbols=("AAA", "BBB"))

"""Properties: round trip, idempotent formatting, and fuzzing (only LangError escapes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kestrel.lang import LangError, Module, Pass, StandDown, Statement, check, format, parse
from lang_strategies import CORPUS, documents, modules, mutated, plans, statements

FAST = settings(max_examples=150, deadline=None)


@FAST
@given(documents)
def test_parse_of_format_is_identity(doc: Module | Statement) -> None:
    text = format(doc)
    assert parse(text) == doc
    assert format(parse(text)) == text


@FAST
@given(st.one_of(plans(), statements(), modules()))
def test_generated_plans_check_clean(doc: Module | Statement) -> None:
    """The strategies are typed by construction: their raw output (before the safety-net
    filter of `documents`/`valid_plans`) must already check clean, so the checker accepts
    every shape of valid plan they can build."""
    assert check(doc) == []


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_format_is_idempotent_on_the_corpus(path: Path) -> None:
    once = format(parse(path.read_text()))
    assert format(parse(once)) == once


def _parse_closed(text: str) -> None:
    """Parse; the only acceptable failure is LangError. A success must round-trip."""
    try:
        doc = parse(text)
    except LangError as err:
        assert err.diagnostics
        # `invalid` is the closed mapping of an unexpected internal exception: never expected
        assert all(d.code != "invalid" for d in err.diagnostics), err
        str(err)
        return
    assert parse(format(doc)) == doc


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_raises_only_lang_error(text: str) -> None:
    _parse_closed(text)


@settings(max_examples=300, deadline=None)
@given(mutated())
def test_mutated_valid_documents_raise_only_lang_error(text: str) -> None:
    _parse_closed(text)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (b"PASS", "not-text"),
        (None, "not-text"),
        (42, "not-text"),
        ("PASS\udcff", "syntax"),  # a lone surrogate is no token
        ("PLAN \x00", "syntax"),
        ("\r\n" * 3, "empty"),
    ],
)
def test_odd_inputs_raise_a_lang_error_that_says_what_was_wrong(value: object, code: str) -> None:
    with pytest.raises(LangError) as exc:
        parse(value)  # type: ignore[arg-type]
    assert [d.code for d in exc.value.diagnostics] == [code]


def test_a_byte_order_mark_and_crlf_line_ends_are_read_as_plain_text() -> None:
    assert parse("\ufeffPASS") == Pass()
    assert parse("PASS\r\nPASS\r\n") == Module((Pass(), Pass()))
    assert parse("PASS\rSTANDDOWN") == Module((Pass(), StandDown()))

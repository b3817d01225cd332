"""Properties: round trip, idempotent formatting, and fuzzing (only LangError escapes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.lang import LangError, Module, Statement, check, format, parse
from lang_strategies import documents, modules, plans, statements

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "examples").glob("*.kes"))

FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


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


VOCAB = [
    "PLAN", "WHEN", "BUY", "SELL", "MKT", "LMT", "STP", "STOP", "TARGET", "TRAIL", "TTL", "FLAT",
    "CANCEL", "AND", "OR", "NOT", "CROSSES", "ABOVE", "VIEW", "PASS", "STANDDOWN", "RISK", "ON",
    "UNTIL", "FOR", "maxpos", "x3", "last", "high(", "sma(", ")", "(", ":", ";", ",", "-", "+",
    "*", "/", "@", ">", "==", "30m", "0m", "15:45", "99:99", "0.6%", "1e9", "1.5h", "\"", "#",
    "\n", " ", "\u00e9", "\x00", "9" * 40, "\u2028", "=", "&&",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    base = draw(st.one_of(st.sampled_from(CORPUS).map(lambda p: p.read_text()), documents.map(format)))
    for _ in range(draw(st.integers(1, 4))):
        if not base:
            break
        i = draw(st.integers(0, len(base) - 1))
        op = draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        if op == "delete":
            j = draw(st.integers(i, min(len(base), i + 12)))
            base = base[:i] + base[j:]
        elif op == "insert":
            base = base[:i] + draw(st.sampled_from(VOCAB)) + base[i:]
        elif op == "replace":
            base = base[:i] + draw(st.sampled_from(VOCAB)) + base[i + 1 :]
        else:
            j = draw(st.integers(i, min(len(base), i + 30)))
            base = base[:j] + base[i:j] + base[j:]
    return base


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_valid_documents_raise_only_lang_error(text: str) -> None:
    _parse_closed(text)


@pytest.mark.parametrize(
    "value",
    [b"PASS", None, 42, "PASS\udcff", "\ufeffPASS", "PLAN \x00", "\r\n" * 3, "PASS\r\nPASS\r\n"],
)
def test_odd_inputs_raise_only_lang_error(value: object) -> None:
    try:
        parse(value)  # type: ignore[arg-type]
    except LangError:
        pass

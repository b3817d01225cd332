"""Differential: the fast parser (the lexer derived from kestrel.lark driving lark's LALR
tables, `kestrel.lang.lalr`) against lark's stock LALR parser and contextual lexer compiled
from the same grammar with the same options and the same `Builder` as its transformer.

On every document both must accept or both reject; on acceptance they build the same AST,
the same builder diagnostics and the same token positions; on rejection they stop at the
same line and column, and where both fail on a token, on the same token with the same set of
acceptable terminals. Thousands of documents: generated valid ones, mutated ones, token
soups, and every corpus file with each token deleted in turn.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from kestrel.lang import format
from kestrel.lang.builder import Builder
from kestrel.lang.grammar import compile_grammar
from kestrel.lang.lalr import ParseFailure, machine
from kestrel.lang.lexer import LexError
from lang_strategies import CORPUS, documents, mutated, token_soups

Outcome = tuple[Any, ...]

_STOCK: list[tuple[Lark, Builder]] = []


def _stock() -> tuple[Lark, Builder]:
    if not _STOCK:
        builder = Builder()
        _STOCK.append((compile_grammar(builder), builder))
    return _STOCK[0]


def _accepted(builder: Builder, value: Any) -> Outcome:
    spans = sorted(
        (type(v[0]).__name__, k[1] if isinstance(k, tuple) else "", v[1].start_pos, v[2].end_pos)
        for k, v in builder.pos.items()
    )
    return ("ok", value, [d.render() for d in builder.diags], spans)


def _token(tok: Token, expected: frozenset[str] | set[str]) -> Outcome:
    # not the token's text: where no terminal of the state matches, lark re-reads the text
    # with every terminal and may take a longer one (`P/ASS` as a SYMBOL); the fast lexer
    # reports the word there (`P`). Both stop at the same place with the same choices.
    return ("token", tok.line, tok.column, tok.type == "$END", frozenset(expected))


def fast(text: str) -> Outcome:
    m = machine()
    m.builder.reset()
    try:
        return _accepted(m.builder, m.run(text))
    except ParseFailure as err:
        return _token(err.token, err.expected)
    except LexError as err:
        return ("char", err.line, err.column)
    finally:
        m.builder.reset()


def stock(text: str) -> Outcome:
    lark, builder = _stock()
    builder.reset()
    try:
        return _accepted(builder, lark.parse(text))
    except UnexpectedToken as err:
        return _token(err.token, err.accepts)
    except UnexpectedCharacters as err:
        return ("char", err.line, err.column)
    finally:
        builder.reset()


def _agree(text: str) -> None:
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # `parse` normalises line ends first
    assert fast(text) == stock(text), text


DIFF = settings(max_examples=200, deadline=None)


@DIFF
@given(documents.map(format))
def test_generated_documents_parse_alike(text: str) -> None:
    _agree(text)


@settings(max_examples=1500, deadline=None)
@given(mutated())
def test_mutated_documents_parse_alike(text: str) -> None:
    _agree(text)


@settings(max_examples=1500, deadline=None)
@given(token_soups)
def test_token_soups_parse_alike(text: str) -> None:
    _agree(text)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_corpus_with_each_token_deleted_parses_alike(path: Any) -> None:
    text = path.read_text()
    _agree(text)
    toks = list(_stock()[0].lex(text))
    assert toks
    for tok in toks:
        _agree(text[: tok.start_pos] + text[tok.end_pos :])


def _at(text: str, part: str) -> int:
    return text.index(part) + 1


EDGE_CASES = [  # (text, where both stop: ok, or a token / a character at that column of line 1)
    ("PLAN a WHEN last > 30m.5: FLAT", "char", "30m.5"),  # DURATION runs into no `.` (had drifted)
    ("PLAN a WHEN last > 1.5.3: FLAT", "char", "1.5.3"),  # nor does NUMBER
    ("pa\u017fs", "token", "pa"),  # ASCII case folding only: the long s is not an s
    ("PASS\u00e8", "char", "\u00e8"),  # ASCII word boundary: PASS, then no token starts at è
    ("VIEW plan: plan, when(n=x3)", "ok", ""),  # keywords are names where only a name fits
    ("PLAN a ON BRK.B WHEN last > 1: FLAT x3", "ok", ""),
    ("PLAN a ON aapl WHEN last > 1: FLAT", "token", "aapl"),
    ("PLAN a WHEN last > 1: BUY 10 MKT x3y", "token", "x3y"),
    ("PLAN a WHEN last > 1: BUY 0.01% MKT", "token", "MKT"),  # a PERCENT after BUY sizes by equity: EQ
    ("PLAN a WHEN last > 1: BUY 15:45 MKT", "token", "15:45"),  # nor starts where a TIME does
    ("PLAN a WHEN last > 1: BUY 9:305 MKT", "token", ":305"),
    ("VIEW v: bars(n==5)", "token", "=="),  # `==` is never `=` `=`
    ("", "ok", ""),
    ("PLAN", "token", "PLAN"),  # the end, reported at the last token
]


@pytest.mark.parametrize(("text", "kind", "part"), EDGE_CASES)
def test_edge_cases_parse_alike(text: str, kind: str, part: str) -> None:
    _agree(text)
    outcome = fast(text)
    assert outcome[0] == kind
    if kind != "ok":
        assert outcome[1:3] == (1, _at(text, part))

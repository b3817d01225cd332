"""Text to AST: the entry point. `parse` normalises the text, runs this thread's LALR
machine (`lalr`: lexer, tables, `Builder`), maps a syntax failure to one diagnostic
(`hints`), then the checker walks the AST once, locating problems by the builder's tokens.

`parse` never raises anything but `LangError`: syntax errors, recursion, odd input types and
number overflow are all mapped to diagnostics.

A document that parsed is remembered (per process, the last `PARSE_CACHE_SIZE` of them) under
its exact text, limits, lot and symbols: the same reply again (an agent restating its module of
plans every session) returns the same immutable AST without lexing or checking it again. A
document differing in any of the four is parsed afresh; a failing one is never remembered.
"""

from __future__ import annotations

from functools import lru_cache

from kestrel.lang.ast import Module, Statement
from kestrel.lang.checker import Loc, check_located
from kestrel.lang.errors import Diagnostic, LangError
from kestrel.lang.grammar import GRAMMAR
from kestrel.lang.hints import line_of, syntax_diag
from kestrel.lang.lalr import ParseFailure, machine
from kestrel.lang.lexer import LexError
from kestrel.lang.limits import DEFAULT_LIMITS, Limits


PARSE_CACHE_SIZE = 64


def _fail(code: str, message: str, hint: str | None = None) -> LangError:
    return LangError([Diagnostic(code, message, hint=hint)])


def parse(text: str, limits: Limits | None = None, lot: float = 1,
          symbols: tuple[str, ...] | None = None) -> Module | Statement:
    """Parse and type-check `text`. One statement returns that Statement; several return a
    Module. Raises `LangError` (and nothing else) listing every independent problem. `lot`:
    the instrument's lot size, quantities must be whole numbers of (1: whole units); `symbols`:
    the session's universe, the symbols a cross-symbol read may name (None: any)."""
    lim = limits if limits is not None else DEFAULT_LIMITS
    if not isinstance(text, str):
        raise _fail("not-text", f"expected Kestrel text (str), got {type(text).__name__}")
    try:
        hash((lim, lot, symbols))
    except TypeError:  # an unhashable argument (a list of symbols): nothing to remember it by
        return _parse(text, lim, lot, symbols)
    return _remembered(text, lim, lot, symbols)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _remembered(text: str, lim: Limits, lot: float, symbols: tuple[str, ...] | None) -> Module | Statement:
    return _parse(text, lim, lot, symbols)


def _parse(text: str, lim: Limits, lot: float, symbols: tuple[str, ...] | None) -> Module | Statement:
    if len(text) > lim.max_document_chars:
        raise _fail(
            "too-large",
            f"document is {len(text)} characters; the limit is {lim.max_document_chars}",
            hint="split it, or keep one statement per reply",
        )
    if text.startswith("\ufeff"):  # a byte-order mark is invisible in editors: drop it
        text = text[1:]
    if "\r" in text:  # CRLF and lone CR line ends count as one newline, as editors show them
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    parser = machine()
    builder = parser.builder
    builder.reset()
    try:
        statements: list[Statement] = parser.run(text)
    except (ParseFailure, LexError) as err:
        raise LangError([syntax_diag(text, err)]) from None
    except RecursionError:
        raise _fail("too-deep", "document nested too deeply to parse") from None
    except Exception as err:  # a builder callback failing unforeseen: still one LangError
        raise _fail("invalid", f"document could not be parsed: {type(err).__name__}") from None
    finally:
        pos = builder.pos
        diags = builder.diags
        builder.reset()
    if not statements:
        raise _fail(
            "empty",
            "the document holds no statement",
            hint="reply with one statement: PLAN, VIEW, STANDDOWN or PASS",
        )
    root: Module | Statement = statements[0] if len(statements) == 1 else Module(tuple(statements))

    def locate(node: object, field: str | None = None) -> Loc | None:
        key = id(node) if field is None else (id(node), field)
        hit = pos.get(key)
        if hit is None and field is not None:
            hit = pos.get(id(node))
        if hit is None:
            return None
        first, last = hit[1], hit[2]
        if last.end_line == first.line:
            width = last.end_column - first.column  # type: ignore[operator]
        else:
            width = len(line_of(text, first.line or 1)) - (first.column or 1) + 1
        return Loc(first.line or 1, first.column or 1, max(1, width))

    try:
        diags.extend(check_located(root, lim, locate, text, lot, symbols))
    except RecursionError:
        diags.append(Diagnostic("too-deep", "document nested too deeply to check"))
    if diags:
        diags = [
            diagnostic if diagnostic.excerpt is not None or diagnostic.line is None
            else Diagnostic(diagnostic.code, diagnostic.message, diagnostic.line, diagnostic.column, diagnostic.width,
                            line_of(text, diagnostic.line), diagnostic.expected, diagnostic.hint, diagnostic.path)
            for diagnostic in diags
        ]
        diags.sort(key=lambda diagnostic: (diagnostic.line or 0, diagnostic.column or 0))
        raise LangError(diags)
    return root


__all__ = ["GRAMMAR", "parse"]

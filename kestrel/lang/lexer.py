"""A hand-rolled contextual lexer feeding the LALR tables (one master regex).

lark's own lexer costs several microseconds per token; this one matches each token with one
compiled alternation and decides the context-dependent cases by asking the parser which
terminals its current state accepts:
- a keyword (case-insensitive) is a keyword where the parser accepts it, and a plain NAME
  where only a name fits (so a pane may be called `plan`);
- after ON an upper-case instrument symbol (`BRK.B`) is read as SYMBOL;
- `x3` after an action is the REPEAT count.
Token types are the grammar's terminal names (see kestrel.lark).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from lark import Token

# Whitespace and comments between tokens.
_GAP = r"(?:[ \t\f\r\n]+|\#[^\n]*)*"
# Leading whitespace and comments are consumed by the same match as the token after them
# (in an atomic group, so a comment is never cut short to find a token inside it).
_MASTER = re.compile(
    rf"(?>{_GAP})"
    r"""
    (?:
     (?P<TIME>[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?(?![0-9]))
    |(?P<DURATION>[0-9]+[smhd](?![A-Za-z0-9_.]))
    |(?P<PERCENT>[0-9]+(?:\.[0-9]+)?%)
    |(?P<NUMBER>[0-9]+(?:\.[0-9]+)?(?![0-9A-Za-z_.]))
    |(?P<WORD>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<STRING>"(?:[^"\\\r\n]|\\["\\])*")
    |(?P<CMP><=|>=|==|!=|<|>)
    |(?P<PUNCT>[-+*/@(),:;=])
    )
    """,
    re.X,
)
_SKIP = re.compile(_GAP)
_SYMBOL = re.compile(r"[A-Z][A-Z0-9._/-]*(?![A-Za-z0-9_])")
_REPEAT = re.compile(r"[xX][0-9]+\Z")

KEYWORDS: dict[str, str] = {
    "plan": "PLAN",
    "view": "VIEW",
    "standdown": "STANDDOWN",
    "pass": "PASS",
    "on": "_ON",
    "until": "_UNTIL",
    "for": "_FOR",
    "risk": "_RISK",
    "maxpos": "RISK_KEY",
    "maxloss": "RISK_KEY",
    "maxorders": "RISK_KEY",
    "budget": "_BUDGET",
    "when": "WHEN",
    "buy": "SIDE",
    "sell": "SIDE",
    "flat": "FLAT",
    "cancel": "CANCEL",
    "mkt": "MKT",
    "market": "MKT",
    "lmt": "LMT",
    "limit": "LMT",
    "stp": "STP",
    "stop": "STOP",
    "target": "TARGET",
    "trail": "TRAIL",
    "ttl": "TTL",
    "or": "OR",
    "and": "AND",
    "not": "NOT",
    "crosses": "_CROSSES",
    "above": "DIRECTION",
    "below": "DIRECTION",
}
_PUNCT: dict[str, str] = {
    "-": "MINUS",
    "+": "PLUS",
    "*": "STAR",
    "/": "SLASH",
    "@": "AT",
    ")": "_RPAR",
    ",": "_COMMA",
    ":": "_COLON",
    ";": "_SEMI",
    "=": "_EQ",
}


class LexError(Exception):
    """No token matches at `pos`; `accepts` are the terminals the parser wanted there."""

    def __init__(self, pos: int, line: int, column: int, accepts: frozenset[str]) -> None:
        super().__init__(f"no token at {line}:{column}")
        self.pos = pos
        self.line = line
        self.column = column
        self.accepts = accepts


def tokens(
    text: str,
    stack: list[int],
    table: dict[int, dict[str, Any]],
    accepted: Callable[[list[int], dict[int, dict[str, Any]]], frozenset[str]],
) -> Iterator[Token]:
    """Yield the tokens of `text`. `stack[-1]` is the parser's current state and
    `table[state]` maps each terminal the state accepts to its action, so context-dependent
    words are typed by what the parser can take next. Raises `LexError` where no token fits."""
    match = _MASTER.match
    make = str.__new__
    pos, end = 0, len(text)
    line, line_start = 1, 0
    while pos < end:
        m = match(text, pos)
        if m is None:
            skip = _SKIP.match(text, pos)
            start = skip.end() if skip is not None else pos
            line += text.count("\n", pos, start)
            line_start = max(line_start, text.rfind("\n", pos, start) + 1)
            if start >= end:
                return
            raise LexError(start, line, start - line_start + 1, accepted(stack, table))
        kind = m.lastgroup
        start = m.start(kind)  # type: ignore[arg-type]
        if start != pos:
            nl = text.count("\n", pos, start)
            if nl:
                line += nl
                line_start = text.rfind("\n", pos, start) + 1
        stop = m.end()
        value = text[start:stop]
        if kind == "WORD":
            acc = table[stack[-1]]
            kw = KEYWORDS.get(value.lower())
            if "SYMBOL" in acc:
                sm = _SYMBOL.match(text, start)
                if sm is not None:
                    value, stop, kind = sm.group(), sm.end(), "SYMBOL"
                else:
                    kind = "NAME"
            elif kw is not None and (kw in acc or "NAME" not in acc):
                kind = kw
            elif "REPEAT" in acc and _REPEAT.match(value):
                kind = "REPEAT"
            else:
                kind = "NAME"
        elif kind == "PUNCT":
            if value == "(":
                kind = "_LPAR" if "_LPAR" in table[stack[-1]] else "LPAR"
            else:
                kind = _PUNCT[value]
        col = start - line_start + 1
        # a lark Token built field by field (what Token._future_new does, minus a call)
        tok = make(Token, value)
        tok.type = kind  # type: ignore[assignment]  # always a named group
        tok.value = value
        tok.start_pos = start
        tok.line = tok.end_line = line
        tok.column = col
        tok.end_column = col + (stop - start)
        tok.end_pos = stop
        yield tok
        pos = stop


__all__ = ["KEYWORDS", "LexError", "tokens"]

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

_MASTER = re.compile(
    r"""
     (?P<WS>(?:[ \t\f\r\n]+|\#[^\n]*)+)
    |(?P<TIME>[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?(?![0-9]))
    |(?P<DURATION>[0-9]+[smhd](?![A-Za-z0-9_.]))
    |(?P<PERCENT>[0-9]+(?:\.[0-9]+)?%)
    |(?P<NUMBER>[0-9]+(?:\.[0-9]+)?(?![0-9A-Za-z_.]))
    |(?P<WORD>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<STRING>"(?:[^"\\\r\n]|\\["\\])*")
    |(?P<CMP><=|>=|==|!=|<|>)
    |(?P<PUNCT>[-+*/@(),:;=])
    """,
    re.X,
)
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
    new = Token._future_new
    pos, end = 0, len(text)
    line, line_start = 1, 0
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise LexError(pos, line, pos - line_start + 1, accepted(stack, table))
        kind = m.lastgroup
        value = m.group()
        stop = m.end()
        if kind == "WS":
            nl = value.count("\n")
            if nl:
                line += nl
                line_start = pos + value.rindex("\n") + 1
            pos = stop
            continue
        if kind == "WORD":
            acc = table[stack[-1]]
            kw = KEYWORDS.get(value.lower())
            if "SYMBOL" in acc:
                sm = _SYMBOL.match(text, pos)
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
        col = pos - line_start + 1
        yield new(kind, value, pos, line, col, line, col + (stop - pos), stop)  # type: ignore[no-untyped-call]
        pos = stop


__all__ = ["KEYWORDS", "LexError", "tokens"]

"""A contextual lexer feeding the LALR tables with one master regex, its patterns derived
from the grammar's terminals (`kestrel.lark` is the one source of truth).

lark's own lexer costs several microseconds per token; this one matches each token with one
compiled alternation and decides the context-dependent cases by asking the parser which
terminals its current state accepts, as lark's contextual lexer does:
- a keyword (case-insensitive) is a keyword where the parser accepts it, and a plain NAME
  where only a name fits (so a pane may be called `plan`);
- where SYMBOL is accepted (after ON) an instrument symbol (`BRK.B`) is read as SYMBOL;
- another symbol's read (`SPY.last`) is XREAD where the state accepts it, else the word it
  starts with;
- `x3` after an action is the REPEAT count;
- a string spelt by two terminals (`(` is LPAR and _LPAR) is the one the state accepts.
Token types are the grammar's terminal names. `tests/test_lang_differential.py` checks that
this lexer with the driver and lark's stock parser agree.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from lark import Lark, Token

from kestrel.lang.grammar import OPTIONS, compile_grammar

# The terminals whose role the lexer knows by name; every other terminal is a keyword
# (`/word\b/i` or `/(w1|w2)\b/i`), a literal pattern, a fixed string, or ignored.
_NAME, _SYMBOL, _REPEAT = "NAME", "SYMBOL", "REPEAT"
# literal terminals the lexer reads only where the parser's state accepts them (else the word
# they start with): another symbol's read, `SPY.last`
CONTEXTUAL: frozenset[str] = frozenset({"XREAD"})
_KEYWORD_SHAPE = re.compile(r"\(?([a-z]+(?:\|[a-z]+)*)\)?\\b")
_FLAGS: int = OPTIONS["g_regex_flags"]


class LexError(Exception):
    """No token matches at `pos`; `accepts` are the terminals the parser wanted there."""

    def __init__(self, pos: int, line: int, column: int, accepts: frozenset[str]) -> None:
        super().__init__(f"no token at {line}:{column}")
        self.pos = pos
        self.line = line
        self.column = column
        self.accepts = accepts


class Vocabulary(NamedTuple):
    """What the lexer reads off the compiled grammar."""

    keywords: dict[str, str]  # lower-case word -> its terminal
    master: re.Pattern[str]  # ignored text, then one token (a named group per kind)
    skip: re.Pattern[str]  # ignored text only
    symbol: re.Pattern[str]
    word: re.Pattern[str]
    repeat: re.Pattern[str]
    spellings: dict[str, tuple[str, ...]]  # a fixed string -> the terminals spelling it
    fixed: dict[str, str]  # a fixed string -> the first of them
    shared: frozenset[str]  # first terminals of strings that several terminals spell

    @classmethod
    def of(cls, lark: Lark) -> Vocabulary:
        """Derive the vocabulary from lark's compiled terminals; a terminal of a shape the
        lexer does not know fails here (at the first parse), never silently later."""
        ignore = set(lark.ignore_tokens)
        keywords: dict[str, str] = {}
        literals: list[tuple[int, int, str, str]] = []  # (-priority, order, name, regex)
        fixed: dict[str, tuple[str, ...]] = {}
        roles: dict[str, str] = {}
        names = [terminal.name for terminal in lark.terminals]
        gaps: list[str] = []
        for order, term in enumerate(lark.terminals):
            pattern = term.pattern
            regex = pattern.to_regexp()
            if term.name in ignore:
                gaps.append(regex)
            elif term.name in (_NAME, _SYMBOL, _REPEAT):
                roles[term.name] = regex
            elif pattern.type == "str":
                fixed[pattern.value] = (*fixed.get(pattern.value, ()), term.name)
            elif (kw := _KEYWORD_SHAPE.fullmatch(pattern.value)) and pattern.flags == {"i"}:
                for word in kw.group(1).split("|"):
                    keywords[word] = term.name
            else:
                literals.append((-term.priority, order, term.name, regex))
        missing = {_NAME, _SYMBOL, _REPEAT} - set(roles)
        if missing or not gaps:
            raise TypeError(f"the grammar lacks the terminals {sorted(missing)} the lexer needs")
        gap = "(?:" + "|".join(gaps) + ")*"
        # the NAME pattern reads every word (keywords, REPEAT, a SYMBOL's start) in its place
        literals.append((0, names.index(_NAME), "WORD", roles[_NAME]))
        kinds = [f"(?P<{name}>{regex})" for _, _, name, regex in sorted(literals)]
        strings = sorted(fixed, key=lambda spelt: (-len(spelt), spelt))
        if all(len(spelt) == 1 for spelt in strings):  # one character class: faster than alternatives
            kinds.append("(?P<FIXED>[" + "".join(re.escape(spelt) for spelt in strings) + "])")
        else:
            kinds.append("(?P<FIXED>" + "|".join(re.escape(spelt) for spelt in strings) + ")")
        return cls(
            keywords=keywords,
            # leading ignored text is consumed by the same match as the token after it, in an
            # atomic group, so a comment is never cut short to find a token inside it
            master=re.compile(f"(?>{gap})(?:" + "|".join(kinds) + ")", _FLAGS),
            skip=re.compile(gap, _FLAGS),
            symbol=re.compile(roles[_SYMBOL], _FLAGS),
            word=re.compile(roles[_NAME], _FLAGS),
            repeat=re.compile(roles[_REPEAT], _FLAGS),
            spellings=fixed,
            fixed={string: terms[0] for string, terms in fixed.items()},
            shared=frozenset(terms[0] for terms in fixed.values() if len(terms) > 1),
        )

    def check_table(self, table: dict[int, dict[str, Any]]) -> None:
        """No parser state accepts two terminals spelt the same (the choice between them
        is then always the state's); fails at the first parse if the grammar changes."""
        for row in table.values():
            for string, names in self.spellings.items():
                if sum(name in row for name in names) > 1:
                    raise TypeError(f"a parser state accepts {string!r} as {names}")


_LOCK = threading.Lock()
_VOCABULARY: list[Vocabulary] = []


def vocabulary(lark: Lark | None = None) -> Vocabulary:
    """The vocabulary of the grammar, derived once per process (from `lark` when given, a
    parser compiled for it anyway, else from a fresh compile)."""
    if not _VOCABULARY:
        with _LOCK:
            if not _VOCABULARY:
                _VOCABULARY.append(Vocabulary.of(lark if lark is not None else compile_grammar()))
    return _VOCABULARY[0]


def keywords() -> dict[str, str]:
    """Every keyword spelling (lower case) -> its terminal, in grammar order."""
    return vocabulary().keywords


Accepted = Callable[[list[int], dict[int, dict[str, Any]]], frozenset[str]]


def tokens(
    vocab: Vocabulary,
    text: str,
    stack: list[int],
    table: dict[int, dict[str, Any]],
    accepted: Accepted,
) -> Iterator[Token]:
    """Yield the tokens of `text`. `stack[-1]` is the parser's current state and
    `table[state]` maps each terminal the state accepts to its action, so context-dependent
    words are typed by what the parser can take next. Raises `LexError` where no token fits."""
    match = vocab.master.match
    kw_of = vocab.keywords.get
    symbol, repeat = vocab.symbol.match, vocab.repeat.fullmatch
    fixed, shared = vocab.fixed, vocab.shared
    make = str.__new__
    pos, end = 0, len(text)
    line, line_start = 1, 0
    while pos < end:
        found = match(text, pos)
        if found is None:
            skip = vocab.skip.match(text, pos)
            start = skip.end() if skip is not None else pos
            line += text.count("\n", pos, start)
            line_start = max(line_start, text.rfind("\n", pos, start) + 1)
            if start >= end:
                return
            raise LexError(start, line, start - line_start + 1, accepted(stack, table))
        kind: str = found.lastgroup  # type: ignore[assignment]  # always a named group
        start = found.start(kind)
        if start != pos:
            nl = text.count("\n", pos, start)
            if nl:
                line += nl
                line_start = text.rfind("\n", pos, start) + 1
        stop = found.end()
        if kind == "XREAD" and "XREAD" not in table[stack[-1]]:
            stop, kind = vocab.word.match(text, start).end(), "WORD"  # type: ignore[union-attr]
        value = text[start:stop]
        if kind == "WORD":
            acc = table[stack[-1]]
            kw = kw_of(value.lower())
            if "SYMBOL" in acc:
                sm = symbol(text, start)
                if sm is not None:
                    value, stop, kind = sm.group(), sm.end(), "SYMBOL"
                else:
                    kind = "NAME"
            elif kw is not None and (kw in acc or "NAME" not in acc):
                kind = kw
            elif "REPEAT" in acc and repeat(value):
                kind = "REPEAT"
            else:
                kind = "NAME"
        elif kind == "FIXED":
            kind = fixed[value]
            if kind in shared:  # spelt by several terminals: the one this state accepts
                acc = table[stack[-1]]
                kind = next((terminal for terminal in vocab.spellings[value] if terminal in acc), kind)
        col = start - line_start + 1
        # a lark Token built field by field (what Token._future_new does, minus a call)
        tok = make(Token, value)
        tok.type = kind
        tok.value = value
        tok.start_pos = start
        tok.line = tok.end_line = line
        tok.column = col
        tok.end_column = col + (stop - start)
        tok.end_pos = stop
        yield tok
        pos = stop


__all__ = ["CONTEXTUAL", "LexError", "Vocabulary", "keywords", "tokens", "vocabulary"]

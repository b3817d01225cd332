"""The reply grammar in the dialects constrained decoders take, derived from `kestrel.lark`.

`export(dialect)` writes the grammar `kestrel.lang.derived` derives (a canonical subset of the
language; every document it accepts passes Kestrel's syntax stage) as
- `llguidance`: the Lark subset LLGuidance reads (OpenAI's custom tools with `syntax: "lark"`,
  vLLM's guidance backend, llama.cpp's `%llguidance`, SGLang with LLGuidance): no terminal
  priorities, no lookarounds, no `%ignore`; keywords case-insensitive in ASCII letters, as
  Kestrel reads them (`/[Pp][Ll][Aa][Nn]/`: LLGuidance's `"plan"i` folds Unicode case, so
  `"pass"i` would take `paſs`, the long s);
- `gbnf`: llama.cpp's GBNF; `ebnf`: xgrammar's EBNF (vLLM's and SGLang's default), written in
  the part of it GBNF shares, with xgrammar's `snake_case` names. Neither has a case-insensitive
  literal: a keyword is accepted in upper case (the canonical form of statement, action and
  operator keywords) or in lower case (the canonical form of the RISK keys `maxpos`, `maxloss`,
  `maxorders`).
In LLGuidance a terminal whose pattern holds a character that is also a token on its own (`:`
in a time of day) is written as a rule of smaller terminals: LLGuidance's lexer is greedy and
does not back up, so `15:30` then `: BUY` would otherwise be read as the start of `15:30:ss`.
Output is deterministic: the same grammar gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Final, Literal

from kestrel.lang.derived import (
    GAP_CHARS,
    REPEAT_BOUND,
    START,
    TOTAL_BOUNDS,
    Cat,
    Choice,
    G,
    Gap,
    Grammar,
    NotTranslatable,
    Sym,
    Term,
    Text,
    derive,
)
from kestrel.lang.lexemes import ASCII, OTHER, Alt, Chars, Node, Seq

Dialect = Literal["llguidance", "gbnf", "ebnf"]
DIALECTS: Final[tuple[Dialect, ...]] = ("llguidance", "gbnf", "ebnf")

_GAP = "SEP"


def _quote(text: str, escape: Callable[[str], str]) -> str:
    return '"' + "".join(escape(char) for char in text) + '"'


def _ranges(chars: Iterable[str]) -> list[tuple[str, str]]:
    codes = sorted(ord(char) for char in chars)
    out: list[tuple[str, str]] = []
    for code in codes:
        if out and ord(out[-1][1]) == code - 1:
            out[-1] = (out[-1][0], chr(code))
        else:
            out.append((chr(code), chr(code)))
    return out


class _Writer:
    """One dialect's spelling of names, literals, character classes and repeats."""

    def __init__(self, dialect: Dialect, grammar: Grammar) -> None:
        self.dialect = dialect
        self.grammar = grammar
        self.lark = dialect == "llguidance"
        self.splitters = frozenset(word for term in grammar.terms.values() if term.spelt is not None
                                   for word in term.spelt.words if len(word) == 1)
        self.names: dict[tuple[str, bool], str] = {}
        taken: dict[str, str] = {}
        for key in [*((rule, False) for rule in grammar.rules), *((term, True) for term in grammar.terms
                                                            if grammar.terms[term].spelt is None)]:
            name = self._name(*key)
            if name in taken or name in (self._name(_GAP, True),):
                raise NotTranslatable(f"{key[0]} and {taken.get(name, 'the gap')} are both named {name} in {dialect}")
            taken[name] = key[0]
            self.names[key] = name

    def split(self, term: Term) -> bool:
        return self.lark and term.spelt is None and self._has_split(term.exported)

    def _has_split(self, node: Node) -> bool:
        if isinstance(node, Chars):
            return len(node.chars) == 1 and next(iter(node.chars)) in self.splitters
        if isinstance(node, Seq):
            return any(self._has_split(item) for item in node.items)
        if isinstance(node, Alt):
            return any(self._has_split(option) for option in node.options)
        return self._has_split(node.item)

    def _name(self, name: str, terminal: bool) -> str:
        if name == START:
            return "start" if self.lark else "root"
        base = name.strip("_")
        if terminal and name in self.grammar.terms and self.split(self.grammar.terms[name]):
            base = base.lower()
        elif not terminal:
            base = base.lower()
        return base.replace("_", "-") if self.dialect == "gbnf" else base

    # characters
    def char(self, char: str, in_class: bool) -> str:
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
        if char in named:
            return named[char]
        if not char.isprintable() or not char.isascii():
            code = ord(char)
            return f"\\x{{{code:x}}}" if self.lark else f"\\x{code:02X}" if self.dialect == "gbnf" else f"\\u{code:04X}"
        if self.lark:
            meta = "\\]" "[^-&~/" if in_class else "\\.+*?()|[]{}^$/"
        else:
            meta = "\\][" if in_class else '\\"'
        return "\\" + char if char in meta else char

    def klass(self, chars: frozenset[str]) -> str:
        negate = OTHER in chars
        members = (ASCII - chars) if negate else chars
        if not members:
            raise NotTranslatable("a character class that matches every character")
        tail = "" if self.lark else "".join(char for char in "^-" if char in members)  # GBNF, EBNF: last
        body = "".join(self.char(lo, True) if lo == hi else
                       self.char(lo, True) + ("" if ord(hi) == ord(lo) + 1 else "-") + self.char(hi, True)
                       for lo, hi in _ranges(members - set(tail)))
        return f"[{'^' if negate else ''}{body}{tail}]"

    def quant(self, low: int, high: int | None) -> str:
        if (low, high) == (0, 1):
            return "?"
        if high is None:
            return "*" if low == 0 else "+" if low == 1 else f"{{{low},}}"
        return f"{{{low}}}" if low == high else f"{{{low},{high}}}"

    # terminal patterns
    def regex(self, node: Node, top: bool = True) -> str:
        """A Rust-syntax regex (LLGuidance)."""
        if isinstance(node, Chars):
            return self.char(next(iter(node.chars)), False) if len(node.chars) == 1 else self.klass(node.chars)
        if isinstance(node, Seq):
            return "".join(f"(?:{self.regex(item)})" if isinstance(item, Alt) else self.regex(item, False) for item in node.items)
        if isinstance(node, Alt):
            body = "|".join(self.regex(option) for option in node.options)
            return body if top else f"(?:{body})"
        inner = self.regex(node.item, False)
        atomic = isinstance(node.item, Chars)
        return (inner if atomic else f"(?:{inner})") + self.quant(node.low, node.high)

    def lexemes(self, node: Node) -> str:
        """LLGuidance rule text for a split terminal: runs without a splitting character are
        one lexeme each."""
        if not self._has_split(node):
            return f"/{self.regex(node)}/"
        if isinstance(node, Chars):
            return _quote(next(iter(node.chars)), lambda char: self.char(char, False) if char in '"\\' else char)
        if isinstance(node, Seq):
            out: list[str] = []
            run: list[Node] = []
            for item in node.items:
                if self._has_split(item):
                    if run:
                        out.append(f"/{self.regex(Seq(tuple(run)))}/")
                        run = []
                    out.append(self.lexemes(item))
                else:
                    run.append(item)
            if run:
                out.append(f"/{self.regex(Seq(tuple(run)))}/")
            return " ".join(out)
        if isinstance(node, Alt):
            return "(" + " | ".join(self.lexemes(option) for option in node.options) + ")"
        return f"({self.lexemes(node.item)}){self.quant(node.low, node.high)}"

    def bnf(self, node: Node) -> str:
        """GBNF or EBNF for a terminal pattern."""
        if isinstance(node, Chars):
            if len(node.chars) == 1:
                (only,) = node.chars
                return _quote(only, lambda char: self.char(char, False))
            return self.klass(node.chars)
        if isinstance(node, Seq):
            return " ".join(self.bnf(item) for item in node.items) or '""'
        if isinstance(node, Alt):
            return "(" + " | ".join(self.bnf(option) for option in node.options) + ")"
        inner = self.bnf(node.item)
        atomic = isinstance(node.item, Chars) or isinstance(node.item, Alt)
        return (inner if atomic else f"({inner})") + self.quant(node.low, node.high)

    # rules
    def literal(self, term: Term) -> str:
        assert term.spelt is not None
        esc: Callable[[str], str] = lambda char: self.char(char, False) if char in '"\\' or not char.isprintable() else char
        if self.lark and term.spelt.folded:  # ASCII case folding, as Kestrel's: `"pass"i` would take `paſs`
            return "/" + "|".join(self.regex(Seq(tuple(
                Chars(frozenset({char.lower(), char.upper()})) if char.isalpha() else Chars(frozenset(char)) for char in word
            ))) for word in term.spelt.words) + "/"
        if self.lark:
            words = [_quote(word, esc) for word in term.spelt.words]
        else:
            forms = [form for word in term.spelt.words for form in ((word.upper(), word.lower()) if term.spelt.folded else (word,))]
            words = [_quote(word, esc) for word in dict.fromkeys(forms)]
        return words[0] if len(words) == 1 else "(" + " | ".join(words) + ")"

    def expr(self, node: G, top: bool = False) -> str:
        if isinstance(node, Sym):
            term = self.grammar.terms.get(node.name) if node.terminal else None
            if term is not None and term.spelt is not None:
                return self.literal(term)
            return self.names[(node.name, node.terminal)]
        if isinstance(node, Text):
            return _quote(node.text, lambda char: self.char(char, False))
        if isinstance(node, Gap):
            name = self._name(_GAP, True)
            return name if node.required else name + "?"
        if isinstance(node, Cat):
            return " ".join(self.expr(item) for item in node.items)
        if isinstance(node, Choice):
            body = " | ".join(self.expr(option) for option in node.options)
            return body if top else f"({body})"
        inner = self.expr(node.item)
        atomic = isinstance(node.item, Sym | Text | Choice)
        return (inner if atomic else f"({inner})") + self.quant(node.low, node.high)

    def write(self) -> str:
        what = "a module of statements" if self.grammar.module else "one statement"
        mark = "//" if self.lark else "#"
        defs = "::="
        lines = [f"{mark} Kestrel, {what} (kestrel grammar --dialect {self.dialect}); derived from kestrel.lark"]
        sep = ": " if self.lark else f" {defs} "
        for name, node in self.grammar.rules.items():
            lines.append(f"{self.names[(name, False)]}{sep}{self.expr(node, top=True)}")
        for name, term in self.grammar.terms.items():
            if term.spelt is not None:
                continue
            if self.lark:
                body = self.lexemes(term.exported) if self.split(term) else f"/{self.regex(term.exported)}/"
            else:
                body = self.bnf(term.exported)
            lines.append(f"{self.names[(name, True)]}{sep}{body}")
        gap = self.klass(frozenset(GAP_CHARS))
        lines.append(f"{self._name(_GAP, True)}{sep}{f'/{gap}/' if self.lark else gap}")
        return "\n".join(lines) + "\n"


@cache
def _export_default(dialect: Dialect, module: bool) -> str:
    return _Writer(dialect, derive(module=module)).write()


def export(dialect: Dialect, *, module: bool = False, grammar: str | None = None) -> str:
    """The grammar (default: `kestrel.lark`) written in `dialect` (see the module docstring)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)}")
    if grammar is None:
        return _export_default(dialect, module)
    return _Writer(dialect, derive(grammar, module=module)).write()


__all__ = ["DIALECTS", "GAP_CHARS", "REPEAT_BOUND", "TOTAL_BOUNDS", "Dialect", "Grammar",
           "NotTranslatable", "derive", "export"]

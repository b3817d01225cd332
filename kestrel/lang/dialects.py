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


def _quote(s: str, escape: Callable[[str], str]) -> str:
    return '"' + "".join(escape(c) for c in s) + '"'


def _ranges(chars: Iterable[str]) -> list[tuple[str, str]]:
    codes = sorted(ord(c) for c in chars)
    out: list[tuple[str, str]] = []
    for c in codes:
        if out and ord(out[-1][1]) == c - 1:
            out[-1] = (out[-1][0], chr(c))
        else:
            out.append((chr(c), chr(c)))
    return out


class _Writer:
    """One dialect's spelling of names, literals, character classes and repeats."""

    def __init__(self, dialect: Dialect, grammar: Grammar) -> None:
        self.dialect = dialect
        self.g = grammar
        self.lark = dialect == "llguidance"
        self.splitters = frozenset(w for t in grammar.terms.values() if t.spelt is not None
                                   for w in t.spelt.words if len(w) == 1)
        self.names: dict[tuple[str, bool], str] = {}
        taken: dict[str, str] = {}
        for key in [*((r, False) for r in grammar.rules), *((t, True) for t in grammar.terms
                                                            if grammar.terms[t].spelt is None)]:
            name = self._name(*key)
            if name in taken or name in (self._name(_GAP, True),):
                raise NotTranslatable(f"{key[0]} and {taken.get(name, 'the gap')} are both named {name} in {dialect}")
            taken[name] = key[0]
            self.names[key] = name

    def split(self, t: Term) -> bool:
        return self.lark and t.spelt is None and self._has_split(t.exported)

    def _has_split(self, n: Node) -> bool:
        if isinstance(n, Chars):
            return len(n.chars) == 1 and next(iter(n.chars)) in self.splitters
        if isinstance(n, Seq):
            return any(self._has_split(i) for i in n.items)
        if isinstance(n, Alt):
            return any(self._has_split(o) for o in n.options)
        return self._has_split(n.item)

    def _name(self, name: str, terminal: bool) -> str:
        if name == START:
            return "start" if self.lark else "root"
        base = name.strip("_")
        if terminal and name in self.g.terms and self.split(self.g.terms[name]):
            base = base.lower()
        elif not terminal:
            base = base.lower()
        return base.replace("_", "-") if self.dialect == "gbnf" else base

    # characters
    def char(self, c: str, in_class: bool) -> str:
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
        if c in named:
            return named[c]
        if not c.isprintable() or not c.isascii():
            code = ord(c)
            return f"\\x{{{code:x}}}" if self.lark else f"\\x{code:02X}" if self.dialect == "gbnf" else f"\\u{code:04X}"
        if self.lark:
            meta = "\\]" "[^-&~/" if in_class else "\\.+*?()|[]{}^$/"
        else:
            meta = "\\][" if in_class else '\\"'
        return "\\" + c if c in meta else c

    def klass(self, chars: frozenset[str]) -> str:
        negate = OTHER in chars
        members = (ASCII - chars) if negate else chars
        if not members:
            raise NotTranslatable("a character class that matches every character")
        tail = "" if self.lark else "".join(c for c in "^-" if c in members)  # GBNF, EBNF: last
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
    def regex(self, n: Node, top: bool = True) -> str:
        """A Rust-syntax regex (LLGuidance)."""
        if isinstance(n, Chars):
            return self.char(next(iter(n.chars)), False) if len(n.chars) == 1 else self.klass(n.chars)
        if isinstance(n, Seq):
            return "".join(f"(?:{self.regex(i)})" if isinstance(i, Alt) else self.regex(i, False) for i in n.items)
        if isinstance(n, Alt):
            body = "|".join(self.regex(o) for o in n.options)
            return body if top else f"(?:{body})"
        inner = self.regex(n.item, False)
        atomic = isinstance(n.item, Chars)
        return (inner if atomic else f"(?:{inner})") + self.quant(n.low, n.high)

    def lexemes(self, n: Node) -> str:
        """LLGuidance rule text for a split terminal: runs without a splitting character are
        one lexeme each."""
        if not self._has_split(n):
            return f"/{self.regex(n)}/"
        if isinstance(n, Chars):
            return _quote(next(iter(n.chars)), lambda c: self.char(c, False) if c in '"\\' else c)
        if isinstance(n, Seq):
            out: list[str] = []
            run: list[Node] = []
            for i in n.items:
                if self._has_split(i):
                    if run:
                        out.append(f"/{self.regex(Seq(tuple(run)))}/")
                        run = []
                    out.append(self.lexemes(i))
                else:
                    run.append(i)
            if run:
                out.append(f"/{self.regex(Seq(tuple(run)))}/")
            return " ".join(out)
        if isinstance(n, Alt):
            return "(" + " | ".join(self.lexemes(o) for o in n.options) + ")"
        return f"({self.lexemes(n.item)}){self.quant(n.low, n.high)}"

    def bnf(self, n: Node) -> str:
        """GBNF or EBNF for a terminal pattern."""
        if isinstance(n, Chars):
            if len(n.chars) == 1:
                (c,) = n.chars
                return _quote(c, lambda x: self.char(x, False))
            return self.klass(n.chars)
        if isinstance(n, Seq):
            return " ".join(self.bnf(i) for i in n.items) or '""'
        if isinstance(n, Alt):
            return "(" + " | ".join(self.bnf(o) for o in n.options) + ")"
        inner = self.bnf(n.item)
        atomic = isinstance(n.item, Chars) or isinstance(n.item, Alt)
        return (inner if atomic else f"({inner})") + self.quant(n.low, n.high)

    # rules
    def literal(self, t: Term) -> str:
        assert t.spelt is not None
        esc: Callable[[str], str] = lambda c: self.char(c, False) if c in '"\\' or not c.isprintable() else c
        if self.lark and t.spelt.folded:  # ASCII case folding, as Kestrel's: `"pass"i` would take `paſs`
            return "/" + "|".join(self.regex(Seq(tuple(
                Chars(frozenset({c.lower(), c.upper()})) if c.isalpha() else Chars(frozenset(c)) for c in w
            ))) for w in t.spelt.words) + "/"
        if self.lark:
            words = [_quote(w, esc) for w in t.spelt.words]
        else:
            forms = [v for w in t.spelt.words for v in ((w.upper(), w.lower()) if t.spelt.folded else (w,))]
            words = [_quote(w, esc) for w in dict.fromkeys(forms)]
        return words[0] if len(words) == 1 else "(" + " | ".join(words) + ")"

    def expr(self, g: G, top: bool = False) -> str:
        if isinstance(g, Sym):
            t = self.g.terms.get(g.name) if g.terminal else None
            if t is not None and t.spelt is not None:
                return self.literal(t)
            return self.names[(g.name, g.terminal)]
        if isinstance(g, Text):
            return _quote(g.text, lambda c: self.char(c, False))
        if isinstance(g, Gap):
            name = self._name(_GAP, True)
            return name if g.required else name + "?"
        if isinstance(g, Cat):
            return " ".join(self.expr(i) for i in g.items)
        if isinstance(g, Choice):
            body = " | ".join(self.expr(o) for o in g.options)
            return body if top else f"({body})"
        inner = self.expr(g.item)
        atomic = isinstance(g.item, Sym | Text | Choice)
        return (inner if atomic else f"({inner})") + self.quant(g.low, g.high)

    def write(self) -> str:
        what = "a module of statements" if self.g.module else "one statement"
        mark = "//" if self.lark else "#"
        defs = "::="
        lines = [f"{mark} Kestrel, {what} (kestrel grammar --dialect {self.dialect}); derived from kestrel.lark"]
        sep = ": " if self.lark else f" {defs} "
        for name, g in self.g.rules.items():
            lines.append(f"{self.names[(name, False)]}{sep}{self.expr(g, top=True)}")
        for name, t in self.g.terms.items():
            if t.spelt is not None:
                continue
            if self.lark:
                body = self.lexemes(t.exported) if self.split(t) else f"/{self.regex(t.exported)}/"
            else:
                body = self.bnf(t.exported)
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

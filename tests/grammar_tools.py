"""Reading, running and sampling the exported grammars (kestrel.lang.dialects) in tests and
the benchmark.

- `read_bnf(text)`: a reader of GBNF/EBNF as the export writes them (rules `name ::= ...` one a
  line, literals, character classes, groups, `? * + {m,n}`): a structural check (every rule
  referenced is defined, a `root` rule) and the tree the sampler and recognizer walk;
- `Recognizer(rules)`: does a text belong to the grammar, read character by character as
  llama.cpp and xgrammar do (no lexer): the rules as a lark Earley grammar of one-character
  terminals;
- `sample(rules, rng)`: a random derivation from `root`, depth-bounded (past `max_depth` every
  choice takes the shallowest way out);
- `Matcher`: LLGuidance's matcher on a byte-level tokenizer (one token per byte), which accepts
  a text when every byte is allowed and the grammar may stop there.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any


# ---- the tree


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Cls:
    chars: frozenset[str]
    negated: bool


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Expr, ...]


@dataclass(frozen=True)
class Rep:
    item: Expr
    low: int
    high: int | None


Expr = Lit | Cls | Ref | Seq | Alt | Rep


class BnfError(ValueError):
    pass


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}


class _Reader:
    def __init__(self, text: str, dialect: str) -> None:
        self.s = text
        self.i = 0
        self.dialect = dialect
        self.name = re.compile(r"[A-Za-z][A-Za-z0-9-]*" if dialect == "gbnf" else r"[A-Za-z_][A-Za-z0-9_.-]*")

    def fail(self, what: str) -> BnfError:
        return BnfError(f"expected {what} at {self.s[self.i:self.i + 20]!r} in {self.s[:40]!r}")

    def space(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def char(self) -> str:
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.s[self.i + 1]
        if e in _ESCAPES:
            self.i += 2
            return _ESCAPES[e]
        width = {"x": 2, "u": 4}.get(e)
        if width is None or (e == "x" and self.dialect != "gbnf"):
            raise self.fail(f"escape \\{e} is not in the {self.dialect} the export writes")
        digits = self.s[self.i + 2 : self.i + 2 + width]
        if not re.fullmatch(r"[0-9A-Fa-f]+", digits) or len(digits) != width:
            raise self.fail("a bad hex escape")
        self.i += 2 + width
        return chr(int(digits, 16))

    def rule(self) -> tuple[str, Expr]:
        m = self.name.match(self.s, self.i)
        if m is None:
            raise self.fail("a rule name")
        self.i = m.end()
        self.space()
        if not self.s.startswith("::=", self.i):
            raise self.fail("::=")
        self.i += 3
        expr = self.alternatives()
        self.space()
        if self.i != len(self.s):
            raise self.fail("the end of the rule")
        return m.group(), expr

    def alternatives(self) -> Expr:
        opts = [self.sequence()]
        self.space()
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            opts.append(self.sequence())
            self.space()
        return opts[0] if len(opts) == 1 else Alt(tuple(opts))

    def sequence(self) -> Expr:
        items: list[Expr] = []
        while True:
            self.space()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                break
            items.append(self.item())
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def item(self) -> Expr:
        atom = self.atom()
        while self.i < len(self.s) and self.s[self.i] in "?*+{":
            c = self.s[self.i]
            if c == "{":
                m = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.s, self.i)
                if m is None:
                    raise self.fail("a repeat {m,n}")
                low = int(m.group(1))
                high = low if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                self.i = m.end()
                atom = Rep(atom, low, high)
            else:
                self.i += 1
                atom = Rep(atom, *{"?": (0, 1), "*": (0, None), "+": (1, None)}[c])
        return atom

    def atom(self) -> Expr:
        c = self.s[self.i]
        if c == '"':
            self.i += 1
            text = ""
            while self.s[self.i] != '"':
                text += self.char()
            self.i += 1
            return Lit(text)
        if c == "[":
            self.i += 1
            negated = self.s[self.i] == "^"
            self.i += negated
            chars: set[str] = set()
            while self.s[self.i] != "]":
                lo = self.char()
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    hi = self.char()
                    if ord(hi) < ord(lo):
                        raise self.fail("a reversed range")
                    chars.update(map(chr, range(ord(lo), ord(hi) + 1)))
                else:
                    chars.add(lo)
            self.i += 1
            return Cls(frozenset(chars), negated)
        if c == "(":
            self.i += 1
            inner = self.alternatives()
            self.space()
            if self.s[self.i] != ")":
                raise self.fail("a closing parenthesis")
            self.i += 1
            return inner
        m = self.name.match(self.s, self.i)
        if m is None:
            raise self.fail("an item")
        self.i = m.end()
        return Ref(m.group())


def _refs(e: Expr) -> Iterator[str]:
    if isinstance(e, Ref):
        yield e.name
    elif isinstance(e, Seq):
        for i in e.items:
            yield from _refs(i)
    elif isinstance(e, Alt):
        for o in e.options:
            yield from _refs(o)
    elif isinstance(e, Rep):
        yield from _refs(e.item)


def read_bnf(text: str, dialect: str = "gbnf") -> dict[str, Expr]:
    """The rules of a GBNF (`dialect="gbnf"`) or EBNF (`"ebnf"`) text, one rule a line
    (`#` comment lines skipped); raises BnfError."""
    out: dict[str, Expr] = {}
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, expr = _Reader(line, dialect).rule()
        except IndexError:
            raise BnfError(f"unterminated item in {line[:40]!r}") from None
        if name in out:
            raise BnfError(f"rule {name} defined twice")
        out[name] = expr
    for name, expr in out.items():
        for ref in _refs(expr):
            if ref not in out:
                raise BnfError(f"rule {name} refers to undefined rule {ref}")
    if "root" not in out:
        raise BnfError("no root rule")
    return out


# ---- recognizing a text, character by character


def _rust_char(c: str, in_class: bool) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if c in named:
        return named[c]
    if not c.isprintable():
        return f"\\x{{{ord(c):x}}}"
    meta = "\\[]^-&~/" if in_class else '\\"'
    return "\\" + c if c in meta else c


class Recognizer:
    """Membership in the grammar's language character by character, as llama.cpp and
    xgrammar read it (no lexer between the characters): the rules rewritten as LLGuidance
    rules over one-character terminals, run by LLGuidance's Earley parser."""

    def __init__(self, rules: dict[str, Expr]) -> None:
        self.names = {n: "r" + re.sub(r"[^a-z0-9]", "", n.lower()) + f"x{k}" for k, n in enumerate(rules)}
        lines = [f"start: {self.names['root']}"]
        lines += [f"{self.names[n]}: {self._expr(e)}" for n, e in rules.items()]
        self.lark = "\n".join(lines) + "\n"
        self.matcher = Matcher(self.lark)

    def _expr(self, e: Expr) -> str:
        if isinstance(e, Lit):
            return " ".join(f'"{_rust_char(c, False)}"' for c in e.text) if e.text else '""'
        if isinstance(e, Cls):
            body = "".join(_rust_char(c, True) for c in sorted(e.chars))
            return f"/[{'^' if e.negated else ''}{body}]/"
        if isinstance(e, Ref):
            return self.names[e.name]
        if isinstance(e, Seq):
            return "(" + " ".join(self._expr(i) for i in e.items) + ")" if e.items else '""'
        if isinstance(e, Alt):
            return "(" + " | ".join(self._expr(o) for o in e.options) + ")"
        inner = f"({self._expr(e.item)})"
        if e.high is None:
            return inner + ("*" if e.low == 0 else "+" if e.low == 1 else f"{{{e.low},}}")
        return inner + ("?" if (e.low, e.high) == (0, 1) else f"{{{e.low},{e.high}}}")

    def accepts(self, text: str) -> bool:
        return self.matcher.accepts(text)


# ---- sampling


_PRINTABLE = [chr(c) for c in range(32, 127)]
_WIDE = ["é", "€", "中", "\u2028"]


def _heights(rules: dict[str, Expr]) -> dict[str, int]:
    """Each rule's least derivation height (fixpoint)."""
    inf = 10**9
    h = {n: inf for n in rules}

    def height(e: Expr) -> int:
        if isinstance(e, Lit | Cls):
            return 0
        if isinstance(e, Ref):
            return h[e.name] + 1
        if isinstance(e, Seq):
            return max((height(i) for i in e.items), default=0)
        if isinstance(e, Alt):
            return min(height(o) for o in e.options)
        return 0 if e.low == 0 else height(e.item)

    changed = True
    while changed:
        changed = False
        for n, e in rules.items():
            v = height(e)
            if v < h[n]:
                h[n] = v
                changed = True
    return h


@dataclass
class Sampler:
    """Random derivations of `rules` from `root`: below `max_depth` rule references, every
    option equally likely and repeats geometric (mean about `spread`); deeper, the
    shallowest option and the fewest repeats."""

    rules: dict[str, Expr]
    max_depth: int = 12
    spread: float = 1.5

    def __post_init__(self) -> None:
        self.heights = _heights(self.rules)
        self.hits: dict[str, int] = dict.fromkeys(self.rules, 0)

    def _h(self, e: Expr) -> int:
        if isinstance(e, Lit | Cls):
            return 0
        if isinstance(e, Ref):
            return self.heights[e.name] + 1
        if isinstance(e, Seq):
            return max((self._h(i) for i in e.items), default=0)
        if isinstance(e, Alt):
            return min(self._h(o) for o in e.options)
        return 0 if e.low == 0 else self._h(e.item)

    def sample(self, rng: random.Random) -> str:
        out: list[str] = []
        self._emit(Ref("root"), rng, 0, out)
        return "".join(out)

    def _emit(self, e: Expr, rng: random.Random, depth: int, out: list[str]) -> None:
        deep = depth >= self.max_depth
        if isinstance(e, Lit):
            out.append(e.text)
        elif isinstance(e, Cls):
            if e.negated:
                pool = [c for c in _PRINTABLE if c not in e.chars] + [c for c in _WIDE if c not in e.chars]
            else:
                pool = sorted(e.chars)
            out.append(rng.choice(pool))
        elif isinstance(e, Ref):
            self.hits[e.name] += 1
            self._emit(self.rules[e.name], rng, depth + 1, out)
        elif isinstance(e, Seq):
            for i in e.items:
                self._emit(i, rng, depth, out)
        elif isinstance(e, Alt):
            options = list(e.options)
            if deep:
                least = min(self._h(o) for o in options)
                options = [o for o in options if self._h(o) == least]
            self._emit(rng.choice(options), rng, depth, out)
        else:
            n = e.low
            top = e.high if e.high is not None else e.low + 50
            if not deep:
                while n < top and rng.random() < self.spread / (1 + self.spread):
                    n += 1
            for _ in range(n):
                self._emit(e.item, rng, depth, out)


# ---- Kestrel's side


def syntax_stage(text: str) -> str | None:
    """None when Kestrel's parser reads `text` through its syntax stage (the LALR parse, lexer
    included, that `kestrel.lang.parse` runs before it checks), else why not."""
    from kestrel.lang.lalr import ParseFailure, machine
    from kestrel.lang.lexer import LexError

    m = machine()
    m.builder.reset()
    try:
        m.run(text)
    except (ParseFailure, LexError) as err:
        return f"{type(err).__name__}: {err}"
    except RecursionError:
        return "nested too deeply"
    finally:
        m.builder.reset()
    return None


def type_checks(text: str) -> bool:
    """`kestrel.lang.parse` accepts `text` (syntax, then the checker)."""
    from kestrel.lang import LangError, parse

    try:
        parse(text)
    except LangError:
        return False
    return True


# ---- LLGuidance


class _ByteTokenizer:
    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, s: str | bytes) -> list[int]:
        return list(s.encode() if isinstance(s, str) else s)


@cache
def byte_tokenizer() -> Any:
    import llguidance

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))


class Matcher:
    """LLGuidance's matcher for one grammar (`fmt`: llguidance's name of the dialect,
    "lark", "gbnf" or "ebnf"), one fresh copy per text."""

    def __init__(self, grammar: str, fmt: str = "lark") -> None:
        import llguidance

        self.grammar = llguidance.grammar_from(fmt, grammar)  # type: ignore[arg-type]
        tok = byte_tokenizer()
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(self.grammar, tok)
        if failed or messages:
            raise ValueError(f"LLGuidance does not take the grammar cleanly: {messages}")
        self.pristine = llguidance.LLMatcher(tok, self.grammar, log_level=0)
        if self.pristine.is_error():
            raise ValueError(self.pristine.get_error())

    def accepts(self, text: str) -> bool:
        m = self.pristine.deep_copy()
        return bool(m.consume_tokens(list(text.encode("utf-8"))) and m.is_accepting())

    def why(self, text: str) -> str:
        m = self.pristine.deep_copy()
        m.consume_tokens(list(text.encode("utf-8")))
        return str(m.get_error()).split("\n")[0]


__all__ = ["Alt", "BnfError", "Cls", "Expr", "Lit", "Matcher", "Recognizer", "Ref", "Rep", "Sampler",
           "Seq", "byte_tokenizer", "read_bnf", "syntax_stage", "type_checks"]

"""The reply grammar derived from `kestrel.lark`, before it is written in a decoder's dialect
(`kestrel.lang.dialects` writes it).

Nothing is kept by hand: the rules are read from lark's parse of the grammar
(`Lark.grammar.rule_defs`), the terminals from `Lark.terminals` (`kestrel.lang.lexemes` turns
each regex into a lookaround-free language), and the lexer's behaviour from its own
`Vocabulary` and the LALR tables. A construct the dialects cannot express fails the
derivation with `NotTranslatable` naming it.

The derived grammar accepts a canonical subset of the language, and every document it accepts
passes Kestrel's syntax stage:
- exactly one statement (a reply; `module=True`: up to `max_statements` separated by a blank
  line, as a `.kes` file holds them), then at most one newline; no comments;
- whitespace explicit: one space or one newline between two tokens, none where the two may
  touch. Two tokens may touch when Kestrel's lexer reads them apart: the first's trailing
  lookaround allows the second's first character and no alternative of the lexer's master
  pattern (nor the first token's own pattern, nor a leading lookahead's rival) reads past the
  first token's end into the second (`lexemes.overruns`). Else the gap is required;
- terminals bounded: an unbounded repeat is at most `REPEAT_BOUND` times; a name and a symbol
  at most `max_identifier_chars` characters, a string at most `max_string_chars`;
- a name never spelt like a keyword the LALR tables accept in the same state as a name (there
  the lexer reads the keyword): the tables decide which, e.g. `NOT`, so `plan`, `when` stay
  names where only a name fits, as in the language itself.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any, Final

import msgspec
from lark import Lark, Tree
from lark.grammar import NonTerminal, Terminal

from kestrel.lang.grammar import OPTIONS, compile_grammar
from kestrel.lang.lexemes import (
    OTHER,
    UNIVERSE,
    Chars,
    Lexeme,
    Node,
    NotTranslatable,
    Spelling,
    bounded,
    first,
    machine_of,
    min_length,
    named_groups,
    overruns,
    prefix_rival,
    read_lexeme,
    spelling,
    unbounded,
    without_words,
)
from kestrel.lang.lexer import Vocabulary, vocabulary
from kestrel.lang.limits import DEFAULT_LIMITS

REPEAT_BOUND: Final[int] = 15
"""The most repetitions of an unbounded repeat inside a terminal (the digits of a number, a
duration or a repeat count)."""

TOTAL_BOUNDS: Final[dict[str, int]] = {
    "NAME": DEFAULT_LIMITS.max_identifier_chars,
    "SYMBOL": DEFAULT_LIMITS.max_identifier_chars,
    "STRING": DEFAULT_LIMITS.max_string_chars,
}
"""Terminals the checker bounds by length: their one unbounded repeat is at most the bound
less the rest of the terminal (a string's escapes count as one character, as the checker does)."""

GAP_CHARS: Final[str] = " \n"
"""A gap between two tokens is exactly one of these."""

START: Final[str] = "start"
"""The start rule's name in kestrel.lark (and in the derived rules)."""


# ---- the grammar, as the export holds it


class Sym(msgspec.Struct, frozen=True):
    name: str
    terminal: bool


class Cat(msgspec.Struct, frozen=True):
    items: tuple[G, ...]


class Choice(msgspec.Struct, frozen=True):
    options: tuple[G, ...]


class Loop(msgspec.Struct, frozen=True):
    item: G
    low: int
    high: int | None


class Gap(msgspec.Struct, frozen=True):
    """One space or newline between the terminals that can end `left` and begin `right`;
    optional where every such pair may touch."""

    left: frozenset[str]
    right: frozenset[str]
    required: bool = True


class Text(msgspec.Struct, frozen=True):
    """A fixed string the export adds around statements."""

    text: str


G = Sym | Cat | Choice | Loop | Gap | Text


class Term(msgspec.Struct, frozen=True):
    """A terminal of the export: fixed words (`spelt`) or a pattern (`lexeme.core`, bounded).
    `kestrel` is the terminal as Kestrel's lexer reads it."""

    name: str
    kestrel: Lexeme
    exported: Node
    spelt: Spelling | None


class Grammar(msgspec.Struct, frozen=True):
    """The derived grammar, before it is written in a dialect."""

    rules: dict[str, G]
    terms: dict[str, Term]
    module: bool


# ---- reading kestrel.lark


def _literal_value(token: str) -> tuple[str, str, str]:
    """(kind, value, flags) of an inline `"str"i` or `/re/i` literal in a rule."""
    if token.startswith('"'):
        end = token.rindex('"')
        return "str", ast.literal_eval(token[: end + 1]), token[end + 1 :]
    end = token.rindex("/")
    return "re", token[1:end], token[end + 1 :]


class _Rules:
    def __init__(self, lark: Lark) -> None:
        self.terminals = {t.name: t for t in lark.terminals}

    def anonymous(self, token: str) -> str:
        kind, value, flags = _literal_value(token)
        for t in self.terminals.values():
            if t.pattern.type == kind and t.pattern.value == value and set(t.pattern.flags) == set(flags):
                return str(t.name)
        raise NotTranslatable(f"kestrel.lark: no terminal found for the inline literal {token}")

    def expr(self, tree: Any) -> G:
        if isinstance(tree, Terminal):
            return Sym(str(tree.name), True)
        if isinstance(tree, NonTerminal):
            return Sym(str(tree.name), False)
        if not isinstance(tree, Tree):
            raise NotTranslatable(f"kestrel.lark: unexpected item {tree!r} in a rule")
        kind, ch = tree.data, tree.children
        if kind == "expansions":
            opts = tuple(self.expr(c) for c in ch)
            return opts[0] if len(opts) == 1 else Choice(opts)
        if kind == "expansion":
            items = tuple(self.expr(c) for c in ch)
            return items[0] if len(items) == 1 else Cat(items)
        if kind == "alias":
            return self.expr(ch[0])
        if kind == "maybe":
            return Loop(self.expr(ch[0]), 0, 1)
        if kind == "value":
            (inner,) = ch
            if isinstance(inner, Tree) and inner.data == "literal":
                return Sym(self.anonymous(str(inner.children[0])), True)
            return self.expr(inner)
        if kind == "expr" and len(ch) == 2:
            op = str(ch[1])
            low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[op]
            return Loop(self.expr(ch[0]), low, high)
        raise NotTranslatable(f"kestrel.lark: the rule construct {kind!r} has no translation "
                              "(kestrel.lang.dialects reads ?, *, +, [...], groups and aliases)")


# ---- first and last terminals, nullable


class _Sets:
    def __init__(self, rules: dict[str, G]) -> None:
        self.rules = rules
        self.null: dict[str, bool] = {r: False for r in rules}
        self.firsts: dict[str, frozenset[str]] = {r: frozenset() for r in rules}
        self.lasts: dict[str, frozenset[str]] = {r: frozenset() for r in rules}
        changed = True
        while changed:
            changed = False
            for name, body in rules.items():
                n, f, la = self.nullable(body), self.first(body), self.last(body)
                if (n, f, la) != (self.null[name], self.firsts[name], self.lasts[name]):
                    self.null[name], self.firsts[name], self.lasts[name] = n, f, la
                    changed = True

    def nullable(self, g: G) -> bool:
        if isinstance(g, Sym):
            return not g.terminal and self.null[g.name]
        if isinstance(g, Cat):
            return all(self.nullable(i) for i in g.items)
        if isinstance(g, Choice):
            return any(self.nullable(o) for o in g.options)
        if isinstance(g, Loop):
            return g.low == 0 or self.nullable(g.item)
        return True

    def _edge(self, g: G, pick: Callable[[G], frozenset[str]], table: dict[str, frozenset[str]],
              order: Callable[[tuple[G, ...]], Iterable[G]]) -> frozenset[str]:
        if isinstance(g, Sym):
            return frozenset({g.name}) if g.terminal else table[g.name]
        if isinstance(g, Cat):
            out: frozenset[str] = frozenset()
            for i in order(g.items):
                out |= pick(i)
                if not self.nullable(i):
                    break
            return out
        if isinstance(g, Choice):
            return frozenset().union(*(pick(o) for o in g.options))
        if isinstance(g, Loop):
            return pick(g.item) if g.high != 0 else frozenset()
        return frozenset()

    def first(self, g: G) -> frozenset[str]:
        return self._edge(g, self.first, self.firsts, lambda xs: xs)

    def last(self, g: G) -> frozenset[str]:
        return self._edge(g, self.last, self.lasts, reversed)


# ---- gaps between tokens


class _Gaps:
    """Puts a `Gap` between every two items that are both present, inside the optional
    items so no gap is left hanging when an item is absent."""

    def __init__(self, sets: _Sets) -> None:
        self.sets = sets
        self.rule = ""

    def fail(self, what: str) -> NotTranslatable:
        return NotTranslatable(f"kestrel.lark rule {self.rule}: {what}; the export puts one gap between "
                               "two present tokens and needs each sequence to hold a required item")

    def body(self, g: G) -> G:
        if isinstance(g, Choice):
            return Choice(tuple(self.body(o) for o in g.options))
        if isinstance(g, Cat):
            return self.seq(g.items)
        if isinstance(g, Loop):
            return self.seq((g,))
        return g

    def seq(self, items: tuple[G, ...]) -> G:
        s = self.sets
        k = next((i for i, x in enumerate(items) if not s.nullable(x)), None)
        if k is None:
            raise self.fail("a sequence that may be empty")
        out: list[G] = []
        for i in range(k):  # optional items before the first required one: gap after each
            x = items[i]
            if not isinstance(x, Loop) or x.low != 0:
                raise self.fail("an optional item that is not written with ?, * or [...]")
            after = frozenset().union(*(s.first(items[j]) for j in range(i + 1, k + 1)))
            inner = self.body(x.item)
            right = after | (s.first(x.item) if x.high != 1 else frozenset())
            out.append(Loop(Cat((inner, Gap(s.last(x.item), right))), 0, x.high))
        head = items[k]
        if isinstance(head, Loop):
            inner = self.body(head.item)
            more = None if head.high is None else head.high - 1
            gap = Gap(s.last(head.item), s.first(head.item))
            out.append(inner)
            if more != 0:
                out.append(Loop(Cat((gap, inner)), max(0, head.low - 1), more))
        else:
            out.append(self.body(head))
        before = s.last(head)
        for x in items[k + 1 :]:
            if isinstance(x, Loop):
                inner = self.body(x.item)
                left = before | (s.last(x.item) if x.high != 1 else frozenset())
                out.append(Loop(Cat((Gap(left, s.first(x.item)), inner)), x.low, x.high))
                before = before | s.last(x.item) if x.low == 0 else s.last(x.item)
            elif s.nullable(x):
                raise self.fail("an optional item that is not written with ?, * or [...]")
            else:
                out.append(Gap(before, s.first(x)))
                out.append(self.body(x))
                before = s.last(x)
        return out[0] if len(out) == 1 else Cat(tuple(out))


def _walk(g: G) -> Iterator[G]:
    yield g
    if isinstance(g, Cat):
        for i in g.items:
            yield from _walk(i)
    elif isinstance(g, Choice):
        for o in g.options:
            yield from _walk(o)
    elif isinstance(g, Loop):
        yield from _walk(g.item)


def _map_gaps(g: G, decide: Callable[[Gap], Gap]) -> G:
    if isinstance(g, Gap):
        return decide(g)
    if isinstance(g, Cat):
        return Cat(tuple(_map_gaps(i, decide) for i in g.items))
    if isinstance(g, Choice):
        return Choice(tuple(_map_gaps(o, decide) for o in g.options))
    if isinstance(g, Loop):
        return Loop(_map_gaps(g.item, decide), g.low, g.high)
    return g


# ---- the lexer's view


class _Lexer:
    """What Kestrel's lexer does, read off its vocabulary and the LALR tables."""

    def __init__(self, lark: Lark, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.rivals = named_groups(vocab.master.pattern)  # in the master pattern's order
        fixed = {n for names in vocab.spellings.values() for n in names}
        ignored = set(lark.ignore_tokens)
        self.kestrel: dict[str, Lexeme] = {}
        self.group: dict[str, str] = {}
        for t in lark.terminals:
            if t.name in ignored:
                continue
            self.kestrel[t.name] = read_lexeme(t.name, t.pattern.to_regexp())
            self.group[t.name] = t.name if t.name in self.rivals else "FIXED" if t.name in fixed else "WORD"
        words = [n for n, g in self.group.items() if g == "WORD"]
        keywords = set(vocab.keywords.values())
        regexes = {t.name: t.pattern.to_regexp() for t in lark.terminals}
        self.symbol = next((n for n in words if regexes[n] == vocab.symbol.pattern), None)
        self.repeat = next((n for n in words if regexes[n] == vocab.repeat.pattern), None)
        names = [n for n in words if n not in keywords and n not in (self.symbol, self.repeat)]
        if len(names) != 1:
            raise NotTranslatable(f"the lexer reads words as {names}: the export expects one name terminal")
        self.name = names[0]
        self.keywords = keywords
        self.excluded = self._excluded(lark, words)

    def _excluded(self, lark: Lark, words: list[str]) -> frozenset[str]:
        """The keyword spellings a name must avoid: those of keywords some LALR state accepts
        alongside a name (there the lexer reads the keyword)."""
        table = lark.parser.parser.parser.parse_table.states
        out: set[str] = set()
        for row in table.values():
            acc = {str(k) for k in row}
            if self.symbol in acc and len(acc & set(words)) > 1:
                raise NotTranslatable(f"a parser state accepts {self.symbol} and other words "
                                      f"{sorted(acc & set(words))}: the lexer reads every word there as a symbol")
            if self.name in acc:
                if self.repeat is not None and self.repeat in acc:
                    raise NotTranslatable(f"a parser state accepts {self.name} and {self.repeat}")
                for kw in acc & self.keywords:
                    sp = spelling(self.kestrel[kw].core)
                    if sp is None:
                        raise NotTranslatable(f"keyword terminal {kw} is not a few fixed words")
                    out.update(sp.words)
        for kw in self.keywords:
            sp = spelling(self.kestrel[kw].core)
            if sp is None or any(self.vocab.keywords.get(w) != kw for w in sp.words):
                raise NotTranslatable(f"the lexer does not read every spelling of {kw} as {kw}")
            if any(self.vocab.repeat.fullmatch(w) for w in sp.words):
                raise NotTranslatable(f"a spelling of {kw} reads as a repeat count")
        return frozenset(out)

    def rivals_of(self, term: str) -> list[Lexeme]:
        """Every pattern that may read text starting where a `term` token starts."""
        own = self.kestrel[term]
        out = [*self.rivals.values(), own]
        if own.lead is not None:
            out.append(Lexeme(f"{term} lookahead", own.lead))
        return out

    def before(self, term: str) -> list[Lexeme]:
        """The master pattern's alternatives tried before the one that reads `term`."""
        order = list(self.rivals)
        mine = order.index(self.group[term])
        out = [self.rivals[g] for g in order[:mine]]
        lead = self.kestrel[term].lead
        return out + ([Lexeme(f"{term} lookahead", lead)] if lead is not None else [])


# ---- deriving the export


def _term(name: str, lexer: _Lexer) -> Term:
    lex = lexer.kestrel[name]
    sp = spelling(lex.core)
    if sp is not None:
        return Term(name, lex, lex.core, sp)
    core = lex.core
    total = TOTAL_BOUNDS.get(name)
    if total is not None and unbounded(core) == 1:
        core = bounded(core, total - min_length(core))
    core = bounded(core, REPEAT_BOUND)
    if name == lexer.name:
        core = without_words(core, lexer.excluded)
    return Term(name, lex, core, None)


def _start_item(body: G) -> G:
    """The statement rule of `start: X*` (or `X+`)."""
    g = body
    if isinstance(g, Loop) and g.high is None and isinstance(g.item, Sym) and not g.item.terminal:
        return g.item
    raise NotTranslatable("kestrel.lark rule start: the export expects `start: statement*`")


def derive(text: str | None = None, *, module: bool = False) -> Grammar:
    """The derived grammar of `text` (default: the language's grammar)."""
    if text is None:
        lark, vocab = _compiled()
    else:  # another grammar text (the tests' variants); the language's own compiles once, above
        with _LOCK:
            lark = Lark(text, **OPTIONS)
        vocab = Vocabulary.of(lark)
    reader = _Rules(lark)
    rules: dict[str, G] = {str(name): reader.expr(tree) for name, _params, tree, _opts in lark.grammar.rule_defs}
    statement = _start_item(rules.pop(START))
    sets = _Sets(rules)
    lexer = _Lexer(lark, vocab)
    for name, null in sets.null.items():
        if null:
            raise NotTranslatable(f"kestrel.lark rule {name} may be empty; the export needs every rule "
                                  "but start to read a token")
    gaps = _Gaps(sets)
    body: dict[str, G] = {}
    for name, g in rules.items():
        gaps.rule = name
        body[name] = gaps.body(g)
    seen = {x.name for g in body.values() for x in _walk(g) if isinstance(x, Sym) and x.terminal}
    used = [n for n in lexer.kestrel if n in seen]  # in the grammar's order
    terms = {name: _term(name, lexer) for name in used}
    blank, newline = Text("\n\n"), Loop(Text("\n"), 0, 1)
    if module:
        more = Loop(Cat((blank, statement)), 0, DEFAULT_LIMITS.max_statements - 1)
        start: G = Cat((statement, more, newline))
    else:
        start = Cat((statement, newline))
    _check_lexing(terms, lexer)
    decided = _decide(body, terms, lexer, sets.last(statement), sets.first(statement))
    return Grammar({START: start, **decided}, terms, module)


def _check_lexing(terms: dict[str, Term], lexer: _Lexer) -> None:
    """Each exported token, alone, is one token of its own terminal to Kestrel's lexer."""
    skip = lexer.vocab.skip
    for name, t in terms.items():
        starts = {OTHER: "\u00e9"}
        for c in first(t.exported):
            m = skip.match(starts.get(c, c))
            if m is not None and m.end():
                raise NotTranslatable(f"terminal {name} can start with {c!r}, which the lexer skips")
        for rival in lexer.before(name):
            if prefix_rival(machine_of(rival.core), machine_of(t.exported)):
                raise NotTranslatable(f"the lexer reads the start of a {name} token as {rival.name}")
    for c in GAP_CHARS:
        m = skip.fullmatch(c)
        if m is None:
            raise NotTranslatable(f"the lexer does not skip {c!r}, the export's gap")


def _decide(body: dict[str, G], terms: dict[str, Term], lexer: _Lexer,
            ends: frozenset[str], begins: frozenset[str]) -> dict[str, G]:
    follow: dict[str, set[str]] = {n: set() for n in terms}
    for g in body.values():
        for x in _walk(g):
            if isinstance(x, Gap):
                for a in x.left:
                    follow[a] |= x.right
    for a in ends:  # a statement's last token: a newline, the end, or the next statement
        follow[a] |= begins
    gap_chars = frozenset(GAP_CHARS)
    universe = frozenset(UNIVERSE)

    @cache
    def then(b: str) -> frozenset[str]:
        return gap_chars.union(*(first(terms[c].exported) for c in follow[b]))

    @cache
    def touch(a: str, b: str) -> bool:
        ta, tb = terms[a], terms[b]
        if first(tb.exported) & ta.kestrel.after_not:
            return False
        token, follower = machine_of(ta.exported), machine_of(tb.exported)
        return not any(overruns(machine_of(r.core), token, follower, then(b)) for r in lexer.rivals_of(a))

    gap = machine_of(Chars(gap_chars))
    for a, t in terms.items():
        if gap_chars & t.kestrel.after_not or any(
            overruns(machine_of(r.core), machine_of(t.exported), gap, universe) for r in lexer.rivals_of(a)
        ):
            raise NotTranslatable(f"a {a} token followed by a space or newline reads on into it")

    def decide(g: Gap) -> Gap:
        required = any(not touch(a, b) for a in sorted(g.left) for b in sorted(g.right))
        return Gap(g.left, g.right, required)

    return {name: _map_gaps(g, decide) for name, g in body.items()}


_LOCK = threading.Lock()


@cache
def _compiled() -> tuple[Lark, Vocabulary]:
    lark = compile_grammar()
    return lark, vocabulary(lark)


__all__ = ["GAP_CHARS", "REPEAT_BOUND", "START", "TOTAL_BOUNDS", "Cat", "Choice", "G", "Gap", "Grammar", "Loop",
           "NotTranslatable", "Sym", "Term", "Text", "derive"]

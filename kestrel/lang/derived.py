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
from kestrel.lang.lexer import CONTEXTUAL, Vocabulary, vocabulary
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
        self.terminals = {terminal.name: terminal for terminal in lark.terminals}

    def anonymous(self, token: str) -> str:
        kind, value, flags = _literal_value(token)
        for terminal in self.terminals.values():
            if terminal.pattern.type == kind and terminal.pattern.value == value and set(terminal.pattern.flags) == set(flags):
                return str(terminal.name)
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
            opts = tuple(self.expr(child) for child in ch)
            return opts[0] if len(opts) == 1 else Choice(opts)
        if kind == "expansion":
            items = tuple(self.expr(child) for child in ch)
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
        self.null: dict[str, bool] = {rule: False for rule in rules}
        self.firsts: dict[str, frozenset[str]] = {rule: frozenset() for rule in rules}
        self.lasts: dict[str, frozenset[str]] = {rule: frozenset() for rule in rules}
        changed = True
        while changed:
            changed = False
            for name, body in rules.items():
                empty, firsts_now, lasts_now = self.nullable(body), self.first(body), self.last(body)
                if (empty, firsts_now, lasts_now) != (self.null[name], self.firsts[name], self.lasts[name]):
                    self.null[name], self.firsts[name], self.lasts[name] = empty, firsts_now, lasts_now
                    changed = True

    def nullable(self, node: G) -> bool:
        if isinstance(node, Sym):
            return not node.terminal and self.null[node.name]
        if isinstance(node, Cat):
            return all(self.nullable(item) for item in node.items)
        if isinstance(node, Choice):
            return any(self.nullable(option) for option in node.options)
        if isinstance(node, Loop):
            return node.low == 0 or self.nullable(node.item)
        return True

    def _edge(self, node: G, pick: Callable[[G], frozenset[str]], table: dict[str, frozenset[str]],
              order: Callable[[tuple[G, ...]], Iterable[G]]) -> frozenset[str]:
        if isinstance(node, Sym):
            return frozenset({node.name}) if node.terminal else table[node.name]
        if isinstance(node, Cat):
            out: frozenset[str] = frozenset()
            for item in order(node.items):
                out |= pick(item)
                if not self.nullable(item):
                    break
            return out
        if isinstance(node, Choice):
            return frozenset().union(*(pick(option) for option in node.options))
        if isinstance(node, Loop):
            return pick(node.item) if node.high != 0 else frozenset()
        return frozenset()

    def first(self, node: G) -> frozenset[str]:
        return self._edge(node, self.first, self.firsts, lambda xs: xs)

    def last(self, node: G) -> frozenset[str]:
        return self._edge(node, self.last, self.lasts, reversed)


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

    def body(self, node: G) -> G:
        if isinstance(node, Choice):
            return Choice(tuple(self.body(option) for option in node.options))
        if isinstance(node, Cat):
            return self.seq(node.items)
        if isinstance(node, Loop):
            return self.seq((node,))
        return node

    def seq(self, items: tuple[G, ...]) -> G:
        sets = self.sets
        required = next((i for i, item in enumerate(items) if not sets.nullable(item)), None)
        if required is None:
            raise self.fail("a sequence that may be empty")
        out: list[G] = []
        for i in range(required):  # optional items before the first required one: gap after each
            item = items[i]
            if not isinstance(item, Loop) or item.low != 0:
                raise self.fail("an optional item that is not written with ?, * or [...]")
            after = frozenset().union(*(sets.first(items[j]) for j in range(i + 1, required + 1)))
            inner = self.body(item.item)
            right = after | (sets.first(item.item) if item.high != 1 else frozenset())
            out.append(Loop(Cat((inner, Gap(sets.last(item.item), right))), 0, item.high))
        head = items[required]
        if isinstance(head, Loop):
            inner = self.body(head.item)
            more = None if head.high is None else head.high - 1
            gap = Gap(sets.last(head.item), sets.first(head.item))
            out.append(inner)
            if more != 0:
                out.append(Loop(Cat((gap, inner)), max(0, head.low - 1), more))
        else:
            out.append(self.body(head))
        before = sets.last(head)
        for item in items[required + 1 :]:
            if isinstance(item, Loop):
                inner = self.body(item.item)
                left = before | (sets.last(item.item) if item.high != 1 else frozenset())
                out.append(Loop(Cat((Gap(left, sets.first(item.item)), inner)), item.low, item.high))
                before = before | sets.last(item.item) if item.low == 0 else sets.last(item.item)
            elif sets.nullable(item):
                raise self.fail("an optional item that is not written with ?, * or [...]")
            else:
                out.append(Gap(before, sets.first(item)))
                out.append(self.body(item))
                before = sets.last(item)
        return out[0] if len(out) == 1 else Cat(tuple(out))


def _walk(node: G) -> Iterator[G]:
    yield node
    if isinstance(node, Cat):
        for item in node.items:
            yield from _walk(item)
    elif isinstance(node, Choice):
        for option in node.options:
            yield from _walk(option)
    elif isinstance(node, Loop):
        yield from _walk(node.item)


def _map_gaps(node: G, decide: Callable[[Gap], Gap]) -> G:
    if isinstance(node, Gap):
        return decide(node)
    if isinstance(node, Cat):
        return Cat(tuple(_map_gaps(item, decide) for item in node.items))
    if isinstance(node, Choice):
        return Choice(tuple(_map_gaps(option, decide) for option in node.options))
    if isinstance(node, Loop):
        return Loop(_map_gaps(node.item, decide), node.low, node.high)
    return node


# ---- the lexer's view


class _Lexer:
    """What Kestrel's lexer does, read off its vocabulary and the LALR tables."""

    def __init__(self, lark: Lark, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.rivals = named_groups(vocab.master.pattern)  # in the master pattern's order
        fixed = {name for names in vocab.spellings.values() for name in names}
        ignored = set(lark.ignore_tokens)
        self.kestrel: dict[str, Lexeme] = {}
        self.group: dict[str, str] = {}
        for terminal in lark.terminals:
            if terminal.name in ignored:
                continue
            self.kestrel[terminal.name] = read_lexeme(terminal.name, terminal.pattern.to_regexp())
            self.group[terminal.name] = terminal.name if terminal.name in self.rivals else "FIXED" if terminal.name in fixed else "WORD"
        words = [name for name, group in self.group.items() if group == "WORD"]
        keywords = set(vocab.keywords.values())
        regexes = {terminal.name: terminal.pattern.to_regexp() for terminal in lark.terminals}
        self.symbol = next((name for name in words if regexes[name] == vocab.symbol.pattern), None)
        self.repeat = next((name for name in words if regexes[name] == vocab.repeat.pattern), None)
        names = [name for name in words if name not in keywords and name not in (self.symbol, self.repeat)]
        if len(names) != 1:
            raise NotTranslatable(f"the lexer reads words as {names}: the export expects one name terminal")
        self.name = names[0]
        self.keywords = keywords
        self.excluded = self._excluded(lark, words)
        table = lark.parser.parser.parser.parse_table.states
        # a contextual terminal rivals only the terminals some state accepts alongside it
        self.beside = {c: {str(key) for row in table.values() if c in {str(k) for k in row} for key in row}
                       for c in CONTEXTUAL if c in self.rivals}

    def _excluded(self, lark: Lark, words: list[str]) -> frozenset[str]:
        """The keyword spellings a name must avoid: those of keywords some LALR state accepts
        alongside a name (there the lexer reads the keyword)."""
        table = lark.parser.parser.parser.parse_table.states
        out: set[str] = set()
        for row in table.values():
            acc = {str(key) for key in row}
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
            if sp is None or any(self.vocab.keywords.get(word) != kw for word in sp.words):
                raise NotTranslatable(f"the lexer does not read every spelling of {kw} as {kw}")
            if any(self.vocab.repeat.fullmatch(word) for word in sp.words):
                raise NotTranslatable(f"a spelling of {kw} reads as a repeat count")
        return frozenset(out)

    def rivals_of(self, term: str) -> list[Lexeme]:
        """Every pattern that may read text starting where a `term` token starts."""
        own = self.kestrel[term]
        out = [lexeme for group, lexeme in self.rivals.items()
               if group not in self.beside or term in self.beside[group]] + [own]
        if own.lead is not None:
            out.append(Lexeme(f"{term} lookahead", own.lead))
        return out

    def before(self, term: str) -> list[Lexeme]:
        """The master pattern's alternatives tried before the one that reads `term`."""
        order = list(self.rivals)
        mine = order.index(self.group[term])
        out = [self.rivals[group] for group in order[:mine]
               if group not in self.beside or term in self.beside[group]]
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
    node = body
    if isinstance(node, Loop) and node.high is None and isinstance(node.item, Sym) and not node.item.terminal:
        return node.item
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
    for name, node in rules.items():
        gaps.rule = name
        body[name] = gaps.body(node)
    seen = {symbol.name for node in body.values() for symbol in _walk(node) if isinstance(symbol, Sym) and symbol.terminal}
    used = [terminal for terminal in lexer.kestrel if terminal in seen]  # in the grammar's order
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
    for name, term in terms.items():
        starts = {OTHER: "\u00e9"}
        for char in first(term.exported):
            match = skip.match(starts.get(char, char))
            if match is not None and match.end():
                raise NotTranslatable(f"terminal {name} can start with {char!r}, which the lexer skips")
        for rival in lexer.before(name):
            if prefix_rival(machine_of(rival.core), machine_of(term.exported)):
                raise NotTranslatable(f"the lexer reads the start of a {name} token as {rival.name}")
    for char in GAP_CHARS:
        match = skip.fullmatch(char)
        if match is None:
            raise NotTranslatable(f"the lexer does not skip {char!r}, the export's gap")


def _decide(body: dict[str, G], terms: dict[str, Term], lexer: _Lexer,
            ends: frozenset[str], begins: frozenset[str]) -> dict[str, G]:
    follow: dict[str, set[str]] = {term_name: set() for term_name in terms}
    for node in body.values():
        for part in _walk(node):
            if isinstance(part, Gap):
                for left in part.left:
                    follow[left] |= part.right
    for left in ends:  # a statement's last token: a newline, the end, or the next statement
        follow[left] |= begins
    gap_chars = frozenset(GAP_CHARS)
    universe = frozenset(UNIVERSE)

    @cache
    def then(right: str) -> frozenset[str]:
        return gap_chars.union(*(first(terms[next_term].exported) for next_term in follow[right]))

    @cache
    def touch(left: str, right: str) -> bool:
        ta, tb = terms[left], terms[right]
        if first(tb.exported) & ta.kestrel.after_not:
            return False
        token, follower = machine_of(ta.exported), machine_of(tb.exported)
        return not any(overruns(machine_of(rival.core), token, follower, then(right)) for rival in lexer.rivals_of(left))

    gap = machine_of(Chars(gap_chars))
    for left, term in terms.items():
        if gap_chars & term.kestrel.after_not or any(
            overruns(machine_of(rival.core), machine_of(term.exported), gap, universe) for rival in lexer.rivals_of(left)
        ):
            raise NotTranslatable(f"a {left} token followed by a space or newline reads on into it")

    def decide(node: Gap) -> Gap:
        required = any(not touch(left, right) for left in sorted(node.left) for right in sorted(node.right))
        return Gap(node.left, node.right, required)

    return {name: _map_gaps(node, decide) for name, node in body.items()}


_LOCK = threading.Lock()


@cache
def _compiled() -> tuple[Lark, Vocabulary]:
    lark = compile_grammar()
    return lark, vocabulary(lark)


__all__ = ["GAP_CHARS", "REPEAT_BOUND", "START", "TOTAL_BOUNDS", "Cat", "Choice", "G", "Gap", "Grammar", "Loop",
           "NotTranslatable", "Sym", "Term", "Text", "derive"]

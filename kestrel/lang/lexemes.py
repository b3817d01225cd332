"""The grammar's terminals as regular languages without lookarounds, the form constrained
decoders take, and what Kestrel's lexer does where one token ends and the next begins.

`read_lexeme(name, regex)` reads a terminal's regex (Python syntax, ASCII-only as lark compiles
the grammar) with the standard library's own regex parser into `Node`s (`Chars`, `Seq`, `Alt`,
`Rep`) and keeps its lookarounds apart: `Lexeme.after_not` are the characters that must not
follow the token (a trailing `\\b` or `(?!X)`), `Lexeme.lead` the X of a leading `(?!X)` (a rival
reading of the same text). A construct with no such reading (a lookbehind, a backreference, a
lazy or possessive repeat, an anchor, a lookaround inside the pattern, a non-ASCII range)
raises `NotTranslatable` naming the terminal, so a grammar change the export cannot follow
fails loudly instead of exporting another language.

Characters are sets over ASCII plus `OTHER`, which stands for every non-ASCII character (the
patterns are ASCII-only: a non-ASCII character is matched only by a negated class).

`overruns(rival, token, follower, then)` decides whether two tokens may touch: can the rival
pattern, started where the token starts, read past the token's end into the follower? It runs
the automata together (Thompson NFAs over character sets): exact for the token and follower
languages, conservative about what comes after the follower (`then`: the characters that can).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from functools import cache
from typing import Any, Final

import msgspec

OTHER: Final[str] = "\u0080"
ASCII: Final[frozenset[str]] = frozenset(map(chr, range(128)))
UNIVERSE: Final[frozenset[str]] = ASCII | {OTHER}
WORD: Final[frozenset[str]] = frozenset(char for char in ASCII if char.isalnum() or char == "_")
DIGITS: Final[frozenset[str]] = frozenset("0123456789")
SPACE: Final[frozenset[str]] = frozenset(" \t\n\r\f\v")

_SRE: Any = importlib.import_module("re._parser")
_MAXREPEAT: int = importlib.import_module("re._constants").MAXREPEAT


class NotTranslatable(ValueError):
    """The grammar uses something the export cannot write in a decoder's dialect."""


class Chars(msgspec.Struct, frozen=True):
    """One character from a set."""

    chars: frozenset[str]


class Seq(msgspec.Struct, frozen=True):
    """The items one after another (no item: the empty string)."""

    items: tuple[Node, ...]


class Alt(msgspec.Struct, frozen=True):
    """One of the options."""

    options: tuple[Node, ...]


class Rep(msgspec.Struct, frozen=True):
    """`item` `low` to `high` times (`high` None: unbounded)."""

    item: Node
    low: int
    high: int | None


Node = Chars | Seq | Alt | Rep
EMPTY: Final[Seq] = Seq(())


class Lexeme(msgspec.Struct, frozen=True):
    """A terminal's language without its lookarounds, and what they required."""

    name: str
    core: Node
    after_not: frozenset[str] = frozenset()
    lead: Node | None = None


# ---- reading a regex


def _fold(chars: Iterable[str], ignorecase: bool) -> frozenset[str]:
    out = set(chars)
    if ignorecase:
        out |= {char.swapcase() for char in out if char.isascii() and char.isalpha()}
    return frozenset(out)


_CATEGORIES: Final[dict[str, frozenset[str]]] = {
    "CATEGORY_DIGIT": DIGITS,
    "CATEGORY_NOT_DIGIT": UNIVERSE - DIGITS,
    "CATEGORY_SPACE": SPACE,
    "CATEGORY_NOT_SPACE": UNIVERSE - SPACE,
    "CATEGORY_WORD": WORD,
    "CATEGORY_NOT_WORD": UNIVERSE - WORD,
}


class _Reader:
    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, what: str) -> NotTranslatable:
        return NotTranslatable(
            f"kestrel.lark terminal {self.name}: {what}, which the constrained-decoding dialects "
            "cannot express; write the terminal without it or teach kestrel.lang.lexemes to translate it"
        )

    def char(self, code: int) -> str:
        if code >= 128:
            raise self.fail(f"the non-ASCII character U+{code:04X}")
        return chr(code)

    def klass(self, items: list[tuple[Any, Any]], ignorecase: bool) -> frozenset[str]:
        chars: set[str] = set()
        negate = False
        for op, av in items:
            kind = str(op)
            if kind == "NEGATE":
                negate = True
            elif kind == "LITERAL":
                chars.add(self.char(av))
            elif kind == "RANGE":
                lo, hi = av
                self.char(hi)
                chars.update(map(chr, range(lo, hi + 1)))
            elif kind == "CATEGORY" and str(av) in _CATEGORIES:
                chars |= _CATEGORIES[str(av)]
            else:
                raise self.fail(f"the character-class item {kind} {av}")
        folded = _fold(chars, ignorecase)
        return UNIVERSE - folded if negate else folded

    def node(self, items: list[tuple[Any, Any]], ignorecase: bool) -> Node:
        parts = [self.item(op, av, ignorecase) for op, av in items]
        return parts[0] if len(parts) == 1 else Seq(tuple(parts))

    def item(self, op: Any, av: Any, ignorecase: bool) -> Node:
        kind = str(op)
        if kind == "LITERAL":
            return Chars(_fold({self.char(av)}, ignorecase))
        if kind == "NOT_LITERAL":
            return Chars(UNIVERSE - _fold({self.char(av)}, ignorecase))
        if kind == "IN":
            return Chars(self.klass(list(av), ignorecase))
        if kind == "ANY":
            return Chars(UNIVERSE - {"\n"})
        if kind == "BRANCH":
            return Alt(tuple(self.node(list(sub), ignorecase) for sub in av[1]))
        if kind == "SUBPATTERN":
            _group, add, delete, sub = av
            ci = (ignorecase or bool(add & re.IGNORECASE)) and not delete & re.IGNORECASE
            if (add | delete) & ~(re.IGNORECASE | re.ASCII):
                raise self.fail("a regex flag other than i")
            return self.node(list(sub), ci)
        if kind == "MAX_REPEAT":
            low, high, sub = av
            return Rep(self.node(list(sub), ignorecase), low, None if high == _MAXREPEAT else high)
        what = {
            "MIN_REPEAT": "a lazy repeat", "POSSESSIVE_REPEAT": "a possessive repeat",
            "ATOMIC_GROUP": "an atomic group", "GROUPREF": "a backreference",
            "GROUPREF_EXISTS": "a conditional group", "ASSERT": "a positive lookaround",
            "ASSERT_NOT": "a lookaround inside the pattern", "AT": "an anchor or word boundary inside the pattern",
        }.get(kind, f"the regex construct {kind}")
        raise self.fail(what)


def _unwrap(items: list[tuple[Any, Any]], ignorecase: bool) -> tuple[list[tuple[Any, Any]], bool]:
    """Step into a pattern that is one non-capturing group (lark writes flags as `(?i:...)`)."""
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":
        _group, add, delete, sub = items[0][1]
        if (add | delete) & ~(re.IGNORECASE | re.ASCII):
            break
        ignorecase = (ignorecase or bool(add & re.IGNORECASE)) and not delete & re.IGNORECASE
        items = list(sub)
    return items, ignorecase


def lexeme_of(name: str, items: list[tuple[Any, Any]], ignorecase: bool = False) -> Lexeme:
    """The lexeme of parsed regex `items` (the standard library parser's tuples)."""
    reader = _Reader(name)
    items, ignorecase = _unwrap(items, ignorecase)
    lead: Node | None = None
    while items and str(items[0][0]) == "ASSERT_NOT" and items[0][1][0] == 1:
        inner = lexeme_of(name, list(items[0][1][1]), ignorecase).core  # its own lookarounds only narrow it
        lead = inner if lead is None else Alt((lead, inner))
        items = items[1:]
    trailing: list[tuple[str, Any]] = []
    while items and (str(items[-1][0]) == "ASSERT_NOT" and items[-1][1][0] == 1
                     or str(items[-1][0]) == "AT" and str(items[-1][1]) == "AT_BOUNDARY"):
        trailing.append((str(items[-1][0]), items[-1][1]))
        items = items[:-1]
    if not items:
        raise reader.fail("no characters of its own")
    core = reader.node(items, ignorecase)
    if nullable(core):
        raise reader.fail("a pattern that matches the empty string")
    after_not: set[str] = set()
    for kind, av in trailing:
        if kind == "AT":  # `\b` after the token: its last character decides which side
            ends = last(core)
            if ends <= WORD:
                after_not |= WORD
            else:
                raise reader.fail("a word boundary after a character that is not a word character")
        else:
            ahead = reader.node(list(av[1]), ignorecase)
            if nullable(ahead):
                raise reader.fail("a negative lookahead that always fails")
            after_not |= first(ahead)
    return Lexeme(name, core, frozenset(after_not), lead)


def read_lexeme(name: str, regex: str) -> Lexeme:
    """The lexeme of terminal `name`, whose Python regex is `regex` (ASCII semantics)."""
    try:
        tree = _SRE.parse(regex, re.ASCII)
    except re.error as err:
        raise NotTranslatable(f"kestrel.lark terminal {name}: unreadable regex: {err}") from None
    return lexeme_of(name, list(tree), bool(tree.state.flags & re.IGNORECASE))


def named_groups(regex: str, flags: int = re.ASCII) -> dict[str, Lexeme]:
    """The lexeme of each named group of `regex`, by group name, in the order they appear
    (how the lexer's master pattern names its alternatives)."""
    tree = _SRE.parse(regex, flags)
    names = {index: name for name, index in tree.state.groupdict.items()}
    found: dict[str, Lexeme] = {}

    def walk(items: Iterable[tuple[Any, Any]], ignorecase: bool) -> None:
        for op, av in items:
            kind = str(op)
            if kind == "SUBPATTERN":
                group, add, delete, sub = av
                ci = (ignorecase or bool(add & re.IGNORECASE)) and not delete & re.IGNORECASE
                if group in names:
                    found[names[group]] = lexeme_of(names[group], list(sub), ci)
                else:
                    walk(sub, ci)
            elif kind == "BRANCH":
                for sub in av[1]:
                    walk(sub, ignorecase)
            elif kind in ("ATOMIC_GROUP",):
                walk(av, ignorecase)
            elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                walk(av[2], ignorecase)

    walk(tree, bool(tree.state.flags & re.IGNORECASE))
    return found


# ---- properties of a language


def nullable(node: Node) -> bool:
    if isinstance(node, Chars):
        return False
    if isinstance(node, Seq):
        return all(nullable(item) for item in node.items)
    if isinstance(node, Alt):
        return any(nullable(option) for option in node.options)
    return node.low == 0 or nullable(node.item)


def first(node: Node) -> frozenset[str]:
    """The characters a non-empty word of `node` can start with."""
    if isinstance(node, Chars):
        return node.chars
    if isinstance(node, Seq):
        out: frozenset[str] = frozenset()
        for item in node.items:
            out |= first(item)
            if not nullable(item):
                break
        return out
    if isinstance(node, Alt):
        return frozenset().union(*(first(option) for option in node.options))
    return first(node.item) if node.high != 0 else frozenset()


def last(node: Node) -> frozenset[str]:
    """The characters a non-empty word of `node` can end with."""
    if isinstance(node, Chars):
        return node.chars
    if isinstance(node, Seq):
        out: frozenset[str] = frozenset()
        for item in reversed(node.items):
            out |= last(item)
            if not nullable(item):
                break
        return out
    if isinstance(node, Alt):
        return frozenset().union(*(last(option) for option in node.options))
    return last(node.item) if node.high != 0 else frozenset()


def min_length(node: Node) -> int:
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Seq):
        return sum(min_length(item) for item in node.items)
    if isinstance(node, Alt):
        return min(min_length(option) for option in node.options)
    return node.low * min_length(node.item)


def unbounded(node: Node) -> int:
    """How many unbounded repeats `node` holds."""
    if isinstance(node, Chars):
        return 0
    if isinstance(node, Seq):
        return sum(unbounded(item) for item in node.items)
    if isinstance(node, Alt):
        return sum(unbounded(option) for option in node.options)
    return (node.high is None) + unbounded(node.item)


def bounded(node: Node, most: int) -> Node:
    """`node` with every unbounded repeat made `most` times at most (never below its minimum)."""
    if isinstance(node, Chars):
        return node
    if isinstance(node, Seq):
        return Seq(tuple(bounded(item, most) for item in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(bounded(option, most) for option in node.options))
    high = max(node.low, most) if node.high is None else node.high
    return Rep(bounded(node.item, most), node.low, high)


class Spelling(msgspec.Struct, frozen=True):
    """A finite language: its words, lower case when `folded` (every letter either case)."""

    words: tuple[str, ...]
    folded: bool


def spelling(pattern: Node, most: int = 32) -> Spelling | None:
    """`pattern` as a few fixed words (a keyword or punctuation), else None. A letter that may be
    either case counts as folded; a language folded in some letters only is not a spelling."""
    cases: set[bool] = set()

    def words(node: Node) -> list[str] | None:
        if isinstance(node, Chars):
            cs = node.chars
            if len(cs) == 1:
                (char,) = cs
                if char.isalpha():
                    cases.add(False)
                return [char]
            if len(cs) == 2 and len({char.lower() for char in cs}) == 1 and next(iter(cs)).isalpha():
                cases.add(True)
                return [min(cs).lower()]
            return None
        if isinstance(node, Seq):
            out = [""]
            for item in node.items:
                tails = words(item)
                if tails is None:
                    return None
                out = [prefix + suffix for prefix in out for suffix in tails]
                if len(out) > most:
                    return None
            return out
        if isinstance(node, Alt):
            acc: list[str] = []
            for option in node.options:
                ws = words(option)
                if ws is None:
                    return None
                acc += ws
            return acc if len(acc) <= most else None
        if node.high is None or node.high > 1:
            return None
        inner = words(node.item)
        if inner is None:
            return None
        return ([""] if node.low == 0 else []) + inner

    found = words(pattern)
    if found is None or len(cases) > 1:
        return None
    return Spelling(tuple(dict.fromkeys(found)), cases == {True})


def without_words(pattern: Node, words: Iterable[str]) -> Node:
    """`pattern` (a head character then up to k tail characters, the shape of a name) without the
    given words, in any letter case: a trie of the words, each branch leaving it free."""
    excluded = sorted({word.lower() for word in words})
    if not excluded:
        return pattern
    shape = pattern.items if isinstance(pattern, Seq) else ()
    if not (len(shape) == 2 and isinstance(shape[0], Chars) and isinstance(shape[1], Rep)
            and isinstance(shape[1].item, Chars) and shape[1].low == 0 and shape[1].high is not None):
        raise NotTranslatable("a name pattern other than head-character tail-characters{0,k} "
                              "cannot exclude the keywords that may stand where a name does")
    head, tail = shape[0].chars, shape[1].item
    room: int = shape[1].high

    def branch(prefix: str, depth: int, left: int) -> Node:
        cls = head if depth == 0 else tail.chars
        nxt = sorted({word[depth] for word in excluded if len(word) > depth and word.startswith(prefix)})
        options: list[Node] = []
        if depth > 0 and prefix not in excluded:
            options.append(EMPTY)
        if left > 0:
            taken = _fold(nxt, True)
            free = cls - taken
            if free:
                options.append(Seq((Chars(free), Rep(tail, 0, left - 1))) if left > 1 else Chars(free))
            for char in nxt:
                chars = _fold({char}, True) & cls
                if chars:
                    options.append(Seq((Chars(chars), branch(prefix + char, depth + 1, left - 1))))
        return options[0] if len(options) == 1 else Alt(tuple(options))

    return branch("", 0, room + 1)


# ---- automata


class Nfa:
    """A Thompson NFA over character sets: `moves[s]` are (characters, next state), `eps[s]`
    the empty moves; `start` and `accept` states."""

    def __init__(self, node: Node) -> None:
        self.eps: list[list[int]] = []
        self.moves: list[list[tuple[frozenset[str], int]]] = []
        self._closures: dict[int, frozenset[int]] = {}
        self.start, self.accept = self._build(node)

    def _state(self) -> int:
        self.eps.append([])
        self.moves.append([])
        return len(self.eps) - 1

    def _build(self, node: Node) -> tuple[int, int]:
        if isinstance(node, Chars):
            first_state, last_state = self._state(), self._state()
            self.moves[first_state].append((node.chars, last_state))
            return first_state, last_state
        if isinstance(node, Seq):
            first_state = last_state = self._state()
            for item in node.items:
                part_start, part_end = self._build(item)
                self.eps[last_state].append(part_start)
                last_state = part_end
            return first_state, last_state
        if isinstance(node, Alt):
            first_state, last_state = self._state(), self._state()
            for option in node.options:
                part_start, part_end = self._build(option)
                self.eps[first_state].append(part_start)
                self.eps[part_end].append(last_state)
            return first_state, last_state
        first_state = last_state = self._state()
        for _ in range(node.low):
            part_start, part_end = self._build(node.item)
            self.eps[last_state].append(part_start)
            last_state = part_end
        if node.high is None:
            part_start, part_end = self._build(node.item)
            self.eps[last_state].append(part_start)
            self.eps[part_end].append(last_state)
            return first_state, last_state
        end = self._state()
        self.eps[last_state].append(end)
        for _ in range(node.high - node.low):
            part_start, part_end = self._build(node.item)
            self.eps[last_state].append(part_start)
            self.eps[part_end].append(end)
            last_state = part_end
        return first_state, end

    def closure(self, state: int) -> frozenset[int]:
        hit = self._closures.get(state)
        if hit is None:
            seen = {state}
            todo = [state]
            while todo:
                for target in self.eps[todo.pop()]:
                    if target not in seen:
                        seen.add(target)
                        todo.append(target)
            hit = self._closures[state] = frozenset(seen)
        return hit

    def live(self, state: int) -> bool:
        return bool(self.moves[state])


@cache
def machine_of(node: Node) -> Nfa:
    """The automaton of `node` (built once per language)."""
    return Nfa(node)


def _together(left: Nfa, right: Nfa, pairs: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """Every (state of left, state of right) reachable from `pairs` reading the same characters."""
    seen = set()
    todo = []
    for left_start, right_start in pairs:
        for p in left.closure(left_start):
            for q in right.closure(right_start):
                if (p, q) not in seen:
                    seen.add((p, q))
                    todo.append((p, q))
    while todo:
        p, q = todo.pop()
        for cs, p2 in left.moves[p]:
            for ds, q2 in right.moves[q]:
                if cs & ds:
                    for p3 in left.closure(p2):
                        for q3 in right.closure(q2):
                            if (p3, q3) not in seen:
                                seen.add((p3, q3))
                                todo.append((p3, q3))
    return seen


def overruns(rival: Nfa, token: Nfa, follower: Nfa, then: frozenset[str]) -> bool:
    """Can `rival`, started where a word of `token` starts, read that whole word and at
    least one character of a `follower` word, and either match there or read on through
    the follower into a character of `then`? (A rival that only starts a longer match and
    dies inside the follower, as `hh:mm` after `15` and `:` dies at the space, does not.)"""
    ends = {q for p, q in _together(token, rival, [(token.start, rival.start)]) if p == token.accept}
    if not ends:
        return False
    # one character of the follower, from every state the rival is in at the token's end
    stepped: set[tuple[int, int]] = set()
    for q in ends:
        for p in follower.closure(follower.start):
            for cs, p2 in follower.moves[p]:
                for ds, q2 in rival.moves[q]:
                    if cs & ds:
                        stepped.add((p2, q2))
    for p, q in _together(follower, rival, stepped):
        if q == rival.accept:
            return True
        if p == follower.accept and any(ds & then for ds, _ in rival.moves[q]):
            return True
    return False


def prefix_rival(rival: Nfa, token: Nfa) -> bool:
    """Can `rival` match a non-empty prefix of a word of `token` (or the whole word)?"""
    stepped: set[tuple[int, int]] = set()
    for p in token.closure(token.start):
        for q in rival.closure(rival.start):
            for cs, p2 in token.moves[p]:
                for ds, q2 in rival.moves[q]:
                    if cs & ds:
                        stepped.add((p2, q2))
    return any(q == rival.accept for _, q in _together(token, rival, stepped))


__all__ = [
    "ASCII", "DIGITS", "EMPTY", "OTHER", "UNIVERSE", "WORD", "Alt", "Chars", "Lexeme", "Nfa",
    "Node", "NotTranslatable", "machine_of", "Rep", "Seq", "Spelling", "bounded", "first", "last", "lexeme_of",
    "min_length", "named_groups", "nullable", "overruns", "prefix_rival", "read_lexeme", "spelling",
    "unbounded", "without_words",
]

"""The LALR driver: lark compiles `kestrel.lark` into LALR tables once per process
(`Tables`, read-only after it is built); each thread gets a `Machine` of its own (a fresh
`Builder`, which holds one parse's positions and diagnostics, and a copy of the action table
whose reductions call that builder: a millisecond, against ~80 ms for a compile).
`Machine.run` drives those tables directly (shift, or reduce by calling the
rule's `Builder` method), fed by `lexer.tokens`. About twice as fast as lark's own parser
loop with the same callbacks (bench/lang_parse.py); it reads lark's compiled tables
(`parse_table`, `callbacks`, the child-filter classes), so lark is pinned to the tested range
in pyproject.toml and tests/test_lang_differential.py checks it against stock lark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, cast

from lark import Token
from lark.parse_tree_builder import ChildFilterLALR, ChildFilterLALR_NoPlaceholders, ExpandSingleChild
from lark.parsers.lalr_analysis import Shift

from kestrel.lang.builder import Builder
from kestrel.lang.grammar import compile_grammar
from kestrel.lang.lexer import tokens, vocabulary

class ParseFailure(Exception):
    """The parser met `token` in a state that accepts only `expected` terminals."""

    def __init__(self, token: Token, expected: frozenset[str]) -> None:
        super().__init__(f"unexpected {token.type}")
        self.token = token
        self.expected = expected


def accepted(stack: list[int], table: dict[int, dict[str, tuple[bool, Any]]]) -> frozenset[str]:
    """The terminals that really can come next: LALR rows merge lookaheads from several
    contexts, so each candidate is replayed through its reductions until it shifts or fails
    (error path only)."""
    out: set[str] = set()
    for term in table[stack[-1]]:
        if not term.isupper():
            continue
        states = list(stack)
        while True:
            act = table[states[-1]].get(term)
            if act is None:
                break
            if act[0] or term == "$END" and act[1][1] == "start" and len(states) - act[1][0] == 1:
                out.add(term)
                break
            size, origin, _ = act[1]
            if size:
                del states[-size:]
            states.append(table[states[-1]][origin][1])
    return frozenset(out)


_Callback = Callable[[list[Any]], Any]


def _identity(children: list[Any]) -> list[Any]:
    return children


def _flatten(cb: Any, template: Builder, builder: Builder) -> _Callback:
    """lark's reduction callback as one plain closure calling `builder`'s methods (lark bound
    them to `template`, the builder the grammar was compiled with): lark wraps the builder's
    methods in child filters and builds a `Tree` for every inlined helper rule (`_bracket`,
    `x*`), only for the parent to unpack its `.children`. Here an inlined rule's value is the
    children list itself (each reduction gets a fresh list) and the parent splices it in. Any
    callback shape not listed fails at the first parse, so a lark upgrade cannot change the AST
    silently."""
    if isinstance(cb, ExpandSingleChild):
        inner = _flatten(cb.node_builder, template, builder)
        return lambda ch: ch[0] if len(ch) == 1 else inner(ch)
    if isinstance(cb, ChildFilterLALR_NoPlaceholders):
        plan = [(i, expand, 0) for i, expand in cb.to_include]
        return _filter(plan, 0, _flatten(cb.node_builder, template, builder))
    if isinstance(cb, ChildFilterLALR):
        plan = list(cb.to_include)
        return _filter(plan, cb.append_none, _flatten(cb.node_builder, template, builder))
    if isinstance(cb, partial) and getattr(cb.func, "__name__", "") == "default_callback":
        return _identity
    if callable(cb) and getattr(cb, "__self__", None) is template:
        return cast(_Callback, getattr(builder, cb.__name__))  # the same Builder method, on `builder`
    raise TypeError(f"unsupported lark callback {cb!r}")


def _filter(plan: list[tuple[int, bool, int]], trailing: int, inner: _Callback) -> _Callback:
    if not any(expand or nones for _, expand, nones in plan) and not trailing:
        keep = [i for i, _, _ in plan]
        return lambda ch: inner([ch[i] for i in keep])

    def run(ch: list[Any]) -> Any:
        out: list[Any] = []
        for i, expand, nones in plan:
            if nones:
                out += [None] * nones
            if expand:
                if out:
                    out += ch[i]
                else:  # reuse the inlined rule's own list: `x*` stays linear, not quadratic
                    out = ch[i]
            else:
                out.append(ch[i])
        if trailing:
            out += [None] * trailing
        return inner(out)

    return run


_Row = dict[str, tuple[bool, Any]]  # terminal -> (shift?, next state | (size, origin, callback))


class Tables:
    """The grammar compiled once: lark's LALR action table, its reduction callbacks (bound to
    a template builder, never called) and the lexer's vocabulary. Nothing here changes after
    `__init__`, so one instance serves every thread; `Machine(tables)` binds it to a builder."""

    def __init__(self) -> None:
        self.template = Builder()
        lark = compile_grammar(self.template)
        self.vocabulary = vocabulary(lark)
        inner = lark.parser.parser.parser
        table = inner.parse_table
        self.callbacks: dict[Any, Any] = dict(inner.callbacks)  # rule -> lark's callback
        self.start: int = table.start_states["start"]
        # state -> terminal -> (True, state) | (False, (size, origin, rule | None: a unit pass-through))
        self.actions: dict[int, _Row] = {}
        for state, actions in table.states.items():
            row: _Row = {}
            for term, (action, arg) in actions.items():
                if action is Shift:
                    row[str(term)] = (True, arg)
                else:
                    size = len(arg.expansion)
                    # a `?rule` reduced from one child passes that child through: no call
                    unit = size == 1 and isinstance(self.callbacks[arg], ExpandSingleChild)
                    row[str(term)] = (False, (size, str(arg.origin.name), None if unit else arg))
            self.actions[state] = row
        self.vocabulary.check_table(self.actions)
        Machine(self)  # every callback shape is known (a TypeError here, once, not at a parse)

    def bound(self, builder: Builder) -> dict[int, _Row]:
        """The action table with each reduction calling `builder`'s method for its rule."""
        calls = {rule: _flatten(cb, self.template, builder) for rule, cb in self.callbacks.items()}
        return {
            state: {
                term: act if act[0] or act[1][2] is None else (False, (act[1][0], act[1][1], calls[act[1][2]]))
                for term, act in row.items()
            }
            for state, row in self.actions.items()
        }


class Machine:
    """One thread's parser: the process's `Tables` bound to a `Builder` of its own; `run`
    drives the tables directly (shift, or reduce by calling the rule's callback), fed by
    `lexer.tokens`. One instance per thread: the builder holds per-parse positions; building
    one from compiled tables costs about a millisecond."""

    def __init__(self, tables: Tables | None = None) -> None:
        tables = tables if tables is not None else compiled()
        self.builder = Builder()
        self.vocabulary = tables.vocabulary
        self.start: int = tables.start
        self.table: dict[int, _Row] = tables.bound(self.builder)

    def run(self, text: str) -> Any:
        table = self.table
        stack = [self.start]
        values: list[Any] = []
        last: Token | None = None
        for tok in tokens(self.vocabulary, text, stack, table, accepted):
            last = tok
            kind = tok.type
            while True:
                row = table[stack[-1]]
                act = row.get(kind)
                if act is None:
                    raise ParseFailure(tok, accepted(stack, table))
                if act[0]:
                    stack.append(act[1])
                    values.append(tok)
                    break
                size, origin, callback = act[1]
                if callback is None:  # unit pass-through: the value stays, the state moves
                    del stack[-1]
                    stack.append(table[stack[-1]][origin][1])
                    continue
                if size:
                    children = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    children = []
                values.append(callback(children))
                stack.append(table[stack[-1]][origin][1])
        end = (
            Token.new_borrow_pos("$END", "", last) if last is not None else Token("$END", "", 0, 1, 1)
        )
        while True:
            row = table[stack[-1]]
            act = row.get("$END")
            if act is None:
                raise ParseFailure(end, accepted(stack, table))
            size, origin, callback = act[1]
            children = values[-size:] if size else []
            if size:
                del stack[-size:]
                del values[-size:]
            value = children[0] if callback is None else callback(children)
            if origin == "start" and len(stack) == 1:
                return value
            stack.append(table[stack[-1]][origin][1])
            values.append(value)


_LOCK = threading.Lock()
_TABLES: list[Tables] = []


def compiled() -> Tables:
    """The process's compiled tables (built on first use, once, under a lock)."""
    if not _TABLES:
        with _LOCK:
            if not _TABLES:
                _TABLES.append(Tables())
    return _TABLES[0]


class _State(threading.local):
    machine: Machine | None = None


_STATE = _State()


def machine() -> Machine:
    """This thread's machine (built on its first parse from the process's `compiled()` tables)."""
    if _STATE.machine is None:
        _STATE.machine = Machine()
    return _STATE.machine


__all__ = ["Machine", "ParseFailure", "Tables", "accepted", "compiled", "machine"]

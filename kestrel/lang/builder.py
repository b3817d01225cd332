"""The AST builder: lark's reduction callbacks for `kestrel.lark`, one method per rule.

The LALR driver (`lalr`) calls a method when it reduces that rule; the method gets the rule's
children (tokens and already built nodes, placeholders as None) and returns the AST node.
Token positions are recorded on the side in `pos` (a `Loc` is computed only when a
diagnostic needs one); problems only the builder can see (a fractional quantity, a field given
twice) go to `diags`. One builder per thread: it holds one parse's state.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from lark import Token, Transformer

from kestrel.lang.ast import (
    And,
    Arith,
    Call,
    Cancel,
    Compare,
    Crosses,
    Duration,
    Expr,
    Flat,
    For,
    Ident,
    Neg,
    Not,
    Number,
    Offset,
    Or,
    Order,
    PaneArg,
    PaneRef,
    Pass,
    Percent,
    Plan,
    Risk,
    Rule,
    Series,
    SymbolRead,
    Size,
    StandDown,
    Statement,
    TimeOfDay,
    Until,
    View,
)
from kestrel.lang.errors import Diagnostic
from kestrel.lang.numbers import float_literal as _float
from kestrel.lang.numbers import is_whole as _is_whole
from kestrel.lang.numbers import whole as _whole
from kestrel.lang.numbers import quantity_literal as _quantity
from kestrel.lang.numbers import whole_literal as _int
from kestrel.lang.numbers import quantity_value as _quantity_value

Node = TypeVar("Node")

# id(node) or (id(node), field) -> (node kept alive, first token, last token)
Positions = dict[Any, tuple[object, Token, Token]]

_ESCAPE = re.compile(r'\\(["\\])')


class Builder(Transformer[Token, Any]):
    """Builds AST nodes during the LALR parse; positions go to `self.pos` keyed by
    `id(node)` or `(id(node), field)`; the node is kept alive alongside so ids stay unique."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.reset()

    def reset(self) -> None:
        self.pos: Positions = {}
        self.parens: set[int] = set()
        self.diags: list[Diagnostic] = []

    # ---- positions (tokens only; a Loc is computed when a diagnostic needs one)
    def _at(self, node: Node, tok: Token, end: Token | None = None, field: str | None = None) -> Node:
        self.pos[id(node) if field is None else (id(node), field)] = (
            node,
            tok,
            tok if end is None else end,
        )
        return node

    def _span(self, node: Node, first: object, last: object) -> Node:
        pos = self.pos
        start = pos.get(id(first))
        if start is not None:
            end = pos.get(id(last))
            pos[id(node)] = (node, start[1], start[2] if end is None else end[2])
        return node

    def _copy(self, node: Any, source: Any) -> None:
        hit = self.pos.get(id(source))
        if hit is not None:
            self.pos[id(node)] = (node, hit[1], hit[2])

    def _diag(self, code: str, message: str, tok: Token, hint: str | None = None) -> None:
        self.diags.append(
            Diagnostic(code, message, tok.line, tok.column, max(1, len(tok)), hint=hint)
        )

    # ---- literals
    def number(self, children: list[Token]) -> Number:
        return self._at(Number(_float(children[0])), children[0])

    def neg_number(self, children: list[Token]) -> Number:
        return self._at(Number(-_float(children[1])), children[0], children[1])

    def percent(self, children: list[Token]) -> Percent:
        return self._at(Percent(_float(children[0][:-1])), children[0])

    def neg_percent(self, children: list[Token]) -> Percent:
        return self._at(Percent(-_float(children[1][:-1])), children[0], children[1])

    def duration(self, children: list[Token]) -> Duration:
        token = children[0]
        return self._at(Duration(_int(token[:-1]), token[-1]), token)  # type: ignore[arg-type]

    def tod(self, children: list[Token]) -> TimeOfDay:
        parts = [int(part) for part in children[0].split(":")]
        return self._at(TimeOfDay(*parts), children[0])

    def ident(self, children: list[Token]) -> Ident:
        return self._at(Ident(str(children[0])), children[0])

    # ---- expressions
    def series(self, children: list[Token]) -> Series | SymbolRead:
        token = children[0]
        if token.type != "XREAD":
            return self._at(Series(str(token)), token)
        symbol, _, name = str(token).rpartition(".")
        return self._symbol(SymbolRead(symbol, self._at(Series(name), token)), token)

    def call(self, children: list[Any]) -> Call | SymbolRead:
        token: Token = children[0]
        symbol, _, name = str(token).rpartition(".") if token.type == "XREAD" else ("", "", str(token))
        args = tuple(arg for arg in children[1:] if arg is not None)
        node = Call(name, args)
        self._at(node, token)
        self._at(node, token, field="name")
        return node if not symbol else self._symbol(SymbolRead(symbol, node), token)

    def _symbol(self, node: SymbolRead, token: Token) -> SymbolRead:
        """A read of another symbol (`SPY.last`: one XREAD token), located at that token."""
        self._at(node, token)
        self._at(node, token, field="symbol")
        return node

    def paren(self, children: list[Any]) -> Expr:
        inner: Expr = children[1]
        self.parens.add(id(inner))
        return inner

    def neg(self, children: list[Any]) -> Expr:
        minus: Token = children[0]
        operand = children[1]
        if isinstance(operand, (Number, Percent)) and id(operand) not in self.parens:
            node: Expr = type(operand)(-operand.value)
        else:
            node = Neg(operand)
        hit = self.pos.get(id(operand))
        self.pos[id(node)] = (node, minus, minus if hit is None else hit[2])
        return node

    def sum(self, children: list[Any]) -> Expr:
        """`a op b op c ...` flat: fold `*` `/` first, then `+` `-`, both left-associative."""
        terms: list[Expr] = [children[0]]
        ops: list[Token] = []
        for i in range(1, len(children), 2):
            op, right = children[i], children[i + 1]
            if op.type in ("STAR", "SLASH"):
                terms[-1] = self._arith(terms[-1], op, right)
            else:
                ops.append(op)
                terms.append(right)
        node: Expr = terms[0]
        for op, right in zip(ops, terms[1:]):
            node = self._arith(node, op, right)
        return node

    def _arith(self, left: Expr, op: Token, right: Expr) -> Arith:
        node = Arith(str(op), left, right)  # type: ignore[arg-type]
        self._at(node, op, field="op")
        return self._span(node, left, right)

    def compare(self, children: list[Any]) -> Compare:
        node = Compare(str(children[1]), children[0], children[2])  # type: ignore[arg-type]
        self._at(node, children[1], field="op")
        return self._span(node, children[0], children[2])

    def crosses(self, children: list[Any]) -> Crosses:
        node = Crosses(children[1].lower(), children[0], children[2])
        self._at(node, children[1], field="op")
        return self._span(node, children[0], children[2])

    def not_(self, children: list[Any]) -> Not:
        node = Not(children[1])
        self._at(node, children[0])
        return node

    def bool_seq(self, children: list[Any]) -> Expr:
        """`a AND b OR c ...` flat: AND binds tighter than OR; chains become one node."""
        groups: list[list[Any]] = [[children[0]]]
        for i in range(1, len(children), 2):
            if children[i].type == "OR":
                groups.append([children[i + 1]])
            else:
                groups[-1].append(children[i + 1])
        terms = [
            group[0] if len(group) == 1 else self._span(And(tuple(group)), group[0], group[-1]) for group in groups
        ]
        if len(terms) == 1:
            return terms[0]
        return self._span(Or(tuple(terms)), terms[0], terms[-1])

    # ---- actions
    def offset(self, children: list[Token]) -> Offset:
        first, last = children[0], children[-1]
        if first.type == "AT":
            return self._at(Offset("at", _float(last)), first, last)
        sign = -1.0 if first.type == "MINUS" else 1.0
        if last.type == "PERCENT":
            return self._at(Offset("pct", sign * _float(last[:-1])), first, last)
        return self._at(Offset("abs", sign * _float(last)), first, last)

    def stop(self, children: list[Any]) -> tuple[str, Any, Token]:
        return ("stop", children[1], children[0])

    def target(self, children: list[Any]) -> tuple[str, Any, Token]:
        return ("target", children[1], children[0])

    def trail(self, children: list[Any]) -> tuple[str, Any, Token]:
        off: Offset = children[1]
        if off.mode != "at" and off.value < 0:
            flipped = Offset(off.mode, -off.value)
            self._copy(flipped, off)
            off = flipped
        return ("trail", off, children[0])

    def ttl(self, children: list[Token]) -> tuple[str, Any, Token]:
        return ("ttl", self.duration([children[1]]), children[0])

    def order(self, children: list[Any]) -> Order:
        side_tok: Token = children[0]
        i = 1
        negative = False
        size: Size | None = None
        if isinstance(children[i], Token) and children[i].type == "MINUS":
            negative, i = True, i + 1
        qty_tok: Token = children[i]
        i += 1
        if qty_tok.type == "CASH":
            qty: int | float = 0
            size = Size("cash", float(qty_tok[1:]))
        elif qty_tok.type == "PERCENT":
            qty = 0
            size = Size("equity", float(qty_tok[:-1]))
            i += 1  # EQ
        else:
            qty = _quantity(qty_tok)
            qty = -qty if negative else qty
        order_type = "mkt"
        price: Expr | None = None
        fields: dict[str, Any] = {}
        while i < len(children):
            item = children[i]
            if isinstance(item, Token):
                order_type = item.type.lower()
                if order_type in ("lmt", "stp"):
                    price = children[i + 1]
                    i += 1
            else:
                key, value, kw = item
                if key in fields:
                    self._diag(
                        "duplicate",
                        f"{kw.upper()} given twice in one order",
                        kw,
                        hint=f"keep a single {kw.upper()}",
                    )
                fields[key] = value
            i += 1
        node = Order(
            side_tok.lower(),  # type: ignore[arg-type]
            qty,
            order_type,  # type: ignore[arg-type]
            price,
            fields.get("stop"),
            fields.get("target"),
            fields.get("trail"),
            fields.get("ttl"),
            size,
        )
        self._at(node, side_tok)
        self._at(node, children[1], qty_tok, field="qty")
        return node

    def flat(self, children: list[Token]) -> Flat:
        return self._at(Flat(), children[0])

    def cancel(self, children: list[Token]) -> Cancel:
        return self._at(Cancel(), children[0])

    def rule(self, children: list[Any]) -> Rule:
        when: Token = children[0]
        repeat = 1
        rest = children[2:]
        rep_tok: Token | None = None
        if rest and isinstance(rest[-1], Token):
            rep_tok = rest.pop()
            repeat = _int(rep_tok[1:])
        node = Rule(children[1], tuple(rest), repeat)
        self._at(node, when)
        if rep_tok is not None:
            self._at(node, rep_tok, field="repeat")
        return node

    # ---- statements
    def on(self, children: list[Token]) -> tuple[str, Any, Token]:
        return ("instrument", str(children[0]), children[0])

    def until(self, children: list[Any]) -> tuple[str, Any, Token]:
        tod = self.tod(children)
        node = Until(tod)
        self._at(node, children[0])
        return ("expiry", node, children[0])

    def for_(self, children: list[Token]) -> tuple[str, Any, Token]:
        node = For(self.duration(children))
        self._at(node, children[0])
        return ("expiry", node, children[0])

    def risk_item(self, children: list[Token]) -> tuple[str, float, Token, Token]:
        negative = len(children) == 3
        value = _float(children[-1])
        return (children[0].lower(), -value if negative else value, children[0], children[-1])

    def risk(self, children: list[Any]) -> tuple[str, Any, Token]:
        values: dict[str, float] = {}
        toks: dict[str, tuple[Token, Token]] = {}
        for key, value, kt, vt in children:
            if key in values:
                self._diag("duplicate", f"{key} given twice", kt, hint=f"keep a single {key}")
            if key == "maxorders" and not _is_whole(value):
                low = _whole(value)
                self._diag(
                    "bad-risk", f"{key} must be a whole number, got {vt}", vt,
                    hint=f"write {key} {low} or {key} {low + 1}",
                )
            values[key] = value
            toks[key] = (kt, vt)

        def whole(key: str) -> int | None:
            value = values.get(key)
            return None if value is None else _whole(value)

        ml = values.get("maxloss")
        mp = values.get("maxpos")
        node = Risk(None if mp is None else _quantity_value(mp), ml, whole("maxorders"))
        for key, (kt, vt) in toks.items():
            self._at(node, kt, vt, field=key)
            self._at(node, vt, vt, field=key + " value")
        return ("risk", node, children[0][2])

    def plan(self, children: list[Any]) -> Plan:
        plan_tok: Token = children[0]
        name_tok: Token = children[1]
        header: dict[str, Any] = {}
        rules: list[Rule] = []
        for item in children[2:]:
            if isinstance(item, Rule):
                rules.append(item)
                continue
            key, value, tok = item
            if key in header:
                what = {"instrument": "ON", "expiry": "an expiry (UNTIL or FOR)", "risk": "RISK"}
                self._diag(
                    "duplicate",
                    f"the plan header gives {what[key]} twice",
                    tok,
                    hint="give each header part once: PLAN name [ON SYM] [UNTIL hh:mm | FOR dur] [RISK ...]",
                )
            header[key] = (value, tok)
        inst = header.get("instrument")
        expiry = header.get("expiry")
        risk = header.get("risk")
        node = Plan(
            str(name_tok),
            tuple(rules),
            inst[0] if inst else None,
            expiry[0] if expiry else None,
            risk[0] if risk else Risk(),
        )
        self._at(node, plan_tok)
        self._at(node, name_tok, field="name")
        if inst:
            self._at(node, inst[1], field="instrument")
        return node

    def named_arg(self, children: list[Any]) -> PaneArg:
        node = PaneArg(children[1], str(children[0]))
        self._at(node, children[0])
        return node

    def pos_arg(self, children: list[Any]) -> PaneArg:
        node = PaneArg(children[0])
        self._copy(node, children[0])
        return node

    def pane(self, children: list[Any]) -> PaneRef:
        node = PaneRef(str(children[0]), tuple(arg for arg in children[1:] if arg is not None))
        self._at(node, children[0])
        return node

    def budget(self, children: list[Token]) -> tuple[str, float, Token]:
        value = _float(children[-1])
        return ("budget", -value if len(children) == 2 else value, children[0])

    def view(self, children: list[Any]) -> View:
        budget: int | None = None
        panes = list(children[2:])
        if panes and isinstance(panes[-1], tuple):
            _, value, tok = panes.pop()
            if not _is_whole(value):
                self._diag("bad-budget", "BUDGET must be a whole number of tokens", tok,
                           hint=f"write BUDGET {max(1, _whole(value))}")
            budget = _whole(value)
        node = View(str(children[1]), tuple(panes), budget)
        self._at(node, children[0])
        self._at(node, children[1], field="name")
        if budget is not None:
            self._at(node, children[-1][2], field="budget")
        return node

    def standdown(self, children: list[Token]) -> StandDown:
        symbol = next((c for c in children[1:] if c.type == "SYMBOL"), None)
        quoted = next((c for c in children[1:] if c.type == "STRING"), None)
        reason = _ESCAPE.sub(r"\1", quoted[1:-1]) if quoted is not None else None
        node = StandDown(reason, None if symbol is None else str(symbol))
        self._at(node, children[0])
        if quoted is not None:
            self._at(node, quoted, field="reason")
        if symbol is not None:
            self._at(node, symbol, field="instrument")
        return node

    def pass_(self, children: list[Token]) -> Pass:
        return self._at(Pass(), children[0])

    def start(self, children: list[Any]) -> list[Statement]:
        return children


__all__ = ["Builder", "Positions"]

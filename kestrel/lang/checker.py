"""The type checker: one walk over the AST, reporting every independent problem.

Types (see `registry.ValueType`): Price, Qty, Money, Pct, Duration, TimeOfDay, Count, Bool and
Number (unit-less). A constant Number (`constant`: literals and arithmetic of literals) takes
the numeric type its context asks for (`last + 0.5`: a price offset); a computed Number (rsi,
zscore, a ratio such as `last / vwap`) adds to, subtracts from and compares with Numbers only,
though it scales any numeric type (`vwap * (last / vwap)`).
A sub-expression that already failed has type None and produces no further errors, so one
mistake gives one diagnostic. Recursion is bounded by `Limits.max_expr_depth`.

A cross-symbol read (`SPY.last`, `SPY.chg(1d)`) has its read's type, but a Price of another
symbol is a type of its own: it meets the plan's own prices in no `+`, `-`, comparison or
order price (`last / SPY.last`, a unit-less ratio, is fine; so are Numbers such as chg or rsi).
The symbol must be a member of the universe when the caller names it (`symbols`; None: any
symbol, the engine checks it at arming); a symbol's read of itself is its plain read.

Quantities (an order's and RISK maxpos) are checked against the instrument's lot size when
the caller gives it (`lot`; 1, whole units, when not): a quantity must be a positive whole
number of lots, exactly, on their shortest decimal forms.

Diagnostics are located by source position when the AST came from `parse` (a `locate`
callback), else by a path such as `statement 2, rule 1, action 1`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import NamedTuple, get_args

from kestrel.lang.ast import (
    And,
    Arith,
    Call,
    Cancel,
    Compare,
    Crosses,
    Duration,
    DurationUnit,
    Expr,
    Flat,
    For,
    Ident,
    Module,
    Neg,
    Not,
    Number,
    Offset,
    Or,
    Order,
    PaneArg,
    Pass,
    Percent,
    Plan,
    Rule,
    Series,
    StandDown,
    Statement,
    SymbolRead,
    TimeOfDay,
    Until,
    View,
    children,
    walk,
)
from kestrel.lang.errors import Diagnostic
from kestrel.lang.formatter import expr as expr_text
from kestrel.lang.calls import constant, did_you_mean, duration_text
from kestrel.lang.reads import SYMBOL_RE, SymbolReadChecks
from kestrel.lang.lexer import keywords
from kestrel.lang.limits import DEFAULT_LIMITS, Limits
from kestrel.lang.numbers import num as _num
from kestrel.lang.functions import Indicator
from kestrel.lang.registry import DEFINITIONS, FUNCTIONS, SERIES, ValueType
from kestrel.market.instrument import lots_floor, lots_in, qty_text, units_of


class Loc(NamedTuple):
    """A source position: 1-based line and column, and the width to underline."""

    line: int
    column: int
    width: int = 1


Locate = Callable[[object, "str | None"], "Loc | None"]

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMERIC: frozenset[str] = frozenset({"Price", "Qty", "Money", "Pct", "Number"})
_UNITS: frozenset[str] = frozenset(get_args(DurationUnit))


def _no_loc(node: object, field: str | None = None) -> Loc | None:
    return None


def adapts(left: ValueType, left_expr: Expr, right: ValueType, right_expr: Expr) -> bool:
    """Whether two numeric operands of `+`, `-`, a comparison or CROSSES fit: the same type,
    or one of them a constant Number (which takes the other's type)."""
    return (left == right or (left == "Number" and constant(left_expr))
            or (right == "Number" and constant(right_expr)))


def unitless_hint(left: ValueType, left_expr: Expr, right: ValueType, right_expr: Expr) -> str:
    """The repair for a computed Number beside a typed value: test each on its own."""
    number, other, kind = ((left_expr, right_expr, right) if left == "Number"
                           else (right_expr, left_expr, left))
    return (f"{expr_text(number)} is a unit-less Number, {expr_text(other)} a {kind}: test each "
            f"on its own and join them with AND, e.g. rsi(14) > 50 AND last > vwap")


class _Checker(SymbolReadChecks):
    def __init__(self, limits: Limits, locate: Locate, text: str | None,
                 lot: float = 1, symbols: tuple[str, ...] | None = None) -> None:
        self.lim = limits
        self.lot = lot
        self.symbols = symbols
        self.instrument: str | None = None  # the plan's symbol, while its rules are checked
        self.locate = locate
        self.lines = [line.rstrip("\r") for line in text.split("\n")] if text is not None else None
        self.diags: list[Diagnostic] = []
        self.path: list[str] = []
        self.price_of: str | None = None  # the order type whose price is being checked
        self.too_deep: set[tuple[str, ...]] = set()  # paths already reported too deep

    # ---- reporting
    def err(
        self,
        node: object,
        code: str,
        message: str,
        hint: str | None = None,
        field: str | None = None,
    ) -> None:
        loc = self.locate(node, field) if self.lines is not None else None
        if loc is not None and self.lines is not None:
            excerpt = self.lines[loc.line - 1] if 0 < loc.line <= len(self.lines) else ""
            self.diags.append(
                Diagnostic(code, message, loc.line, loc.column, loc.width, excerpt, hint=hint)
            )
        else:
            path = ", ".join(self.path) if self.path else "document"
            self.diags.append(Diagnostic(code, message, hint=hint, path=path))

    # ---- document
    def document(self, root: Module | Statement) -> None:
        if isinstance(root, Module):
            stmts = root.statements
            if len(stmts) < 2:
                self.err(root, "module-size", "a Module holds two or more statements",
                         hint="use the single statement itself instead of a Module")
            if len(stmts) > self.lim.max_statements:
                self.err(
                    stmts[self.lim.max_statements],
                    "too-many",
                    f"{len(stmts)} statements; the limit is {self.lim.max_statements}",
                    hint="a reply is one statement; split a library of plans over several files",
                )
            seen: dict[str, int] = {}
            for number, statement in enumerate(stmts[: self.lim.max_statements], 1):
                self.path = [f"statement {number}"]
                self.statement(statement)
                if isinstance(statement, Plan):
                    if statement.name in seen:
                        self.err(
                            statement,
                            "duplicate-plan",
                            f"plan name `{statement.name}` is already used by statement {seen[statement.name]}",
                            hint="give every plan in a module its own name",
                            field="name",
                        )
                    else:
                        seen[statement.name] = number
        else:
            self.statement(root)

    def statement(self, statement: Statement) -> None:
        if isinstance(statement, Plan):
            self.plan(statement)
        elif isinstance(statement, View):
            self.view(statement)
        elif isinstance(statement, StandDown):
            self.standdown(statement)
        elif not isinstance(statement, Pass):
            self.err(statement, "not-statement", f"not a statement: {type(statement).__name__}")

    def name(self, node: object, name: str, what: str, field: str | None = "name") -> None:
        if not isinstance(name, str) or not NAME_RE.match(name):
            self.err(node, "bad-name", f"{what} `{name}` is not a name", field=field,
                     hint="names are letters, digits and _, starting with a letter")
        elif len(name) > self.lim.max_identifier_chars:
            self.err(
                node,
                "too-long",
                f"{what} is {len(name)} characters; the limit is {self.lim.max_identifier_chars}",
                field=field,
                hint=f"shorten it to at most {self.lim.max_identifier_chars} characters",
            )

    def number(self, node: object, value: float, what: str, field: str | None = None) -> bool:
        if not math.isfinite(value) or abs(value) > self.lim.max_number:
            self.err(
                node,
                "out-of-range",
                f"{what} is out of range (the limit is ±{self.lim.max_number:g})",
                field=field,
            )
            return False
        return True

    # ---- plan
    def plan(self, plan: Plan) -> None:
        base = list(self.path)
        self.instrument = plan.instrument
        if plan.instrument is None and self.symbols is not None and len(self.symbols) == 1:
            self.instrument = self.symbols[0]
        self.name(plan, plan.name, "plan name")
        if plan.instrument is not None and (
            not SYMBOL_RE.match(plan.instrument) or len(plan.instrument) > self.lim.max_identifier_chars
        ):
            self.err(plan, "bad-symbol", f"`{plan.instrument}` is not an instrument symbol",
                     hint="symbols are upper case, e.g. ON AAPL", field="instrument")
        if isinstance(plan.expiry, Until):
            self.time_of_day(plan.expiry.at, plan.expiry)
        elif isinstance(plan.expiry, For):
            self.window(plan.expiry.span, "FOR", plan.expiry)
        risk = plan.risk
        for key, value, whole in (
            ("maxpos", risk.maxpos, False),
            ("maxloss", risk.maxloss, False),
            ("maxorders", risk.maxorders, True),
        ):
            if value is None:
                continue
            if not self.number(risk, value, key, field=key):
                continue
            if value <= 0:
                self.err(risk, "bad-risk", f"{key} must be positive, got {_num(value)}", field=key,
                         hint=f"write {key} {_num(abs(value)) if value else 1}")
            elif whole and value != int(value):
                self.err(risk, "bad-risk", f"{key} must be a whole number", field=key,
                         hint=f"write {key} {int(value)} or {int(value) + 1}")
            elif key == "maxpos":
                self.lots(risk, value, "maxpos", "maxpos ", field="maxpos value")
        if not plan.rules:
            self.err(plan, "no-rules", "a plan needs at least one rule",
                     hint="add a rule: WHEN cond: action")
        if len(plan.rules) > self.lim.max_rules:
            self.err(plan.rules[self.lim.max_rules], "too-many",
                     f"{len(plan.rules)} rules; the limit is {self.lim.max_rules}",
                     hint="keep the plan to its best rules")
        for number, rule in enumerate(plan.rules[: self.lim.max_rules], 1):
            self.path = base + [f"rule {number}"]
            self.rule(rule, plan)
        self.path = base

    def rule(self, rule: Rule, plan: Plan) -> None:
        base = list(self.path)
        kind = self.expr(rule.cond, 1)
        if kind is not None and kind != "Bool":
            self.err(rule.cond, "type", f"a WHEN condition must be true or false, not {kind}",
                     hint="compare it: e.g. last > vwap")
        if not rule.actions:
            self.err(rule, "no-actions", "a rule needs at least one action",
                     hint="BUY, SELL, FLAT or CANCEL after the `:`")
        if len(rule.actions) > self.lim.max_actions:
            self.err(rule.actions[self.lim.max_actions], "too-many",
                     f"{len(rule.actions)} actions in one rule; the limit is {self.lim.max_actions}",
                     hint="split them over two rules with the same condition")
        if not isinstance(rule.repeat, int) or not 1 <= rule.repeat <= self.lim.max_repeat:
            self.err(rule, "bad-repeat",
                     f"repeat must be between x1 and x{self.lim.max_repeat}, got x{rule.repeat}",
                     field="repeat", hint="write x2 to fire twice, or drop xN to fire once")
        for number, action in enumerate(rule.actions[: self.lim.max_actions], 1):
            self.path = base + [f"action {number}"]
            if isinstance(action, Order):
                self.order(action, plan)
            elif not isinstance(action, (Flat, Cancel)):
                self.err(action, "not-action", f"not an action: {type(action).__name__}")
        self.path = base

    def order(self, order: Order, plan: Plan) -> None:
        side = order.side.upper()
        lot = self.lot
        if order.size is not None:
            value = order.size.value
            if order.qty != 0:
                self.err(order, "bad-qty", "an order sized by money or equity has no quantity", field="qty",
                         hint="write BUY $5000 MKT or BUY 10%EQ MKT, or a quantity alone")
            elif not (value > 0 and value <= self.lim.max_number):
                self.err(order, "bad-qty", f"a size must be a positive amount, got {_num(value)}", field="size",
                         hint="write BUY $5000 MKT")
            elif order.size.basis == "equity" and value > 100:
                self.err(order, "bad-qty", f"a share of equity is at most 100%, got {_num(value)}%",
                         field="size", hint="write BUY 10%EQ MKT")
        elif order.qty <= 0:
            smallest = qty_text(lot, lot)
            self.err(order, "bad-qty",
                     f"quantity must be a positive whole number{'' if lot == 1 else ' of lots'}, "
                     f"got {_num(order.qty)}",
                     hint=f"the side says the direction: write {'SELL' if order.side == 'buy' else 'BUY'} "
                          f"{_num(abs(order.qty))}" if order.qty < 0 else f"write at least {smallest}",
                     field="qty")
        elif order.qty > self.lim.max_number:
            self.number(order, order.qty, "quantity", field="qty")
        elif not self.lots(order, order.qty, "quantity", "", field="qty"):
            pass
        elif (plan.risk.maxpos is not None and 0 < plan.risk.maxpos < order.qty
              and lots_in(plan.risk.maxpos, lot) is not None):
            self.err(order, "over-risk",
                     f"quantity {_num(order.qty)} exceeds the plan's maxpos {_num(plan.risk.maxpos)}",
                     hint=f"use at most {_num(plan.risk.maxpos)}, or raise maxpos", field="qty")
        entry: float | None = None
        if order.order_type == "mkt":
            if order.price is not None:
                self.err(order.price, "mkt-price", "a MKT order takes no price",
                         hint="use LMT price for a limit order")
        elif order.price is None:
            self.err(order, "no-price", f"a {order.order_type.upper()} order needs a price",
                     hint=f"write {order.order_type.upper()} 182.40 or {order.order_type.upper()} ask+0.02")
        else:
            self.price_of = order.order_type
            kind = self.expr(order.price, 1)
            self.price_of = None
            if kind == "Price" and self.owner(order.price):
                self.err(order.price, "type",
                         f"an order price must be a Price of {self.instrument or 'the plan'}, "
                         f"not of {self.owner(order.price)}",
                         hint="price the order off the plan's own series: LMT bid, LMT vwap*0.99")
            elif kind is not None and kind != "Price" and not (kind == "Number" and constant(order.price)):
                what = kind if kind != "Number" else "a unit-less Number"
                self.err(order.price, "type", f"an order price must be a Price, not {what}",
                         hint="write a price: 182.40, ask+0.02 or vwap*0.99")
            if isinstance(order.price, Number):
                entry = order.price.value
                if entry <= 0:
                    self.err(order.price, "bad-price", "an order price must be positive",
                             hint="write a price such as 182.40, or a MKT order")
                    entry = None  # no follow-on bracket errors against a bad price
        below, above = ("STOP", "TARGET") if order.side == "buy" else ("TARGET", "STOP")
        for kw, off in (("STOP", order.stop), ("TARGET", order.target)):
            if off is None:
                continue
            want_below = kw == below
            word = "below" if want_below else "above"
            if not self.number(off, off.value, f"{kw} offset"):
                continue
            if off.mode == "at":
                if off.value <= 0:
                    self.err(off, "bad-offset", f"{kw} @price must be a positive price",
                             hint=f"write {kw} @182.40, or an offset from the entry like {kw} "
                                  f"{'-' if want_below else '+'}0.5%")
                elif entry is not None and (off.value >= entry if want_below else off.value <= entry):
                    self.err(off, "wrong-side",
                             f"{kw} must be {word} the entry for a {side}: @{_num(off.value)} "
                             f"is not {word} {_num(entry)}",
                             hint=f"{kw} {word} the entry price {_num(entry)}")
                continue
            if off.value == 0:
                self.err(off, "bad-offset", f"{kw} offset must not be zero",
                         hint=f"give a distance from the entry: {kw} {'-' if want_below else '+'}0.5% "
                              f"or {kw} {'-' if want_below else '+'}0.50, or leave {kw} out")
            elif (off.value > 0) == want_below:
                unit = "%" if off.mode == "pct" else ""
                good = f"{'-' if want_below else '+'}{_num(abs(off.value))}{unit}"
                self.err(off, "wrong-side",
                         f"{kw} must be {word} the entry for a {side}",
                         hint=f"write {kw} {good}")
            elif off.mode == "pct" and abs(off.value) >= 100:
                self.err(off, "bad-offset", f"{kw} offset must be within ±100%",
                         hint=f"write e.g. {kw} {'-' if want_below else '+'}2%")
        if (order.stop is not None and order.target is not None and order.stop.mode == "at"
                and order.target.mode == "at"):
            lo, hi = (order.stop, order.target) if order.side == "buy" else (order.target, order.stop)
            if lo.value >= hi.value:
                self.err(order.target, "wrong-side",
                         f"for a {side} the {below} (@{_num(lo.value)}) must be below the "
                         f"{above} (@{_num(hi.value)})", hint="swap the two prices")
        if order.trail is not None:
            tr = order.trail
            if tr.mode == "at":
                self.err(tr, "bad-trail", "TRAIL takes a distance, not an @price",
                         hint="write TRAIL 0.5% or TRAIL 0.30")
            elif self.number(tr, tr.value, "TRAIL distance") and tr.value <= 0:
                self.err(tr, "bad-trail", "TRAIL distance must be positive",
                         hint="write TRAIL 0.5% or TRAIL 0.30")
            elif tr.mode == "pct" and tr.value >= 100:
                self.err(tr, "bad-trail", "TRAIL distance must be under 100%",
                         hint="write TRAIL 0.5% or TRAIL 0.30")
        if order.ttl is not None:
            self.window(order.ttl, "TTL", order.ttl)

    def lots(self, node: object, qty: float, what: str, prefix: str, field: str) -> bool:
        """Whether `qty` (> 0) is a whole number of the instrument's lots; else one error
        naming the lot size, with the two nearest valid quantities as the hint."""
        lot = self.lot
        if lots_in(qty, lot) is not None:
            return True
        low = lots_floor(qty, lot)
        below, above = (qty_text(units_of(count, lot), lot) for count in (low, low + 1))
        near = f"{prefix}{above}" if low < 1 else f"{prefix}{below} or {prefix}{above}"
        self.err(node, "bad-risk" if field.startswith("maxpos") else "bad-qty",
                 f"{what} {_num(qty)} is not a whole number of lots (lot size {qty_text(lot, lot)})",
                 hint=f"write {near}", field=field)
        return False

    def window(self, span: Duration, what: str, node: object) -> bool:
        if span.unit not in _UNITS:
            self.err(node, "bad-duration", f"unknown duration unit `{span.unit}`",
                     hint="units are s, m, h and d")
            return False
        if span.value <= 0:
            self.err(node, "zero-window", f"{what} must be longer than zero, got {span.value}{span.unit}",
                     hint=f"write e.g. 1{span.unit}")
            return False
        if span.seconds > self.lim.max_window_seconds:
            self.err(node, "window-too-long",
                     f"{what} of {span.value}{span.unit} is longer than the data available "
                     f"({duration_text(self.lim.max_window_seconds)})",
                     hint=f"use at most {duration_text(self.lim.max_window_seconds)}")
            return False
        return True

    def time_of_day(self, clock: TimeOfDay, node: object) -> None:
        if not (0 <= clock.hour < 24 and 0 <= clock.minute < 60 and 0 <= clock.second < 60):
            self.err(node, "bad-time",
                     f"{clock.hour}:{clock.minute:02d} is not a time of day",
                     hint="write hh:mm between 00:00 and 23:59")

    # ---- expressions
    def expr(self, expr: Expr, depth: int) -> ValueType | None:
        if depth > self.lim.max_expr_depth:
            where = tuple(self.path)  # one report per expression, not one per cut branch
            if where not in self.too_deep:
                self.too_deep.add(where)
                self.err(expr, "too-deep",
                         f"expression nested deeper than {self.lim.max_expr_depth} levels",
                         hint="simplify the condition")
            return None
        if isinstance(expr, (Compare, Crosses)):
            return self.compare(expr, depth)
        if isinstance(expr, Series):
            return self.series(expr)
        if isinstance(expr, Number):
            return "Number" if self.number(expr, expr.value, "number") else None
        if isinstance(expr, Call):
            kind = self.call(expr, depth)
            if (kind == "Price" and expr.name in ("min", "max") and len(expr.args) == 2
                    and not self.same_owner(expr, expr.args[0], expr.args[1], f"take {expr.name} of", None)):
                return None
            return kind
        if isinstance(expr, SymbolRead):
            return self.symbol_read(expr, depth)
        if isinstance(expr, (And, Or)):
            word = "AND" if isinstance(expr, And) else "OR"
            if len(expr.operands) < 2:
                self.err(expr, "arity", f"{word} needs at least two operands")
            ok = True
            for op in expr.operands:
                kind = self.expr(op, depth + 1)
                if kind is not None and kind != "Bool":
                    self.err(op, "type", f"{word} combines conditions; this is a {kind}",
                             hint="compare it: e.g. last > vwap")
                ok = ok and kind is not None
            return "Bool" if ok else None
        if isinstance(expr, Arith):
            return self.arith(expr, depth)
        if isinstance(expr, Not):
            kind = self.expr(expr.operand, depth + 1)
            if kind is not None and kind != "Bool":
                self.err(expr.operand, "type", f"NOT negates a condition; this is a {kind}",
                         hint="negate a comparison: NOT spread > 0.05")
                return None
            return kind
        if isinstance(expr, Neg):
            kind = self.expr(expr.operand, depth + 1)
            if kind is not None and kind not in _NUMERIC:
                self.err(expr, "type", f"cannot negate a {kind}",
                         hint="`-` negates numbers; NOT negates a condition")
                return None
            return kind
        if isinstance(expr, Percent):
            return "Pct" if self.number(expr, expr.value, "percentage") else None
        if isinstance(expr, Duration):
            return "Duration"
        if isinstance(expr, TimeOfDay):
            self.time_of_day(expr, expr)
            return "TimeOfDay"
        self.err(expr, "not-expression", f"not an expression: {type(expr).__name__}")
        return None

    def series(self, series: Series) -> ValueType | None:
        spec = SERIES.get(series.name)
        if spec is not None:
            return spec.type
        if series.name in FUNCTIONS:
            fn = FUNCTIONS[series.name]
            self.err(series, "not-series", f"`{series.name}` is a function, not a series",
                     hint=f"call it: {fn.typed}")
        elif series.name.lower() in keywords():
            hint = "keywords cannot stand for values"
            if self.price_of is not None:
                kind = self.price_of.upper()
                hint = (f"a {kind} order needs its price right after {kind}: "
                        f"BUY 100 {kind} 182.40 STOP -1%, or use MKT")
            self.err(series, "unknown-name", f"`{series.name}` is a keyword, not a series", hint=hint)
        else:
            self.err(series, "unknown-name", f"unknown series `{series.name}`",
                     hint=_SERIES_SYNONYMS.get(series.name.lower()) or did_you_mean(series.name, SERIES)
                     or "series are " + " ".join(SERIES))
        return None

    def compare(self, expr: Compare | Crosses, depth: int) -> ValueType | None:
        lt = self.expr(expr.left, depth + 1)
        rt = self.expr(expr.right, depth + 1)
        if lt is None or rt is None:
            return None
        if lt == rt == "Price" and not self.same_owner(expr, expr.left, expr.right, "compare",
                                                        "op" if isinstance(expr, Compare) else None):
            return None
        op = expr.op if isinstance(expr, Compare) else f"CROSSES {expr.direction.upper()}"
        if lt == "TimeOfDay" and rt == "TimeOfDay" and isinstance(expr, Compare):
            return "Bool"
        if lt in _NUMERIC and rt in _NUMERIC and adapts(lt, expr.left, rt, expr.right):
            return self.bounded(expr)
        hint = None
        if lt in _NUMERIC and rt in _NUMERIC and "Number" in (lt, rt):
            hint = unitless_hint(lt, expr.left, rt, expr.right)
        elif "Duration" in (lt, rt):
            hint = "a duration like 30m is only a window argument, e.g. last > high(30m)"
        elif "TimeOfDay" in (lt, rt):
            hint = "compare the clock with a time: time >= 15:30"
        elif "Pct" in (lt, rt) and "Price" in (lt, rt):
            hint = "compare prices with prices (last > vwap * 1.005) or Pct with Pct (chg(5m) > 0.5%)"
        self.err(expr, "type", f"cannot compare {lt} with {rt} ({op})", hint=hint, field="op")
        return None

    def arith(self, expr: Arith, depth: int) -> ValueType | None:
        lt = self.expr(expr.left, depth + 1)
        rt = self.expr(expr.right, depth + 1)
        if lt is None or rt is None:
            return None
        op = expr.op
        if lt == rt == "Price" and op in "+-" and not self.same_owner(expr, expr.left, expr.right,
                                                                       "add or subtract", "op"):
            return None
        result: ValueType | None = None
        if lt in _NUMERIC and rt in _NUMERIC:
            if op in "+-":
                if adapts(lt, expr.left, rt, expr.right):
                    result = rt if lt == "Number" and constant(expr.left) else lt
            elif op == "*":
                if rt == "Number":
                    result = lt
                elif lt == "Number":
                    result = rt
                elif {lt, rt} == {"Price", "Qty"}:
                    result = "Money"
            else:
                if rt == "Number":
                    result = lt
                elif lt == rt:
                    result = "Number"
        if result is None:
            hint = None
            if lt in _NUMERIC and rt in _NUMERIC and "Number" in (lt, rt):
                hint = unitless_hint(lt, expr.left, rt, expr.right)
            elif "Pct" in (lt, rt) and "Price" in (lt, rt):
                hint = "to move a price by 0.5% multiply it: vwap * 1.005"
            elif "Duration" in (lt, rt) or "TimeOfDay" in (lt, rt):
                hint = "durations and times take no arithmetic"
            self.err(expr, "type", f"cannot apply `{op}` to {lt} and {rt}", hint=hint, field="op")
            return None
        if op == "/" and isinstance(expr.right, Number) and expr.right.value == 0:
            self.err(expr.right, "div-zero", "division by zero", hint="divide by a number other than 0")
            return None
        return result

    # ---- view, standdown
    def view(self, view: View) -> None:
        self.name(view, view.name, "view name")
        if not view.panes:
            self.err(view, "no-panes", "a VIEW needs at least one pane", hint="e.g. VIEW v: quote")
        if len(view.panes) > self.lim.max_panes:
            self.err(view, "too-many", f"{len(view.panes)} panes; the limit is {self.lim.max_panes}",
                     hint="ask for the panes you need most")
        for pane in view.panes[: self.lim.max_panes]:
            self.name(pane, pane.name, "pane name", field=None)
            if len(pane.args) > self.lim.max_pane_args:
                self.err(pane, "too-many",
                         f"{len(pane.args)} arguments; the limit is {self.lim.max_pane_args}",
                         hint="drop the arguments whose defaults suit you")
            named: set[str] = set()
            for arg in pane.args[: self.lim.max_pane_args]:
                self.pane_arg(arg, named)
        if view.budget is not None and not self.lim.min_budget <= view.budget <= self.lim.max_budget:
            self.err(view, "bad-budget",
                     f"BUDGET must be between {self.lim.min_budget} and {self.lim.max_budget} tokens, got {view.budget}",
                     field="budget")

    def pane_arg(self, arg: PaneArg, named: set[str]) -> None:
        if arg.name is not None:
            self.name(arg, arg.name, "argument name", field=None)
            if arg.name in named:
                self.err(arg, "duplicate", f"argument `{arg.name}` given twice",
                         hint=f"keep a single {arg.name}=")
            named.add(arg.name)
        elif named:
            self.err(arg, "arg-order", "a positional argument cannot follow a named one",
                     hint="put positional arguments first: bars(5m, n=24)")
        val = arg.value
        if isinstance(val, (Number, Percent)):
            self.number(val, val.value, "argument")
        elif isinstance(val, Ident):
            self.name(val, val.name, "argument", field=None)
        elif isinstance(val, TimeOfDay):
            self.time_of_day(val, val)
        elif isinstance(val, Duration):
            if val.unit not in _UNITS or val.value < 0:
                self.err(val, "bad-duration", "a duration must be a whole number >= 0 of s, m, h or d")

    def standdown(self, standdown: StandDown) -> None:
        reason = standdown.reason
        if reason is None:
            return
        if len(reason) > self.lim.max_string_chars:
            self.err(standdown, "too-long",
                     f"reason is {len(reason)} characters; the limit is {self.lim.max_string_chars}",
                     field="reason", hint="say it in a short line")
        elif not reason.isprintable():
            self.err(standdown, "bad-string", "a reason is one line of printable text", field="reason",
                     hint="drop line breaks, tabs and control characters")


# series names from other platforms -> the Kestrel series
_SERIES_SYNONYMS: dict[str, str] = {
    "close": "the current trade price is `last` (bars close into sma/ema/atr with a timeframe)",
    "price": "the current trade price is `last`",
    "volume": "session volume is `vol`; the current trade's size is `size`",
    "position": "the signed position is `pos`",
    "pl": "P&L is `pnl` (upnl + rpnl)",
    "now": "the session clock is `time`",
}


def check_located(
    root: Module | Statement, limits: Limits, locate: Locate, text: str, lot: float = 1,
    symbols: tuple[str, ...] | None = None,
) -> list[Diagnostic]:
    """Check a parsed document; diagnostics carry source positions. `lot`: the instrument's
    lot size quantities must be whole numbers of (1: whole units); `symbols`: the session's
    universe (None: any symbol may be read)."""
    checker = _Checker(limits, locate, text, lot, symbols)
    checker.document(root)
    return checker.diags


def check(root: Module | Statement, limits: Limits | None = None,
          lot: float = 1, symbols: tuple[str, ...] | None = None) -> list[Diagnostic]:
    """Check an AST built in code. Returns every diagnostic (empty when valid), each located
    by a path such as `statement 2, rule 1, action 1`. Never raises for a well-typed AST
    value; an AST nested deeper than the limits is reported, not recursed into. `lot`: the
    instrument's lot size (1: whole units); `symbols`: the session's universe (None: any
    symbol may be read; a one-symbol universe reads no other symbol)."""
    checker = _Checker(limits if limits is not None else DEFAULT_LIMITS, _no_loc, None, lot, symbols)
    try:
        checker.document(root)
    except RecursionError:
        checker.diags.append(Diagnostic("too-deep", "AST nested too deeply to check"))
    return checker.diags


__all__ = ["Loc", "check", "check_located"]

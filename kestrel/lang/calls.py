"""The checks of a function call against its unit's signature: arity, each argument by its
parameter's kind, counts that must increase, the result's type (a `Numeric` function's is the
type its arguments share, a constant Number adapting, a computed one not), and comparisons of
a bounded function (rsi: 0..100) with a number outside its range. Mixed into the checker (`kestrel.lang.checker`), which supplies reporting
and the checks of expressions and windows."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable

from kestrel.lang.ast import Arith, Call, Compare, Crosses, Duration, Expr, Neg, Number, Series
from kestrel.lang.limits import Limits
from kestrel.lang.numbers import num as _num
from kestrel.lang.registry import FUNCTIONS, PRICE_SERIES, SERIES, Param, ValueType
from kestrel.lang.suggest import closest

_NUMERIC: frozenset[str] = frozenset({"Price", "Qty", "Money", "Pct", "Number"})
_MAX_TIMEFRAME = 86_400


def constant(expr: Expr) -> bool:
    """Whether `expr` is a constant Number: a number literal, or negation or arithmetic of
    constants. A constant adapts to the numeric type beside it; a computed Number does not."""
    if isinstance(expr, Number):
        return True
    if isinstance(expr, Neg):
        return constant(expr.operand)
    if isinstance(expr, Arith):
        return constant(expr.left) and constant(expr.right)
    return False


def did_you_mean(name: str, names: Iterable[str]) -> str | None:
    pool = list(names)
    close = closest(name, pool)
    if close is None and name.lower() in pool:
        close = name.lower()
    return f"did you mean `{close}`?" if close is not None else None


def duration_text(seconds: int) -> str:
    """`90m`, `5d`: a number of seconds in its largest whole unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


class CallChecks(ABC):
    """The call checks; the checker provides the abstract methods below them."""

    lim: Limits

    @abstractmethod
    def err(self, node: object, code: str, message: str, hint: str | None = None,
            field: str | None = None) -> None:
        """Record diagnostic `code` at `node`."""

    @abstractmethod
    def expr(self, expr: Expr, depth: int) -> ValueType | None:
        """The type of `expr` (None after an error)."""

    @abstractmethod
    def series(self, series: Series) -> ValueType | None:
        """The type of `series` (None after an error)."""

    @abstractmethod
    def window(self, span: Duration, what: str, node: object) -> bool:
        """Whether `span` is a valid window for `what` (an error recorded when not)."""

    def call(self, expr: Call, depth: int) -> ValueType | None:
        fn = FUNCTIONS.get(expr.name)
        if fn is None:
            if expr.name in SERIES:
                self.err(expr, "not-function", f"`{expr.name}` is a series, not a function",
                         hint=f"write {expr.name} without parentheses", field="name")
            else:
                self.err(expr, "unknown-name", f"unknown function `{expr.name}`", field="name",
                         hint=did_you_mean(expr.name, FUNCTIONS) or "functions are "
                         + " ".join(FUNCTIONS))
            for argument in expr.args:
                self.expr(argument, depth + 1)
            return None
        given = len(expr.args)
        if not fn.min_args <= given <= fn.max_args:
            want = (str(fn.min_args) if fn.min_args == fn.max_args
                    else f"{fn.min_args} or {fn.max_args}")
            self.err(expr, "arity", f"{expr.name} takes {want} argument{'s' if fn.max_args > 1 else ''}, "
                     f"got {given}", hint=f"signature: {fn.typed}")
            return None
        ok = True
        counts: dict[str, int] = {}
        numeric: list[tuple[Expr, ValueType | None]] = []  # the Numeric arguments and their types
        for param, arg in zip(fn.params, expr.args):
            if param.type == "Numeric":
                kind = self.expr(arg, depth + 1)
                if kind is not None and kind not in _NUMERIC:
                    self.err(arg, "type", f"{expr.name}'s {param.name} must be a number, not {kind}",
                             hint=f"signature: {fn.typed}")
                    kind = None
                numeric.append((arg, kind))
                ok = ok and kind is not None
                continue
            ok = self.argument(fn.name, param, arg, depth) and ok
            if param.type == "Count" and isinstance(arg, Number):
                counts[param.name] = int(arg.value)
            if (ok and param.type == "Timeframe" and counts and isinstance(arg, Duration)
                    and max(counts.values()) * arg.seconds > self.lim.max_window_seconds):
                self.err(expr, "window-too-long",
                         f"{expr.name} over {max(counts.values())} bars of {arg.value}{arg.unit} needs "
                         f"more data than is available ({duration_text(self.lim.max_window_seconds)})",
                         hint="use fewer bars or a shorter timeframe")
                ok = False
        order = [(name, counts[name]) for name in fn.increasing if name in counts]
        for (shorter, first), (longer, second) in zip(order, order[1:]):
            if ok and first >= second:
                self.err(expr, "out-of-range", f"{expr.name}'s {shorter} ({first}) must be shorter "
                         f"than its {longer} ({second})", hint=f"e.g. {fn.example}")
                ok = False
        if not ok:
            return None
        if fn.returns is not None:
            return fn.returns
        types = {kind for arg, kind in numeric if not (kind == "Number" and constant(arg))}
        if len(types) > 1:
            self.err(expr, "type", f"{expr.name} takes numbers of one type, got {' and '.join(sorted(types))}",  # type: ignore[arg-type]
                     hint=f"signature: {fn.typed}")
            return None
        return types.pop() if types else "Number"

    def argument(self, fname: str, param: Param, arg: Expr, depth: int) -> bool:
        what = f"{fname}'s {param.name}"
        if param.type == "PriceSeries":
            if isinstance(arg, Series) and arg.name in PRICE_SERIES:
                return True
            if isinstance(arg, Series) and arg.name not in SERIES:
                return self.series(arg) is not None
            self.err(arg, "type", f"{what} must be a Price series",
                     hint=f"one of {' '.join(sorted(PRICE_SERIES))}, e.g. {FUNCTIONS[fname].example}")
            return False
        if param.type == "Number":
            if isinstance(arg, Number) and 0 < arg.value <= self.lim.max_number:
                return True
            self.err(arg, "type", f"{what} must be a number above 0 such as 2",
                     hint=f"signature: {FUNCTIONS[fname].typed}")
            return False
        if param.type == "Count":
            if isinstance(arg, Number):
                value = arg.value
                if not math.isfinite(value) or value != int(value) or value < 1:
                    self.err(arg, "zero-window" if value == 0 else "type",
                             f"{what} must be a whole number of at least 1, got {_num(value)}",
                             hint=f"e.g. {FUNCTIONS[fname].example}")
                    return False
                if value > self.lim.max_count:
                    self.err(arg, "window-too-long",
                             f"{what} of {_num(value)} is over the limit of {self.lim.max_count}",
                             hint=f"use at most {self.lim.max_count}, or bars of a longer timeframe")
                    return False
                return True
            found = self.expr(arg, depth + 1)
            if found is not None:
                self.err(arg, "type", f"{what} must be a count like 20, not {found}",
                         hint=f"signature: {FUNCTIONS[fname].typed}")
            return False
        # Duration or Timeframe
        if isinstance(arg, Duration):
            if param.type == "Timeframe":
                if not self.window(arg, what, arg):
                    return False
                if arg.seconds > _MAX_TIMEFRAME:
                    self.err(arg, "bad-timeframe", f"{what} bars longer than 1d are not supported",
                             hint="use bars of 1d or less, e.g. 5m")
                    return False
                return True
            return self.window(arg, what, arg)
        found = self.expr(arg, depth + 1)
        if found is not None:
            kind = "window" if param.type == "Duration" else "timeframe"
            hint = (f"a {kind} is a duration: {FUNCTIONS[fname].example}" if found == "Number"
                    else f"signature: {FUNCTIONS[fname].typed}")
            self.err(arg, "type", f"{what} must be a duration like 30m, not {found}", hint=hint)
        return False

    def bounded(self, expr: Compare | Crosses) -> ValueType | None:
        """Bool, unless a function whose values lie in a range (rsi: 0..100) is compared with
        a number outside it (never informative: always true or always false)."""
        for call, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if not isinstance(call, Call) or not isinstance(other, Number):
                continue
            spec = FUNCTIONS.get(call.name)
            if spec is not None and spec.bounds is not None:
                lo, hi = spec.bounds
                if not lo <= other.value <= hi:
                    self.err(other, "out-of-range",
                             f"{call.name} lies between {lo:g} and {hi:g}; {_num(other.value)} is outside",
                             hint=f"compare {call.name} with a level within {lo:g}..{hi:g}, "
                                  f"e.g. {spec.example} < {_num(lo + (hi - lo) * 0.3)}")
                    return None
        return "Bool"

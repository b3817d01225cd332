"""The operations (abs, min, max: pure functions of their arguments' values) and the
operators (arithmetic, comparisons, CROSSES), each in its per-tick and its column form (one
callable where it serves scalars and arrays alike)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np

from kestrel.lang.functions import NAN
from kestrel.lang.signature import FunctionSpec, Param


class Operation:
    """A pure function of its arguments' values (undefined when one of them is)."""

    spec: ClassVar[FunctionSpec]
    scalar: ClassVar[Callable[..., float]]
    column: ClassVar[Callable[..., Any]]


def _smaller(a: float, b: float) -> float:
    return NAN if a != a or b != b else (a if a <= b else b)


def _larger(a: float, b: float) -> float:
    return NAN if a != a or b != b else (a if a >= b else b)


def _pick(smaller: bool) -> Callable[[Any, Any], Any]:
    def pick(a: Any, b: Any) -> Any:
        chosen = np.where(a <= b, a, b) if smaller else np.where(a >= b, a, b)
        return np.where((a == a) & (b == b), chosen, NAN)
    return pick


_AB = (Param("a", "Numeric"), Param("b", "Numeric"))


class Abs(Operation):
    spec = FunctionSpec("abs", (Param("a", "Numeric"),), None, "absolute value of a")
    scalar = staticmethod(abs)
    column = staticmethod(np.abs)


class Min(Operation):
    spec = FunctionSpec("min", _AB, None, "the smaller of a and b (of one type)")
    scalar = staticmethod(_smaller)
    column = staticmethod(_pick(True))


class Max(Operation):
    spec = FunctionSpec("max", _AB, None, "the larger of a and b (of one type)")
    scalar = staticmethod(_larger)
    column = staticmethod(_pick(False))


class Operator(NamedTuple):
    """An operator's per-tick and column forms (the same callable where it serves both)."""

    scalar: Callable[[Any, Any], Any]
    column: Callable[[Any, Any], Any]


def _divide(dividend: float, divisor: float) -> float:
    return dividend / divisor if divisor else NAN


def _divide_columns(dividend: Any, divisor: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(divisor != 0, dividend / np.where(divisor != 0, divisor, 1.0), NAN)


def _not_equal(left: Any, right: Any) -> Any:
    """`!=`: false when either side is undefined (NaN), where IEEE says true."""
    return (left == left) & (right == right) & (left != right)


def _same(function: Callable[[Any, Any], Any]) -> Operator:
    return Operator(function, function)


ARITHMETIC: dict[str, Operator] = {
    "+": _same(operator.add), "-": _same(operator.sub), "*": _same(operator.mul),
    "/": Operator(_divide, _divide_columns),  # `/`: undefined on a zero divisor
}
COMPARISON: dict[str, Operator] = {
    "<": _same(operator.lt), "<=": _same(operator.le), ">": _same(operator.gt),
    ">=": _same(operator.ge), "==": _same(operator.eq), "!=": _same(_not_equal),
}


def _crossed_above(left_before: Any, right_before: Any, left: Any, right: Any) -> Any:
    return (left_before <= right_before) & (left > right)


def _crossed_below(left_before: Any, right_before: Any, left: Any, right: Any) -> Any:
    return (left_before >= right_before) & (left < right)


CROSSES: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "above": _crossed_above, "below": _crossed_below,
}
"""`left CROSSES ABOVE right`: `left <= right` at the previous evaluation and `left > right`
now (BELOW: `>=` then `<`), on scalars or elementwise: (left before, right before, left,
right) -> whether it crossed."""

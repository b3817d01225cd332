"""The vectorized path's evaluator: a plan's expressions as whole columns over a prefix of the
session (index 0 = the session's first tick).

`Columns.value(e)` is, at every tick, the value the reference path's `Evaluation` computes
there: the same series (`series`), the same indicators (their column forms, `kestrel.lang.
functions`), the same operators on arrays. Values at tick i depend only on ticks <= i, so a
prefix is exact. `pos` and `rpnl` read `account` (the account state is constant between
fills; the caller re-evaluates when it changes); constants stay scalars, broadcast by numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.engine.lookback import RUN_WIDE
from kestrel.engine.plans import PlanError, bind, clock_seconds, operator_of
from kestrel.engine.series import MARKET
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import ast
from kestrel.lang.functions import Context, Indicator, indicator
from kestrel.lang.operations import ARITHMETIC, COMPARISON, CROSSES
from kestrel.lang.registry import SERIES

Arr = npt.NDArray[Any]
Bools = npt.NDArray[np.bool_]


class Columns:
    """Lazily computed columns for a prefix of one session's ticks; `arm` is the index where
    the plan was armed (crosses start fresh there); `before`, the run's earlier ticks the
    plan's indicators of run-wide series are warmed with (`lookback`): their columns are
    computed over `before` then the prefix, and cut to the prefix."""

    def __init__(self, ticks: Ticks, session: SessionSpec, arm: int, half_ticks_per_point: float,
                 clock_base_ns: int, before: Ticks | None = None) -> None:
        self.ticks, self.session, self.arm = ticks, session, arm
        self.before = before if before is not None and len(before) else None
        self.open_ns = session.open_ns
        self.half_ticks_per_point, self.base = half_ticks_per_point, clock_base_ns
        self.n = len(ticks)
        self.account: dict[str, float] = {}
        self._series: dict[str, tuple[Arr, Arr]] = {}
        self._indicators: dict[object, Arr] = {}
        self._crosses: dict[ast.Crosses, Bools] = {}

    def nbytes(self) -> int:
        """Memory held by the computed columns."""
        arrays = [a for pair in self._series.values() for a in pair]
        arrays += [*self._indicators.values(), *self._crosses.values()]
        return sum(a.nbytes for a in arrays)

    def series(self, name: str) -> tuple[Arr, Arr]:
        """A market series' value and exact columns."""
        got = self._series.get(name)
        if got is None:
            if name not in MARKET:
                raise PlanError(f"series {name!r} is not available on the vectorized path")
            got = self._series[name] = MARKET[name](self.half_ticks_per_point, self.base).column(self.ticks)
        return got

    def value(self, expr: ast.Expr, lo: int = 0) -> Any:
        """The value of `expr` at ticks [lo, n): a column, or a scalar where it is constant."""
        if isinstance(expr, ast.Number | ast.Percent):
            return float(expr.value)
        if isinstance(expr, ast.TimeOfDay):
            return clock_seconds(self.session, expr)
        if isinstance(expr, ast.Series):
            if expr.name in self.account:
                return self.account[expr.name]
            return self.series(expr.name)[0][lo:]
        if isinstance(expr, ast.Call):
            return self.call(expr, lo)
        if isinstance(expr, ast.Neg):
            return -self.value(expr.operand, lo)
        if isinstance(expr, ast.Arith | ast.Compare):
            table = ARITHMETIC if isinstance(expr, ast.Arith) else COMPARISON
            op = operator_of(table, expr.op, "operator").column
            return op(self.value(expr.left, lo), self.value(expr.right, lo))
        if isinstance(expr, ast.Crosses):
            return self.crosses(expr)[lo:]
        if isinstance(expr, ast.And | ast.Or):
            combine = np.logical_and if isinstance(expr, ast.And) else np.logical_or
            acc = self.value(expr.operands[0], lo)
            for o in expr.operands[1:]:
                acc = combine(acc, self.value(o, lo))
            return acc
        if isinstance(expr, ast.Not):
            return np.logical_not(self.value(expr.operand, lo))
        raise PlanError(f"{type(expr).__name__} is not a value here")

    def column(self, expr: ast.Expr, lo: int = 0) -> Arr:
        """`value` as a column of ticks [lo, n) (a constant repeated)."""
        v = self.value(expr, lo)
        return v if isinstance(v, np.ndarray) and v.shape == (self.n - lo,) else np.full(self.n - lo, v)

    def call(self, expr: ast.Call, lo: int) -> Any:
        unit, args = bind(expr)
        if not issubclass(unit, Indicator):
            return unit.column(*[self.value(a, lo) for a in expr.args])
        key = (expr.name, args)
        got = self._indicators.get(key)
        if got is None:
            name = args.source()
            on_grid = SERIES[name].exact
            context = Context(self.half_ticks_per_point if on_grid else 1.0, self.open_ns, not on_grid,
                              self.session.length_ns)
            value, exact = self.series(name)
            before = self.before
            if before is None or name not in RUN_WIDE:
                got = indicator(unit, args, context).column(self.ticks.ts, value, exact)
            else:
                early, early_exact = MARKET[name](self.half_ticks_per_point, self.base).column(before)
                k = len(before)
                got = indicator(unit, args, context).column(
                    np.concatenate((before.ts, self.ticks.ts)), np.concatenate((early, value)),
                    np.concatenate((early_exact, exact)))[k:]
            self._indicators[key] = got
        return got[lo:]

    def crosses(self, expr: ast.Crosses) -> Bools:
        """A CROSSES at every tick: false up to the plan's arming tick included."""
        got = self._crosses.get(expr)
        if got is None:
            left, right = self.column(expr.left), self.column(expr.right)
            got = np.zeros(self.n, dtype=bool)
            a = self.arm
            if self.n - a > 1:
                got[a + 1:] = operator_of(CROSSES, expr.direction, "CROSSES direction")(left[a:-1], right[a:-1], left[a + 1:], right[a + 1:])
            self._crosses[expr] = got
        return got


__all__ = ["Columns"]

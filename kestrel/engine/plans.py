"""What the engine asks of a plan before it runs it, and the session clock its conditions read.

Invariants:
- `checked(plan)` returns a plan only if it is a well-typed `ast.Plan` (re-validated through
  msgspec: a Struct built in code skips the `Literal` and type checks of decoding) that the
  language checker accepts; anything else raises `PlanError`. The engine arms only what this
  returns; it evaluates plans as trees of functions and operators taken from fixed tables
  (`kestrel.lang.registry.DEFINITIONS`, `functions.ARITHMETIC`, `functions.COMPARISON`), so no part
  of a plan is ever run as code;
- `time` in a condition counts whole seconds from the session's clock base (local midnight
  of the open's date, at the open's UTC offset); a time of day `hh:mm[:ss]` in a condition is
  the first occurrence of that wall-clock time on the session's own calendar span, exactly
  like `UNTIL` (`SessionSpec.wall_clock_ns`): on a session crossing midnight (FX 17:00-17:00
  New York) `10:00` is the next morning, so `time >= 10:00` is false at 17:02.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TypeVar

import msgspec

from kestrel.market.session import NS_PER_DAY, SessionSpec
from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast
from kestrel.lang.checker import check
from kestrel.lang.functions import Arguments, arguments
from kestrel.lang.limits import DEFAULT_LIMITS, Limits
from kestrel.lang.registry import DEFINITIONS, Definition

PLAN_CACHE_SIZE = 4096
"""How many plans the engine's per-plan answers (`checked`, `localized`, `fast_blocker` ...) are
remembered for: more than the plans of a large universe re-armed at every session's open."""
ACCOUNT_SERIES = frozenset({"pos", "upnl", "rpnl", "pnl"})
T = TypeVar("T")
E = TypeVar("E")


class PlanError(ValueError):
    """A plan the engine cannot run (refused at `arm`, with what to change)."""


@lru_cache(maxsize=256)
def _checked(plan: ast.Plan, lot: float, limits: Limits) -> ast.Plan:
    try:
        typed = msgspec.convert(msgspec.to_builtins(plan), ast.Plan)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        raise PlanError(f"not a valid plan: {exc}; build plans with kestrel.lang.parse") from None
    diags = check(typed, limits, lot=lot)
    if diags:
        d = diags[0]
        where = f" ({d.path})" if d.path else ""
        raise PlanError(f"plan {typed.name!r} fails the checker: {d.message}{where}")
    return typed


def checked(plan: object, lot: float = 1.0, limits: Limits = DEFAULT_LIMITS) -> ast.Plan:
    """`plan` if it is a checked `ast.Plan` (against `limits`) whose quantities are whole
    numbers of `lot`, else `PlanError` (see the module invariants)."""
    if not isinstance(plan, ast.Plan):
        raise PlanError(f"expected a kestrel.lang.ast.Plan, got {type(plan).__name__}")
    try:
        return _checked(plan, lot, limits)
    except TypeError:  # unhashable field values: not a plan the parser could produce
        raise PlanError("not a valid plan: a field holds an unhashable value") from None


def clock_base_ns(session: SessionSpec) -> int:
    """The instant `time` counts from: local midnight of the open's date (open's offset)."""
    off, open_ns = session.utc_offset_ns, session.open_ns
    return open_ns - (open_ns + off) % NS_PER_DAY


def clock_seconds(session: SessionSpec, tod: ast.TimeOfDay) -> int:
    """A time of day as a `time` value: seconds from the clock base to its first occurrence
    on the session's calendar span (as `UNTIL` reads it)."""
    at = session.wall_clock_ns(int(tod.hour), int(tod.minute), int(tod.second))
    return (at - clock_base_ns(session)) // NS_PER_S


def operator_of(table: dict[str, T], key: object, what: str) -> T:
    """`table[key]`, or PlanError for a key the language does not have (a plan built in code
    that skipped the checker)."""
    if not isinstance(key, str) or key not in table:
        raise PlanError(f"unknown {what} {key!r}")
    return table[key]


@lru_cache(maxsize=4096)
def bind(call: ast.Call) -> tuple[Definition, Arguments]:
    """The unit of a checked call and its resolved literal arguments (none for an operation,
    whose arguments are expressions); PlanError when the call does not fit its signature."""
    unit = DEFINITIONS.get(call.name)
    if unit is None:
        raise PlanError(f"unknown function {call.name!r}")
    if not unit.spec.min_args <= len(call.args) <= unit.spec.max_args:
        raise PlanError(f"{unit.spec.typed}: got {len(call.args)} arguments")
    if any(p.type == "Numeric" for p in unit.spec.params):
        return unit, Arguments(())
    try:
        return unit, arguments(unit.spec, call.args)
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def own_walk(*roots: ast.Expr | None) -> Iterator[ast.Expr]:
    """Every expression under `roots` that reads the plan's own symbol: `ast.walk` stopping at
    a cross-symbol read (which is yielded, its read not)."""
    stack = [root for root in roots if root is not None]
    while stack:
        expr = stack.pop()
        yield expr
        if not isinstance(expr, ast.SymbolRead):
            stack.extend(ast.children(expr))


def series_in(expr: ast.Expr | None) -> set[str]:
    """Names of the plan's own series an expression reads (directly or inside calls)."""
    return {x.name for x in own_walk(expr) if isinstance(x, ast.Series)}


def _plan_exprs(plan: ast.Plan) -> Iterator[ast.Expr]:
    for rule in plan.rules:
        yield from ast.walk(rule.cond, *(a.price for a in rule.actions if isinstance(a, ast.Order)))


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def symbol_reads(plan: ast.Plan) -> tuple[str, ...]:
    """The other symbols `plan` reads (`SPY.last`), sorted."""
    return tuple(sorted({x.symbol for x in _plan_exprs(plan) if isinstance(x, ast.SymbolRead)}))


def _localize(expr: E, symbol: str) -> E:
    if isinstance(expr, ast.SymbolRead):
        return expr.read if expr.symbol == symbol else expr  # type: ignore[return-value]
    if isinstance(expr, ast.Call):
        return msgspec.structs.replace(expr, args=tuple(_localize(a, symbol) for a in expr.args))
    if isinstance(expr, ast.Neg | ast.Not):
        return msgspec.structs.replace(expr, operand=_localize(expr.operand, symbol))
    if isinstance(expr, ast.Arith | ast.Compare | ast.Crosses):
        return msgspec.structs.replace(expr, left=_localize(expr.left, symbol), right=_localize(expr.right, symbol))
    if isinstance(expr, ast.And | ast.Or):
        return msgspec.structs.replace(expr, operands=tuple(_localize(o, symbol) for o in expr.operands))
    return expr


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def localized(plan: ast.Plan, symbol: str | None) -> ast.Plan:
    """`plan` with its reads of `symbol` itself (`AAPL.last` in a plan on AAPL) as the plain
    reads they are (`last`); `plan` itself when it has none."""
    if symbol is None or symbol not in symbol_reads(plan):
        return plan
    rules = tuple(msgspec.structs.replace(
        rule, cond=_localize(rule.cond, symbol),
        actions=tuple(msgspec.structs.replace(a, price=_localize(a.price, symbol))
                      if isinstance(a, ast.Order) and a.price is not None else a for a in rule.actions))
        for rule in plan.rules)
    return msgspec.structs.replace(plan, rules=rules)


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def longest_lookback(plan: ast.Plan) -> tuple[int, ast.Call | None]:
    """The longest lookback (ns) any call in the plan's conditions and order prices needs
    to be defined, and that call."""
    best: tuple[int, ast.Call | None] = (0, None)
    for rule in plan.rules:
        prices = [a.price for a in rule.actions if isinstance(a, ast.Order)]
        for x in ast.walk(rule.cond, *prices):
            if isinstance(x, ast.Call):
                need = bind(x)[1].lookback_ns()
                if need > best[0]:
                    best = (need, x)
    return best


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def fast_blocker(plan: ast.Plan) -> str:
    """Why the vectorized path cannot run `plan`, or "" when it can. `pos` and `rpnl` only
    change on fills, so conditions may read them (outside CROSSES); `upnl`/`pnl` move with
    every tick and entry prices must not read account state. A read of another symbol needs
    that symbol's ticks in the merged order: the reference path."""
    if symbol_reads(plan):
        return f"the plan reads another symbol ({symbol_reads(plan)[0]}): the reference path merges its ticks"
    for rule in plan.rules:
        if series_in(rule.cond) & {"upnl", "pnl"}:
            return "a condition reads upnl or pnl (they change on every tick)"
        if any(isinstance(x, ast.Crosses) and series_in(x) & ACCOUNT_SERIES for x in ast.walk(rule.cond)):
            return "a CROSSES reads account state"
        for act in rule.actions:
            if isinstance(act, ast.Order) and series_in(act.price) & ACCOUNT_SERIES:
                return "an entry price reads account state"
    return ""


_checked = lru_cache(maxsize=PLAN_CACHE_SIZE)(_checked.__wrapped__)  # as many as the other plan caches

__all__ = ["ACCOUNT_SERIES", "PlanError", "bind", "operator_of", "checked", "clock_base_ns", "clock_seconds",
           "fast_blocker", "localized", "longest_lookback", "own_walk", "series_in", "symbol_reads"]

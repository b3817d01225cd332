"""Indicator specs: a checked `Call` resolved once into a normalized, hashable spec.

Both execution paths read these specs: the reference path generates incremental per-tick
code from them (`codegen`), the fast path computes whole arrays (`vector`). Two calls
with the same spec share one indicator. Semantics (shared with the language):
- `high/low/range(d)`: over ticks with ts in [t-d, t) (strictly before the current tick's
  ts); defined once the window holds a tick and t-d >= the session's first tick ts;
- `chg(d)`: 100*(last/ref - 1), ref = last of the latest tick with ts <= t-d;
- `sma/ema(x, n)`: over the last n ticks including this one; `sma/ema(x, n, tf)` and
  `atr(n, tf=1m)` over the last n completed bars of tf (bars aligned on the session open;
  a bar completes when the first tick of a later bar arrives; empty bars do not exist);
- sma is (S_i - S_{i-n}) / n on the running sum S (so both paths agree to the bit); ema is
  seeded with the first value, alpha = 2/(n+1); undefined values are NaN.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast
from kestrel.lang.ast import children as children  # re-exported: moved to kestrel.lang.ast
from kestrel.lang.ast import walk as walk
from kestrel.lang.registry import FUNCTIONS, PRICE_SERIES

DYNAMIC_SERIES = frozenset({"pos", "upnl", "rpnl", "pnl"})


class IndicatorSpec(msgspec.Struct, frozen=True):
    """kind: high | low | chg | sma | ema | atr; `window_ns` for time windows, `x` the input
    series name, `n` the count, `tf_ns` the bar size (0 = tick-based)."""

    kind: Literal["high", "low", "chg", "sma", "ema", "atr"]
    window_ns: int = 0
    x: str = "last"
    n: int = 0
    tf_ns: int = 0


class PlanError(ValueError):
    """A plan the engine cannot run (it should have been rejected by the checker)."""


def _duration_ns(e: ast.Expr, what: str) -> int:
    if not isinstance(e, ast.Duration) or e.value <= 0:
        raise PlanError(f"{what}: expected a positive duration such as 30m")
    return e.seconds * NS_PER_S


def _count(e: ast.Expr, what: str) -> int:
    if not isinstance(e, ast.Number) or e.value != int(e.value) or e.value <= 0:
        raise PlanError(f"{what}: expected a whole count > 0 such as 20")
    return int(e.value)


def _price_series(e: ast.Expr, what: str) -> str:
    if not isinstance(e, ast.Series) or e.name not in PRICE_SERIES:
        raise PlanError(f"{what}: expected a price series name ({', '.join(sorted(PRICE_SERIES))})")
    return e.name


def resolve(call: ast.Call) -> tuple[IndicatorSpec, ...]:
    """The indicator specs a call needs (range needs two); raises PlanError when the call
    is not in the registry or its arguments do not fit."""
    spec = FUNCTIONS.get(call.name)
    if spec is None:
        raise PlanError(f"unknown function {call.name!r}")
    if not spec.min_args <= len(call.args) <= spec.max_args:
        raise PlanError(f"{spec.signature}: got {len(call.args)} arguments")
    what = spec.signature
    a = call.args
    if call.name in ("high", "low", "chg"):
        return (IndicatorSpec(call.name, window_ns=_duration_ns(a[0], what)),)  # type: ignore[arg-type]
    if call.name == "range":
        d = _duration_ns(a[0], what)
        return (IndicatorSpec("high", window_ns=d), IndicatorSpec("low", window_ns=d))
    if call.name in ("sma", "ema"):
        tf = _duration_ns(a[2], what) if len(a) > 2 else 0
        return (
            IndicatorSpec(call.name, x=_price_series(a[0], what), n=_count(a[1], what), tf_ns=tf),  # type: ignore[arg-type]
        )
    # atr
    tf = _duration_ns(a[1], what) if len(a) > 1 else 60 * NS_PER_S
    return (IndicatorSpec("atr", n=_count(a[0], what), tf_ns=tf),)


def series_in(e: ast.Expr | None) -> set[str]:
    """Names of the series an expression reads (directly or inside calls)."""
    return {x.name for x in walk(e) if isinstance(x, ast.Series)}


def lookback_ns(spec: IndicatorSpec) -> int:
    """How far back in time an indicator must see to be defined: its window for high/low/chg,
    n bars of its timeframe for bar-based sma/ema/atr, nothing for tick-count windows."""
    if spec.kind in ("high", "low", "chg"):
        return spec.window_ns
    return spec.n * spec.tf_ns


def longest_lookback(plan: ast.Plan) -> tuple[int, ast.Call | None]:
    """The longest lookback any call in the plan's conditions and order prices needs, and
    that call."""
    best: tuple[int, ast.Call | None] = (0, None)
    for rule in plan.rules:
        prices = [a.price for a in rule.actions if isinstance(a, ast.Order)]
        for x in walk(rule.cond, *prices):
            if isinstance(x, ast.Call):
                need = max(lookback_ns(spec) for spec in resolve(x))
                if need > best[0]:
                    best = (need, x)
    return best


def fast_blocker(plan: ast.Plan) -> str:
    """Why the fast path cannot run `plan`, or "" when it can. `pos` and `rpnl` only change
    on fills, so conditions may read them (outside CROSSES); `upnl`/`pnl` move with every
    tick and entry prices must not read account state."""
    for rule in plan.rules:
        if series_in(rule.cond) & {"upnl", "pnl"}:
            return "a condition reads upnl or pnl (they change on every tick)"
        if any(isinstance(x, ast.Crosses) and series_in(x) & DYNAMIC_SERIES for x in walk(rule.cond)):
            return "a CROSSES reads account state"
        for act in rule.actions:
            if isinstance(act, ast.Order) and series_in(act.price) & DYNAMIC_SERIES:
                return "an entry price reads account state"
    return ""

"""What the engine asks of a plan before it runs it, and the session clock its conditions read.

Invariants:
- `checked(plan)` returns a plan only if it is a well-typed `ast.Plan` (re-validated through
  msgspec: a Struct built in code skips the `Literal` and type checks of decoding) that the
  language checker accepts; anything else raises `PlanError`. The engine arms only what this
  returns, and the code generator emits operators and names from fixed tables, so no string
  of a plan ever becomes code;
- `time` in a condition counts whole seconds from the session's clock base (local midnight
  of the open's date, at the open's UTC offset); a time of day `hh:mm[:ss]` in a condition is
  the first occurrence of that wall-clock time on the session's own calendar span, exactly
  like `UNTIL` (`SessionSpec.wall_clock_ns`): on a session crossing midnight (FX 17:00-17:00
  New York) `10:00` is the next morning, so `time >= 10:00` is false at 17:02.
"""

from __future__ import annotations

from functools import lru_cache

import msgspec

from kestrel.engine.indicators import PlanError
from kestrel.market.session import NS_PER_DAY, SessionSpec
from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast
from kestrel.lang.checker import check


@lru_cache(maxsize=256)
def _checked(plan: ast.Plan) -> ast.Plan:
    try:
        typed = msgspec.convert(msgspec.to_builtins(plan), ast.Plan)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        raise PlanError(f"not a valid plan: {exc}; build plans with kestrel.lang.parse") from None
    diags = check(typed)
    if diags:
        d = diags[0]
        where = f" ({d.path})" if d.path else ""
        raise PlanError(f"plan {typed.name!r} fails the checker: {d.message}{where}")
    return typed


def checked(plan: object) -> ast.Plan:
    """`plan` if it is a checked `ast.Plan`, else `PlanError` (see the module invariants)."""
    if not isinstance(plan, ast.Plan):
        raise PlanError(f"expected a kestrel.lang.ast.Plan, got {type(plan).__name__}")
    try:
        return _checked(plan)
    except TypeError:  # unhashable field values: not a plan the parser could produce
        raise PlanError("not a valid plan: a field holds an unhashable value") from None


def clock_base_ns(session: SessionSpec) -> int:
    """The instant `time` counts from: local midnight of the open's date (open's offset)."""
    off = session.utc_offset_ns
    return session.open_ns - (session.open_ns + off) % NS_PER_DAY


def clock_seconds(session: SessionSpec, tod: ast.TimeOfDay) -> int:
    """A time of day as a `time` value: seconds from the clock base to its first occurrence
    on the session's calendar span (as `UNTIL` reads it)."""
    at = session.wall_clock_ns(int(tod.hour), int(tod.minute), int(tod.second))
    return (at - clock_base_ns(session)) // NS_PER_S


__all__ = ["checked", "clock_base_ns", "clock_seconds"]

"""Plan risk classes and the self-correction dry-run.

Invariants:
- every plan that can place an order (an `Order` or a `FLAT`) is at least HIGH;
- CRITICAL marks the genuinely dangerous: an entry without a protective stop (STOP or TRAIL),
  a size over `maxpos`, or a worst-case loss (size x distance to the tightest stop as the
  engine places it x multiplier) over `maxloss`;
- a plan that places nothing (only CANCEL, or no rules) is LOW;
- both functions are pure: the same plan and context give the same answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import msgspec

from kestrel.engine import orders
from kestrel.engine.orders import TickGrid
from kestrel.lang import ast
from kestrel.lang.numbers import num
from kestrel.market.instrument import lots_floor, qty_text, units_of


class RiskLevel(enum.IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2
    CRITICAL = 3


class RiskBounds(msgspec.Struct, frozen=True):
    """The operator's bounds (a plan's own RISK clause may only tighten them), the
    instrument's `multiplier` (money per price point per unit, as in the engine's config),
    its `tick_size` (stops are placed on its grid, as the engine places them) and its
    `lot_size` (quantities are whole numbers of lots; `maxpos` is in units)."""

    maxpos: int | float = 1000
    maxloss: float = 1000.0
    multiplier: float = 1.0
    tick_size: float = 0.01
    lot_size: float = 1.0


def effective_bounds(plan: ast.Plan, bounds: RiskBounds) -> tuple[int | float, float]:
    """maxpos and maxloss as the engine enforces them: a plan's RISK only tightens the
    operator's bounds (the minimum of the two)."""
    r = plan.risk
    lot = bounds.lot_size
    operator = bounds.maxpos if lot == 1 and isinstance(bounds.maxpos, int) else units_of(
        lots_floor(bounds.maxpos, lot), lot)  # the whole lots within it, as the engine counts
    maxpos = operator if r.maxpos is None else min(operator, r.maxpos)
    maxloss = bounds.maxloss if r.maxloss is None else min(bounds.maxloss, r.maxloss)
    return maxpos, maxloss


class RiskAssessment(msgspec.Struct, frozen=True):
    level: RiskLevel
    reasons: tuple[str, ...] = ()


def _orders(plan: ast.Plan) -> list[ast.Order]:
    return [a for rule in plan.rules for a in rule.actions if isinstance(a, ast.Order)]


def stop_distance(order: ast.Order, reference: float | None, tick_size: float = 0.01) -> float | None:
    """Per-unit distance from an entry filled at `reference` to its tightest protective stop
    as the engine places it (`kestrel.engine.orders.stop_distance`, on the tick grid); None
    when the order has none, or when only relative offsets are given and `reference` is
    unknown."""
    if reference is not None:
        return orders.stop_distance(order, reference, TickGrid(tick_size))
    offs = [o for o in (order.stop, order.trail) if o is not None]
    if not offs or any(o.mode != "abs" for o in offs):
        return None
    return min(abs(o.value) for o in offs)


def worst_case_loss(order: ast.Order, reference: float | None, bounds: RiskBounds) -> float | None:
    """Money lost if `order` fills near `reference` and is stopped out (None when unknown)."""
    dist = stop_distance(order, reference, bounds.tick_size)
    return None if dist is None else dist * order.qty * bounds.multiplier


def classify(plan: ast.Plan, *, reference: float | None, bounds: RiskBounds) -> RiskAssessment:
    """Classify `plan`; `reference` is the price entries are assumed to fill near (the last
    price at the cutoff), used for pct/absolute stop distances."""
    orders = _orders(plan)
    flats = any(isinstance(a, ast.Flat) for rule in plan.rules for a in rule.actions)
    if not orders and not flats:
        return RiskAssessment(RiskLevel.LOW)
    maxpos, maxloss = effective_bounds(plan, bounds)
    reasons: list[str] = []
    for i, order in enumerate(orders, 1):
        label = f"order {i} ({order.side.upper()} {num(order.qty)})"
        if order.stop is None and order.trail is None:
            reasons.append(f"{label} has no protective STOP or TRAIL")
        if order.qty > maxpos:
            reasons.append(f"{label} size exceeds maxpos {num(maxpos)}")
        loss = worst_case_loss(order, reference, bounds)
        if loss is not None and loss > maxloss:
            reasons.append(f"{label} worst-case loss {loss:.2f} exceeds maxloss {maxloss:g}")
    if reasons:
        return RiskAssessment(RiskLevel.CRITICAL, tuple(reasons))
    return RiskAssessment(RiskLevel.HIGH, ("places orders",))


ConditionProbe = Callable[[ast.Expr], bool | None]
"""Evaluates a rule condition at the cutoff: True/False, or None when it cannot be known."""


def dry_run(
    plan: ast.Plan,
    *,
    reference: float | None,
    bounds: RiskBounds,
    probe: ConditionProbe | None = None,
) -> tuple[str, ...]:
    """The self-correction pass: what is wrong with a valid plan against the frozen snapshot.

    Checks brackets on the right side of the entry, entries not already triggered at the
    cutoff, worst-case loss within `maxloss` and sizes within bounds. Empty = passes.
    """
    maxpos, maxloss = effective_bounds(plan, bounds)
    findings: list[str] = []
    for r, rule in enumerate(plan.rules, 1):
        orders = [a for a in rule.actions if isinstance(a, ast.Order)]
        if orders and probe is not None and probe(rule.cond) is True:
            findings.append(
                f"rule {r}: its condition already holds at the cutoff, so it would fire on "
                "the first tick (wait for a fresh signal instead)"
            )
        for order in orders:
            label = f"rule {r} ({order.side.upper()} {num(order.qty)})"
            for name, off, below in (
                ("STOP", order.stop, order.side == "buy"),
                ("TARGET", order.target, order.side == "sell"),
            ):
                if off is None:
                    continue
                side = _bracket_side(off, reference)
                if side is None:
                    continue
                if below and side >= 0 or not below and side <= 0:
                    where = "below" if below else "above"
                    findings.append(
                        f"{label}: {name} must be {where} the entry for a {order.side.upper()}"
                    )
            if order.qty <= 0 or order.qty > maxpos:
                findings.append(f"{label}: size must be between {qty_text(bounds.lot_size, bounds.lot_size)} "
                                f"and maxpos {num(maxpos)}")
            loss = worst_case_loss(order, reference, bounds)
            if loss is not None and loss > maxloss:
                findings.append(
                    f"{label}: worst-case loss {loss:.2f} exceeds maxloss "
                    f"{maxloss:g} (tighten the stop or trade smaller)"
                )
    return tuple(findings)


def _bracket_side(off: ast.Offset, reference: float | None) -> float | None:
    """Sign of the bracket relative to the entry: negative below, positive above."""
    if off.mode in ("pct", "abs"):
        return off.value
    if reference is None:
        return None
    return off.value - reference


__all__ = [
    "ConditionProbe",
    "RiskAssessment",
    "RiskBounds",
    "RiskLevel",
    "classify",
    "dry_run",
    "stop_distance",
    "worst_case_loss",
]

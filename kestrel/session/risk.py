"""The one risk classification of a plan, and the dry run that reports it before arming.

`assess(plan, ...)` is THE classification: every profile's risk trigger (`fast` escalates at
CRITICAL), `thorough`'s self-check and the bound check every profile runs read its result, so
they can never disagree about a plan. It lists findings, each with a level:

- CRITICAL: an entry without a protective STOP or TRAIL (only `maxloss` then bounds its loss,
  by flattening the position when it is reached); and every order a bound will reject, which
  the engine would refuse at run time (`bound` names it): a size over `maxpos`, or one that
  would take the position over it from the position held; a worst-case loss (size x distance
  from the expected fill to the tightest protective stop as the engine places it, with
  slippage and fees: `kestrel.engine.orders.entry_risk`) that reaches `maxloss` (the engine
  rejects the order and disarms the plan) or the session's loss room (`session_maxloss` less
  the loss taken so far); more orders than `maxorders` allows (the later ones are rejected);
- HIGH: what the self-check finds against the frozen snapshot: a bracket on the wrong side of
  the entry, an entry whose condition already holds at the cutoff (it would fire on the first
  tick).
The plan's level is CRITICAL when any finding is; else HIGH when it can place an order (an
`Order` or a `FLAT`); else LOW (it places nothing). Bounds are the engine's: a plan's RISK can
only tighten the operator's (`effective_bounds`). Rules are numbered from 1, as written.

Pure: the same plan and context give the same answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import msgspec

from kestrel.engine import orders
from kestrel.engine.config import EngineConfig
from kestrel.engine.orders import TickGrid
from kestrel.lang import ast
from kestrel.lang.numbers import num
from kestrel.market.account import FLAT, AccountState
from kestrel.market.instrument import lots_floor, lots_in, units_of


class RiskLevel(enum.IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2
    CRITICAL = 3


class RiskBounds(msgspec.Struct, frozen=True):
    """The operator's bounds (a plan's own RISK clause may only tighten them), the
    instrument's `multiplier` (money per price point per unit, as in the engine's config)
    and its `tick_size` (stops are placed on its grid, as the engine places them), and the
    friction the engine's worst case counts (slippage in ticks, fees)."""

    maxpos: int | float = 1000
    maxloss: float = 1000.0
    multiplier: float = 1.0
    tick_size: float = 0.01
    maxorders: int = 50
    session_maxloss: float | None = None
    slippage_ticks: float = 0.0
    fee_per_unit: float = 0.0
    fee_per_order: float = 0.0
    lot_size: float = 1.0

    @classmethod
    def of(cls, config: EngineConfig, tick_size: float) -> RiskBounds:
        """The bounds of an engine config on an instrument of `tick_size`."""
        return cls(maxpos=config.operator_maxpos, maxloss=config.maxloss, multiplier=config.multiplier,
                   tick_size=tick_size, maxorders=config.maxorders, session_maxloss=config.session_maxloss,
                   slippage_ticks=config.slippage_ticks, fee_per_unit=config.fee_per_unit,
                   fee_per_order=config.fee_per_order, lot_size=config.lot_size)

    def config(self) -> EngineConfig:
        """An engine config with these bounds and friction (what the worst case is measured with)."""
        return EngineConfig(maxpos=self.maxpos, maxloss=self.maxloss, maxorders=self.maxorders,
                            session_maxloss=self.session_maxloss, multiplier=self.multiplier,
                            slippage_ticks=self.slippage_ticks, fee_per_unit=self.fee_per_unit,
                            fee_per_order=self.fee_per_order, lot_size=self.lot_size)


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


def effective_maxorders(plan: ast.Plan, bounds: RiskBounds) -> int:
    m = plan.risk.maxorders
    return bounds.maxorders if m is None else min(bounds.maxorders, int(m))


class Finding(msgspec.Struct, frozen=True):
    """One thing wrong with a plan: `rule` (from 1; None for the plan as a whole), its `text`,
    its `level`, and `bound`, the bound that will reject the order at run time (`maxpos`,
    `maxloss`, `session_maxloss`, `maxorders`; None when no bound enforces it)."""

    rule: int | None
    text: str
    level: RiskLevel
    bound: str | None = None


class RiskAssessment(msgspec.Struct, frozen=True):
    """The plan's level, the reasons for it (the CRITICAL findings' texts, or `places orders`
    for HIGH), and every finding."""

    level: RiskLevel
    reasons: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()

    @property
    def binding(self) -> tuple[Finding, ...]:
        """The findings a bound will enforce by rejecting an order."""
        return tuple(f for f in self.findings if f.bound is not None)


ConditionProbe = Callable[[ast.Expr], bool | None]
"""Evaluates a rule condition at the cutoff: True/False, or None when it cannot be known."""


class Touch(msgspec.Struct, frozen=True):
    """The touch entries are assumed to fill near (the snapshot's last quote)."""

    bid: float
    ask: float


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


def worst_case_loss(order: ast.Order, reference: float | None, bounds: RiskBounds,
                    quote: Touch | None = None) -> float | None:
    """Money lost if `order` fills near `reference` and is stopped out, as the engine measures
    it before placing the order (`kestrel.engine.orders.entry_risk`: slippage and fees
    included; a LMT or STP entry is taken at `reference`); None when unknown (no stop, or no
    price)."""
    if order.stop is None and order.trail is None:
        return None
    if reference is None:
        dist = stop_distance(order, None, bounds.tick_size)
        return None if dist is None else dist * order.qty * bounds.multiplier
    bid, ask = (quote.bid, quote.ask) if quote is not None else (reference, reference)
    grid = TickGrid(bounds.tick_size)
    side = 1 if order.side == "buy" else -1
    price = None if order.order_type == "mkt" else reference
    lots = lots_in(order.qty, bounds.lot_size) or max(1, round(order.qty / bounds.lot_size))
    per_lot = orders.entry_risk(order, side, price, bid, ask, bounds.slippage_ticks * grid.tick, grid,
                                bounds.config(), lots)
    return per_lot * lots


def _bracket_side(off: ast.Offset, reference: float | None) -> float | None:
    """Sign of the bracket relative to the entry: negative below, positive above."""
    if off.mode in ("pct", "abs"):
        return off.value
    if reference is None:
        return None
    return off.value - reference


def _as_is(x: float) -> float:
    return x


def _pnl(account: AccountState) -> float:
    """The session's pnl so far as the loss bounds measure it: realized - fees + unrealized."""
    return account.rpnl - account.fees + account.upnl


def _order_count(plan: ast.Plan) -> int:
    """The most orders the plan can place (entries and FLATs, each rule's repeats counted)."""
    return sum(max(1, rule.repeat) * sum(isinstance(a, (ast.Order, ast.Flat)) for a in rule.actions)
               for rule in plan.rules)


def assess(
    plan: ast.Plan,
    *,
    reference: float | None,
    bounds: RiskBounds,
    quote: Touch | None = None,
    account: AccountState = FLAT,
    probe: ConditionProbe | None = None,
    money: Callable[[float], float] | None = None,
) -> RiskAssessment:
    """The plan's classification and findings (see the module docstring). `reference` is the
    price entries are assumed to fill near (the last price at the cutoff), `quote` the touch,
    `account` the position and pnl the plan would be armed on, `probe` the snapshot's
    condition test (None: the fires-at-once check is skipped). `money` gives each amount of
    money as the findings' text shows it (a blind run's agent reads its blind scale); the
    classification always reads the real amounts."""
    shown = money or _as_is
    maxpos, maxloss = effective_bounds(plan, bounds)
    findings: list[Finding] = []
    places = False
    room = None if bounds.session_maxloss is None else bounds.session_maxloss + _pnl(account)
    for r, rule in enumerate(plan.rules, 1):
        rule_orders = [a for a in rule.actions if isinstance(a, ast.Order)]
        places = places or bool(rule_orders) or any(isinstance(a, ast.Flat) for a in rule.actions)
        if rule_orders and probe is not None and probe(rule.cond) is True:
            findings.append(Finding(r, f"rule {r}: its condition already holds at the cutoff, so it would fire "
                                       "on the first tick (wait for a fresh signal instead)", RiskLevel.HIGH))
        for order in rule_orders:
            label = f"rule {r} ({order.side.upper()} {num(order.qty)})"
            if order.stop is None and order.trail is None:
                findings.append(Finding(r, f"{label}: no protective STOP or TRAIL (only maxloss {shown(maxloss):g} bounds "
                                           "its loss, by flattening)", RiskLevel.CRITICAL))
            for name, off, below in (("STOP", order.stop, order.side == "buy"),
                                     ("TARGET", order.target, order.side == "sell")):
                side = None if off is None else _bracket_side(off, reference)
                if side is not None and (below and side >= 0 or not below and side <= 0):
                    where = "below" if below else "above"
                    findings.append(Finding(r, f"{label}: {name} must be {where} the entry for a "
                                               f"{order.side.upper()}", RiskLevel.HIGH))
            signed = order.qty if order.side == "buy" else -order.qty
            if order.qty > maxpos:
                findings.append(Finding(r, f"{label}: size over maxpos {num(maxpos)}: the engine rejects it",
                                        RiskLevel.CRITICAL, "maxpos"))
            elif abs(account.position + signed) > maxpos:
                held = f"{'long' if account.position > 0 else 'short'} {num(abs(account.position))}"
                findings.append(Finding(r, f"{label}: with the position {held} it would reach "
                                           f"{num(account.position + signed)}, over maxpos {num(maxpos)}: the engine rejects it",
                                        RiskLevel.CRITICAL, "maxpos"))
            loss = worst_case_loss(order, reference, bounds, quote)
            if loss is not None and loss >= maxloss:
                findings.append(Finding(r, f"{label}: worst-case loss {shown(loss):.2f} reaches maxloss {shown(maxloss):g}: the "
                                           "engine rejects it and disarms the plan (tighten the stop or trade smaller)",
                                        RiskLevel.CRITICAL, "maxloss"))
            elif loss is not None and room is not None and bounds.session_maxloss is not None and loss >= room:
                findings.append(Finding(r, f"{label}: worst-case loss {shown(loss):.2f} reaches the session's loss room "
                                           f"{shown(max(room, 0.0)):.2f} (session_maxloss {shown(bounds.session_maxloss):g}): the "
                                           "engine rejects it and disarms the plan", RiskLevel.CRITICAL,
                                        "session_maxloss"))
    count, most = _order_count(plan), effective_maxorders(plan, bounds)
    if count > most:
        findings.append(Finding(None, f"the plan can place {count} orders, over maxorders {most}: the engine "
                                      f"rejects every order past those {most}", RiskLevel.CRITICAL, "maxorders"))
    critical = tuple(f.text for f in findings if f.level == RiskLevel.CRITICAL)
    if critical:
        return RiskAssessment(RiskLevel.CRITICAL, critical, tuple(findings))
    if places:
        return RiskAssessment(RiskLevel.HIGH, ("places orders",), tuple(findings))
    return RiskAssessment(RiskLevel.LOW, (), tuple(findings))


def classify(plan: ast.Plan, *, reference: float | None, bounds: RiskBounds,
             account: AccountState = FLAT, quote: Touch | None = None) -> RiskAssessment:
    """`assess` without the snapshot's condition probe (the same classification)."""
    return assess(plan, reference=reference, bounds=bounds, quote=quote, account=account)


def dry_run(
    plan: ast.Plan,
    *,
    reference: float | None,
    bounds: RiskBounds,
    probe: ConditionProbe | None = None,
    account: AccountState = FLAT,
    quote: Touch | None = None,
) -> tuple[str, ...]:
    """The self-check's findings as text (`assess`'s, every level). Empty = passes."""
    return tuple(f.text for f in assess(plan, reference=reference, bounds=bounds, quote=quote,
                                        account=account, probe=probe).findings)


def module_assessment(plans: tuple[ast.Plan, ...], assess: Callable[[ast.Plan], RiskAssessment]) -> RiskAssessment:
    """One assessment of a module: each plan's (`assess`), its reasons and findings prefixed by
    `plan NAME ON SYM: `, the level the highest (LOW for no plan)."""
    level = RiskLevel.LOW
    reasons: list[str] = []
    findings: list[Finding] = []
    for p in plans:
        a = assess(p)
        tag = f"plan {p.name} ON {p.instrument}: "
        level = max(level, a.level)
        reasons += [tag + r for r in a.reasons]
        findings += [msgspec.structs.replace(f, text=tag + f.text) for f in a.findings]
    return RiskAssessment(level, tuple(reasons), tuple(findings))


__all__ = [
    "ConditionProbe",
    "Finding",
    "Touch",
    "RiskAssessment",
    "RiskBounds",
    "RiskLevel",
    "assess",
    "classify",
    "dry_run",
    "effective_bounds",
    "effective_maxorders",
    "module_assessment",
    "stop_distance",
    "worst_case_loss",
]

"""Only checked plans are executed: a hand-built `Plan` carrying code in any field the
evaluators read is refused at `arm`, and nothing it carries ever runs.

msgspec does not validate the `Literal` fields of Structs built in code, so each payload below
would reach the evaluators if the engine trusted the AST; they take operators, directions and
series from fixed tables, so even then no string of a plan is run."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

import pytest

from kestrel.engine import Engine, EngineConfig, PlanError, ticks_of
from kestrel.engine.broker import Broker
from kestrel.engine.ledger import Ledger
from kestrel.engine.money import Money
from kestrel.engine.orders import TickGrid
from kestrel.engine.reference import Evaluation
from kestrel.engine.vector import Columns
from kestrel.lang import ast

from engine_helpers import SESSION, quotes

FLAG = "KESTREL_TEST_PWNED"
CODE = f"__import__('os').environ.__setitem__('{FLAG}', '1')"
EXPR = f"0 or {CODE} or 0"
BUY = ast.Order("buy", 1, "mkt")
LAST = ast.Series("last")


def rule(cond: Any, *actions: Any) -> ast.Plan:
    return ast.Plan("p", (ast.Rule(cond, actions or (BUY,)),))


def order(**kw: Any) -> ast.Plan:
    return rule(ast.Compare(">", LAST, ast.Number(0)), ast.Order(**{"side": "buy", "qty": 1, "order_type": "mkt", **kw}))


MALICIOUS: dict[str, Callable[[], ast.Plan]] = {
    "Compare.op": lambda: rule(ast.Compare(f"< 0 or {CODE} or 1 <", LAST, ast.Number(0))),  # type: ignore[arg-type]
    "Arith.op": lambda: rule(ast.Compare(">", ast.Arith(f"+ {CODE} +", LAST, ast.Number(1)), ast.Number(0))),  # type: ignore[arg-type]
    "Crosses.direction": lambda: rule(ast.Crosses(EXPR, LAST, ast.Number(0))),  # type: ignore[arg-type]
    "Series.name": lambda: rule(ast.Compare(">", ast.Series(EXPR), ast.Number(0))),
    "Number.value": lambda: rule(ast.Compare(">", LAST, ast.Number(EXPR))),  # type: ignore[arg-type]
    "Percent.value": lambda: rule(ast.Compare(">", ast.Call("chg", (ast.Duration(1, "m"),)), ast.Percent(EXPR))),  # type: ignore[arg-type]
    "TimeOfDay.hour": lambda: rule(ast.Compare(">=", ast.Series("time"), ast.TimeOfDay(EXPR, 0))),  # type: ignore[arg-type]
    "Call.name": lambda: rule(ast.Compare(">", LAST, ast.Call(EXPR, (ast.Duration(1, "m"),)))),
    "Duration.value": lambda: rule(ast.Compare(">", LAST, ast.Call("high", (ast.Duration(EXPR, "m"),)))),  # type: ignore[arg-type]
    "Duration.unit": lambda: rule(ast.Compare(">", LAST, ast.Call("high", (ast.Duration(1, EXPR),)))),  # type: ignore[arg-type]
    "sma count": lambda: rule(ast.Compare(">", LAST, ast.Call("sma", (LAST, ast.Number(EXPR))))),  # type: ignore[arg-type]
    "Not.operand": lambda: rule(ast.Not(EXPR)),  # type: ignore[arg-type]
    "And.operands": lambda: rule(ast.And((EXPR, EXPR))),  # type: ignore[arg-type]
    "Rule.repeat": lambda: ast.Plan("p", (ast.Rule(ast.Compare(">", LAST, ast.Number(0)), (BUY,), EXPR),)),  # type: ignore[arg-type]
    "Plan.name": lambda: ast.Plan(f"p>\n{CODE}\n#", (ast.Rule(ast.Compare(">", LAST, ast.Number(0)), (BUY,)),)),
    "Order.side": lambda: order(side=EXPR),
    "Order.qty": lambda: order(qty=EXPR),
    "Order.order_type": lambda: order(order_type=EXPR),
    "Order.price": lambda: order(order_type="lmt", price=EXPR),
    "Offset.mode": lambda: order(stop=ast.Offset(EXPR, -1.0)),  # type: ignore[arg-type]
    "Offset.value": lambda: order(stop=ast.Offset("pct", EXPR)),  # type: ignore[arg-type]
    "Order.ttl": lambda: order(ttl=ast.Duration(EXPR, "s")),  # type: ignore[arg-type]
    "Risk.maxpos": lambda: ast.Plan("p", (ast.Rule(ast.Compare(">", LAST, ast.Number(0)), (BUY,)),),
                                    risk=ast.Risk(maxpos=EXPR)),  # type: ignore[arg-type]
    "Until.at": lambda: ast.Plan("p", (ast.Rule(ast.Compare(">", LAST, ast.Number(0)), (BUY,)),),
                                 expiry=ast.Until(ast.TimeOfDay(15, EXPR))),  # type: ignore[arg-type]
    "a non-finite number": lambda: rule(ast.Compare(">", LAST, ast.Number(float("inf")))),
    "not a plan": lambda: cast(ast.Plan, "PLAN p\nWHEN last > 0: BUY 1 MKT"),  # a str on purpose
}


@pytest.fixture(autouse=True)
def _no_flag() -> None:
    os.environ.pop(FLAG, None)


@pytest.mark.parametrize("field", sorted(MALICIOUS))
def test_a_hand_built_malicious_plan_is_refused_and_nothing_runs(field: str) -> None:
    e = Engine(EngineConfig(), SESSION, "TEST", 0.01)
    with pytest.raises(PlanError):
        e.arm(MALICIOUS[field]())
    assert not e.armed and len(e.ledger) == 0
    e.run(ticks_of(quotes((100.0, 100.0), (101.0, 101.0))), path="reference")
    assert FLAG not in os.environ


def test_the_evaluators_take_operators_from_fixed_tables() -> None:
    # even a plan that skipped the checker cannot have its strings run
    ticks = ticks_of(quotes((100.0, 100.0), (101.0, 101.0)))
    broker = Broker(EngineConfig(), SESSION, TickGrid(0.01), Money(2), Ledger())
    for field in ("Compare.op", "Arith.op", "Crosses.direction", "Series.name"):
        bad = MALICIOUS[field]()
        with pytest.raises(PlanError):
            Evaluation(bad, SESSION, 200.0, SESSION.open_ns, broker)
        with pytest.raises(PlanError):
            Columns(ticks, SESSION, 0, 200.0, SESSION.open_ns).value(bad.rules[0].cond)
    assert FLAG not in os.environ


def test_a_checked_plan_built_in_code_arms() -> None:
    good = rule(ast.Compare(">", LAST, ast.Number(100)))
    e = Engine(EngineConfig(), SESSION, "TEST", 0.01)
    e.arm(good)
    assert e.armed

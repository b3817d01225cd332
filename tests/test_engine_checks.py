"""The order of an entry's checks is a rule (docs/engine.md "Risk and disarm"): an undefined
price, then the worst-case loss (which disarms the plan), then maxorders, then maxpos (which
reject and keep the plan armed). For every set of checks breached at once, on both paths, the
entry is rejected by the first of them and the plan is disarmed exactly when the loss bound is
among them and the price is defined."""

from __future__ import annotations

from itertools import combinations

import pytest

from kestrel.engine import Engine, ticks_of
from kestrel.engine.ledger import Disarmed, OrderPlaced, OrderRejected

from engine_helpers import engine, plan, quotes

ORDER = ("price", "maxloss", "maxorders", "maxpos")
SETS = [c for k in range(1, len(ORDER) + 1) for c in combinations(ORDER, k)]


def breaching(checks: tuple[str, ...]) -> str:
    """A plan whose second rule's entry breaches exactly `checks` when it fires: its limit
    price undefined (an sma over more ticks than there are), its stop's worst case (10 x 1.00)
    past maxloss 5, the plan's one order already placed by the first rule (a limit far below
    the market), its 10 with that order's 1 past maxpos 10."""
    risk = (f"maxpos {10 if 'maxpos' in checks else 100} maxorders {1 if 'maxorders' in checks else 10} "
            f"maxloss {5 if 'maxloss' in checks else 1000}")
    price = "LMT sma(bid, 10000)" if "price" in checks else "MKT"
    return (f"PLAN a RISK {risk}\n"
            "WHEN bid > 1: BUY 1 LMT 90\n"
            f"WHEN bid > 1: BUY 10 {price} STOP -1.00")


def run(text: str, ticks: list[tuple[int, float, float]], path: str) -> Engine:
    e = engine(tick_size=0.01)
    e.arm(plan(text))
    e.run(ticks_of(ticks), path=path, final=False)
    return e


def expected_reason(checks: tuple[str, ...]) -> str:
    first = next(c for c in ORDER if c in checks)
    return {"price": "price undefined at this tick",
            "maxloss": "worst-case loss 10.00 would take the plan's pnl to -10.00, past maxloss 5",
            "maxorders": "maxorders 1 reached",
            "maxpos": "maxpos 10: position would reach 11"}[first]


@pytest.mark.parametrize("path", ["reference", "fast"])
@pytest.mark.parametrize("checks", SETS, ids=["+".join(c) for c in SETS])
def test_the_first_breached_check_rejects_the_entry(checks: tuple[str, ...], path: str) -> None:
    ticks = quotes(*[(100.0, 100.01)] * 5)
    e = run(breaching(checks), ticks, path)
    rejects = [r.reason for r in e.ledger.events if isinstance(r, OrderRejected)]
    assert rejects[0] == expected_reason(checks), (checks, rejects)
    disarmed = [d.reason for d in e.ledger.events if isinstance(d, Disarmed)]
    loss_first = next(c for c in ORDER if c in checks) == "maxloss"
    assert disarmed == (["maxloss 5 would be breached"] if loss_first else []), (checks, disarmed)
    assert e.armed == (not loss_first)
    entries = [o for o in e.ledger.events if isinstance(o, OrderPlaced) and o.qty == 10]
    assert entries == []  # the breaching entry never goes out


def test_both_paths_write_the_same_ledger_for_every_set() -> None:
    ticks = quotes(*[(100.0, 100.01)] * 5)
    for checks in SETS:
        ref = run(breaching(checks), ticks, "reference").ledger.to_jsonl()
        assert run(breaching(checks), ticks, "fast").ledger.to_jsonl() == ref, checks


def test_without_a_breach_the_entry_goes_out() -> None:
    e = run(breaching(()), quotes(*[(100.0, 100.01)] * 3), "reference")
    assert not [r for r in e.ledger.events if isinstance(r, OrderRejected)]
    assert any(isinstance(o, OrderPlaced) and o.qty == 10 for o in e.ledger.events)

"""The broker's seams: no code is generated as text, the loops drive `broker.Broker`
through its public surface (no other module writes its state), and rule states are the named
`RuleState`s."""

from __future__ import annotations

import ast as pyast
import datetime as dt
from pathlib import Path

from kestrel.engine import Engine, EngineConfig, ticks_of
from kestrel.engine.broker import RuleState
from kestrel.market.account import WorkingOrder
from kestrel.market.session import SessionSpec
from kestrel.lang import Plan, parse

from bench.workloads import engine_corpus

ROOT = Path(__file__).resolve().parent.parent


PLANS = engine_corpus()


def test_the_corpus_is_every_example_and_both_workloads() -> None:
    names = [n for n, _ in PLANS]
    assert len(names) >= 20 and {"all_day", "rich"} <= set(names)


def code_built(source: str) -> list[str]:
    """Calls that run text as code (`exec`, `eval`, `compile`) in a module's source."""
    return [pyast.unparse(n) for n in pyast.walk(pyast.parse(source)) if isinstance(n, pyast.Call)
            and isinstance(n.func, pyast.Name) and n.func.id in ("exec", "eval", "compile")]


def test_no_code_is_generated_as_text() -> None:
    for path in sorted((ROOT / "kestrel" / "engine").glob("*.py")) + sorted((ROOT / "kestrel" / "lang" / "functions").glob("*.py")):
        assert code_built(path.read_text()) == [], path.name


def test_the_code_scan_catches_an_exec() -> None:
    assert code_built("exec(compile(src, 'p', 'exec'), ns)\nx = f(1)") == [
        "exec(compile(src, 'p', 'exec'), ns)", "compile(src, 'p', 'exec')"]


def _armed(text: str) -> tuple[Engine, int]:
    """An engine on a 2024-01-02 US equity session with `text` armed, and the session open."""
    session = SessionSpec.us_equity(dt.date(2024, 1, 2))
    e = Engine(EngineConfig(), session, "SAMPLE", 0.01)
    plan = parse(text)
    assert isinstance(plan, Plan)
    e.arm(plan)
    return e, session.open_ns


def test_rule_states_are_named_and_follow_fire_and_rearm() -> None:
    assert [int(s) for s in (RuleState.SPENT, RuleState.ARMED, RuleState.WAITING)] == [0, 1, 2]
    e, o = _armed("PLAN p\nWHEN bid > 100: BUY 1 MKT x2")
    assert e.rule_states == [RuleState.ARMED]
    e.on_ticks(ticks_of([(o + 1, 101.0, 101.1)]))
    assert e.rule_states == [RuleState.WAITING] and e.remaining == [1]
    e.on_ticks(ticks_of([(o + 2, 99.0, 99.1)]))  # false: re-armed
    assert e.rule_states == [RuleState.ARMED]
    e.on_ticks(ticks_of([(o + 3, 101.0, 101.1)]))  # second and last repeat
    assert e.rule_states == [RuleState.SPENT] and e.remaining == [0]
    assert e.pos == 1


def test_the_account_shows_the_broker_orders_as_frame_working_orders() -> None:
    e, o = _armed("PLAN p\nWHEN bid > 100: BUY 2 MKT STOP -1 TRAIL 0.5")
    # fires at tick 1, fills at tick 2's ask 101.3: stop 100.3, trail 101.3 - 0.5
    e.on_ticks(ticks_of([(o + 1, 101.0, 101.1), (o + 2, 101.2, 101.3)]))
    shown = e.account().orders
    assert all(type(w) is WorkingOrder for w in shown)
    assert sorted((w.side, w.qty, w.type, w.price) for w in shown) == [
        ("sell", 2, "stp", 100.3), ("sell", 2, "stp", 100.8)]


KERNEL_STATE = {"rule_states", "remaining", "best", "orders", "book", "env"}


def broker_writes(source: str) -> list[str]:
    """Assignments (plain, augmented, subscripted) to the broker's state through another
    object: `x.best = ...`, `x.rule_states[j] = ...`, `states[j] = ...` (the rule states the
    loops hold)."""
    found: list[str] = []
    for node in pyast.walk(pyast.parse(source)):
        targets: list[pyast.expr] = []
        if isinstance(node, pyast.Assign):
            targets = list(node.targets)
        elif isinstance(node, pyast.AugAssign | pyast.AnnAssign):
            targets = [node.target]
        flat: list[pyast.expr] = []
        for tgt in targets:  # unpack `a, b.best = ...` one level
            flat += list(tgt.elts) if isinstance(tgt, pyast.Tuple | pyast.List) else [tgt]
        for t in flat:
            base = t.value if isinstance(t, pyast.Subscript) else t
            if isinstance(base, pyast.Attribute) and base.attr in KERNEL_STATE and not (
                    isinstance(base.value, pyast.Name) and base.value.id == "self"):
                found.append(pyast.unparse(t))
            elif isinstance(t, pyast.Subscript) and isinstance(t.value, pyast.Name) and t.value.id in ("R", "states"):
                found.append(pyast.unparse(t))
    return found


def test_only_the_broker_changes_its_state() -> None:
    """The loops fire and re-arm rules through `Broker.fire` and `Broker.rearm`; no other
    module writes the broker's rule states, orders or envelope."""
    engine_dir = ROOT / "kestrel" / "engine"
    for path in sorted(engine_dir.glob("*.py")):
        if path.name in ("broker.py", "orders.py", "book.py"):
            continue
        assert broker_writes(path.read_text()) == [], path.name


def test_the_write_scan_catches_broker_writes() -> None:
    assert broker_writes("o.best = max(o.best, 1.0)\nR[r] = 1\nb.rule_states[0] = 2\nself.best = 0") == [
        "o.best", "R[r]", "b.rule_states[0]"]

"""The reference path: a plan evaluated tick by tick, the oracle the vectorized path is tested
against.

`Evaluation` holds what a plan reads, built once when it is armed: the series (`series`), one
indicator per distinct call (`kestrel.lang.functions`, fed at every tick), one node per
distinct CROSSES, and each rule's condition and entry prices as a tree of closures over them
whose operators come from the language's tables. At each tick (`observe`) the series take the
tick, the indicators their source's values, the crosses their operands; the rules then read
the values (`conditions`, `prices`); `remember` makes this tick's cross operands the previous
ones. Undefined values are NaN, so a comparison using one is false (`!=` included).

`run` is the per-tick loop over a batch: at every tick the broker steps where its envelope is
breached, then, while a rule is live, the indicators take the tick and the rules are
evaluated in order (ARMED: fire when true; WAITING: re-arm when false). Once no rule is live
the rest of the batch runs the broker alone (`_idle`). `warm` feeds a fresh evaluation the
session's ticks so far (crosses from the plan's arming), the state the loop would have left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kestrel.engine.broker import ARMED, WAITING, Broker
from kestrel.engine.history import Tick, rows
from kestrel.engine.plans import bind, clock_seconds
from kestrel.engine.series import MARKET, Account, Series
from kestrel.frame.session import SessionSpec
from kestrel.frame.ticks import Ticks
from kestrel.lang import ast
from kestrel.lang.functions import ARITHMETIC, COMPARISON, Context, Indicator, crossed, indicator
from kestrel.lang.registry import SERIES

CHUNK = 1 << 16  # ticks read through one set of memoryviews (the loop holds no more at once)
NAN = float("nan")
Value = Callable[[], Any]
Rows = Iterator[tuple[int, int, float, float, float, float]]


class Node:
    """An indicator of the plan, fed its source series at every tick."""

    __slots__ = ("unit", "source", "value")

    def __init__(self, unit: Indicator, source: Series) -> None:
        self.unit, self.source, self.value = unit, source, NAN


class Cross:
    """A CROSSES of the plan: its operands at this tick and at the previous one."""

    __slots__ = ("direction", "left", "right", "before", "now", "value")

    def __init__(self, direction: str, left: Value, right: Value) -> None:
        self.direction, self.left, self.right = direction, left, right
        self.before: tuple[Any, Any] = (NAN, NAN)
        self.now: tuple[Any, Any] = (NAN, NAN)
        self.value: Any = False

    def take(self) -> None:
        self.now = (self.left(), self.right())
        self.value = crossed(self.direction, self.before, self.now)


class Evaluation:
    """A plan's series, indicators, crosses, conditions and entry prices for one session."""

    def __init__(self, plan: ast.Plan, session: SessionSpec, units: float, clock_base_ns: int,
                 broker: Broker) -> None:
        self.session, self.units, self.base, self.broker = session, units, clock_base_ns, broker
        self.series: dict[str, Series] = {}
        self.nodes: dict[object, Node] = {}
        self.crosses: dict[ast.Crosses, Cross] = {}
        self.conditions = [self.compile(rule.cond) for rule in plan.rules]
        self.prices = [self.entry_prices(rule) for rule in plan.rules]
        self.market = [s for s in self.series.values() if not s.account]
        self.accounts = [s for s in self.series.values() if s.account]

    def observe(self, tick: Tick) -> None:
        """The tick's values: series, indicators, then the cross operands."""
        for s in self.market:
            s.take(tick)
        for s in self.accounts:
            s.take(tick)
        ts = tick.ts
        for node in self.nodes.values():
            source = node.source
            node.value = node.unit.update(ts, source.value, source.exact)
        for c in self.crosses.values():
            c.take()

    def remember(self) -> None:
        for c in self.crosses.values():
            c.before = c.now

    # ------------------------------------------------------------------ compiling
    def source(self, name: str) -> Series:
        got = self.series.get(name)
        if got is None:
            if name in MARKET:
                got = MARKET[name](self.units, self.base)
            else:
                got = Account(self._account(name))
            self.series[name] = got
        return got

    def _account(self, name: str) -> Callable[[Tick], float]:
        broker = self.broker
        if name == "pos":
            return lambda tick: float(broker.pos)
        if name == "rpnl":
            return lambda tick: broker.rpnl
        if name == "upnl":
            return lambda tick: broker.upnl_now(tick.bid, tick.ask)
        return lambda tick: broker.pnl_now(tick.bid, tick.ask)  # pnl: exact, net of fees

    def compile(self, e: ast.Expr) -> Value:
        """`e` as a function of the current tick's values."""
        if isinstance(e, ast.Number | ast.Percent):
            number = float(e.value)
            return lambda: number
        if isinstance(e, ast.TimeOfDay):
            seconds = clock_seconds(self.session, e)
            return lambda: seconds
        if isinstance(e, ast.Series):
            s = self.source(e.name)
            return lambda: s.value
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.Neg):
            f = self.compile(e.operand)
            return lambda: -f()
        if isinstance(e, ast.Arith | ast.Compare):
            op = (ARITHMETIC if isinstance(e, ast.Arith) else COMPARISON)[e.op].scalar
            left, right = self.compile(e.left), self.compile(e.right)
            return lambda: op(left(), right())
        if isinstance(e, ast.Crosses):
            c = self.crosses.get(e)
            if c is None:
                c = self.crosses[e] = Cross(e.direction, self.compile(e.left), self.compile(e.right))
            node = c
            return lambda: node.value
        if isinstance(e, ast.And | ast.Or):
            parts = [self.compile(o) for o in e.operands]
            if isinstance(e, ast.And):
                return lambda: all(f() for f in parts)
            return lambda: any(f() for f in parts)
        if isinstance(e, ast.Not):
            f = self.compile(e.operand)
            return lambda: not f()
        raise ValueError(f"{type(e).__name__} is not a value here")

    def call(self, e: ast.Call) -> Value:
        unit, args = bind(e)
        if not issubclass(unit, Indicator):
            fs = [self.compile(a) for a in e.args]
            scalar = unit.scalar
            return lambda: scalar(*[f() for f in fs])
        key = (e.name, args)
        node = self.nodes.get(key)
        if node is None:
            name = args.source()
            context = Context(self.units if SERIES[name].exact else 1.0, self.session.open_ns)
            node = self.nodes[key] = Node(indicator(unit, args, context), self.source(name))
        found = node
        return lambda: found.value

    def entry_prices(self, rule: ast.Rule) -> Callable[[], tuple[float | None, ...]]:
        """The rule's actions' prices at the current tick (None for MKT and non-orders)."""
        prices = [self.compile(a.price) if isinstance(a, ast.Order) and a.price is not None
                  else None for a in rule.actions]
        return lambda: tuple(None if f is None else f() for f in prices)


def run(broker: Broker, evaluation: Evaluation | None, ticks: Ticks, first: int) -> None:
    """Advance over `ticks` (session ticks first..) on the reference path."""
    for lo in range(0, len(ticks), CHUNK):
        part = ticks.slice(lo, min(len(ticks), lo + CHUNK))
        pending = rows(part, first + lo)
        if evaluation is not None and any(broker.rule_states):
            _live(broker, evaluation, pending)
        _idle(broker, pending)
        k = len(part) - 1
        broker.advance(first + lo + len(part), int(part.ts[k]), float(part.bid[k]), float(part.ask[k]))


def _live(broker: Broker, evaluation: Evaluation, pending: Rows) -> None:
    """The ticks of `pending` while a rule is live (it stops after the tick where none is)."""
    states = broker.rule_states
    conditions, prices = evaluation.conditions, evaluation.prices
    rules = range(len(states))
    lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
    for index, ts, bid, ask, last, size in pending:
        tick = Tick(index, ts, bid, ask, last, size)
        if bid <= lo_b or bid >= hi_b or ask <= lo_a or ask >= hi_a or ts >= t_next or index >= i_next:
            broker.step(tick)
            lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
            if not any(states):
                return
        evaluation.observe(tick)
        fired = False
        for rule in rules:
            state = states[rule]
            if state is ARMED:
                if conditions[rule]():
                    broker.fire(rule, tick, prices[rule]())
                    fired = True
            elif state is WAITING and not conditions[rule]():
                broker.rearm(rule)
        evaluation.remember()
        if fired:
            lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
            if not any(states):
                return


def _idle(broker: Broker, pending: Rows) -> None:
    """The ticks of `pending` with no rule live: the broker alone, where its envelope says."""
    lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
    for index, ts, bid, ask, last, size in pending:
        if bid <= lo_b or bid >= hi_b or ask <= lo_a or ask >= hi_a or ts >= t_next or index >= i_next:
            broker.step(Tick(index, ts, bid, ask, last, size))
            lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env


def warm(evaluation: Evaluation, history: Ticks, arm_tick: int) -> None:
    """Feed `evaluation` the session's ticks `history`: the indicators every tick, the crosses
    the ticks from `arm_tick` on (they start fresh when the plan is armed)."""
    market, nodes = evaluation.market, list(evaluation.nodes.values())
    for lo in range(0, len(history), CHUNK):
        for index, ts, bid, ask, last, size in rows(history.slice(lo, min(len(history), lo + CHUNK)), lo):
            tick = Tick(index, ts, bid, ask, last, size)
            for s in market:
                s.take(tick)
            for node in nodes:
                node.value = node.unit.update(ts, node.source.value, node.source.exact)
            if index >= arm_tick:
                for s in evaluation.accounts:
                    s.take(tick)
                for c in evaluation.crosses.values():
                    c.take()
                evaluation.remember()


__all__ = ["Evaluation", "run", "warm"]

"""The reference path: a plan evaluated tick by tick, the oracle the vectorized path is tested
against.

`Evaluation` holds what a plan reads, built once when it is armed: the series (`series`), one
indicator per distinct call (`kestrel.lang.functions`, fed at every tick), one `Pair` per
distinct (left, right) of its CROSSES, and each rule's condition and entry prices as a tree of
closures over them whose operators come from the language's tables. At each tick (its
`steps`) the series take the tick, the indicators their source's values, the pairs their
operands (the previous ones kept); the rules then read the values (`conditions`, `prices`).
Undefined values are NaN, so a comparison using one is false (`!=` included).

`run` is the per-tick loop over a batch: at every tick the broker steps where its envelope is
breached, then, while a rule is live, the indicators take the tick and the rules are
evaluated in order (ARMED: fire when true; WAITING: re-arm when false). Once no rule is live
the rest of the batch runs the broker alone (`_idle`). `warm` feeds a fresh evaluation the
run's earlier ticks it reads, if the engine holds them (the run-wide series and their
indicators alone, `lookback`), then the session's ticks so far (crosses from the plan's
arming), the state the loop would have left.

A read of another symbol (`SPY.last`, `SPY.sma(20)`) is a `Feed` of that symbol: its own
series and indicators, fed that symbol's ticks by whoever merges the universe's ticks
(`Evaluation.feed`, the portfolio engine), each batch before the plan's next own tick; the
rules read the values the feed holds (NaN, undefined, until the symbol has ticked; in a run
looking back over its sessions the feed first takes the symbol's earlier ticks it reads, and at
least its last one, `Evaluation.feed(..., history=True)`). So at a tick
of the plan's symbol a read sees the other symbol's ticks strictly before it in the merged order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from kestrel.engine.broker import ARMED, WAITING, Broker
from kestrel.engine.history import Tick, rows
from kestrel.engine.plans import PLAN_CACHE_SIZE, PlanError, bind, clock_seconds, operator_of, own_walk
from kestrel.engine.series import MARKET, Series, Stateless
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import ast
from kestrel.engine.lookback import RUN_WIDE
from kestrel.lang.functions import Arguments, Context, Indicator, indicator
from kestrel.lang.operations import ARITHMETIC, COMPARISON, CROSSES
from kestrel.lang.registry import SERIES

CHUNK = 1 << 16  # ticks read through one set of memoryviews (the loop holds no more at once)
NAN = float("nan")
ABOVE, BELOW = CROSSES["above"], CROSSES["below"]
Value = Callable[[], Any]
Rows = Iterator[tuple[int, int, float, float, float, float]]


class Node:
    """An indicator of the plan, fed its source series at every tick (`take`)."""

    __slots__ = ("update", "source", "value")

    def __init__(self, unit: Indicator, source: Series) -> None:
        self.update, self.source, self.value = unit.update, source, NAN

    def take(self, tick: Tick) -> None:
        source = self.source
        self.value = self.update(tick.ts, source.value, source.exact)


class Pair:
    """The plan's CROSSES of one (left, right) pair, ABOVE and BELOW: whether each crossed at
    this tick, from the operands at the previous tick taken and at this one. Taken at every
    tick from the plan's arming, so the previous tick taken is the previous tick."""

    __slots__ = ("left", "right", "before_left", "before_right", "above", "below", "read")

    def __init__(self, left: Value, right: Value) -> None:
        self.left, self.right = left, right
        self.before_left: Any = NAN
        self.before_right: Any = NAN
        self.above: Any = False
        self.below: Any = False
        self.read = (False, False)  # whether a condition reads ABOVE, BELOW

    def take(self, tick: Tick) -> None:
        left, right = self.left(), self.right()
        above, below = self.read
        if above:
            self.above = ABOVE(self.before_left, self.before_right, left, right)
        if below:
            self.below = BELOW(self.before_left, self.before_right, left, right)
        self.before_left, self.before_right = left, right


class Feed:
    """Another symbol's series and indicators a plan reads, taken at each of that symbol's
    ticks (`take`): series first, then the indicators reading them."""

    def __init__(self, half_ticks_per_point: float, clock_base_ns: int, open_ns: int, span_ns: int = 0) -> None:
        self.half_ticks_per_point, self.base, self.open_ns = half_ticks_per_point, clock_base_ns, open_ns
        self.span_ns = span_ns
        self.series: dict[str, Series] = {}
        self.nodes: dict[object, Node] = {}
        self.calls: list[tuple[str, Arguments]] = []  # the indicators, as (name, arguments)
        self.steps: list[Callable[[Tick], None]] = []
        self.history_steps: list[Callable[[Tick], None]] = []  # what a tick of history feeds

    def source(self, name: str) -> Series:
        got = self.series.get(name)
        if got is None:
            if name not in MARKET:
                raise PlanError(f"unknown series {name!r}")
            got = self.series[name] = MARKET[name](self.half_ticks_per_point, self.base)
        return got

    def read(self, expr: ast.Series | ast.Call) -> Value:
        if isinstance(expr, ast.Series):
            if SERIES.get(expr.name) is None or expr.name in ("pos", "upnl", "rpnl", "pnl", "time"):
                raise PlanError(f"{expr.name!r} is not a market series of another symbol")
            s = self.source(expr.name)
            return lambda: s.value
        unit, args = bind(expr)
        if not issubclass(unit, Indicator):
            raise PlanError(f"{expr.name!r} is an operation, not a series of another symbol")
        key = (expr.name, args)
        node = self.nodes.get(key)
        if node is None:
            name = args.source()
            on_grid = SERIES[name].exact
            context = Context(self.half_ticks_per_point if on_grid else 1.0, self.open_ns, not on_grid,
                              self.span_ns)
            node = self.nodes[key] = Node(indicator(unit, args, context), self.source(name))
            self.calls.append((expr.name, args))
        found = node
        return lambda: found.value

    def context(self) -> Context:
        """The context bars of this symbol are aligned by (`Context.origin`)."""
        return Context(self.half_ticks_per_point, self.open_ns, False, self.span_ns)

    def seal(self) -> None:
        steps: list[Callable[[Tick], None]] = [s.take for s in self.series.values()]
        self.steps = steps + [n.take for n in self.nodes.values()]
        self.history_steps = _history_steps(self.series, self.nodes)

    def take(self, ticks: Ticks, history: bool = False) -> None:
        """Take `ticks`: the symbol's next ticks, or with `history` ticks of its earlier sessions
        (the run-wide series and their indicators only)."""
        steps = self.history_steps if history else self.steps
        if not steps:
            return
        for lo in range(0, len(ticks), CHUNK):
            for index, ts, bid, ask, last, size in rows(ticks.slice(lo, min(len(ticks), lo + CHUNK)), lo):
                tick = Tick(index, ts, bid, ask, last, size)
                for step in steps:
                    step(tick)


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def indicator_sources(plan: ast.Plan) -> frozenset[str]:
    """The plan's own series its indicators read (of its conditions and entry prices)."""
    return frozenset(bind(x)[1].source() for r in plan.rules for x in own_walk(r.cond, *(
        a.price for a in r.actions if isinstance(a, ast.Order))) if isinstance(x, ast.Call)
        and issubclass(bind(x)[0], Indicator))


class Evaluation:
    """A plan's series, indicators, crosses, conditions and entry prices for one session.
    A series an indicator reads is taken at every tick; one only the conditions read is read
    off the tick where they read it (when stateless)."""

    def __init__(self, plan: ast.Plan, session: SessionSpec, half_ticks_per_point: float, clock_base_ns: int,
                 broker: Broker, peers: Mapping[str, float] | None = None) -> None:
        """`peers`: the half ticks per point of each other symbol the plan may read (see `Feed`)."""
        self.session, self.half_ticks_per_point, self.base, self.broker = session, half_ticks_per_point, clock_base_ns, broker
        self.peers = dict(peers or {})
        self.feeds: dict[str, Feed] = {}
        self.tick = Tick(-1, 0, NAN, NAN, NAN, 0.0)  # the tick observed last
        self.series: dict[str, Series] = {}
        self.sources = indicator_sources(plan)
        self.nodes: dict[object, Node] = {}
        self.calls: list[tuple[str, Arguments]] = []  # the indicators, as (name, arguments)
        self.pairs: dict[tuple[ast.Expr, ast.Expr], Pair] = {}
        self.conditions = [self.compile(rule.cond) for rule in plan.rules]
        self.prices = [self.entry_prices(rule) for rule in plan.rules]
        for feed in self.feeds.values():
            feed.seal()
        taken = [s.take for name, s in self.series.items()
                 if name in self.sources or not s.stateless]
        nodes = [n.take for n in self.nodes.values()]
        self.history_steps = taken + nodes  # what a tick before the plan's arming feeds
        self.run_steps = _history_steps({k: v for k, v in self.series.items() if k in self.sources}, self.nodes)
        # what a tick of the run's earlier sessions feeds (`lookback`)
        self.steps = taken + nodes + [p.take for p in self.pairs.values()]  # each reads the last

    # ------------------------------------------------------------------ compiling
    def source(self, name: str) -> Series:
        got = self.series.get(name)
        if got is None:
            got = self.series[name] = MARKET[name](self.half_ticks_per_point, self.base)
        return got

    def read(self, name: str) -> Value:
        """The series `name` at the tick observed last."""
        broker, evaluation = self.broker, self
        if name == "pos":
            if broker.unit_lot:
                return lambda: float(broker.pos)
            return broker.position  # in units
        if name == "rpnl":
            return lambda: broker.rpnl
        if name == "upnl":
            return lambda: broker.upnl_now(evaluation.tick.bid, evaluation.tick.ask)
        if name == "pnl":  # exact, net of fees
            return lambda: broker.pnl_now(evaluation.tick.bid, evaluation.tick.ask)
        if name not in MARKET:
            raise PlanError(f"unknown series {name!r}")
        s = self.source(name)
        if name in self.sources or not isinstance(s, Stateless):
            return lambda: s.value
        read = s.read
        return lambda: read(evaluation.tick)

    def compile(self, expr: ast.Expr) -> Value:
        """`expr` as a function of the current tick's values."""
        if isinstance(expr, ast.Number | ast.Percent):
            number = float(expr.value)
            return lambda: number
        if isinstance(expr, ast.TimeOfDay):
            seconds = clock_seconds(self.session, expr)
            return lambda: seconds
        if isinstance(expr, ast.Series):
            return self.read(expr.name)
        if isinstance(expr, ast.Call):
            return self.call(expr)
        if isinstance(expr, ast.SymbolRead):
            return self.foreign(expr)
        if isinstance(expr, ast.Neg):
            f = self.compile(expr.operand)
            return lambda: -f()
        if isinstance(expr, ast.Arith | ast.Compare):
            table = ARITHMETIC if isinstance(expr, ast.Arith) else COMPARISON
            op = operator_of(table, expr.op, "operator").scalar
            left = self.compile(expr.left)
            if isinstance(expr.right, ast.Number | ast.Percent | ast.TimeOfDay):
                constant = self.compile(expr.right)()
                return lambda: op(left(), constant)
            right = self.compile(expr.right)
            return lambda: op(left(), right())
        if isinstance(expr, ast.Crosses):
            pair = self.pairs.get((expr.left, expr.right))
            if pair is None:
                pair = self.pairs[(expr.left, expr.right)] = Pair(self.compile(expr.left), self.compile(expr.right))
            found = pair
            if operator_of(CROSSES, expr.direction, "CROSSES direction") is ABOVE:
                pair.read = (True, pair.read[1])
                return lambda: found.above
            pair.read = (pair.read[0], True)
            return lambda: found.below
        if isinstance(expr, ast.And | ast.Or):
            return self.junction(isinstance(expr, ast.And), [self.compile(o) for o in expr.operands])
        if isinstance(expr, ast.Not):
            f = self.compile(expr.operand)
            return lambda: not f()
        raise PlanError(f"{type(expr).__name__} is not a value here")

    def foreign(self, expr: ast.SymbolRead) -> Value:
        feed = self.feeds.get(expr.symbol)
        if feed is None:
            half_ticks_per_point = self.peers.get(expr.symbol)
            if half_ticks_per_point is None:
                raise PlanError(f"the plan reads {expr.symbol}, which is not a symbol of this run"
                                + (f" ({', '.join(sorted(self.peers))})" if self.peers else ""))
            feed = self.feeds[expr.symbol] = Feed(half_ticks_per_point, self.base, self.broker.open_ns,
                                                  self.session.length_ns)
        return feed.read(expr.read)

    def feed(self, symbol: str, ticks: Ticks, history: bool = False) -> None:
        """Take `ticks`, the next ticks of `symbol` in the merged order, into the plan's reads
        of it (none: nothing to do); with `history`, ticks of `symbol`'s earlier sessions (see
        `Feed.take`), before any of this session's."""
        feed = self.feeds.get(symbol)
        if feed is not None and len(ticks):
            feed.take(ticks, history)

    def context(self) -> Context:
        """The context the plan's own bars are aligned by (`Context.origin`)."""
        return Context(self.half_ticks_per_point, self.broker.open_ns, False, self.session.length_ns)

    @staticmethod
    def junction(conjunction: bool, parts: list[Value]) -> Value:
        """AND (`conjunction`) or OR of `parts`, evaluated left to right until one decides."""
        if len(parts) == 2:
            first, second = parts
            if conjunction:
                return lambda: first() and second()
            return lambda: first() or second()

        def every() -> bool:
            for f in parts:
                if not f():
                    return False
            return True

        def some() -> bool:
            for f in parts:
                if f():
                    return True
            return False

        return every if conjunction else some

    def call(self, expr: ast.Call) -> Value:
        unit, args = bind(expr)
        if not issubclass(unit, Indicator):
            fs = [self.compile(a) for a in expr.args]
            scalar = unit.scalar
            return lambda: scalar(*[f() for f in fs])
        key = (expr.name, args)
        node = self.nodes.get(key)
        if node is None:
            name = args.source()
            on_grid = SERIES[name].exact
            context = Context(self.half_ticks_per_point if on_grid else 1.0, self.broker.open_ns, not on_grid,
                              self.session.length_ns)
            node = self.nodes[key] = Node(indicator(unit, args, context), self.source(name))
            self.calls.append((expr.name, args))
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
    conditions, prices, steps = evaluation.conditions, evaluation.prices, evaluation.steps
    rules = range(len(states))
    lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
    for index, ts, bid, ask, last, size in pending:
        tick = Tick(index, ts, bid, ask, last, size)
        if bid <= lo_b or bid >= hi_b or ask <= lo_a or ask >= hi_a or ts >= t_next or index >= i_next:
            broker.step(tick)
            lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
            if not any(states):
                return
        evaluation.tick = tick
        for step in steps:
            step(tick)
        fired = False
        for rule in rules:
            state = states[rule]
            if state is ARMED:
                if conditions[rule]():
                    broker.fire(rule, tick, prices[rule]())
                    fired = True
            elif state is WAITING and not conditions[rule]():
                broker.rearm(rule)
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


def _history_steps(series: Mapping[str, Series], nodes: Mapping[object, Node]) -> list[Callable[[Tick], None]]:
    """The steps a tick of the run's earlier sessions feeds: the run-wide series (`lookback.
    RUN_WIDE`) and the indicators reading them, in their order."""
    steps: list[Callable[[Tick], None]] = [s.take for name, s in series.items() if name in RUN_WIDE]
    wide = {id(s) for name, s in series.items() if name in RUN_WIDE}
    return steps + [n.take for n in nodes.values() if id(n.source) in wide]


def warm(evaluation: Evaluation, history: Ticks, arm_tick: int, before: Ticks | None = None) -> None:
    """Feed `evaluation` the run's earlier ticks `before` (the run-wide series and their
    indicators only, `lookback`), then the session's ticks `history`: the indicators every
    tick, the crosses the ticks from `arm_tick` on (they start fresh when the plan is armed)."""
    if before is not None and len(before) and evaluation.run_steps:
        steps = evaluation.run_steps
        for lo in range(0, len(before), CHUNK):
            part = before.slice(lo, min(len(before), lo + CHUNK))
            for index, ts, bid, ask, last, size in rows(part, lo):
                tick = Tick(index, ts, bid, ask, last, size)
                for step in steps:
                    step(tick)
    for lo in range(0, len(history), CHUNK):
        part = history.slice(lo, min(len(history), lo + CHUNK))
        for index, ts, bid, ask, last, size in rows(part, lo):
            tick = Tick(index, ts, bid, ask, last, size)
            evaluation.tick = tick
            for step in evaluation.steps if index >= arm_tick else evaluation.history_steps:
                step(tick)


__all__ = ["Evaluation", "Feed", "run", "warm"]

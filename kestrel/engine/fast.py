"""The vectorized path: the ticks where something happens, found on whole columns, processed
exactly as the reference does.

The reference does work at tick k only when (a) the broker's envelope is breached there (a
working order's trigger or a trailing stop's new best, the loss line, a deadline) or (b) an
armed rule's condition is true there (false, for a rule waiting to re-arm). This path
computes every rule's condition and entry prices as columns (`vector.Columns`, the same
floating-point operations) over a prefix of the session, then jumps from event to event: (a)
by scans of the bid and ask columns in growing chunks, (b) by `bytes.find` in each rule's
condition as one byte per tick. At an event it does what the reference does: the broker step
(`Broker.step`) where the envelope is breached, then the rules in order (`Broker.fire`,
`Broker.rearm`). Hence the same ledger, byte for byte.

Conditions reading `pos` or `rpnl` (constant between fills) are evaluated per account state:
a rule reading only `pos` keeps one mask per position seen; one reading `rpnl` is
re-evaluated from the tick of every fill that changed it. The prefix starts `first_prefix`
ticks past the batch's start and doubles while a rule needs to look further, never past the
plan's horizon (its expiry or the close). The cost model (`FastPolicy`): when the columns would
outgrow `max_columns_mb`, the rest of the batch is handed to the reference path (`hand_over`,
the one hand-over: it re-warms the indicators over the session so far, then streams).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import msgspec
import numpy as np
import numpy.typing as npt

from kestrel.engine.broker import ARMED, Broker
from kestrel.engine.envelope import Envelope
from kestrel.engine.history import Rows
from kestrel.engine.plans import series_in
from kestrel.engine.vector import Columns
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import ast

F64 = npt.NDArray[np.float64]
INF = float("inf")


class FastPolicy(msgspec.Struct, frozen=True):
    """The vectorized path's cost model: its first columns reach `first_prefix` ticks past the
    batch's start (then double), its envelope scans start with `first_chunk` ticks (then grow
    four times), and it hands the rest of a batch to the reference path when its columns would
    need more than `max_columns_mb` MB or `max_columns_ticks` ticks."""

    first_prefix: int = 4096
    first_chunk: int = 512
    max_columns_mb: float = 100.0
    max_columns_ticks: int = 20_000_000


class FastStats(msgspec.Struct):
    """How one batch was spent: the ticks where the loop stopped (`events`) and the ticks
    handed to the reference path (`handed_over`)."""

    events: int = 0
    handed_over: int = 0


class Mask(NamedTuple):
    """A rule's condition over ticks base..: one byte a tick, 1 where it holds."""

    base: int
    data: bytes

    def at(self, index: int) -> bool:
        return self.data[index - self.base] == 1

    def find(self, holds: bool, start: int, end: int) -> int:
        """The first tick in [start, end) where the condition is `holds`, else end."""
        k = self.data.find(1 if holds else 0, start - self.base, end - self.base)
        return end if k < 0 else k + self.base


def _mask(values: npt.NDArray[np.bool_], base: int) -> Mask:
    return Mask(base, np.ascontiguousarray(values, dtype=np.bool_).tobytes())


class Conditions:
    """The rules' conditions (as masks) and entry prices over the prefix [0, upto) of the
    session, for the account state `refresh` last saw."""

    def __init__(self, plan: ast.Plan, full: Ticks, session: SessionSpec, arm: int, half_ticks_per_point: float,
                 clock_base_ns: int, broker: Broker, start: int, upto: int, before: Ticks | None = None) -> None:
        self.rules = plan.rules
        self.start, self.upto = start, upto
        self.columns = Columns(full.slice(0, upto), session, arm, half_ticks_per_point, clock_base_ns, before)
        self.reads = [frozenset(series_in(r.cond) & {"pos", "rpnl"}) for r in plan.rules]
        self.columns.account = self._account(broker)
        self.state = self._state(broker)
        self.cache: dict[tuple[int, float], Mask] = {}  # masks of `pos`-only rules by position
        self.masks = [self._evaluate(r, start) for r in range(len(self.rules))]
        self.prices: list[list[F64 | None]] = [
            [self.columns.column(a.price) if isinstance(a, ast.Order) and a.price is not None
             else None for a in rule.actions]
            for rule in plan.rules]

    @staticmethod
    def _account(broker: Broker) -> dict[str, float]:
        return {"pos": broker.position(), "rpnl": broker.rpnl}

    def _state(self, broker: Broker) -> tuple[int, int]:
        """The account state the conditions may read, cheaply compared: (pos, rpnl in quanta)."""
        return broker.book.pos, broker.book.rpnl_k

    def _evaluate(self, rule: int, start: int) -> Mask:
        reads = self.reads[rule]
        if reads == {"pos"}:  # few positions: each one's mask over the whole prefix, once
            key = (rule, self.columns.account["pos"])
            got = self.cache.get(key)
            if got is None:
                got = self.cache[key] = _mask(self.columns.column(self.rules[rule].cond), 0)
            return got
        if not reads:
            start = 0
        return _mask(self.columns.column(self.rules[rule].cond, start), start)

    def nbytes(self) -> int:
        """Memory held by the columns, masks and prices."""
        masks = {id(m): len(m.data) for m in [*self.masks, *self.cache.values()]}
        prices = sum(p.nbytes for ps in self.prices for p in ps if p is not None)
        return self.columns.nbytes() + sum(masks.values()) + prices

    def refresh(self, broker: Broker, index: int) -> None:
        """After a broker step at tick `index`: the masks of the rules reading an account
        state that changed, from that tick on."""
        state = self._state(broker)
        if state == self.state:
            return
        self.state = state
        self.columns.account = self._account(broker)
        for rule, reads in enumerate(self.reads):
            if reads and index < self.upto:
                self.masks[rule] = self._evaluate(rule, index)


def run_fast(plan: ast.Plan, broker: Broker, full: Ticks, start: int, session: SessionSpec,
             arm: int, half_ticks_per_point: float, clock_base_ns: int, policy: FastPolicy,
             hand_over: Callable[[int], None], before: Ticks | None = None) -> FastStats:
    """Advance `broker` over ticks start.. of the session `full` (already in its history) on
    the vectorized path; `hand_over(i)` runs ticks i.. on the reference path instead. `before`:
    the run's earlier ticks the indicators are warmed with (`vector.Columns`)."""
    stats = FastStats()
    n = len(full)
    scanner = Scanner(full, policy.first_chunk)
    ticks = Rows(full)
    horizon = _horizon(broker, full)
    states = broker.rule_states
    conditions: Conditions | None = None
    i = start
    while i < n:
        j = n  # the next event: a live rule's, then the envelope's before it
        if any(states):
            if conditions is None:
                upto = min(n, max(horizon, i + 1), i + policy.first_prefix, i + policy.max_columns_ticks)
                conditions = Conditions(plan, full, session, arm, half_ticks_per_point, clock_base_ns, broker, i, upto,
                                        before)
                if conditions.nbytes() > policy.max_columns_mb * 2**20:
                    stats.handed_over = n - i
                    hand_over(i)
                    return stats
            upto = conditions.upto
            j = upto
            for r, mask in enumerate(conditions.masks):
                if states[r]:
                    j = mask.find(states[r] is ARMED, i, j)
            j = scanner.next(broker.env, i, j)
            if j >= upto and upto < n:  # rule events past the prefix are unknown: extend it
                grown = min(n, upto + (upto - conditions.start))
                if horizon > upto:
                    grown = min(grown, horizon)
                per_tick = conditions.nbytes() / upto
                if (grown - conditions.start > policy.max_columns_ticks
                        or grown * per_tick > policy.max_columns_mb * 2**20):
                    stats.handed_over = n - i
                    hand_over(i)
                    return stats
                conditions = Conditions(plan, full, session, arm, half_ticks_per_point, clock_base_ns, broker,
                                        conditions.start, grown, before)
                continue
        else:
            j = scanner.next(broker.env, i, n)
        if j >= n:
            break
        stats.events += 1
        tick = ticks[j]
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
        b, a = tick.bid, tick.ask
        if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or tick.ts >= t_next or j >= i_next:
            broker.step(tick)
            if conditions is not None:
                conditions.refresh(broker, j)
        for r in range(len(states)):
            state = states[r]
            if not state:
                continue
            assert conditions is not None  # a rule live at the loop's top built them
            holds = conditions.masks[r].at(j)
            if state is ARMED:
                if holds:
                    prices = tuple(None if p is None else float(p[j]) for p in conditions.prices[r])
                    broker.fire(r, tick, prices)
            elif not holds:
                broker.rearm(r)
        i = j + 1
    broker.advance(n, int(full.ts[-1]), float(full.bid[-1]), float(full.ask[-1]))
    return stats


def _horizon(broker: Broker, full: Ticks) -> int:
    """The ticks rules may be evaluated on: up to the first at the plan's expiry or the
    session close (included: its broker step disarms the plan before any rule is read)."""
    deadline = min(broker.expiry_ns, broker.close_ns)
    return min(len(full), int(np.searchsorted(full.ts, deadline, side="left")) + 1)


class Scanner:
    """Finds the next tick where the reference would call the broker (its envelope breached):
    tick by tick over the first `SHORT` ticks (the next event is often near), then by numpy
    over chunks growing from `chunk` ticks four times each."""

    SHORT = 32

    def __init__(self, full: Ticks, chunk: int) -> None:
        self.ts, self.bid, self.ask = full.ts, full.bid, full.ask
        self.bids, self.asks = full.bid.data, full.ask.data  # (Python floats, by index)
        self.chunk = chunk
        self.deadlines: dict[int, int] = {}  # the first tick at or after each t_next

    def next(self, env: Envelope, start: int, stop: int) -> int:
        """The first tick in [start, stop) where `env` is breached, else `stop`."""
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = env
        end = self.deadlines.get(t_next)
        if end is None:
            end = self.deadlines[t_next] = int(np.searchsorted(self.ts, t_next, side="left"))
        end = min(stop, max(start, i_next), max(start, end))
        if end <= start:  # a deadline at this tick (a market order's eligibility, most often)
            return end
        bids, asks = self.bids, self.asks
        k, short = start, min(end, start + self.SHORT)
        while k < short:
            b, a = bids[k], asks[k]
            if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a:
                return k
            k += 1
        sides = [(column, level, below) for column, level, below in
                 ((self.bid, lo_b, True), (self.bid, hi_b, False), (self.ask, lo_a, True),
                  (self.ask, hi_a, False)) if abs(level) != INF]
        chunk = self.chunk
        while sides and k < end:
            e = min(end, k + chunk)
            for column, level, below in sides:
                if e == k:
                    break
                segment = column[k:e]
                hit = segment <= level if below else segment >= level
                first = int(hit.argmax())
                if hit[first]:
                    e = end = k + first  # later sides only need to look before this hit
            k = e
            chunk *= 4
        return end

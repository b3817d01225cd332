"""The fast path: skip over ticks where nothing can happen, exactly as the reference would.

The reference loop does work at tick k only when (a) the broker envelope `env` is breached
(a working order's trigger, the maxloss threshold, a deadline) or (b) an armed rule's
condition is true (state 1) or false (state 2, waiting to re-arm). The fast path computes
every rule's condition as a boolean array (`vector.Columns`, same floating-point
operations), then repeatedly jumps to the first tick where (a) or (b) holds — (a) by
vectorized scans over the bid/ask arrays in growing chunks, (b) by binary search in the
precomputed lists of true/false indices — and processes that tick with the same broker and
rule code (the kernel's `Broker.step`, `Broker.fire`) in the same order. Hence the same
ledger. It drives the engine and its kernel through their public surfaces only.

Cost model (`FastPolicy`): a jump costs tens of microseconds, the dense loop (`dense`:
numpy columns, one int of rule bits and the envelope test per tick in Python) well under
one per tick, so when the rules fire densely (fewer than `dense_ticks_per_event` ticks per
processed event: estimated up front from the conditions' rising edges and the repeats left,
or measured over at least `min_events` events) the batch runs on the dense loop and the
engine keeps to it for the session (`Engine.dense`). The compiled loop (`Engine.hand_over`)
takes a dense stretch instead when the plan's conditions have no per-account-state forms,
when the columns could not reach the plan's horizon within the memory cap, or when the
session so far dwarfs the batch (`dense_prefix_ratio`). Every loop processes a tick with the
same broker and rule code in the same order, so the ledger does not change; `FastStats`
says how a batch was spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from kestrel.engine.dense import Feed, Unsupported, run_dense
from kestrel.engine.policy import DEFAULT_POLICY as DEFAULT_POLICY, FastPolicy as FastPolicy, FastStats as FastStats
from kestrel.engine.vector import Columns
from kestrel.market.ticks import Ticks
from kestrel.lang import ast

from kestrel.engine.indicators import DYNAMIC_SERIES, series_in
from kestrel.engine.broker import Broker, RuleState
from kestrel.engine.codegen import CompiledPlan
from kestrel.engine.history import TickHistory
from kestrel.engine.envelope import Envelope
from kestrel.engine.orders import BrokerOrder, TickGrid, trail_level, trail_level_approx

from kestrel.market.session import SessionSpec


class Engine(Protocol):
    """What the fast path drives: the engine facade's public surface (`kestrel.engine.Engine`
    satisfies it; typed here so that the fast path does not import the facade that calls it)."""

    compiled: CompiledPlan | None
    session: SessionSpec
    grid: TickGrid
    broker: Broker
    history: TickHistory
    arm_tick: int
    close_ns: int
    dense: bool  # the plan fires densely: the dense loop runs it from now on
    indicators_stale: bool

    @property
    def rule_states(self) -> Sequence[RuleState]: ...

    @property
    def remaining(self) -> Sequence[int]: ...

    def accept(self, batch: Ticks) -> None: ...

    def hand_over(self, batch: Ticks, start: int, i: int) -> None: ...

_FIRST_CHUNK = 512
_FIRST_PREFIX = 4096
_PROBE = 2048  # ticks the cost model's first look evaluates
_SURELY = 8  # repeats left for this many times the density threshold: dense without a look
_EVENTS_PER_FIRE = 3  # a fire, its entry's fill, its exit: the stops the loop makes per fire


class _Masks:
    """Rule conditions and entry prices evaluated over the prefix [0, upto) of the day.

    Values at tick i depend only on ticks <= i, so a prefix evaluation is exact; the fast
    path evaluates a prefix and doubles it while an armed rule needs to look further
    (an early-firing rule never pays for the rest of the day). Rules reading `pos` or
    `rpnl` (constant between fills) are re-evaluated from the tick where they changed."""

    def __init__(self, engine: Engine, full: Ticks, start: int, upto: int) -> None:
        compiled = engine.compiled
        assert compiled is not None
        self.cols = cols = Columns(full.slice(0, upto), engine.session, engine.arm_tick, engine.grid.units)
        self.rules = rules = compiled.plan.rules
        self.dynamic = [bool(series_in(r.cond) & DYNAMIC_SERIES) for r in rules]
        cols.account = self._account(engine)
        self.upto = upto
        self.start = start
        self.conds = [cols.truth(r.cond) for r in rules]
        self.trues = [np.flatnonzero(c[start:]) + start for c in self.conds]
        self.falses = [np.flatnonzero(~c[start:]) + start for c in self.conds]
        self.reads = [frozenset(series_in(r.cond) & DYNAMIC_SERIES) for r in rules]
        # masks of account-reading rules per account state they read (pos takes few values)
        self.by_state: dict[tuple[int, tuple[float, ...]], tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]] = {}
        for r in range(len(rules)):
            if self.dynamic[r]:
                self.by_state[(r, self._key(r, cols.account))] = (
                    self.conds[r], self.trues[r], self.falses[r])
        self.prices: list[list[np.ndarray | None]] = [
            [cols.expr(a.price) if isinstance(a, ast.Order) and a.price is not None else None
             for a in r.actions]
            for r in rules
        ]

    @staticmethod
    def _account(engine: Engine) -> dict[str, float]:
        """The account series conditions may read on the fast path (see `fast_blocker`)."""
        broker = engine.broker
        return {"pos": float(broker.pos), "rpnl": broker.rpnl}

    def bytes_per_tick(self) -> float:
        """Memory the masks and their columns take per tick of the evaluated prefix."""
        arrays = [*self.conds, *self.trues, *self.falses,
                  *(p for ps in self.prices for p in ps if p is not None)]
        return (self.cols.nbytes() + sum(a.nbytes for a in arrays)) / max(1, self.upto)

    def _key(self, r: int, acc: dict[str, float]) -> tuple[float, ...]:
        return tuple(acc[k] for k in sorted(self.reads[r]))

    def refresh(self, engine: Engine, j: int) -> None:
        """Re-evaluate the account-reading rules from tick j if pos or rpnl changed. A rule
        that reads only account state seen before takes that state's masks (values at
        ticks >= j are all that is read from here on)."""
        acc = self._account(engine)
        if acc == self.cols.account or not any(self.dynamic):
            return
        self.cols.account = acc
        for r, rule in enumerate(self.rules):
            if not self.dynamic[r] or j >= self.upto:
                continue
            key = (r, self._key(r, acc))
            hit = self.by_state.get(key)
            if hit is not None:
                self.conds[r], self.trues[r], self.falses[r] = hit
                continue
            if self.reads[r] <= {"pos"}:  # few states: evaluate the whole prefix once
                c = self.cols.truth(rule.cond, self.start)
                full = np.concatenate((self.conds[r][:self.start], c))
                masks = (full, np.flatnonzero(c) + self.start, np.flatnonzero(~c) + self.start)
                self.by_state[key] = masks
                self.conds[r], self.trues[r], self.falses[r] = masks
                continue
            c = self.cols.truth(rule.cond, j)
            self.conds[r] = np.concatenate((self.conds[r][:j], c))
            t, f = self.trues[r], self.falses[r]
            self.trues[r] = np.concatenate((t[: np.searchsorted(t, j)], np.flatnonzero(c) + j))
            self.falses[r] = np.concatenate((f[: np.searchsorted(f, j)], np.flatnonzero(~c) + j))


def run_fast(engine: Engine, batch: Ticks, policy: FastPolicy = DEFAULT_POLICY) -> FastStats:
    """Advance `engine` over `batch` on the fast path (the plan must be fast-eligible),
    handing dense or over-long stretches to the compiled loop (see `FastPolicy`)."""
    compiled = engine.compiled
    assert compiled is not None
    stats = FastStats()
    if len(batch) == 0:
        return stats
    engine.accept(batch)
    broker = engine.broker
    start = broker.seen
    engine.history.append(batch)
    full = engine.history.view()  # the session so far, without copying
    n = len(full)
    i = start
    hz = _horizon(engine, full)
    # rule masks are built only while a rule is armed (a spent plan costs only the broker scans)
    masks: _Masks | None = None
    if any(broker.rule_states):
        dense = policy.force_dense or engine.dense
        if not dense:
            dense, masks = _dense_at_start(engine, full, start, hz, policy)
        if dense:
            engine.dense = True
            i = _dense(engine, batch, full, start, start, policy, stats)
            if i < 0:
                return stats
            masks = None
    ts, bid, ask = full.ts, full.bid, full.ask
    broker.sizes, broker.sizes_base = full.size, 0
    R = broker.rule_states
    n_rules = len(R)
    step, fire = broker.step, broker.fire
    SPENT, ARMED = RuleState.SPENT, RuleState.ARMED
    events = 0
    origin = i
    while i < n:
        if events >= policy.min_events:
            if ((i - origin) < events * policy.dense_ticks_per_event
                    and _fires_left(engine) * _EVENTS_PER_FIRE * policy.dense_ticks_per_event > n - i):
                engine.dense = True
                i = _dense(engine, batch, full, start, i, policy, stats)
                if i < 0:
                    return stats
                masks = None
            events, origin = 0, i  # judge density over the recent stretch
        events += 1
        stats.jumps += 1
        j = _next_breach(broker.env_core, ts, bid, ask, i, n)
        for o in broker.trails:
            j = _next_trail_trigger(o, bid if o.side < 0 else ask, i, j, engine.grid)
        if any(R):
            if masks is None:
                masks = _Masks(engine, full, i, min(n, max(hz, i + 1), i + _FIRST_PREFIX))
            upto = masks.upto
            for r in range(n_rules):
                st = R[r]
                if st is SPENT:
                    continue
                idx = masks.trues[r] if st is ARMED else masks.falses[r]
                k = int(np.searchsorted(idx, i))
                if k < idx.shape[0] and idx[k] < j:
                    j = int(idx[k])
            if j >= upto and upto < n:
                # rule events past the evaluated prefix are unknown: extend and look again
                grown = min(n, upto + (upto - masks.start))
                if hz > upto:
                    grown = min(grown, hz)  # past the plan's deadline no rule is evaluated
                if (grown - masks.start > policy.max_mask_ticks
                        or grown * masks.bytes_per_tick() > policy.max_mask_mb * 2**20):
                    stats.compiled_ticks += n - i
                    engine.hand_over(batch, start, i)  # bounded memory: stream the rest
                    return stats
                masks = _Masks(engine, full, masks.start, grown)
                continue
        if broker.trails and min(j, n) > i:
            # the ratchets the reference applied on ticks i..j-1 (a max: order-free); at the
            # end of the batch too, so the next batch starts from the same best touch
            e = min(j, n)
            broker.ratchet_trails(bid[i:e], ask[i:e], e - 1)
        if j >= n:
            break
        t, b, a = int(ts[j]), float(bid[j]), float(ask[j])
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
        if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or j >= i_next:
            step(j, t, b, a)
            if masks is not None:
                masks.refresh(engine, j)
        for r in range(n_rules):
            st = R[r]
            if not st:
                continue
            assert masks is not None  # a rule ARMED or WAITING was armed at the top
            c = bool(masks.conds[r][j])
            if st is ARMED:
                if c:
                    ps = tuple(None if p is None else float(p[j]) for p in masks.prices[r])
                    fire(r, j, t, b, a, ps)
            elif not c:
                broker.rearm(r)
        i = j + 1
    broker.advance(n, int(ts[-1]), float(bid[-1]), float(ask[-1]))
    engine.indicators_stale = True
    return stats


def _columns_cap(engine: Engine, policy: FastPolicy) -> int:
    """How far (ticks from the session's first) the dense loop's columns may reach within
    `max_mask_mb`: a conservative bytes-per-tick estimate from the plan's size (measured
    peaks: ~150 B/tick for the 86 nodes of the rich workload, ~50 for the 20 of all-day)."""
    compiled = engine.compiled
    assert compiled is not None
    per_tick = 32 + 4 * compiled.size
    return int(policy.max_mask_mb * 2**20 / per_tick)


def _horizon(engine: Engine, full: Ticks) -> int:
    """The ticks rules may be evaluated on: up to the first at the plan's expiry or the
    session close (included: its broker step disarms the plan before any rule is read)."""
    deadline = min(engine.broker.expiry_ns, engine.close_ns)
    return min(len(full), int(np.searchsorted(full.ts, deadline, side="left")) + 1)


def _dense(engine: Engine, batch: Ticks, full: Ticks, start: int, i: int,
           policy: FastPolicy, stats: FastStats) -> int:
    """Run ticks i.. of the batch (session ticks start..) as a dense stretch: on the dense loop
    (`dense.run_dense`) when the policy allows it, the plan has per-account-state forms and
    the session so far is not much longer than the batch (its columns cover the whole
    prefix: a short segment late in a session costs less on the compiled loop); else on the
    compiled loop, as is the rest of a batch past the memory cap. Returns the tick from which
    no rule is live (the jump loop runs the broker from there), or -1 when the batch is done."""
    n = len(full)
    if policy.dense_loop and (policy.force_dense or n <= policy.dense_prefix_ratio * (n - i)):
        compiled = engine.compiled
        assert compiled is not None
        rules = compiled.plan.rules
        cap = min(i + policy.max_mask_ticks, _columns_cap(engine, policy))
        need = min(n, max(i + 1, _horizon(engine, full)))
        upto = min(need, cap)
        feed = None
        # the columns cannot reach the plan's horizon (memory): the compiled loop runs it all
        # (a later hand-over would re-warm the indicators over the prefix first)
        if upto > i and (upto == need or policy.force_dense):
            try:
                feed = Feed(rules, full, engine.session, engine.arm_tick, engine.grid.units, i, upto)
            except Unsupported:
                pass
        if feed is not None:
            broker = engine.broker
            broker.sizes, broker.sizes_base = full.size, 0
            k = run_dense(feed, full, i, upto, broker)
            stats.dense_ticks += k - i
            if k >= n:
                broker.advance(n, int(full.ts[-1]), float(full.bid[-1]), float(full.ask[-1]))
                engine.indicators_stale = True
                return -1
            if not any(broker.rule_states):
                return k
            i = k  # the memory cap: the compiled loop streams the rest
    stats.compiled_ticks += n - i
    engine.hand_over(batch, start, i)
    return -1


def _dense_at_start(engine: Engine, full: Ticks, start: int, hz: int,
                    policy: FastPolicy) -> tuple[bool, _Masks | None]:
    """The cost model's first look: the armed rules' fires before the plan's horizon `hz`,
    estimated from the rising edges of their conditions on the next `_PROBE` ticks and
    capped by their repeats left, times the events each fire makes: more than one per
    `dense_ticks_per_event` ticks, and the batch runs dense from the start. Without a look
    when the repeats left cannot make it dense, or could make it `_SURELY` times over.
    Returns the verdict and the probe's masks (the jump loop's first masks when not dense)."""
    n = len(full)
    span = max(1, min(n, hz) - start)
    if span < policy.min_events * policy.dense_ticks_per_event:
        return False, None
    left = _fires_left(engine)
    if left >= policy.min_events and min(n, hz) > _columns_cap(engine, policy):
        # rules that may live to a horizon no columns can reach within the memory cap (a
        # long session): the compiled loop from the start (`_dense` finds the cap), since the
        # jump loop's masks would stop short of it and hand over with a re-warm
        return True, None
    bound = left * _EVENTS_PER_FIRE * policy.dense_ticks_per_event
    if bound <= span:  # cannot be dense: the jump loop builds its own masks
        return False, None
    if bound > _SURELY * span:
        # repeats for many times the threshold: judged dense without a look (the dense loop
        # stays cheap on a sparse stretch: its columns are the masks the jumps would build)
        return True, None
    probe = _Masks(engine, full, start, min(n, start + span, start + min(_PROBE, _FIRST_PREFIX)))
    scale = span / (probe.upto - start)
    fires = 0.0
    for r, c in enumerate(probe.conds):
        if engine.rule_states[r]:
            seg = c[start:]
            edges = int(np.count_nonzero(seg[1:] & ~seg[:-1])) + int(seg[0])
            fires += min(edges * scale, engine.remaining[r])  # a rule fires at most its repeats
    return fires * _EVENTS_PER_FIRE * policy.dense_ticks_per_event > span, probe


def _fires_left(engine: Engine) -> int:
    """How many more times the armed rules may fire (their repeats left)."""
    return sum(k for st, k in zip(engine.rule_states, engine.remaining) if st)


def _next_trail_trigger(o: BrokerOrder, touch: np.ndarray, i: int, end: int,
                        grid: TickGrid) -> int:
    """The first k in [i, end) where trailing stop `o` triggers (its level computed from the
    best touch over ticks before k, exactly as `trail_level`), else end. The binary levels
    are within a tick of the exact ones: ticks within a tick of them are candidates, checked
    in order with the exact level."""
    trail = o.trail
    assert trail is not None
    best = o.best
    side = o.side
    tick = grid.tick
    k = i
    chunk = _FIRST_CHUNK
    while k < end:
        e = min(end, k + chunk)
        seg = touch[k:e]
        if side < 0:
            prev = np.maximum.accumulate(np.concatenate(([best], seg[:-1])))
            cand = np.flatnonzero(seg <= trail_level_approx(prev, trail, side, grid) + tick)
            best = max(best, float(seg.max()))
        else:
            prev = np.minimum.accumulate(np.concatenate(([best], seg[:-1])))
            cand = np.flatnonzero(seg >= trail_level_approx(prev, trail, side, grid) - tick)
            best = min(best, float(seg.min()))
        for c in cand.tolist():
            lvl = trail_level(float(prev[c]), trail, side, grid)
            if (seg[c] <= lvl) if side < 0 else (seg[c] >= lvl):
                return k + c
        k = e
        chunk *= 4
    return end


def _next_breach(env: Envelope, ts: np.ndarray,
                 bid: np.ndarray, ask: np.ndarray, i: int, n: int) -> int:
    """The first index k >= i where the reference loop would call the broker."""
    lo_b, hi_b, lo_a, hi_a, t_next, i_next = env
    end = min(n, max(i, i_next))
    end = min(end, int(np.searchsorted(ts[i:end], t_next, side="left")) + i)
    sides = []
    if lo_b != -np.inf:
        sides.append((bid, lo_b, True))
    if hi_b != np.inf:
        sides.append((bid, hi_b, False))
    if lo_a != -np.inf:
        sides.append((ask, lo_a, True))
    if hi_a != np.inf:
        sides.append((ask, hi_a, False))
    if not sides:
        return end
    k = i
    chunk = _FIRST_CHUNK
    while k < end:
        e = min(end, k + chunk)
        hit = None
        for arr, lvl, below in sides:
            seg = arr[k:e]
            m = seg <= lvl if below else seg >= lvl
            if m.any():
                p = int(m.argmax())
                hit = p if hit is None or p < hit else hit
                e = k + p + 1  # later sides only need to look before this hit
        if hit is not None:
            return k + hit
        k = e
        chunk *= 4
    return end

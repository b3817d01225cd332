"""The fast path: skip over ticks where nothing can happen, exactly as the reference would.

The reference loop does work at tick k only when (a) the broker envelope `env` is breached
(a working order's trigger, the maxloss threshold, a deadline) or (b) an armed rule's
condition is true (state 1) or false (state 2, waiting to re-arm). The fast path computes
every rule's condition as a boolean array (`vector.Columns`, same floating-point
operations), then repeatedly jumps to the first tick where (a) or (b) holds — (a) by
vectorized scans over the bid/ask arrays in growing chunks, (b) by binary search in the
precomputed lists of true/false indices — and processes that tick with the same broker and
rule code (`Engine._step`, `Engine._fire`) in the same order. Hence the same ledger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kestrel.engine.vector import Columns
from kestrel.frame.ticks import Ticks
from kestrel.lang import ast

from kestrel.engine.indicators import DYNAMIC_SERIES, series_in
from kestrel.engine.orders import TickGrid, WorkingOrder, trail_level, trail_level_approx

if TYPE_CHECKING:
    from kestrel.engine.engine import Engine

_FIRST_CHUNK = 512
_FIRST_PREFIX = 4096


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
        self.prices: list[list[np.ndarray | None]] = [
            [cols.expr(a.price) if isinstance(a, ast.Order) and a.price is not None else None
             for a in r.actions]
            for r in rules
        ]

    @staticmethod
    def _account(engine: Engine) -> dict[str, float]:
        """The account series conditions may read on the fast path (see `fast_blocker`)."""
        return {"pos": float(engine.pos), "rpnl": engine.rpnl}

    def refresh(self, engine: Engine, j: int) -> None:
        """Re-evaluate the account-reading rules from tick j if pos or rpnl changed."""
        acc = self._account(engine)
        if acc == self.cols.account or not any(self.dynamic):
            return
        self.cols.account = acc
        for r, rule in enumerate(self.rules):
            if not self.dynamic[r] or j >= self.upto:
                continue
            c = self.cols.truth(rule.cond, j)
            self.conds[r] = np.concatenate((self.conds[r][:j], c))
            t, f = self.trues[r], self.falses[r]
            self.trues[r] = np.concatenate((t[: np.searchsorted(t, j)], np.flatnonzero(c) + j))
            self.falses[r] = np.concatenate((f[: np.searchsorted(f, j)], np.flatnonzero(~c) + j))


def run_fast(engine: Engine, batch: Ticks) -> None:
    """Advance `engine` over `batch` on the fast path (the plan must be fast-eligible)."""
    compiled = engine.compiled
    assert compiled is not None
    if len(batch) == 0:
        return
    engine._accept(batch)
    start = engine.seen
    engine._history.append(batch)
    full = engine._history.view()  # the session so far, without copying
    n = len(full)
    # rule masks are built only while a rule is armed (a spent plan costs only the broker scans)
    masks: _Masks | None = None
    ts, bid, ask = full.ts, full.bid, full.ask
    engine._sizes, engine._sizes_base = full.size, 0
    R = engine.R
    n_rules = len(R)
    i = start
    while i < n:
        j = _next_breach(engine.env_core, ts, bid, ask, i, n)
        for o in engine.trails:
            j = _next_trail_trigger(o, bid if o.side < 0 else ask, i, j, engine.grid)
        if any(R):
            if masks is None:
                masks = _Masks(engine, full, i, min(n, i + _FIRST_PREFIX))
            upto = masks.upto
            for r in range(n_rules):
                st = R[r]
                if st == 0:
                    continue
                idx = masks.trues[r] if st == 1 else masks.falses[r]
                k = int(np.searchsorted(idx, i))
                if k < idx.shape[0] and idx[k] < j:
                    j = int(idx[k])
            if j >= upto and upto < n:
                # rule events past the evaluated prefix are unknown: extend and look again
                masks = _Masks(engine, full, masks.start, min(n, upto + (upto - masks.start)))
                continue
        if engine.trails and min(j, n) > i:
            # the ratchets the reference applied on ticks i..j-1 (a max: order-free); at the
            # end of the batch too, so the next batch starts from the same best touch
            e = min(j, n)
            for o in engine.trails:
                if o.side < 0:
                    o.best = max(o.best, float(bid[i:e].max()))
                else:
                    o.best = min(o.best, float(ask[i:e].min()))
            engine._envelope(e - 1)
        if j >= n:
            break
        t, b, a = int(ts[j]), float(bid[j]), float(ask[j])
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = engine.env
        if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or j >= i_next:
            engine._step(j, t, b, a)
            if masks is not None:
                masks.refresh(engine, j)
        for r in range(n_rules):
            st = R[r]
            if not st:
                continue
            assert masks is not None  # a rule in state 1 or 2 was armed at the top
            c = bool(masks.conds[r][j])
            if st == 1:
                if c:
                    ps = tuple(None if p is None else float(p[j]) for p in masks.prices[r])
                    engine._fire(r, j, t, b, a, ps)
            elif not c:
                R[r] = 1
        i = j + 1
    engine._advance(n, int(ts[-1]), float(bid[-1]), float(ask[-1]))
    engine._stale = True


def _next_trail_trigger(o: WorkingOrder, touch: np.ndarray, i: int, end: int,
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


def _next_breach(env: tuple[float, float, float, float, int, int], ts: np.ndarray,
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

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

if TYPE_CHECKING:
    from kestrel.engine.engine import Engine

_FIRST_CHUNK = 512


def _concat(parts: list[Ticks]) -> Ticks:
    if len(parts) == 1:
        return parts[0]
    return Ticks(
        np.concatenate([p.ts for p in parts]),
        np.concatenate([p.bid for p in parts]),
        np.concatenate([p.ask for p in parts]),
        np.concatenate([p.last for p in parts]),
        np.concatenate([p.size for p in parts]),
    )


def run_fast(engine: Engine, batch: Ticks) -> None:
    """Advance `engine` over `batch` on the fast path (the plan must be fast-eligible)."""
    compiled = engine.compiled
    assert compiled is not None
    n_new = len(batch)
    if n_new == 0:
        return
    start = engine.seen
    engine._history.append(batch)
    full = _concat(engine._history)
    n = len(full)
    cols = Columns(full, engine.session, engine.arm_tick)
    plan = compiled.plan
    conds = [cols.truth(r.cond) for r in plan.rules]
    trues = [np.flatnonzero(c[start:]) + start for c in conds]
    falses = [np.flatnonzero(~c[start:]) + start for c in conds]
    prices: list[list[np.ndarray | None]] = [
        [cols.expr(a.price) if isinstance(a, ast.Order) and a.price is not None else None
         for a in r.actions]
        for r in plan.rules
    ]
    ts, bid, ask = full.ts, full.bid, full.ask
    engine._sizes, engine._sizes_base = full.size, 0
    R = engine.R
    n_rules = len(R)
    i = start
    while i < n:
        j = _next_breach(engine.env, ts, bid, ask, i, n)
        for r in range(n_rules):
            st = R[r]
            if st == 0:
                continue
            idx = trues[r] if st == 1 else falses[r]
            k = int(np.searchsorted(idx, i))
            if k < idx.shape[0] and idx[k] < j:
                j = int(idx[k])
        if j >= n:
            break
        t, b, a = int(ts[j]), float(bid[j]), float(ask[j])
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = engine.env
        if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or j >= i_next:
            engine._step(j, t, b, a)
        for r in range(n_rules):
            st = R[r]
            if not st:
                continue
            c = bool(conds[r][j])
            if st == 1:
                if c:
                    ps = tuple(None if p is None else float(p[j]) for p in prices[r])
                    engine._fire(r, j, t, b, a, ps)
            elif not c:
                R[r] = 1
        i = j + 1
    engine._advance(n, int(ts[-1]), float(bid[-1]), float(ask[-1]))
    engine._stale = True


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

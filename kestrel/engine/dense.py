"""The dense loop: the fast path's loop for plans that fire densely, fed by numpy columns.

Where rules fire every few dozen ticks, jumping from event to event (`fast.run_fast`) costs
more than looping, and the compiled reference loop spends most of its time updating
indicators tick by tick. The dense loop gets every indicator and condition from
`vector.Columns` (the same floating-point operations as the reference, computed with numpy
over the session's prefix) and keeps only a lean per-tick test in Python.

Rule conditions of a fast-eligible plan read the tick series (static: computed once) and at
most `pos` and `rpnl` (dynamic: constant between fills). Each condition is reduced, per
account state, to a constant or to one of a few static boolean arrays (`Feed.forms`), by
evaluating its account-only parts as scalars (`pos == 0 AND X` is X when flat and False
otherwise; `X OR rpnl > 0` is X or True). Every static array (form k) gets two bits of one
int per tick, k (true) and MAX_FORMS + k (false), and bit ALWAYS is always set
(`Feed.window_bytes`). The per-tick loop then tests

    bits[k] & m  or  bid/ask outside the broker's envelope

where `m` holds, for each armed rule, the bit of "its condition is true" (for a rule
waiting to re-arm, "is false"), and stops before the next deadline (`t_next`, `i_next`).
Past its first SHORT ticks a scan goes by blocks of BLOCK ticks (`_scan_blocks`): a block
whose bits' OR misses `m` and whose bid/ask min and max are inside the envelope holds no
stop and is skipped whole; the checks and the mask (`_plan`) are recomputed only after a
step, a fire or a re-arm.
At a tick it stops on it does exactly what the reference does there: the broker step, then
the rules in order (fire, or re-arm). The ledger is therefore the reference's, byte for
byte (tests/test_engine_dense.py).

A condition mixing account state with tick series inside one comparison (`pos < vol`)
has no such form (`Unsupported`): the fast path then hands the batch to the compiled loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kestrel.engine.broker import Broker, RuleState
from kestrel.engine.indicators import DYNAMIC_SERIES, series_in
from kestrel.engine.plans import clock_seconds
from kestrel.engine.vector import Columns, compare
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks
from kestrel.lang import ast

try:  # mypy's runtime library: compiled, these read the bytes in place
    from librt.strings import read_f64_le, read_i64_le
except ImportError:  # pragma: no cover - pure Python without it: the same values
    from kestrel.engine.bytereads import read_f64_le, read_i64_le

NAN: Final = math.nan
INF: Final = math.inf
WINDOW: Final = 8192  # ticks of columns read through memoryviews at once
MAX_FORMS: Final = 24  # forms held at once: 2 bits each + the always bit in an int64
ALWAYS: Final = 2 * MAX_FORMS
ACCOUNT: Final = ("pos", "rpnl")
SHORT: Final = 1024  # ticks a scan tests one by one before it goes by blocks
BLOCK_SHIFT: Final = 5
BLOCK: Final = 1 << BLOCK_SHIFT  # ticks per block of a long scan (`_scan_blocks`)
Bools = npt.NDArray[np.bool_]
# a rule's condition under one account state: the index of a static form (>= 0), or a
# constant (never a bool: True == 1 would alias form 1 in the loop's caches)
Form = int
TRUE_FORM: Final = -1
FALSE_FORM: Final = -2
_Blocks = tuple[list[int], list[float], list[float], list[float], list[float]]
_SPENT: Final = RuleState.SPENT
_ARMED: Final = RuleState.ARMED


class Unsupported(Exception):
    """The plan's conditions have no per-account-state form (see the module docstring)."""


def _pure(e: ast.Expr) -> bool:
    """The expression reads account state and nothing that moves with the ticks."""
    names = series_in(e)
    if not names or not names <= DYNAMIC_SERIES:
        return False
    return not any(isinstance(x, ast.Call | ast.Crosses) for x in ast.walk(e))


def _scalar(e: ast.Expr, acc: dict[str, float], session: SessionSpec) -> Any:
    """An account-only expression's value, with the operations `Columns.expr` applies
    elementwise (the same IEEE results on scalars)."""
    if isinstance(e, ast.Number | ast.Percent):
        return float(e.value)
    if isinstance(e, ast.TimeOfDay):
        return clock_seconds(session, e)
    if isinstance(e, ast.Series):
        if e.name not in acc:
            raise Unsupported(f"series {e.name} in an account expression")
        return acc[e.name]
    if isinstance(e, ast.Neg):
        return -_scalar(e.operand, acc, session)
    if isinstance(e, ast.Arith):
        x, y = _scalar(e.left, acc, session), _scalar(e.right, acc, session)
        if e.op == "+":
            return x + y
        if e.op == "-":
            return x - y
        if e.op == "*":
            return x * y
        return x / y if y != 0 else NAN
    if isinstance(e, ast.Compare):
        return compare(e.op, _scalar(e.left, acc, session), _scalar(e.right, acc, session))
    if isinstance(e, ast.And):
        return all(_truth(_scalar(o, acc, session)) for o in e.operands)
    if isinstance(e, ast.Or):
        return any(_truth(_scalar(o, acc, session)) for o in e.operands)
    if isinstance(e, ast.Not):
        return not _truth(_scalar(e.operand, acc, session))
    raise Unsupported(f"{type(e).__name__} in an account expression")


def _forms_bound(e: ast.Expr) -> int:
    """How many forms evaluating `e` under one account state may register; raises
    `Unsupported` when account state and tick series meet below a NOT/AND/OR."""
    if not series_in(e) & DYNAMIC_SERIES:
        return 1
    if _pure(e):
        return 0
    if isinstance(e, ast.Not):
        return _forms_bound(e.operand) + 1
    if isinstance(e, ast.And | ast.Or):
        return sum(_forms_bound(o) for o in e.operands) + 1
    raise Unsupported("a comparison mixes account state with tick series")


# per plan (its rules, kept alive with the entry: the ids stay theirs): the account series
# the conditions read and the nodes' kinds (`Feed._kind`), or why the plan has no forms
_ANALYSES: dict[int, tuple[Sequence[ast.Rule], frozenset[str], dict[int, int], str | None]] = {}


def _analysis(rules: Sequence[ast.Rule]) -> tuple[frozenset[str], dict[int, int]]:
    """The account series the rules' conditions read and the kinds cache of their nodes
    (shared by every Feed of a plan whose rules are a tuple), or `Unsupported`."""
    hit = _ANALYSES.get(id(rules))
    if hit is None or hit[0] is not rules:
        reads: frozenset[str] = frozenset().union(
            *(series_in(r.cond) & DYNAMIC_SERIES for r in rules))
        why = None
        if reads - set(ACCOUNT):
            why = "a condition reads upnl or pnl"
        else:
            try:
                if sum(_forms_bound(r.cond) for r in rules) > MAX_FORMS:
                    why = "too many condition forms"
            except Unsupported as exc:
                why = str(exc)
        hit = (rules, reads, {}, why)
        if isinstance(rules, tuple):  # immutable: cached (a list may change under its id)
            if len(_ANALYSES) >= 64:
                _ANALYSES.clear()
            _ANALYSES[id(rules)] = hit
    if hit[3] is not None:
        raise Unsupported(hit[3])
    return hit[1], hit[2]


def _truth(v: Any) -> bool:
    """Python truthiness as `Columns.truth` computes it (NaN is true)."""
    return bool(v) if isinstance(v, bool) else bool(v != 0)


class Feed:
    """Rule bits and entry prices over the ticks [base, upto) of a session prefix [0, upto)."""

    def __init__(self, rules: Sequence[ast.Rule], full: Ticks, session: SessionSpec,
                 arm: int, units: float, base: int, upto: int) -> None:
        self.rules = rules
        self.session = session
        self.base = base
        self.upto = upto
        self.cols = Columns(full.slice(0, upto), session, arm, units)
        self.reads, self._kinds = _analysis(rules)
        self.arrays: list[Bools] = []  # the static forms, over [0, upto)
        self._form_of: dict[object, int] = {}
        self._by_key: dict[tuple[float, ...], tuple[Form, ...]] = {}
        self.prices: list[list[npt.NDArray[np.float64] | None]] = [
            [self.cols.expr(a.price) if isinstance(a, ast.Order) and a.price is not None
             else None for a in r.actions]
            for r in rules
        ]
        self.bits: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._built = 0  # forms the bits array holds

    def nbytes(self) -> int:
        """Memory held by the columns, forms and bits."""
        return (self.cols.nbytes() + self.bits.nbytes + sum(a.nbytes for a in self.arrays)
                + sum(p.nbytes for ps in self.prices for p in ps if p is not None))

    # forms -------------------------------------------------------------------------
    def key(self, broker: Broker) -> tuple[float, ...]:
        """The account state the conditions read (the fast path's `pos`, `rpnl`)."""
        if not self.reads:
            return ()
        return (float(broker.pos) if "pos" in self.reads else 0.0,
                broker.rpnl if "rpnl" in self.reads else 0.0)

    def forms(self, key: tuple[float, ...]) -> tuple[Form, ...]:
        """Each rule's condition under account state `key`: TRUE_FORM, FALSE_FORM or a form
        index (cached per state; when the forms outgrow MAX_FORMS only this state's are kept,
        renumbered: the bits are then rebuilt, see `stale`)."""
        hit = self._by_key.get(key)
        if hit is not None:
            return hit
        acc = {"pos": key[0], "rpnl": key[1]} if key else {}
        out = [self._form(r.cond, acc) for r in self.rules]
        if len(self.arrays) > MAX_FORMS:  # keep only this state's forms (at most the bound)
            self.arrays, self._form_of, self._by_key = [], {}, {}
            self._built = -1
            out = [self._form(r.cond, acc) for r in self.rules]
        if len(self._by_key) > 64:
            self._by_key.clear()
        self._by_key[key] = forms = tuple(out)
        return forms

    def _register(self, tag: object, make: Callable[[], Bools]) -> int:
        k = self._form_of.get(tag)
        if k is None:
            k = self._form_of[tag] = len(self.arrays)
            self.arrays.append(make())
        return k

    def _kind(self, e: ast.Expr) -> int:
        """0: static (reads no account state), 1: account state only, 2: mixed (cached per
        node: `_form` runs for every new account state)."""
        k = self._kinds.get(id(e))
        if k is None:
            k = self._kinds[id(e)] = (0 if not series_in(e) & DYNAMIC_SERIES
                                      else 1 if _pure(e) else 2)
        return k

    def _form(self, e: ast.Expr, acc: dict[str, float]) -> Form:
        kind = self._kind(e)
        if kind == 0:
            return self._register(("static", id(e)), lambda: self.cols.truth(e))
        if kind == 1:
            return TRUE_FORM if _truth(_scalar(e, acc, self.session)) else FALSE_FORM
        if isinstance(e, ast.Not):
            f = self._form(e.operand, acc)
            if f < 0:
                return FALSE_FORM if f == TRUE_FORM else TRUE_FORM
            return self._register(("not", f), lambda: ~self.arrays[f])
        if isinstance(e, ast.And | ast.Or):
            conj = isinstance(e, ast.And)
            parts: list[int] = []
            for o in e.operands:
                f = self._form(o, acc)
                if f < 0:
                    if (f == TRUE_FORM) != conj:  # a False operand of AND, a True one of OR
                        return f
                    continue
                if f not in parts:
                    parts.append(f)
            if not parts:
                return TRUE_FORM if conj else FALSE_FORM
            if len(parts) == 1:
                return parts[0]
            tag = ("and" if conj else "or", tuple(parts))

            def combine() -> Bools:
                acc_ = self.arrays[parts[0]].copy()
                for p in parts[1:]:
                    if conj:
                        acc_ &= self.arrays[p]
                    else:
                        acc_ |= self.arrays[p]
                return acc_

            return self._register(tag, combine)
        raise Unsupported("a comparison mixes account state with tick series")

    def _build(self) -> None:
        """OR the forms added since the last call into the bits array."""
        if self.stale():
            # the new forms' false bits set, then both of a form's bits flipped where it is
            # true (one masked pass per form, no temporary array)
            fresh = not self.bits.size or self._built < 0
            if fresh:
                self._built = 0
            false = 0
            for k in range(self._built, len(self.arrays)):
                false |= 1 << (MAX_FORMS + k)
            if fresh:
                self.bits = np.full(self.upto - self.base, (1 << ALWAYS) | false, dtype=np.int64)
            elif false:
                self.bits |= np.int64(false)
            bits = self.bits
            for k in range(self._built, len(self.arrays)):
                np.bitwise_xor(bits, np.int64((1 << k) | (1 << (MAX_FORMS + k))), out=bits,
                               where=self.arrays[k][self.base:])
            self._built = len(self.arrays)

    def window_bytes(self, lo: int, hi: int) -> bytes:
        """The bits of ticks [lo, hi) as little-endian int64 bytes (a copy: taken again after
        forms are added), which the loop reads with `read_i64_le` at byte offset 8 x
        (tick - lo): bit k = form k is true, bit MAX_FORMS + k = form k is false, bit ALWAYS
        always set. Forms added since the last call are OR'ed into the bits array first."""
        self._build()
        return _le(self.bits[lo - self.base: hi - self.base])

    def stale(self) -> bool:
        """A form was added since the bits were built."""
        return self._built != len(self.arrays) or not self.bits.size


class _Plan:
    """The checks at a tick for rule states and forms (`_plan`), as parallel lists in rule
    order: the rule, its bit and whether it fires (True) or re-arms (False); `m` is the scan
    mask, the union of the bits (a tick with none of them set needs no rule evaluated)."""

    __slots__ = ("m", "rules", "bits", "fires")

    def __init__(self, m: int, rules: list[int], bits: list[int], fires: list[bool]) -> None:
        self.m = m
        self.rules = rules
        self.bits = bits
        self.fires = fires


def _plan(states: list[RuleState], forms: tuple[Form, ...]) -> _Plan:
    """For rule states and forms: for an armed rule the bit of "its form is true", for a
    waiting one "is false", for a constant that holds the always bit (see `_Plan`)."""
    rules: list[int] = []
    bits: list[int] = []
    fires: list[bool] = []
    m = 0
    for r in range(len(states)):
        st = states[r]
        if st is _SPENT:
            continue
        f = forms[r]
        armed = st is _ARMED
        if f < 0:
            if (f == TRUE_FORM) != armed:  # armed on a False or waiting on a True: nothing
                continue
            bit = 1 << ALWAYS
        else:
            bit = 1 << (f if armed else MAX_FORMS + f)
        rules.append(r)
        bits.append(bit)
        fires.append(armed)
        m |= bit
    return _Plan(m, rules, bits, fires)


def _plan_at(plans: dict[int, _Plan], key: int, states: list[RuleState],
             forms: tuple[Form, ...]) -> _Plan:
    """`_plan(states, forms)`, memoized in `plans` under `key` (the forms' number and the
    states' `_code`)."""
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _plan(states, forms)
    return plan


def _code(states: list[RuleState]) -> int:
    """The rule states as one int (a base-3 digit per rule: 0 spent, 1 armed, 2 waiting)."""
    c = 0
    for r in range(len(states)):
        st = states[r]
        c = 3 * c + (0 if st is _SPENT else 1 if st is _ARMED else 2)
    return c


def _le(column: npt.NDArray[Any]) -> bytes:
    """A window of an int64 or float64 column as little-endian bytes (one copy), read with
    `read_i64_le` / `read_f64_le` at byte offset 8 x its index."""
    return np.ascontiguousarray(column, dtype=column.dtype.newbyteorder("<")).tobytes()


def _first_at(tb: bytes, t: int, lo: int, hi: int) -> int:
    """`bisect_left` of time t over window ticks [lo, hi) of the timestamps `tb` (`_le`)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if read_i64_le(tb, 8 * mid) < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _blocks(bw: npt.NDArray[np.int64], bid: npt.NDArray[np.float64],
            ask: npt.NDArray[np.float64], w0: int, w1: int) -> _Blocks:
    """Per block of BLOCK ticks of the window [w0, w1) (the last one may be shorter): the OR
    of its ticks' bits (`bw`, the window's) and the min and max of its bids and asks (NaN
    when one is NaN)."""
    starts = np.arange(0, w1 - w0, BLOCK)
    b, a = bid[w0:w1], ask[w0:w1]
    return (np.bitwise_or.reduceat(bw, starts).tolist(),
            np.minimum.reduceat(b, starts).tolist(), np.maximum.reduceat(b, starts).tolist(),
            np.minimum.reduceat(a, starts).tolist(), np.maximum.reduceat(a, starts).tolist())


def _scan_blocks(j: int, last: int, m: int, bits: bytes, bl: bytes, al: bytes, blk: _Blocks,
                 use_b: bool, use_a: bool, lo_b: float, hi_b: float, lo_a: float,
                 hi_a: float) -> int:
    """The scan of `run_dense` over window ticks [j, last): the first tick whose bits meet
    `m` or whose bid (`use_b`) or ask (`use_a`) is outside the envelope, else `last`. A whole
    block none of whose ticks can stop (its bits' OR misses `m`, its min and max are inside)
    is skipped at once; the others are tested tick by tick (a NaN fails every comparison,
    so a block holding one is tested tick by tick). The window's `bits`, bids `bl` and asks
    `al` are `_le` bytes (tick j at byte 8 j)."""
    bor, bmin, bmax, amin, amax = blk
    while j < last:
        q = j >> BLOCK_SHIFT
        e = (q + 1) << BLOCK_SHIFT
        if (e <= last and j == e - BLOCK and not bor[q] & m
                and (not use_b or (lo_b < bmin[q] and bmax[q] < hi_b))
                and (not use_a or (lo_a < amin[q] and amax[q] < hi_a))):
            j = e
            continue
        if e > last:
            e = last
        while j < e:
            o = 8 * j
            if (read_i64_le(bits, o) & m or (use_b and not lo_b < read_f64_le(bl, o) < hi_b)
                    or (use_a and not lo_a < read_f64_le(al, o) < hi_a)):
                return j
            j += 1
    return last


def _scan(j: int, short: int, m: int, bits: bytes, bl: bytes, al: bytes, on_bid: bool,
          on_ask: bool, lo_b: float, hi_b: float, lo_a: float, hi_a: float) -> int:
    """The first window tick in [j, short) whose bits meet `m` or whose bid (`on_bid`) or ask
    (`on_ask`) is outside the envelope, else `short` (specialised to the finite sides; the
    window as in `_scan_blocks`)."""
    if not on_ask:
        if not on_bid:
            while j < short:
                if read_i64_le(bits, 8 * j) & m:
                    return j
                j += 1
        else:
            while j < short:
                o = 8 * j
                if read_i64_le(bits, o) & m or not lo_b < read_f64_le(bl, o) < hi_b:
                    return j
                j += 1
    elif not on_bid:
        while j < short:
            o = 8 * j
            if read_i64_le(bits, o) & m or not lo_a < read_f64_le(al, o) < hi_a:
                return j
            j += 1
    else:
        while j < short:
            o = 8 * j
            if read_i64_le(bits, o) & m or not (lo_b < read_f64_le(bl, o) < hi_b
                                                 and lo_a < read_f64_le(al, o) < hi_a):
                return j
            j += 1
    return short


def run_dense(feed: Feed, full: Ticks, i: int, end: int, broker: Broker) -> int:
    """Process ticks [i, end) (end <= feed.upto) exactly as the reference loop would, with the
    broker's `step` and the rules' `fire`, reading the rules' states (`rule_states`; a waiting
    rule whose form is false is re-armed by `rearm`). Returns `end`, or the first tick from
    which no rule is live (the broker alone runs from there)."""
    states = broker.rule_states
    ts, bid, ask = full.ts, full.bid, full.ask
    k = i
    key = feed.key(broker)
    forms = feed.forms(key)
    # the checks and scan mask per (forms, states): keyed by the forms' number in `fids`
    # and the states' `_code` (`fid * n_codes + code`)
    fids: dict[tuple[Form, ...], int] = {forms: 0}
    fid = 0
    n_codes = 3 ** len(states)
    plans: dict[int, _Plan] = {}
    # the prices of rules whose actions read none (all None), built once
    fixed: list[tuple[float | None, ...] | None] = [
        None if any(p is not None for p in ps) else tuple(None for _ in ps) for ps in feed.prices]
    # the others' price columns as float64 `_le` bytes over [0, upto) (read when fired)
    priced: list[tuple[bytes | None, ...]] = [
        tuple(None if p is None else _le(p.astype(np.float64, copy=False)) for p in ps)
        for ps in feed.prices]
    pos_only = feed.reads == {"pos"}
    pos = broker.pos
    forms_at = {pos: forms} if pos_only else {}  # the forms per position (pos_only)
    # the plan of (forms, states): recomputed only after a step (which may change both) or a
    # fire or re-arm (states); None when due
    plan: _Plan | None = None
    code = 0
    while k < end:
        w0 = k
        w1 = min(end, k + WINDOW)
        # the window's columns as `_le` bytes: tick k at byte 8 (k - w0)
        tsl = _le(ts[w0:w1])
        bl = _le(bid[w0:w1])
        al = _le(ask[w0:w1])
        bits = feed.window_bytes(w0, w1)
        blk: _Blocks | None = None  # the window's blocks, built on the first long scan
        t_seen, t_stop = -1, w1  # the first tick of the window at or past t_seen (bisected)
        ts_end: int = read_i64_le(tsl, 8 * (w1 - w0 - 1))
        while k < w1:
            if plan is None:
                code = _code(states)
                plan = _plan_at(plans, fid * n_codes + code, states, forms)
            m = plan.m
            if not m and not code:
                return k
            lo_b, hi_b, lo_a, hi_a, t_next, i_next = broker.env
            if t_next != t_seen:  # (a deadline past the window's last tick: its end)
                t_seen = t_next
                t_stop = w1 if t_next > ts_end else w0 + _first_at(tsl, t_next, k - w0, w1 - w0)
            stop = t_stop if t_stop < w1 else w1
            if i_next < stop:
                stop = i_next
            last = (stop if stop > k else k) - w0
            j = k - w0
            # the scan: the first tick with a rule to evaluate or the envelope breached (tick
            # by tick over SHORT ticks, then by blocks: `_scan_blocks`)
            short = j + SHORT
            if short > last:
                short = last
            on_bid = lo_b != -INF or hi_b != INF  # the envelope's finite sides
            on_ask = lo_a != -INF or hi_a != INF
            j = _scan(j, short, m, bits, bl, al, on_bid, on_ask, lo_b, hi_b, lo_a, hi_a)
            if j == short and short < last:  # no stop yet: the block scan goes on
                if blk is None:
                    blk = _blocks(feed.bits[w0 - feed.base: w1 - feed.base], bid, ask, w0, w1)
                j = _scan_blocks(j, last, m, bits, bl, al, blk, on_bid, on_ask,
                                 lo_b, hi_b, lo_a, hi_a)
            k = w0 + j
            if k >= w1:
                break
            o = 8 * j
            t: int = read_i64_le(tsl, o)
            b: float = read_f64_le(bl, o)
            a: float = read_f64_le(al, o)
            if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or k >= i_next:
                broker.step(k, t, b, a)
                new_forms = forms
                if pos_only:  # the common case, without building the key
                    now = broker.pos
                    if now != pos:
                        pos = now
                        hit = forms_at.get(pos)
                        if hit is None:
                            hit = feed.forms((float(pos), 0.0))
                            if feed.stale():  # a new form: rebuild the bits
                                bits = feed.window_bytes(w0, w1)
                                blk = None
                                forms_at.clear()  # the forms may have been renumbered
                            forms_at[pos] = hit
                        new_forms = hit
                else:
                    new = feed.key(broker)
                    if new != key:
                        key, new_forms = new, feed.forms(new)
                        if feed.stale():
                            bits = feed.window_bytes(w0, w1)
                            blk = None
                if new_forms is not forms:
                    forms = new_forms
                    got = fids.get(forms)
                    if got is None:
                        got = fids[forms] = len(fids)
                    fid = got
                code = _code(states)
                plan = _plan_at(plans, fid * n_codes + code, states, forms)
                m = plan.m
            x: int = read_i64_le(bits, o)
            if not x & m:  # no check holds (m is the union of the checks' bits)
                k += 1
                continue
            rules, cbits, cfires = plan.rules, plan.bits, plan.fires
            for c in range(len(rules)):
                r = rules[c]
                if x & cbits[c] and states[r] is not _SPENT:  # a rule fired before may have disarmed the plan
                    plan = None  # the states change: the plan is recomputed
                    if cfires[c]:
                        ps = fixed[r]
                        if ps is None:
                            ps = tuple([None if p is None else read_f64_le(p, 8 * k)
                                        for p in priced[r]])
                        broker.fire(r, k, t, b, a, ps)
                    else:
                        broker.rearm(r)
            k += 1
    return end


__all__ = ["ALWAYS", "FALSE_FORM", "MAX_FORMS", "TRUE_FORM", "Feed", "Unsupported", "WINDOW", "run_dense"]

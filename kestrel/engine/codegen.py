"""Compile a plan into specialised Python source for the per-tick reference loop.

The plan is walked once: each indicator (see `indicators`) becomes a few lines of
incremental update code on local variables (running sums, monotonic deques, bar
recurrences), each condition a Python expression over those locals. The source is
exec'd once; the per-tick loop then never touches the AST. Undefined values are NaN, so a
comparison using one is false (`!=` is guarded explicitly).

Two functions are generated from the same update code:
- `warm(tsl, bl, al, ll, sl, Q_, S, K_)` feeds history to the indicators only, and
  `warmx` (same signature) also to the crosses (history after the plan was armed);
- `live(E, tsl, bl, al, ll, sl, Q_, g0, S, R, K_)` drives the broker kernel `E`
  (`broker.Broker`) through its public surface only: it calls `E.step` on ticks where the
  kernel's envelope `E.env` is breached and evaluates the armed rules (`R` is
  `E.rule_states`, each rule's `RuleState` member: SPENT (0, false), ARMED (tested by
  identity, as fast as an int test) or WAITING for a false evaluation before re-arming),
  calling `E.fire` when one fires, and
  hands the rest of the batch to `E.run_idle` once every rule is spent. The three methods
  are bound to locals once per call. Crosses start fresh in `live` after arming.
`K_` holds the session constants (`Engine.consts`): the clock base `time` counts from, the
open (ns), the price units of the exact indicators (half ticks) and the plan's times of day
as `time` values. `Q_` holds the quantized columns the plan reads (`CompiledPlan.quant`,
built by `quant_columns`): whole half ticks computed with numpy per batch, so the loop does
no rounding per tick. `S` is the list of persisted state variables (loaded into locals, stored
back at the end).

Exact tick-series indicators: `mid`, `spread` and the tick and bar `sma` of a quantized
price series (last, bid, ask, mid, spread, open) work on whole numbers of half ticks, so
running sums are exact integers and the mean `(S_i - S_{i-n}) / (n x units)` is the double
nearest to the exact mean: a mid equal to its sma compares equal.

Safety: only a checked plan reaches this module (`plans.checked`), and even then no string
of the plan is spliced into the source: operators, directions and series come from fixed
tables, numbers are re-read as finite floats or ints, times of day become table entries.
"""

from __future__ import annotations

import functools
import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import kestrel.engine.lean as lean
from kestrel.engine.broker import RuleState
from kestrel.engine.indicators import IndicatorSpec, PlanError, fast_blocker, resolve
from kestrel.engine.lean import NUMBER as _NUMBER
from kestrel.engine.lean import cheap as _cheap
from kestrel.engine.lean import cost as _cost
from kestrel.engine.lean import windows_update
from kestrel.engine.feed import Chg, Feeds, Sma, Window, quant_array
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.lang import ast

NAN = float("nan")
SENTINEL = -(2**62)
FEED_MIN = 2048  # the fewest ticks a chunk of the fed code has (below: the per-tick code)


def spans(n: int, chunk: int) -> list[tuple[int, int]]:
    """[lo, hi) pieces of n ticks for the live loop: half `FEED_MIN` (per tick), then eight
    times longer each up to `chunk`, so a plan whose rules are all spent early wastes little
    fed work (the rest of a piece); a piece boundary never changes the ledger."""
    out, lo, size = [], 0, FEED_MIN // 2
    while lo < n:
        out.append((lo, min(n, lo + size)))
        lo, size = lo + size, min(chunk, 8 * size)
    return out

SERIES_SRC = {
    "last": "l",
    "bid": "b",
    "ask": "a",
    "mid": "m",
    "spread": "sp",
    "size": "s",
    "vol": "cv",
    "vwap": "vw",
    "open": "op",
    "time": "tod",
    "pos": "pos_",  # locals of `live`, re-read after every broker step and fire (the only
    "rpnl": "rpnl_",  # calls that can change them)
    "upnl": "E.upnl_now(b, a)",
    "pnl": "E.pnl_now(b, a)",  # exact, net of fees: what maxloss measures
}
# a quantized series as a whole number of half ticks (U_ = units per price point); all but
# `open` come in per tick as precomputed columns (`quant_columns`), never rounded per tick
QUANT_SRC = {
    "last": "kl",
    "bid": "kb",
    "ask": "ka",
    "mid": "km",
    "spread": "ksp",
    "open": "kop",
}
# the precomputed quantized columns, in the order the generated loops unpack them
QUANT_COLUMNS = ("kl", "kb", "ka", "km", "ksp")
_CMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
_ARITH = {"+": "+", "-": "-", "*": "*", "/": "/"}
_DIRECTIONS = ("above", "below")


def _number(v: object) -> str:
    """A plan number as source: a finite int or float, re-read, never the plan's text."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise PlanError(f"not a finite number: {v!r}")
    return repr(float(v))


def _op(table: dict[str, str], op: object, what: str) -> str:
    if not isinstance(op, str) or op not in table:
        raise PlanError(f"unknown {what} {op!r}")
    return table[op]


def safe_div(x: float, y: float) -> float:
    """`/` in the language: NaN on a zero divisor."""
    return x / y if y else NAN


def not_equal(x: float, y: float) -> bool:
    """`!=` in the language: false when either side is NaN (not yet defined)."""
    return x == x and y == y and x != y


@dataclass
class CompiledPlan:
    """A plan compiled for the reference path."""

    plan: ast.Plan
    source: str
    warm: Callable[..., None]
    warmx: Callable[..., None]
    live: Callable[..., None]
    init_state: Callable[[], list[Any]]
    fast_blocker: str
    tods: tuple[ast.TimeOfDay, ...] = ()
    quant: tuple[str, ...] = ()  # the `QUANT_COLUMNS` the loops read (see `quant_columns`)
    reads: tuple[str, ...] = ("l", "s")  # which of last (`l`) and size (`s`) the loops read
    feeds: Feeds = Feeds()  # the indicators whose values come in as columns (`feed`)
    twin: CompiledPlan | None = None  # the per-tick code of a fed plan: same state layout
    size: int = 0  # the rules' condition nodes plus their actions (the fast path's memory estimate)

    def for_chunk(self, n: int, live: bool = True) -> CompiledPlan:
        """The code to run a chunk of n ticks with: the fed code from `FEED_MIN` ticks on
        (numpy's fixed cost per call outweighs it below) while a rule is live, else the
        per-tick twin. Both keep the same state, so they can take turns chunk by chunk."""
        if self.twin is None or (live and n >= FEED_MIN):
            return self
        return self.twin

    def columns(self, part: Ticks, S: list[Any], units: float) -> list[list[Any]]:
        """The per-chunk columns the loops zip after ts, bid, ask, last and size: the
        quantized ones, then the fed indicators' (advancing their state in `S`; call it
        once per chunk, in order, right before the loop over that chunk)."""
        f = self.feeds
        if not f:
            return list(quant_columns(self.quant, part.bid, part.ask, part.last, units))
        arrays = {name: quant_array(name, part.bid, part.ask, part.last, units)
                  for name in sorted(set(self.quant) | f.sources())}
        q: list[Any] = [arrays[name].data for name in self.quant]
        return q + f.columns(part.ts, part.last, S, units, arrays)


def quant_columns(names: tuple[str, ...], bid: Any, ask: Any, last: Any,
                  units: float) -> list[list[int]]:
    """The quantized columns `names` (of `QUANT_COLUMNS`) of a batch as lists of ints
    (`feed.quant_array`: the values a per-tick `round(x * U_)` would give)."""
    return [quant_array(name, bid, ask, last, units).tolist() for name in names]


def _running_mean(k: str, v: str, x: str, n: int, ind: str) -> list[str]:
    """Lines updating the mean of the last n values of x: (S_i - S_{i-n}) / n on the running
    sum S (`cs{k}`), with S_{i-n} kept in a deque of n + 1 sums (`dq{k}`) that starts as n
    NaNs then 0, so the mean is NaN until n values are in with no length test per tick.
    The divisor `N{k}_` (n, or n x U_ when x is a whole number of half ticks: S is then an
    exact integer) is hoisted into the function's head."""
    return [
        f"{ind}cs{k} += {x}",
        f"{ind}dq{k}.append(cs{k})",
        f"{ind}{v} = (cs{k} - dq{k}[0]) / N{k}_",
    ]


def _mean_state(zero: str, n: int) -> str:
    """The initial deque of `_running_mean`: n NaNs, then the empty sum."""
    return f"deque([nan] * {n} + [{zero}], maxlen={n + 1})"


def _ema(v: str, x: str, n: int, ind: str) -> list[str]:
    """The line updating the ema `v` of x: seeded with the first value, alpha = 2/(n+1)."""
    alpha = 2.0 / (n + 1)
    return [f"{ind}{v} = {x} if {v} != {v} else {v} + {alpha!r} * ({x} - {v})"]


class _Gen:
    def __init__(self, fed: bool = False) -> None:
        self.fed = fed
        self.state: list[tuple[str, str]] = []  # (name, initial value source)
        self.base: set[str] = set()
        self.spec_var: dict[IndicatorSpec, str] = {}
        self.windows: list[tuple[str, IndicatorSpec]] = []
        self.chgs: list[tuple[str, IndicatorSpec]] = []
        self.ticks: list[tuple[str, IndicatorSpec]] = []
        self.bars: dict[int, list[tuple[str, IndicatorSpec]]] = {}
        self.crosses: list[tuple[str, str, str, str]] = []
        self.cross_var: dict[ast.Crosses, str] = {}
        self.tods: list[ast.TimeOfDay] = []
        self.quant: set[str] = set()
        self.hoist: list[str] = []  # constants computed once in each function's head
        self.hoist_late: list[str] = []  # the same, reading the times of day (`tl{k}`)
        self.defs: list[tuple[str, str]] = []  # (value, expression) lines `updates` emits

    def qsrc(self, x: str) -> str:
        """The source of quantized series x, noting the precomputed column it reads."""
        src = QUANT_SRC[x]
        if src in QUANT_COLUMNS:
            self.quant.add(src)
        return src

    def var(self, name: str, init: str) -> str:
        self.state.append((name, init))
        return name

    def series(self, name: str) -> str:
        if name not in SERIES_SRC:
            raise PlanError(f"unknown series {name!r}")
        if name in ("mid", "spread", "vol", "vwap", "open", "time"):
            self.base.add(name)
        return SERIES_SRC[name]

    def mean_state(self, k: int, n: int, exact: bool) -> None:
        """State and hoisted divisor of a `_running_mean` (`exact`: whole half ticks)."""
        zero = "0" if exact else "0.0"
        self.var(f"cs{k}", zero)
        self.var(f"dq{k}", _mean_state(zero, n))
        self.hoist.append(f"N{k}_ = ({float(n)!r} * U_)" if exact else f"N{k}_ = {float(n)!r}")

    def indicator(self, spec: IndicatorSpec) -> str:
        if spec in self.spec_var:
            return self.spec_var[spec]
        k = len(self.spec_var)
        v = self.var(f"v{k}", "nan")
        self.spec_var[spec] = v
        if spec.kind == "sma" or spec.kind == "ema":
            self.series(spec.x)
            if spec.kind == "sma" and spec.x in QUANT_SRC:
                self.base.add("q" + spec.x)
        if spec.kind in ("high", "low", "chg"):
            self.var(f"dqt{k}", "deque()")  # timestamps and values, in two deques
            self.var(f"dqv{k}", "deque()")
            if spec.kind == "chg":
                self.var(f"rf{k}", "nan")
                self.chgs.append((v, spec))
            else:
                self.windows.append((v, spec))
        elif spec.tf_ns == 0:
            if spec.kind == "sma":
                self.mean_state(k, int(spec.n), spec.x in QUANT_SRC)
            self.ticks.append((v, spec))
        else:
            if spec.kind in ("sma", "atr"):
                self.mean_state(k, int(spec.n), spec.kind == "sma" and spec.x in QUANT_SRC)
            if spec.kind == "atr":
                self.var(f"pc{k}", "nan")
            self.bars.setdefault(spec.tf_ns, []).append((v, spec))
        return v

    def expr(self, e: ast.Expr) -> str:
        if isinstance(e, ast.Number | ast.Percent):
            return _number(e.value)
        if isinstance(e, ast.TimeOfDay):
            if e not in self.tods:
                self.tods.append(e)
            return f"tl{self.tods.index(e)}"
        if isinstance(e, ast.Series):
            return self.series(e.name)
        if isinstance(e, ast.Call):
            specs = resolve(e)
            vs = [self.indicator(s) for s in specs]
            return f"({vs[0]} - {vs[1]})" if e.name == "range" else vs[0]
        if isinstance(e, ast.Neg):
            return f"(-{self.expr(e.operand)})"
        if isinstance(e, ast.Arith):
            x, y = self.expr(e.left), self.expr(e.right)
            op = _op(_ARITH, e.op, "operator")
            return f"safe_div({x}, {y})" if op == "/" else f"({x} {op} {y})"
        if isinstance(e, ast.Compare):
            clock = self.clock_compare(e)
            if clock is not None:
                return clock
            x, y = self.expr(e.left), self.expr(e.right)
            op = _op(_CMP, e.op, "comparison")
            if op != "!=":
                return f"({x} {op} {y})"
            if _cheap(x) and _cheap(y):  # `not_equal` inline: a number literal is never NaN
                guards = [f"{z} == {z}" for z in (x, y) if not _NUMBER.match(z)]
                return "(" + " and ".join(guards + [f"{x} != {y}"]) + ")"
            return f"not_equal({x}, {y})"
        if isinstance(e, ast.Crosses):
            if e in self.cross_var:
                return self.cross_var[e]
            x, y = self.expr(e.left), self.expr(e.right)
            if e.direction not in _DIRECTIONS:
                raise PlanError(f"unknown CROSSES direction {e.direction!r}")
            k = len(self.crosses)
            name = f"x{k}"
            self.crosses.append((name, x, y, "above" if e.direction == "above" else "below"))
            self.cross_var[e] = name
            return name
        if isinstance(e, ast.And):
            # side-effect-free operands: the order cannot change the truth value, so the
            # cheap ones go first (a stable sort keeps the plan's order among equals)
            ops = sorted(e.operands, key=_cost)
            return "(" + " and ".join(self.expr(o) for o in ops) + ")"
        if isinstance(e, ast.Or):
            return "(" + " or ".join(self.expr(o) for o in e.operands) + ")"
        if isinstance(e, ast.Not):
            return f"(not {self.expr(e.operand)})"
        raise PlanError(f"{type(e).__name__} is not a value here")

    def clock_compare(self, e: ast.Compare) -> str | None:
        """`time op hh:mm` (either order) as a comparison of the tick's ns timestamp with a
        hoisted bound: `(t - BASE_) // 1e9 >= k` is `t >= BASE_ + k x 1e9` and `> k` is
        `>= k + 1` for integers, so no big-int division per tick. None for other compares."""
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
        if (isinstance(e.left, ast.Series) and e.left.name == "time"
                and isinstance(e.right, ast.TimeOfDay) and e.op in flip):
            tod, op = e.right, str(e.op)
        elif (isinstance(e.right, ast.Series) and e.right.name == "time"
              and isinstance(e.left, ast.TimeOfDay) and e.op in flip):
            tod, op = e.left, flip[e.op]
        else:
            return None
        k = self.expr(tod)[2:]  # tl{k}
        after = op in (">", "<=")  # against the first ns of the next second
        name = f"tb{k}_{int(after)}"
        line = f"{name} = BASE_ + (tl{k} + {int(after)}) * {NS_PER_S}"
        if line not in self.hoist_late:
            self.hoist_late.append(line)
        return f"(t {'>=' if op in ('>=', '>') else '<'} {name})"

    # ----------------------------------------------------------------------------------
    def define(self, L: list[str], v: str, expr: str, ind: str = "") -> None:
        """A value line: `v = expr` (top level only: `lean.inline` may move it into the
        conditions that read it)."""
        if not ind:
            self.defs.append((v, expr))
        L.append(f"{ind}{v} = {expr}")

    def updates(self) -> list[str]:
        """Per-tick indicator update lines (indented for the loop body)."""
        L: list[str] = []
        if self.base & {"mid", "qmid"} and not self.fed:
            self.quant.add("km")
            self.define(L, "m", "km / U_")
        if self.base & {"spread", "qspread"} and not self.fed:
            self.quant.add("ksp")
            self.define(L, "sp", "ksp / U_")
        if "time" in self.base:
            self.define(L, "tod", f"(t - BASE_) // {NS_PER_S}")
        if self.base & {"vol", "vwap"}:
            L.append("cv += s")
            if "vwap" in self.base:
                L += ["cpv += l * s", "cl += l", "cn += 1"]
                self.define(L, "vw", "cpv / cv if cv > 0.0 else cl / cn")
        windows, chgs = self.per_tick()
        lows = sorted({int(s.window_ns) for _, s in windows + chgs})
        if windows:
            L += windows_update(windows)
        for j, d in enumerate(lows):
            L.append(f"lo{j}_ = t - {d}")
        for v, spec in windows:
            k, lo = v[1:], f"lo{lows.index(int(spec.window_ns))}_"
            L.append(f"while dqt{k} and dqt{k}[0] < {lo}: dqt{k}.popleft(); dqv{k}.popleft()")
            self.define(L, v, f"dqv{k}[0] if dqv{k} and {lo} >= t0 else nan")
        for v, spec in chgs:
            # rf: `last` of the latest tick with ts <= t - d (popped: the deque holds the rest)
            k, lo = v[1:], f"lo{lows.index(int(spec.window_ns))}_"
            L.append(f"while dqt{k} and dqt{k}[0] <= {lo}: dqt{k}.popleft(); rf{k} = dqv{k}.popleft()")
            self.define(L, v, f"100.0 * (l / rf{k} - 1.0) if rf{k} else nan")
            L.append(f"dqt{k}.append(t)")
            L.append(f"dqv{k}.append(l)")
        return L + self.tick_updates()

    def per_tick(self) -> tuple[list[tuple[str, IndicatorSpec]], list[tuple[str, IndicatorSpec]]]:
        """The windows and chgs updated per tick: all of them unless `fed` (a `chg` over a
        zero duration stays per tick: its reference is the previous tick, not a search)."""
        if not self.fed:
            return self.windows, self.chgs
        return [], [(v, s) for v, s in self.chgs if s.window_ns <= 0]

    def fed_sma(self, spec: IndicatorSpec) -> bool:
        """Whether a tick indicator is fed: an sma of a quantized column series."""
        return self.fed and spec.kind == "sma" and spec.x in QUANT_SRC and spec.x != "open"

    def fed_columns(self) -> list[tuple[str, IndicatorSpec]]:
        """The indicators fed as columns, in `Feeds` column order (windows, chgs, smas)."""
        if not self.fed:
            return []
        return (self.windows + [(v, s) for v, s in self.chgs if s.window_ns > 0]
                + [(v, s) for v, s in self.ticks if self.fed_sma(s)])

    def tick_updates(self) -> list[str]:
        """Update lines of the tick sma/ema and the bar indicators."""
        L: list[str] = []
        for v, spec in self.ticks:
            k = v[1:]
            x = SERIES_SRC[spec.x]
            if self.fed_sma(spec):
                continue
            if spec.kind == "sma":
                L += _running_mean(k, v, self.qsrc(spec.x) if spec.x in QUANT_SRC else x,
                                   int(spec.n), "")[:2]
                self.define(L, v, f"(cs{k} - dq{k}[0]) / N{k}_")
            else:
                L += _ema(v, x, int(spec.n), "")
        for g, (tf, items) in enumerate(sorted(self.bars.items())):
            L.append(f"k_ = (t - OPEN_) // {int(tf)}")
            L.append(f"if k_ != bk{g}:")
            L.append(f"    if bk{g} != {SENTINEL}:")
            for v, spec in items:
                k = v[1:]
                if spec.kind == "atr":
                    L.append(f"        tr_ = bh{g} - bw{g} if pc{k} != pc{k} else max(bh{g}, pc{k}) - min(bw{g}, pc{k})")
                    L.append(f"        pc{k} = bc{g}")
                    L += _running_mean(k, v, "tr_", spec.n, "        ")
                elif spec.kind == "sma" and spec.x in QUANT_SRC:
                    L += _running_mean(k, v, f"bq{g}_{spec.x}", int(spec.n), "        ")
                elif spec.kind == "sma":
                    L += _running_mean(k, v, f"bx{g}_{spec.x}", int(spec.n), "        ")
                else:
                    L += _ema(v, f"bx{g}_{spec.x}", int(spec.n), "        ")
            L.append(f"    bk{g} = k_")
            L.append(f"    bh{g} = l")
            L.append(f"    bw{g} = l")
            L.append("else:")
            L.append(f"    if l > bh{g}: bh{g} = l")
            L.append(f"    if l < bw{g}: bw{g} = l")
            L.append(f"bc{g} = l")
            for x in sorted({s.x for _, s in items if s.kind != "atr"}):
                L.append(f"bx{g}_{x} = {SERIES_SRC[x]}")
            for x in sorted({s.x for _, s in items if s.kind == "sma" and s.x in QUANT_SRC}):
                L.append(f"bq{g}_{x} = {self.qsrc(x)}")
        return L

    def bar_state(self) -> None:
        for g, (_tf, items) in enumerate(sorted(self.bars.items())):
            self.var(f"bk{g}", str(SENTINEL))
            for name in (f"bh{g}", f"bw{g}", f"bc{g}"):
                self.var(name, "nan")
            for x in sorted({s.x for _, s in items if s.kind != "atr"}):
                self.var(f"bx{g}_{x}", "nan")
            for x in sorted({s.x for _, s in items if s.kind == "sma" and s.x in QUANT_SRC}):
                self.var(f"bq{g}_{x}", "0")


@functools.lru_cache(maxsize=256)
def compile_plan(plan: ast.Plan, fed: bool = True) -> CompiledPlan:
    """Generate, exec and return the reference-path functions for `plan` (cached: the code
    depends on the plan only; the session's UTC offset and open come in as arguments).
    `fed`: time windows and `chg` come in as per-chunk columns (`feed`, `CompiledPlan.columns`)
    instead of being updated per tick; the values are the same."""
    twin = compile_plan(plan, fed=False) if fed else None
    g = _Gen(fed)
    conds: list[str] = []
    prices: list[str] = []
    gates: list[str] = []  # each rule's account conjuncts (pos, rpnl): "" when none
    rests: list[str] = []  # the rest of its top-level AND
    for rule in plan.rules:
        conds.append(g.expr(rule.cond))
        acct, rest = lean.split_account(rule.cond)
        gates.append(" and ".join(g.expr(o) for o in acct))
        rest.sort(key=_cost)
        rests.append("(" + " and ".join(g.expr(o) for o in rest) + ")" if rest else "True")
        ps = [
            g.expr(act.price) if isinstance(act, ast.Order) and act.price is not None else "None"
            for act in rule.actions
        ]
        prices.append("(" + "".join(p + ", " for p in ps) + ")")
    # base state (declared after walking so that only what is used exists)
    base_vars: list[tuple[str, str]] = [("t0", "-1"), ("op", "nan"), ("kop", "0")]
    if g.base & {"vol", "vwap"}:
        base_vars += [("cv", "0.0"), ("cpv", "0.0"), ("cl", "0.0"), ("cn", "0")]
    if g.windows:
        base_vars += [("pt", str(SENTINEL)), ("pv", "nan"), ("pend", "[]")]
    g.state = base_vars + g.state
    g.bar_state()
    cross_state, pre, post, cross_exprs = lean.crosses(g.crosses)
    g.state += cross_state
    names = [n for n, _ in g.state]
    upd = g.updates()
    n_rules = len(plan.rules)
    upd, texts, prices = lean.inline(g.defs, upd, conds + rests, prices, pre + post)
    texts = lean.substitute(cross_exprs, texts)
    conds, rests = texts[:n_rules], texts[n_rules:]
    # last, size and the quantized columns are zipped only when the loop body reads them
    text = "\n".join(upd + conds + prices + pre + post + gates)
    quant = tuple(q for q in QUANT_COLUMNS if re.search(rf"\b{q}\b", text))
    fed_cols = g.fed_columns()
    series = tuple(x for x in ("m", "sp") if g.fed and re.search(rf"\b{x}\b", text))
    feeds = Feeds(
        series=series,
        windows=tuple(Window(s.kind == "high", int(s.window_ns), names.index(f"dqt{v[1:]}"),
                             names.index(f"dqv{v[1:]}")) for v, s in fed_cols if s.kind in ("high", "low")),
        chgs=tuple(Chg(int(s.window_ns), names.index(f"dqt{v[1:]}"), names.index(f"dqv{v[1:]}"),
                       names.index(f"rf{v[1:]}")) for v, s in fed_cols if s.kind == "chg"),
        smas=tuple(Sma(int(s.n), QUANT_SRC[s.x], names.index(f"cs{v[1:]}"), names.index(f"dq{v[1:]}"))
                   for v, s in fed_cols if s.kind == "sma"),
        pt=names.index("pt") if g.windows else -1, pv=names.index("pv") if g.windows else -1,
        pend=names.index("pend") if g.windows else -1, t0=names.index("t0"))
    reads = tuple(v for v in ("l", "s") if re.search(rf"\b{v}\b", text))
    loop = ("for t, b, a" + "".join(", " + v for v in reads + quant + series + tuple(v for v, _ in fed_cols))
            + " in zip(tsl, bl, al"
            + "".join(", " + v + "l" for v in reads) + ", *Q_):")
    rvars = [f"r{j}" for j in range(n_rules)]

    def unpack(ind: str) -> list[str]:
        if not names:
            return []
        return [f"{ind}{', '.join(names)}, = S"]

    def pack(ind: str) -> list[str]:
        if not names:
            return []
        return [f"{ind}S[:] = [{', '.join(names)}]"]

    tl = [f"tl{k}" for k in range(len(g.tods))]
    head = [
        "    BASE_, OPEN_, U_, TL_ = K_",
        "    H_ = U_ / 2.0",
        *("    " + h for h in g.hoist),
        f"    {''.join(n + ', ' for n in tl)}= TL_" if tl else "    pass",
        *("    " + h for h in g.hoist_late),
        "    if tsl:",
        "        if t0 < 0: t0 = tsl[0]",
        "        if op != op:",
        "            op = float(ll[0])",
        "            kop = round(op * U_)",
    ]
    cross_lines = pre + post  # warmx: the crosses' previous values only
    src: list[str] = []
    for fname, extra in (("warm", []), ("warmx", cross_lines)):
        src += [f"def {fname}(tsl, bl, al, ll, sl, Q_, S, K_):", "    nan = NAN"]
        src += unpack("    ") + head
        src.append("    " + loop)
        src += ["        " + u for u in upd + extra] or ["        pass"]
        src += pack("    ")
        src.append("")

    reload_env = "lo_b, hi_b, lo_a, hi_a, t_next, i_next = E.env"
    if re.search(r"\bpos_\b", text):
        reload_env += "; pos_ = E.pos"
    if re.search(r"\brpnl_\b", text):
        reload_env += "; rpnl_ = E.rpnl"
    # after each broker event: the rule states, and per rule `a{j}` (armed and its account
    # gate holds: pos and rpnl change only here) and `w{j}` (waiting to re-arm)
    any_w = "anyw_ = " + " or ".join(f"w{j}" for j in range(n_rules))
    reload_r = "; ".join([", ".join(rvars) + ", = R"] + [
        f"a{j} = r{j} is armed_" + (f" and {gate}" if gate else "") + f"; w{j} = r{j} is waiting_"
        for j, gate in enumerate(gates)] + [any_w])
    src += ["def live(E, tsl, bl, al, ll, sl, Q_, g0, S, R, K_):", "    nan = NAN",
            "    step, fire, run_idle, rearm = E.step, E.fire, E.run_idle, E.rearm",
            "    armed_, waiting_ = ARMED, WAITING"]
    src += unpack("    ") + head
    dead = "if not (" + " or ".join(rvars) + "): break"
    src += ["    " + reload_env, "    " + reload_r, "    i = g0 - 1"]
    # once every rule is spent or disarmed, the indicators are never read again: the rest
    # of the batch runs the broker-only loop
    src.append("    if not (" + " or ".join(rvars) + "):")
    src.append("        run_idle(tsl, bl, al, ll, sl, g0, 0)")
    src.append("        return")
    src.append("    " + loop)
    body = [
        "i += 1",
        "if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or i >= i_next:",
        "    step(i, t, b, a)",
        "    " + reload_env,
        "    " + reload_r,
        "    " + dead,
    ]
    body += upd + pre
    for j, (rest_src, price) in enumerate(zip(rests, prices)):
        body += [  # armed (and its gate holds): fire when the rest holds
            f"if a{j}:",
            f"    if {rest_src}:",
            f"        fire({j}, i, t, b, a, {price})",
            "        " + reload_env,
            "        " + reload_r,
            "        if not (" + " or ".join(rvars) + "):",
            *("            " + x for x in post),
            "            break",
        ]
    # waiting rules re-arm on a false evaluation; after the armed ones, which is the same:
    # a fire places orders (no fill within the tick: pos and rpnl stay) and sets its own
    # rule's state, or disarms every rule (then no waiting rule is left to re-arm)
    body.append("if anyw_:")
    for j, (cond, gate) in enumerate(zip(conds, gates)):
        body += [
            f"    if w{j} and not {cond}:",
            f"        rearm({j})",
            f"        r{j} = armed_",
            f"        a{j} = {gate or 'True'}",
            f"        w{j} = False",
        ]
    body.append("    " + any_w)
    body += post
    src += ["        " + line for line in body]
    src.append("    else:")
    src += pack("        ")
    src.append("        return")
    src += pack("    ")
    src.append("    run_idle(tsl, bl, al, ll, sl, g0, i - g0 + 1)")
    src.append("")
    inits = ", ".join(init for _, init in g.state)
    src.append(f"def init_state():\n    nan = NAN\n    return [{inits}]\n")
    source = "\n".join(src)
    namespace: dict[str, Any] = {"NAN": NAN, "deque": deque, "safe_div": safe_div, "not_equal": not_equal,
                                 "math": math, "ARMED": RuleState.ARMED, "WAITING": RuleState.WAITING}
    exec(compile(source, "<kestrel plan>", "exec"), namespace)
    return CompiledPlan(
        plan=plan,
        source=source,
        size=sum(sum(1 for _ in ast.walk(r.cond)) + len(r.actions) for r in plan.rules),
        warm=namespace["warm"],
        warmx=namespace["warmx"],
        live=namespace["live"],
        init_state=namespace["init_state"],
        fast_blocker=fast_blocker(plan),
        tods=tuple(g.tods),
        quant=quant,
        reads=reads,
        feeds=feeds,
        twin=twin if feeds else None,
    )


def time_literals(compiled: CompiledPlan) -> tuple[ast.TimeOfDay, ...]:
    """The plan's times of day in the order of the generated `tl0, tl1, ...` (the engine
    turns them into the session's `time` values, see `plans.clock_seconds`)."""
    return compiled.tods

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

from kestrel.engine.broker import RuleState
from kestrel.engine.indicators import IndicatorSpec, PlanError, fast_blocker, resolve
from kestrel.frame.ticks import NS_PER_S
from kestrel.lang import ast

NAN = float("nan")
SENTINEL = -(2**62)

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


def _div(x: float, y: float) -> float:
    return x / y if y else NAN


def _ne(x: float, y: float) -> bool:
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


def quant_columns(names: tuple[str, ...], bid: Any, ask: Any, last: Any,
                  units: float) -> list[list[int]]:
    """The quantized columns `names` (of `QUANT_COLUMNS`) of a batch as lists of ints: whole
    half ticks, `round(x * U_)` with x = last, bid, ask, mid = (b + a) / 2 (as
    `(b + a) * (U_ / 2)`) or spread = a - b; `np.rint` rounds half to even like `round`,
    on the same doubles, so the values are the ones a per-tick `round` would give."""
    out: list[list[int]] = []
    for name in names:
        if name == "kl":
            x = last * units
        elif name == "kb":
            x = bid * units
        elif name == "ka":
            x = ask * units
        elif name == "km":
            x = (bid + ask) * (units / 2.0)
        else:
            x = (ask - bid) * units
        out.append(np.rint(x).astype(np.int64).tolist())
    return out


def _running_mean(k: str, v: str, x: str, n: int, ind: str, units: bool = False) -> list[str]:
    """Lines updating the mean of the last n values of x: (S_i - S_{i-n}) / n on the running
    sum S (`cs{k}`), with S_{i-n} kept in a bounded deque (`dq{k}`). With `units` x is a
    whole number of half ticks: S is an exact integer and the mean is divided by n x U_."""
    div = f"({float(n)!r} * U_)" if units else repr(float(n))
    return [
        f"{ind}cs{k} += {x}",
        f"{ind}dq{k}.append(cs{k})",
        f"{ind}{v} = (cs{k} - dq{k}[0]) / {div} if len(dq{k}) > {n} else nan",
    ]


def _ema(v: str, x: str, n: int, ind: str) -> list[str]:
    """The line updating the ema `v` of x: seeded with the first value, alpha = 2/(n+1)."""
    alpha = 2.0 / (n + 1)
    return [f"{ind}{v} = {x} if {v} != {v} else {v} + {alpha!r} * ({x} - {v})"]


class _Gen:
    def __init__(self) -> None:
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
        if spec.kind in ("high", "low"):
            self.var(f"dq{k}", "deque()")
            self.windows.append((v, spec))
        elif spec.kind == "chg":
            self.var(f"dq{k}", "deque()")
            self.chgs.append((v, spec))
        elif spec.tf_ns == 0:
            if spec.kind == "sma":
                zero = "0" if spec.x in QUANT_SRC else "0.0"
                self.var(f"cs{k}", zero)
                self.var(f"dq{k}", f"deque([{zero}], maxlen={int(spec.n) + 1})")
            self.ticks.append((v, spec))
        else:
            if spec.kind in ("sma", "atr"):
                zero = "0" if spec.kind == "sma" and spec.x in QUANT_SRC else "0.0"
                self.var(f"cs{k}", zero)
                self.var(f"dq{k}", f"deque([{zero}], maxlen={int(spec.n) + 1})")
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
            return f"_div({x}, {y})" if op == "/" else f"({x} {op} {y})"
        if isinstance(e, ast.Compare):
            x, y = self.expr(e.left), self.expr(e.right)
            op = _op(_CMP, e.op, "comparison")
            return f"_ne({x}, {y})" if op == "!=" else f"({x} {op} {y})"
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
            return "(" + " and ".join(self.expr(o) for o in e.operands) + ")"
        if isinstance(e, ast.Or):
            return "(" + " or ".join(self.expr(o) for o in e.operands) + ")"
        if isinstance(e, ast.Not):
            return f"(not {self.expr(e.operand)})"
        raise PlanError(f"{type(e).__name__} is not a value here")

    # ----------------------------------------------------------------------------------
    def updates(self) -> list[str]:
        """Per-tick indicator update lines (indented for the loop body)."""
        L: list[str] = []
        if self.base & {"mid", "qmid"}:
            self.quant.add("km")
            L.append("m = km / U_")
        if self.base & {"spread", "qspread"}:
            self.quant.add("ksp")
            L.append("sp = ksp / U_")
        if "time" in self.base:
            L.append(f"tod = (t - BASE_) // {NS_PER_S}")
        if self.base & {"vol", "vwap"}:
            L.append("cv += s")
            if "vwap" in self.base:
                L += ["cpv += l * s", "cl += l", "cn += 1", "vw = cpv / cv if cv > 0.0 else cl / cn"]
        if self.windows:
            L.append("if t != pt:")
            L.append("    for x_ in pend:")
            for v, spec in self.windows:
                k = v[1:]
                op = "<=" if spec.kind == "high" else ">="
                L.append(f"        while dq{k} and dq{k}[-1][1] {op} x_: dq{k}.pop()")
                L.append(f"        dq{k}.append((pt, x_))")
            L.append("    pend.clear()")
            L.append("    pt = t")
            for v, spec in self.windows:
                k = v[1:]
                L.append(f"lo_ = t - {int(spec.window_ns)}")
                L.append(f"while dq{k} and dq{k}[0][0] < lo_: dq{k}.popleft()")
                L.append(f"{v} = dq{k}[0][1] if dq{k} and lo_ >= t0 else nan")
            L.append("pend.append(l)")
        for v, spec in self.chgs:
            k = v[1:]
            L.append(f"lo_ = t - {int(spec.window_ns)}")
            L.append(f"while len(dq{k}) > 1 and dq{k}[1][0] <= lo_: dq{k}.popleft()")
            L.append(f"ref_ = dq{k}[0][1] if dq{k} and dq{k}[0][0] <= lo_ else nan")
            L.append(f"{v} = 100.0 * (l / ref_ - 1.0) if ref_ else nan")
            L.append(f"dq{k}.append((t, l))")
        for v, spec in self.ticks:
            k = v[1:]
            x = SERIES_SRC[spec.x]
            if spec.kind == "sma" and spec.x in QUANT_SRC:
                L += _running_mean(k, v, self.qsrc(spec.x), int(spec.n), "", units=True)
            elif spec.kind == "sma":
                L += _running_mean(k, v, x, int(spec.n), "")
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
                    L += _running_mean(k, v, f"bq{g}_{spec.x}", int(spec.n), "        ", units=True)
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
def compile_plan(plan: ast.Plan) -> CompiledPlan:
    """Generate, exec and return the reference-path functions for `plan` (cached: the code
    depends on the plan only; the session's UTC offset and open come in as arguments)."""
    g = _Gen()
    conds: list[str] = []
    prices: list[str] = []
    for rule in plan.rules:
        conds.append(g.expr(rule.cond))
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
        base_vars += [("pt", str(SENTINEL)), ("pend", "[]")]
    g.state = base_vars + g.state
    g.bar_state()
    for name, _x, _y, _d in g.crosses:
        g.var(f"p{name}l", "nan")
        g.var(f"p{name}r", "nan")
    names = [n for n, _ in g.state]
    upd = g.updates()
    quant = tuple(q for q in QUANT_COLUMNS if q in g.quant)
    # last and size are zipped only when the loop body reads them (`l`, `s`)
    text = "\n".join(upd + conds + prices + [x + " " + y for _, x, y, _ in g.crosses])
    reads = tuple(v for v in ("l", "s") if re.search(rf"\b{v}\b", text))
    loop = ("for t, b, a" + "".join(", " + v for v in reads + quant) + " in zip(tsl, bl, al"
            + "".join(", " + v + "l" for v in reads) + ", *Q_):")
    n_rules = len(plan.rules)
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
        f"    {''.join(n + ', ' for n in tl)}= TL_" if tl else "    pass",
        "    if tsl:",
        "        if t0 < 0: t0 = tsl[0]",
        "        if op != op:",
        "            op = float(ll[0])",
        "            kop = round(op * U_)",
    ]
    cross_lines: list[str] = []
    for name, x, y, d in g.crosses:
        cross_lines.append(f"cl_ = {x}")
        cross_lines.append(f"cr_ = {y}")
        if d == "above":
            cross_lines.append(f"{name} = p{name}l <= p{name}r and cl_ > cr_")
        else:
            cross_lines.append(f"{name} = p{name}l >= p{name}r and cl_ < cr_")
        cross_lines.append(f"p{name}l = cl_")
        cross_lines.append(f"p{name}r = cr_")
    src: list[str] = []
    for fname, extra in (("warm", []), ("warmx", cross_lines)):
        src += [f"def {fname}(tsl, bl, al, ll, sl, Q_, S, K_):", "    nan = _NAN"]
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
    reload_r = (", ".join(rvars) + ", = R") if rvars else "pass"
    src += ["def live(E, tsl, bl, al, ll, sl, Q_, g0, S, R, K_):", "    nan = _NAN",
            "    step, fire, run_idle = E.step, E.fire, E.run_idle",
            "    armed_ = _ARMED"]
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
    body += upd + cross_lines
    for j, (cond, price) in enumerate(zip(conds, prices)):
        body += [
            f"if r{j}:",
            f"    c_ = {cond}",
            f"    if r{j} is armed_:",
            "        if c_:",
            f"            fire({j}, i, t, b, a, {price})",
            "            " + reload_env,
            "            " + reload_r,
            "            " + dead,
            "    elif not c_:",
            f"        r{j} = R[{j}] = armed_",
        ]
    src += ["        " + line for line in body]
    src.append("    else:")
    src += pack("        ")
    src.append("        return")
    src += pack("    ")
    src.append("    run_idle(tsl, bl, al, ll, sl, g0, i - g0 + 1)")
    src.append("")
    inits = ", ".join(init for _, init in g.state)
    src.append(f"def init_state():\n    nan = _NAN\n    return [{inits}]\n")
    source = "\n".join(src)
    namespace: dict[str, Any] = {"_NAN": NAN, "deque": deque, "_div": _div, "_ne": _ne, "math": math,
                                 "_ARMED": RuleState.ARMED}
    exec(compile(source, "<kestrel plan>", "exec"), namespace)
    return CompiledPlan(
        plan=plan,
        source=source,
        warm=namespace["warm"],
        warmx=namespace["warmx"],
        live=namespace["live"],
        init_state=namespace["init_state"],
        fast_blocker=fast_blocker(plan),
        tods=tuple(g.tods),
        quant=quant,
        reads=reads,
    )


def time_literals(compiled: CompiledPlan) -> tuple[ast.TimeOfDay, ...]:
    """The plan's times of day in the order of the generated `tl0, tl1, ...` (the engine
    turns them into the session's `time` values, see `plans.clock_seconds`)."""
    return compiled.tods

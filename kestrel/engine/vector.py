"""Whole-array evaluation of a plan's expressions for the fast path.

Each function computes, over a session's ticks (index 0 = the session's first tick seen),
exactly the values the generated reference code computes tick by tick: the same
floating-point operations in the same order (running sums via `np.cumsum`, which
accumulates sequentially; windowed max/min are exact; ema and bar recurrences use the same
scalar Python loop). Undefined values are NaN; comparisons follow Python's NaN rules.
Quantized series (mid, spread and the sma inputs) are whole numbers of half ticks as the
generated code computes them (`np.rint` rounds half to even like `round`), and their sums
are exact int64 cumulative sums.
Compiled (mypyc), the ema, the chg and the windows' searches of `t - d` run as the one-pass
kernels of `kestrel.engine.feed` (C doubles and int64s in librt vecs); interpreted, the
numpy formulas run: the same values (tests/test_engine_kernels.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.engine import feed
from kestrel.engine.indicators import IndicatorSpec, PlanError, resolve
from kestrel.engine.plans import clock_base_ns, clock_seconds
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.lang import ast

F64 = npt.NDArray[np.float64]
Arr = npt.NDArray[Any]
NAN = float("nan")
QUANTIZED = frozenset({"last", "bid", "ask", "mid", "spread", "open"})
_NO_TICKS = np.zeros(0, dtype=np.int64)


def compare(op: str, x: Any, y: Any) -> Any:
    """The language's `x op y` on floats or, elementwise, on arrays (the reference's
    operations): IEEE order for `<`, `<=`, `>`, `>=`, `==`; `!=` is false when either side is
    NaN (a value not yet defined), where IEEE would say true."""
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    if op == "==":
        return x == y
    return (x == x) & (y == y) & (x != y)


def _doubled(table: F64, level: int, to: int, bufs: list[F64], red: Any) -> tuple[F64, int]:
    """The sparse table of `level` raised to level `to`: each step the `red` (max or min) of
    the table and itself shifted by 2**level, into the scratch buffer of that level's parity."""
    while level < to:
        w = 1 << level
        nxt = bufs[level & 1][:table.shape[0] - w]
        red(table[:-w], table[w:], out=nxt)
        table = nxt
        level += 1
    return table, level


class Columns:
    """Lazily computed arrays for one session's ticks; `arm` is the index where the plan was
    armed (crosses start fresh there)."""

    def __init__(self, ticks: Ticks, session: SessionSpec, arm: int, units: float) -> None:
        self.ticks = ticks
        self.session = session
        self.arm = arm
        self.units = units
        self.n = len(ticks)
        self._cache: dict[object, Arr] = {}
        self._cross: dict[ast.Crosses, Arr] = {}
        self._spans_cache: dict[object, list[tuple[int, int, Arr, Arr, Arr]]] = {}
        self.account: dict[str, float] = {}
        self._bufs: list[F64] = []  # `_scratch`

    def nbytes(self) -> int:
        """Memory held by the computed columns."""
        return (sum(a.nbytes for a in self._cache.values()) + sum(b.nbytes for b in self._bufs)
                + sum(a.nbytes for a in self._cross.values())
                + sum(a.nbytes for qs in self._spans_cache.values() for q in qs for a in q[2:]))

    # series ------------------------------------------------------------------------
    def series(self, name: str) -> Arr:
        key = ("series", name)
        if key in self._cache:
            return self._cache[key]
        t = self.ticks
        out: Arr
        if name == "last":
            out = t.last
        elif name == "bid":
            out = t.bid
        elif name == "ask":
            out = t.ask
        elif name in ("mid", "spread"):
            out = self.quantized(name) / self.units
        elif name == "size":
            out = t.size
        elif name == "vol":
            out = np.cumsum(t.size)
        elif name == "vwap":
            cv = self.series("vol")
            cpv = np.cumsum(t.last * t.size)
            cl = np.cumsum(t.last)
            cn = np.arange(1, self.n + 1, dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.where(cv > 0.0, cpv / cv, cl / cn)
        elif name == "open":
            out = np.full(self.n, t.last[0] if self.n else NAN)
        elif name == "time":
            out = (t.ts - clock_base_ns(self.session)) // NS_PER_S
        else:
            raise PlanError(f"series {name!r} is not available on the fast path")
        self._cache[key] = out
        return out

    def quantized(self, name: str) -> Arr:
        """A quantized price series in whole half ticks (int64), as the generated code's
        `round(x * U_)`, `km` (mid) and `ksp` (spread)."""
        key = ("q", name)
        if key in self._cache:
            return self._cache[key]
        t, u = self.ticks, self.units
        # the same operations as `np.rint((b + a) * (u / 2.0))`, in place on one temporary
        if name == "mid":
            out = t.bid + t.ask
            out *= u / 2.0
        elif name == "spread":
            out = t.ask - t.bid
            out *= u
        elif name == "open":
            out = np.full(self.n, t.last[0] * u if self.n else 0.0)
        else:
            out = self.series(name) * u
        np.rint(out, out=out)
        q: Arr = out.astype(np.int64)
        self._cache[key] = q
        return q

    # indicators --------------------------------------------------------------------
    def indicator(self, spec: IndicatorSpec) -> F64:
        if spec in self._cache:
            return self._cache[spec]
        if spec.kind in ("high", "low"):
            out = self._window(spec)
        elif spec.kind == "chg":
            out = self._chg(spec)
        elif spec.tf_ns == 0 and spec.kind == "sma" and spec.x in QUANTIZED:
            out = self._sma_units(self.quantized(spec.x), spec.n, self.units,
                                  self._qsums(spec.x))
        elif spec.tf_ns == 0:
            out = self._sma(self.series(spec.x), spec.n) if spec.kind == "sma" else self._ema(
                self.series(spec.x), spec.n)
        else:
            out = self._bars(spec)
        self._cache[spec] = out
        return out

    def _before(self) -> Arr:
        """For each tick, the index of the first tick sharing its timestamp (the end of
        its `[t-d, t)` window); `arange` when timestamps are strictly increasing."""
        key = "before"
        if key not in self._cache:
            ts = self.ticks.ts
            if self.n < 2 or bool(np.all(ts[1:] > ts[:-1])):
                self._cache[key] = np.arange(self.n)
            else:
                self._cache[key] = np.searchsorted(ts, ts, side="left")
        return self._cache[key]

    def _spans(self, window_ns: int) -> tuple[Arr, Arr, Arr, Arr]:
        """Per tick, the window `[t-d, t)` as index bounds [lo, hi), whether it is defined
        and floor(log2) of its length (any value where it is not defined)."""
        ts = self.ticks.ts
        lo = feed.search(ts, ts, window_ns, False)
        hi = self._before()
        length = hi - lo
        valid = (length > 0) & (ts - window_ns >= ts[0])
        lv = np.frexp(length.astype(np.float64))[1].astype(np.int64) - 1  # floor(log2), exact
        return lo, hi, valid, lv

    def _queries(self, window_ns: int) -> list[tuple[int, int, Arr, Arr, Arr]]:
        """The sparse-table queries of the windows `[t-d, t)`, per level queried (regular
        ticks: one or two): the level, the first tick of a run of ticks querying it to the
        end (-1: the ticks are `sel`), the ticks and the two table indices each reads.
        Shared by the `high` and `low` of one length."""
        key = ("queries", window_ns)
        hit = self._spans_cache.get(key)
        if hit is None:
            hit = self._run_query(window_ns)
        if hit is None:
            lo, hi, valid, lv = self._spans(window_ns)
            hit = []
            if valid.any():
                used = np.flatnonzero(np.bincount(lv[valid])).tolist()
                for level in used:
                    sel = (np.flatnonzero(valid & (lv == level)) if len(used) > 1
                           else np.flatnonzero(valid))
                    hit.append((level, -1, sel, lo[sel], hi[sel] - (1 << level)))
        self._spans_cache[key] = hit
        return hit

    def _run_query(self, window_ns: int) -> list[tuple[int, int, Arr, Arr, Arr]] | None:
        """The usual case of `_queries` without per-tick masks: the windows are defined
        from the first tick `s` with `t - d >= ts[0]` to the end, their lengths all of one
        level. None otherwise."""
        ts, n = self.ticks.ts, self.n
        if n == 0:
            return []
        s = int(np.searchsorted(ts, int(ts[0]) + window_ns, side="left"))
        if s >= n:
            return []
        lo = feed.search(ts, ts, window_ns, False)[s:]
        hi = self._before()[s:]
        length = hi - lo
        short = int(length.min())
        if short <= 0 or short.bit_length() != int(length.max()).bit_length():
            return None
        level = short.bit_length() - 1
        return [(level, s, _NO_TICKS, lo, hi - (1 << level))]

    def _window(self, spec: IndicatorSpec) -> F64:
        x, n = self.ticks.last, self.n
        if n == 0:
            return np.full(n, NAN)
        queries = self._queries(spec.window_ns)
        if not queries:
            return np.full(n, NAN)
        red = np.maximum if spec.kind == "high" else np.minimum
        table = x
        level = 0
        # the tables of two levels take turns in two scratch buffers (shared by the windows)
        bufs = self._scratch()
        if len(queries) == 1 and queries[0][1] >= 0:  # one run of queries: no temporary
            q_level, start, _, a, b = queries[0]
            table, level = _doubled(table, level, q_level, bufs, red)
            out = np.empty(n)
            out[:start] = NAN
            rest = out[start:]
            # (indices in range: `clip` only spares `take` a buffered copy)
            first = np.take(table, a, out=bufs[level & 1][:a.shape[0]], mode="clip")
            np.take(table, b, out=rest, mode="clip")
            red(first, rest, out=rest)
            return out
        out = np.full(n, NAN)
        for q_level, start, sel, a, b in queries:
            table, level = _doubled(table, level, q_level, bufs, red)
            if start >= 0:
                out[start:] = red(table.take(a), table.take(b))
            else:
                out[sel] = red(table[a], table[b])
        return out

    def _scratch(self) -> list[F64]:
        """Two float64 buffers of the session's length, for temporaries."""
        if not self._bufs:
            self._bufs = [np.empty(self.n), np.empty(self.n)]
        return self._bufs

    def _chg(self, spec: IndicatorSpec) -> F64:
        if feed.NATIVE:
            ts, last = self.ticks.ts, self.ticks.last
            return feed.floats(feed.chg_kernel(ts, last, ts, last, spec.window_ns))
        ts, last = self.ticks.ts, self.ticks.last
        j = np.searchsorted(ts, ts - spec.window_ns, side="right") - 1
        ref = np.where(j >= 0, last[np.maximum(j, 0)], NAN)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = 100.0 * (last / ref - 1.0)
        out[ref == 0.0] = NAN
        return out

    @staticmethod
    def _sma(x: Arr, n: int) -> F64:
        cs = np.concatenate(([0.0], np.cumsum(x)))
        out = np.full(x.shape[0], NAN)
        if x.shape[0] >= n:
            out[n - 1:] = (cs[n:] - cs[:-n]) / float(n)
        return out

    def _qsums(self, name: str) -> Arr:
        """The running sums of a quantized series, 0 first (shared by its smas)."""
        key = ("qsums", name)
        if key not in self._cache:
            k = self.quantized(name)
            cs = np.empty(k.shape[0] + 1, dtype=np.int64)
            cs[0] = 0
            np.cumsum(k, out=cs[1:])
            self._cache[key] = cs
        return self._cache[key]

    @staticmethod
    def _sma_units(k: Arr, n: int, units: float, cs: Arr | None = None) -> F64:
        """The mean of the last n whole-half-tick values: exact int64 sums / (n x units)
        (`cs`: the running sums of k, 0 first, when known)."""
        if cs is None:
            cs = np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(k)))
        out = np.empty(k.shape[0])
        out[:n - 1] = NAN
        if k.shape[0] >= n:  # int64 to double then the division, as `astype` then `/`
            np.divide(cs[n:] - cs[:-n], float(n) * units, out=out[n - 1:])
        return out

    @staticmethod
    def _mean_list(xs: list[float], n: int) -> list[float]:
        """Mean of the last n values at each value, (S_i - S_{i-n}) / n on the running sum S
        (the generated code's `_running_mean`); NaN until n values are in."""
        acc = 0.0
        hist = [0.0]
        out: list[float] = []
        for x in xs:
            acc += x
            hist.append(acc)
            out.append((acc - hist[-1 - n]) / float(n) if len(hist) > n else NAN)
        return out

    @staticmethod
    def _mean_units_list(ks: list[int], n: int, units: float) -> list[float]:
        """`_mean_list` on whole half ticks: exact integer sums / (n x units)."""
        acc = 0
        hist = [0]
        out: list[float] = []
        div = float(n) * units
        for k in ks:
            acc += k
            hist.append(acc)
            out.append((acc - hist[-1 - n]) / div if len(hist) > n else NAN)
        return out

    @staticmethod
    def _ema_list(xs: list[float], n: int) -> list[float]:
        alpha = 2.0 / (n + 1)
        out: list[float] = []
        v = NAN
        for x in xs:
            v = x if v != v else v + alpha * (x - v)
            out.append(v)
        return out

    def _ema(self, x: Arr, n: int) -> F64:
        if feed.NATIVE and x.dtype == np.float64:
            return feed.floats(feed.ema_kernel(x, 2.0 / (n + 1)))
        if x.shape[0] and bool(np.isfinite(x).all()):
            # finite values: v is never NaN past the seed (barring an overflow, checked), so
            # the recurrence runs without the reseed test: the same operations in the same order
            it = iter(x.tolist())
            alpha = 2.0 / (n + 1)
            seed = v = next(it)
            vals = [v := v + alpha * (x_ - v) for x_ in it]
            vals.insert(0, seed)
            out = np.fromiter(vals, dtype=np.float64, count=len(vals))
            if bool(np.isfinite(out[-1])):  # a NaN or an overflow stays to the end
                return out
        return np.asarray(self._ema_list(x.tolist(), n), dtype=np.float64)

    def _bars(self, spec: IndicatorSpec) -> F64:
        ts, last, n = self.ticks.ts, self.ticks.last, self.n
        out = np.full(n, NAN)
        if n == 0:
            return out
        kid = (ts - self.session.open_ns) // spec.tf_ns
        starts = np.concatenate(([0], np.flatnonzero(kid[1:] != kid[:-1]) + 1))
        ends = np.concatenate((starts[1:], [n]))
        marks = np.zeros(n, dtype=np.int64)
        marks[starts] = 1
        pos = np.cumsum(marks) - 1  # bar ordinal of each tick
        # completed bars: all but the last (a bar completes when a later bar starts)
        done = len(starts) - 1
        if spec.kind == "atr":
            hs = np.maximum.reduceat(last, starts).tolist()[:done]
            ls = np.minimum.reduceat(last, starts).tolist()[:done]
            cs_ = last[ends - 1].tolist()[:done]
            trs: list[float] = []
            pc = NAN
            for bh, bw, c in zip(hs, ls, cs_):
                trs.append(bh - bw if pc != pc else max(bh, pc) - min(bw, pc))
                pc = c
            vals = self._mean_list(trs, spec.n)
        elif spec.kind == "sma" and spec.x in QUANTIZED:
            kc = self.quantized(spec.x)[ends - 1].tolist()[:done]
            vals = self._mean_units_list(kc, spec.n, self.units)
        else:
            closes = self.series(spec.x)[ends - 1].tolist()[:done]
            vals = (self._mean_list if spec.kind == "sma" else self._ema_list)(closes, spec.n)
        barv = np.asarray([NAN] + vals, dtype=np.float64)  # index = completed bars count
        out[:] = barv[pos]
        return out

    # expressions -------------------------------------------------------------------
    def expr(self, e: ast.Expr, lo: int = 0) -> Arr:
        """The value of `e` at ticks [lo, n). `pos` and `rpnl` read `self.account` (the
        account state is constant between broker events; the caller re-evaluates after
        each fill)."""
        n = self.n - lo
        if isinstance(e, ast.Number | ast.Percent):
            return np.full(n, float(e.value))
        if isinstance(e, ast.TimeOfDay):
            return np.full(n, clock_seconds(self.session, e), dtype=np.int64)
        if isinstance(e, ast.Series):
            if e.name in self.account:
                return np.full(n, self.account[e.name])
            return self.series(e.name)[lo:]
        if isinstance(e, ast.Call):
            specs = resolve(e)
            vs = [self.indicator(s)[lo:] for s in specs]
            return vs[0] - vs[1] if e.name == "range" else vs[0]
        if isinstance(e, ast.Neg):
            return -self.expr(e.operand, lo)
        if isinstance(e, ast.Arith):
            x, y = self.expr(e.left, lo), self.expr(e.right, lo)
            if e.op == "+":
                return x + y
            if e.op == "-":
                return x - y
            if e.op == "*":
                return x * y
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(y != 0, x / np.where(y != 0, y, 1.0), NAN)
        if isinstance(e, ast.Compare):
            # a constant side as a scalar (numpy compares it as the array of it; no array)
            x, y = self._operand(e.left, lo), self._operand(e.right, lo)
            if not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
                x, y = self.expr(e.left, lo), self.expr(e.right, lo)
            out = compare(e.op, x, y)
            return np.asarray(out) if e.op in ("==", "!=") else out
        if isinstance(e, ast.Crosses):
            if e not in self._cross:
                x, y = self.expr(e.left), self.expr(e.right)
                out = np.zeros(self.n, dtype=bool)
                a = self.arm
                if self.n - a > 1:
                    px, py = x[a:-1], y[a:-1]
                    cx, cy = x[a + 1:], y[a + 1:]
                    if e.direction == "above":
                        out[a + 1:] = (px <= py) & (cx > cy)
                    else:
                        out[a + 1:] = (px >= py) & (cx < cy)
                self._cross[e] = out
            return self._cross[e][lo:]
        if isinstance(e, ast.And):
            acc = self.truth(e.operands[0], lo)
            for o in e.operands[1:]:
                acc = acc & self.truth(o, lo)
            return acc
        if isinstance(e, ast.Or):
            acc = self.truth(e.operands[0], lo)
            for o in e.operands[1:]:
                acc = acc | self.truth(o, lo)
            return acc
        if isinstance(e, ast.Not):
            return ~self.truth(e.operand, lo)
        raise PlanError(f"{type(e).__name__} is not a value here")

    def _operand(self, e: ast.Expr, lo: int) -> Any:
        """A comparison's side: a constant as a Python float (int for a time of day), the
        value `np.full` would fill `expr`'s array with; else `expr`."""
        if isinstance(e, ast.Number | ast.Percent):
            return float(e.value)
        if isinstance(e, ast.TimeOfDay):
            return clock_seconds(self.session, e)
        return self.expr(e, lo)

    def truth(self, e: ast.Expr, lo: int = 0) -> npt.NDArray[np.bool_]:
        """Python truthiness of an expression's value, elementwise."""
        v = self.expr(e, lo)
        if v.dtype == np.bool_:
            return v
        return np.asarray(v != 0)  # NaN is truthy in Python, and NaN != 0 is True


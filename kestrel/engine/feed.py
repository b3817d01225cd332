"""Indicator columns for the reference loop, computed per chunk with numpy (`codegen`).

The generated loop can update a time window (`high`, `low`), a `chg`, the tick `sma` of a
quantized series and the `mid`/`spread` series on every tick (the per-tick code,
`compile_plan(plan, fed=False)`), or read their values from columns this module computes
for the whole chunk before the loop runs (`fed=True`, the engine's default for chunks of
`codegen.FEED_MIN` ticks or more). Both keep the SAME state between chunks (the per-tick
code's variables in `S`), and the columns are the values the per-tick code computes, bit
for bit. Columns are memoryviews of the numpy results: iterating one yields the same
Python ints and floats as `tolist`, without building a list.

- a window's value at tick i is the max (min) of `last` over ticks with ts in
  `[t_i - d, t_i)`, defined once that holds a tick and `t_i - d >=` the session's first ts.
  The carried state is the per-tick code's monotonic deque (values strictly decreasing for
  `high`) plus the pending ticks of the last timestamp (`pt`, `pend`, `pv`); for any
  window start, the max over the deque's entries from it on equals the max over the
  history's ticks from it on, so the chunk's values are range maxima over
  deque + pending + chunk (a sparse table; max is exact). The state after the chunk is
  what the per-tick pushes leave: the entries strictly greater (smaller) than every later
  one, not expired at the chunk's last tick, the last timestamp's ticks pending.
  A NaN or a zero in the values (where the per-tick comparisons and `np.maximum` disagree:
  a NaN blocks pops, and ±0 compare equal) falls back to replaying the per-tick algorithm.
- `chg(d)` at tick i is `100·(last_i/ref - 1)`, ref the `last` of the latest tick with
  `ts <= t_i - d` (`rf`, the deque holding the later ticks): a search, then the same three
  float operations as the per-tick code, elementwise.
- a tick `sma(x, n)` is `(S_i - S_{i-n}) / (n x U_)` on the running sum of whole half
  ticks: an int64 cumsum continuing the carried sum and deque (exactly the Python ints
  while every sum is below 2**53, so also exactly a double; Python ints above).
- `mid`/`spread` are `k / U_` of their quantized column (int64 to double is exact below
  2**53, then one division, as the per-tick `km / U_`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kestrel.engine.native import compiled

try:  # mypy's runtime library: vecs, arrays of C doubles and int64s
    from mypy_extensions import i64
    from librt.vecs import extend, vec
    _LIBRT = True
except ImportError:  # pragma: no cover - installed with mypy, which the compiled build needs
    _LIBRT = False

SENTINEL = -(2**62)
NAN = float("nan")
# the column kernels below run compiled (C doubles and int64s, no Python object per value);
# interpreted, each value would cost a call: the numpy formulas run instead (same values)
NATIVE = _LIBRT and compiled()
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
# a column the loop zips: a list, or a memoryview of a numpy array (iterating one yields
# the same Python ints and floats as `tolist`, without building the list)
Column = Sequence[float] | memoryview


@dataclass(frozen=True)
class Window:
    """A fed `high`/`low` window: its length and its deques' places in `S`."""

    high: bool
    d: int
    dqt: int
    dqv: int


@dataclass(frozen=True)
class Chg:
    """A fed `chg`: its length and its state's places in `S` (deques, reference)."""

    d: int
    dqt: int
    dqv: int
    rf: int


@dataclass(frozen=True)
class Sma:
    """A fed tick `sma` of a quantized series (`src`, a `codegen.QUANT_COLUMNS` name): its
    length and its running sum's and deque's places in `S`."""

    n: int
    src: str
    cs: int
    dq: int


def quant_array(name: str, bid: F64, ask: F64, last: F64, units: float) -> I64:
    """A quantized column (`codegen.QUANT_COLUMNS`): whole half ticks, `round(x * U_)` with
    x = last, bid, ask, mid = (b + a) / 2 (as `(b + a) * (U_ / 2)`) or spread = a - b;
    `np.rint` rounds half to even like `round`, on the same doubles."""
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
    return np.rint(x).astype(np.int64)


# the fed series (`m`, `sp`) and the quantized column each is `k / U_` of
SERIES_SRC = {"m": "km", "sp": "ksp"}


@dataclass(frozen=True)
class Feeds:
    """The fed values of a compiled plan, in the order of their columns: the series `mid`
    and `spread` (`m`, `sp`), time windows, chgs, tick smas of quantized series; `pt`, `pv`,
    `pend` and `t0` are the places of the shared window state and the session's first ts."""

    series: tuple[str, ...] = ()
    windows: tuple[Window, ...] = ()
    chgs: tuple[Chg, ...] = ()
    smas: tuple[Sma, ...] = ()
    pt: int = -1
    pv: int = -1
    pend: int = -1
    t0: int = -1

    def sources(self) -> set[str]:
        """The quantized columns the fed values are computed from."""
        return {SERIES_SRC[x] for x in self.series} | {s.src for s in self.smas}

    def __bool__(self) -> bool:
        return bool(self.series or self.windows or self.chgs or self.smas)

    def columns(self, ts: I64, last: F64, S: list[Any], units: float,
                quant: dict[str, I64]) -> list[Column]:
        """The chunk's columns, advancing their state in `S` (`quant`: the `sources`)."""
        out: list[Column] = [(quant[SERIES_SRC[x]] / units).data for x in self.series]
        if len(ts) == 0:
            return out + [[] for _ in range(len(self.windows) + len(self.chgs) + len(self.smas))]
        if self.windows:
            if S[self.t0] < 0:  # the session's first tick (as the loops' head sets it)
                S[self.t0] = int(ts[0])
            t0 = S[self.t0]
            out += _windows(self, ts, last, t0, S)
        for c in self.chgs:
            out.append(_chg(c, ts, last, S))
        for m in self.smas:
            out.append(_sma(m, quant[m.src], S, units))
        return out


_POW2 = 1 << np.arange(63, dtype=np.int64)


Groups = list[tuple[int, "npt.NDArray[np.intp]"]]


def _levels(lo: I64, hi: I64) -> Groups:
    """The ranges [lo, hi) grouped by floor(log2(length)) (empty ranges left out), in
    increasing level: computed once for every window of one length."""
    length = hi - lo
    longest = int(length.max()) if len(length) else 0
    if longest <= 0:
        return []
    top = longest.bit_length() - 1  # the top level: floor(log2(length)), exactly
    main = np.flatnonzero(length >= (1 << top))  # most ranges
    rest = np.flatnonzero((length > 0) & (length < (1 << top)))  # the window filling up
    if not rest.size:
        return [(top, main)]
    lv = np.searchsorted(_POW2, length[rest], side="right") - 1
    return [(k, rest[lv == k]) for k in np.unique(lv).tolist()] + [(top, main)]


def _range_red(x: F64, lo: I64, hi: I64, groups: Groups, high: bool) -> F64:
    """max (min) of x[lo:hi] for the ranges of `groups` (`_levels`), NaN elsewhere: a range
    of length L with 2^k <= L < 2^(k+1) is the max of its first and its last 2^k values
    (max is exact, so the overlap changes nothing); the 2^k-maxima table by doubling."""
    out = np.full(len(lo), NAN)
    red = np.maximum if high else np.minimum
    table, level = x, 0
    bufs: list[F64] = []  # the tables of two levels take turns in two buffers
    for k, sel in groups:
        while level < k:
            w = 1 << level
            if not bufs:
                bufs = [np.empty(len(x)), np.empty(len(x))]
            nxt = bufs[level & 1][:len(table) - w]
            red(table[:-w], table[w:], out=nxt)
            table = nxt
            level += 1
        a, b = int(sel[0]), int(sel[-1]) + 1
        if b - a == sel.size:  # one run of ticks (the usual case): slices, no scatter
            dst = out[a:b]  # (indices in range: `clip` only spares `take` a buffered copy)
            np.take(table, hi[a:b] - (1 << k), out=dst, mode="clip")
            red(table.take(lo[a:b]), dst, out=dst)
        else:
            out[sel] = red(table.take(lo[sel]), table.take(hi[sel] - (1 << k)))
    return out


def _survivors(x: F64, high: bool) -> npt.NDArray[np.bool_]:
    """Which values a monotonic deque keeps after pushing all of x in order: those strictly
    greater (smaller) than every later value."""
    if len(x) == 0:
        return np.zeros(0, dtype=bool)
    acc = np.maximum.accumulate if high else np.minimum.accumulate
    after = np.empty(len(x))
    after[-1] = -np.inf if high else np.inf
    after[:-1] = acc(x[::-1])[::-1][1:]
    return np.asarray(x > after if high else x < after)


def _windows(f: Feeds, ts: I64, last: F64, t0: int, S: list[Any]) -> list[Column]:
    pt, pv, pend = S[f.pt], S[f.pv], S[f.pend]
    gx: list[float] = [*pend, pv] if pt != SENTINEL else []
    g = len(gx)
    deques = [(np.asarray(S[w.dqt], dtype=np.int64), np.asarray(S[w.dqv], dtype=np.float64))
              for w in f.windows]
    gv = np.asarray(gx, dtype=np.float64)
    if any(bool(np.isnan(v).any()) or bool((v == 0.0).any())
           for v in [gv, last] + [v for _, v in deques]):
        return _windows_per_tick(f, ts.tolist(), last.tolist(), t0, S)
    # the pending group then the chunk (b*), shared by the windows; each window's deque
    # (all before the group) adds its first entry inside the window: its max (min)
    bts = np.concatenate([np.full(g, pt, dtype=np.int64), ts])
    bx = np.concatenate([gv, last])
    n, T = len(ts), int(ts[-1])
    if (g == 0 or pt < ts[0]) and (n == 1 or bool(np.all(ts[1:] > ts[:-1]))):
        hi = np.arange(g, g + n, dtype=np.int64)
    else:
        hi = np.searchsorted(bts, ts, side="left")
    los: dict[int, tuple[I64, Groups]] = {}
    first = int(np.searchsorted(ts, T, side="left"))
    out: list[Column] = []
    for w, (dts, dv) in zip(f.windows, deques):
        if w.d not in los:  # windows of one length share their ranges
            lo_d = search(bts, ts, w.d, False)
            los[w.d] = lo_d, _levels(lo_d, hi)
        lo, groups = los[w.d]
        col = _range_red(bx, lo, hi, groups, w.high)
        j = search(dts, ts, w.d, False)
        p = int(np.searchsorted(j, len(dts), side="left"))  # j < len(dts): a prefix
        if p:
            red = np.fmax if w.high else np.fmin  # NaN (empty range) takes the other
            col[:p] = red(dv[j[:p]], col[:p])
        col[:int(np.searchsorted(ts, t0 + w.d, side="left"))] = NAN  # ts - d < t0: a prefix
        out.append(col.data)
        # state: what the pushes leave of the deque and every timestamp before T, expired
        # entries dropped (survival only depends on later values: the tail suffices)
        k = g + first
        tail = int(np.searchsorted(bts[:k], T - w.d, side="left"))
        keep_d = dts >= T - w.d
        cts = np.concatenate([dts[keep_d], bts[tail:k]])
        cx = np.concatenate([dv[keep_d], bx[tail:k]])
        keep = _survivors(cx, w.high)
        S[w.dqt] = deque(cts[keep].tolist())
        S[w.dqv] = deque(cx[keep].tolist())
    # the last timestamp's ticks stay pending (with the pending group when it continues)
    group = (gx if pt == T else []) + last[first:].tolist()
    S[f.pt], S[f.pv], S[f.pend] = T, group[-1], group[:-1]
    return out


def _windows_per_tick(f: Feeds, tsl: list[int], ll: list[float], t0: int,
                      S: list[Any]) -> list[Column]:
    """The per-tick windows (`lean.windows_update` and the expiry lines), for values the
    vectorized reduction would not reproduce (NaN, signed zeros)."""
    pt, pv, pend = S[f.pt], S[f.pv], list(S[f.pend])
    dqs = [(w, S[w.dqt], S[w.dqv]) for w in f.windows]
    outs: list[list[float]] = [[] for _ in f.windows]
    for t, x in zip(tsl, ll):
        if t != pt:
            for y in [*pend, pv]:
                for w, dqt, dqv in dqs:
                    if w.high:
                        while dqv and dqv[-1] <= y:
                            dqv.pop()
                            dqt.pop()
                    else:
                        while dqv and dqv[-1] >= y:
                            dqv.pop()
                            dqt.pop()
                    dqv.append(y)
                    dqt.append(pt)
            pend.clear()
            pt = t
        else:
            pend.append(pv)
        pv = x
        for j, (w, dqt, dqv) in enumerate(dqs):
            lo = t - w.d
            while dqt and dqt[0] < lo:
                dqt.popleft()
                dqv.popleft()
            outs[j].append(dqv[0] if dqv and lo >= t0 else NAN)
    S[f.pt], S[f.pv], S[f.pend] = pt, pv, pend
    cols: list[Column] = list(outs)
    return cols


def _chg(c: Chg, ts: I64, last: F64, S: list[Any]) -> Column:
    dqt, dqv, rf = S[c.dqt], S[c.dqv], S[c.rf]
    cts = np.concatenate([np.asarray([SENTINEL], dtype=np.int64), np.asarray(dqt, dtype=np.int64), ts])
    cx = np.concatenate([np.asarray([rf], dtype=np.float64), np.asarray(dqv, dtype=np.float64), last])
    if NATIVE:
        v = floats(chg_kernel(cts, cx, ts, last, c.d))
        jl = int(np.searchsorted(cts, int(ts[-1]) - c.d, side="right")) - 1
    else:
        j = search(cts, ts, c.d, True) - 1  # >= 0: the sentinel's ts is below
        ref = cx[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            v = 100.0 * (last / ref - 1.0)
        v[ref == 0.0] = NAN
        jl = int(j[-1])
    # state after the chunk: rf = the latest tick with ts <= T - d, the later ones queued
    S[c.rf] = float(cx[jl])
    S[c.dqt] = deque(cts[jl + 1:].tolist())
    S[c.dqv] = deque(cx[jl + 1:].tolist())
    data: memoryview = v.data
    return data


def _sma(m: Sma, k: I64, S: list[Any], units: float) -> Column:
    """`(S_i - S_{i-n}) / (n x U_)` on the exact running sum S of whole half ticks: the
    carried deque holds the last n + 1 sums (NaN before the first), then the chunk's. In
    int64 while every sum is below 2**53 (so also exactly a double), else per tick on
    Python ints."""
    n, cs, dq = m.n, S[m.cs], S[m.dq]
    div = float(n) * units
    size = len(k)
    before = list(dq)
    big = max((abs(x) for x in before if x == x), default=0)
    if max(big, abs(cs)) + int(np.abs(k).sum()) >= 2**53:
        out: list[float] = []
        for x in k.tolist():
            cs += x
            dq.append(cs)
            out.append((cs - dq[0]) / div)
        S[m.cs] = cs
        return out
    nans = sum(1 for x in before if x != x)  # a prefix: the sums before the first value
    sums = np.empty(n + 1 + size, dtype=np.int64)
    sums[:nans] = 0
    sums[nans:n + 1] = before[nans:]
    np.cumsum(k, out=sums[n + 1:])
    sums[n + 1:] += cs
    v = np.divide(sums[n + 1:] - sums[1:size + 1], div)  # int64 to double, then `/`
    v[:max(0, nans - 1)] = NAN  # tick i reads the sum n back: a NaN while i + 1 < nans
    tail = sums[-(n + 1):].tolist()
    lead = max(0, nans - size)  # the NaNs still in the deque after the chunk
    S[m.cs] = tail[-1]
    S[m.dq] = deque([NAN] * lead + tail[lead:], maxlen=n + 1)
    data: memoryview = v.data
    return data


# compiled kernels ----------------------------------------------------------------------
# Each copies its numpy inputs into librt vecs (one memcpy each: int64 `ts`, float64
# values) and writes its column into a vec, read back by `np.frombuffer` (vecs export a
# buffer): one pass of C doubles and int64s, no Python object per value. `ts` is
# non-decreasing (a `Ticks` invariant), so the searches of `t_i - d` advance one pointer:
# the same indices as `np.searchsorted`. Every value is the one the numpy formula computes,
# with the same floating-point operations (tests/test_engine_kernels.py checks them
# against those formulas, NaN, infinities, signed zeros and duplicated timestamps included).


def floats(v: vec[float]) -> F64:
    """A kernel's column as a float64 array (a view of the vec's buffer)."""
    return np.frombuffer(memoryview(v), dtype=np.float64)


def _f64(a: Any) -> vec[float]:
    """A float64 array's values (one memcpy: contiguous arrays export their buffer)."""
    out = vec[float](capacity=len(a))
    return extend(out, np.ascontiguousarray(a, dtype=np.float64))


def _i64(a: Any) -> vec[i64]:
    """An int64 array's values (one memcpy)."""
    out = vec[i64](capacity=len(a))
    return extend(out, np.ascontiguousarray(a, dtype=np.int64))


def search(hay: I64, ts: I64, d: int, right: bool) -> I64:
    """`np.searchsorted(hay, ts - d, side)` for non-decreasing `hay` and `ts` (the
    kernel when compiled)."""
    if NATIVE:
        return np.frombuffer(memoryview(search_kernel(hay, ts, d, right)), dtype=np.int64)
    return np.searchsorted(hay, ts - d, side="right" if right else "left")


def ema_kernel(x: Any, alpha: float) -> vec[float]:
    """The ema recurrence over float64 `x`: `v = x if v is NaN else v + alpha * (x - v)`
    (`vector.Columns._ema_list`)."""
    xs = _f64(x)
    out = _f64(x)
    n: i64 = len(xs)
    v: float = NAN
    k: i64 = 0
    while k < n:
        y = xs[k]
        if v != v:
            v = y
        else:
            v = v + alpha * (y - v)
        out[k] = v
        k += 1
    return out


def search_kernel(hay: Any, ts: Any, d: i64, right: bool) -> vec[i64]:
    """`np.searchsorted(hay, ts - d, side)` for non-decreasing int64 `hay` and `ts`."""
    h = _i64(hay)
    t = h if ts is hay else _i64(ts)  # (one copy when searching a column's own ts)
    out = _i64(ts)
    m: i64 = len(h)
    n: i64 = len(t)
    j: i64 = 0
    i: i64 = 0
    while i < n:
        v = t[i] - d
        if right:
            while j < m and h[j] <= v:
                j += 1
        else:
            while j < m and h[j] < v:
                j += 1
        out[i] = j
        i += 1
    return out


def chg_kernel(hay: Any, vals: Any, ts: Any, x: Any, d: i64) -> vec[float]:
    """`chg(d)` at the ticks (ts, x) (`vector.Columns._chg`, `_chg` here): `100 * (x_i / ref
    - 1)`, ref the value (`vals`) of the latest entry of non-decreasing `hay` with
    `hay <= t_i - d`; NaN without one or when it is 0."""
    h = _i64(hay)
    hv = _f64(vals)
    t = h if ts is hay else _i64(ts)  # (one copy each when the haystack is the ticks)
    xs = hv if x is vals else _f64(x)
    out = _f64(x)
    m: i64 = len(h)
    n: i64 = len(t)
    nan: float = NAN
    j: i64 = 0  # the entries with hay <= t_i - d
    i: i64 = 0
    while i < n:
        v = t[i] - d
        while j < m and h[j] <= v:
            j += 1
        if j == 0:
            out[i] = nan
        else:
            ref = hv[j - 1]
            if ref == 0.0:
                out[i] = nan
            else:
                out[i] = 100.0 * (xs[i] / ref - 1.0)
        i += 1
    return out

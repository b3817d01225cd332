"""The reference loop's fed columns (`kestrel.engine.feed`: time windows and `chg` computed
per chunk with numpy) against the per-tick code they replace (`Engine.per_tick`, the
oracle) and against the definitions: same ledgers byte for byte, the same carried state
after every chunk, and the values the docs define, over random days with repeated
timestamps, random chunkings, NaN and zero prices."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from kestrel.engine import Engine, EngineConfig
from kestrel.engine.codegen import compile_plan
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks

from engine_cases import random_config, random_day, random_plan_text, realistic_day
from engine_helpers import plan

WINDOWS = (
    "PLAN w\n"
    "WHEN last > high(30s) AND pos <= 0: BUY 5 MKT STOP -0.05% TARGET +0.08% x20\n"
    "WHEN last < low(10s) AND pos >= 0: SELL 5 LMT ask STOP +0.05% TTL 20s x20\n"
    "WHEN chg(20s) > 0.02 OR range(60s) > 0.3: FLAT x20\n"
    "WHEN chg(5s) < -0.02 AND pos == 0: BUY 3 LMT high(10s) x20"
)


SMAS = (
    "PLAN s\n"
    "WHEN mid CROSSES ABOVE sma(mid, 5) AND spread <= 0.02: BUY 2 MKT x9\n"
    "WHEN sma(last, 3) > sma(bid, 50) OR sma(ask, 1) < sma(spread, 4) + mid - 0.1: FLAT x9"
)


def with_odd_prices(ticks: Ticks, rng: random.Random) -> Ticks:
    """The day with a few `last` prints replaced by NaN or by zero (of either sign)."""
    last = ticks.last.copy()
    for _ in range(rng.randrange(1, 6)):
        last[rng.randrange(len(last))] = rng.choice([math.nan, 0.0, -0.0])
    return Ticks(ticks.ts, ticks.bid, ticks.ask, last, ticks.size)


def split_points(n: int, rng: random.Random) -> list[int]:
    k = rng.choice([1, 2, 5, 17])
    return sorted({0, n, *(rng.randrange(1, n) for _ in range(k - 1))})


def ledger(session: SessionSpec, ticks: Ticks, text: str, cfg: EngineConfig,
           cuts: list[int], per_tick: bool) -> bytes:
    e = Engine(cfg, session, "TEST", 0.01)
    e.per_tick = per_tick
    e.arm(plan(text))
    for lo, hi in zip(cuts, cuts[1:]):
        e.on_ticks(ticks.slice(lo, hi))
    e.finish()
    return e.ledger.to_jsonl()


@pytest.mark.parametrize("seed", range(40))
def test_fed_reference_matches_the_per_tick_oracle(seed: int) -> None:
    rng = random.Random(7000 + seed)
    session, ticks = (random_day if seed % 3 else realistic_day)(rng)
    text = (WINDOWS, SMAS)[seed % 2] if seed % 4 == 0 else random_plan_text(rng)
    if seed % 5 == 1:
        ticks = with_odd_prices(ticks, rng)
        text = WINDOWS
    cfg = random_config(rng)
    cuts = split_points(len(ticks), rng)
    fed = ledger(session, ticks, text, cfg, cuts, per_tick=False)
    oracle = ledger(session, ticks, text, cfg, cuts, per_tick=True)
    assert fed == oracle, (seed, text)


def same(x: Any, y: Any) -> bool:
    """Equal, NaN equal to NaN, element by element for sequences (types too: an int
    timestamp stays an int, a float price a float)."""
    if isinstance(x, list | tuple) or hasattr(x, "maxlen"):
        return type(x) is type(y) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return type(x) is type(y) and x == y and (not isinstance(x, float) or
                                              math.copysign(1, x) == math.copysign(1, y))


def brute(ts: list[int], last: list[float], kind: str, d: int) -> list[float]:
    """The docs' definitions over the whole day, tick by tick: high/low over ticks with ts
    in [t - d, t), defined once that holds one and t - d >= the first ts; chg against the
    last of the latest tick with ts <= t - d."""
    out: list[float] = []
    for i, t in enumerate(ts):
        if kind == "chg":
            ref = next((last[j] for j in range(i, -1, -1) if ts[j] <= t - d), math.nan)
            out.append(100.0 * (last[i] / ref - 1.0) if ref else math.nan)
            continue
        w = [last[j] for j in range(i) if t - d <= ts[j] < t]
        ok = bool(w) and t - d >= ts[0]
        out.append((max(w) if kind == "high" else min(w)) if ok else math.nan)
    return out


def brute_sma(k: list[int], n: int, units: float) -> list[float]:
    """The mean of the last n whole-half-tick values (an exact integer sum) / (n x units)."""
    return [sum(k[i + 1 - n:i + 1]) / (float(n) * units) if i + 1 >= n else math.nan
            for i in range(len(k))]


def half_ticks(day: Ticks, src: str, units: float) -> list[int]:
    x = {"kl": day.last, "kb": day.bid, "ka": day.ask, "km": (day.bid + day.ask) / 2,
         "ksp": day.ask - day.bid}[src]
    return [round(v) for v in (x * units).tolist()] if src != "km" else \
        [round(v) for v in ((day.bid + day.ask) * (units / 2)).tolist()]


@pytest.mark.parametrize("seed", range(16))
def test_fed_columns_and_state_match_per_tick_code_chunk_by_chunk(seed: int) -> None:
    """Over random chunkings: after every chunk the fed state equals the per-tick code's
    state (deques, pending timestamp, chg reference, running sums), and on NaN-free days
    the columns equal the brute-force definitions. Half ticks of 1e-11 make the running
    sums pass 2**53 (where the smas leave int64 for Python ints)."""
    rng = random.Random(9100 + seed)
    _, day = random_day(rng)
    day = day.slice(0, min(len(day), 1500))
    odd = seed % 4 == 2
    if odd:
        day = with_odd_prices(day, rng)
    text, units = (WINDOWS, 200.0) if seed % 2 == 0 else (SMAS, 200.0 if seed % 4 == 1 else 2e11)
    p = plan(text)
    fed, tick = compile_plan(p, fed=True), compile_plan(p, fed=False)
    f = fed.feeds
    if text == WINDOWS:
        assert [w.d for w in f.windows] == [30 * 10**9, 10 * 10**9, 60 * 10**9, 60 * 10**9, 10 * 10**9]
        assert [c.d for c in f.chgs] == [20 * 10**9, 5 * 10**9]
    else:
        assert f.series == ("m", "sp") and [(m.n, m.src) for m in f.smas] == [
            (5, "km"), (3, "kl"), (50, "kb"), (1, "ka"), (4, "ksp")]
    slots = sorted({f.pt, f.pv, f.pend, f.t0} - {-1}
                   | {s for w in f.windows for s in (w.dqt, w.dqv)}
                   | {s for c in f.chgs for s in (c.dqt, c.dqv, c.rf)}
                   | {s for m in f.smas for s in (m.cs, m.dq)})
    S_fed, S_tick = fed.init_state(), tick.init_state()
    consts = (0, int(day.ts[0]), units, ())
    cols: list[list[float]] = [[] for _ in range(len(f.series) + len(f.windows) + len(f.chgs) + len(f.smas))]
    cuts = split_points(len(day), rng)
    for lo, hi in zip(cuts, cuts[1:]):
        part = day.slice(lo, hi)
        args = (part.ts.tolist(), part.bid.tolist(), part.ask.tolist(), part.last.tolist(),
                part.size.tolist())
        q_fed = fed.columns(part, S_fed, units)
        for c, new in zip(cols, q_fed[len(fed.quant):]):
            c += new
        fed.warm(*args, q_fed, S_fed, consts)
        tick.warm(*args, tick.columns(part, S_tick, units), S_tick, consts)
        for s in slots:
            assert same(S_fed[s], S_tick[s]), (seed, lo, hi, s, S_fed[s], S_tick[s])
    if odd:
        return
    ts, last = day.ts.tolist(), day.last.tolist()
    want = [[k / units for k in half_ticks(day, {"m": "km", "sp": "ksp"}[x], units)] for x in f.series]
    want += [brute(ts, last, "high" if w.high else "low", w.d) for w in f.windows]
    want += [brute(ts, last, "chg", c.d) for c in f.chgs]
    want += [brute_sma(half_ticks(day, m.src, units), m.n, units) for m in f.smas]
    for got, exp in zip(cols, want, strict=True):
        assert same(got, exp), seed


def test_fed_columns_reach_the_bounds_the_oracle_reads() -> None:
    """The columns are defined where the docs say: NaN while t - d is before the first
    tick, then the window's max; a chunk that is one repeated timestamp leaves every tick
    pending and excludes them all."""
    p = plan("PLAN w\nWHEN last > high(2s): BUY 1 MKT")
    c = compile_plan(p)
    S = c.init_state()
    t0 = 10**18
    ts = np.array([t0, t0 + 10**9, t0 + 2 * 10**9, t0 + 2 * 10**9, t0 + 3 * 10**9], dtype=np.int64)
    last = np.array([5.0, 7.0, 6.0, 9.0, 1.0])
    z = np.zeros(5)
    part = Ticks(ts, last, last, last, z)
    col = list(c.columns(part.slice(0, 3), S, 200.0)[-1])
    assert same(col, [math.nan, math.nan, 7.0])  # t - 2s reaches the first tick at the third
    col = list(c.columns(part.slice(3, 4), S, 200.0)[-1])
    assert same(col, [7.0])  # the 6.0 sharing its timestamp is pending, not in the window
    col = list(c.columns(part.slice(4, 5), S, 200.0)[-1])
    assert same(col, [9.0])  # [t-2s, t) holds 7.0, 6.0 and 9.0


@pytest.mark.parametrize("cond", ["time > 09:41:07", "time <= 09:41:07", "time < 09:41:07",
                                  "time >= 09:41:07", "09:41:07 < time", "09:41:07 >= time",
                                  "NOT time <= 09:52:00 AND 10:03:30 > time"])
def test_time_of_day_compares_on_the_timestamp_as_the_fast_path_does(cond: str) -> None:
    """`time op hh:mm:ss` compiles to a compare of the tick's timestamp with a bound (no
    division per tick); the fast path computes `time` as whole seconds: same ledgers, on a
    day with ticks at and around the bound's second."""
    session, ticks = random_day(random.Random(41))
    bound = session.wall_clock_ns(9, 41, 7)
    ts = ticks.ts.copy()
    ts[100:104] = [bound - 1, bound, bound + 999_999_999, bound + 10**9]
    ts.sort()
    day = Ticks(ts, ticks.bid, ticks.ask, ticks.last, ticks.size)
    text = f"PLAN t\nWHEN {cond}: BUY 1 MKT x50\nWHEN pos >= 3: FLAT x50"
    ref = Engine(EngineConfig(), session, "TEST", 0.01)
    ref.arm(plan(text))
    ref.run(day, path="reference")
    fast = Engine(EngineConfig(), session, "TEST", 0.01)
    fast.arm(plan(text))
    fast.run(day, path="fast")
    assert ref.ledger.to_jsonl() == fast.ledger.to_jsonl()
    assert b'"fill"' in ref.ledger.to_jsonl()

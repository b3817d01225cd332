"""The dense loop's speedups change no value: the ema without the reseed test equals the
reference recurrence bit for bit (NaN, inf, -0.0, overflow included)."""

from __future__ import annotations

import numpy as np

import datetime as dt

from kestrel.engine.vector import Columns
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import Ticks

# a Columns needs a session (the compiled class checks its arguments' types) even where no
# session series is read
SESSION = SessionSpec(dt.date(2024, 1, 2), tz="UTC")


def test_ema_equals_the_reference_recurrence() -> None:
    rng = np.random.default_rng(1)
    cols = Columns(Ticks.empty(), SESSION, 0, 200.0)
    for trial in range(400):
        n = int(rng.integers(1, 300))
        x = np.round(rng.standard_normal(n) * rng.choice([1.0, 1e3, 1e300]), int(rng.integers(0, 4)))
        if trial % 7 == 0:
            x[rng.integers(0, n)] = 0.0
        if trial % 11 == 0:
            x[0] = -0.0
        if trial % 13 == 0:
            x[rng.integers(0, n)] = np.inf
        if trial % 17 == 0:
            x[rng.integers(0, n)] = np.nan
        k = int(rng.integers(1, 50))
        got = cols._ema(x, k)
        want = np.asarray(Columns._ema_list(x.tolist(), k), dtype=np.float64)
        assert got.tobytes() == want.tobytes(), trial
    assert cols._ema(np.zeros(0), 5).shape == (0,)
    big = np.array([1.7e308, -1.7e308, 1.7e308, 3.0])
    assert cols._ema(big, 1).tobytes() == np.asarray(Columns._ema_list(big.tolist(), 1)).tobytes()


def test_block_scan_equals_the_tick_scan() -> None:
    """`_scan_blocks` stops where the tick-by-tick test first holds (NaN prices included)."""
    from kestrel.engine import dense

    rng = np.random.default_rng(7)
    inf = float("inf")
    for trial in range(300):
        n = int(rng.integers(1, 400))
        bid = (100.0 + np.cumsum(rng.integers(-1, 2, n)) * 0.01).astype(np.float64)
        ask = (bid + 0.01 * rng.integers(1, 3, n)).astype(np.float64)
        if trial % 5 == 0:
            bid[rng.integers(0, n)] = np.nan
        if trial % 7 == 0:
            ask[rng.integers(0, n)] = np.nan
        bits = np.where(rng.random(n) < rng.choice([0.0, 0.002, 0.05]), 1, 2).astype(np.int64)
        blk = dense._blocks(bits, bid, ask, 0, n)
        bl, al, bi = bid.tolist(), ask.tolist(), bits.tolist()
        lb, la, lbits = dense._le(bid), dense._le(ask), dense._le(bits)  # as the loop reads them
        for _ in range(5):
            j = int(rng.integers(0, n))
            last = int(rng.integers(j, n + 1))
            m = int(rng.choice([1, 2, 4]))
            use_b, use_a = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
            w = float(rng.choice([0.02, 0.1, 10.0]))
            lo_b, hi_b = (bid[j] - w, bid[j] + w) if use_b else (-inf, inf)
            lo_a, hi_a = (ask[j] - w, ask[j] + w) if use_a else (-inf, inf)
            want = last
            for k in range(j, last):
                if (bi[k] & m or (use_b and not lo_b < bl[k] < hi_b)
                        or (use_a and not lo_a < al[k] < hi_a)):
                    want = k
                    break
            got = dense._scan_blocks(j, last, m, lbits, lb, la, blk, use_b, use_a,
                                     lo_b, hi_b, lo_a, hi_a)
            assert got == want, (trial, j, last)


def test_window_extremes_and_shared_sums_match_naive() -> None:
    """high/low over [t-d, t) (shared queries, duplicated timestamps) equal a naive max/min;
    smas sharing one running sum equal the unshared computation."""
    from kestrel.engine.indicators import IndicatorSpec
    from kestrel.market.ticks import Ticks

    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(1, 400))
        ts = np.sort(rng.integers(0, 3 * n, n)).astype(np.int64) * 10**9
        bid = (100.0 + np.cumsum(rng.integers(-1, 2, n)) * 0.01).astype(np.float64)
        last = (bid + 0.005).astype(np.float64)
        ticks = Ticks(ts, bid, (bid + 0.01).astype(np.float64), last, np.ones(n))
        cols = Columns(ticks, SESSION, 0, 200.0)
        for d in (1, 5, 40):
            w = d * 10**9
            hi, lo = (cols.indicator(IndicatorSpec(k, window_ns=w)) for k in ("high", "low"))
            for i in range(n):
                a = int(np.searchsorted(ts, ts[i] - w, side="left"))
                b = int(np.searchsorted(ts, ts[i], side="left"))
                if b > a and ts[i] - w >= ts[0]:
                    assert hi[i] == last[a:b].max() and lo[i] == last[a:b].min(), (trial, d, i)
                else:
                    assert np.isnan(hi[i]) and np.isnan(lo[i]), (trial, d, i)
        k = cols.quantized("mid")
        for m in (1, 3, 20):
            got = cols.indicator(IndicatorSpec("sma", x="mid", n=m))
            assert got.tobytes() == Columns._sma_units(k, m, 200.0).tobytes()


def test_bits_built_incrementally_equal_the_forms() -> None:
    """The bits, built as forms appear (one account state after another), hold bit k where
    form k is true and bit MAX_FORMS + k where it is false, and the always bit."""
    from bench.engine_throughput import make_days, plan_of
    from bench.workloads import RICH
    from kestrel.engine import dense

    (session, ticks), = make_days(6000, seed=3, sessions=1)
    grows = ("PLAN grows\n"
             "WHEN last > high(1m) AND (spread <= 0.02 OR pos < 50): BUY 100 MKT x5\n"
             "WHEN NOT (mid CROSSES ABOVE sma(mid, 20) OR pos > -50): SELL 100 MKT x5")
    for rules, base in ((plan_of(RICH).rules, 0), (plan_of(RICH).rules, 1234),
                        (plan_of(grows).rules, 0), (plan_of(grows).rules, 777)):
        built = []
        feed = dense.Feed(rules, ticks, session, 0, 200.0, base, len(ticks))
        for pos in (0.0, 100.0, -100.0, 200.0):
            feed.forms((pos, 0.0))
            got = np.frombuffer(feed.window_bytes(base, len(ticks)), dtype="<i8").astype(np.int64)
            want = np.full(len(ticks) - base, 1 << dense.ALWAYS, dtype=np.int64)
            for k, a in enumerate(feed.arrays):
                want |= np.where(a[base:], 1 << k, 1 << (dense.MAX_FORMS + k))
            assert got.tobytes() == want.tobytes(), (base, pos)
            built.append(len(feed.arrays))
        assert built[0] > 0
    assert built[-1] > built[0]  # the second plan's forms grew with the account states

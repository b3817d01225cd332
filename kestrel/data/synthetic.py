"""A seeded, realistic intraday tick generator (pure numpy, vectorized).

Model, per session of `ticks_per_session` ticks about one second apart:
- log-mid random walk whose per-tick volatility is the product of a U-shaped intraday
  profile and a slowly varying clustering factor exp(c * MA_w(noise)) (moving average of
  Gaussian noise over `cluster_window` ticks, carried across sessions: volatility clustering);
- Poisson jumps (`jumps_per_session` on average, Gaussian size `jump_sigma` in log terms);
- an overnight gap between sessions;
- spread in ticks = base + widening at the open (decays over ~2 minutes) + widening after a
  jump (decays over ~30 ticks) + noise, at least one tick;
- bid/ask rounded to the tick grid; `last` is the ask (buyer-initiated) or the bid;
- trade size with a U-shaped intraday volume profile times lognormal noise, whole shares.
Same spec and seed → identical arrays (numpy's PCG64 stream, no wall clock).
"""

from __future__ import annotations

import datetime as dt

import msgspec
import numpy as np

from kestrel.market.data import MarketData
from kestrel.market.instrument import decimals_for
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import F64, NS_PER_S, Ticks


class SyntheticSpec(msgspec.Struct, frozen=True):
    """Parameters of the generator; defaults give a liquid US large-cap-like equity."""

    symbol: str = "SAMPLE"
    start: dt.date = dt.date(2024, 4, 8)
    sessions: int = 6
    open: dt.time = dt.time(9, 30)
    close: dt.time = dt.time(16, 0)
    tz: str = "America/New_York"
    tick_size: float = 0.01
    start_price: float = 180.0
    tick_interval_s: float = 1.0
    daily_vol: float = 0.015
    cluster_window: int = 900
    cluster_strength: float = 0.45
    jumps_per_session: float = 3.0
    jump_sigma: float = 0.0025
    overnight_sigma: float = 0.006
    base_spread_ticks: float = 1.0
    open_spread_ticks: float = 6.0
    jump_spread_ticks: float = 4.0
    base_size: float = 100.0


def trading_days(start: dt.date, count: int) -> list[dt.date]:
    """`count` weekdays starting at `start` (holidays are not modelled)."""
    days: list[dt.date] = []
    d = start
    while len(days) < count:
        if d.weekday() < 5:
            days.append(d)
        d += dt.timedelta(days=1)
    return days


def _moving_average(x: F64, w: int) -> F64:
    c: F64 = np.cumsum(np.concatenate((np.zeros(w), x)))
    out: F64 = (c[w:] - c[:-w]) / w
    return out


def generate(spec: SyntheticSpec = SyntheticSpec(), seed: int = 7) -> MarketData:
    """Generate `spec.sessions` sessions of ticks from `seed`."""
    if spec.sessions < 1:
        raise ValueError(f"sessions must be >= 1, got {spec.sessions}")
    positive = ("tick_size", "start_price", "tick_interval_s", "base_size", "cluster_window")
    for name in positive:
        if not getattr(spec, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(spec, name)!r}")
    for name in ("daily_vol", "cluster_strength", "jumps_per_session", "jump_sigma", "overnight_sigma",
                 "base_spread_ticks", "open_spread_ticks", "jump_spread_ticks"):
        if not getattr(spec, name) >= 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(spec, name)!r}")
    rng = np.random.default_rng(seed)
    sessions = tuple(
        SessionSpec(d, spec.open, spec.close, spec.tz) for d in trading_days(spec.start, spec.sessions)
    )
    length_s = sessions[0].length_ns // NS_PER_S
    n = int(length_s / spec.tick_interval_s)
    total = n * len(sessions)
    step_ns = int(spec.tick_interval_s * NS_PER_S)

    # timestamps: a regular grid plus millisecond jitter below one step (strictly increasing)
    opens = np.array([s.open_ns for s in sessions], dtype=np.int64)
    grid = np.arange(n, dtype=np.int64) * step_ns
    jitter = rng.integers(0, max(1, step_ns // 1_000_000), size=total, dtype=np.int64) * 1_000_000
    ts = (opens[:, None] + grid[None, :]).reshape(-1) + jitter

    # intraday position in [0, 1) and U-shaped profiles
    x = np.tile(np.arange(n, dtype=np.float64) / n, len(sessions))
    u = 1.0 + 2.5 * np.exp(-x / 0.04) + 1.2 * np.exp(-(1.0 - x) / 0.04)
    cluster = np.exp(
        spec.cluster_strength
        * _moving_average(rng.standard_normal(total + spec.cluster_window), spec.cluster_window)[
            spec.cluster_window :
        ]
        * np.sqrt(spec.cluster_window)
    )
    sigma = spec.daily_vol / np.sqrt(n) * u / np.sqrt(np.mean(u**2)) * cluster
    ret = sigma * rng.standard_normal(total)
    is_jump = rng.random(total) < spec.jumps_per_session / n
    ret += np.where(is_jump, rng.standard_normal(total) * spec.jump_sigma, 0.0)
    gaps = np.zeros(total)
    gaps[n::n] = rng.standard_normal(len(sessions) - 1) * spec.overnight_sigma
    ret += gaps
    ret[0] = 0.0
    mid = spec.start_price * np.exp(np.cumsum(ret))

    # spread in ticks: open widening + jump widening + noise
    idx = np.arange(total)
    elapsed_s = (idx % n) * spec.tick_interval_s
    last_jump = np.maximum.accumulate(np.where(is_jump, idx, -(10**9)))
    since_jump = idx - last_jump
    spread_t = (
        spec.base_spread_ticks
        + spec.open_spread_ticks * np.exp(-elapsed_s / 120.0)
        + spec.jump_spread_ticks * np.exp(-since_jump / 30.0)
        + np.abs(rng.standard_normal(total)) * 0.6
    )
    spread_k = np.maximum(1, np.floor(spread_t)).astype(np.int64)

    dec = decimals_for(spec.tick_size)
    bid_k = np.floor(mid / spec.tick_size - spread_k / 2.0).astype(np.int64)
    ask_k = bid_k + spread_k
    bid = np.round(bid_k * spec.tick_size, dec)
    ask = np.round(ask_k * spec.tick_size, dec)
    buy = rng.random(total) < 0.5
    last = np.where(buy, ask, bid)
    size = np.maximum(
        1.0, np.round(spec.base_size * u * rng.lognormal(0.0, 0.8, total) / 10.0)
    ) * 10.0
    for a in (ts, bid, ask, last, size):
        a.flags.writeable = False
    return MarketData(spec.symbol, spec.tick_size, Ticks(ts, bid, ask, last, size), sessions)

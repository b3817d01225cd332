"""The stationary bootstrap of a mean: its 95% intervals cover a known mean in 93-97% of 1,000
replications (calibration), its resamples are circular blocks of the stated mean length, its
block length rule finds dependence where there is some and none in white noise, and the same
seed gives the same interval."""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from kestrel.report.stats.bootstrap import (
    DRAWS,
    block_length,
    expanded_alpha,
    mean_interval,
    stationary_indices,
)

F64 = npt.NDArray[np.float64]
REPLICATIONS = 1000


def _streams(rng: np.random.Generator, shape: str, df: int, n: int, mean: float, scale: float) -> F64:
    """REPLICATIONS streams of n independent session P&Ls with expectation exactly `mean`:
    normal, Student t with `df` degrees of freedom (fat tails), or zero-inflated (an agent that
    sits out part of the sessions: it trades on each with probability 50-100%, picked by `df`,
    with normal P&L when it does)."""
    k = (REPLICATIONS, n)
    if shape == "normal":
        return mean + scale * rng.standard_normal(k)
    if shape == "student-t":
        return mean + scale * rng.standard_t(df, k)
    trade_rate = 0.5 + 0.5 * (df - 3) / 27  # df in [3, 30] picks the rate
    trades = rng.random(k) < trade_rate
    # E = trade_rate x (mean / trade_rate) = mean
    return np.where(trades, mean / trade_rate + scale * rng.standard_normal(k), 0.0)


# The band is a statistical claim: the intervals' coverage on these families measures 93.8-94.5%
# at 40 sessions (8,000 replications; bench/sweep.py `calibration_by_stream` measures 1,000), and
# one binomial standard error of 1,000 replications is 0.75 points. So the examples are fixed
# (derandomized, no database) and not shrunk: shrinking would search realizations for an
# unlucky one, not find a bug. Strongly skewed P&L covers less (docs/report.md, Statistics).
@settings(max_examples=4, deadline=None, derandomize=True, database=None, phases=[Phase.generate])
@given(shape=st.sampled_from(["normal", "student-t", "zero-inflated"]), df=st.integers(3, 30),
       sessions=st.integers(30, 60), mean=st.floats(-500, 500), scale=st.floats(0.5, 500))
def test_95_percent_intervals_cover_a_known_mean_in_93_to_97_percent_of_1000_streams(
        shape: str, df: int, sessions: int, mean: float, scale: float) -> None:
    rng = np.random.default_rng(20140501)
    streams = _streams(rng, shape, df, sessions, mean, scale)
    t = time.perf_counter()
    hits = 0
    for x in streams:
        iv = mean_interval(x, rng)
        assert iv is not None and iv.low <= iv.high
        hits += iv.low <= mean <= iv.high
    took = time.perf_counter() - t
    print(f"coverage {shape} df={df} sessions={sessions}: {hits / REPLICATIONS:.3f} in {took:.1f} s")
    assert 0.93 <= hits / REPLICATIONS <= 0.97, (shape, df, sessions, hits)
    assert took < 30, f"{REPLICATIONS} intervals took {took:.1f} s"


def test_the_interval_is_the_same_for_the_same_seed_and_moves_with_another() -> None:
    x = np.random.default_rng(3).normal(5.0, 20.0, 40)
    a = mean_interval(x, np.random.default_rng(11))
    b = mean_interval(x, np.random.default_rng(11))
    c = mean_interval(x, np.random.default_rng(12))
    assert a == b and a is not None and c is not None
    assert (a.low, a.high) != (c.low, c.high)


def test_a_constant_series_has_the_constant_as_its_interval_and_one_value_none() -> None:
    iv = mean_interval(np.full(30, 7.5), np.random.default_rng(0))
    assert iv is not None and (iv.low, iv.high, iv.block_length) == (7.5, 7.5, 1.0)
    assert mean_interval(np.array([3.0]), np.random.default_rng(0)) is None


def test_resamples_are_circular_blocks_with_the_stated_mean_length() -> None:
    n, block, draws = 50, 4.0, 4000
    idx = stationary_indices(np.random.default_rng(5), n, block, draws)
    assert idx.shape == (n, draws) and idx.min() >= 0 and idx.max() < n
    steps = (idx[1:] - idx[:-1]) % n  # within a block the next position is the next observation
    continues = steps == 1
    # a new block starts with probability 1 / block (a fresh start may land on the next position by chance)
    p_new = 1.0 - float(np.mean(continues))
    assert p_new == pytest.approx((1 - 1 / n) / block, abs=0.01)
    iid = stationary_indices(np.random.default_rng(5), n, 1.0, draws)
    assert float(np.mean((iid[1:] - iid[:-1]) % n == 1)) == pytest.approx(1 / n, abs=0.005)


def test_block_length_is_one_for_white_noise_and_grows_with_dependence() -> None:
    rng = np.random.default_rng(8)
    white = [block_length(rng.standard_normal(200)) for _ in range(50)]
    assert float(np.median(white)) == 1.0
    ar = []
    for _ in range(50):
        e = rng.standard_normal(300)
        x = np.zeros(300)
        for t in range(1, 300):
            x[t] = 0.8 * x[t - 1] + e[t]
        ar.append(block_length(x[100:]))
    assert float(np.median(ar)) > 4.0
    n = 200
    assert max(ar) <= min(3 * math.sqrt(n), n / 3)
    assert block_length(np.full(100, 2.0)) == 1.0
    assert block_length(np.arange(5.0)) == 1.0  # too short to estimate any dependence


def test_the_expanded_level_is_the_t_interval_s_for_independent_sessions() -> None:
    # Phi(-sqrt(n/(n-1)) t_{n-1, 0.975}): for n = 40, t = 2.022691, x 1.012739 = 2.048459, Phi = 0.020257
    assert expanded_alpha(40) == pytest.approx(0.020257, abs=5e-6)
    assert expanded_alpha(10_000) == pytest.approx(0.025, abs=1e-4)
    assert DRAWS >= 1000


def test_the_interval_reads_numpy_s_linear_quantiles_of_the_resampled_means() -> None:
    x = np.random.default_rng(21).standard_t(4, 45) * 30.0
    iv = mean_interval(x, np.random.default_rng(2))
    rng = np.random.default_rng(2)  # the same draws, read by numpy's own quantile
    means = x[stationary_indices(rng, 45, block_length(x), DRAWS)].mean(axis=0)
    a = expanded_alpha(45)
    assert iv is not None
    assert (iv.low, iv.high) == pytest.approx(tuple(np.quantile(means, [a, 1 - a])), abs=1e-12)

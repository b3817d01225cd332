"""The stationary bootstrap (Politis and Romano 1994) of a mean, with its block length chosen
from the data (Politis and White 2004, as corrected by Patton, Politis and White 2009).

Invariants:
- a resample is drawn from a `numpy.random.Generator` the caller seeds: the same series, seed,
  level and number of draws give the same interval, bit for bit;
- a resample of `n` observations is built from blocks that start at a uniform position and run
  on circularly (after the last observation comes the first), each next observation starting a
  new block with probability 1 / block length; block length 1 is the ordinary (iid) bootstrap;
- the block length is 1 when no autocorrelation of the series is significant (the data show no
  dependence to carry) or the dependence found is net negative, and never above
  min(3 sqrt(n), n / 3);
- the interval is the percentile interval of the resampled means at the expanded levels
  alpha' / 2 = Phi(-sqrt(n / (n - 1)) t_{n-1}(1 - alpha / 2)) and 1 - alpha' / 2 (Hesterberg's
  small-sample expansion: for n independent observations it is as wide as the t interval, where
  the plain percentile interval is too narrow by the factor sqrt((n - 1) / n) and by z against t).

docs/report.md ("Statistics") defines these once; this module is that definition in code.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import msgspec
import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats

F64 = npt.NDArray[np.float64]
DRAWS = 2000
LEVEL = 0.95
_NORMAL = NormalDist()


class MeanInterval(msgspec.Struct, frozen=True):
    """A bootstrap interval of a series' mean, and the mean block length it resampled with."""

    low: float
    high: float
    block_length: float


def block_length(x: F64) -> float:
    """The stationary bootstrap's mean block length for the mean of `x` (Politis and White's
    rule with Patton, Politis and White's correction):

    - m: the smallest lag after which K = max(5, ceil(sqrt(log10 n))) autocorrelations in a row
      are all below 2 sqrt(log10(n) / n) in size (the last lag searched when none is);
    - M = 2 m lags enter the flat-top window lambda(t) = 1 for t <= 1/2, 2 (1 - t) up to 1;
    - G = sum_{k=1..M} 2 lambda(k/M) k R(k), g = R(0) + sum_{k=1..M} 2 lambda(k/M) R(k) (R the
      autocovariances, divided by n);
    - b = (2 G^2 / D)^(1/3) n^(1/3) with D = 2 g^2, i.e. (|G| / g)^(2/3) n^(1/3);
    then clamped to [1, max(1, min(3 sqrt(n), n / 3))]. It is 1 when M = 0, n <= K + 1, the series
    is constant, or g <= R(0): the dependence found is net negative, so the variance of the mean
    is below R(0) / n, and single draws (which estimate R(0) / n) err wide, never narrow; with the
    noisy autocorrelations of a few dozen sessions, negative ones are mostly noise.
    """
    n = int(x.shape[0])
    k_n = max(5, math.ceil(math.sqrt(math.log10(max(n, 2)))))
    if n <= k_n + 1:
        return 1.0
    e = x - float(np.mean(x))
    lags = min(math.ceil(math.sqrt(n)) + k_n, n - 1)
    acv = np.array([float(e[k:] @ e[:n - k]) / n for k in range(lags + 1)])
    if acv[0] <= 0.0:
        return 1.0
    small = np.abs(acv[1:] / acv[0]) < 2.0 * math.sqrt(math.log10(n) / n)  # small[j]: lag j + 1
    m = next((j for j in range(lags - k_n + 1) if bool(np.all(small[j:j + k_n]))), lags)
    big_m = min(2 * m, lags)
    if big_m == 0:
        return 1.0
    k = np.arange(1, big_m + 1, dtype=np.float64)
    t = k / big_m
    lam = np.where(t <= 0.5, 1.0, 2.0 * (1.0 - t))
    g_big = float(np.sum(2.0 * lam * k * acv[1:big_m + 1]))
    g0 = float(acv[0] + np.sum(2.0 * lam * acv[1:big_m + 1]))
    cap = max(1.0, min(3.0 * math.sqrt(n), n / 3.0))
    if g0 <= acv[0]:  # net negative dependence: single draws err wide, never narrow
        return 1.0
    b = float((abs(g_big) / g0) ** (2.0 / 3.0) * n ** (1.0 / 3.0))
    return min(max(b, 1.0), cap)


def stationary_indices(rng: np.random.Generator, n: int, block: float, draws: int) -> npt.NDArray[np.int64]:
    """`draws` stationary-bootstrap resamples of positions 0..n-1, one per column (shape
    (n, draws)), mean block length `block` (see the module docstring)."""
    starts = rng.integers(0, n, size=(n, draws))
    if block <= 1.0:
        return starts
    new = rng.random((n, draws)) < 1.0 / block  # position t starts a new block (t = 0 always does)
    out = np.empty((n, draws), dtype=np.int64)
    out[0] = starts[0]
    for t in range(1, n):
        on = out[t - 1] + 1
        on[on == n] = 0
        out[t] = np.where(new[t], starts[t], on)
    return out


@functools.lru_cache(maxsize=1024)
def expanded_alpha(n: int, level: float = LEVEL) -> float:
    """The lower tail probability the percentile interval is read at for `n` observations:
    Phi(-sqrt(n / (n - 1)) t_{n-1}(1 - (1 - level) / 2))."""
    t = float(scipy_stats.t.ppf(1.0 - (1.0 - level) / 2.0, n - 1))
    return _NORMAL.cdf(-math.sqrt(n / (n - 1)) * t)


def mean_interval(x: F64, rng: np.random.Generator, *, level: float = LEVEL, draws: int = DRAWS) -> MeanInterval | None:
    """The stationary-bootstrap interval of the mean of `x` at `level` (see the module
    docstring); None with fewer than two observations."""
    n = int(x.shape[0])
    if n < 2:
        return None
    if not np.any(x != x[0]):  # every resample of a constant series is that constant
        return MeanInterval(float(x[0]), float(x[0]), 1.0)
    b = block_length(x)
    means = np.sort(x[stationary_indices(rng, n, b, draws)].mean(axis=0))
    a = expanded_alpha(n, level)
    return MeanInterval(_quantile(means, a), _quantile(means, 1.0 - a), round(b, 6))


def _quantile(ascending: F64, q: float) -> float:
    """The q-quantile of sorted values, linearly interpolated at position (len - 1) q (numpy's
    default "linear" method)."""
    h = (ascending.shape[0] - 1) * q
    k = min(int(math.floor(h)), ascending.shape[0] - 2)
    return float(ascending[k] + (h - k) * (ascending[k + 1] - ascending[k]))


__all__ = ["DRAWS", "LEVEL", "MeanInterval", "block_length", "expanded_alpha", "mean_interval", "stationary_indices"]

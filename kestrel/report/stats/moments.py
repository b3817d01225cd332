"""Per-period returns summarized by their moments, which pool exactly across sessions.

A session's per-period returns (r_m = (E_m - E_{m-1}) / risk capital, the minutes of the run
metrics) are kept as their count, mean, the sums of the 2nd, 3rd and 4th powers of their
deviations from that mean, and the sum of squares of their negative parts. Pooling sessions
shifts each one's central sums to the pooled mean (exact, no second pass over the returns):

    M2 = sum_i M2_i + n_i d_i^2
    M3 = sum_i M3_i + 3 d_i M2_i + n_i d_i^3
    M4 = sum_i M4_i + 4 d_i M3_i + 6 d_i^2 M2_i + n_i d_i^4,   d_i = mean_i - pooled mean.

So the Sharpe and Sortino of a cell are those of its whole return series across sessions, the
same numbers as concatenating every session's returns, never a mean of per-session ratios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


class ReturnMoments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The moments of a return series (see the module docstring); `count` 0 is the empty one."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0  # sum of (r - mean)^2
    m3: float = 0.0  # sum of (r - mean)^3
    m4: float = 0.0  # sum of (r - mean)^4
    downside: float = 0.0  # sum of min(r, 0)^2

    @staticmethod
    def of(returns: F64) -> ReturnMoments:
        n = int(returns.shape[0])
        if n == 0:
            return ReturnMoments()
        mu = float(np.mean(returns))
        d = returns - mu
        d2 = d * d
        return ReturnMoments(n, mu, float(np.sum(d2)), float(np.sum(d2 * d)), float(np.sum(d2 * d2)),
                             float(np.sum(np.minimum(returns, 0.0) ** 2)))

    @staticmethod
    def pooled(parts: Sequence[ReturnMoments]) -> ReturnMoments:
        """The moments of the parts' series one after another (exact: see the module docstring)."""
        parts = [p for p in parts if p.count]
        if not parts:
            return ReturnMoments()
        n = np.array([p.count for p in parts], dtype=np.float64)
        mu = np.array([p.mean for p in parts])
        m2 = np.array([p.m2 for p in parts])
        m3 = np.array([p.m3 for p in parts])
        m4 = np.array([p.m4 for p in parts])
        total = float(np.sum(n))
        mean = float(np.sum(n * mu) / total)
        d = mu - mean
        return ReturnMoments(
            int(total), mean,
            float(np.sum(m2 + n * d**2)),
            float(np.sum(m3 + 3 * d * m2 + n * d**3)),
            float(np.sum(m4 + 4 * d * m3 + 6 * d**2 * m2 + n * d**4)),
            float(sum(p.downside for p in parts)))

    @property
    def sd(self) -> float | None:
        """The sample standard deviation (ddof 1); None below two returns."""
        return math.sqrt(max(self.m2, 0.0) / (self.count - 1)) if self.count >= 2 else None

    @property
    def skewness(self) -> float | None:
        """m3 / m2^(3/2) with the moments divided by the count; None without variation."""
        if self.count < 2 or self.m2 <= 0:
            return None
        return float((self.m3 / self.count) / (self.m2 / self.count) ** 1.5)

    @property
    def kurtosis(self) -> float | None:
        """m4 / m2^2 with the moments divided by the count (3 for a normal series, not excess)."""
        if self.count < 2 or self.m2 <= 0:
            return None
        return (self.m4 / self.count) / (self.m2 / self.count) ** 2

    def sharpe(self, periods_per_year: int) -> float | None:
        """mean / sd (ddof 1) x sqrt(periods per year); None below two returns or without variation."""
        sd = self.sd
        if sd is None or sd <= 0:
            return None
        return self.mean / sd * math.sqrt(periods_per_year)

    def sortino(self, periods_per_year: int) -> float | None:
        """mean / sqrt(mean of min(r, 0)^2) x sqrt(periods per year); None below two returns or
        without a losing period."""
        if self.count < 2 or self.downside <= 0:
            return None
        return self.mean / math.sqrt(self.downside / self.count) * math.sqrt(periods_per_year)


__all__ = ["ReturnMoments"]

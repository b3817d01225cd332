"""What testing many agents at once costs: Holm's step-down adjustment of a family of p-values
and the deflated Sharpe ratio (Bailey and Lopez de Prado 2014) of the best of several trials.

Invariants:
- `holm` returns adjusted p-values in the input's order; each is >= its raw p-value, <= 1, and
  rejecting every hypothesis whose adjusted p-value is <= alpha is Holm's procedure at level
  alpha (the family-wise error rate is at most alpha, whatever the dependence between tests);
- `deflated_sharpe` works in per-period (not annualized) Sharpe ratios throughout: the selected
  trial's Sharpe, the variance of the trials' Sharpes and the return moments must share a period.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

EULER_GAMMA = 0.5772156649015329
_NORMAL = NormalDist()


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values: with the m p-values sorted ascending,
    p~(i) = max_{j <= i} min(1, (m - j + 1) p(j)), returned in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (pvalues[i], i))
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def expected_max_sharpe(trials: int, sharpe_variance: float) -> float:
    """The expected largest per-period Sharpe of `trials` unskilled trials whose Sharpe
    estimates vary with `sharpe_variance` (Bailey and Lopez de Prado's SR0):
    sqrt(V) x ((1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e))); 0 for one trial."""
    if trials < 2 or sharpe_variance <= 0:
        return 0.0
    z1 = _NORMAL.inv_cdf(1.0 - 1.0 / trials)
    z2 = _NORMAL.inv_cdf(1.0 - 1.0 / (trials * math.e))
    return math.sqrt(sharpe_variance) * ((1.0 - EULER_GAMMA) * z1 + EULER_GAMMA * z2)


def probabilistic_sharpe(sharpe: float, benchmark: float, periods: int, skewness: float, kurtosis: float) -> float | None:
    """The probability that the true per-period Sharpe exceeds `benchmark`, given the estimate
    `sharpe` from `periods` returns of that skewness and (non-excess) kurtosis:
    Phi((SR - SR*) sqrt(T - 1) / sqrt(1 - skew SR + (kurt - 1) / 4 SR^2)); None when T < 2 or
    the variance term is not positive."""
    var = 1.0 - skewness * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2
    if periods < 2 or not var > 0:
        return None
    return _NORMAL.cdf((sharpe - benchmark) * math.sqrt(periods - 1) / math.sqrt(var))


def deflated_sharpe(sharpe: float, periods: int, skewness: float, kurtosis: float, *, trials: int,
                    sharpe_variance: float) -> float | None:
    """The deflated Sharpe ratio: the probabilistic Sharpe of the selected trial against the
    expected maximum of `trials` unskilled ones (`expected_max_sharpe`)."""
    return probabilistic_sharpe(sharpe, expected_max_sharpe(trials, sharpe_variance), periods, skewness, kurtosis)


__all__ = ["EULER_GAMMA", "deflated_sharpe", "expected_max_sharpe", "holm", "probabilistic_sharpe"]

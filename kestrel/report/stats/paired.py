"""The p-value of a paired comparison: the two-sided Wilcoxon signed-rank test of the
per-session differences (`scipy.stats.wilcoxon`, zero differences dropped), several at once.

Invariants:
- each series' p-value is exactly what `scipy.stats.wilcoxon(d, zero_method="wilcox")` gives
  for it alone (scipy's own choice of method per series: the exact null distribution for at most
  50 differences without ties or zeros, exhaustive sign flips for at most 13 with them, else the
  normal approximation with the tie correction); series are only batched with others that take
  the same method at the same length, so one series' p-value never depends on the others;
- a series of zero differences only (or none) has p-value 1: it shows no difference at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats

F64 = npt.NDArray[np.float64]


def _method(d: F64) -> str:
    """scipy's `method="auto"` for the series `d` alone."""
    n = int(d.shape[0])
    if n > 50:
        return "asymptotic"
    nonzero = np.abs(d[d != 0])
    if nonzero.shape[0] == n and np.unique(nonzero).shape[0] == n:
        return "exact"
    return "permutation" if n <= 13 else "asymptotic"


def signed_rank_pvalues(diffs: Sequence[F64]) -> list[float]:
    """The two-sided Wilcoxon signed-rank p-value of each series of paired differences."""
    out = [1.0] * len(diffs)
    groups: dict[tuple[str, int], list[int]] = {}
    for k, d in enumerate(diffs):
        if not np.any(d != 0):
            continue
        method = _method(d)
        if method == "permutation":  # at most 13 differences: scipy enumerates all 2^n sign flips
            out[k] = float(scipy_stats.wilcoxon(d, zero_method="wilcox").pvalue)
        else:
            groups.setdefault((method, int(d.shape[0])), []).append(k)
    for (method, _), ks in sorted(groups.items()):
        p = np.atleast_1d(scipy_stats.wilcoxon(np.vstack([diffs[k] for k in ks]), zero_method="wilcox",
                                               method=method, axis=1).pvalue)
        for k, v in zip(ks, p):
            out[k] = float(v)
    return out


__all__ = ["signed_rank_pvalues"]

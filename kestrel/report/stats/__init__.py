"""Sweep statistics from per-session results: intervals, paired verdicts, multiplicity.

Defined once in docs/report.md ("Statistics"); this package is that definition in code:
`bootstrap` (the seeded stationary bootstrap of a mean and its block length rule), `moments`
(per-period returns pooled across sessions), `selection` (Holm, the deflated Sharpe ratio),
`paired` (the Wilcoxon p-values of paired differences), `records` (one result per agent x
profile x session x repeat), `grid` (the cells, comparisons
and verdicts of a sweep) and `table` (their terminal lines). Pure and deterministic.
"""

from kestrel.report.stats.bootstrap import DRAWS, LEVEL, MeanInterval, block_length, mean_interval
from kestrel.report.stats.grid import (
    ALPHA,
    DEFAULT_BASELINES,
    DEFAULT_SEED,
    MIN_SESSIONS,
    CellKey,
    CellStats,
    Comparison,
    DeflatedSharpe,
    GridStats,
    StatsError,
    Estimate,
    compare,
    grid_stats,
    verdict,
)
from kestrel.report.stats.moments import ReturnMoments
from kestrel.report.stats.paired import signed_rank_pvalues
from kestrel.report.stats.records import SessionRecord, session_records
from kestrel.report.stats.selection import deflated_sharpe, expected_max_sharpe, holm, probabilistic_sharpe
from kestrel.report.stats.table import text_table

__all__ = [
    "ALPHA",
    "DEFAULT_BASELINES",
    "DEFAULT_SEED",
    "DRAWS",
    "LEVEL",
    "MIN_SESSIONS",
    "CellKey",
    "CellStats",
    "Comparison",
    "DeflatedSharpe",
    "GridStats",
    "MeanInterval",
    "ReturnMoments",
    "SessionRecord",
    "StatsError",
    "Estimate",
    "block_length",
    "compare",
    "deflated_sharpe",
    "expected_max_sharpe",
    "grid_stats",
    "holm",
    "mean_interval",
    "probabilistic_sharpe",
    "session_records",
    "signed_rank_pvalues",
    "text_table",
    "verdict",
]

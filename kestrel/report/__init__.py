"""Run reports: equity marked at every tick, metrics traders use, baselines, and a
self-contained HTML page. Pure and deterministic (no clock, no network, no scripts).

Metrics are defined once in docs/report.md (`kestrel.report.metrics` is that definition).
"""

from kestrel.report.equity import EquityCurve, mark_equity
from kestrel.report.metrics import Metrics, compute, max_drawdown, sharpe_sortino
from kestrel.report.run import (
    BASELINES,
    DayInput,
    DayReport,
    RunHeader,
    RunReport,
    TurnRow,
    build,
    from_ledger,
    from_result,
    session_ticks,
)
from kestrel.report.portfolio import Attribution, PortfolioReport, portfolio_report
from kestrel.report.source import data_sha256, file_sha256
from kestrel.report.trips import LedgerFacts, NoticeRow, RoundTrip, local_time, read_ledger
from kestrel.report.universe_baselines import ReferencePortfolio, cash, equal_weight, reference_portfolios

__all__ = [
    "Attribution",
    "BASELINES",
    "DayInput",
    "DayReport",
    "EquityCurve",
    "LedgerFacts",
    "Metrics",
    "NoticeRow",
    "PortfolioReport",
    "ReferencePortfolio",
    "RoundTrip",
    "RunHeader",
    "RunReport",
    "TurnRow",
    "build",
    "cash",
    "compute",
    "data_sha256",
    "equal_weight",
    "file_sha256",
    "from_ledger",
    "from_result",
    "local_time",
    "mark_equity",
    "max_drawdown",
    "portfolio_report",
    "read_ledger",
    "reference_portfolios",
    "session_ticks",
    "sharpe_sortino",
]

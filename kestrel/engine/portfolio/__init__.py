"""The engine over a universe: per-symbol engines, their ticks merged in time order, one
account across them and the portfolio ledger (docs/engine.md "Portfolio runs").

- `run`: `PortfolioEngine` (sessions, plans per symbol, the merged run on both paths) and
  `run_universe`;
- `funds`: the account (`Funds`: cash, positions, working entries) and the entry check;
- `ledger`: `PortfolioLedger` and the account's events `AccountMark`, `SplitApplied`,
  `DividendPaid`.
"""

from kestrel.engine.portfolio.funds import Funds
from kestrel.engine.portfolio.ledger import AccountMark, DividendPaid, PortfolioEvent, PortfolioLedger, SplitApplied
from kestrel.engine.portfolio.run import PortfolioEngine, run_universe

__all__ = ["AccountMark", "DividendPaid", "Funds", "PortfolioEngine", "PortfolioEvent", "PortfolioLedger",
           "SplitApplied", "run_universe"]

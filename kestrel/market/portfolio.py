"""The account of a portfolio session: one cash balance across a universe of instruments.

Definitions (docs/engine.md states them once):
- cash = capital - the sum over fills of signed quantity x price x multiplier - fees + dividends
  paid on held shares;
- a holding's value = position x mark x multiplier, marked at the touch (bid for a long, ask for
  a short);
- equity = cash + the sum of values; gross = the sum of |value|; net = the sum of values;
- open positions = holdings whose position is not 0.

Money is in the universe's one currency; quantities in units of each instrument (an `int` for a
whole lot).
"""

from __future__ import annotations

from typing import Literal

import msgspec


class Holding(msgspec.Struct, frozen=True):
    """One symbol's line of the account at an instant."""

    symbol: str
    position: int | float = 0
    avg_entry: float | None = None
    mark: float | None = None
    value: float = 0.0
    upnl: float = 0.0
    rpnl: float = 0.0
    fees: float = 0.0


class PortfolioState(msgspec.Struct, frozen=True):
    """The account at an instant: `holdings` one per symbol of the universe, in its order."""

    currency: str
    capital: float
    cash: float
    equity: float
    gross: float
    net: float
    open_positions: int
    holdings: tuple[Holding, ...] = ()


class PortfolioBounds(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The operator's bounds over the whole account (a plan may only tighten them).

    `capital` the starting cash; `max_gross` the largest gross exposure as a multiple of equity
    (1.0: no leverage); `max_open` the most symbols held at once (None: no bound);
    `session_maxloss` the loss from the session's opening equity that stands every plan down
    (None: no bound); `no_short` refuses any order that would open or grow a short;
    `lookback` what a plan's windows and indicators look back over: `run` (the default) the
    symbol's ticks of the run's earlier sessions as well as the session's, `session` the
    session's alone (each session then starts cold, as a single-symbol session)."""

    capital: float
    max_gross: float = 1.0
    max_open: int | None = None
    session_maxloss: float | None = None
    no_short: bool = False
    lookback: Literal["run", "session"] = "run"

    def __post_init__(self) -> None:
        if not (self.capital > 0 and self.capital < float("inf")):
            raise ValueError(f"capital must be a finite amount > 0, got {self.capital}")
        if not (self.max_gross > 0 and self.max_gross < float("inf")):
            raise ValueError(f"max_gross must be a finite multiple > 0, got {self.max_gross}")
        if self.max_open is not None and self.max_open < 1:
            raise ValueError(f"max_open must be >= 1, got {self.max_open}")
        if self.session_maxloss is not None and not (self.session_maxloss > 0):
            raise ValueError(f"session_maxloss must be > 0, got {self.session_maxloss}")
        if self.lookback not in ("run", "session"):
            raise ValueError(f"lookback must be 'run' or 'session', got {self.lookback!r}")

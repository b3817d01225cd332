"""The reference portfolios of a universe run, computed from the universe alone (no engine, no
agent): **equal-weight buy-and-hold** and **cash**.

Equal-weight buy-and-hold over a run's sessions, with starting capital C over N members:
- each member gets C / N; it buys at its first tick of the run (the first session's open, or
  its own first open when it has no bar then) at that tick's ask (for daily bars the bar's
  open), as many whole lots (its lot size) as C / N buys at that price times its multiplier;
  a member whose price exceeds its share buys nothing;
- what the buys leave of C stays cash; nothing is bought or sold again, and no fee is paid;
- on a split's ex-date (`Universe.splits`) the holding becomes position x ratio, floored to whole
  lots, the fraction of a lot left over paid in cash at the member's last price before the
  split divided by the ratio (cash in lieu, as the engine pays it); on a dividend's ex-date
  (`Universe.dividends`) cash grows by position x amount per share x multiplier; both from the
  member's first tick of that session;
- it is marked at every merged tick as any portfolio run (`kestrel.report.portfolio_marks`).

Cash never trades: its equity is C at every tick. Both depend on nothing but the universe, the
sessions and C, so a leaderboard's reference rows are the same whichever agents it holds.
Quantities are exact in lots (decimal arithmetic); money is rounded to the run's quantum.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

import numpy as np

from kestrel.market.corporate import Dividend, Split
from kestrel.market.session import SessionSpec
from kestrel.market.universe import Universe
from kestrel.report.portfolio_marks import (
    AccountCurve,
    MergedTicks,
    PositionPath,
    mark_account,
    max_drawdown,
    merge_ticks,
    money_quantum,
    run_sessions,
)

EQUAL_WEIGHT = "equal-weight buy-and-hold"
CASH = "cash"
REFERENCE_PORTFOLIOS = (EQUAL_WEIGHT, CASH)


@dataclass(frozen=True)
class Purchase:
    """One member's buy of the equal-weight portfolio (qty 0: its share buys no lot)."""

    symbol: str
    ts: int | None  # None: no tick in the run
    price: float | None
    qty: Decimal


@dataclass(frozen=True)
class ReferencePortfolio:
    """A reference portfolio's account over a run: its `curve`, final equity, net PnL,
    return on capital, max drawdown (from the running peak, starting at the capital)."""

    name: str
    capital: float
    curve: AccountCurve
    sessions: tuple[tuple[str, int], ...]  # (date, close ns) of the run's sessions
    purchases: tuple[Purchase, ...] = ()

    @property
    def final_equity(self) -> float:
        return float(self.curve.equity[-1]) if len(self.curve) else self.capital

    @property
    def net_pnl(self) -> float:
        return round(self.final_equity - self.capital, 9)

    @property
    def return_on_capital(self) -> float:
        return round(self.net_pnl / self.capital, 9)

    @property
    def max_drawdown(self) -> tuple[float, int | None]:
        return max_drawdown(self.curve.ts, self.curve.equity, self.capital)

    def equity_at_closes(self) -> list[tuple[str, float]]:
        """(session date, equity after its last tick) per session of the run with a tick."""
        return session_closes(self.curve, self.sessions)


def session_closes(curve: AccountCurve, sessions: tuple[tuple[str, int], ...]) -> list[tuple[str, float]]:
    """(date, equity after the session's last tick) for each (date, close ns) with a tick up to it."""
    out: list[tuple[str, float]] = []
    for date, close in sessions:
        k = int(np.searchsorted(curve.ts, close, side="right")) - 1
        if k >= 0:
            out.append((date, float(curve.equity[k])))
    return out


def _lots(amount: Decimal, lot: Decimal) -> Decimal:
    return (amount / lot).to_integral_value(rounding=ROUND_FLOOR) * lot


def _dec(x: float) -> Decimal:
    return Decimal(repr(x))


def _session_first(ticks: MergedTicks, m: int, day: dt.date) -> int | None:
    """Member m's first own tick in the run's session dated `day` (None: none that day)."""
    for k, s in enumerate(ticks.sessions):
        if s.date == day:
            idx = ticks.own_merged(m)
            own = np.flatnonzero(ticks.session_of[idx] == k)
            return int(own[0]) if own.shape[0] else None
    return None


def equal_weight(universe: Universe, capital: float, dates: Sequence[str | dt.date] | None = None, *,
                 decimals: int | None = None, ticks: MergedTicks | None = None) -> ReferencePortfolio:
    """The equal-weight buy-and-hold of `universe` over the sessions on `dates` (all when None)
    with starting `capital` (module docstring)."""
    if not (capital > 0 and capital < float("inf")):
        raise ValueError(f"capital must be a finite amount > 0, got {capital}")
    if len(universe) == 0:
        raise ValueError("the universe has no members")
    sessions = run_sessions(universe, dates)
    ticks = ticks if ticks is not None else merge_ticks(universe, sessions)
    decimals = money_quantum(universe) if decimals is None else decimals
    share = _dec(capital) / len(universe)
    quantum = Decimal(1).scaleb(-decimals)
    paths: dict[int, PositionPath] = {}
    flows: list[tuple[int, float]] = []
    purchases: list[Purchase] = []
    for m, member in enumerate(universe.members):
        if ticks.own_count(m) == 0:
            purchases.append(Purchase(member.symbol, None, None, Decimal(0)))
            continue
        k = ticks.merged_index(m, 0)
        price = float(ticks.ask[k])
        mult = _dec(float(ticks.multipliers[m]))
        lot = member.lot_size
        qty = _lots(share / (_dec(price) * mult), lot) if price > 0 else Decimal(0)
        purchases.append(Purchase(member.symbol, int(ticks.ts[k]), price, qty))
        if qty == 0:
            continue
        flows.append((k, float(-(qty * _dec(price) * mult).quantize(quantum))))
        at, pos = [0], [qty]
        held = qty
        events: list[Split | Dividend] = sorted(
            [s for s in universe.splits if s.symbol == member.symbol]
            + [d for d in universe.dividends if d.symbol == member.symbol],
            key=lambda e: (e.date, isinstance(e, Dividend)))  # a split before a dividend of its day
        for ev in events:
            own = _session_first(ticks, m, ev.date)
            if own is None or own == 0:
                continue  # outside the run, or on the day it bought (it bought at the new count)
            j = ticks.merged_index(m, own)
            if isinstance(ev, Split):
                exact = held * ev.numerator / ev.denominator
                whole = _lots(exact, lot)
                rest = exact - whole
                if rest:
                    before = float(ticks.bid[ticks.merged_index(m, own - 1)])
                    flows.append((j, float((rest * _dec(before) / ev.numerator * ev.denominator * mult)
                                           .quantize(quantum))))
                held = whole
                at.append(own)
                pos.append(held)
            else:
                flows.append((j, float((held * _dec(ev.amount) * mult).quantize(quantum))))
        paths[m] = PositionPath(np.asarray(at, dtype=np.int64), np.asarray([float(p) for p in pos], dtype=np.float64))
    curve = mark_account(ticks, capital, paths, flows, decimals=decimals)
    return ReferencePortfolio(EQUAL_WEIGHT, capital, curve, _closes(sessions), tuple(purchases))


def cash(universe: Universe, capital: float, dates: Sequence[str | dt.date] | None = None, *,
         decimals: int | None = None, ticks: MergedTicks | None = None) -> ReferencePortfolio:
    """Cash (never trades): equity `capital` at every merged tick of the run."""
    sessions = run_sessions(universe, dates)
    ticks = ticks if ticks is not None else merge_ticks(universe, sessions)
    decimals = money_quantum(universe) if decimals is None else decimals
    return ReferencePortfolio(CASH, capital, mark_account(ticks, capital, {}, [], decimals=decimals),
                              _closes(sessions))


def _closes(sessions: Sequence[SessionSpec]) -> tuple[tuple[str, int], ...]:
    return tuple((s.date.isoformat(), s.close_ns) for s in sessions)


def reference_portfolios(universe: Universe, capital: float, dates: Sequence[str | dt.date] | None = None, *,
                         decimals: int | None = None) -> dict[str, ReferencePortfolio]:
    """Both reference portfolios of a run, on one set of merged ticks."""
    ticks = merge_ticks(universe, run_sessions(universe, dates))
    return {EQUAL_WEIGHT: equal_weight(universe, capital, dates, decimals=decimals, ticks=ticks),
            CASH: cash(universe, capital, dates, decimals=decimals, ticks=ticks)}


__all__ = ["CASH", "EQUAL_WEIGHT", "REFERENCE_PORTFOLIOS", "Purchase", "ReferencePortfolio", "cash",
           "equal_weight", "reference_portfolios", "session_closes"]

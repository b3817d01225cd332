"""The frozen universe: every member's market as of one cutoff, the account, and the briefing of
a universe (its default view, view resolution and materialization over it).

`freeze_universe(universe, cutoff_ns, state)` is `freeze` (`kestrel.frame.snapshot`) for every
member at once. Invariants:
- each member is a `FrozenSnapshot` of its **adjusted** series holding only ticks with
  `ts <= cutoff_ns`, over the universe's sessions up to the ordinal time (`time_ns`, the cutoff
  when not given): a session the member has no tick in is an empty session of its snapshot,
  never filled in;
- the adjustment is point in time: a member with factor rows shows its adjusted prices divided
  by the adjustment factor of the cutoff's exchange date (of the instant 1 ns before it; sizes
  times its split factor), so every price reads on the scale of that date (today's prices are
  the raw ones), re-based by exactly the events known strictly before the cutoff, and a factor
  row of a later event (a split after the cutoff) cannot change a briefing; without factor
  rows, or when that factor is 1, the ticks are read-only views (no copy);
- `missing[i]` are the universe sessions wholly before the cutoff, from member i's first tick's
  session on, in which it has no tick (a missing bar is said, never forward-filled);
- the account (`PortfolioState`), the incumbent plans per symbol, news and corporate events
  (cut strictly before the cutoff) and the broker's notices (those at or before it) ride along;
- `blind` (`kestrel.frame.blind`, fixed once per run from the universe) changes how values
  print: each symbol its own alias and price scale, dates as session numbers.

Views over a universe (its default view, resolution, materialization, the briefing) are
`kestrel.frame.universe_view`, re-exported by `kestrel.frame`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kestrel.frame.blind import Blind
from kestrel.frame.corporate import NO_EVENTS, CorporateEvent, CorporateEvents
from kestrel.frame.snapshot import FrozenSnapshot, readonly
from kestrel.lang.ast import Plan
from kestrel.market.account import FLAT, AccountState, Notice
from kestrel.market.corporate import Dividend, Split, factors_on
from kestrel.market.data import MarketData
from kestrel.market.instrument import money_text
from kestrel.market.news import NO_NEWS, NewsFeed
from kestrel.market.portfolio import Holding, PortfolioBounds, PortfolioState
from kestrel.market.session import NS_PER_DAY, SessionSpec
from kestrel.market.terms import DEFAULT_TERMS, Terms
from kestrel.market.ticks import I64, Ticks
from kestrel.market.universe import Member, Universe

@dataclass(frozen=True, slots=True)
class UniverseSnapshot:
    """The universe at `cutoff_ns` (inclusive): see the module docstring."""

    members: tuple[FrozenSnapshot, ...]
    missing: tuple[tuple[dt.date, ...], ...]
    cutoff_ns: int
    time_ns: int
    portfolio: PortfolioState | None = None
    terms: Terms = DEFAULT_TERMS
    bounds: PortfolioBounds | None = None
    notices: tuple[Notice, ...] = ()
    news: NewsFeed = NO_NEWS
    events: CorporateEvents = NO_EVENTS
    blind: Blind | None = None
    calendar: str = ""

    @property
    def symbols(self) -> tuple[str, ...]:
        """The real symbols, in universe order."""
        return tuple(m.data.symbol for m in self.members)

    @property
    def shown_symbols(self) -> tuple[str, ...]:
        """The symbols as the agent reads them (aliases in blind mode)."""
        return tuple(m.symbol for m in self.members)

    @property
    def clock(self) -> FrozenSnapshot:
        """A member's snapshot, for the universe's clock: every member has the same sessions."""
        return self.members[0]

    @property
    def sessions(self) -> tuple[SessionSpec, ...]:
        return self.clock.data.sessions

    @property
    def session(self) -> SessionSpec | None:
        return self.clock.session

    @property
    def session_index(self) -> int:
        return self.clock.session_index

    def member(self, word: str) -> FrozenSnapshot | None:
        """The member `word` names (its symbol or, in blind mode, its alias; case aside)."""
        w = word.strip().upper()
        for m in self.members:
            if w == m.symbol.upper() or (self.blind is None and w == m.data.symbol.upper()):
                return m
        return None

    def missing_of(self, symbol: str) -> tuple[dt.date, ...]:
        return self.missing[self.symbols.index(symbol)]

    def holding(self, symbol: str) -> Holding | None:
        if self.portfolio is None:
            return None
        for h in self.portfolio.holdings:
            if h.symbol == symbol:
                return h
        return None

    @property
    def currency(self) -> str:
        if self.portfolio is not None:
            return self.portfolio.currency
        return self.members[0].data.instrument.currency

    def format_money(self, amount: float, signed: bool = False) -> str:
        """Account money at the currency's precision (in blind mode the panes print account money
        as shares of equity or of the capital instead: see the portfolio pane)."""
        return money_text(amount, self.currency, signed)


# ------------------------------------------------------------------------------------------
# freezing


def corporate_events(universe: Universe) -> CorporateEvents:
    """Every split and dividend of the universe, each known from the start of its ex-date."""
    return _events(universe.splits, universe.dividends, universe.sessions)


@lru_cache(maxsize=16)
def _events(splits: tuple[Split, ...], dividends: tuple[Dividend, ...],
            sessions: tuple[SessionSpec, ...]) -> CorporateEvents:
    return CorporateEvents.of(splits, dividends, sessions)


def cutoff_factor(member: Member, sched: Schedule, cutoff_ns: int) -> tuple[float, float]:
    """(price factor, split factor) for `member` of the exchange date of the instant 1 ns before
    the cutoff (its date in the zone of the first session closing after it, as the adjustment
    dates a tick): the date of every event known strictly before the cutoff, so the prices are
    re-based by exactly the events the snapshot shows; (1, 1) without factor rows."""
    if not member.factor_rows or not sched.sessions:
        return 1.0, 1.0
    before = cutoff_ns - 1  # the last instant strictly before the cutoff: the events known by it
    k = min(int(np.searchsorted(sched.closes, before, side="right")), len(sched.sessions) - 1)
    day = (before + int(sched.offsets[k])) // NS_PER_DAY
    pf, sf = factors_on(member.factor_rows, np.array([day], dtype=np.int64))
    return float(pf[0]), float(sf[0])


def _member_ticks(member: Member, cutoff_ns: int, factor: tuple[float, float]) -> Ticks:
    """The member's adjusted ticks up to the cutoff on the cutoff date's scale (module
    docstring), read-only."""
    t = member.adjusted.ticks.until(cutoff_ns)
    pf, sf = factor
    f = pf * sf
    if f == 1.0 and sf == 1.0:
        return Ticks(readonly(t.ts), readonly(t.bid), readonly(t.ask), readonly(t.last), readonly(t.size))
    return Ticks(readonly(t.ts), readonly(t.bid / f), readonly(t.ask / f), readonly(t.last / f),
                 readonly(t.size * sf))


def missing_sessions(ticks: Ticks, opens: I64, closes: I64, sessions: tuple[SessionSpec, ...],
                     cutoff_ns: int) -> tuple[dt.date, ...]:
    """The sessions closed by the cutoff (close <= cutoff + 1 ns), from the one of the first
    tick on, without a tick."""
    if len(ticks) == 0 or not sessions:
        return ()
    lo = np.searchsorted(ticks.ts, opens, side="left")
    hi = np.searchsorted(ticks.ts, closes, side="left")
    first = int(np.searchsorted(closes, int(ticks.ts[0]), side="right"))  # the first tick's session
    done = closes <= cutoff_ns + 1
    idx = np.flatnonzero((hi == lo) & done)
    return tuple(sessions[i].date for i in idx[idx >= first].tolist())


@dataclass(frozen=True, slots=True)
class Schedule:
    """A session schedule with its open, close and offset arrays (read-only), computed once."""

    sessions: tuple[SessionSpec, ...]
    opens: I64
    closes: I64
    offsets: I64


@lru_cache(maxsize=16)
def schedule(sessions: tuple[SessionSpec, ...]) -> Schedule:
    """The arrays of `sessions` (cached: a run freezes over one universe's schedule)."""
    arrays = [readonly(np.array([getattr(s, f) for s in sessions], dtype=np.int64))
              for f in ("open_ns", "close_ns", "utc_offset_ns")]
    return Schedule(sessions, arrays[0], arrays[1], arrays[2])


def _on_schedule(template: MarketData, ticks: Ticks, sched: Schedule, k: int) -> MarketData:
    """`template` (its symbol, tick size, instrument) holding `ticks` over the first `k` sessions
    of `sched`: MarketData's invariants hold by construction (the schedule's arrays are its
    sessions', sliced), so its fields are set rather than recomputed from every session."""
    out = MarketData.__new__(MarketData)
    for name, value in (("symbol", template.symbol), ("tick_size", template.tick_size), ("ticks", ticks),
                        ("sessions", sched.sessions[:k]), ("crossed_kept", template.crossed_kept),
                        ("instrument", template.instrument), ("price_decimals", template.price_decimals),
                        ("session_open_ns", sched.opens[:k]), ("session_close_ns", sched.closes[:k]),
                        ("session_offset_ns", sched.offsets[:k])):
        object.__setattr__(out, name, value)
    return out


def _account(h: Holding | None) -> AccountState:
    if h is None:
        return FLAT
    return AccountState(position=h.position, avg_entry=h.avg_entry, upnl=h.upnl, rpnl=h.rpnl, fees=h.fees)


def freeze_universe(
    universe: Universe,
    cutoff_ns: int,
    state: PortfolioState | None = None,
    *,
    time_ns: int | None = None,
    plans: Mapping[str, Plan] | None = None,
    accounts: Mapping[str, AccountState] | None = None,
    terms: Terms = DEFAULT_TERMS,
    bounds: PortfolioBounds | None = None,
    notices: tuple[Notice, ...] = (),
    news: NewsFeed = NO_NEWS,
    blind: Blind | None = None,
) -> UniverseSnapshot:
    """Freeze every member of `universe` at `cutoff_ns` (inclusive; see the module docstring).

    `time_ns` is the ordinal's instant (default: the cutoff): the sessions opened at or before
    it are the schedule (at OPEN, today's session with no tick yet). `state` is the account;
    each member's `AccountState` is its holding's unless `accounts` gives it (with working
    orders); `plans` the incumbent plan per symbol. Notices after the cutoff are dropped; news
    and corporate events are cut strictly before it."""
    if not universe.members:
        raise ValueError("a universe snapshot needs at least one member")
    now = cutoff_ns if time_ns is None else int(time_ns)
    if now < cutoff_ns:
        raise ValueError(f"the ordinal time {now} is before the cutoff {cutoff_ns}")
    sched = schedule(universe.sessions)
    k = int(np.searchsorted(sched.opens, now, side="right"))
    sessions = sched.sessions[:k]
    opens, closes = sched.opens[:k], sched.closes[:k]
    held = {h.symbol: h for h in state.holdings} if state is not None else {}
    cut_news = news.before(cutoff_ns)
    known = corporate_events(universe).before(cutoff_ns)
    members: list[FrozenSnapshot] = []
    missing: list[tuple[dt.date, ...]] = []
    by_symbol: dict[str, list[CorporateEvent]] = {}
    for e in known.items:
        by_symbol.setdefault(e.symbol, []).append(e)
    shown = universe.members if blind is None else [  # blind: in alias order, not the real symbols'
        universe[s] for s in blind.shown_order([m.symbol for m in universe.members])]
    for m in shown:
        ticks = _member_ticks(m, cutoff_ns, cutoff_factor(m, sched, cutoff_ns))
        data = _on_schedule(m.adjusted, ticks, sched, k)
        account = (accounts or {}).get(m.symbol) or _account(held.get(m.symbol))
        members.append(FrozenSnapshot(
            data, cutoff_ns, now, account, (plans or {}).get(m.symbol), terms, (), cut_news, blind,
            CorporateEvents(tuple(by_symbol.get(m.symbol, ())))))
        missing.append(missing_sessions(ticks, opens, closes, sessions, cutoff_ns))
    seen = tuple(n for n in notices if n.ts <= cutoff_ns)
    return UniverseSnapshot(tuple(members), tuple(missing), cutoff_ns, now, state, terms, bounds, seen, cut_news,
                            known, blind, universe.calendar)


__all__ = ["Schedule", "UniverseSnapshot", "corporate_events", "cutoff_factor", "freeze_universe",
           "missing_sessions", "schedule"]

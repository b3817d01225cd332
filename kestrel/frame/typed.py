"""The typed snapshot: what a briefing says, as msgspec Structs, for agents that compute.

A custom agent (code, not a language model) reads `AuthorRequest.snapshot`, a `TypedSnapshot`,
instead of parsing numbers out of the briefing's text. It is built from the same frozen
snapshot as the briefing and holds the same values the default view and the kernel panes
render (`typed_snapshot` is a pure function of the snapshot and the ordinal, byte-stable when
encoded):

- `clock`: the ordinal, now (its instant), the cutoff and the session's open and close;
- `quote`: the last tick at or before the cutoff (None when there is none yet) with the
  session's open, vwap and volume so far and the prior session's close;
- `bars`: the default view's bars (`bars_tf_s`: 30-minute bars of the prior session at OPEN,
  else the last hour of 5-minute bars; the last may be `forming`);
- `account` (`AccountState`), `instrument` (`Instrument`), `bounds` and `friction` (the terms,
  `kestrel.market.terms`), `notices` (the broker's since the last turn) and `plan` (the
  incumbent plan's canonical text, None when there is none).
Prices are floats on the instrument's tick grid as the panes print them; times are ns UTC with
the session's wall clock beside them (`hh:mm:ss`). In blind mode (`kestrel.frame.blind`) every
value is the briefing's blind one: the alias, session numbers for dates (`date` is `d<k>`),
blind instants for times, rescaled prices, tick size, volumes, money, bounds and fees.
"""

from __future__ import annotations

import msgspec
import numpy as np

from kestrel.frame.ordinal import Ordinal
from kestrel.frame.panes import bar_forming, format_plan, recent_bars, session_vwap
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.universe import UniverseSnapshot
from kestrel.frame.watchlist import WatchValues, print_session_label, reference_session, watch_values
from kestrel.market.account import AccountState, Notice
from kestrel.market.corporate import Split
from kestrel.market.instrument import Instrument
from kestrel.market.portfolio import PortfolioBounds
from kestrel.market.terms import Bounds, Friction
from kestrel.market.ticks import NS_PER_S

OPEN_BARS = (1800, 13)
"""(timeframe seconds, count) of the bars at OPEN: the prior session's shape."""
LATER_BARS = (300, 12)
"""(timeframe seconds, count) of the bars at later ordinals: the last hour."""


class Clock(msgspec.Struct, frozen=True, kw_only=True):
    """The ordinal (`index` 0 is OPEN, `label` as the briefing says it), its instant
    `now_ns`, the snapshot's `cutoff_ns` and the session's `open_ns`/`close_ns` (ns UTC), with
    the session's `date` (ISO) and time zone, and `now`/`cutoff` on its wall clock."""

    index: int
    label: str
    now_ns: int
    cutoff_ns: int
    open_ns: int | None
    close_ns: int | None
    date: str | None
    tz: str | None
    now: str
    cutoff: str


class Quote(msgspec.Struct, frozen=True, kw_only=True):
    """The last tick at or before the cutoff, and the session so far."""

    ts: int
    time: str
    bid: float
    ask: float
    last: float
    size: float
    spread: float
    session_open: float | None = None
    vwap: float | None = None
    volume: float | None = None
    prior_close: float | None = None


class Bar(msgspec.Struct, frozen=True, kw_only=True):
    """One OHLCV bar starting at `start_ns` (`time`: its wall-clock start, dated `mm-dd hh:mm`
    or `mm-dd` as the bars pane prints it when the bars span days)."""

    start_ns: int
    time: str
    open: float
    high: float
    low: float
    close: float
    volume: float
    vwap: float
    forming: bool = False


class TypedSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """The briefing's facts, typed (see the module docstring)."""

    symbol: str
    clock: Clock
    quote: Quote | None
    bars_tf_s: int
    bars: tuple[Bar, ...]
    account: AccountState
    instrument: Instrument
    bounds: Bounds
    friction: Friction
    notices: tuple[Notice, ...] = ()
    plan: str | None = None


def _price(snap: FrozenSnapshot, x: float) -> float:
    """`x` as the panes print it (the instrument's precision; the blind scale in blind mode)."""
    return snap.price_value(x)


def _ns(snap: FrozenSnapshot, ts: int) -> int:
    """An instant as the agent reads it (a blind instant in blind mode)."""
    return ts if snap.blind is None else snap.blind.instant(ts)


def _quote(snap: FrozenSnapshot) -> Quote | None:
    t = snap.ticks
    if len(t) == 0:
        return None
    i = len(t) - 1
    bid, ask = float(t.bid[i]), float(t.ask[i])
    today = snap.session_ticks()
    prior = snap.session_ticks(snap.session_index - 1)
    return Quote(
        ts=_ns(snap, int(t.ts[i])), time=snap.stamp(int(t.ts[i])), bid=_price(snap, bid), ask=_price(snap, ask),
        last=_price(snap, float(t.last[i])), size=snap.volume(float(t.size[i])), spread=_price(snap, ask - bid),
        session_open=_price(snap, float(today.last[0])) if len(today) else None,
        vwap=_price(snap, session_vwap(today)) if len(today) else None,
        volume=snap.volume(float(np.sum(today.size))) if len(today) else None,
        prior_close=_price(snap, float(prior.last[-1])) if len(prior) else None,
    )


def _local(snap: FrozenSnapshot, start_ns: int, local_ns: int) -> tuple[str, str]:
    """(`mm-dd` or `d<k>`, `hh:mm`) of a bar starting at `start_ns` (`local_ns`: its wall-clock
    instant, ns since the local epoch)."""
    sod = (local_ns // NS_PER_S) % 86_400
    return snap.day_label(start_ns), f"{sod // 3600:02d}:{sod // 60 % 60:02d}"


def _bars(snap: FrozenSnapshot, tf_s: int, n: int) -> tuple[Bar, ...]:
    bars = recent_bars(snap, tf_s, n)
    cur = snap.session
    labels = [_local(snap, int(bars.start_ns[j]), int(bars.local_ns[j])) for j in range(len(bars))]
    # dated when the bars start on another day than the session's (the pane's rule)
    dated = bool(labels) and cur is not None and labels[0][0] != snap.day_label(cur.open_ns)
    out = []
    for j, (md, hm) in enumerate(labels):
        start = int(bars.start_ns[j])
        out.append(Bar(
            start_ns=_ns(snap, start), time=md if tf_s >= 86_400 else (f"{md} {hm}" if dated else hm),
            open=_price(snap, float(bars.open[j])), high=_price(snap, float(bars.high[j])),
            low=_price(snap, float(bars.low[j])), close=_price(snap, float(bars.close[j])),
            volume=snap.volume(float(bars.volume[j])), vwap=_price(snap, float(bars.vwap[j])),
            forming=bar_forming(snap, start, tf_s),
        ))
    return tuple(out)


def typed_snapshot(snap: FrozenSnapshot, ordinal: Ordinal) -> TypedSnapshot:
    """The typed facts of `snap` at `ordinal` (see the module docstring)."""
    s = snap.session
    tf_s, n = OPEN_BARS if ordinal.index == 0 else LATER_BARS
    blind, real = snap.blind, snap.data.symbol
    account, terms, notices, plan, instrument = snap.account, snap.terms, snap.notices, snap.plan, snap.data.instrument
    if blind is not None:
        account, terms = blind.account(account, real), blind.terms(terms, real)
        notices = tuple(blind.notice(x) for x in notices)
        plan = blind.plan_to_blind(plan, real) if plan is not None else None
        instrument = msgspec.structs.replace(instrument, symbol=snap.symbol,
                                             tick_size=blind.price(real).blind_unit)
    return TypedSnapshot(
        symbol=snap.symbol,
        clock=Clock(
            index=ordinal.index, label=ordinal.label, now_ns=_ns(snap, snap.time_ns),
            cutoff_ns=_ns(snap, snap.cutoff_ns),
            open_ns=_ns(snap, s.open_ns) if s is not None else None,
            close_ns=_ns(snap, s.close_ns) if s is not None else None,
            date=snap.session_label() if s is not None else None, tz=s.tz if s is not None else None,
            now=snap.clock(snap.time_ns), cutoff=snap.clock(snap.cutoff_ns),
        ),
        quote=_quote(snap),
        bars_tf_s=tf_s,
        bars=_bars(snap, tf_s, n),
        account=account,
        instrument=instrument,
        bounds=terms.bounds,
        friction=terms.friction,
        notices=notices,
        plan=format_plan(plan) if plan is not None else None,
    )


# ------------------------------------------------------------------------------------------
# a universe


class MemberFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One member as the watchlist states it: its last price and when (`last_time`, dated as
    the panes date it), the session that print belongs to (`session`: the reference, or the
    next one for a pre-market print; ISO date or `d<k>`), whether it has a bar in the reference
    session, its percent changes against the closes 1 and 5 sessions before `session` and
    relative volume (None where the pane prints `n/a`), the sessions it lacks (`missing`,
    session labels), its quote, instrument, position and incumbent plan."""

    symbol: str
    last: float | None
    last_time: str | None
    session: str | None
    has_bar: bool
    chg1: float | None
    chg5: float | None
    rvol: float | None
    missing: tuple[str, ...]
    quote: Quote | None
    instrument: Instrument
    position: int | float = 0
    plan: str | None = None


class HoldingFacts(msgspec.Struct, frozen=True, kw_only=True):
    """An open position as the portfolio pane shows it (prices and money in its symbol's scale)."""

    symbol: str
    position: int | float
    avg_entry: float | None
    mark: float | None
    value: float
    upnl: float


class AccountFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The account: money (None in blind mode, where only the relative figures are given), the
    exposure as multiples of equity, equity as percent of the starting capital, cash as percent
    of equity, and the open positions."""

    currency: str
    open_positions: int
    holdings: tuple[HoldingFacts, ...]
    cash: float | None
    equity: float | None
    gross: float | None
    net: float | None
    equity_pct_of_capital: float | None
    cash_pct_of_equity: float | None
    gross_x: float | None
    net_x: float | None


class EventFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A corporate event known before the cutoff: its symbol, ex-date (ISO, or `d<k>` blind),
    kind, split ratio (`7:1`) or dividend amount per share."""

    symbol: str
    date: str
    kind: str
    ratio: str | None = None
    amount: float | None = None


class TypedUniverse(msgspec.Struct, frozen=True, kw_only=True):
    """A universe briefing's facts, typed (see `typed_universe`). In blind mode `bounds`,
    `friction` and `portfolio_bounds` are None (their money is in no one symbol's scale; the
    RULES pane says which bounds are set)."""

    clock: Clock
    reference: str | None
    members: tuple[MemberFacts, ...]
    account: AccountFacts | None
    bounds: Bounds | None
    friction: Friction | None
    portfolio_bounds: PortfolioBounds | None
    notices: tuple[Notice, ...] = ()
    events: tuple[EventFacts, ...] = ()


def _ratio(x: float, of: float, scale: float = 1.0) -> float | None:
    return round(scale * x / of, 4) if of > 0 else None


def _account_facts(u: UniverseSnapshot) -> AccountFacts | None:
    p = u.portfolio
    if p is None:
        return None
    by = {m.data.symbol: m for m in u.members}
    holdings = []
    for h in p.holdings:
        m = by.get(h.symbol)
        if h.position == 0 or m is None:
            continue
        money = (lambda x: m.blind.money[h.symbol].value(x)) if m.blind is not None else (lambda x: x)
        holdings.append(HoldingFacts(
            symbol=m.symbol, position=h.position,
            avg_entry=_price(m, h.avg_entry) if h.avg_entry is not None else None,
            mark=_price(m, h.mark) if h.mark is not None else None, value=money(h.value), upnl=money(h.upnl)))
    real = u.blind is None
    return AccountFacts(
        currency=p.currency, open_positions=p.open_positions, holdings=tuple(holdings),
        cash=p.cash if real else None, equity=p.equity if real else None, gross=p.gross if real else None,
        net=p.net if real else None, equity_pct_of_capital=_ratio(p.equity, p.capital, 100.0),
        cash_pct_of_equity=_ratio(p.cash, p.equity, 100.0), gross_x=_ratio(p.gross, p.equity),
        net_x=_ratio(p.net, p.equity))


def _event_facts(u: UniverseSnapshot) -> tuple[EventFacts, ...]:
    by = {m.data.symbol: m for m in u.members}
    out = []
    for e in u.events.newest_first():
        m = by[e.symbol]
        ev = e.event
        date = e.date.isoformat() if m.blind is None else m.blind.day(e.ts)
        if isinstance(ev, Split):
            out.append(EventFacts(symbol=m.symbol, date=date, kind="split", ratio=f"{ev.numerator}:{ev.denominator}"))
        else:
            out.append(EventFacts(symbol=m.symbol, date=date, kind="dividend", amount=_price(m, ev.amount)))
    return tuple(out)


def typed_universe(u: UniverseSnapshot, ordinal: Ordinal) -> TypedUniverse:
    """The typed facts of a universe snapshot at `ordinal`: the clock, per member the watchlist's
    values with its quote, instrument, position and plan, the account, the terms, the notices
    and the corporate events known before the cutoff, newest first (in blind mode every value is
    the briefing's blind one)."""
    clock = typed_snapshot(u.clock, ordinal).clock
    r = reference_session(u.clock)
    members = []
    for m, missing in zip(u.members, u.missing):
        v = watch_values(m, r) if r >= 0 else WatchValues()
        real = m.data.symbol
        instrument = m.data.instrument
        plan = m.plan
        if m.blind is not None:
            instrument = msgspec.structs.replace(instrument, symbol=m.symbol, tick_size=m.blind.price(real).blind_unit)
            plan = m.blind.plan_to_blind(plan, real) if plan is not None else None
        labels = tuple(m.day_label(s.open_ns) for s in m.data.sessions if s.date in set(missing))
        members.append(MemberFacts(
            symbol=m.symbol, last=_price(m, v.last) if v.last is not None else None,
            last_time=m.dated(v.last_ts) if v.last_ts is not None else None,
            session=print_session_label(m, v), has_bar=v.has_bar,
            chg1=v.chg1, chg5=v.chg5, rvol=v.rvol, missing=labels, quote=_quote(m), instrument=instrument,
            position=m.account.position, plan=format_plan(plan) if plan is not None else None))
    blind = u.blind
    notices = u.notices if blind is None else tuple(blind.notice(x) for x in u.notices)
    return TypedUniverse(
        clock=clock, reference=u.clock.session_label_of(r) if r >= 0 else None, members=tuple(members),
        account=_account_facts(u), bounds=u.terms.bounds if blind is None else None,
        friction=u.terms.friction if blind is None else None,
        portfolio_bounds=u.bounds if blind is None else None, notices=notices, events=_event_facts(u))


__all__ = ["LATER_BARS", "OPEN_BARS", "AccountFacts", "Bar", "Clock", "EventFacts", "HoldingFacts", "MemberFacts",
           "Quote", "TypedSnapshot", "TypedUniverse", "typed_snapshot", "typed_universe"]

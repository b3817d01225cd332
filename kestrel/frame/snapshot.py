"""Frozen snapshots: the market as of a cutoff, with no way to reach later data.

Invariants:
- `data` holds only ticks with ts <= cutoff_ns; its sessions are the schedule up to the
  ordinal time `time_ns` (sessions opened at or before it: a schedule is public, not data), so
  at the OPEN ordinal the current session is today's, still without ticks;
- its arrays are read-only views on the source arrays (no copy; freezing is O(sessions));
  a view's numpy `.base` still leads to the whole array: the guarantee covers the snapshot's
  API and every pane (what the agent reads), it is not a sandbox against code holding it;
- the snapshot is immutable; everything a pane renders is a pure function of it;
- `news` holds only the items published strictly before the cutoff (`NewsFeed.before`), and
  `events` only the corporate events known strictly before it (`CorporateEvents.before`);
- `blind` (blind mode, `kestrel.frame.blind`) changes how the snapshot's values print (alias,
  session numbers, rescaled prices and money, masked news), never the values themselves;
- it also carries what the agent plays under: the account, the incumbent plan, the terms of
  trading (`Terms`: the operator's bounds and the fill friction) and the broker's notices since
  the agent's last turn (orders rejected, plans disarmed), all filled by the session layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar
from zoneinfo import ZoneInfo

import numpy as np

from kestrel.frame.blind import Blind
from kestrel.frame.corporate import NO_EVENTS, CorporateEvents
from kestrel.market.account import FLAT, AccountState, Notice
from kestrel.market.data import MarketData
from kestrel.market.instrument import money_text
from kestrel.market.news import NO_NEWS, NewsFeed
from kestrel.market.session import SessionSpec, zone_offset_s
from kestrel.market.terms import DEFAULT_TERMS, Terms
from kestrel.market.ticks import F64, I64, NS_PER_S, Ticks
from kestrel.lang.ast import Plan



def _zone_offset(zone: ZoneInfo, ts_ns: int) -> int:
    """`zone`'s UTC offset at the instant `ts_ns`, in ns."""
    return zone_offset_s(zone, ts_ns // NS_PER_S) * NS_PER_S

DEFAULT_GUARD_NS = 5 * 60 * NS_PER_S


@dataclass(frozen=True, slots=True)
class FrozenSnapshot:
    """The market at `cutoff_ns` (inclusive), plus the account, the incumbent plan, the terms
    of trading and the broker's notices since the last turn."""

    data: MarketData
    cutoff_ns: int
    time_ns: int
    account: AccountState = FLAT
    plan: Plan | None = None
    terms: Terms = DEFAULT_TERMS
    notices: tuple[Notice, ...] = ()
    news: NewsFeed = NO_NEWS
    blind: Blind | None = None
    events: CorporateEvents = NO_EVENTS

    @property
    def symbol(self) -> str:
        """The symbol as the agent reads it (its alias in blind mode)."""
        return self.data.symbol if self.blind is None else self.blind.alias(self.data.symbol)

    def real_symbol(self, word: str) -> str | None:
        """The real symbol `word` names in this snapshot (the symbol or its blind alias)."""
        if self.blind is not None:
            return self.blind.real_symbol(word)
        return self.data.symbol if word.upper() == self.data.symbol.upper() else None

    def mask_text(self, text: str) -> str:
        """Free text (news) as the agent reads it: names masked in blind mode."""
        return text if self.blind is None else self.blind.mask(text)

    def volume(self, real: float) -> float:
        """A volume or trade size as the agent reads it (rescaled per symbol in blind mode)."""
        return real if self.blind is None else self.blind.volume(self.data.symbol, real)

    def format_money(self, amount: float, signed: bool = False) -> str:
        """An amount of money (`+12.50` when `signed`), in the blind scale in blind mode."""
        if self.blind is not None:
            return self.blind.money_text(self.data.symbol, amount, signed)
        return money_text(amount, self.data.instrument.currency, signed)  # at its currency's precision

    def price_value(self, price: float) -> float:
        """`price` as the panes print it, as a number (blind scale in blind mode)."""
        if self.blind is not None:
            return self.blind.price(self.data.symbol).value(price)
        return round(float(price), self.data.price_decimals)

    def day_label(self, ts_ns: int) -> str:
        """`mm-dd` of the session-zone date of `ts_ns` (`d<k>`, its session number, in blind
        mode)."""
        if self.blind is not None:
            return self.blind.day(ts_ns)
        day = np.datetime64((ts_ns + self.offset_at(ts_ns)) // NS_PER_S, "s").astype("datetime64[D]").item()
        return f"{day.month:02d}-{day.day:02d}"

    def session_label(self) -> str:
        """The current session's date (ISO), or its number `d<k>` in blind mode."""
        return self.session_label_of(self.session_index)

    def session_label_of(self, index: int) -> str:
        """Session `index`'s date (ISO), or its number `d<k>` in blind mode; `none` for no session."""
        if not 0 <= index < len(self.data.sessions):
            return "none"
        s = self.data.sessions[index]
        return s.date.isoformat() if self.blind is None else self.blind.session_label(index)

    @property
    def ticks(self) -> Ticks:
        return self.data.ticks

    @property
    def session_index(self) -> int:
        """Index of the current session (the latest opened at or before the ordinal time);
        -1 if none."""
        return len(self.data.sessions) - 1

    @property
    def session(self) -> SessionSpec | None:
        return self.data.sessions[-1] if self.data.sessions else None

    def session_ticks(self, index: int | None = None) -> Ticks:
        """Ticks inside session `index` (default: the current one) up to the cutoff
        (empty when the session had not opened by the cutoff, and for an index < 0)."""
        i = self.session_index if index is None else index
        if i < 0:
            return self.data.ticks.slice(0, 0)
        return self.data.ticks.between(
            int(self.data.session_open_ns[i]), int(self.data.session_close_ns[i])
        )

    def format_price(self, price: float) -> str:
        """`price` at the instrument's precision (the blind scale's in blind mode)."""
        if self.blind is not None:
            return self.blind.price_text(self.data.symbol, price)
        return self.data.format_price(price)

    def offset_at(self, ts_ns: int) -> int:
        """`offsets_at` of one instant."""
        return int(self.offsets_at(np.array([ts_ns], dtype=np.int64))[0])

    def offsets_at(self, ts: I64) -> I64:
        """The wall-clock offset at each instant of `ts` (sorted): inside a session's hours that
        session's; between sessions (pre- and post-market, nights, weekends) its zone's at that
        instant, so a print on the morning after a clock change reads on the new clock; 0
        without sessions. The zone is asked only about gaps whose two ends it puts on different
        offsets (a clock change inside: twice a year), so the cost stays a few lookups a gap."""
        offs = self.data.session_offset_ns
        if len(offs) == 0:
            return np.zeros_like(ts)
        opens, closes = self.data.session_open_ns, self.data.session_close_ns
        idx = np.maximum(np.searchsorted(opens, ts, side="right") - 1, 0)
        out: I64 = offs[idx]
        outside = np.flatnonzero((ts < opens[idx]) | (ts >= closes[idx]))
        if outside.size == 0:
            return out
        starts = np.flatnonzero(np.diff(idx[outside], prepend=-1))  # one run per gap (ts is sorted)
        for run in np.split(outside, starts[1:]):
            zone = self.data.sessions[int(idx[run[0]])].zone
            ends = {_zone_offset(zone, int(ts[run[0]])), _zone_offset(zone, int(ts[run[-1]]))}
            if ends != {int(out[run[0]])}:
                out[run] = [_zone_offset(zone, int(t)) for t in ts[run]]
        return out

    def clock(self, ts_ns: int) -> str:
        """`hh:mm:ss` on the wall clock of the session `ts_ns` falls in."""
        sod = ((ts_ns + self.offset_at(ts_ns)) // NS_PER_S) % 86_400
        return f"{sod // 3600:02d}:{sod // 60 % 60:02d}:{sod % 60:02d}"

    def stamp(self, ts_ns: int) -> str:
        """`clock(ts_ns)`, dated `mm-dd hh:mm:ss` (its own wall-clock date) when the instant is
        before the current session's open or on another wall-clock date than the ordinal time
        (a session that spans midnight): a print of an earlier session or an earlier evening
        never reads as today's."""
        s = self.session
        if s is None:
            return self.clock(ts_ns)
        return self.day_clock(ts_ns) if ts_ns >= s.open_ns else self.dated(ts_ns)

    def day_clock(self, ts_ns: int) -> str:
        """`clock(ts_ns)`, dated `mm-dd hh:mm:ss` (`dated`: `d<k> hh:mm:ss` in blind mode) when
        the instant is on another wall-clock date than the ordinal time: a cutoff a long guard
        puts on the evening before never reads as the ordinal's day."""
        return self.clock(ts_ns) if self.wall_day(ts_ns) == self.wall_day(self.time_ns) else self.dated(ts_ns)

    def wall_day(self, ts_ns: int) -> int:
        """The wall-clock day number of `ts_ns` (days since the local epoch), on the wall clock
        of the session it falls in."""
        return (ts_ns + self.offset_at(ts_ns)) // (86_400 * NS_PER_S)

    def dated(self, ts_ns: int) -> str:
        """`mm-dd hh:mm:ss` on the wall clock of the session `ts_ns` falls in (`d<k> hh:mm:ss`
        in blind mode)."""
        return f"{self.day_label(ts_ns)} {self.clock(ts_ns)}"


_Column = TypeVar("_Column", F64, I64)


def readonly(a: _Column) -> _Column:
    """A read-only view of `a` (no copy)."""
    v = a.view()
    v.flags.writeable = False
    return v


def freeze(
    data: MarketData,
    ordinal_time_ns: int,
    guard_ns: int | float = DEFAULT_GUARD_NS,
    account: AccountState | None = None,
    plan: Plan | None = None,
    *,
    terms: Terms = DEFAULT_TERMS,
    notices: tuple[Notice, ...] = (),
    news: NewsFeed = NO_NEWS,
    blind: Blind | None = None,
    events: CorporateEvents = NO_EVENTS,
) -> FrozenSnapshot:
    """Freeze `data` at `ordinal_time_ns - guard_ns` (the T-guard cutoff, inclusive). Notices
    after the cutoff are not the snapshot's to show: they are dropped; news is cut to the items
    published strictly before the cutoff, corporate events to those known strictly before it."""
    if guard_ns < 0:
        raise ValueError(f"guard must be >= 0 ns, got {guard_ns}")
    time_ns = int(ordinal_time_ns)
    cutoff = time_ns - int(guard_ns)
    t = data.ticks.until(cutoff)
    sessions = data.sessions[: data.session_index_at(time_ns) + 1]
    ro = Ticks(readonly(t.ts), readonly(t.bid), readonly(t.ask), readonly(t.last), readonly(t.size))
    frozen = MarketData(data.symbol, data.tick_size, ro, sessions, data.crossed_kept, data.instrument)
    seen = tuple(n for n in notices if n.ts <= cutoff)
    return FrozenSnapshot(frozen, cutoff, time_ns, account if account is not None else FLAT, plan, terms, seen,
                          news.before(cutoff), blind, events.before(cutoff))

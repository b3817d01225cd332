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
blind instants for times, rescaled prices, tick size, money, bounds and fees.
"""

from __future__ import annotations

import msgspec
import numpy as np

from kestrel.frame.ordinal import Ordinal
from kestrel.frame.panes import bar_forming, format_plan, recent_bars, session_vwap
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.market.account import AccountState, Notice
from kestrel.market.instrument import Instrument
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
        last=_price(snap, float(t.last[i])), size=float(t.size[i]), spread=_price(snap, ask - bid),
        session_open=_price(snap, float(today.last[0])) if len(today) else None,
        vwap=_price(snap, session_vwap(today)) if len(today) else None,
        volume=float(np.sum(today.size)) if len(today) else None,
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
            volume=float(bars.volume[j]), vwap=_price(snap, float(bars.vwap[j])),
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


__all__ = ["LATER_BARS", "OPEN_BARS", "Bar", "Clock", "Quote", "TypedSnapshot", "typed_snapshot"]

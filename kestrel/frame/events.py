"""Corporate events as the agent reads them: the splits and dividends of the factor rows, each
known from the start of its ex-date, and the `events` pane.

An event is dated on its ex-date (the first session at the new share count, or without the
dividend); it becomes known at `ts`, the start (00:00) of that date on the wall clock of the
exchange session held on it. A snapshot cut at `cutoff` holds the events with `ts < cutoff`
(`CorporateEvents.before`), so at a session's OPEN briefing (cutoff before the open, on the
ex-date) the day's split shows, as do the point-in-time adjusted prices it re-bases
(`kestrel.frame.universe`), and an event dated after the cutoff never shows.

Format (docs/panes.md "The events pane"):

```
EVENTS all 2 of 3
2014-06-09 AAPL split 7:1
2014-05-08 AAPL dividend 3.29
```
Newest first (ties in symbol order, a split before a dividend), at most `n` lines; a dividend is
its raw amount per share at the instrument's precision; blind mode dates them by session
number (`d12`), names the alias and prints the amount in the symbol's blind price scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kestrel.frame.corporate import NO_EVENTS, CorporateEvent, CorporateEvents
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.market.corporate import Split

if TYPE_CHECKING:
    from kestrel.frame.universe import UniverseSnapshot

Args = Mapping[str, int | str]


def _ratio(s: Split) -> str:
    return f"{s.numerator}:{s.denominator}"


def event_line(snap: FrozenSnapshot, e: CorporateEvent, alias: str) -> str:
    """`2014-06-09 AAPL split 7:1` or `2014-05-08 AAPL dividend 3.29` (`snap`: the event's
    symbol's snapshot, for its precision and blind scale)."""
    when = e.date.isoformat() if snap.blind is None else snap.blind.day(e.ts)
    ev = e.event
    if isinstance(ev, Split):
        return f"{when} {alias} split {_ratio(ev)}"
    return f"{when} {alias} dividend {snap.format_price(ev.amount)}"


def render_events(events: CorporateEvents, label: str, n: int, snaps: Mapping[str, FrozenSnapshot]) -> str:
    """The pane's text over `events` (already cut and chosen), newest first, at most `n`."""
    if not events.items:
        return f"EVENTS {label} none"
    shown = events.newest_first()[:n]
    lines = [event_line(snaps[e.symbol], e, snaps[e.symbol].symbol) for e in shown]
    total = len(events.items)
    head = f"EVENTS {label} {len(shown)}" + (f" of {total}" if total > len(shown) else "")
    return "\n".join([head, *lines])


def pane_events(snap: FrozenSnapshot, args: Args) -> str:
    """The events of the session's symbol (`symbol`: `self`, `all` or the symbol)."""
    n, which = args["n"], args["symbol"]
    assert isinstance(n, int) and isinstance(which, str)
    if which not in ("self", "all") and snap.real_symbol(which) is None:
        return f"EVENTS {which}: no such symbol here; use symbol=self or {snap.symbol}"
    return render_events(snap.events, snap.symbol, n, {snap.data.symbol: snap})


def universe_events(usnap: UniverseSnapshot, args: Args) -> str:
    """The events of every member (`symbol` `self` or `all`) or of one."""
    n, which = args["n"], args["symbol"]
    assert isinstance(n, int) and isinstance(which, str)
    snaps = {m.data.symbol: m for m in usnap.members}
    if which in ("self", "all"):
        return render_events(usnap.events, "all", n, snaps)
    member = usnap.member(which)
    if member is None:
        return f"EVENTS {which}: no such symbol here; use symbol=all or a symbol of the universe"
    return render_events(usnap.events.of_symbols((member.data.symbol,)), member.symbol, n, snaps)


__all__ = ["NO_EVENTS", "CorporateEvent", "CorporateEvents", "event_line", "pane_events", "render_events",
           "universe_events"]

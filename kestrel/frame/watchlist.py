"""The universe panes of prices and of the account: `watchlist` (one line per symbol) and
`portfolio` (cash, equity, exposure, open positions).

Format (docs/panes.md "The watchlist and portfolio panes"):

```
WATCHLIST 3 at 02-19
sym    last chg1% chg5% rvol pos
AAPL 244.87  +0.27  +3.10 0.84 100
GS   654.57  -0.34  +1.94 1.10   0
HD   n/a       n/a    n/a  n/a   0 no bar; last 02-10 412.30
gaps: no bars 02-11..02-19 (6 sessions): HD
```
Prices print at the tick's precision, trailing zeros past the cent dropped. The reference
session (`at`) is the latest that opened at or before the cutoff. `last` is the member's last
price at or before the cutoff, a print of the session it belongs to (`print_session`: the one
whose hours hold it; outside them, the session whose close is on its wall-clock date, post-market,
else the next session, pre-market); `chg1%`/`chg5%` its change against the close of the session
1 and 5 before that one (`n/a` when it has no bar there: nothing is forward-filled). So at a
cutoff before the open, a member whose last price is a pre-market print changes against the
reference session's close: its row ends `pre hh:mm` (the print's time) and the header names the
session those prints precede (`WATCHLIST 3 at 02-19, pre-market 02-20`); a post-market last
price ends its row `post hh:mm`. `rvol` is the member's volume in the reference session up to
the cutoff over the mean of the same elapsed span in up to `AVG_VOLUME_SESSIONS` prior sessions
it has bars in; `pos` its position. A member without a bar in the reference session's hours says
so and shows its last bar's date and price; `gaps` groups the members by the sessions they lack
among the last `AVG_VOLUME_SESSIONS`. Dates are session numbers `d<k>` in blind mode.

```
PORTFOLIO USD cash 79244.00 equity 100128.00 gross 20884.00 0.21x net 20884.00 open 1
sym pos    avg   mark    value    upnl
AAPL 100 200.00 208.84 20884.00 +884.00
```
Open positions, largest |value| first (ties in symbol order), at most `n`, then `... k more`.
In blind mode account money is relative (equity as % of the starting capital, cash as % of
equity, exposure as multiples of equity) and a holding's prices and money are in its symbol's
blind scale.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.text import table
from kestrel.market.instrument import qty_text
from kestrel.market.portfolio import Holding

if TYPE_CHECKING:
    from kestrel.frame.universe import UniverseSnapshot

Args = Mapping[str, int | str]
AVG_VOLUME_SESSIONS = 20
CHANGE_SESSIONS = (1, 5)


def reference_session(snap: FrozenSnapshot) -> int:
    """The index of the latest session that opened at or before the cutoff (-1: none)."""
    return int(np.searchsorted(snap.data.session_open_ns, snap.cutoff_ns, side="right")) - 1


def print_session(snap: FrozenSnapshot, ts_ns: int) -> int:
    """The index of the session a print at `ts_ns` belongs to: the session whose hours hold it;
    outside session hours, the latest session opened before it when the print is on the wall-clock
    date of that session's close (post-market), else the next one (a pre-market print, or one on a
    date without a session: it precedes the next session). The next session may not be in the
    schedule yet (the index is then `len(sessions)`); 0 before the first session."""
    i = snap.data.session_index_at(ts_ns)
    if i < 0:
        return 0
    close = int(snap.data.session_close_ns[i])
    if ts_ns < close or snap.wall_day(ts_ns) == snap.wall_day(close):
        return i
    return i + 1


def print_session_label(snap: FrozenSnapshot, v: WatchValues) -> str | None:
    """The label of the session `v.last` belongs to (`session_label_of`: ISO date, `d<k>` blind);
    for a session after the schedule (a pre-market print at a cutoff whose ordinal precedes that
    session's open), the print's wall-clock date (ISO; `d<k>` blind). None without a print."""
    if v.session is None or v.last_ts is None:
        return None
    if snap.blind is not None:
        return snap.blind.session_label(v.session)
    if v.session < len(snap.data.sessions):
        return snap.session_label_of(v.session)
    return (dt.date(1970, 1, 1) + dt.timedelta(days=snap.wall_day(v.last_ts))).isoformat()


def _hours(snap: FrozenSnapshot, v: WatchValues) -> str:
    """`pre` or `post` for a last print outside the hours of the session it belongs to, else ''."""
    assert v.last_ts is not None and v.session is not None
    i = snap.data.session_index_at(v.last_ts)
    if i >= 0 and v.last_ts < int(snap.data.session_close_ns[i]):
        return ""
    return "post" if v.session == i else "pre"


class WatchValues(msgspec.Struct, frozen=True, kw_only=True):
    """One member's watchlist values at the cutoff (real prices; None where the pane prints
    `n/a`): `last` and `last_ts` its last tick at or before the cutoff, `session` the index of
    the session that print belongs to (`print_session`: the reference or, for a pre-market
    print, the one after it), `has_bar` whether it has a tick in the reference session's hours,
    `chg1`/`chg5` percent changes of `last` against the closes 1 and 5 sessions before
    `session`, `rvol` the reference session's relative volume."""

    last: float | None = None
    last_ts: int | None = None
    session: int | None = None
    has_bar: bool = False
    chg1: float | None = None
    chg5: float | None = None
    rvol: float | None = None


def _pct(now: float, then: float) -> float | None:
    return 100.0 * (now / then - 1.0) if then > 0 else None


def _rvol(snap: FrozenSnapshot, r: int) -> float | None:
    """Volume in session `r` up to the cutoff over the mean volume of the same elapsed span in up
    to `AVG_VOLUME_SESSIONS` prior sessions with bars (vectorized over the sessions)."""
    ts = snap.ticks.ts
    start = max(0, r - 2 * AVG_VOLUME_SESSIONS)  # the prior sessions with bars, from a window first
    while True:
        opens, closes = snap.data.session_open_ns[start:r], snap.data.session_close_ns[start:r]
        lo = np.searchsorted(ts, opens, side="left")
        hi = np.searchsorted(ts, closes, side="left")
        held = np.flatnonzero(hi > lo)[-AVG_VOLUME_SESSIONS:]
        if held.size >= AVG_VOLUME_SESSIONS or start == 0:
            break
        start = 0
    if held.size == 0:
        return None
    elapsed = snap.cutoff_ns - int(snap.data.session_open_ns[r])
    ends = np.minimum(np.searchsorted(ts, opens[held] + elapsed + 1, side="left"), hi[held])
    base = int(lo[held[0]])
    cum = np.concatenate(([0.0], np.cumsum(snap.ticks.size[base:])))
    same = cum[ends - base] - cum[lo[held] - base]
    ref = float(np.mean(same))
    if ref <= 0:
        return None
    return float(np.sum(snap.session_ticks(r).size)) / ref


def watch_values(snap: FrozenSnapshot, r: int) -> WatchValues:
    """The member's values against reference session `r` (see the module docstring)."""
    t = snap.ticks
    if len(t) == 0:
        return WatchValues()
    last, last_ts = float(t.last[-1]), int(t.ts[-1])
    s = print_session(snap, last_ts)
    if len(snap.session_ticks(r)) == 0:
        return WatchValues(last=last, last_ts=last_ts, session=s)
    chg: list[float | None] = []
    for k in CHANGE_SESSIONS:
        prior = snap.session_ticks(s - k) if s - k >= 0 else t.slice(0, 0)
        chg.append(_pct(last, float(prior.last[-1])) if len(prior) else None)
    return WatchValues(last=last, last_ts=last_ts, session=s, has_bar=True, chg1=chg[0], chg5=chg[1],
                       rvol=_rvol(snap, r))


def short_price(snap: FrozenSnapshot, price: float) -> str:
    """`price` at the tick's precision with trailing zeros past the cent dropped (`361.07` for
    `361.070000` on a 0.000001 tick): the same number, shorter."""
    text = snap.format_price(price)
    if "." not in text:
        return text
    whole, frac = text.split(".")
    frac = frac.rstrip("0")
    return f"{whole}.{frac.ljust(2, '0')}" if len(text.split(".")[1]) >= 2 else text


def _position(h: Holding | None, snap: FrozenSnapshot) -> str:
    pos = h.position if h is not None else snap.account.position
    return qty_text(pos, snap.data.instrument.lot_size) if pos else "0"


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def watch_row(snap: FrozenSnapshot, v: WatchValues, pos: str) -> tuple[list[str], str]:
    """One member's cells (sym, last, chg1%, chg5%, rvol, pos) from its values and its note ('',
    why the cells are empty, or `pre hh:mm`/`post hh:mm` for a last print outside session hours)."""
    if v.last is None or v.last_ts is None:
        return [snap.symbol, "n/a", "n/a", "n/a", "n/a", pos], "no bars yet"
    if not v.has_bar:
        return ([snap.symbol, "n/a", "n/a", "n/a", "n/a", pos],
                f"no bar; last {snap.day_label(v.last_ts)} {short_price(snap, v.last)}")
    hours = _hours(snap, v)
    return [snap.symbol, short_price(snap, v.last), _num(v.chg1, "+.2f"), _num(v.chg5, "+.2f"),
            _num(v.rvol, ".2f"), pos], f"{hours} {snap.clock(v.last_ts)[:5]}" if hours else ""


def _gaps(snaps: Sequence[FrozenSnapshot], missing: Sequence[tuple[dt.date, ...]], r: int) -> list[str]:
    """`gaps: no bars 02-11..02-19 (6 sessions): AAPL AMZN`: members grouped by the sessions they
    lack among the last `AVG_VOLUME_SESSIONS` up to the reference session."""
    if not snaps or r < 0:
        return []
    sessions = snaps[0].data.sessions
    window = {s.date: s for s in sessions[max(0, r - AVG_VOLUME_SESSIONS + 1): r + 1]}
    groups: dict[tuple[dt.date, ...], list[str]] = {}
    for snap, dates in zip(snaps, missing):
        recent = tuple(d for d in dates if d in window)
        if recent:
            groups.setdefault(recent, []).append(snap.symbol)
    lines = []
    for dates, names in groups.items():
        first, last = snaps[0].day_label(window[dates[0]].open_ns), snaps[0].day_label(window[dates[-1]].open_ns)
        span = first if len(dates) == 1 else f"{first}..{last}"
        n = len(dates)
        lines.append(f"gaps: no bars {span} ({n} session{'s' if n != 1 else ''}): {' '.join(names)}")
    return lines


def _next_session_label(snaps: Sequence[FrozenSnapshot], values: Sequence[WatchValues], r: int) -> str:
    """The label of the session after `r` when a member's last print is a pre-market one of it
    (`mm-dd`, `d<k>` blind), else ''."""
    pre = [v.last_ts for v in values if v.has_bar and v.session == r + 1 and v.last_ts is not None]
    if not pre:
        return ""
    sessions = snaps[0].data.sessions
    return snaps[0].day_label(sessions[r + 1].open_ns if r + 1 < len(sessions) else max(pre))


def watchlist_text(snaps: Sequence[FrozenSnapshot], positions: Sequence[str],
                   missing: Sequence[tuple[dt.date, ...]]) -> str:
    if not snaps:
        return "WATCHLIST none"
    r = reference_session(snaps[0])
    if r < 0:
        return f"WATCHLIST {len(snaps)} no session yet"
    values = [watch_values(snap, r) for snap in snaps]
    rows: list[list[str]] = []
    notes: list[str] = []
    for snap, v, pos in zip(snaps, values, positions):
        cells, note = watch_row(snap, v, pos)
        rows.append(cells)
        notes.append(note)
    lines = table(["sym", "last", "chg1%", "chg5%", "rvol", "pos"], rows)
    body = [lines[0]] + [line + (f" {note}" if note else "") for line, note in zip(lines[1:], notes)]
    head = f"WATCHLIST {len(snaps)} at {snaps[0].day_label(snaps[0].data.sessions[r].open_ns)}"
    pre = _next_session_label(snaps, values, r)
    if pre:
        head += f", pre-market {pre}"
    return "\n".join([head, *body, *_gaps(snaps, missing, r)])


def pane_watchlist(snap: FrozenSnapshot, args: Args) -> str:
    """The watchlist of a one-symbol session: its one line."""
    from kestrel.frame.universe import missing_sessions

    d = snap.data
    missing = missing_sessions(snap.ticks, d.session_open_ns, d.session_close_ns, d.sessions, snap.cutoff_ns)
    return watchlist_text([snap], [_position(None, snap)], [missing])


def universe_watchlist(usnap: UniverseSnapshot, args: Args) -> str:
    positions = [_position(usnap.holding(m.data.symbol), m) for m in usnap.members]
    return watchlist_text(usnap.members, positions, usnap.missing)


# ------------------------------------------------------------------------------------------
# the account


def _ratio(x: float, equity: float) -> str:
    return f"{x / equity:.2f}x" if equity > 0 else "n/a"


def _holding_cells(h: Holding, snap: FrozenSnapshot) -> list[str]:
    def fp(x: float) -> str:
        return short_price(snap, x)

    return [snap.symbol, qty_text(h.position, snap.data.instrument.lot_size),
            fp(h.avg_entry) if h.avg_entry is not None else "-", fp(h.mark) if h.mark is not None else "-",
            snap.format_money(h.value), snap.format_money(h.upnl, True)]


def portfolio_text(head: str, held: Sequence[tuple[Holding, FrozenSnapshot]], n: int) -> str:
    """`head`, then the open positions largest |value| first (ties in the given order), at most
    `n`."""
    order = sorted(range(len(held)), key=lambda i: (-abs(held[i][0].value), i))
    shown = [held[i] for i in order[:n]]
    if not shown:
        return head
    rows = [_holding_cells(h, s) for h, s in shown]
    lines = [head, *table(["sym", "pos", "avg", "mark", "value", "upnl"], rows)]
    if len(held) > n:
        lines.append(f"... {len(held) - n} more")
    return "\n".join(lines)


def universe_portfolio(usnap: UniverseSnapshot, args: Args) -> str:
    n = args["n"]
    assert isinstance(n, int)
    p = usnap.portfolio
    if p is None:
        return "PORTFOLIO none"
    by_symbol = {m.data.symbol: m for m in usnap.members}
    held = [(h, by_symbol[h.symbol]) for h in p.holdings if h.position != 0 and h.symbol in by_symbol]
    if usnap.blind is None:
        m = usnap.format_money
        head = (f"PORTFOLIO {p.currency} cash {m(p.cash)} equity {m(p.equity)} gross {m(p.gross)} "
                f"{_ratio(p.gross, p.equity)} net {m(p.net)} open {p.open_positions}")
    else:
        eq = f"{100.0 * p.equity / p.capital:.2f}%" if p.capital > 0 else "n/a"
        cash = f"{100.0 * p.cash / p.equity:.1f}%" if p.equity > 0 else "n/a"
        head = (f"PORTFOLIO equity {eq} of capital cash {cash} of equity gross {_ratio(p.gross, p.equity)} "
                f"net {_ratio(p.net, p.equity)} open {p.open_positions}")
    return portfolio_text(head, held, n)


def pane_portfolio(snap: FrozenSnapshot, args: Args) -> str:
    """The portfolio of a one-symbol session: its position marked at the last tick's touch (the
    session has no account cash of its own: the position pane has its PnL)."""
    n = args["n"]
    assert isinstance(n, int)
    a = snap.account
    head = f"PORTFOLIO {snap.symbol} open {1 if a.position else 0}"
    if not a.position or len(snap.ticks) == 0:
        return head
    t = snap.ticks
    mark = float(t.bid[-1]) if a.position > 0 else float(t.ask[-1])
    mult = snap.data.instrument.multiplier
    h = Holding(snap.data.symbol, a.position, a.avg_entry, mark, a.position * mark * mult, a.upnl, a.rpnl, a.fees)
    return portfolio_text(head, [(h, snap)], n)


__all__ = ["AVG_VOLUME_SESSIONS", "CHANGE_SESSIONS", "WatchValues", "pane_portfolio", "pane_watchlist", "portfolio_text",
           "print_session", "print_session_label", "reference_session", "universe_portfolio", "universe_watchlist",
           "watch_row", "watch_values", "watchlist_text"]

"""What a ledger says happened: fills, round trips with their exit reasons, rejected orders and
disarms with their reasons, and the stop/target levels that were working.

Invariants:
- a round trip runs from flat to flat (a reversal closes one and opens the next); its PnL is
  the realized PnL over it net of the fees paid during it (the reversing fill's fee counts to
  the trip it closes), as in `LedgerSummary`;
- its exit reason is read from the closing fill's order: STOP, TARGET, TRAIL, FLAT (a rule's
  FLAT), opposite entry (the other side's entry, to zero), reversal (an entry through zero),
  or for the engine's own exit orders the cause recorded at the tick the exit was placed: maxloss, end of day (session close, end of data),
  UNTIL (plan expiry), TTL; a trip still open at the end of the ledger is `carried` when the
  session hands its position to the next (`end_of_day = "carry"`), else `open`; the PnL of an
  open or carried trip is what it has realized so far, net of its fees so far;
- every `OrderRejected` and `Disarmed` event is listed with its reason, nothing is dropped;
- a session that opens with a carried position (a `carry` event) continues the trip the
  previous session carried out when it is given (`carried_from`): same entry time and price,
  its PnL and fees over the whole trip; without it the trip starts at the open, at the carried
  average. Either way the trip is flagged `carried`, and counts as a trade on the day it closes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from zoneinfo import ZoneInfo

import msgspec

from kestrel.market.orders import Side
from kestrel.engine.ledger import (
    Cancelled,
    Disarmed,
    Filled,
    LedgerEvent,
    OrderPlaced,
    OrderRejected,
    PositionChanged,
)

NS_PER_S = 1_000_000_000
ROLE_REASON = {"stop": "STOP", "target": "TARGET", "trail": "TRAIL", "flat": "FLAT", "entry": "reversal"}
# the cause of an engine exit order, by the reason recorded at the tick it was placed
CAUSES = (("maxloss", "maxloss"), ("session close", "end of day"), ("end of data", "end of day"),
          ("session maxloss", "maxloss"), ("expired", "UNTIL"), ("ttl", "TTL"))


class FillRow(msgspec.Struct, frozen=True):
    ts: int
    id: int
    role: str
    side: Side
    qty: int | float
    price: float
    fee: float
    pos: int | float
    rpnl: float


class RoundTrip(msgspec.Struct, frozen=True):
    side: str  # long | short
    qty: int | float  # the largest absolute position held
    entry_ts: int
    entry_price: float  # average entry price at the largest position
    exit_ts: int | None
    exit_price: float | None
    pnl: float  # realized over the trip net of its fees (so far, while open or carried)
    fees: float
    exit_reason: str
    carried: bool = False  # the trip spans sessions (carried out of, or into, this one)


class NoticeRow(msgspec.Struct, frozen=True):
    """A rejected order or a disarm, with its reason. `rule` counts from 1, as the plan is
    written (the ledger's `rule` field is the rule's index from 0)."""

    ts: int
    kind: str  # rejected | disarmed
    plan: str
    reason: str
    rule: int | None = None


class Level(msgspec.Struct, frozen=True):
    """A protective order's price while it worked (stop, target, trailing stop at placement)."""

    role: str
    price: float
    start_ts: int
    end_ts: int | None


class LedgerFacts(msgspec.Struct, frozen=True):
    fills: list[FillRow]
    trips: list[RoundTrip]
    notices: list[NoticeRow]
    levels: list[Level]
    orders: int
    rejections: int
    disarms: int


def carried_in(e: object) -> tuple[int, float] | None:
    """(position, average price) when `e` is the ledger's `carry` event (a session opening with
    the previous session's position, under `end_of_day="carry"`), else None. Matched by its tag,
    so ledgers without carry read the same."""
    if getattr(getattr(type(e), "__struct_config__", None), "tag", None) != "carry":
        return None
    pos, avg = getattr(e, "pos", 0), getattr(e, "avg_price", 0.0)
    return (int(pos), float(avg)) if pos else None


def _cause(reasons: Sequence[str]) -> str:
    for r in reasons:
        low = r.lower()
        for needle, cause in CAUSES:
            if low.startswith(needle) or needle in low:
                return cause
    return reasons[0] if reasons else "exit"


def read_ledger(events: Sequence[LedgerEvent], *, carried_from: RoundTrip | None = None,
                carry_out: bool = False) -> LedgerFacts:
    """Fills, round trips, notices and levels of one session's ledger (see the module doc).
    `carried_from` is the trip the previous session of the run carried out (its last, with no
    exit); `carry_out` says the session hands a position still held at its end to the next."""
    role: dict[int, str] = {}
    placed_at: dict[int, int] = {}
    reasons_at: dict[int, list[str]] = {}
    fills: list[FillRow] = []
    trips: list[RoundTrip] = []
    notices: list[NoticeRow] = []
    levels: dict[int, Level] = {}
    orders = 0
    fees = 0.0
    pos: int | float = 0
    rpnl = 0.0
    last_fill: Filled | None = None
    start: tuple[int, float, float] | None = None  # entry ts, rpnl, fees at the trip's start
    peak_qty: int | float = 0
    peak_avg = 0.0
    carried = False  # the trip in progress came in from an earlier session
    for e in events:
        carry = carried_in(e)
        if carry is not None:  # the trip began in an earlier session
            pos, rpnl, carried = carry[0], 0.0, True
            held = carried_from
            if held is not None and held.side == ("long" if carry[0] > 0 else "short"):
                # continue it: its realized PnL and fees so far count before this session's
                start = (held.entry_ts, -(held.pnl + held.fees), fees - held.fees)
                peak_qty, peak_avg = held.qty, held.entry_price
            else:  # unknown before the open: it starts here, at its average
                start = (e.ts, 0.0, fees)
                peak_qty, peak_avg = abs(carry[0]), carry[1]
        elif isinstance(e, OrderPlaced):
            orders += 1
            role[e.id] = e.role
            placed_at[e.id] = e.tick
            if e.role in ("stop", "target", "trail") and e.price is not None:
                levels[e.id] = Level(e.role, e.price, e.ts, None)
        elif isinstance(e, (Disarmed, Cancelled)):
            reasons_at.setdefault(e.tick, []).append(e.reason)
            if isinstance(e, Disarmed):
                notices.append(NoticeRow(e.ts, "disarmed", e.plan, e.reason))
            elif e.id in levels and levels[e.id].end_ts is None:
                levels[e.id] = msgspec.structs.replace(levels[e.id], end_ts=e.ts)
        elif isinstance(e, OrderRejected):
            notices.append(NoticeRow(e.ts, "rejected", e.plan, e.reason, e.rule + 1))
        elif isinstance(e, Filled):
            last_fill = e
            fees += e.fee
            if e.id in levels and levels[e.id].end_ts is None:
                levels[e.id] = msgspec.structs.replace(levels[e.id], end_ts=e.ts)
        elif isinstance(e, PositionChanged):
            f = last_fill
            if f is not None:
                fills.append(FillRow(f.ts, f.id, role.get(f.id, "?"), f.side, f.qty, f.price, f.fee,
                                     e.pos, e.rpnl))
            if pos != 0 and (e.pos == 0 or (pos > 0) != (e.pos > 0)) and start is not None:
                r = role.get(f.id, "exit") if f is not None else "exit"
                reason = ("opposite entry" if r == "entry" and e.pos == 0 else ROLE_REASON.get(r)) or _cause(reasons_at.get(placed_at.get(f.id if f else -1, -1), []))
                trip_fees = fees - start[2]
                trips.append(RoundTrip("long" if pos > 0 else "short", peak_qty, start[0], peak_avg,
                                       e.ts, f.price if f is not None else None,
                                       round(e.rpnl - start[1] - trip_fees, 9), round(trip_fees, 9), reason,
                                       carried))
                start, carried = None, False
            if e.pos != 0 and start is None:
                start = (e.ts, e.rpnl, fees if pos != 0 else fees - (f.fee if f is not None else 0.0))
                peak_qty, peak_avg = 0, 0.0
            if e.pos != 0 and abs(e.pos) >= peak_qty:
                peak_qty, peak_avg = abs(e.pos), e.avg_price or 0.0
            pos, rpnl = e.pos, e.rpnl
            last_fill = None
    if pos != 0 and start is not None:
        trip_fees = fees - start[2]
        trips.append(RoundTrip("long" if pos > 0 else "short", peak_qty, start[0], peak_avg, None, None,
                               round(rpnl - start[1] - trip_fees, 9), round(trip_fees, 9),
                               "carried" if carry_out else "open", carried or carry_out))
    rejections = sum(1 for n in notices if n.kind == "rejected")
    return LedgerFacts(fills, trips, notices, list(levels.values()), orders, rejections,
                       len(notices) - rejections)


def carried_label(trip: RoundTrip, open_ns: int) -> str:
    """How a trip crossed a session boundary, on the day opening at `open_ns`: `in` (entered in
    an earlier session), `out` (handed to the next), `in, out`, or empty."""
    if not trip.carried:
        return ""
    return ", ".join(x for x in ("in" if trip.entry_ts < open_ns else "",
                                 "out" if trip.exit_reason == "carried" else "") if x)


def local_time(ts_ns: int, tz: str) -> str:
    """`YYYY-MM-DD HH:MM:SS ZONE` in the session's time zone (calendar date included, so a
    fill after midnight on an overnight session shows its own date)."""
    t = dt.datetime.fromtimestamp(ts_ns // NS_PER_S, dt.timezone.utc).astimezone(ZoneInfo(tz))
    return t.strftime("%Y-%m-%d %H:%M:%S %Z")


__all__ = ["FillRow", "Level", "LedgerFacts", "NoticeRow", "RoundTrip", "carried_in", "carried_label", "local_time",
           "read_ledger"]

"""The RULES kernel pane: the rules of the game, in every briefing.

An agent is graded against limits it must be told. The pane states, from the frozen snapshot
alone (a pure function of it, like every pane):

- the instrument: symbol, tick size, contract multiplier, quote currency and lot (minimum
  quantity);
- the operator's bounds (`maxpos`, `maxloss` per plan, `maxorders` per plan, `session_maxloss`),
  which a plan's RISK clause can only tighten;
- the friction of the fill model (slippage, latency, fees) and the end-of-day policy;
- since the agent's last turn: every order the broker rejected and every disarm it did not ask
  for, with the broker's reason (identical ones folded into one line with a count; the latest
  `MAX_NOTICE_LINES` lines, after a line saying how many earlier ones there were).

Format (docs/panes.md "Kernel panes"):

```
RULES SAMPLE tick 0.01 mult 1 USD lot 1
bounds maxpos 1000 maxloss 1000 maxorders 50 session_maxloss none
friction none; eod flatten
since last turn: 1 rejected, 1 disarmed
10:31:02 rejected orb rule 1: maxpos 1000: position would reach 100000
10:31:02 disarmed orb: maxloss 400 would be breached
```
Times are the session's wall clock, dated `mm-dd` before the current session's open or on another
date than the ordinal (a session that spans midnight).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.text import fmt_qty
from kestrel.market.account import Notice
from kestrel.market.terms import Friction

if TYPE_CHECKING:
    from kestrel.frame.universe import UniverseSnapshot

MAX_NOTICE_LINES = 5


def _num(x: float) -> str:
    return f"{x:g}"


def friction_text(f: Friction) -> str:
    """`none; eod flatten` or `slippage 1 tick, latency 50ms, fees 0.005/unit 1/order; eod carry`."""
    if f.frictionless:
        parts = ["none"]
    else:
        parts = []
        if f.slippage_ticks:
            parts.append(f"slippage {_num(f.slippage_ticks)} tick{'s' if f.slippage_ticks != 1 else ''}")
        if f.latency_ticks or f.latency_ms:
            lat = [f"{f.latency_ticks} tick{'s' if f.latency_ticks != 1 else ''}"] if f.latency_ticks else []
            lat += [f"{_num(f.latency_ms)}ms"] if f.latency_ms else []
            parts.append("latency " + " ".join(lat))
        if f.fee_per_unit or f.fee_per_order:
            parts.append(f"fees {_num(f.fee_per_unit)}/unit {_num(f.fee_per_order)}/order")
        parts = [", ".join(parts)]
    if f.partial_fills:
        parts.append("partial fills")
    return "; ".join(parts + [f"eod {f.end_of_day}"])


def fold(notices: tuple[Notice, ...]) -> list[tuple[Notice, int]]:
    """Identical notices (kind, plan, rule, reason) folded into the first, with their count,
    in order of first occurrence."""
    out: list[tuple[Notice, int]] = []
    where: dict[tuple[str, str, int | None, str], int] = {}
    for n in notices:
        key = (n.kind, n.plan, n.rule, n.reason)
        k = where.get(key)
        if k is None:
            where[key] = len(out)
            out.append((n, 1))
        else:
            out[k] = (out[k][0], out[k][1] + 1)
    return out


def notice_line(snap: FrozenSnapshot, n: Notice, count: int = 1) -> str:
    """`10:31:02 rejected orb rule 1 (x3): maxpos 1000: ...` or `... disarmed orb: ...`."""
    rule = f" rule {n.rule}" if n.rule is not None else ""
    times = f" (x{count})" if count > 1 else ""
    blind = snap.blind
    plan, reason = (n.plan, n.reason) if blind is None else (blind.mask_reason(n.plan), blind.mask_reason(n.reason))
    return f"{snap.stamp(n.ts)} {n.kind} {plan}{rule}{times}: {reason}"


def notices_text(snap: FrozenSnapshot) -> list[str]:
    """The `since last turn` lines of the pane: the count by kind, then the folded notices (the
    latest `MAX_NOTICE_LINES`)."""
    if not snap.notices:
        return ["since last turn: none"]
    rejected = sum(n.kind == "rejected" for n in snap.notices)
    disarmed = len(snap.notices) - rejected
    counts = [f"{k} {what}" for k, what in ((rejected, "rejected"), (disarmed, "disarmed")) if k]
    folded = fold(snap.notices)
    lines = [f"since last turn: {', '.join(counts)}"]
    if len(folded) > MAX_NOTICE_LINES:
        lines.append(f"... {len(folded) - MAX_NOTICE_LINES} earlier")
    lines += [notice_line(snap, n, c) for n, c in folded[-MAX_NOTICE_LINES:]]
    return lines


def pane_rules(snap: FrozenSnapshot) -> str:
    """The RULES kernel pane (see the module docstring)."""
    inst = snap.data.instrument
    terms = snap.terms if snap.blind is None else snap.blind.terms(snap.terms, snap.data.symbol)
    b = snap.terms.bounds
    # the blind tick is no round number: printed to 6 significant digits, not the price precision
    tick = snap.format_price(inst.tick_size) if snap.blind is None else f"{snap.blind.price(snap.data.symbol).blind_unit:.6g}"
    def money(x: float) -> str:
        return _num(x) if snap.blind is None else snap.format_money(x)

    session = "none" if b.session_maxloss is None else money(b.session_maxloss)
    lines = [
        f"RULES {snap.symbol} tick {tick} mult {_num(inst.multiplier)} {inst.currency} "
        f"lot {fmt_qty(inst.min_qty)}",
        f"bounds maxpos {b.maxpos} maxloss {money(b.maxloss)} maxorders {b.maxorders} session_maxloss {session}",
        f"friction {friction_text(terms.friction)}",
        *notices_text(snap),
    ]
    return "\n".join(lines)


def _distinct(values: list[str]) -> str:
    """`0.01` when every member has it, else the distinct values in first-seen order, `/`-joined."""
    return "/".join(dict.fromkeys(values))


def pane_universe_rules(usnap: UniverseSnapshot) -> str:
    """The RULES kernel pane of a universe: the instruments' terms (one value when all members
    share it), the per-symbol bounds, the account's bounds, the friction and the notices.

    ```
    RULES 20 symbols USD tick 0.01 mult 1 lot 1
    bounds per symbol maxpos 1000 maxloss 1000 maxorders 50; account capital 100000 gross 1x open any session_maxloss none shorts yes
    friction none; eod carry
    since last turn: none
    ```
    In blind mode the tick is per symbol (`tick per symbol`) and money bounds and fees are omitted
    but for their presence (`maxloss set`, `fees set`)."""
    members = usnap.members
    first = members[0]
    insts = [m.data.instrument for m in members]
    b = usnap.terms.bounds
    blind = usnap.blind is not None
    tick = "per symbol" if blind else _distinct([m.format_price(i.tick_size) for m, i in zip(members, insts)])
    head = (f"RULES {len(members)} symbols {_distinct([i.currency for i in insts])} tick {tick} "
            f"mult {_distinct([_num(i.multiplier) for i in insts])} lot {_distinct([fmt_qty(i.min_qty) for i in insts])}")

    def money(x: float | None) -> str:
        if x is None:
            return "none"
        return "set" if blind else _num(x)

    line = (f"bounds per symbol maxpos {b.maxpos} maxloss {money(b.maxloss)} maxorders {b.maxorders} "
            f"session_maxloss {money(b.session_maxloss)}")
    pb = usnap.bounds
    if pb is not None:
        line += (f"; account capital {money(pb.capital)} gross {_num(pb.max_gross)}x "
                 f"open {pb.max_open if pb.max_open is not None else 'any'} "
                 f"session_maxloss {money(pb.session_maxloss)} shorts {'no' if pb.no_short else 'yes'}")
    friction = usnap.terms.friction
    fees = ""
    if blind and (friction.fee_per_unit or friction.fee_per_order):  # money in no one symbol's scale
        friction = msgspec.structs.replace(friction, fee_per_unit=0.0, fee_per_order=0.0)
        fees = "; fees set"
    probe = FrozenSnapshot(first.data, usnap.cutoff_ns, usnap.time_ns, notices=usnap.notices, blind=usnap.blind)
    return "\n".join([head, line, f"friction {friction_text(friction)}{fees}", *notices_text(probe)])


__all__ = ["MAX_NOTICE_LINES", "fold", "friction_text", "notice_line", "notices_text", "pane_rules",
           "pane_universe_rules"]

"""Pane builders: pure functions `(snapshot, args) -> text`.

Each builder reads only the frozen snapshot (ticks at or before the cutoff, the session
schedule, the account, the plan) and its resolved arguments, and returns compact fixed-width
text: an upper-case header line, short labels, prices at the instrument's tick precision.
Exact formats are documented in docs/panes.md and pinned by tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from kestrel.market.bars import DAY_S, Bars, session_bars, time_bars
from kestrel.frame.snapshot import FrozenSnapshot
from kestrel.frame.text import fmt_duration, fmt_qty, table
from kestrel.market.instrument import qty_text
from kestrel.market.ticks import NS_PER_S, Ticks
from kestrel.lang import format_ast
from kestrel.lang.ast import Plan
from kestrel.lang.windows import Atr

Args = Mapping[str, int | str]
TRADING_DAYS_PER_YEAR = 252
AVG_VOLUME_SESSIONS = 20


def _int(args: Args, name: str) -> int:
    v = args[name]
    assert isinstance(v, int)
    return v


def session_vwap(t: Ticks) -> float:
    """The language's `vwap` series at the last of the session's ticks `t` (non-empty): the
    running sums of the engine's `Vwap` (`kestrel.engine.series`), Σ(last·size) / Σsize
    accumulated tick by tick in data order, Σlast / count while the volume is 0; the same
    doubles, bit for bit (tests/test_frame_panes.py). The sums are restated here because the
    frame and the engine share a layer and import neither each other; `np.cumsum` adds in
    order, as the engine does (`np.sum` would add pairwise and could differ in the last bit)."""
    volume = float(np.cumsum(t.size)[-1])
    if volume > 0.0:
        return float(np.cumsum(t.last * t.size)[-1]) / volume
    return float(np.cumsum(t.last)[-1]) / len(t)


def recent_bars(snap: FrozenSnapshot, tf_s: int, n: int) -> Bars:
    """The last `n` non-empty bars of `tf_s` up to the cutoff (the last may be forming)."""
    t = snap.ticks
    if tf_s >= DAY_S:
        opens = snap.data.session_open_ns
        if len(t) == 0 or len(opens) == 0:
            return time_bars(t.slice(0, 0), DAY_S)
        # the last n sessions opened by the cutoff (at OPEN today's is not one of them)
        k = max(0, int(np.searchsorted(opens, snap.cutoff_ns, side="right")) - n)
        sub = t.slice(t.index_at(int(opens[k]), side="left"), len(t))
        return session_bars(sub, opens, snap.data.session_offset_ns).tail(n)
    if len(t) == 0:
        return time_bars(t, tf_s)
    tf_ns = tf_s * NS_PER_S
    # walk back bucket by bucket: n binary searches, then aggregate only that slice; each
    # tick is aligned on its own session's wall clock (history may span a DST switch)
    j = len(t)
    for _ in range(n):
        if j == 0:
            break
        last = int(t.ts[j - 1])
        off = snap.offset_at(last)
        j = t.index_at((last + off) // tf_ns * tf_ns - off, side="left")
    sub = t.slice(j, len(t))
    return time_bars(sub, tf_s, snap.offsets_at(sub.ts))


def bar_forming(snap: FrozenSnapshot, start_ns: int, tf_s: int) -> bool:
    """True when the bar starting at `start_ns` is still forming at the cutoff: a time bar
    whose span reaches past it; a daily bar whose session has not closed by it."""
    if tf_s >= DAY_S:
        i = snap.data.session_index_at(start_ns)
        end = int(snap.data.session_close_ns[i]) if i >= 0 else start_ns + tf_s * NS_PER_S
        return end > snap.cutoff_ns + 1
    return start_ns + tf_s * NS_PER_S > snap.cutoff_ns + 1


def completed(snap: FrozenSnapshot, bars: Bars) -> Bars:
    """The leading bars no longer forming at the cutoff (`bar_forming`)."""
    k = 0
    while k < len(bars) and not bar_forming(snap, int(bars.start_ns[k]), bars.tf_s):
        k += 1
    return bars.slice(0, k)


def _label(snap: FrozenSnapshot, start_ns: int, local: int, with_date: bool, daily: bool) -> str:
    """`hh:mm`, `mm-dd hh:mm` or `mm-dd` of a bar starting at `start_ns` (`local`: its wall-clock
    instant, ns since the local epoch); the date is the snapshot's day label (`d<k>` blind)."""
    sod = (local // NS_PER_S) % 86_400
    hm = f"{sod // 3600:02d}:{sod // 60 % 60:02d}"
    md = snap.day_label(start_ns)
    if daily:
        return md
    return f"{md} {hm}" if with_date else hm


def pane_quote(snap: FrozenSnapshot, args: Args) -> str:
    t = snap.ticks
    if len(t) == 0:
        return f"QUOTE {snap.symbol} no ticks yet"
    i = len(t) - 1
    fp = snap.format_price
    bid, ask, last = float(t.bid[i]), float(t.ask[i]), float(t.last[i])
    lines = [
        f"QUOTE {snap.symbol} {snap.stamp(int(t.ts[i]))}",
        f"bid {fp(bid)} ask {fp(ask)} spr {fp(ask - bid)} last {fp(last)} sz {fmt_qty(snap.volume(float(t.size[i])))}"
        + (" CROSSED" if bid > ask else ""),
    ]
    st = snap.session_ticks()
    if len(st):
        day = (
            f"open {fp(float(st.last[0]))} vwap {fp(session_vwap(st))} "
            f"vol {fmt_qty(snap.volume(float(np.sum(st.size))))}"
        )
    else:
        day = "session not open"
    pt = snap.session_ticks(snap.session_index - 1)
    if len(pt):
        pc = float(pt.last[-1])
        d = last - pc
        day += f" chg {'+' if d >= 0 else '-'}{fp(abs(d))} {100.0 * d / pc:+.2f}% vs pC {fp(pc)}"
    lines.append(day)
    return "\n".join(lines)


def pane_bars(snap: FrozenSnapshot, args: Args) -> str:
    tf_s, n = _int(args, "tf"), _int(args, "n")
    bars = recent_bars(snap, tf_s, n)
    head = f"BARS {fmt_duration(tf_s)} last {len(bars)}"
    if len(bars) == 0:
        return f"{head} (no ticks)"
    fp = snap.format_price
    daily = tf_s >= DAY_S
    cur = snap.session
    with_date = False
    if not daily and cur is not None:
        with_date = snap.day_label(int(bars.start_ns[0])) != snap.day_label(cur.open_ns)
    forming = bar_forming(snap, int(bars.start_ns[-1]), tf_s)
    rows = []
    for j in range(len(bars)):
        lab = _label(snap, int(bars.start_ns[j]), int(bars.local_ns[j]), with_date, daily)
        if forming and j == len(bars) - 1:
            lab += "*"
        rows.append([
            lab, fp(float(bars.open[j])), fp(float(bars.high[j])), fp(float(bars.low[j])),
            fp(float(bars.close[j])), fmt_qty(snap.volume(float(bars.volume[j]))), fp(float(bars.vwap[j])),
        ])
    if forming:
        head += " (*forming)"
    return "\n".join([head] + table(["time", "open", "high", "low", "close", "vol", "vwap"], rows))


def pane_levels(snap: FrozenSnapshot, args: Args) -> str:
    or_s = _int(args, "or")
    fp = snap.format_price
    lines = ["LEVELS"]
    i = snap.session_index
    prior = snap.session_ticks(i - 1)
    if len(prior):
        lines.append(
            f"prior H {fp(float(np.max(prior.last)))} L {fp(float(np.min(prior.last)))} "
            f"C {fp(float(prior.last[-1]))}"
        )
    else:
        lines.append("prior none")
    if i > 0:
        on = snap.ticks.between(int(snap.data.session_close_ns[i - 1]), int(snap.data.session_open_ns[i]))
        if len(on):
            lines.append(f"onight H {fp(float(np.max(on.last)))} L {fp(float(np.min(on.last)))}")
    today = snap.session_ticks()
    if len(today) == 0:
        lines.append("today not open")
        return "\n".join(lines)
    lines.append(
        f"today O {fp(float(today.last[0]))} H {fp(float(np.max(today.last)))} "
        f"L {fp(float(np.min(today.last)))}"
    )
    open_ns = int(snap.data.session_open_ns[i])
    first = today.between(open_ns, open_ns + or_s * NS_PER_S)
    if len(first):
        tag = " forming" if snap.cutoff_ns + 1 < open_ns + or_s * NS_PER_S else ""
        lines.append(
            f"or{fmt_duration(or_s)} H {fp(float(np.max(first.last)))} "
            f"L {fp(float(np.min(first.last)))}{tag}"
        )
    lines.append(f"vwap {fp(session_vwap(today))}")
    return "\n".join(lines)


def pane_stats(snap: FrozenSnapshot, args: Args) -> str:
    tf_s, n = _int(args, "tf"), _int(args, "n")
    lines = [f"STATS {fmt_duration(tf_s)} n={n}"]
    done = completed(snap, recent_bars(snap, tf_s, n + 2)).tail(n + 1)
    fp = snap.format_price
    if len(done) >= n:
        c = done.close
        # the mean true range of the last n of these completed bars (`Atr.over_bars`, the
        # language's formula): a true range uses the previous bar's close, the first of n+1 bars
        # only giving the second its close (with just n bars, the first's is high - low); the
        # bars are the pane's wall-clock bars, which may reach into earlier sessions, where a
        # plan's atr(n, tf) counts bars from the session's open
        atr = float(Atr.over_bars(done.high, done.low, c, n)[-1])
        rets = np.diff(np.log(c))[-n:]
        cur = snap.session
        length_s = cur.length_ns // NS_PER_S if cur is not None else DAY_S
        if len(rets) >= 2:
            ann = math.sqrt(TRADING_DAYS_PER_YEAR * max(1, length_s // tf_s))
            rv = f"{100.0 * float(np.std(rets, ddof=1)) * ann:.1f}%"
        else:
            rv = "n/a"
        lines.append(f"atr {fp(atr)} rv {rv}")
    else:
        lines.append(f"atr n/a rv n/a (only {len(done)} bar{'s' if len(done) != 1 else ''})")
    i = snap.session_index
    lo_i = max(0, i - AVG_VOLUME_SESSIONS)
    if i <= 0:
        lines.append("avgvol n/a (no prior session)")
        return "\n".join(lines)
    opens, closes = snap.data.session_open_ns, snap.data.session_close_ns
    t = snap.ticks
    full = [float(np.sum(snap.session_ticks(k).size)) for k in range(lo_i, i)]
    avg = sum(full) / len(full)
    line = f"avgvol {fmt_qty(round(avg) if snap.blind is None else snap.volume(avg))} over {len(full)}d"
    elapsed = snap.cutoff_ns - int(opens[i])
    if elapsed >= 0:
        today = float(np.sum(snap.session_ticks().size))
        same = [
            float(np.sum(t.between(int(opens[k]), min(int(opens[k]) + elapsed + 1, int(closes[k]))).size))
            for k in range(lo_i, i)
        ]
        ref = sum(same) / len(same)
        line += f" relvol {today / ref:.2f}" if ref > 0 else " relvol n/a"
    lines.append(line)
    return "\n".join(lines)


def pane_tape(snap: FrozenSnapshot, args: Args) -> str:
    n = _int(args, "n")
    t = snap.ticks
    t = t.slice(max(0, len(t) - n), len(t))
    if len(t) == 0:
        return "TAPE no ticks yet"
    fp = snap.format_price
    rows = [
        [snap.stamp(int(t.ts[j])), fp(float(t.bid[j])), fp(float(t.ask[j])), fp(float(t.last[j])),
         fmt_qty(snap.volume(float(t.size[j])))]
        for j in range(len(t))
    ]
    return "\n".join([f"TAPE last {len(t)}"] + table(["time", "bid", "ask", "last", "sz"], rows))


def pane_position(snap: FrozenSnapshot, args: Args) -> str:
    a = snap.account
    fp = snap.format_price
    inst = snap.data.instrument
    lot = inst.lot_size
    if a.position == 0:
        head = "POSITION flat"
    else:
        side = "long" if a.position > 0 else "short"
        entry = f" @ {fp(a.avg_entry)}" if a.avg_entry is not None else ""
        head = f"POSITION {side} {qty_text(abs(a.position), lot)}{entry} upnl {snap.format_money(a.upnl, True)}"
    head += f" rpnl {snap.format_money(a.rpnl, True)} fees {snap.format_money(a.fees)}"
    if not a.orders:
        return f"{head}\norders none"
    rows = [
        [o.id, o.side, qty_text(o.qty, lot), o.type, fp(o.price) if o.price is not None else "-"]
        for o in a.orders
    ]
    return "\n".join([head, f"orders {len(a.orders)}"] + table(["id", "side", "qty", "type", "price"], rows))


def pane_plan(snap: FrozenSnapshot, args: Args) -> str:
    if snap.plan is None:
        return "PLAN none"
    plan = snap.plan if snap.blind is None else snap.blind.plan_to_blind(snap.plan, snap.data.symbol)
    return "INCUMBENT\n" + format_plan(plan)


def format_plan(plan: Plan) -> str:
    """The plan in canonical Kestrel form (the language's formatter)."""
    return format_ast(plan).rstrip("\n")

"""The broker kernel: orders, position and money, the broker step, rules firing and risk.

`Broker` is the typed kernel the engine's two paths drive through a small public surface:
the generated per-tick loop (`codegen`, which binds `step`, `fire` and `run_idle` once) and
the fast path (`fast`, which also calls `refresh_envelope` and `advance`). Per tick i
(ts t, touch b/a), in this order (docs/engine.md states each rule once):
1. session close: the end-of-day policy at the first tick with t >= close;
2. broker: eligible working orders, in id order: TTL cancels, else fills (see `orders`);
3. risk: pnl = rpnl - fees + upnl against the loss floor (the plan's baseline - maxloss or
   the session's -session_maxloss, the higher); reaching it disarms (or stands the session
   down), cancels every order and flattens at market;
4. plan expiry (UNTIL/FOR) disarms the plan's entries;
5. indicators take tick i (the caller's part); armed rules fire in order (`fire`); an order
   over maxorders or maxpos is rejected (the plan stays armed); orders are eligible from i+1.
Steps 1-4 are `step`, called only where the envelope `env` says something may happen (see
`envelope`); `env` is kept current after every change (`refresh_envelope`), but after a fire
whose only change is MKT orders it just calls for the next tick's step, due anyway (`fire`).

Invariants: `rule_states[j]` is rule j's `RuleState` member, never a bare int (the
generated loop tests ARMED by identity): SPENT never fires again, ARMED fires on its next
true evaluation, WAITING (fired) re-arms on its next false evaluation; every
ledger event is appended to the shared `ledger` in the order it happens; money is exact
(`book`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Final
from fractions import Fraction
from itertools import islice

import numpy as np

from kestrel.engine.book import Book, Carry
from kestrel.engine.config import EngineConfig
from kestrel.engine.envelope import IDLE_ENV, NEVER, Envelope, envelope
from kestrel.engine.ledger import (
    Armed,
    Cancelled,
    Carried,
    Disarmed,
    Filled,
    Fired,
    Ledger,
    LedgerEvent,
    Mark,
    OrderPlaced,
    OrderRejected,
    PositionChanged,
)
from kestrel.engine.money import Money, ratio
from kestrel.engine.orders import (
    BrokerOrder,
    EntrySpec,
    MKT,
    LMT,
    STP,
    OrderType,
    TickGrid,
    bracket_price,
    entry_risk,
    exact,
    slipped,
)
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast

INF: Final = math.inf
NAN: Final = float("nan")
_FLAT: Final = 1  # an action's kind in `Broker._actions` (an ORDER is its `EntrySpec`)
_CANCEL: Final = 2
# every role but "entry" (stop, target, trail, flat, exit) is protective or closing:
# cancelled when the position goes flat (`BrokerOrder.entry` is False)
_RISK_MEMO_MAX: Final = 4096  # entry risks memoized per ORDER action (see `EntrySpec.risks`)


class RuleState(IntEnum):
    """A rule's state in the per-tick loop (the generated code compares the int values)."""

    SPENT = 0  # disarmed or out of repeats: never fires again
    ARMED = 1  # fires on its next true evaluation
    WAITING = 2  # fired and has repeats left: re-arms on its next false evaluation


_Action = EntrySpec | int  # an ORDER's spec, or _FLAT / _CANCEL


def _dispatch(rule: ast.Rule) -> tuple[_Action, ...]:
    """A rule's actions as `fire` runs them."""
    return tuple(EntrySpec(a) if isinstance(a, ast.Order) else _FLAT if isinstance(a, ast.Flat)
                 else _CANCEL for a in rule.actions)


# the ledger's event types and the envelope's constants bound once (compiled, a name imported
# from a module that is not compiled is looked up in the module's dict at every use)
_Armed: Final = Armed
_Cancelled: Final = Cancelled
_Carried: Final = Carried
_Disarmed: Final = Disarmed
_Filled: Final = Filled
_Fired: Final = Fired
_Mark: Final = Mark
_OrderPlaced: Final = OrderPlaced
_OrderRejected: Final = OrderRejected
_PositionChanged: Final = PositionChanged
_NEVER: Final = NEVER
_IDLE_ENV: Final = IDLE_ENV
_WAITING: Final = RuleState.WAITING
_SPENT: Final = RuleState.SPENT
_ARMED: Final = RuleState.ARMED


class Broker:
    """The simulated broker and the armed plan's rules for one instrument over one session.

    State: the clock (`seen` ticks processed; `now_ns`, `bid`, `ask`: the last tick's time
    and touch; `closed` once the session close was processed), the account (`book`, `orders`),
    the plan's rules (`rules`, `rule_states`, `remaining` repeats, `expiry_ns`), the risk
    bounds (`maxpos`, `maxloss`, `maxorders`) and the envelope (`env`, `env_core` without
    the trailing stops, which are listed in `trails`)."""

    def __init__(self, config: EngineConfig, session: SessionSpec, grid: TickGrid, money: Money,
                 ledger: Ledger, carry: Carry | None = None) -> None:
        self.config = config
        self.grid = grid
        self.money = money
        self.ledger = ledger
        # every event goes to the ledger's list (never replaced), in the order it happens
        self._events: list[LedgerEvent] = ledger.events
        self.slip = config.slippage_ticks * grid.tick
        self.slip_ticks = exact(config.slippage_ticks)
        self._scale = money.scale  # k quanta are k / _scale (`Money.amount`)
        self._mult = config.multiplier
        self._partial = config.partial_fills
        self._lat_i = 1 + config.latency_ticks  # an order placed at tick i: eligible from i + _lat_i
        self._lat_ns = config.latency_ns
        self._no_latency = config.latency_ticks == 0 and config.latency_ns == 0
        self._fee_unit = exact(config.fee_per_unit)
        self._fee_order = exact(config.fee_per_order)
        self._has_fees = bool(self._fee_unit or self._fee_order)  # (Fraction truth is slow)
        self._has_slip = bool(self.slip_ticks)
        self.session = session
        self.open_ns = session.open_ns  # computed from the calendar: read once
        self.close_ns = session.close_ns
        # clock: ticks processed, the last tick's time and touch
        self.seen = 0
        self.now_ns = self.open_ns
        self.bid = NAN
        self.ask = NAN
        self.closed = False
        # account: the position and its money, exact (see `book`), and the working orders
        self.book = Book(money, config.multiplier)
        self.orders: dict[int, BrokerOrder] = {}
        self._next_id = 1
        self._next_oco = 1
        # the tick sizes partial fills read: `sizes[i - sizes_base]` is tick i's size
        self.sizes: Sequence[float] | np.ndarray | None = None
        self.sizes_base = 0
        # the armed plan
        self.rules: tuple[ast.Rule, ...] = ()
        self._actions: list[tuple[_Action, ...]] = []  # rule j's actions as `fire` runs them
        self.plan_name = ""
        self.armed = False
        self.rule_states: list[RuleState] = []
        self.remaining: list[int] = []
        self.expiry_ns = _NEVER
        self.maxpos = config.maxpos
        self.maxloss = config.maxloss
        self.maxorders = config.maxorders
        self.placed = 0
        self._baseline_k = 0  # the plan's pnl at arming, in money quanta
        self._maxloss_k = money.at_least(self.maxloss)
        self.loss_breached = False
        # the session's loss limit counts from the open and never resets
        self._session_floor_k = (
            -money.at_least(config.session_maxloss) if config.session_maxloss is not None
            else -(2**62))
        self.session_down = ""
        self._floor_k = max(-self._maxloss_k, self._session_floor_k)
        # the bid (long) / ask (short) past which pnl may reach the floor (see refresh_envelope)
        self._guard_b = -INF
        self._guard_a = INF
        self.env: Envelope = _IDLE_ENV
        self.env_core: Envelope = _IDLE_ENV  # env without the trailing stops (see fast.py)
        self.trails: list[BrokerOrder] = []
        if carry is not None:
            self._restore(carry)
        self.refresh_envelope(-1)

    # the account, as the generated code and callers read it
    @property
    def pos(self) -> int:
        return self.book.pos

    @property
    def avg(self) -> float:
        return self.book.avg

    @property
    def rpnl(self) -> float:
        return self.money.amount(self.book.rpnl_k)

    @property
    def fees(self) -> float:
        return self.money.amount(self.book.fees_k)

    def pnl_now(self, b: float, a: float) -> float:
        """The `pnl` series: rpnl - fees + upnl at the touch, exactly what maxloss measures."""
        return self.money.amount(self.book.pnl_k(b, a))

    def upnl_now(self, b: float, a: float) -> float:
        """The `upnl` series: unrealized PnL at the touch."""
        return self.money.amount(self.book.upnl_k(b, a)) if self.book.pos else 0.0

    def adopt(self, plan: ast.Plan, now: int) -> None:
        """Arm `plan`'s rules at time `now` (the incumbent already disarmed): its RISK bounds
        tighten the operator's, its loss floor counts from the pnl now, each rule starts
        ARMED with its repeats (SPENT when the session is closed or stood down)."""
        self.rules = plan.rules
        self._actions = [_dispatch(r) for r in plan.rules]
        self.plan_name = plan.name
        risk, cfg = plan.risk, self.config
        self.maxpos = cfg.maxpos if risk.maxpos is None else min(cfg.maxpos, risk.maxpos)
        self.maxloss = cfg.maxloss if risk.maxloss is None else min(cfg.maxloss, risk.maxloss)
        self.maxorders = cfg.maxorders if risk.maxorders is None else min(cfg.maxorders, risk.maxorders)
        self._maxloss_k = self.money.at_least(self.maxloss)
        self._baseline_k = self.book.pnl_k(self.bid, self.ask)
        self._floor_k = max(self._baseline_k - self._maxloss_k, self._session_floor_k)
        if not self.session_down and self._baseline_k <= self._session_floor_k:  # already past
            self.session_down = f"session maxloss {cfg.session_maxloss:g} breached: the session stands down"
        self.placed = 0
        self.loss_breached = bool(self.session_down)
        self.armed = not self.closed and not self.session_down
        n = len(plan.rules)
        self.rule_states = [_ARMED if self.armed else _SPENT] * n
        self.remaining = [max(1, r.repeat) for r in plan.rules]
        exp = plan.expiry
        if isinstance(exp, ast.Until):
            self.expiry_ns = self.session.wall_clock_ns(exp.at.hour, exp.at.minute, exp.at.second)
        elif isinstance(exp, ast.For):
            self.expiry_ns = now + exp.span.seconds * NS_PER_S
        else:
            self.expiry_ns = self.close_ns
        self._events.append(_Armed(self.seen, now, plan.name, n, self.expiry_ns))
        if not self.armed:
            self._events.append(_Disarmed(self.seen, now, plan.name,
                                "session closed" if self.closed else self.session_down))
        elif self.expiry_ns <= now:  # UNTIL already past: nothing may fire
            self.disarm("expired", t=now)
        self.refresh_envelope(self.seen - 1)

    # carried position -------------------------------------------------------------
    def _restore(self, carry: Carry) -> None:
        """Open the session with a carried position and its protective orders (eligible
        from the first tick), marked in the ledger by a `carry` event."""
        self.book.restore(carry.pos, Fraction(carry.cost))
        self._events.append(_Carried(0, self.open_ns, carry.pos, self.book.avg, len(carry.orders)))
        groups: dict[int | None, int | None] = {None: None}
        for c in carry.orders:
            if c.oco not in groups:
                groups[c.oco] = self._next_oco
                self._next_oco += 1
            trail = (ast.Offset(c.trail_mode, c.trail_value)  # type: ignore[arg-type]
                     if c.trail_mode is not None and c.trail_value is not None else None)
            o = self._place("carried", -1, c.role, c.side, c.qty, c.type,  # type: ignore[arg-type]
                            c.price, 0, self.open_ns, oco=groups[c.oco], trail=trail, best=c.best)
            o.el_idx, o.el_ts = 0, self.open_ns

    def advance(self, seen: int, t: int, b: float, a: float) -> None:
        """Set the clock after a stretch of ticks: `seen` ticks processed, the last one at
        time t with touch (b, a) (the loops pass the touch only to `step` and `fire`)."""
        self.seen = seen
        self.now_ns = int(t)
        self.bid = float(b)
        self.ask = float(a)

    def run_idle(self, tsl: Sequence[int], bl: Sequence[float], al: Sequence[float],
                 ll: object, sl: object, g0: int, skip: int = 0) -> None:
        """The loop without live rules: only the broker (positions, protective orders),
        from batch position `skip` on (`ll`, `sl`: unread, the generated loop's columns)."""
        i = g0 + skip - 1
        step = self.step
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = self.env
        for t, b, a in islice(zip(tsl, bl, al), skip, None):
            i += 1
            if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or i >= i_next:
                step(i, t, b, a)
                lo_b, hi_b, lo_a, hi_a, t_next, i_next = self.env

    def _mark(self, i: int, t: int, b: float, a: float) -> None:
        bk = self.book
        u = bk.upnl_k(b, a)
        r, f, sc = bk.rpnl_k, bk.fees_k, self._scale
        self._events.append(_Mark(i, t, bk.pos, ratio(r, sc), ratio(u, sc), ratio(f, sc),
                                 ratio(r + u - f, sc)))

    # broker step ---------------------------------------------------------------
    def step(self, i: int, t: int, b: float, a: float) -> None:
        """Process tick i for the broker, risk and deadlines (called only when `env` is
        breached; a no-op otherwise)."""
        if self.closed:
            return
        self.now_ns = t
        self.bid = b
        self.ask = a
        if t >= self.close_ns:
            self.close_session(i, t, b, a, "session close")
            return
        filled = False
        orders = self.orders
        if orders:
            # (orders placed meanwhile are not yet eligible; one that left is no longer live)
            for o in list(orders.values()):
                if i < o.el_idx or t < o.el_ts or not o.live:
                    continue
                if t >= o.exp:
                    self._cancel(o, i, t, "ttl")
                    continue
                # the fill price, if the order fills at this touch (see `orders`)
                kind = o.kind
                side = o.side
                if kind == MKT:
                    price = self._slipped(side, b, a)
                elif kind == LMT:
                    p = o.px
                    if side > 0:
                        if not a <= p:
                            continue
                        price = p if p < a else a
                    else:
                        if not b >= p:
                            continue
                        price = p if p > b else b
                elif kind == STP:
                    p = o.px
                    if side > 0:
                        if not a >= p:
                            continue
                    elif not b <= p:
                        continue
                    price = self._slipped(side, b, a)
                else:  # trail: check the level, then ratchet
                    lvl = o.trail_level(self.grid)
                    if side < 0:
                        if not b <= lvl:
                            if b > o.best:
                                o.best = b
                            continue
                    elif not a >= lvl:
                        if a < o.best:
                            o.best = a
                        continue
                    price = self._slipped(side, b, a)
                qty = self._fill_qty(o, i)
                if qty > 0:
                    self._fill(o, price, i, t, b, a, qty)
                    filled = True
        # pnl moves only with a fill or the touch; the exact check runs past the loss guard
        bk = self.book
        pos = bk.pos
        if (not self.loss_breached
                and (filled or (pos != 0 and (b <= self._guard_b if pos > 0 else a >= self._guard_a)))
                and bk.pnl_k(b, a) <= self._floor_k):
            self._breach_loss(i, t, b, a)
        if self.armed and t >= self.expiry_ns:
            self.disarm("expired", i, t)
        self.refresh_envelope(i)

    def _fill_qty(self, o: BrokerOrder, i: int) -> int:
        """The whole remainder, or with partial fills on at most the tick's size (whole
        units, at least 1) when the data carries sizes. Protective and closing orders are
        reduce-only: they fill at most the open position (a position already reduced by
        another order is closed, never reversed, by its stop)."""
        q = o.qty - o.filled
        if self._partial and self.sizes is not None:
            s = float(self.sizes[i - self.sizes_base])
            if s >= 1.0:
                q = min(q, int(s))
        if not o.entry:
            pos = self.book.pos
            if o.side * pos >= 0:
                return 0
            apos = pos if pos > 0 else -pos
            return q if q < apos else apos
        return q

    def _slipped(self, side: int, b: float, a: float) -> float:
        """A market-style fill price: the touch with adverse slippage, on the tick grid."""
        if not self._has_slip:
            return a if side > 0 else b
        return slipped(a if side > 0 else b, side, self.slip_ticks, self.grid)

    def _fill(self, o: BrokerOrder, price: float, i: int, t: int, b: float, a: float,
              qty: int) -> None:
        """Fill `qty` of `o` at `price`: fill, position and mark events; an entry's fill
        spawns its bracket, a protective fill shrinks or cancels its OCO siblings; going
        flat cancels the protective orders, a reversal those of the old side."""
        bk = self.book
        events = self._events
        sc = self._scale
        fee_k = (bk.charge(self._fee_unit * qty + (self._fee_order if o.filled == 0 else 0))
                 if self._has_fees else 0)
        o.filled += qty
        orders = self.orders
        if o.filled >= o.qty:
            del orders[o.id]
            o.live = False
        side = o.side
        events.append(_Filled(i, t, o.id, "buy" if side > 0 else "sell", qty, price, ratio(fee_k, sc)))
        pos = bk.pos
        opened = bk.fill(side * qty, price)  # the part of the fill that opens or adds
        now = bk.pos
        events.append(_PositionChanged(i, t, now, bk.avg if now else None,
                                      ratio(bk.rpnl_k, sc)))
        if o.entry and o.spec is not None:
            if opened:
                self._bracket(o, price, opened, i, t)
        elif o.group:
            # (shrinking emits nothing, so the cancels may follow the scan: same events)
            oco, oid = o.group, o.id
            gone: list[BrokerOrder] = []
            for sib in orders.values():
                if sib.group == oco and sib.id != oid:
                    if sib.qty - sib.filled <= qty:
                        gone.append(sib)
                    else:
                        sib.qty -= qty
            for sib in gone:
                self._cancel(sib, i, t, "oco")
        if orders:
            if now == 0:
                for other in [x for x in orders.values() if not x.entry]:
                    self._cancel(other, i, t, "flat")
            elif (pos > 0) != (now > 0) and pos != 0:
                # reversed: protective orders of the old side would now add to the position
                sign = 1 if now > 0 else -1
                for other in [x for x in orders.values() if not x.entry and x.side == sign]:
                    self._cancel(other, i, t, "reversed")
        u = bk.upnl_k(b, a)  # the mark (`_mark`, inline)
        r, f = bk.rpnl_k, bk.fees_k
        events.append(_Mark(i, t, now, ratio(r, sc), ratio(u, sc), ratio(f, sc),
                           ratio(r + u - f, sc)))

    def _bracket(self, entry: BrokerOrder, price: float, qty: int, i: int, t: int) -> None:
        spec = entry.spec
        assert spec is not None
        oco = self._next_oco
        self._next_oco += 1
        side = -entry.side
        if spec.stop is not None:
            self._place(entry.plan, entry.rule, "stop", side, qty, "stp",
                        spec.stop_at(price, self.grid), i, t, parent=entry.id, oco=oco)
        if spec.target is not None:
            self._place(entry.plan, entry.rule, "target", side, qty, "lmt",
                        spec.target_at(price, self.grid), i, t, parent=entry.id, oco=oco)
        if spec.trail is not None:
            self._place(entry.plan, entry.rule, "trail", side, qty, "trail", None, i, t,
                        parent=entry.id, oco=oco, trail=spec.trail, best=price)

    def _place(self, plan: str, rule: int, role: str, side: int, qty: int, ty: OrderType,
               price: float | None, i: int, t: int, *, parent: int | None = None,
               oco: int | None = None, ttl_ns: int | None = None,
               trail: ast.Offset | None = None, best: float = 0.0,
               spec: EntrySpec | None = None, risk: float = 0.0) -> BrokerOrder:
        oid = self._next_id
        self._next_id = oid + 1
        o = BrokerOrder(oid, plan, rule, role, side, qty, ty, price, parent, i + self._lat_i,
                        t + self._lat_ns, None if ttl_ns is None else t + ttl_ns, trail, best,
                        spec, oco, 0, risk)
        self.orders[oid] = o
        shown = o.trail_level(self.grid) if ty == "trail" else price
        self._events.append(_OrderPlaced(i, t, o.id, plan, role, "buy" if side > 0 else "sell",  # type: ignore[arg-type]
                               qty, ty, shown, parent))
        return o

    def _cancel(self, o: BrokerOrder, i: int, t: int, reason: str) -> None:
        if o.live:  # (in `orders`)
            o.live = False
            del self.orders[o.id]
            self._events.append(_Cancelled(i, t, o.id, reason))

    def disarm(self, reason: str, i: int | None = None, t: int | None = None) -> None:
        """Disarm the plan's entries (every rule SPENT) and cancel its working entry orders;
        protective orders stay. `i`/`t` default to the clock. The caller refreshes `env`."""
        i = self.seen if i is None else i
        t = self.now_ns if t is None else t
        self.armed = False
        for j in range(len(self.rule_states)):
            self.rule_states[j] = _SPENT
        for o in list(self.orders.values()):
            if o.entry:
                self._cancel(o, i, t, reason)
        self._events.append(_Disarmed(i, t, self.plan_name, reason))

    def _breach_loss(self, i: int, t: int, b: float, a: float) -> None:
        self.loss_breached = True
        reason = f"maxloss {self.maxloss:g} breached"
        if self._session_floor_k >= self._baseline_k - self._maxloss_k:
            reason = f"session maxloss {self.config.session_maxloss:g} breached"
            self.session_down = reason + ": the session stands down"
        if self.armed:
            self.disarm(reason, i, t)
        else:
            self._events.append(_Disarmed(i, t, self.plan_name, reason))
        for o in list(self.orders.values()):
            self._cancel(o, i, t, "maxloss")
        if self.pos:
            self._place(self.plan_name, -1, "exit", -1 if self.pos > 0 else 1, abs(self.pos),
                        "mkt", None, i, t)

    def close_session(self, i: int, t: int, b: float, a: float, why: str) -> None:
        """The end-of-day policy at tick i (`why`: the close or the end of data): disarm,
        flatten under `end_of_day="flatten"`, mark; the broker is idle from here on."""
        self.closed = True
        if self.armed:
            self.disarm(why, i, t)
        if self.config.end_of_day == "flatten":
            for o in list(self.orders.values()):
                self._cancel(o, i, t, why)
            if self.pos:
                side = -1 if self.pos > 0 else 1
                o = self._place(self.plan_name, -1, "exit", side, abs(self.pos), "mkt", None, i, t)
                self._fill(o, self._slipped(side, b, a), i, t, b, a, o.qty)
        self._mark(i, t, b, a)
        self.refresh_envelope(i)  # closed: idle

    # rules ---------------------------------------------------------------------
    def fire(self, j: int, i: int, t: int, b: float, a: float,
             prices: tuple[float | None, ...]) -> None:
        """Rule j fired at tick i: run its actions (orders eligible from tick i+1).

        When the fire's only change is MKT orders placed, eligible at the next tick (no
        latency), that tick's step is due anyway (a working MKT order puts `i_next` at
        i + 1) and recomputes the envelope: `env` then only says so (`_step_next`) instead
        of being recomputed here. The loops step at the same ticks either way."""
        self.now_ns, self.bid, self.ask = t, b, a
        left = self.remaining[j] - 1
        self.remaining[j] = left
        self.rule_states[j] = _WAITING if left > 0 else _SPENT
        self._events.append(_Fired(i, t, self.plan_name, j))
        first_id = self._next_id
        mkt_only = self._no_latency  # no change but MKT orders placed (so far)
        acts = self._actions[j]
        for k in range(min(len(acts), len(prices))):
            if not self.armed:
                break
            act = acts[k]
            price = prices[k]
            if isinstance(act, EntrySpec):
                if act.priced:
                    mkt_only = False
                self._entry(j, act, price, i, t)
            elif act == _FLAT:
                # a FLAT only reduces: it counts towards maxorders but is never refused
                pos = self.book.pos
                if pos:
                    for o in self.orders.values():
                        if o.role == "flat" or o.role == "exit":
                            break  # already closing
                    else:
                        self.placed += 1
                        self._place(self.plan_name, j, "flat", -1 if pos > 0 else 1,
                                    abs(pos), "mkt", None, i, t)
            else:
                mkt_only = False
                for o in list(self.orders.values()):
                    if o.entry and o.plan == self.plan_name:
                        self._cancel(o, i, t, f"rule {j} cancel")
        if mkt_only and self.armed and self._next_id > first_id:
            self._step_next(i)
        else:
            self.refresh_envelope(i)

    def _entry(self, j: int, e: EntrySpec, price: float | None, i: int, t: int) -> None:
        if e.priced and (price is None or price != price):
            self._events.append(_OrderRejected(i, t, self.plan_name, j, "price undefined at this tick"))
            return
        if self.placed >= self.maxorders:
            self._events.append(_OrderRejected(i, t, self.plan_name, j,
                                     f"maxorders {self.maxorders} reached"))
            return
        working = 0  # the working entries' and flats' signed remainder
        n_entries = 0
        committed = 0.0  # the working entries' worst-case loss, summed as `sum` does
        for o in self.orders.values():
            if o.entry:
                working += o.side * (o.qty - o.filled)
                n_entries += 1
                committed = 0 + o.risk * (o.qty - o.filled)  # sum([x]) is 0 + x
            elif o.role == "flat":
                working += o.side * (o.qty - o.filled)
        projected = self.book.pos + working + e.signed
        if abs(projected) > self.maxpos:
            self._events.append(_OrderRejected(i, t, self.plan_name, j,
                                     f"maxpos {self.maxpos}: position would reach {projected}"))
            return
        if price is not None:
            price = self.grid.snap(price)
        risk = 0.0
        if e.bounded:
            ref = price if e.priced else (self.ask if e.side > 0 else self.bid)
            assert ref is not None
            got = e.risks.get(ref)
            if got is None:
                got = entry_risk(e.act, e.side, price, self.bid, self.ask, self.slip, self.grid,
                                 self.config)
                if len(e.risks) >= _RISK_MEMO_MAX:
                    e.risks.clear()
                e.risks[ref] = got
            risk = got
        if risk:
            if n_entries > 1:  # (in id order, by `sum` itself: the same float total)
                committed = sum([o.risk * o.remaining for o in self.orders.values()
                                 if o.entry])
            m = self.money
            worst_k = round((committed + risk * e.qty) * self._scale)  # (`Money.quanta`)
            after_k = self.book.pnl_k(self.bid, self.ask) - worst_k
            if after_k <= self._floor_k:
                plan_floor = self._baseline_k - self._maxloss_k
                plan_bound = (plan_floor >= self._session_floor_k
                              or self.config.session_maxloss is None)
                bound = (f"maxloss {self.maxloss:g}" if plan_bound
                         else f"session maxloss {self.config.session_maxloss:g}")
                whose, pnl_k = ("plan's", after_k - self._baseline_k) if plan_bound else ("session's", after_k)
                self._events.append(_OrderRejected(
                    i, t, self.plan_name, j,
                    f"worst-case loss {risk * e.qty:.2f} would take the {whose} pnl to "
                    f"{m.amount(pnl_k):.2f}, past {bound}"))
                self.disarm(f"{bound} would be breached", i, t)
                return
        self.placed += 1
        self._place(self.plan_name, j, "entry", e.side, e.qty, e.type, price, i, t,
                    ttl_ns=e.ttl_ns, spec=e if e.bracket is not None else None, risk=risk)

    def rearm(self, j: int) -> None:
        """Rule j, WAITING since it fired, re-arms: its condition was false at a tick (the
        loops call this at the first such tick; the rule fires on its next true one)."""
        self.rule_states[j] = _ARMED

    def ratchet_trails(self, bids: np.ndarray, asks: np.ndarray, i: int) -> None:
        """Ratchet the trailing stops over a stretch of ticks ending at tick i in which none
        triggered (`bids`/`asks`: the stretch's touches, non-empty): a sell trail's best to
        the highest bid, a buy trail's to the lowest ask (a max or min: order-free), then
        refresh the envelope at tick i."""
        for o in self.trails:
            if o.side < 0:
                o.best = max(o.best, float(bids.max()))
            else:
                o.best = min(o.best, float(asks.min()))
        self.refresh_envelope(i)

    # envelope ------------------------------------------------------------------
    def _step_next(self, i: int) -> None:
        """Set `env` (and `env_core`) to call the broker at tick i + 1, where it recomputes
        them: only where a MKT order eligible at i + 1 makes that step due anyway (the
        envelope after tick i would have `i_next` = i + 1). `trails` and the loss guard are
        unchanged: a fire neither moves the position nor touches protective orders."""
        self.env = self.env_core = (-INF, INF, -INF, INF, _NEVER, i + 1)

    def refresh_envelope(self, i: int) -> None:
        """Recompute `env` (and `env_core`, `trails`) after tick i (see `envelope`)."""
        if self.closed:
            self.env = self.env_core = _IDLE_ENV
            self.trails = []
            return
        bk = self.book
        pos = bk.pos
        if pos and not self.loss_breached:
            # + one money quantum: upnl is rounded to the quantum before the check
            room = ratio(self._floor_k - bk.rpnl_k + bk.fees_k + 1, self._scale)
            line = bk.avg + room / (pos * self._mult)
            margin = 1e-6 * (1.0 + abs(line))
            self._guard_b = line + margin
            self._guard_a = line - margin
            loss_line: float | None = line
        else:
            loss_line = None
            self._guard_b = -INF
            self._guard_a = INF
        t_next = self.close_ns
        if self.armed and self.expiry_ns < t_next:
            t_next = self.expiry_ns
        self.env, self.env_core, self.trails = envelope(
            self.orders, i, self.now_ns, t_next, pos, loss_line, self.grid)

__all__ = ["Broker", "RuleState"]

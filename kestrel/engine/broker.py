"""The broker: orders, position and money, the broker step, rules firing and risk.

`Broker` is what both execution paths drive through a small public surface: `step`,
`fire`, `rearm` at a tick, `advance` after a stretch of ticks. Per tick (docs/engine.md states
each rule once), in this order:
1. session close: the end-of-day policy at the first tick with ts >= close;
2. broker: eligible working orders, in id order: TTL cancels, else fills (see `orders`);
3. risk: pnl = rpnl - fees + upnl against the loss floor (the plan's baseline - maxloss or
   the session's -session_maxloss, the higher); reaching it disarms (or stands the session
   down), cancels every order and flattens at market;
4. plan expiry (UNTIL/FOR) disarms the plan's entries;
5. indicators take the tick (the caller's part); armed rules fire in order (`fire`); orders are
   eligible from the next tick. An entry is checked in this order (`_entry`): its price must
   be defined, then its worst case against the loss floor (a breach disarms the plan), then
   maxorders, then maxpos, then the account's `gate` when one is attached (a portfolio's
   funding and bounds; a rejection keeps the plan armed).
Steps 1-4 are `step`, called only where the envelope `env` says something may happen (see
`envelope`); `env` is kept current after every change (`refresh_envelope`).

Invariants: `rule_states[j]` is rule j's `RuleState`: SPENT never fires again, ARMED fires on
its next true evaluation, WAITING (fired) re-arms on its next false evaluation; every ledger
event is appended to the shared `ledger` in the order it happens; money is exact (`book`).
Quantities are counted in whole lots of `config.lot_size` (the position, orders, maxpos); the
ledger, the account and the `pos` series show them in units (`units`: an `int` for a whole
lot, so a lot of 1 shows exactly the counts the broker keeps).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import IntEnum
from fractions import Fraction

from kestrel.engine.book import Book, Carry
from kestrel.engine.config import EngineConfig
from kestrel.engine.envelope import IDLE, NEVER, Envelope, envelope
from kestrel.engine.history import Tick
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
    Role,
    WorkingType,
)
from kestrel.engine.money import Money
from kestrel.engine.orders import BrokerOrder, EntrySpec, TickGrid, entry_risk, exact, slipped
from kestrel.market.instrument import exact_qty, lots_floor, lots_in, qty_text, units_of
from kestrel.market.session import SessionSpec
from kestrel.market.ticks import NS_PER_S
from kestrel.lang import ast

INF = math.inf
NAN = math.nan
_RISK_MEMO_MAX = 4096  # entry risks memoized per ORDER action (see `EntrySpec.risks`)


class RuleState(IntEnum):
    """A rule's state (false only when SPENT)."""

    SPENT = 0  # disarmed or out of repeats: never fires again
    ARMED = 1  # fires on its next true evaluation
    WAITING = 2  # fired and has repeats left: re-arms on its next false evaluation


ARMED, WAITING, SPENT = RuleState.ARMED, RuleState.WAITING, RuleState.SPENT
Action = EntrySpec | ast.Flat | ast.Cancel  # a rule's action as `fire` runs it


class Broker:
    """The simulated broker and the armed plan's rules for one instrument over one session.

    State: the clock (`seen` ticks processed; `now_ns`, `bid`, `ask`: the last tick's time
    and touch; `closed` once the session close was processed), the account (`book`, `orders`),
    the plan's rules (`rules`, `rule_states`, `remaining` repeats, `expiry_ns`), the risk
    bounds (`maxpos`, `maxloss`, `maxorders`) and the envelope (`env`)."""

    def __init__(self, config: EngineConfig, session: SessionSpec, grid: TickGrid, money: Money,
                 ledger: Ledger, carry: Carry | None = None) -> None:
        self.config = config
        self.grid = grid
        self.money = money
        self.events: list[LedgerEvent] = ledger.events  # appended to, never replaced
        self.slip = config.slippage_ticks * grid.tick
        self.slip_ticks = exact(config.slippage_ticks)
        self.latency_ticks = 1 + config.latency_ticks  # placed at tick i: eligible from i + this
        self.latency_ns = config.latency_ns
        # quantities in lots: a lot of 1 is the unit itself (every factor below exactly 1)
        self.lot = lot = exact_qty(config.lot_size)
        self.lot_size = config.lot_size
        self.unit_lot = lot == 1
        self.whole_lot = lot.denominator == 1
        self.lot_mult = config.multiplier if self.unit_lot else config.multiplier * config.lot_size
        self.fee_unit = exact(config.fee_per_unit) * lot
        self.fee_order = exact(config.fee_per_order)
        self.charges_fees = bool(config.fee_per_unit or config.fee_per_order)
        self.session = session
        self.open_ns = session.open_ns
        self.close_ns = session.close_ns
        # clock: ticks processed, the last tick's time and touch
        self.seen = 0
        self.now_ns = self.open_ns
        self.bid = NAN
        self.ask = NAN
        self.closed = False
        # account: the position and its money, exact (see `book`), and the working orders
        self.book = Book(money, config.multiplier, lot)
        self.orders: dict[int, BrokerOrder] = {}
        self.next_id = 1
        self.next_oco = 1
        # the armed plan
        self.rules: tuple[ast.Rule, ...] = ()
        self.actions: list[tuple[Action, ...]] = []  # rule j's actions as `fire` runs them
        self.plan_name = ""
        self.armed = False
        self.rule_states: list[RuleState] = []
        self.remaining: list[int] = []
        self.expiry_ns = NEVER
        self.op_maxpos = lots_floor(config.operator_maxpos, config.lot_size)  # the operator's, in lots
        self.maxpos = self.op_maxpos
        self.maxloss = config.maxloss
        self.maxorders = config.maxorders
        self.placed = 0
        self.baseline_k = 0  # the plan's pnl at arming, in money quanta
        self.maxloss_k = money.at_least(self.maxloss)
        self.loss_breached = False
        # the session's loss limit counts from the open and never resets
        self.session_floor_k = (-money.at_least(config.session_maxloss)
                                if config.session_maxloss is not None else -(2**62))
        self.session_down = ""
        self.floor_k = max(-self.maxloss_k, self.session_floor_k)
        # the bid (long) / ask (short) past which pnl may reach the floor (see refresh_envelope)
        self.guard_bid = -INF
        self.guard_ask = INF
        self.env: Envelope = IDLE
        # an account's check of an entry that passed every check above (a portfolio's funding
        # and bounds): (side, lots, reference price, tick index) -> "" or the rejection's reason
        self.gate: Callable[[int, int, float, int], str] | None = None
        # the account's equity now, for entries sized by a share of it (a portfolio's), or None
        self.equity: Callable[[int], Fraction] | None = None  # (tick index) -> equity
        if carry is not None:
            self._restore(carry)
        self.refresh_envelope(-1)

    def sizes_by_equity(self) -> bool:
        """Whether an armed rule's entry is sized by a share of equity (it reads the account)."""
        return self.armed and any(isinstance(a, EntrySpec) and a.size_kind == "equity"
                                  for acts in self.actions for a in acts)

    # the account, as the series and callers read it
    @property
    def pos(self) -> int:
        """The position, in lots."""
        return self.book.pos

    def units(self, lots: int) -> int | float:
        """`lots` in units (`kestrel.market.instrument.units_of`; the count itself for a lot of 1)."""
        if self.unit_lot:
            return lots
        return units_of(lots, self.lot_size)

    def qty_text(self, lots: int) -> str:
        """`lots` in units, as text at the lot's precision."""
        return str(lots) if self.unit_lot else qty_text(self.units(lots), self.lot_size)

    def position(self) -> float:
        """The `pos` series: the position in units."""
        return float(self.book.pos) if self.unit_lot else float(self.units(self.book.pos))

    @property
    def avg(self) -> float:
        return self.book.avg

    @property
    def rpnl(self) -> float:
        return self.money.amount(self.book.rpnl_k)

    @property
    def fees(self) -> float:
        return self.money.amount(self.book.fees_k)

    def pnl_now(self, bid: float, ask: float) -> float:
        """The `pnl` series: rpnl - fees + upnl at the touch, exactly what maxloss measures."""
        return self.money.amount(self.book.pnl_k(bid, ask))

    def upnl_now(self, bid: float, ask: float) -> float:
        """The `upnl` series: unrealized PnL at the touch."""
        return self.money.amount(self.book.upnl_k(bid, ask)) if self.book.pos else 0.0

    def adopt(self, plan: ast.Plan, now: int) -> None:
        """Arm `plan`'s rules at time `now` (the incumbent already disarmed): its RISK bounds
        tighten the operator's, its loss floor counts from the pnl now, each rule starts
        ARMED with its repeats (SPENT when the session is closed or stood down)."""
        self.rules = plan.rules
        self.actions = [tuple(EntrySpec(a, self.lot_size) if isinstance(a, ast.Order) else a
                              for a in r.actions)
                        for r in plan.rules]
        self.plan_name = plan.name
        risk, cfg = plan.risk, self.config
        self.maxpos = self.op_maxpos if risk.maxpos is None else min(self.op_maxpos,
                                                                     self._lots(risk.maxpos))
        self.maxloss = cfg.maxloss if risk.maxloss is None else min(cfg.maxloss, risk.maxloss)
        self.maxorders = cfg.maxorders if risk.maxorders is None else min(cfg.maxorders, risk.maxorders)
        self.maxloss_k = self.money.at_least(self.maxloss)
        self.baseline_k = self.book.pnl_k(self.bid, self.ask)
        self.floor_k = max(self.baseline_k - self.maxloss_k, self.session_floor_k)
        if not self.session_down and self.baseline_k <= self.session_floor_k:  # already past
            self.session_down = f"session maxloss {cfg.session_maxloss:g} breached: the session stands down"
        self.placed = 0
        self.loss_breached = bool(self.session_down)
        self.armed = not self.closed and not self.session_down
        n = len(plan.rules)
        self.rule_states = [ARMED if self.armed else SPENT] * n
        self.remaining = [max(1, r.repeat) for r in plan.rules]
        expiry = plan.expiry
        if isinstance(expiry, ast.Until):
            self.expiry_ns = self.session.wall_clock_ns(expiry.at.hour, expiry.at.minute, expiry.at.second)
        elif isinstance(expiry, ast.For):
            self.expiry_ns = now + expiry.span.seconds * NS_PER_S
        else:
            self.expiry_ns = self.close_ns
        self.events.append(Armed(self.seen, now, plan.name, n, self.expiry_ns))
        if not self.armed:
            self.events.append(Disarmed(self.seen, now, plan.name,
                                        "session closed" if self.closed else self.session_down))
        elif self.expiry_ns <= now:  # UNTIL already past: nothing may fire
            self.disarm("expired", ts=now)
        self.refresh_envelope(self.seen - 1)

    def _restore(self, carry: Carry) -> None:
        """Open the session with a carried position and its protective orders (eligible
        from the first tick), marked in the ledger by a `carry` event."""
        self.book.restore(carry.pos, Fraction(carry.cost))
        self.events.append(Carried(0, self.open_ns, self.units(carry.pos), self.book.avg,
                                   len(carry.orders)))
        groups: dict[int | None, int | None] = {None: None}
        for c in carry.orders:
            if c.oco not in groups:
                groups[c.oco] = self.next_oco
                self.next_oco += 1
            trail = (ast.Offset(c.trail_mode, c.trail_value)  # type: ignore[arg-type]
                     if c.trail_mode is not None and c.trail_value is not None else None)
            o = self._place("carried", -1, c.role, c.side, c.qty, c.type,  # type: ignore[arg-type]
                            c.price, 0, self.open_ns, oco=groups[c.oco], trail=trail, best=c.best)
            o.eligible_index, o.eligible_ts = 0, self.open_ns

    def advance(self, seen: int, ts: int, bid: float, ask: float) -> None:
        """Set the clock after a stretch of ticks: `seen` ticks processed, the last one at
        time ts with touch (bid, ask)."""
        self.seen = seen
        self.now_ns = int(ts)
        self.bid = float(bid)
        self.ask = float(ask)

    def _mark(self, index: int, ts: int, bid: float, ask: float) -> None:
        bk, scale = self.book, self.money.scale
        u, r, f = bk.upnl_k(bid, ask), bk.rpnl_k, bk.fees_k
        self.events.append(Mark(index, ts, self.units(bk.pos), r / scale, u / scale, f / scale,
                                (r + u - f) / scale))

    # broker step ---------------------------------------------------------------
    def step(self, tick: Tick) -> None:
        """Process a tick for the broker, risk and deadlines (called only where `env` is
        breached; a no-op elsewhere)."""
        if self.closed:
            return
        index, ts, bid, ask = tick.index, tick.ts, tick.bid, tick.ask
        self.now_ns, self.bid, self.ask = ts, bid, ask
        if ts >= self.close_ns:
            self.close_session(tick, "session close")
            return
        filled = False
        # (orders placed meanwhile are not yet eligible; one that left is no longer live)
        for o in list(self.orders.values()):
            if index < o.eligible_index or ts < o.eligible_ts or not o.live:
                continue
            if o.expire_ts is not None and ts >= o.expire_ts:
                self._cancel(o, index, ts, "ttl")
                continue
            price = self._fill_price(o, bid, ask)
            if price is None:
                continue
            qty = self._fill_qty(o, tick)
            if qty > 0:
                self._fill(o, price, tick, qty)
                filled = True
        # pnl moves only with a fill or the touch; the exact check runs past the loss guard
        bk = self.book
        pos = bk.pos
        if (not self.loss_breached
                and (filled or (pos != 0 and (bid <= self.guard_bid if pos > 0 else ask >= self.guard_ask)))
                and bk.pnl_k(bid, ask) <= self.floor_k):
            self._breach_loss(index, ts)
        if self.armed and ts >= self.expiry_ns:
            self.disarm("expired", index, ts)
        self.refresh_envelope(index)

    def _fill_price(self, order: BrokerOrder, bid: float, ask: float) -> float | None:
        """The price `order` fills at on this touch, or None (see `orders`); a trailing stop that
        does not trigger ratchets its best touch."""
        side = order.side
        if order.type == "mkt":
            return self._slipped(side, bid, ask)
        if order.type == "lmt":
            p = order.price
            assert p is not None
            if side > 0:
                return (p if p < ask else ask) if ask <= p else None
            return (p if p > bid else bid) if bid >= p else None
        if order.type == "stp":
            p = order.price
            assert p is not None
            return self._slipped(side, bid, ask) if (ask >= p if side > 0 else bid <= p) else None
        level = order.trail_level(self.grid)  # the level first, then the ratchet
        if side < 0:
            if not bid <= level:
                if bid > order.best:
                    order.best = bid
                return None
        elif not ask >= level:
            if ask < order.best:
                order.best = ask
            return None
        return self._slipped(side, bid, ask)

    def _fill_qty(self, order: BrokerOrder, tick: Tick) -> int:
        """The whole remainder, or with partial fills on at most the tick's size (whole
        lots, at least 1) when the data carries sizes. Protective and closing orders are
        reduce-only: they fill at most the open position (a position already reduced by
        another order is closed, never reversed, by its stop)."""
        q = order.qty - order.filled
        if self.config.partial_fills and tick.size >= self.lot_size:
            q = min(q, int(tick.size) if self.unit_lot else lots_floor(tick.size, self.lot_size))
        if not order.entry:
            pos = self.book.pos
            if order.side * pos >= 0:
                return 0
            return min(q, abs(pos))
        return q

    def _slipped(self, side: int, bid: float, ask: float) -> float:
        """A market-style fill price: the touch with adverse slippage, on the tick grid."""
        if not self.slip_ticks:
            return ask if side > 0 else bid
        return slipped(ask if side > 0 else bid, side, self.slip_ticks, self.grid)

    def _fill(self, order: BrokerOrder, price: float, tick: Tick, qty: int) -> None:
        """Fill `qty` of `order` at `price`: fill, position and mark events; an entry's fill
        spawns its bracket, a protective fill shrinks or cancels its OCO siblings; going
        flat cancels the protective orders, a reversal those of the old side."""
        index, ts = tick.index, tick.ts
        bk, scale, orders = self.book, self.money.scale, self.orders
        fee_k = 0
        if self.charges_fees:
            fee_k = bk.charge(self.fee_unit * qty + (self.fee_order if order.filled == 0 else 0))
        order.filled += qty
        if order.filled >= order.qty:
            del orders[order.id]
            order.live = False
        self.events.append(Filled(index, ts, order.id, "buy" if order.side > 0 else "sell",
                                  self.units(qty), price, fee_k / scale))
        before = bk.pos
        opened = bk.fill(order.side * qty, price)  # the part of the fill that opens or adds
        now = bk.pos
        self.events.append(PositionChanged(index, ts, self.units(now), bk.avg if now else None,
                                           bk.rpnl_k / scale))
        if order.entry and order.spec is not None:
            if opened:
                self._bracket(order, price, opened, index, ts)
        elif order.oco is not None:
            # (shrinking emits nothing, so the cancels may follow the scan: same events)
            gone: list[BrokerOrder] = []
            for sibling in orders.values():
                if sibling.oco == order.oco and sibling.id != order.id:
                    if sibling.qty - sibling.filled <= qty:
                        gone.append(sibling)
                    else:
                        sibling.qty -= qty
            for sibling in gone:
                self._cancel(sibling, index, ts, "oco")
        if now == 0:
            for other in [x for x in orders.values() if not x.entry]:
                self._cancel(other, index, ts, "flat")
        elif (before > 0) != (now > 0) and before != 0:
            # reversed: protective orders of the old side would now add to the position
            side = 1 if now > 0 else -1
            for other in [x for x in orders.values() if not x.entry and x.side == side]:
                self._cancel(other, index, ts, "reversed")
        self._mark(index, ts, tick.bid, tick.ask)

    def _bracket(self, entry: BrokerOrder, price: float, qty: int, index: int, ts: int) -> None:
        spec = entry.spec
        assert spec is not None
        oco = self.next_oco
        self.next_oco += 1
        side = -entry.side
        if spec.stop is not None:
            self._place(entry.plan, entry.rule, "stop", side, qty, "stp",
                        spec.stop_at(price, self.grid), index, ts, parent=entry.id, oco=oco)
        if spec.target is not None:
            self._place(entry.plan, entry.rule, "target", side, qty, "lmt",
                        spec.target_at(price, self.grid), index, ts, parent=entry.id, oco=oco)
        if spec.trail is not None:
            self._place(entry.plan, entry.rule, "trail", side, qty, "trail", None, index, ts,
                        parent=entry.id, oco=oco, trail=spec.trail, best=price)

    def _place(self, plan: str, rule: int, role: Role, side: int, qty: int, type: WorkingType,
               price: float | None, index: int, ts: int, *, parent: int | None = None,
               oco: int | None = None, ttl_ns: int | None = None,
               trail: ast.Offset | None = None, best: float = 0.0,
               spec: EntrySpec | None = None, risk: float = 0.0) -> BrokerOrder:
        oid = self.next_id
        self.next_id = oid + 1
        o = BrokerOrder(oid, plan, rule, role, side, qty, type, price, parent,
                        index + self.latency_ticks, ts + self.latency_ns,
                        None if ttl_ns is None else ts + ttl_ns, trail, best, spec, oco, 0, risk)
        self.orders[oid] = o
        shown = o.trail_level(self.grid) if type == "trail" else price
        self.events.append(OrderPlaced(index, ts, oid, plan, role, "buy" if side > 0 else "sell",
                                       self.units(qty), type, shown, parent))
        return o

    def _cancel(self, order: BrokerOrder, index: int, ts: int, reason: str) -> None:
        if order.live:  # (in `orders`)
            order.live = False
            del self.orders[order.id]
            self.events.append(Cancelled(index, ts, order.id, reason))

    def disarm(self, reason: str, index: int | None = None, ts: int | None = None) -> None:
        """Disarm the plan's entries (every rule SPENT) and cancel its working entry orders;
        protective orders stay. `index`/`ts` default to the clock. The caller refreshes `env`."""
        index = self.seen if index is None else index
        ts = self.now_ns if ts is None else ts
        self.armed = False
        self.rule_states[:] = [SPENT] * len(self.rule_states)
        for o in list(self.orders.values()):
            if o.entry:
                self._cancel(o, index, ts, reason)
        self.events.append(Disarmed(index, ts, self.plan_name, reason))

    def _plan_floor_binds(self) -> bool:
        """Whether the plan's loss floor is the one in force (else the session's)."""
        return (self.baseline_k - self.maxloss_k >= self.session_floor_k
                or self.config.session_maxloss is None)

    def _breach_loss(self, index: int, ts: int) -> None:
        self.loss_breached = True
        reason = f"maxloss {self.maxloss:g} breached"
        if self.session_floor_k >= self.baseline_k - self.maxloss_k:
            reason = f"session maxloss {self.config.session_maxloss:g} breached"
            self.session_down = reason + ": the session stands down"
        if self.armed:
            self.disarm(reason, index, ts)
        else:
            self.events.append(Disarmed(index, ts, self.plan_name, reason))
        for o in list(self.orders.values()):
            self._cancel(o, index, ts, "maxloss")
        if self.pos:
            self._place(self.plan_name, -1, "exit", -1 if self.pos > 0 else 1, abs(self.pos),
                        "mkt", None, index, ts)

    def liquidate(self, reason: str) -> None:
        """Stand everything down at the clock (`seen`, `now_ns`): disarm the plan, cancel every
        working order and send an `exit` market order for the position (it fills from the next
        tick); the loss check is off from here on. (An account's loss limit, reached.)"""
        index, ts = self.seen, self.now_ns
        self.loss_breached = True
        self.session_down = reason
        if self.armed:
            self.disarm(reason, index, ts)
        for o in list(self.orders.values()):
            self._cancel(o, index, ts, reason)
        if self.pos and not self.closed:
            self._place(self.plan_name, -1, "exit", -1 if self.pos > 0 else 1, abs(self.pos),
                        "mkt", None, index, ts)
        self.refresh_envelope(index - 1)

    def close_session(self, tick: Tick, why: str) -> None:
        """The end-of-day policy at `tick` (`why`: the close or the end of data): disarm,
        flatten under `end_of_day="flatten"`, mark; the broker is idle from here on."""
        index, ts = tick.index, tick.ts
        self.closed = True
        if self.armed:
            self.disarm(why, index, ts)
        if self.config.end_of_day == "flatten":
            for o in list(self.orders.values()):
                self._cancel(o, index, ts, why)
            if self.pos:
                side = -1 if self.pos > 0 else 1
                o = self._place(self.plan_name, -1, "exit", side, abs(self.pos), "mkt", None, index, ts)
                self._fill(o, self._slipped(side, tick.bid, tick.ask), tick, o.qty)
        self._mark(index, ts, tick.bid, tick.ask)
        self.refresh_envelope(index)  # closed: idle

    # rules ---------------------------------------------------------------------
    def fire(self, rule: int, tick: Tick, prices: tuple[float | None, ...]) -> None:
        """`rule` fired at `tick`: run its actions (orders eligible from the next tick), with
        `prices` its entries' prices at this tick (None for MKT)."""
        index, ts = tick.index, tick.ts
        self.now_ns, self.bid, self.ask = ts, tick.bid, tick.ask
        left = self.remaining[rule] - 1
        self.remaining[rule] = left
        self.rule_states[rule] = WAITING if left > 0 else SPENT
        self.events.append(Fired(index, ts, self.plan_name, rule))
        for action, price in zip(self.actions[rule], prices):
            if not self.armed:
                break
            if isinstance(action, EntrySpec):
                self._entry(rule, action, price, tick)
            elif isinstance(action, ast.Flat):
                # a FLAT only reduces: it counts towards maxorders but is never refused
                pos = self.book.pos
                if pos and not any(o.role in ("flat", "exit") for o in self.orders.values()):
                    self.placed += 1
                    self._place(self.plan_name, rule, "flat", -1 if pos > 0 else 1, abs(pos),
                                "mkt", None, index, ts)
            else:
                for o in list(self.orders.values()):
                    if o.entry and o.plan == self.plan_name:
                        self._cancel(o, index, ts, f"rule {rule} cancel")
        self.refresh_envelope(index)

    def _reject(self, rule: int, tick: Tick, reason: str) -> None:
        self.events.append(OrderRejected(tick.index, tick.ts, self.plan_name, rule, reason))

    def _entry(self, rule: int, entry: EntrySpec, price: float | None, tick: Tick) -> None:
        """Place an entry, or reject it: in this order, an undefined price (the worst case is
        measured from it), a worst case past the loss floor (the plan is disarmed), maxorders,
        maxpos (the plan stays armed)."""
        if entry.priced and (price is None or price != price):
            self._reject(rule, tick, "price undefined at this tick")
            return
        if price is not None:
            price = self.grid.snap(price)
        qty = entry.qty
        if entry.size_kind is not None:
            qty, why = self._sized(entry, price, tick.index)
            if why:
                self._reject(rule, tick, why)
                return
        risk = (self._risk(entry, price) if entry.size_kind is None else self._risk_of(entry, price, qty)) \
            if entry.bounded else 0.0
        if risk:
            # the working entries' worst cases, in id order (`sum` of them: the same total)
            committed = sum([o.risk * o.remaining for o in self.orders.values() if o.entry])
            worst_k = round((committed + risk * qty) * self.money.scale)  # (`Money.quanta`)
            after_k = self.book.pnl_k(self.bid, self.ask) - worst_k
            if after_k <= self.floor_k:
                plan_bound = self._plan_floor_binds()
                bound = (f"maxloss {self.maxloss:g}" if plan_bound
                         else f"session maxloss {self.config.session_maxloss:g}")
                whose, pnl_k = ("plan's", after_k - self.baseline_k) if plan_bound else ("session's", after_k)
                self._reject(rule, tick, f"worst-case loss {risk * qty:.2f} would take the "
                             f"{whose} pnl to {self.money.amount(pnl_k):.2f}, past {bound}")
                self.disarm(f"{bound} would be breached", tick.index, tick.ts)
                return
        if self.placed >= self.maxorders:
            self._reject(rule, tick, f"maxorders {self.maxorders} reached")
            return
        # the working entries' and flats' signed remainder
        working = sum(o.side * (o.qty - o.filled) for o in self.orders.values()
                      if o.entry or o.role == "flat")
        projected = self.book.pos + working + entry.side * qty
        if abs(projected) > self.maxpos:
            self._reject(rule, tick, f"maxpos {self.qty_text(self.maxpos)}: position would reach "
                         f"{self.qty_text(projected)}")
            return
        if self.gate is not None:
            ref = price if price is not None else (self.ask if entry.side > 0 else self.bid)
            why = self.gate(entry.side, qty, ref, tick.index)
            if why:
                self._reject(rule, tick, why)
                return
        self.placed += 1
        self._place(self.plan_name, rule, "entry", entry.side, qty, entry.type, price, tick.index,
                    tick.ts, ttl_ns=entry.ttl_ns, spec=entry if entry.bracket is not None else None, risk=risk)

    def _risk(self, entry: EntrySpec, price: float | None) -> float:
        """`entry_risk` of `entry` at its reference price (the limit or stop, the touch for MKT),
        memoized per action."""
        ref = price if entry.priced else (self.ask if entry.side > 0 else self.bid)
        assert ref is not None
        got = entry.risks.get(ref)
        if got is None:
            got = entry_risk(entry.act, entry.side, price, self.bid, self.ask, self.slip, self.grid,
                             self.config, entry.qty)
            if len(entry.risks) >= _RISK_MEMO_MAX:
                entry.risks.clear()
            entry.risks[ref] = got
        return got

    def _sized(self, entry: EntrySpec, price: float | None, index: int) -> tuple[int, str]:
        """The lots an entry sized by money or by a share of equity buys at its reference price
        (the limit or stop, the touch for MKT), floored to whole lots; or why it cannot be
        placed (no equity to take a share of, less than one lot)."""
        ref = price if price is not None else (self.ask if entry.side > 0 else self.bid)
        if ref != ref or not ref > 0:
            return 0, "price undefined at this tick"
        if entry.size_kind == "cash":
            money = exact(entry.size_value)
            what = f"${entry.size_value:g}"
        else:
            if self.equity is None:
                return 0, f"sizing by a share of equity ({100 * entry.size_value:g}%EQ) needs an account: trade in a portfolio session"
            money = self.equity(index) * exact(entry.size_value)
            what = f"{100 * entry.size_value:g}% of equity ({float(money):.2f})"
        one = exact(ref) * exact(self.config.multiplier) * self.lot  # the money of one lot
        lots = int(money // one) if money > 0 else 0
        if lots < 1:
            return 0, f"{what} buys less than one lot at {ref:g}"
        return lots, ""

    def _risk_of(self, entry: EntrySpec, price: float | None, lots: int) -> float:
        """`entry_risk` of a sized entry (its lots vary: not memoized)."""
        return entry_risk(entry.act, entry.side, price, self.bid, self.ask, self.slip, self.grid, self.config, lots)

    def _lots(self, qty: float) -> int:
        """A checked quantity in lots (the checker accepts only whole numbers of lots)."""
        n = lots_in(qty, self.lot_size)
        assert n is not None, f"quantity {qty} is not a whole number of lots of {self.lot_size}"
        return n

    def rearm(self, rule: int) -> None:
        """`rule`, WAITING since it fired, re-arms: its condition was false at a tick (the
        loops call this at the first such tick; the rule fires on its next true one)."""
        self.rule_states[rule] = ARMED

    # envelope ------------------------------------------------------------------
    def refresh_envelope(self, index: int) -> None:
        """Recompute `env` after tick `index` (see `envelope`)."""
        if self.closed:
            self.env = IDLE
            return
        bk = self.book
        pos = bk.pos
        loss_line: float | None = None
        self.guard_bid, self.guard_ask = -INF, INF
        if pos and not self.loss_breached:
            # + one money quantum: upnl is rounded to the quantum before the check
            room = (self.floor_k - bk.rpnl_k + bk.fees_k + 1) / self.money.scale
            loss_line = bk.avg + room / (pos * self.lot_mult)
            margin = 1e-6 * (1.0 + abs(loss_line))
            self.guard_bid, self.guard_ask = loss_line + margin, loss_line - margin
        t_next = self.close_ns
        if self.armed and self.expiry_ns < t_next:
            t_next = self.expiry_ns
        self.env = envelope(self.orders, index, self.now_ns, t_next, pos, loss_line, self.grid)


__all__ = ["ARMED", "SPENT", "WAITING", "Broker", "RuleState"]

"""The engine: arms compiled plans, runs them tick by tick against a simulated broker.

Per tick i (ts t, touch b/a), in this order (docs/engine.md states each rule once):
1. session close: the end-of-day policy at the first tick with t >= close;
2. broker: eligible working orders, in id order: TTL cancels, else fills (see `orders`);
3. risk: pnl = rpnl - fees + upnl against the loss floor (the plan's baseline - maxloss or
   the session's -session_maxloss, the higher); reaching it disarms (or stands the session
   down), cancels every order and flattens at market;
4. plan expiry (UNTIL/FOR) disarms the plan's entries;
5. indicators take tick i; armed rules fire in order; an order over maxorders or maxpos is
   rejected (the plan stays armed); orders are eligible from i+1.
Bounds are min(operator's `EngineConfig`, plan's `RISK`): a plan may only tighten them.
Steps 1-4 run only where the broker's envelope (`envelope`) says something may happen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from itertools import islice

import numpy as np

from kestrel.engine.book import Book, Carry, account_of, carry_of
from kestrel.engine.codegen import CompiledPlan, compile_plan, quant_columns, time_literals
from kestrel.engine.config import EngineConfig
from kestrel.engine.envelope import IDLE_ENV, NEVER, envelope
from kestrel.engine.fast import DEFAULT_POLICY, FastPolicy, FastStats, run_fast
from kestrel.engine.indicators import PlanError, longest_lookback
from kestrel.engine.history import TickHistory, accepted, ticks_of
from kestrel.engine.money import Money
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
from kestrel.engine.orders import (
    OrderType,
    TickGrid,
    WorkingOrder,
    bracket_price,
    entry_risk,
    exact,
    slipped,
)
from kestrel.frame.account import AccountState
from kestrel.frame.session import SessionSpec
from kestrel.frame.ticks import NS_PER_S, Ticks
from kestrel.engine.plans import checked, clock_base_ns, clock_seconds
from kestrel.lang import ast

__all__ = ["Engine", "ticks_of"]  # ticks_of lives in `history`, re-exported here

INF = math.inf
NAN = float("nan")
_SIDE = {"buy": 1, "sell": -1}
CHUNK = 1 << 16  # ticks held as Python objects at once on the reference path


class Engine:
    """A sans-IO tick engine for one instrument over one session.

    `arm(plan)` supersedes the incumbent plan; `stand_down(reason)` disarms it;
    `on_ticks(batch)` advances the clock and returns the new ledger events; `run(ticks)`
    simulates a whole batch choosing the fast path when it applies (`last_path` says which
    ran). The engine never reads the wall clock: its time is the ticks' time.
    """

    def __init__(
        self,
        config: EngineConfig,
        session: SessionSpec,
        instrument: str,
        tick_size: float,
        carry: Carry | None = None,
    ) -> None:
        if not (0 < tick_size < INF):
            raise ValueError(f"tick_size must be a finite number > 0, got {tick_size}")
        self.config = config.validated()
        self.session = session
        self.instrument = instrument
        self.tick_size = tick_size
        self.grid = TickGrid(tick_size)
        self.slip = config.slippage_ticks * tick_size
        self.slip_ticks = exact(config.slippage_ticks)
        self._fee_unit = exact(config.fee_per_unit)
        self._fee_order = exact(config.fee_per_order)
        self.money = Money.derive(tick_size, config.multiplier, config.slippage_ticks,
                                  config.fee_per_unit, config.fee_per_order, config.money_decimals)
        self.close_ns = session.close_ns
        self.open_ns = session.open_ns
        self.off_ns = session.utc_offset_ns
        self.clock_base_ns = clock_base_ns(session)
        self.ledger = Ledger()
        self.last_path = "none"
        # clock
        self.seen = 0
        self.t = session.open_ns
        self.b = NAN
        self.a = NAN
        self.closed = False
        self._history = TickHistory()
        # account: the position and its money, exact (see `book`)
        self.book = Book(self.money, config.multiplier)
        self.orders: dict[int, WorkingOrder] = {}
        self._next_id = 1
        self._next_oco = 1
        # plan
        self.compiled: CompiledPlan | None = None
        self.plan_name = ""
        self.armed = False
        self.arm_tick = 0
        self.R: list[int] = []
        self.remaining: list[int] = []
        self.S: list[object] = []
        self.expiry_ns = NEVER
        self.time_values: tuple[int, ...] = ()
        self.maxpos = config.maxpos
        self.maxloss = config.maxloss
        self.maxorders = config.maxorders
        self.placed = 0
        self._baseline_k = 0  # the plan's pnl at arming, in money quanta
        self._maxloss_k = self.money.at_least(self.maxloss)
        self.loss_breached = False
        # the session's loss limit counts from the open and never resets
        self._session_floor_k = (
            -self.money.at_least(config.session_maxloss) if config.session_maxloss is not None
            else -(2**62))
        self.session_down = ""
        self._floor_k = max(-self._maxloss_k, self._session_floor_k)
        self._loss_guard = (-INF, INF)  # bid (long) / ask (short) at which pnl may reach the floor
        self._stale = False
        self.dense = False  # the fast path found the plan firing densely: compiled loop from now on
        self.fast_policy: FastPolicy = DEFAULT_POLICY
        self.fast_stats = FastStats()  # how the last fast-path batch was spent
        self._sizes: Sequence[float] | np.ndarray | None = None
        self._sizes_base = 0
        self.env: tuple[float, float, float, float, int, int] = IDLE_ENV
        self.env_core = IDLE_ENV  # env without the trailing stops (see fast.py)
        self.trails: list[WorkingOrder] = []
        self.carried_in = carry
        if carry is not None:
            self._restore(carry)
        self._envelope(-1)

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

    # ------------------------------------------------------------------ public API
    def arm(self, plan: ast.Plan, at_ns: int | None = None) -> list[LedgerEvent]:
        """Arm `plan`, superseding the incumbent: its entries are disarmed and its working
        entry orders cancelled; the position and its protective orders carry over. `at_ns`
        is the instant the plan takes effect (a session's ordinal, after the last tick seen;
        default: the last tick's time): its events carry it and `FOR` counts from it.

        Only a checked plan is armed: `plan` is re-validated against the AST types (a Struct
        built in code skips msgspec's validation) and run through the language checker; a
        plan that fails either is refused (`PlanError`). The plan's RISK bounds only tighten
        the operator's (`EngineConfig`): each effective bound is the smaller of the two."""
        plan = checked(plan)
        if plan.instrument is not None and plan.instrument != self.instrument:
            raise PlanError(
                f"plan {plan.name!r} trades {plan.instrument} but this engine runs "
                f"{self.instrument}; arm it on an engine for that instrument"
            )
        if not plan.rules:
            raise PlanError(f"plan {plan.name!r} has no rules")
        need, call = longest_lookback(plan)
        span = self.session.length_ns
        if call is not None and need > span:
            raise PlanError(
                f"plan {plan.name!r}: {call.name}(...) looks back {need // (60 * NS_PER_S)}m, "
                f"longer than the session ({span // (60 * NS_PER_S)}m); the engine evaluates one "
                "session, so it could never be defined: use a window within the session"
            )
        mark = len(self.ledger)
        compiled = compile_plan(plan)
        now = self.t if at_ns is None else max(self.t, int(at_ns))
        if self.armed:
            self._disarm(f"superseded by {plan.name}", t=now)
        self.compiled = compiled
        self.plan_name = plan.name
        self.arm_tick = self.seen
        self.time_values = tuple(
            clock_seconds(self.session, tod) for tod in time_literals(compiled))
        self._rewarm()
        risk, cfg = plan.risk, self.config
        self.maxpos = cfg.maxpos if risk.maxpos is None else min(cfg.maxpos, risk.maxpos)
        self.maxloss = cfg.maxloss if risk.maxloss is None else min(cfg.maxloss, risk.maxloss)
        self.maxorders = cfg.maxorders if risk.maxorders is None else min(cfg.maxorders, risk.maxorders)
        self._maxloss_k = self.money.at_least(self.maxloss)
        self._baseline_k = self.book.pnl_k(self.b, self.a)
        self._floor_k = max(self._baseline_k - self._maxloss_k, self._session_floor_k)
        if not self.session_down and self._baseline_k <= self._session_floor_k:  # already past
            self.session_down = f"session maxloss {cfg.session_maxloss:g} breached: the session stands down"
        self.placed = 0
        self.dense = False
        self.loss_breached = bool(self.session_down)
        self.armed = not self.closed and not self.session_down
        n = len(plan.rules)
        self.R = [1 if self.armed else 0] * n
        self.remaining = [max(1, r.repeat) for r in plan.rules]
        exp = plan.expiry
        if isinstance(exp, ast.Until):
            self.expiry_ns = self.session.wall_clock_ns(exp.at.hour, exp.at.minute, exp.at.second)
        elif isinstance(exp, ast.For):
            self.expiry_ns = now + exp.span.seconds * NS_PER_S
        else:
            self.expiry_ns = self.close_ns
        self._emit(Armed(self.seen, now, plan.name, n, self.expiry_ns))
        if not self.armed:
            self._emit(Disarmed(self.seen, now, plan.name,
                                "session closed" if self.closed else self.session_down))
        elif self.expiry_ns <= now:  # UNTIL already past: nothing may fire
            self._disarm("expired", t=now)
        self._envelope(self.seen - 1)
        return self.ledger.events[mark:]

    def stand_down(self, reason: str = "stand down", at_ns: int | None = None) -> list[LedgerEvent]:
        """Disarm entries and cancel working entry orders; protective exits stay live. `at_ns`
        as in `arm`."""
        mark = len(self.ledger)
        if self.armed:
            self._disarm(reason, t=self.t if at_ns is None else max(self.t, int(at_ns)))
            self._envelope(self.seen - 1)
        return self.ledger.events[mark:]

    def on_ticks(self, batch: Ticks) -> list[LedgerEvent]:
        """Advance over `batch` on the reference path; return the events it produced."""
        mark = len(self.ledger)
        n = len(batch)
        if n == 0:
            return []
        self._accept(batch)
        if self._stale:
            self._rewarm()
        g0 = self.seen
        self._history.append(batch)
        self._live_span(batch, g0)
        self.last_path = "reference"
        return self.ledger.events[mark:]

    def _live_span(self, batch: Ticks, g0: int) -> None:
        """Run the reference loop over `batch` (ticks g0.. of the session, already in the
        history) in chunks of `CHUNK` ticks: only one chunk is ever held as Python objects
        (a chunk boundary is a batch boundary, which never changes the ledger)."""
        n = len(batch)
        compiled = self.compiled
        for lo in range(0, n, CHUNK):
            part = batch.slice(lo, min(n, lo + CHUNK))
            tsl, bl, al = part.ts.tolist(), part.bid.tolist(), part.ask.tolist()
            reads = compiled.reads if compiled is not None else ()
            ll = part.last.tolist() if "l" in reads else part.last
            sl = part.size.tolist() if "s" in reads else part.size
            self._sizes, self._sizes_base = part.size, g0 + lo
            if compiled is not None:
                q = quant_columns(compiled.quant, part.bid, part.ask, part.last, self.grid.units)
                compiled.live(self, tsl, bl, al, ll, sl, q, g0 + lo, self.S, self.R, self.consts())
            else:
                self._live_bare(tsl, bl, al, ll, sl, g0 + lo)
            self._advance(g0 + lo + len(tsl), tsl[-1], bl[-1], al[-1])

    def finish(self) -> list[LedgerEvent]:
        """End of data: apply the end-of-day policy at the last tick if the session close
        was not reached, and emit a final mark."""
        mark = len(self.ledger)
        if not self.closed and self.seen:
            self._session_close(self.seen - 1, self.t, self.b, self.a, "end of data")
        return self.ledger.events[mark:]

    def run(self, ticks: Ticks, *, path: str = "auto", final: bool = True) -> Ledger:
        """Simulate `ticks`: `path` is auto | reference | fast. The fast path applies when
        a plan is armed and its conditions read no per-tick account state (upnl, pnl; pos
        and rpnl are fine outside CROSSES) and its entry prices none at all."""
        if path not in ("auto", "reference", "fast"):
            raise ValueError(f"path must be auto, reference or fast, got {path!r}")
        blocker = self._fast_blocker()
        if path == "fast" and blocker:
            raise PlanError("the fast path does not apply: " + blocker)
        if path != "reference" and not blocker:
            self.fast_stats = run_fast(self, ticks, self.fast_policy)
            self.last_path = "fast"
        else:
            self.on_ticks(ticks)
        if final:
            self.finish()
        return self.ledger

    def fast_applies(self) -> bool:
        return self._fast_blocker() == ""

    def account(self) -> AccountState:
        """Position, average entry, PnL and working orders as of the last tick."""
        return account_of(self.book, self.orders.values(), self.grid, self.b, self.a)

    def carry_out(self) -> Carry | None:
        """What the next session takes over under `end_of_day="carry"`: the position, its
        exact cost basis and its live protective orders (entries never carry); None when
        flat."""
        return carry_of(self.book, self.orders.values())

    # ------------------------------------------------------------------ internals
    def _restore(self, carry: Carry) -> None:
        """Open the session with a carried position and its protective orders (eligible
        from the first tick), marked in the ledger by a `carry` event."""
        self.book.restore(carry.pos, Fraction(carry.cost))
        self._emit(Carried(0, self.open_ns, carry.pos, self.book.avg, len(carry.orders)))
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

    def _fast_blocker(self) -> str:
        if self.compiled is None or not self.armed:
            return "no armed plan"
        return self.compiled.fast_blocker

    def _accept(self, batch: Ticks) -> None:
        accepted(batch, self.t if self.seen else None)

    def hand_over(self, batch: Ticks, start: int, i: int) -> None:
        """Run ticks i.. of `batch` (session ticks start.., already in the history) on the
        compiled loop, from the fast path's state after tick i-1 (which is the reference's):
        the indicators are re-warmed up to tick i, then the loop streams in chunks."""
        if i > start:
            self._advance(i, int(batch.ts[i - start - 1]), float(batch.bid[i - start - 1]),
                          float(batch.ask[i - start - 1]))
        if i > start or self._stale:
            self._rewarm(i)
        if i - start < len(batch):
            self._live_span(batch.slice(i - start, len(batch)), i)

    def _rewarm(self, upto: int | None = None) -> None:
        """Rebuild the plan's indicator state from the session's history (its first `upto`
        ticks, default all): indicators over every tick, crosses over the ticks since the
        plan was armed."""
        assert self.compiled is not None
        self.S = self.compiled.init_state()
        h = self._history.view()
        n = len(h) if upto is None else upto
        cut = min(max(self.arm_tick, 0), n)
        quant = self.compiled.quant
        for lo, hi, fn in ((0, cut, self.compiled.warm), (cut, n, self.compiled.warmx)):
            for c in range(lo, hi, CHUNK):  # one chunk at a time as Python objects
                part = h.slice(c, min(hi, c + CHUNK))
                reads = self.compiled.reads
                fn(part.ts.tolist(), part.bid.tolist(), part.ask.tolist(),
                   part.last.tolist() if "l" in reads else part.last,
                   part.size.tolist() if "s" in reads else part.size, quant_columns(quant, part.bid, part.ask, part.last,
                                                     self.grid.units), self.S, self.consts())
        self._stale = False

    def _advance(self, seen: int, t: int, b: float, a: float) -> None:
        self.seen = seen
        self.t = int(t)
        self.b = float(b)
        self.a = float(a)

    def _live_bare(self, tsl: Sequence[int], bl: Sequence[float], al: Sequence[float],
                   ll: object, sl: object, g0: int, skip: int = 0) -> None:
        """The loop without live rules: only the broker (positions, protective orders),
        from batch position `skip` on (`ll`, `sl`: unread, the generated loop's columns)."""
        i = g0 + skip - 1
        lo_b, hi_b, lo_a, hi_a, t_next, i_next = self.env
        for t, b, a in islice(zip(tsl, bl, al), skip, None):
            i += 1
            if b <= lo_b or b >= hi_b or a <= lo_a or a >= hi_a or t >= t_next or i >= i_next:
                self._step(i, t, b, a)
                lo_b, hi_b, lo_a, hi_a, t_next, i_next = self.env

    def _emit(self, e: LedgerEvent) -> None:
        self.ledger.events.append(e)

    def consts(self) -> tuple[int, int, float, tuple[int, ...]]:
        """The session constants the generated code reads: the clock base (`time` counts
        seconds from it), the open, the price units of the exact indicators and the plan's
        times of day as `time` values."""
        return (self.clock_base_ns, self.open_ns, self.grid.units, self.time_values)

    def _mark(self, i: int, t: int, b: float, a: float) -> None:
        bk = self.book
        u = bk.upnl_k(b, a)
        m = self.money
        self._emit(Mark(i, t, bk.pos, m.amount(bk.rpnl_k), m.amount(u), m.amount(bk.fees_k),
                        m.amount(bk.rpnl_k + u - bk.fees_k)))

    # broker step ---------------------------------------------------------------
    def _step(self, i: int, t: int, b: float, a: float) -> None:
        """Process tick i for the broker, risk and deadlines (called only when `env` is
        breached; a no-op otherwise)."""
        if self.closed:
            return
        self.t, self.b, self.a = t, b, a
        if t >= self.close_ns:
            self._session_close(i, t, b, a, "session close")
            return
        filled = False
        for o in list(self.orders.values()):
            if o.id not in self.orders or i < o.el_idx or t < o.el_ts:
                continue
            if o.expire_ts is not None and t >= o.expire_ts:
                self._cancel(o, i, t, "ttl")
                continue
            price = self._fill_price(o, b, a)
            if price is not None:
                qty = self._fill_qty(o, i)
                if qty > 0:
                    self._fill(o, price, i, t, b, a, qty)
                    filled = True
        # pnl moves only with a fill or the touch; the exact check runs past the loss guard
        near = b <= self._loss_guard[0] if self.book.pos > 0 else a >= self._loss_guard[1]
        if (not self.loss_breached and (filled or (self.book.pos and near))
                and self.book.pnl_k(b, a) <= self._floor_k):
            self._breach_loss(i, t, b, a)
        if self.armed and t >= self.expiry_ns:
            self._disarm("expired", i, t)
        self._envelope(i)

    def _fill_qty(self, o: WorkingOrder, i: int) -> int:
        """The whole remainder, or with partial fills on at most the tick's size (whole
        units, at least 1) when the data carries sizes. Protective and closing orders are
        reduce-only: they fill at most the open position (a position already reduced by
        another order is closed, never reversed, by its stop)."""
        q = o.remaining
        if self.config.partial_fills and self._sizes is not None:
            s = float(self._sizes[i - self._sizes_base])
            if s >= 1.0:
                q = min(q, int(s))
        if o.role != "entry":
            q = min(q, abs(self.pos)) if o.side * self.pos < 0 else 0
        return q

    def _fill_price(self, o: WorkingOrder, b: float, a: float) -> float | None:
        ty = o.type
        if ty == "mkt":
            return self._slipped(o.side, b, a)
        p = o.price
        assert p is not None or ty == "trail"
        if ty == "lmt":
            assert p is not None
            if o.side > 0:
                return (p if p < a else a) if a <= p else None
            return (p if p > b else b) if b >= p else None
        if ty == "stp":
            assert p is not None
            if o.side > 0:
                return self._slipped(1, b, a) if a >= p else None
            return self._slipped(-1, b, a) if b <= p else None
        # trail: check the level, then ratchet
        lvl = o.trail_level(self.grid)
        if o.side < 0:
            if b <= lvl:
                return self._slipped(-1, b, a)
            if b > o.best:
                o.best = b
        else:
            if a >= lvl:
                return self._slipped(1, b, a)
            if a < o.best:
                o.best = a
        return None

    def _slipped(self, side: int, b: float, a: float) -> float:
        """A market-style fill price: the touch with adverse slippage, on the tick grid."""
        return slipped(a if side > 0 else b, side, self.slip_ticks, self.grid)

    def _fill(self, o: WorkingOrder, price: float, i: int, t: int, b: float, a: float,
              qty: int) -> None:
        m = self.money
        bk = self.book
        fee_k = (bk.charge(self._fee_unit * qty + (self._fee_order if o.filled == 0 else 0))
                 if self._fee_unit or self._fee_order else 0)
        o.filled += qty
        if o.filled >= o.qty:
            del self.orders[o.id]
        self._emit(Filled(i, t, o.id, "buy" if o.side > 0 else "sell", qty, price, m.amount(fee_k)))
        pos = bk.pos
        opened = bk.fill(o.side * qty, price)  # the part of the fill that opens or adds
        self._emit(PositionChanged(i, t, bk.pos, bk.avg if bk.pos else None, self.rpnl))
        if o.role == "entry" and o.bracket is not None:
            if opened:
                self._bracket(o, price, opened, i, t)
        elif o.oco is not None:
            for sib in list(self.orders.values()):
                if sib.oco == o.oco and sib.id != o.id:
                    if sib.remaining <= qty:
                        self._cancel(sib, i, t, "oco")
                    else:
                        sib.qty -= qty
        if self.pos == 0:
            for other in list(self.orders.values()):
                if other.role in ("stop", "target", "trail", "flat", "exit"):
                    self._cancel(other, i, t, "flat")
        elif (pos > 0) != (self.pos > 0) and pos != 0:
            # reversed: protective orders of the old side would now add to the position
            sign = 1 if self.pos > 0 else -1
            for other in list(self.orders.values()):
                if other.role in ("stop", "target", "trail", "flat", "exit") and other.side == sign:
                    self._cancel(other, i, t, "reversed")
        self._mark(i, t, b, a)

    def _bracket(self, entry: WorkingOrder, price: float, qty: int, i: int, t: int) -> None:
        spec = entry.bracket
        assert spec is not None
        oco = self._next_oco
        self._next_oco += 1
        side = -entry.side
        if spec.stop is not None:
            self._place(entry.plan, entry.rule, "stop", side, qty, "stp",
                        bracket_price(price, spec.stop, self.grid), i, t, parent=entry.id, oco=oco)
        if spec.target is not None:
            self._place(entry.plan, entry.rule, "target", side, qty, "lmt",
                        bracket_price(price, spec.target, self.grid), i, t, parent=entry.id, oco=oco)
        if spec.trail is not None:
            self._place(entry.plan, entry.rule, "trail", side, qty, "trail", None, i, t,
                        parent=entry.id, oco=oco, trail=spec.trail, best=price)

    def _place(self, plan: str, rule: int, role: str, side: int, qty: int, ty: OrderType,
               price: float | None, i: int, t: int, *, parent: int | None = None,
               oco: int | None = None, ttl_ns: int | None = None,
               trail: ast.Offset | None = None, best: float = 0.0,
               bracket: ast.Order | None = None) -> WorkingOrder:
        cfg = self.config
        o = WorkingOrder(
            self._next_id, plan, rule, role, side, qty, ty, price, parent,
            i + 1 + cfg.latency_ticks, t + cfg.latency_ns,
            None if ttl_ns is None else t + ttl_ns, trail, best, bracket, oco,
        )
        self._next_id += 1
        self.orders[o.id] = o
        shown = o.trail_level(self.grid) if ty == "trail" else price
        self._emit(OrderPlaced(i, t, o.id, plan, role, "buy" if side > 0 else "sell",  # type: ignore[arg-type]
                               qty, ty, shown, parent))
        return o

    def _cancel(self, o: WorkingOrder, i: int, t: int, reason: str) -> None:
        if self.orders.pop(o.id, None) is not None:
            self._emit(Cancelled(i, t, o.id, reason))

    def _disarm(self, reason: str, i: int | None = None, t: int | None = None) -> None:
        i = self.seen if i is None else i
        t = self.t if t is None else t
        self.armed = False
        for j in range(len(self.R)):
            self.R[j] = 0
        for o in list(self.orders.values()):
            if o.role == "entry":
                self._cancel(o, i, t, reason)
        self._emit(Disarmed(i, t, self.plan_name, reason))

    def _breach_loss(self, i: int, t: int, b: float, a: float) -> None:
        self.loss_breached = True
        reason = f"maxloss {self.maxloss:g} breached"
        if self._session_floor_k >= self._baseline_k - self._maxloss_k:
            reason = f"session maxloss {self.config.session_maxloss:g} breached"
            self.session_down = reason + ": the session stands down"
        if self.armed:
            self._disarm(reason, i, t)
        else:
            self._emit(Disarmed(i, t, self.plan_name, reason))
        for o in list(self.orders.values()):
            self._cancel(o, i, t, "maxloss")
        if self.pos:
            self._place(self.plan_name, -1, "exit", -1 if self.pos > 0 else 1, abs(self.pos),
                        "mkt", None, i, t)

    def _session_close(self, i: int, t: int, b: float, a: float, why: str) -> None:
        self.closed = True
        if self.armed:
            self._disarm(why, i, t)
        if self.config.end_of_day == "flatten":
            for o in list(self.orders.values()):
                self._cancel(o, i, t, why)
            if self.pos:
                side = -1 if self.pos > 0 else 1
                o = self._place(self.plan_name, -1, "exit", side, abs(self.pos), "mkt", None, i, t)
                self._fill(o, self._slipped(side, b, a), i, t, b, a, o.qty)
        self._mark(i, t, b, a)
        self._envelope(i)  # closed: idle

    # rules ---------------------------------------------------------------------
    def _fire(self, j: int, i: int, t: int, b: float, a: float,
              prices: tuple[float | None, ...]) -> None:
        """Rule j fired at tick i: run its actions (orders eligible from tick i+1)."""
        assert self.compiled is not None
        self.t, self.b, self.a = t, b, a
        rule = self.compiled.plan.rules[j]
        self.remaining[j] -= 1
        self.R[j] = 2 if self.remaining[j] > 0 else 0
        self._emit(Fired(i, t, self.plan_name, j))
        for act, price in zip(rule.actions, prices):
            if not self.armed:
                break
            if isinstance(act, ast.Order):
                self._entry(j, act, price, i, t)
            elif isinstance(act, ast.Flat):
                # a FLAT only reduces: it counts towards maxorders but is never refused
                closing = any(o.role in ("flat", "exit") for o in self.orders.values())
                if self.pos and not closing:
                    self.placed += 1
                    self._place(self.plan_name, j, "flat", -1 if self.pos > 0 else 1,
                                abs(self.pos), "mkt", None, i, t)
            else:
                for o in list(self.orders.values()):
                    if o.role == "entry" and o.plan == self.plan_name:
                        self._cancel(o, i, t, f"rule {j} cancel")
        self._envelope(i)

    def _entry(self, j: int, act: ast.Order, price: float | None, i: int, t: int) -> None:
        side = _SIDE[act.side]
        if act.order_type != "mkt" and (price is None or price != price):
            self._emit(OrderRejected(i, t, self.plan_name, j, "price undefined at this tick"))
            return
        if self.placed >= self.maxorders:
            self._emit(OrderRejected(i, t, self.plan_name, j,
                                     f"maxorders {self.maxorders} reached"))
            return
        working = sum(o.side * o.remaining for o in self.orders.values()
                      if o.role in ("entry", "flat"))
        projected = self.pos + working + side * act.qty
        if abs(projected) > self.maxpos:
            self._emit(OrderRejected(i, t, self.plan_name, j,
                                     f"maxpos {self.maxpos}: position would reach {projected}"))
            return
        if price is not None:
            price = self.grid.snap(price)
        risk = entry_risk(act, side, price, self.b, self.a, self.slip, self.grid, self.config)
        if risk:
            committed = sum(o.risk * o.remaining for o in self.orders.values() if o.role == "entry")
            m = self.money
            after_k = self.book.pnl_k(self.b, self.a) - m.quanta(committed + risk * act.qty)
            if after_k <= self._floor_k:
                plan_floor = self._baseline_k - self._maxloss_k
                plan_bound = plan_floor >= self._session_floor_k
                bound = (f"maxloss {self.maxloss:g}" if plan_bound
                         else f"session maxloss {self.config.session_maxloss:g}")
                whose, pnl_k = ("plan's", after_k - self._baseline_k) if plan_bound else ("session's", after_k)
                self._emit(OrderRejected(
                    i, t, self.plan_name, j,
                    f"worst-case loss {risk * act.qty:.2f} would take the {whose} pnl to "
                    f"{m.amount(pnl_k):.2f}, past {bound}"))
                self._disarm(f"{bound} would be breached", i, t)
                return
        self.placed += 1
        bracket = act if (act.stop or act.target or act.trail) else None
        ttl = None if act.ttl is None else act.ttl.seconds * NS_PER_S
        o = self._place(self.plan_name, j, "entry", side, act.qty, act.order_type, price, i, t,
                        ttl_ns=ttl, bracket=bracket)
        o.risk = risk

    # envelope ------------------------------------------------------------------
    def _envelope(self, i: int) -> None:
        """Recompute `env` (and `env_core`, `trails`) after tick i (see `envelope`)."""
        if self.closed:
            self.env = self.env_core = IDLE_ENV
            self.trails = []
            return
        bk = self.book
        loss_line = None
        self._loss_guard = (-INF, INF)
        if bk.pos and not self.loss_breached:
            # + one money quantum: upnl is rounded to the quantum before the check
            room = (self._floor_k - bk.rpnl_k + bk.fees_k + 1) / self.money.scale
            loss_line = bk.avg + room / (bk.pos * self.config.multiplier)
            margin = 1e-6 * (1.0 + abs(loss_line))
            self._loss_guard = (loss_line + margin, loss_line - margin)
        t_next = min(self.close_ns, self.expiry_ns) if self.armed else self.close_ns
        self.env, self.env_core, self.trails = envelope(
            self.orders.values(), i, self.t, t_next, bk.pos, loss_line, self.grid)
